//! What the servers counted, across shards: a shard's prefix-cache and
//! speculative-decoding blocks are deltas of the server's own counters over
//! the shard's window, so they hold every shard's requests that reached that
//! server then. Shards of one server each read (nearly) the whole load;
//! shards of different servers each read their own. PURE.

use crate::result::{PrefixCacheStats, SpecDecodeStats};

/// The merged result's note on these blocks.
pub const NOTE: &str = "prefix_cache and spec_decode are the server's counters over a shard's window: shards of one server each saw its whole load, so the widest window's reading is kept (not a sum); shards of different servers add up";

/// One shard's reading of a server-side block.
#[derive(Debug, Clone, Copy)]
pub struct Reading<'a, T> {
    /// The server the shard targeted (`kneecap.target`, a sweep's `target`).
    pub target: &'a str,
    /// The shard's measurement window, s.
    pub window_s: f64,
    pub block: Option<&'a T>,
}

/// A block read from a server, which knows how to add itself up.
pub trait ServerBlock: Clone {
    /// The client's own per-request counts (they add whatever the targets).
    fn per_request(&self) -> bool;
    /// Two disjoint sets of requests added up; `None` when not defined.
    fn add(&self, other: &Self) -> Option<Self>;
}

impl ServerBlock for PrefixCacheStats {
    fn per_request(&self) -> bool {
        PrefixCacheStats::per_request(self)
    }
    fn add(&self, other: &Self) -> Option<Self> {
        PrefixCacheStats::add(self, other)
    }
}

impl ServerBlock for SpecDecodeStats {
    fn per_request(&self) -> bool {
        false
    }
    fn add(&self, other: &Self) -> Option<Self> {
        SpecDecodeStats::add(self, other)
    }
}

/// The merged block: the sum when every shard counted its own requests
/// (per-request counts, or one server per shard); the widest window's
/// reading when all shards shared one server (each delta already holds the
/// others' requests: adding would count them N times); nothing when some
/// shard has none or some, not all, shards share a server.
pub fn merged<T: ServerBlock>(readings: &[Reading<'_, T>]) -> Option<T> {
    let blocks: Vec<&T> = readings.iter().map(|r| r.block).collect::<Option<_>>()?;
    let (first, rest) = blocks.split_first()?;
    if blocks.iter().all(|b| b.per_request()) || all_distinct(readings) {
        return rest.iter().try_fold((*first).clone(), |sum, b| sum.add(b));
    }
    if readings.iter().all(|r| r.target == readings[0].target) {
        return readings
            .iter()
            .max_by(|a, b| a.window_s.total_cmp(&b.window_s))
            .and_then(|r| r.block.cloned());
    }
    None
}

fn all_distinct<T>(readings: &[Reading<'_, T>]) -> bool {
    let mut targets: Vec<&str> = readings.iter().map(|r| r.target).collect();
    targets.sort_unstable();
    targets.windows(2).all(|w| w[0] != w[1])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vllm(q: u64, h: u64) -> PrefixCacheStats {
        PrefixCacheStats::new("vllm", q, h)
    }

    fn reading<'a>(
        target: &'a str,
        window_s: f64,
        b: &'a PrefixCacheStats,
    ) -> Reading<'a, PrefixCacheStats> {
        Reading {
            target,
            window_s,
            block: Some(b),
        }
    }

    #[test]
    fn shards_of_one_server_take_the_widest_window_and_never_add() {
        let (a, b, c) = (vllm(2291, 0), vllm(2531, 100), vllm(2444, 0));
        let got = merged(&[
            reading("http://gpu:8000", 2.0, &a),
            reading("http://gpu:8000", 2.2, &b),
            reading("http://gpu:8000", 2.1, &c),
        ]);
        assert_eq!(got, Some(b));
    }

    #[test]
    fn shards_of_different_servers_add_their_counts() {
        let (a, b) = (vllm(1000, 250), vllm(3000, 750));
        let got = merged(&[
            reading("http://a:8000", 2.0, &a),
            reading("http://b:8000", 2.0, &b),
        ]);
        assert_eq!(got, Some(vllm(4000, 1000)));
        assert_eq!(got.unwrap().hit_rate, Some(0.25));
    }

    #[test]
    fn per_request_counts_add_even_on_one_server() {
        let a = PrefixCacheStats::new("llama.cpp", 100, 40);
        let b = PrefixCacheStats::new("llama.cpp", 300, 60);
        let got = merged(&[reading("http://x", 1.0, &a), reading("http://x", 1.0, &b)]);
        assert_eq!(got, Some(PrefixCacheStats::new("llama.cpp", 400, 100)));
    }

    #[test]
    fn a_missing_block_or_a_partly_shared_server_gives_nothing() {
        let a = vllm(10, 1);
        let none = Reading {
            target: "http://a",
            window_s: 1.0,
            block: None,
        };
        assert_eq!(merged(&[reading("http://a", 1.0, &a), none]), None);
        let three = [
            reading("http://a", 1.0, &a),
            reading("http://a", 1.0, &a),
            reading("http://b", 1.0, &a),
        ];
        assert_eq!(merged(&three), None);
        assert_eq!(merged::<PrefixCacheStats>(&[]), None);
    }

    #[test]
    fn sglang_gauges_of_two_servers_cannot_be_added() {
        let (a, b) = (
            SpecDecodeStats::from_sglang(2.5, 0.6),
            SpecDecodeStats::from_sglang(2.0, 0.5),
        );
        let r = |t, window_s, s| Reading {
            target: t,
            window_s,
            block: Some(s),
        };
        assert_eq!(
            merged(&[r("http://a", 1.0, &a), r("http://b", 1.0, &b)]),
            None
        );
        // One server: its gauges at the end of the widest window.
        assert_eq!(
            merged(&[r("http://a", 1.1, &a), r("http://a", 1.0, &b)]),
            Some(a.clone())
        );
    }
}

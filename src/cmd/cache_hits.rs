//! The server's prefix-cache hit rate over a run or a sweep step: vLLM's
//! `prefix_cache_{queries,hits}` counters scraped before and after, or, for
//! servers without them (llama.cpp), the per-request `timings.cache_n` and
//! `prompt_n` of the final chunk.

use crate::client::scrape::{PrefixCacheCounters, Scraper};
use crate::metrics::record::RequestRecord;
use crate::result::PrefixCacheStats;

/// A `/metrics` scraper for `base_url` (the counters' "before" side).
pub(crate) struct CacheProbe {
    scraper: Option<Scraper>,
    before: Option<PrefixCacheCounters>,
}

impl CacheProbe {
    /// Reads the counters now (nothing when the server has none).
    pub(crate) async fn start(base_url: &str) -> Self {
        let scraper = Scraper::new(&format!("{base_url}/metrics")).ok();
        let before = counters(scraper.as_ref()).await;
        Self { scraper, before }
    }

    /// The hit rate since [`CacheProbe::start`]; falls back to the records'
    /// llama.cpp timings.
    pub(crate) async fn finish(&self, records: &[RequestRecord]) -> Option<PrefixCacheStats> {
        since(self.scraper.as_ref(), self.before, records).await
    }
}

/// The server's prefix-cache counters now (`None`: no scraper, or no counters).
pub(crate) async fn counters(scraper: Option<&Scraper>) -> Option<PrefixCacheCounters> {
    match scraper {
        Some(s) => s.prefix_cache().await,
        None => None,
    }
}

/// The hit rate since the counters read `before` (a sweep step's start):
/// their delta when the server has them before and now, else the records'
/// llama.cpp timings.
pub(crate) async fn since(
    scraper: Option<&Scraper>,
    before: Option<PrefixCacheCounters>,
    records: &[RequestRecord],
) -> Option<PrefixCacheStats> {
    if let Some(before) = before {
        if let Some(after) = counters(scraper).await {
            return Some(delta(before, after));
        }
    }
    from_timings(records)
}

/// vLLM's counters: tokens queried and hit between two readings (a counter
/// that went backwards, a restarted server, counts as zero).
fn delta(before: PrefixCacheCounters, after: PrefixCacheCounters) -> PrefixCacheStats {
    let queried = (after.queries - before.queries).max(0.0).round() as u64;
    let hit = (after.hits - before.hits).max(0.0).round() as u64;
    PrefixCacheStats::new("vllm", queried, hit)
}

/// llama.cpp: hits are `cache_n`, queries `cache_n + prompt_n`, summed over
/// the requests that report both.
pub(crate) fn from_timings(records: &[RequestRecord]) -> Option<PrefixCacheStats> {
    let (mut queried, mut hit, mut any) = (0u64, 0u64, false);
    for t in records.iter().filter_map(|r| r.server_timings.as_deref()) {
        if let (Some(c), Some(p)) = (t.cache_n, t.prompt_n) {
            any = true;
            hit += u64::from(c);
            queried += u64::from(c) + u64::from(p);
        }
    }
    any.then(|| PrefixCacheStats::new("llama.cpp", queried, hit))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::record::Timings;

    #[test]
    fn llama_timings_give_cached_over_cached_plus_processed() {
        let rec = |cache_n, prompt_n| RequestRecord {
            server_timings: Some(Box::new(Timings {
                cache_n,
                prompt_n,
                ..Timings::default()
            })),
            ..RequestRecord::default()
        };
        let recs = vec![
            rec(Some(90), Some(10)),
            rec(Some(0), Some(100)),
            rec(None, Some(5)),
        ];
        let s = from_timings(&recs).unwrap();
        assert_eq!((s.hit_tokens, s.queried_tokens), (90, 200));
        assert_eq!(s.hit_rate, Some(0.45));
        assert_eq!(from_timings(&[RequestRecord::default()]), None);
    }

    #[test]
    fn counters_give_their_delta_and_a_reset_counts_as_zero() {
        let c = |queries, hits| PrefixCacheCounters { queries, hits };
        let s = delta(c(1000.0, 400.0), c(1600.0, 850.0));
        assert_eq!((s.queried_tokens, s.hit_tokens), (600, 450));
        assert_eq!(s.hit_rate, Some(0.75));
        assert_eq!(s.source, "vllm");
        let reset = delta(c(1000.0, 400.0), c(10.0, 5.0));
        assert_eq!((reset.queried_tokens, reset.hit_rate), (0, None));
    }
}

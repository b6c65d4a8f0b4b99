//! The server's speculative decoding over a run or a sweep step, as
//! `vllm bench serve` measures it: vLLM's `vllm:spec_decode_*` counters read
//! at the start and at the end, and their delta turned into the acceptance
//! rate, mean acceptance length and per-position acceptance; or SGLang's
//! gauges read at the end (it exports no counters).

use crate::client::scrape::Scraper;
use crate::client::scrape_spec::{SpecCounters, SpecReading};
use crate::result::SpecDecodeStats;

/// A `/metrics` scraper for `base_url` with the counters' "before" side.
pub(crate) struct SpecProbe {
    scraper: Option<Scraper>,
    before: Option<SpecReading>,
}

impl SpecProbe {
    /// Reads the counters now (nothing when the server has none).
    pub(crate) async fn start(base_url: &str) -> Self {
        let scraper = Scraper::new(&format!("{base_url}/metrics")).ok();
        let before = reading(scraper.as_ref()).await;
        Self { scraper, before }
    }

    /// Speculative decoding since [`SpecProbe::start`].
    pub(crate) async fn finish(&self) -> Option<SpecDecodeStats> {
        since(self.scraper.as_ref(), self.before.as_ref()).await
    }
}

/// The server's speculative-decoding numbers now (`None`: no scraper, or none).
pub(crate) async fn reading(scraper: Option<&Scraper>) -> Option<SpecReading> {
    scraper?.spec_decode().await
}

/// Speculative decoding since `before` was read (a sweep step's start).
pub(crate) async fn since(
    scraper: Option<&Scraper>,
    before: Option<&SpecReading>,
) -> Option<SpecDecodeStats> {
    stats(before, &reading(scraper).await?)
}

/// vLLM's numbers from the counters read before and after (both needed, as
/// in `vllm bench serve`; a counter that went backwards, a restarted
/// server, counts as zero), or SGLang's gauges after.
fn stats(before: Option<&SpecReading>, after: &SpecReading) -> Option<SpecDecodeStats> {
    match (before, after) {
        (_, SpecReading::Sglang(g)) => {
            Some(SpecDecodeStats::from_sglang(g.accept_length, g.accept_rate))
        }
        (Some(SpecReading::Vllm(b)), SpecReading::Vllm(a)) => delta(b, a),
        _ => None,
    }
}

fn delta(b: &SpecCounters, a: &SpecCounters) -> Option<SpecDecodeStats> {
    let d = |after: f64, before: f64| (after - before).max(0.0).round() as u64;
    // Every position either reading has; one the end lacks did not move.
    let mut positions: Vec<u32> = b.accepted_per_pos.keys().copied().collect();
    positions.extend(a.accepted_per_pos.keys());
    positions.sort_unstable();
    positions.dedup();
    let per_pos: Vec<u64> = positions
        .iter()
        .map(|p| {
            let before = b.accepted_per_pos.get(p).copied().unwrap_or(0.0);
            d(a.accepted_per_pos.get(p).copied().unwrap_or(before), before)
        })
        .collect();
    SpecDecodeStats::from_counts(
        d(a.drafts, b.drafts),
        d(a.draft_tokens, b.draft_tokens),
        d(a.accepted_tokens, b.accepted_tokens),
        &per_pos,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::scrape_spec::SglangSpec;

    fn counters(drafts: f64, draft_tokens: f64, accepted: f64, per: &[(u32, f64)]) -> SpecReading {
        SpecReading::Vllm(SpecCounters {
            drafts,
            draft_tokens,
            accepted_tokens: accepted,
            accepted_per_pos: per.iter().copied().collect(),
        })
    }

    #[test]
    fn the_counters_delta_gives_vllms_numbers() {
        let before = counters(100.0, 300.0, 150.0, &[(0, 80.0), (1, 50.0), (2, 20.0)]);
        let after = counters(300.0, 900.0, 550.0, &[(0, 260.0), (1, 190.0), (2, 100.0)]);
        let s = stats(Some(&before), &after).unwrap();
        assert_eq!(
            (s.num_drafts, s.draft_tokens, s.accepted_tokens),
            (Some(200), Some(600), Some(400))
        );
        assert_eq!(s.acceptance_rate, 400.0 / 600.0 * 100.0);
        assert_eq!(s.acceptance_length, 3.0);
        assert_eq!(s.per_position_acceptance_rates, [0.9, 0.7, 0.4]);
        assert_eq!(s.source, "vllm");
    }

    #[test]
    fn no_drafts_no_before_or_a_reset_give_nothing() {
        let same = counters(100.0, 300.0, 150.0, &[]);
        assert_eq!(stats(Some(&same), &same), None, "nothing drafted");
        assert_eq!(stats(None, &same), None, "no reading at the start");
        let reset = counters(10.0, 30.0, 15.0, &[]);
        assert_eq!(stats(Some(&same), &reset), None);
    }

    #[test]
    fn sglang_gauges_are_read_at_the_end() {
        let g = SpecReading::Sglang(SglangSpec {
            accept_length: 2.4,
            accept_rate: 0.35,
        });
        let s = stats(None, &g).unwrap();
        assert_eq!((s.source.as_str(), s.acceptance_length), ("sglang", 2.4));
        assert!((s.acceptance_rate - 35.0).abs() < 1e-12);
        assert_eq!(s.num_drafts, None);
    }
}

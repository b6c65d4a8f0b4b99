//! The host's stalls ([`crate::sim::stalls`]) from the decode levels'
//! token gaps. Pure.
//!
//! In a closed-loop level of short prompts every stream's token gap is one
//! decode step, and the steps of a level cost about the same: the median
//! gap is the step's cost. A gap over [`STALL_OVER`] times the median is a
//! step the host stalled (`observe::StallGaps`): the model's rate is the
//! stalled gaps per second of the levels' steps at their medians, its mean
//! length their excess over the median. The same stall shows in every
//! stream's gap, so the count's uncertainty is taken over stalls (stalled
//! gaps over the streams), not gaps. Stalls shorter than a step's cost go
//! unseen, so on a slow step the rate reads low; their mean share of the
//! time, `rate × mean`, is what the mean gap carries beyond the median.

use super::decode::{kv_bound, plain_levels, MIN_GAPS};
use super::observe::{DecodeLevel, STALL_OVER};
use super::profile::Estimate;

/// The fewest stalls (stalled gaps over the streams) a rate is fitted on.
pub const MIN_STALLS: f64 = 3.0;

/// The stalls the decode levels show.
#[derive(Debug, Clone, PartialEq)]
pub struct StallFit {
    /// Stalls per second of engine time.
    pub rate_per_s: Estimate,
    /// Their mean length, ms.
    pub mean_ms: Estimate,
    /// `rate × mean` at the central values: the share of the levels' time
    /// the stalls took beyond the steps' cost (0 when not identified).
    pub share: f64,
}

/// Fits the stalls of the plain (short-prompt) levels that did not fill the
/// KV cache.
pub fn fit(levels: &[DecodeLevel]) -> StallFit {
    let usable: Vec<&DecodeLevel> = plain_levels(levels)
        .into_iter()
        .filter(|l| l.gaps >= MIN_GAPS && !kv_bound(l) && l.median_gap_s > 0.0)
        .collect();
    let gaps: usize = usable.iter().map(|l| l.gaps).sum();
    let stalled: usize = usable.iter().map(|l| l.stalls.gaps).sum();
    let excess: f64 = usable.iter().map(|l| l.stalls.excess_s).sum();
    let busy: f64 = usable.iter().map(|l| l.gaps as f64 * l.median_gap_s).sum();
    let stalls: f64 = usable
        .iter()
        .map(|l| l.stalls.gaps as f64 / l.streaming.max(1.0))
        .sum();
    let how = format!(
        "token gaps over {STALL_OVER}x their level's median (a stalled step): {stalled} of {gaps} gaps in {} closed-loop levels of short prompts, about {stalls:.0} stalls seen by every stream",
        usable.len()
    );
    if stalls < MIN_STALLS || busy <= 0.0 {
        let why = format!(
            "{stalls:.0} stalls seen (fewer than {MIN_STALLS}): the probes cannot tell a rare stall from none; held at 0"
        );
        let zero = |what: &str| {
            Estimate::fitted(0.0, 0.0, 0.0, format!("{what}: {how}")).not_identifiable(0.0, &why)
        };
        return StallFit {
            rate_per_s: zero("stalls per second of engine time"),
            mean_ms: zero("the stalled gaps' mean excess over their median"),
            share: 0.0,
        };
    }
    let rate = stalled as f64 / busy;
    let mean_s = excess / stalled as f64;
    // Poisson counts over the stalls; a Gamma(2) length's sd is mean/√2.
    let rate_sigma = rate / stalls.sqrt();
    let mean_sigma = mean_s / (2.0 * stalls).sqrt();
    StallFit {
        rate_per_s: Estimate::fitted(
            rate,
            rate_sigma,
            0.0,
            format!("stalled gaps per second of the levels' steps at their median: {how}"),
        ),
        mean_ms: Estimate::fitted(
            mean_s * 1e3,
            mean_sigma * 1e3,
            0.0,
            format!("the stalled gaps' mean excess over their level's median: {how}"),
        ),
        share: rate * mean_s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::twin::observe::StallGaps;
    use crate::twin::profile::Status;
    use crate::twin::testing::vllm_levels;

    #[test]
    fn levels_without_stalls_hold_it_at_zero() {
        let f = fit(&vllm_levels());
        assert_eq!(f.share, 0.0);
        assert_eq!(f.rate_per_s.value, 0.0);
        assert_eq!(f.rate_per_s.status, Status::NotIdentifiable);
        assert_eq!(f.mean_ms.status, Status::NotIdentifiable);
    }

    #[test]
    fn stalled_gaps_give_the_rate_and_mean() {
        // Each level: 500 gaps at its median; one stream, so each stalled
        // gap is one stall. 10 stalled gaps of 0.1 s excess per level.
        let mut ls = vllm_levels();
        for l in &mut ls {
            l.streaming = 1.0;
            l.stalls = StallGaps {
                gaps: 10,
                excess_s: 1.0,
            };
        }
        let usable: Vec<&DecodeLevel> = plain_levels(&ls).into_iter().collect();
        let busy: f64 = usable.iter().map(|l| 500.0 * l.median_gap_s).sum();
        let n = usable.len() as f64;
        let f = fit(&ls);
        assert_eq!(f.rate_per_s.status, Status::Measured);
        assert!((f.rate_per_s.value - 10.0 * n / busy).abs() < 1e-9);
        assert!((f.mean_ms.value - 100.0).abs() < 1e-9);
        assert!((f.share - n * 1.0 / busy).abs() < 1e-9);
        // 10·n stalls: the rate's σ is rate/√(10n).
        let rel = f.rate_per_s.uncertainty / f.rate_per_s.value;
        assert!((rel - 1.0 / (10.0 * n).sqrt()).abs() < 1e-9, "{rel}");
    }

    #[test]
    fn a_stall_seen_by_every_stream_counts_once() {
        let mut ls = vllm_levels();
        for l in &mut ls {
            // 2 stalls a level, each in all of the level's streams' gaps.
            l.stalls = StallGaps {
                gaps: 2 * l.streaming.round() as usize,
                excess_s: 0.1 * 2.0 * l.streaming,
            };
        }
        let f = fit(&ls);
        let levels = plain_levels(&ls).len() as f64;
        let rel = f.rate_per_s.uncertainty / f.rate_per_s.value;
        assert!(
            (rel - 1.0 / (2.0 * levels).sqrt()).abs() < 0.02,
            "{rel} for {levels} levels"
        );
    }
}

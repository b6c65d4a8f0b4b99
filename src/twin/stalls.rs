//! The host's stalls ([`crate::sim::stalls`]) from the decode levels'
//! token gaps. Pure.
//!
//! In a closed-loop level of short prompts every stream's token gap is one
//! decode step, and the steps of a level cost about the same: the median
//! gap is the step's cost. A gap over [`STALL_OVER`] times the median is a
//! step the host stalled (`observe::StallGaps`). The same stall shows in
//! every stream's gap, so a level's stalls and steps are its stalled gaps
//! and gaps over its streams: the model's rate is the stalls per second of
//! the levels' steps at their medians, its mean length the stalled gaps'
//! excess over the median. A stall shorter than its step's median goes
//! unseen, so only the levels whose steps are under half a stall count
//! (vLLM on CPU: steps of 35–50 ms up to 16 sequences, 150 ms at 128, and
//! stalls of 100–150 ms); on them a Gamma(2) stall of twice the step's
//! median still hides 10–15% of the time, and the rate reads that low.

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
    /// The median step, seconds, at or under which a level shows its own
    /// stalls (`visible_below`; 0 when they are held at 0): the decode line
    /// takes such a level's stalled gaps out as they fell, the others'
    /// mean gaps less `share`.
    pub visible_below_s: f64,
}

/// Fits the stalls of the plain (short-prompt) levels that did not fill the
/// KV cache, counted in engine time (a level's gaps over its streams are
/// its steps) on the levels whose steps are short enough for a stall to
/// show (`visible_below`).
pub fn fit(levels: &[DecodeLevel]) -> StallFit {
    let usable: Vec<&DecodeLevel> = plain_levels(levels)
        .into_iter()
        .filter(|l| l.gaps >= MIN_GAPS && !kv_bound(l) && l.median_gap_s > 0.0)
        .collect();
    let visible_below_s = visible_below(&usable);
    let kept: Vec<&DecodeLevel> = usable
        .iter()
        .copied()
        .filter(|l| l.median_gap_s <= visible_below_s)
        .collect();
    let per_step = |l: &&DecodeLevel, x: f64| x / l.streaming.max(1.0);
    let stalled: usize = kept.iter().map(|l| l.stalls.gaps).sum();
    let gaps: usize = kept.iter().map(|l| l.gaps).sum();
    let excess: f64 = kept.iter().map(|l| l.stalls.excess_s).sum();
    let busy: f64 = kept
        .iter()
        .map(|l| per_step(l, l.gaps as f64) * l.median_gap_s)
        .sum();
    let stalls: f64 = kept.iter().map(|l| per_step(l, l.stalls.gaps as f64)).sum();
    let how = format!(
        "token gaps over {STALL_OVER}x their level's median (a stalled step): {stalled} of {gaps} gaps in {} of {} closed-loop levels of short prompts (those whose steps are under half a stall), about {stalls:.0} stalls seen by every stream",
        kept.len(),
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
            visible_below_s: 0.0,
        };
    }
    let rate = stalls / busy;
    let mean_s = excess / stalled as f64;
    // Poisson counts over the stalls; a Gamma(2) length's sd is mean/√2.
    let rate_sigma = rate / stalls.sqrt();
    let mean_sigma = mean_s / (2.0 * stalls).sqrt();
    StallFit {
        rate_per_s: Estimate::fitted(
            rate,
            rate_sigma,
            0.0,
            format!("stalls per second of the levels' steps at their median: {how}"),
        ),
        mean_ms: Estimate::fitted(
            mean_s * 1e3,
            mean_sigma * 1e3,
            0.0,
            format!("the stalled gaps' mean excess over their level's median: {how}"),
        ),
        share: rate * mean_s,
        visible_below_s,
    }
}

/// The median step at or under which a level shows its stalls: half the
/// stalls' mean excess (over every level), since a stall shorter than its
/// step's median is not counted, so on long steps most go unseen and would
/// read as a low rate. Every level's (infinite) when none is that short or
/// no stall was seen.
fn visible_below(levels: &[&DecodeLevel]) -> f64 {
    let stalled: usize = levels.iter().map(|l| l.stalls.gaps).sum();
    let excess: f64 = levels.iter().map(|l| l.stalls.excess_s).sum();
    if stalled == 0 {
        return f64::INFINITY;
    }
    let half = 0.5 * excess / stalled as f64;
    if levels.iter().any(|l| l.median_gap_s <= half) {
        half
    } else {
        f64::INFINITY
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
        // No stall to take out of any level, and none left in.
        assert_eq!(f.visible_below_s, 0.0);
        assert_eq!(f.rate_per_s.value, 0.0);
        assert_eq!(f.rate_per_s.status, Status::NotIdentifiable);
        assert_eq!(f.mean_ms.status, Status::NotIdentifiable);
    }

    #[test]
    fn stalled_gaps_give_the_rate_and_mean() {
        // Each level: 500 gaps at its median (30 ms up to 16 sequences, 48
        // at 32, 96, 192 and 196 ms above); one stream, so each stalled gap
        // is one stall: 10 a level of 0.1 s excess. Steps under 50 ms (half
        // a stall) count: 500 × (5 × 0.030 + 0.048) = 99 s of steps with 60
        // stalls; the three slow levels, where a 100-ms stall hides, do not
        // dilute the rate.
        let mut ls = vllm_levels();
        for l in &mut ls {
            l.streaming = 1.0;
            l.stalls = StallGaps {
                gaps: 10,
                excess_s: 1.0,
            };
        }
        let f = fit(&ls);
        assert_eq!(f.rate_per_s.status, Status::Measured);
        assert!(
            (f.rate_per_s.value - 60.0 / 99.0).abs() < 1e-9,
            "{:?}",
            f.rate_per_s
        );
        assert!((f.mean_ms.value - 100.0).abs() < 1e-9);
        assert!((f.share - 6.0 / 99.0).abs() < 1e-9);
        // The decode line takes a level's own stalls out under half a stall.
        assert!((f.visible_below_s - 0.05).abs() < 1e-12, "{f:?}");
        // 60 stalls: the rate's σ is rate/√60.
        let rel = f.rate_per_s.uncertainty / f.rate_per_s.value;
        assert!((rel - 1.0 / 60f64.sqrt()).abs() < 1e-9, "{rel}");
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
        // 2 stalls in each of the 6 levels of steps under 50 ms.
        let rel = f.rate_per_s.uncertainty / f.rate_per_s.value;
        assert!((rel - 1.0 / 12f64.sqrt()).abs() < 0.01, "{rel}");
    }
}

//! Decode cost and the batch limit from closed-loop levels of short prompts
//! and long outputs at rising concurrency. Pure.
//!
//! **Decode cost.** A decode step with `D` sequences lasts
//! `step_base + per_decode_seq × D`, lengthened by `α × c_p` per prompt
//! token computed beside it (`sim::params`). Over a level's steady window
//! of length `W`, the steps tile the window and the arriving prompts add
//! `α × c_p × P` in all (`P` prompt tokens), so the mean token gap `ḡ`
//! gives the plain decode step `ḡ × (1 − α × c_p × P / W)`. Fitting that
//! against the decoding batch `D` (the requests streaming, as the client
//! sees them) gives the base (intercept) and the cost per sequence (slope).
//! The correction's own uncertainty (from `α` and `c_p`) is carried over by
//! fitting again with it at its upper end. The line comes from the levels
//! of the doubling climb only ([`plain_levels`]). Levels of long prompts
//! give the cost of the decoders' context ([`super::extra_costs`], fitted on
//! the climb's median gaps, which a stall does not move, and on the long
//! levels' clean gaps: those during which no prompt waited for its first
//! token, so no prefill shared the step); the line is fitted to the steps
//! less that cost.
//!
//! **Batch limit.** While the server has free slots, every stream decodes:
//! the batch follows the concurrency. Once it is full, extra streams wait
//! and the batch stops rising: the limit is the running gauge's peak
//! (`vllm:num_requests_running`, `llamacpp:requests_processing`) when
//! scraped, else the streaming count (a request holds its slot for its
//! prefill step too: `D × n_out / (n_out − 1)`). A level that preempted or
//! filled the KV cache is limited by the KV cache, not by the slot count,
//! and then gives only a lower bound.

use super::extra_costs::{self, Point, CONTEXT_SPREAD};
use super::line::{self, Line};
use super::observe::DecodeLevel;
use super::profile::Estimate;
use crate::metrics::stats::mean;

/// Relative uncertainty (1σ) of a fitted cost below which more probing
/// adds little: the profile stops repeating its levels there.
pub const PRECISE: f64 = 0.02;
/// Fewest gaps a level needs to be fitted.
pub const MIN_GAPS: usize = 20;
/// A level is saturated when it offered this many times the slots it got.
const SATURATED: f64 = 1.15;

/// The decode fit.
#[derive(Debug, Clone, PartialEq)]
pub struct DecodeFit {
    pub step_base_ms: Estimate,
    pub decode_seq_us: Estimate,
    pub max_num_seqs: Estimate,
    /// The cost of each context token of a decoder, µs a step.
    pub context_token_us: Estimate,
    /// The cost of each request admitted, ms.
    pub request_ms: Estimate,
    /// What the levels left unexplained.
    pub warnings: Vec<String>,
}

/// The slots a level held: the running gauge's peak, else the streaming
/// count corrected for the prefill step.
pub fn slots(l: &DecodeLevel) -> f64 {
    let out = f64::from(l.output_tokens.max(2));
    l.running_max
        .unwrap_or_else(|| l.streaming * out / (out - 1.0))
}

/// Whether the level offered clearly more streams than got a slot.
pub fn saturated(l: &DecodeLevel) -> bool {
    l.concurrency as f64 > SATURATED * slots(l)
}

/// The levels of the doubling climb (short prompts): those whose mean
/// context is under [`CONTEXT_SPREAD`] times the shortest. Only they give
/// the decode line and the batch limit; the long-context levels give the
/// context's cost (their few streams, a wave of long prefills, say nothing
/// of the slots).
pub fn plain_levels(levels: &[DecodeLevel]) -> Vec<&DecodeLevel> {
    let shortest = levels
        .iter()
        .map(|l| l.mean_context)
        .fold(f64::INFINITY, f64::min);
    levels
        .iter()
        .filter(|l| l.mean_context < CONTEXT_SPREAD * shortest.max(1.0))
        .collect()
}

/// Whether the KV cache, not the slot count, limited the level.
pub fn kv_bound(l: &DecodeLevel) -> bool {
    l.preemptions.is_some_and(|p| p > 0.0) || l.kv_usage_max.is_some_and(|u| u >= 0.98)
}

/// Fits the levels; `interference` is `α × c_p` (seconds per prompt token)
/// and its standard uncertainty, `stalls` the host's stalls' share of the
/// steps' time and the median step under which a level shows its own
/// ([`super::stalls::StallFit`]): taken out of the mean gaps (the model
/// adds the share back). `None` without 3 fittable levels.
pub fn fit(
    levels: &[DecodeLevel],
    interference: (f64, f64),
    stalls: (f64, f64),
) -> Option<DecodeFit> {
    let plain = plain_levels(levels);
    let usable: Vec<&DecodeLevel> = plain
        .iter()
        .copied()
        .filter(|l| l.gaps >= MIN_GAPS && !kv_bound(l))
        .collect();
    let points = |ac: f64, median: bool| -> Vec<Point> { steps(&usable, ac, median, stalls) };
    // The long-context levels add their clean gaps (no prompt beside them).
    let long: Vec<Point> = levels
        .iter()
        .filter(|l| !plain.iter().any(|p| std::ptr::eq(*p, *l)) && !kv_bound(l))
        .filter_map(|l| l.clean.filter(|c| c.gaps >= MIN_GAPS))
        .map(|c| Point {
            batch: c.batch,
            context: c.context,
            step_s: c.median_gap_s,
        })
        .collect();
    let batches: Vec<String> = usable
        .iter()
        .map(|l| format!("{:.0}", l.streaming))
        .collect();
    let medians: Vec<Point> = points(interference.0, true)
        .into_iter()
        .chain(long)
        .collect();
    let shapes: Vec<String> = medians
        .iter()
        .map(|p| format!("{:.0}x{:.0}", p.batch, p.context))
        .collect();
    let extra = extra_costs::fit(&medians, &format!("batch x context: {}", shapes.join(", ")));
    let less_extra = |pts: Vec<Point>| -> Vec<(f64, f64)> {
        pts.iter()
            .map(|p| (p.batch, p.step_s - extra.at(p)))
            .collect()
    };
    let (free, central, shifted) = lines(
        &less_extra(points(interference.0, false)),
        &less_extra(points(interference.0 + interference.1, false)),
    )?;
    let how = |what: &str| {
        format!(
            "{what} of the least-squares line of the decode step (mean token gap less the prompts' share, the host's stalls and the context's cost) against the decoding batch: {} closed-loop levels, batches {}",
            usable.len(),
            batches.join(", ")
        )
    };
    let (step_base_ms, decode_seq_us, mut warnings) = estimates(&free, &central, &shifted, &how);
    if plain.iter().any(|l| kv_bound(l)) {
        warnings.push(
            "a decode level preempted or filled the KV cache: it is left out of the fit, and its batch is a KV limit, not max_num_seqs".into(),
        );
    }
    Some(DecodeFit {
        step_base_ms,
        decode_seq_us,
        max_num_seqs: batch_limit(&plain),
        context_token_us: extra.context_token_us,
        request_ms: extra.request_ms,
        warnings,
    })
}

/// Each level's decode step: from its mean gap (steps tile the window,
/// stalls and all) less the stalls, which the model adds back, or from its
/// median (what the extra costs are fitted on: one stall of a second in a
/// level of a few seconds moves its mean, not its median); less the
/// prompts' share `ac` per prompt token. A level whose steps are short
/// enough to show its stalls has its own stalled gaps' excess taken out
/// (stalls fall unevenly: on 8 slots, 16 stalled gaps in one level and none
/// in the next, read at the one share, tilted the line to 3.5 ms a
/// sequence where the medians said 0.5); a longer-stepped level, whose
/// stalls mostly go unseen, its mean less the stalls' share `(share,
/// visible_below)`.
fn steps(usable: &[&DecodeLevel], ac: f64, median: bool, stalls: (f64, f64)) -> Vec<Point> {
    let (stall_share, visible_below) = stalls;
    usable
        .iter()
        .map(|l| {
            let share = (ac * l.prefill_tokens_per_s).clamp(0.0, 0.9);
            let gap = if median {
                l.median_gap_s
            } else if l.median_gap_s <= visible_below && l.gaps > 0 {
                // Each stalled gap back at the median (never below 0, should
                // a saved profile's counts disagree).
                (l.mean_gap_s - l.stalls.excess_s / l.gaps as f64).max(0.0)
            } else {
                l.mean_gap_s / (1.0 + stall_share.max(0.0))
            };
            Point {
                batch: l.streaming,
                context: l.mean_context,
                step_s: gap * (1.0 - share),
            }
        })
        .collect()
}

/// Whether the levels so far pin the decode step at the largest batch
/// they ran to within [`PRECISE`] (its base and per-sequence cost at 1σ,
/// any misfit's widening included): then more rounds would add little.
pub fn precise(levels: &[DecodeLevel]) -> bool {
    let Some(f) = fit(levels, (0.0, 0.0), (0.0, 0.0)) else {
        return false;
    };
    let d = levels.iter().map(|l| l.streaming).fold(0.0, f64::max);
    let (base, seq) = (&f.step_base_ms, &f.decode_seq_us);
    let step_us = base.value * 1e3 + seq.value * d;
    let sigma_us = base.uncertainty * 1e3 + seq.uncertainty * d;
    step_us > 0.0 && sigma_us < PRECISE * step_us
}

/// The free least-squares line through `points`, and the lines the
/// estimates come from (at `points`, and at the points with the
/// interference correction at its upper end): free lines, or lines through
/// the origin when the free one crosses below it. A step cannot cost less
/// than nothing; a busy machine's noise, or steps that cost more per
/// sequence when more sequences run, can put the free intercept there.
fn lines(points: &[(f64, f64)], shifted: &[(f64, f64)]) -> Option<(Line, Line, Line)> {
    let free = line::fit(points, 1e-4)?;
    let fit_line = |xy: &[(f64, f64)]| match free.intercept < 0.0 {
        true => line::through_origin(xy),
        false => line::fit(xy, 1e-4),
    };
    let (central, shifted) = (fit_line(points)?, fit_line(shifted)?);
    Some((free, central, shifted))
}

/// The step base and the cost per sequence from the lines, each flagged
/// (and widened) when the free line crossed below the origin or was not
/// linear; and the warnings that says so.
fn estimates(
    free: &Line,
    central: &Line,
    shifted: &Line,
    how: &dyn Fn(&str) -> String,
) -> (Estimate, Estimate, Vec<String>) {
    let sigma_base = central
        .se_intercept
        .hypot(shifted.intercept - central.intercept);
    let sigma_seq = central.se_slope.hypot(shifted.slope - central.slope);
    let mut base = Estimate::fitted(
        central.intercept * 1e3,
        sigma_base * 1e3,
        0.0,
        how("intercept"),
    );
    let mut seq = Estimate::fitted(central.slope * 1e6, sigma_seq * 1e6, 0.0, how("slope"));
    let mut warnings = Vec::new();
    if free.intercept < 0.0 {
        // Held at 0, with the free line's uncertainty; a misfit when the
        // free line is clearly (2σ) below the origin.
        base.uncertainty = free.se_intercept * 1e3;
        base.high = Some(2.0 * base.uncertainty);
        base.how = format!(
            "held at 0: the {} was {:.2} ms, below it",
            how("intercept"),
            free.intercept * 1e3
        );
        if -free.intercept > 2.0 * free.se_intercept {
            let why = format!(
                "the decode step against the batch crosses zero below the origin (intercept {:.2} ms, {:.0} us per sequence): fitted through the origin instead, the step base 0",
                free.intercept * 1e3,
                free.slope * 1e6
            );
            base = base.misfit(-free.intercept * 1e3, 0.0, why.clone());
            let moved = sigma_seq.max((free.slope - central.slope).abs());
            seq = seq.misfit(moved * 1e6, 0.0, why.clone());
            warnings.push(why);
        }
    }
    if let Some(why) = &central.not_linear {
        let why = format!("the decode step against the batch is {why} (seconds against sequences)");
        base = base.misfit(sigma_base * 1e3, 0.0, why.clone());
        seq = seq.misfit(sigma_seq * 1e6, 0.0, why.clone());
        warnings.push(why);
    }
    (base, seq, warnings)
}

/// The batch limit from the levels (a lower bound unless some level was
/// saturated by slots rather than by the KV cache).
fn batch_limit(levels: &[&DecodeLevel]) -> Estimate {
    let saturated: Vec<&DecodeLevel> = levels.iter().copied().filter(|l| saturated(l)).collect();
    let gauge = levels.iter().any(|l| l.running_max.is_some());
    let seen = levels.iter().map(|l| slots(l)).fold(0.0, f64::max);
    let source = if gauge {
        "the running gauge's peak"
    } else {
        "the streaming count (client side)"
    };
    if saturated.is_empty() || saturated.iter().all(|l| kv_bound(l)) {
        let why = if saturated.is_empty() {
            "every level's streams all ran"
        } else {
            "the KV cache stopped the batch first"
        };
        return Estimate::lower_bound(
            seen.round(),
            format!("{source}: at least {seen:.0} ran together; {why}"),
        );
    }
    let each: Vec<f64> = saturated
        .iter()
        .filter(|l| !kv_bound(l))
        .map(|l| slots(l))
        .collect();
    let m = mean(&each);
    let spread = each.iter().map(|x| (x - m).abs()).fold(0.0, f64::max);
    // A gauge reads whole requests; the client's count is a time average.
    let resolution = if gauge { 0.5 } else { 0.5 + 0.01 * m };
    let offered: Vec<String> = saturated
        .iter()
        .map(|l| l.concurrency.to_string())
        .collect();
    Estimate::fitted(
        m.round(),
        spread.max(resolution),
        1.0,
        format!(
            "{source} where more streams were offered ({}) than ran: the batch stopped rising",
            offered.join(", ")
        ),
    )
}

#[cfg(test)]
#[path = "decode_tests.rs"]
mod tests;

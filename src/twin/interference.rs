//! Prefill interference and the per-step token budget, from decoders
//! streaming while prompts arrive. Pure.
//!
//! A few streams decode long outputs; now and then one prompt of `n` tokens
//! arrives (asking for one token, so it never decodes). For each prompt and
//! each decoder, the decoder's time from its last token before the prompt
//! was sent to its token nearest the prompt's first token, minus the
//! baseline gap times the gaps in between, is what the prefill cost the
//! decoders (`extra`). The simulator's model says `extra = α × per-token
//! prefill cost × n` (see `sim::params`), so each prompt gives
//! `α_i = extra_i / (c_p × n_i)`; `α` is their median, with its standard
//! error and the prefill cost's own uncertainty carried over. It is
//! not held at 1: on vLLM's CPU engine a prompt's step beside decoders costs
//! 1.3 to 1.6 times its lone prefill (steps rebuilt from token times), so
//! `α` runs up to [`MAX_INTERFERENCE`].
//!
//! The gaps a prompt lengthened also show how it was split: a prefill in
//! one step lengthens one gap; chunked prefill lengthens several, each by
//! `α × c_p × chunk`. When chunks are smaller than the prefill lane allows
//! (`sim::params::ModelParams::prefill_lane_cap`), the token budget cut
//! them: the budget is the largest chunk plus the decoders' own tokens.

use super::observe::token_times;
use super::profile::Estimate;
use crate::metrics::stats::{mean, median, median_error, robust_sigma, shorth_center};
use crate::metrics::RequestRecord;
use crate::sim::params::MAX_INTERFERENCE;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Fewest short prompts for a reading of their loss (here, and the fixed
/// cost of a prompt's step in `prompt_step`).
pub const MIN_SHORT_PROMPTS: usize = 3;

/// What the decoders saw around one injected prompt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Injection {
    pub prompt_tokens: u32,
    /// Decoder time beyond the baseline over the prompt's prefill, mean
    /// over the decoders that covered it, seconds.
    pub extra_s: f64,
    /// Decoders that covered it.
    pub decoders: usize,
    /// The first such decoder's lengthened gaps, each minus the baseline, s.
    pub lengthened_s: Vec<f64>,
    /// The step that emitted the prompt's first token (the decoders' gap
    /// ending nearest it) less the baseline, mean over the decoders, s:
    /// what computing the prompt added to its step, with none of the
    /// front end's time before it (a short prompt's whole prefill).
    pub step_extra_s: f64,
}

/// The interference probe, reduced.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InterferenceObs {
    /// Decoding streams.
    pub decoders: usize,
    /// Median decoder gap (a decode step with nothing arriving), seconds.
    pub baseline_gap_s: f64,
    /// Robust spread of the decoder gaps (1.4826 × MAD), seconds.
    pub gap_noise_s: f64,
    pub injections: Vec<Injection>,
}

/// Short prompts (one step's worth, [`super::prompt_step`]) are sent only
/// beside long ones at least this many times longer, and told apart by
/// length.
pub const LONG_OVER_SHORT: u32 = 4;

impl InterferenceObs {
    /// The longest prompt's length over [`LONG_OVER_SHORT`].
    fn short_max(&self) -> u32 {
        let longest = self.injections.iter().map(|i| i.prompt_tokens).max();
        longest.unwrap_or(0) / LONG_OVER_SHORT
    }

    /// The long prompts: those `α` and the token budget are read from.
    pub fn long(&self) -> impl Iterator<Item = &Injection> {
        let s = self.short_max();
        self.injections.iter().filter(move |i| i.prompt_tokens > s)
    }

    /// The short prompts, if the probe sent any.
    pub fn short(&self) -> impl Iterator<Item = &Injection> {
        let s = self.short_max();
        self.injections
            .iter()
            .filter(move |i| i.prompt_tokens > 0 && i.prompt_tokens <= s)
    }
}

/// Reduces the probe's records: `decoders` stream long outputs, `injected`
/// are the prompts (their `sent` and `first_token` bound each prefill).
pub fn observe(decoders: &[RequestRecord], injected: &[RequestRecord]) -> Option<InterferenceObs> {
    let times: Vec<Vec<Duration>> = decoders.iter().map(token_times).collect();
    let mut gaps: Vec<f64> = times
        .iter()
        .flat_map(|t| t.windows(2).map(|w| (w[1] - w[0]).as_secs_f64()))
        .collect();
    if gaps.len() < 4 {
        return None;
    }
    gaps.sort_by(f64::total_cmp);
    let g0 = median(&gaps);
    let noise = robust_sigma(&gaps);
    let threshold = (5.0 * noise).max(0.05 * g0);
    let injections = injected
        .iter()
        .filter(|r| r.is_ok())
        .filter_map(|r| injection(r, &times, g0, threshold))
        .collect();
    Some(InterferenceObs {
        decoders: decoders.len(),
        baseline_gap_s: g0,
        gap_noise_s: noise,
        injections,
    })
}

/// One prompt as the decoders saw it; `None` when no decoder covered it.
fn injection(
    r: &RequestRecord,
    decoders: &[Vec<Duration>],
    g0: f64,
    threshold: f64,
) -> Option<Injection> {
    let first = r.first_token?;
    let mut extras = Vec::new();
    let mut steps = Vec::new();
    let mut lengthened = None;
    for t in decoders {
        let Some(a) = t.iter().rposition(|&x| x <= r.sent) else {
            continue;
        };
        let Some(b) = (a..t.len()).min_by_key(|&i| t[i].abs_diff(first)) else {
            continue;
        };
        if b + 1 >= t.len() && t[b] < first {
            continue; // the decoder ended before the prompt's first token
        }
        let span = (t[b] - t[a]).as_secs_f64();
        extras.push(span - (b - a) as f64 * g0);
        if b > a {
            steps.push((t[b] - t[b - 1]).as_secs_f64() - g0);
        }
        if lengthened.is_none() {
            let long: Vec<f64> = t[a..=b]
                .windows(2)
                .map(|w| (w[1] - w[0]).as_secs_f64() - g0)
                .filter(|e| *e > threshold)
                .collect();
            lengthened = Some(long);
        }
    }
    (!extras.is_empty()).then(|| Injection {
        prompt_tokens: r.prompt_len,
        extra_s: mean(&extras),
        decoders: extras.len(),
        lengthened_s: lengthened.unwrap_or_default(),
        step_extra_s: if steps.is_empty() { 0.0 } else { mean(&steps) },
    })
}

/// `α` from the probe, given the prefill cost per token `c_p` and its
/// standard uncertainty (seconds); `None` without a usable injection.
///
/// A step computing a prompt beside decoders also costs them a fixed part
/// (`α × F`, [`super::prompt_step`]); the short prompts' median loss
/// carries it with their own few tokens, so each long prompt's loss less
/// that, over the cost of the tokens it has beyond theirs, is `α` whatever
/// `F` is (in fake time, a server of `α` 1 and `F` 50 ms read 1.26 over the
/// long prompts' tokens alone). Without short prompts `F` is taken as 0.
pub fn fit_alpha(obs: &InterferenceObs, c_p: f64, c_p_sigma: f64) -> Option<Estimate> {
    if c_p <= 0.0 {
        return None;
    }
    let (short_loss, short_tokens) = short_median(obs).unwrap_or((0.0, 0.0));
    let mut each: Vec<f64> = obs
        .long()
        .filter(|i| f64::from(i.prompt_tokens) > short_tokens)
        .map(|i| (i.extra_s - short_loss) / (c_p * (f64::from(i.prompt_tokens) - short_tokens)))
        .collect();
    if each.is_empty() {
        return None;
    }
    let m = each.len() as f64;
    each.sort_by(f64::total_cmp);
    // The centre of the shortest half: the readings a host stall lengthened
    // do not move it (the model adds the stalls on its own, `sim::stalls`).
    // On vLLM on CPU a stall of about 100 ms comes every 0.5-1 s, so nearly
    // half the long prompts meet one: six 400-token prompts read 0.65,
    // 0.72, 0.83, 1.38, 1.77 and 2.35, where the median lands between the
    // two groups.
    let (raw, spread) = (shorth_center(&each), median_error(&each));
    // One prompt's resolution: the decoders' gap noise over its prefill cost.
    let tokens = mean(
        &obs.long()
            .map(|i| f64::from(i.prompt_tokens))
            .collect::<Vec<_>>(),
    );
    let resolution = obs.gap_noise_s / (c_p * tokens) / m.sqrt();
    let sigma = spread.hypot(raw * c_p_sigma / c_p).hypot(resolution);
    let how = format!(
        "{m:.0} prompts of ~{tokens:.0} tokens arriving beside {} decoding streams: the centre of the shortest half of the decoders' lost time over each prefill / (prefill cost x tokens)",
        obs.decoders
    );
    let held = raw.clamp(0.0, MAX_INTERFERENCE);
    let mut e = Estimate::fitted(held, sigma, 0.0, how);
    e.high = e.high.map(|h| h.min(MAX_INTERFERENCE));
    if (raw - held).abs() > 0.1 && (raw - held).abs() > 3.0 * sigma {
        let why = format!(
            "the decoders lost {:.0}% of the prompts' prefill time, outside the model's 0-{:.0}%: their steps do not scale with prompt tokens as the model's do",
            raw * 100.0,
            MAX_INTERFERENCE * 100.0
        );
        e = e.misfit((raw - held).abs(), 0.0, why);
        e.high = e.high.map(|h| h.min(MAX_INTERFERENCE));
    }
    Some(e)
}

/// The short prompts' median loss to the decoders (the step that computed
/// each, seconds) and their mean length; `None` under
/// [`MIN_SHORT_PROMPTS`] of them.
fn short_median(obs: &InterferenceObs) -> Option<(f64, f64)> {
    let mut losses: Vec<f64> = obs.short().map(|i| i.step_extra_s).collect();
    if losses.len() < MIN_SHORT_PROMPTS {
        return None;
    }
    losses.sort_by(f64::total_cmp);
    let tokens: Vec<f64> = obs.short().map(|i| f64::from(i.prompt_tokens)).collect();
    Some((median(&losses), mean(&tokens)))
}

/// The per-step token budget when chunking showed it, else a lower bound:
/// `alpha`, `c_p` (seconds per token) and its relative uncertainty.
pub fn fit_budget(
    obs: &InterferenceObs,
    alpha: &Estimate,
    c_p: f64,
    c_p_rel: f64,
) -> Option<Estimate> {
    let a = alpha.value;
    let d = obs.decoders as f64;
    if a < 0.25 || c_p <= 0.0 {
        return None;
    }
    let chunks: Vec<f64> = obs
        .long()
        .filter(|i| i.lengthened_s.len() >= 2)
        .filter_map(|i| i.lengthened_s.iter().copied().reduce(f64::max))
        .map(|e| e / (a * c_p))
        .collect();
    let lane = obs.baseline_gap_s / ((1.0 - a).max(1e-9) * c_p);
    let largest = obs.injections.iter().map(|i| i.prompt_tokens).max()?;
    match chunks.iter().copied().reduce(f64::max) {
        Some(chunk) if chunk < 0.8 * lane => {
            let rel = (alpha.uncertainty / a).hypot(c_p_rel);
            Some(Estimate::fitted(
                chunk + d,
                chunk * rel + 1.0,
                d + 1.0,
                format!(
                    "a {largest}-token prompt beside {d:.0} decoders was split into chunks of up to {chunk:.0} tokens (lengthened gaps / (interference x prefill cost)), plus the decoders' own tokens"
                ),
            ))
        }
        Some(chunk) => Some(Estimate::lower_bound(
            chunk + d,
            format!("prompts beside {d:.0} decoders were split into chunks of up to {chunk:.0} tokens, as the prefill lane allows, not by the budget"),
        )),
        None => Some(Estimate::lower_bound(
            f64::from(largest) + d,
            format!("a {largest}-token prompt beside {d:.0} decoders was not split by the budget"),
        )),
    }
}

#[cfg(test)]
#[path = "interference_tests.rs"]
mod tests;

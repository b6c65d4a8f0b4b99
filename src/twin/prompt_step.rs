//! The fixed cost of a step that computes a prompt beside decoders, from
//! the interference probe's short prompts. Pure.
//!
//! Every served workload sees it: a prompt or two arriving beside a
//! running batch. The interference probe sends, between its long prompts,
//! short ones (a few dozen tokens, one step's worth). The step that
//! computed a short prompt is the decoders' gap that ends with its first
//! token; that gap beyond their baseline ([`super::interference`]) is
//! `α × (F + c(n))` (`sim::params`): the prompt's own cost `c(n)` comes
//! from the prefill curve, the rest is `F`. One step, not the whole wait
//! for the first token: the front end's time before the engine sees the
//! prompt is left out, and with it most of the host's stalls (on vLLM on
//! CPU one step in seven or eight; a wait of several steps meets one a
//! third to a half of the time, and the median over the whole waits read
//! 0 to 117 ms across four profiles of one engine). The median over the
//! prompts, so a stall that falls on one does not move it.
//!
//! A step of sixteen prompts and no decoders (the batched prefill probe)
//! costs more per step on vLLM on CPU: its fixed part read 124 ± 47 ms,
//! where the engine's steps rebuilt from a run's token times add about
//! 13 ms for a 128-token prompt beside decoders, beyond its tokens' cost
//! (docs/benchmarks/2026-12-07.md). So `F` comes from the short prompts
//! when the probe has them, and from the batched steps only without.

use super::estimate::Estimate;
use super::interference::InterferenceObs;
use crate::metrics::stats::{median, median_error};

/// The short prompts' length, tokens: one step's worth on any server.
pub const SHORT_PROMPT: u32 = 32;
/// Fewest short prompts for a reading.
pub const MIN_PROMPTS: usize = super::interference::MIN_SHORT_PROMPTS;

/// `F`, ms, and its standard error, from the short prompts: the median of
/// `step extra / α − c(n)` over them, `prompt_cost_s(n)` the prefill curve's
/// cost of `n` tokens. `None` under [`MIN_PROMPTS`] short prompts or with
/// `α` too small for a prompt beside decoders to show.
pub fn fixed_cost_ms(
    obs: &InterferenceObs,
    alpha: f64,
    prompt_cost_s: impl Fn(u32) -> f64,
) -> Option<(f64, f64, usize)> {
    if alpha < 0.2 {
        return None;
    }
    let mut each: Vec<f64> = obs
        .short()
        .map(|i| (i.step_extra_s / alpha - prompt_cost_s(i.prompt_tokens)) * 1e3)
        .collect();
    if each.len() < MIN_PROMPTS {
        return None;
    }
    each.sort_by(f64::total_cmp);
    let m = each.len() as f64;
    // The median's standard error, at least the decoders' own gap noise
    // over √m.
    let sigma = median_error(&each).max(obs.gap_noise_s * 1e3 / alpha / m.sqrt());
    Some((median(&each), sigma, each.len()))
}

/// The profile's `prefill_step_ms` from [`fixed_cost_ms`]'s reading: held
/// at 0 below it, not identifiable when its σ is not below its value.
pub fn estimate((mid, sigma, prompts): (f64, f64, usize), decoders: usize) -> Estimate {
    Estimate::fitted_cost(
        mid,
        sigma,
        format!("{prompts} short prompts arriving beside {decoders} decoding streams: the median of the step that computed each (the decoders' gap ending with its first token) less their baseline gap, over the interference, less the prompt's own cost (the prefill curve)"),
    )
}

#[cfg(test)]
#[path = "prompt_step_tests.rs"]
mod tests;

//! Sustainable request rate μ of the engine model for a workload shape.
//!
//! Pure arithmetic over [`ModelParams`]; no clock, no I/O. The derivation, for
//! prompts of `n_in` tokens and outputs of `n_out` tokens at saturation:
//!
//! - A request occupies a batch slot for `L = k_p + n_out − 1` steps, where
//!   `k_p = ⌈n_in / max_num_batched_tokens⌉` steps of prefill produce the first
//!   token and each further token takes one decode step.
//! - The steady batch is `B = min(max_num_seqs, kv_cache_tokens / (n_in + n_out/2))`:
//!   a sequence holds on average its prompt plus half its output in the KV cache.
//! - Requests finish at `r = B / L` per step, unless the token budget binds
//!   first: each request needs `n_in + n_out − 1` scheduled tokens, so
//!   `r ≤ max_num_batched_tokens / (n_in + n_out − 1)`.
//! - A step with `r` completions per step does `r·n_in` prefill tokens and
//!   `r·(n_out − 1)` decodes on average, so it lasts
//!   `T = base + per_prefill_token·r·n_in + per_decode_seq·r·(n_out − 1)`.
//! - μ = r / T. When the slot limit binds this is
//!   `μ = B / (L·base + B·(n_in·per_prefill_token + (n_out − 1)·per_decode_seq))`:
//!   the fixed step cost is shared by the batch, the per-token costs are not.
//!
//! With a prefix-cache hit fraction `h`, a request computes only
//! `n_c = max(1, n_in·(1 − h))` prompt tokens: `n_c` replaces `n_in` in `k_p`,
//! in the token budget and in the step time, and a sequence holds `n_c` of
//! its own KV tokens (the shared `n_in·h` are held once, by the cache).
//!
//! When the KV cache binds, preemptions add recompute work that the formula
//! ignores, so μ is then an upper estimate.
//!
//! A cost per context token `c_x` and per request `h` ([`super::params`])
//! add `h·r + c_x·r·(n_out − 1)·(n + n_out/2)` to `T` (`n` the whole
//! prompt, cached part included: a decoder attends over all of it, on
//! average its prompt and half its output), and `h` and `c_x·(n + n_out/2)`
//! to a lone request's TTFT and TPOT. A cost per prompt attention pair
//! `c_q` adds `c_q·r·(n_c·s + n_c(n_c + 1)/2)` beside the prefill term (`s`
//! the cached prefix each computed token also attends over); a prefill
//! step's own fixed cost `F` adds `F·r·k_p` (each request's prefill steps
//! paying it alone: an upper estimate when prompts share steps). The host's
//! stalls ([`super::stalls`]) stretch `T` and a lone request's times by
//! `1 + rate × mean`, their share on average.
//!
//! With a prefill interference `α < 1` ([`super::params`]), the prefill term
//! of `T` is `α·per_prefill_token·r·n_c`, a prefill takes
//! `k_p = ⌈n_c / min(budget, lane cap)⌉` steps (the lane cap taken at the
//! steady batch; a lone request's prefill is a plain prefill step, so its
//! TTFT does not depend on `α`), and the prefill lane must keep up:
//! `(1 − α)·per_prefill_token·r·n_c ≤ base + per_decode_seq·r·(n_out − 1)`,
//! which bounds `r` when prompts are long and decodes cheap (the bottleneck
//! is then [`Bottleneck::PrefillLane`]). At `α = 1` all of this reduces to
//! the formulas above.

use super::model::ModelParams;

/// Which limit sets the steady batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bottleneck {
    /// `max_num_seqs` sequences run.
    MaxNumSeqs,
    /// The KV cache holds fewer than `max_num_seqs` sequences of this shape.
    KvCache,
    /// The per-step token budget is full.
    TokenBudget,
    /// The prefill lane is busy all the time (`α < 1`: prompts are computed
    /// beside the decode steps, as fast as the lane goes).
    PrefillLane,
}

/// The capacity estimate and its intermediate quantities.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Capacity {
    /// Sustainable request rate μ (requests per second).
    pub mu: f64,
    /// Output tokens per second at μ.
    pub output_tokens_per_s: f64,
    /// Steady running batch `B` (may be fractional).
    pub batch: f64,
    /// Batch steps a request spends in the batch, `L`.
    pub lifetime_batch_steps: f64,
    /// Requests completed per step at saturation, `r`.
    pub completions_per_batch_step: f64,
    /// Mean step time at saturation, seconds.
    pub batch_step_s: f64,
    /// The limit that binds.
    pub bottleneck: Bottleneck,
    /// Time to first token of a lone request, seconds.
    pub lone_ttft_s: f64,
    /// Time per output token of a lone request, seconds.
    pub lone_tpot_s: f64,
}

/// Computes μ and friends for prompts of `input_len` and outputs of `output_len` tokens.
pub fn capacity(p: &ModelParams, input_len: u32, output_len: u32) -> Capacity {
    capacity_cached(p, input_len, output_len, 0.0)
}

/// [`capacity`] when the prefix cache serves `hit_fraction` (0..=1) of every
/// prompt's tokens.
pub fn capacity_cached(
    p: &ModelParams,
    input_len: u32,
    output_len: u32,
    hit_fraction: f64,
) -> Capacity {
    let h = hit_fraction.clamp(0.0, 1.0);
    let shared = f64::from(input_len.max(1)) * h;
    let n_in = (f64::from(input_len.max(1)) - shared).max(1.0);
    let n_out = f64::from(output_len.max(1));
    let budget = f64::from(p.max_num_batched_tokens.max(1));
    let base = p.step_base.as_secs_f64();
    let c_p = p.per_prefill_token.as_secs_f64();
    let c_d = p.per_decode_seq.as_secs_f64();

    let alpha = p
        .prefill_interference
        .clamp(0.0, super::params::MAX_INTERFERENCE);
    let seqs = f64::from(p.max_num_seqs.max(1));
    let kv_batch = (f64::from(p.kv_cache_tokens) - shared).max(0.0) / (n_in + n_out / 2.0);
    let (batch, mut bottleneck) = if kv_batch < seqs {
        (kv_batch.max(1.0), Bottleneck::KvCache)
    } else {
        (seqs, Bottleneck::MaxNumSeqs)
    };
    let chunk = |decoders: f64| budget.min(f64::from(p.prefill_lane_cap(decoders as u64)));
    let k_p = (n_in / chunk(batch)).ceil();
    let lifetime = k_p + n_out - 1.0;
    let mut r = batch / lifetime;
    let budget_r = budget / (n_in + n_out - 1.0);
    if budget_r < r {
        r = budget_r;
        bottleneck = Bottleneck::TokenBudget;
    }
    let lane_excess = (1.0 - alpha) * c_p * n_in - c_d * (n_out - 1.0);
    if alpha < 1.0 && lane_excess > 0.0 && base / lane_excess < r {
        r = base / lane_excess;
        bottleneck = Bottleneck::PrefillLane;
    }
    let (c_x, per_req) = (
        p.per_context_token.as_secs_f64(),
        p.per_request.as_secs_f64(),
    );
    let context = f64::from(input_len.max(1)) + n_out / 2.0;
    // Each computed prompt token attends over the shared prefix and the
    // prompt tokens before it.
    let pairs = n_in * shared + n_in * (n_in + 1.0) / 2.0;
    let batch_step_s = base
        + alpha
            * (c_p * r * n_in
                + p.per_prefill_pair.as_secs_f64() * r * pairs
                + p.per_prefill_step.as_secs_f64() * r * k_p)
        + c_d * r * (n_out - 1.0)
        + per_req * r
        + c_x * r * (n_out - 1.0) * context;
    // The host's stalls lengthen every step by their share on average.
    let stretch = 1.0 + p.stalls.share();
    let batch_step_s = batch_step_s * stretch;
    let mu = r / batch_step_s;

    Capacity {
        mu,
        output_tokens_per_s: mu * n_out,
        batch,
        lifetime_batch_steps: lifetime,
        completions_per_batch_step: r,
        batch_step_s,
        bottleneck,
        lone_ttft_s: ((n_in / budget).ceil() * (base + p.per_prefill_step.as_secs_f64())
            + c_p * n_in
            + p.per_prefill_pair.as_secs_f64() * pairs
            + per_req)
            * stretch,
        lone_tpot_s: (base + c_d + c_x * context) * stretch,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn params() -> ModelParams {
        ModelParams {
            max_num_seqs: 10,
            max_num_batched_tokens: 1000,
            kv_cache_tokens: 100_000,
            max_model_len: 2000,
            step_base: Duration::from_millis(5),
            per_prefill_token: Duration::from_micros(10),
            per_decode_seq: Duration::from_micros(100),
            prefill_interference: 1.0,
            block_tokens: crate::sim::blocks::BLOCK_TOKENS,
            per_context_token: std::time::Duration::ZERO,
            per_request: std::time::Duration::ZERO,
            per_prefill_pair: std::time::Duration::ZERO,
            per_prefill_step: std::time::Duration::ZERO,
            stalls: crate::sim::params::HostStalls::NONE,
        }
    }

    #[test]
    fn slot_bound_rate_matches_closed_form() {
        let c = capacity(&params(), 100, 11);
        // L = 1 + 10 = 11; μ = 10 / (11·5ms + 10·(100·10µs + 10·100µs)) = 10 / 0.075
        assert_eq!(c.bottleneck, Bottleneck::MaxNumSeqs);
        assert!((c.mu - 10.0 / 0.075).abs() < 1e-9, "{}", c.mu);
        assert!((c.lone_ttft_s - 0.006).abs() < 1e-12);
        assert!((c.lone_tpot_s - 0.0051).abs() < 1e-12);
    }

    #[test]
    fn small_kv_cache_lowers_the_batch() {
        let p = ModelParams {
            kv_cache_tokens: 2_000,
            ..params()
        };
        let c = capacity(&p, 200, 20);
        assert_eq!(c.bottleneck, Bottleneck::KvCache);
        assert!((c.batch - 2_000.0 / 210.0).abs() < 1e-9);
    }

    #[test]
    fn cached_prompt_tokens_cost_nothing() {
        // 90% of 1000 prompt tokens cached computes like a 100-token prompt.
        let cached = capacity_cached(&params(), 1000, 11, 0.9);
        let short = capacity(&params(), 100, 11);
        assert!((cached.mu - short.mu).abs() / short.mu < 1e-9);
        assert!(cached.mu > 2.0 * capacity(&params(), 1000, 11).mu);
        assert_eq!(
            capacity_cached(&params(), 1000, 11, 0.0),
            capacity(&params(), 1000, 11)
        );
    }

    #[test]
    fn long_prompts_hit_the_token_budget() {
        let c = capacity(&params(), 900, 2);
        assert_eq!(c.bottleneck, Bottleneck::TokenBudget);
        assert!((c.completions_per_batch_step - 1000.0 / 901.0).abs() < 1e-9);
    }
}

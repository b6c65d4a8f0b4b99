//! The engine's parameters and its step-time cost model, prefill
//! interference included. Pure arithmetic; no clock, no I/O.
//!
//! # The step time
//! A step that computes `P` prompt tokens and decodes one token for each of
//! `D ≥ 1` sequences lasts
//!
//! `T = step_base + α × (per_prefill_token × P + per_prefill_pair × Q + F)
//!      + per_decode_seq × D + per_context_token × C + per_request × A`
//!
//! (`F` is [`ModelParams::per_prefill_step`] when `P > 0`, else 0)
//! where `α` is [`ModelParams::prefill_interference`], in `[0, 3]`, `Q` the
//! prompt tokens' attention pairs (each computed prompt token with every
//! token before it in its sequence, cached prefix included: a chunk of `t`
//! tokens after `c` computed ones has `t·c + t(t+1)/2`), `C` the
//! context the `D` decoders attend over (each one's prompt and the tokens it
//! generated so far, summed) and `A` the requests the step schedules for the
//! first time. The pair cost and the last two terms are 0 in the built-in
//! presets; a profile of a real engine measures them (vLLM on CPU: about
//! 100 ns a prompt pair, so a lone 2,040-token prompt costs 0.2 s more than
//! sixteen 128-token ones; a few µs per context token; tens of ms per
//! request, its API server sharing the cores). A step
//! with no sequence decoding (`D = 0`) is a plain prefill step,
//! `step_base + per_prefill_token × P`, whatever `α` is: there is no decode
//! work for the prefill to interfere with or hide behind.
//!
//! # Prefill interference
//! `α` says how much an arriving prefill slows the sequences already
//! decoding. The model: beside a decode step, prompt tokens are computed at
//! one per `per_prefill_token` of wall time whatever `α` is (a *prefill
//! lane*); the share `α` of that work is serialized with the decode step and
//! lengthens it, the share `1 − α` overlaps with it (it runs on other units
//! or other workers). A step cannot end before the prompt tokens it computed
//! are done, so a decode step computes at most
//! `(step_base + per_decode_seq × D) / ((1 − α) × per_prefill_token)`
//! prompt tokens ([`ModelParams::prefill_lane_cap`]; at least 1, so a prompt
//! always progresses); a longer prompt continues in the next steps, like a
//! chunked prefill.
//!
//! - `α = 1` (the default, and the only behaviour before the parameter
//!   existed): prefill and decode share one batch step, as in vLLM, SGLang
//!   and llama.cpp. The lane cap is infinite, so a step takes every prompt
//!   token its token budget allows and the decoders wait for all of them.
//! - `α = 0`: disaggregated prefill/decode (llm-d, Dynamo) or a pool of
//!   separate prefill workers: decode steps last `step_base + per_decode_seq
//!   × D` whatever arrives, and a prompt of `n` tokens arriving beside them is
//!   computed over the decode steps that fit `n × per_prefill_token`.
//! - `α > 1`: a prompt computed beside decoders costs more than alone
//!   (another kernel path for a mixed batch: vLLM on CPU, a prompt's step
//!   beside decoders 1.3 to 1.6 times its lone prefill, from steps rebuilt
//!   from token times; docs/benchmarks/2026-12-07.md). The step is shared
//!   as at 1, each prompt token costing `α` times its lone cost; a lone
//!   prompt costs its lone cost.
//! - In between, a prompt of `n` tokens adds `α × per_prefill_token × n` in
//!   all to the steps of the sequences decoding beside it (spread over the
//!   steps its prefill spans); its own time to first token stays about
//!   `n × per_prefill_token`, rounded up to whole steps.
//!
//! # Host stalls
//! [`ModelParams::step_time`] is a step's cost. The engine
//! ([`super::model::Engine`]) adds the host's stalls ([`super::stalls`]) that
//! fall in it, drawn from a seeded clock: 0 in the presets.
//!
//! A lone request (nothing decoding) takes `⌈n / max_num_batched_tokens⌉`
//! plain prefill steps to its first token, `⌈n / budget⌉ × step_base +
//! per_prefill_token × n`, for every `α`.

use super::blocks::BLOCK_TOKENS;
pub use super::stalls::HostStalls;
use std::time::Duration;

/// Engine parameters: the batch limits and the step-time cost model.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelParams {
    /// Most sequences in the running batch (vLLM `--max-num-seqs`).
    pub max_num_seqs: u32,
    /// Token budget of one step, prefill and decode tokens together
    /// (vLLM `--max-num-batched-tokens`).
    pub max_num_batched_tokens: u32,
    /// KV-cache capacity in tokens (prompt + generated of every running sequence).
    pub kv_cache_tokens: u32,
    /// Longest prompt + `max_tokens` a request may ask for (vLLM `--max-model-len`).
    pub max_model_len: u32,
    /// Fixed cost of every step (weights read, launch overhead).
    pub step_base: Duration,
    /// Cost of each prompt token computed in a step.
    pub per_prefill_token: Duration,
    /// Cost of each sequence decoding one token in a step.
    pub per_decode_seq: Duration,
    /// How much of a prefill's compute lengthens the steps of the sequences
    /// decoding beside it, in `[0, MAX_INTERFERENCE]` (see the module
    /// docs): 1 (default) = one shared batch step, 0 = prefill on other
    /// workers, over 1 = a mixed step computes prompts slower than alone.
    pub prefill_interference: f64,
    /// Tokens per KV block, a positive multiple of [`BLOCK_TOKENS`] (vLLM's
    /// `--block-size`: 16 on GPUs, 128 on its CPU backend). The prefix cache
    /// matches and keeps whole blocks, so a shared prefix is served only up
    /// to its last full block.
    pub block_tokens: u32,
    /// Cost, in a step, of each token of context a decoding sequence attends
    /// over (its prompt and what it generated so far): attention reads every
    /// cached token, so long contexts decode slower. 0 = decode cost flat in
    /// the context.
    pub per_context_token: Duration,
    /// Work each request costs once, charged to the step that first
    /// schedules it: what the server does per request beside the model
    /// (tokenizing, setting up the sequence and its stream), when it shares
    /// the engine's compute. 0 = none.
    pub per_request: Duration,
    /// Cost of each attention pair a prompt token computes (the token with
    /// each one before it in its sequence): prefill attention grows with the
    /// square of the prompt. 0 = prefill cost linear in the tokens.
    pub per_prefill_pair: Duration,
    /// What a step that computes any prompt tokens costs beyond
    /// `step_base` (another kernel path, the prompts' inputs built): vLLM
    /// on CPU, about 50 ms over a 42-ms decode base. 0 = none.
    pub per_prefill_step: Duration,
    /// The host's stalls ([`super::stalls`]): each step lengthened by the
    /// pauses falling in it, drawn by the engine. [`HostStalls::NONE`] in
    /// the presets; a profile of an engine sharing its cores measures them.
    pub stalls: HostStalls,
}

/// What one step carries, for its duration ([`ModelParams::step_time`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StepLoad {
    /// Prompt (or recompute) tokens computed.
    pub prefill_tokens: u64,
    /// Their attention pairs (module docs).
    pub prefill_pairs: u64,
    /// Sequences decoding one token.
    pub decode_seqs: u64,
    /// The decoders' context, summed: tokens each attends over.
    pub context_tokens: u64,
    /// Requests scheduled for the first time.
    pub admitted: u64,
}

/// The default [`ModelParams::prefill_interference`]: one shared batch step.
pub const SHARED_STEP: f64 = 1.0;
/// The largest [`ModelParams::prefill_interference`]: a prompt beside
/// decoders costing three times its lone prefill.
pub const MAX_INTERFERENCE: f64 = 3.0;

impl ModelParams {
    /// Checks the parameters are usable; the message names the offending field.
    pub fn validate(&self) -> Result<(), String> {
        if self.max_num_seqs == 0 {
            return Err("max_num_seqs must be at least 1".into());
        }
        if self.max_num_batched_tokens == 0 {
            return Err("max_num_batched_tokens must be at least 1".into());
        }
        if self.max_model_len < 2 {
            return Err("max_model_len must be at least 2".into());
        }
        if self.kv_cache_tokens < self.max_model_len {
            return Err(format!(
                "kv_cache_tokens ({}) must be at least max_model_len ({}) so one request always fits",
                self.kv_cache_tokens, self.max_model_len
            ));
        }
        if self.block_tokens == 0 || self.block_tokens % BLOCK_TOKENS != 0 {
            return Err(format!(
                "block_tokens must be a positive multiple of {BLOCK_TOKENS}, got {}",
                self.block_tokens
            ));
        }
        if self.step_base.is_zero() {
            return Err("step_base must be positive".into());
        }
        if !(0.0..=MAX_INTERFERENCE).contains(&self.prefill_interference) {
            return Err(format!(
                "prefill_interference must be between 0 and {MAX_INTERFERENCE}, got {}",
                self.prefill_interference
            ));
        }
        self.stalls.validate()
    }

    /// Whether prefill shares the batch step fully (`α ≥ 1`).
    fn shared_batch_step(&self) -> bool {
        self.prefill_interference >= SHARED_STEP
    }

    /// Duration of a step that computes `prefill_tokens` prompt tokens and
    /// decodes one token for each of `decode_seqs` sequences (the prompt
    /// tokens cost `α` of their compute beside decoders, all of it alone).
    pub fn batch_step_time(&self, prefill_tokens: u64, decode_seqs: u64) -> Duration {
        self.step_time(StepLoad {
            prefill_tokens,
            decode_seqs,
            ..StepLoad::default()
        })
    }

    /// Duration of a step carrying `load`: [`Self::batch_step_time`] plus
    /// the decoders' context and the requests it admits (module docs).
    pub fn step_time(&self, load: StepLoad) -> Duration {
        let fixed = if load.prefill_tokens > 0 {
            self.per_prefill_step.as_nanos()
        } else {
            0
        };
        let prefill = self.per_prefill_token.as_nanos() * u128::from(load.prefill_tokens)
            + self.per_prefill_pair.as_nanos() * u128::from(load.prefill_pairs)
            + fixed;
        let prefill = if load.decode_seqs == 0 {
            prefill
        } else {
            (prefill as f64 * self.prefill_interference.max(0.0)).round() as u128
        };
        let nanos = self.step_base.as_nanos()
            + prefill
            + self.per_decode_seq.as_nanos() * u128::from(load.decode_seqs)
            + self.per_context_token.as_nanos() * u128::from(load.context_tokens)
            + self.per_request.as_nanos() * u128::from(load.admitted);
        Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
    }

    /// Most prompt tokens a step with `decode_seqs` decoders can compute:
    /// the prefill lane's share that overlaps the step must fit in it.
    /// `u32::MAX` (no cap) at `α = 1`, with free prefill or with no decoder
    /// (a plain prefill step); at least 1.
    pub fn prefill_lane_cap(&self, decode_seqs: u64) -> u32 {
        let hidden = (1.0 - self.prefill_interference) * self.per_prefill_token.as_secs_f64();
        if self.shared_batch_step() || hidden <= 0.0 || decode_seqs == 0 {
            return u32::MAX;
        }
        let room =
            self.step_base.as_secs_f64() + self.per_decode_seq.as_secs_f64() * decode_seqs as f64;
        let cap = (room / hidden * (1.0 + 1e-12)).floor();
        if cap >= f64::from(u32::MAX) {
            u32::MAX
        } else {
            (cap as u32).max(1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(alpha: f64) -> ModelParams {
        ModelParams {
            max_num_seqs: 8,
            max_num_batched_tokens: 512,
            kv_cache_tokens: 10_000,
            max_model_len: 1000,
            step_base: Duration::from_millis(10),
            per_prefill_token: Duration::from_micros(100),
            per_decode_seq: Duration::from_micros(500),
            prefill_interference: alpha,
            block_tokens: BLOCK_TOKENS,
            per_context_token: Duration::ZERO,
            per_request: Duration::ZERO,
            per_prefill_pair: std::time::Duration::ZERO,
            per_prefill_step: std::time::Duration::ZERO,
            stalls: crate::sim::params::HostStalls::NONE,
        }
    }

    #[test]
    fn context_and_admissions_add_to_the_step_whatever_the_interference() {
        let ms = |x: f64| Duration::from_secs_f64(x / 1e3);
        let p = |alpha: f64| ModelParams {
            per_context_token: Duration::from_nanos(5_000),
            per_request: Duration::from_millis(30),
            per_prefill_pair: Duration::from_nanos(100),
            per_prefill_step: Duration::from_millis(5),
            stalls: crate::sim::params::HostStalls::NONE,
            ..params(alpha)
        };
        let load = StepLoad {
            prefill_tokens: 200,
            prefill_pairs: 20_000,
            decode_seqs: 4,
            context_tokens: 4 * 1_000,
            admitted: 1,
        };
        // 10 base + 20 prefill + 2 pairs + 5 prefill step + 2 decode + 20
        // context + 30 admission; the pairs and the prefill step's own cost
        // are prefill work, scaled by the interference.
        assert_eq!(p(1.0).step_time(load), ms(89.0));
        assert_eq!(p(0.0).step_time(load), ms(62.0));
        let decode_only = StepLoad {
            prefill_tokens: 0,
            prefill_pairs: 0,
            ..load
        };
        assert_eq!(p(1.0).step_time(decode_only), ms(62.0));
        assert_eq!(p(1.0).batch_step_time(200, 4), ms(37.0), "none carried");
    }

    #[test]
    fn interference_scales_only_the_prefill_term() {
        let ms = |x: f64| Duration::from_secs_f64(x / 1e3);
        // 200 prompt tokens (20 ms of compute) and 4 decoders (2 ms).
        assert_eq!(params(1.0).batch_step_time(200, 4), ms(32.0));
        assert_eq!(params(0.5).batch_step_time(200, 4), ms(22.0));
        assert_eq!(params(0.0).batch_step_time(200, 4), ms(12.0));
        assert_eq!(
            params(0.0).batch_step_time(0, 4),
            params(1.0).batch_step_time(0, 4)
        );
        // Nothing decoding: a plain prefill step at full cost.
        assert_eq!(params(0.0).batch_step_time(200, 0), ms(30.0));
    }

    #[test]
    fn the_lane_cap_is_what_the_overlapping_share_can_hide() {
        assert_eq!(params(1.0).prefill_lane_cap(4), u32::MAX);
        // α = 0: the step (10 + 0.5·4 = 12 ms) hides 12 ms / 100 µs = 120 tokens.
        assert_eq!(params(0.0).prefill_lane_cap(4), 120);
        // α = 0.5: half of each token's 100 µs is hidden: 240 tokens.
        assert_eq!(params(0.5).prefill_lane_cap(4), 240);
        assert_eq!(params(0.0).prefill_lane_cap(1), 105);
        assert_eq!(params(0.0).prefill_lane_cap(0), u32::MAX, "no decoder");
        let free = ModelParams {
            per_prefill_token: Duration::ZERO,
            ..params(0.0)
        };
        assert_eq!(free.prefill_lane_cap(0), u32::MAX);
        let slow = ModelParams {
            per_prefill_token: Duration::from_secs(1),
            ..params(0.0)
        };
        assert_eq!(slow.prefill_lane_cap(1), 1, "a prompt always progresses");
    }

    #[test]
    fn interference_outside_zero_to_three_is_refused() {
        for bad in [-0.1, 3.5, f64::NAN] {
            let err = params(bad).validate().unwrap_err();
            assert!(err.contains("prefill_interference"), "{err}");
        }
        assert_eq!(params(0.0).validate(), Ok(()));
        assert_eq!(params(1.5).validate(), Ok(()));
    }
}

//! Named engine presets: parameter sets that approximate a kind of deployment.
//!
//! Every preset is *simulated*, not measured: the costs are round numbers
//! chosen to give the right shape (a fixed per-step cost that dominates small
//! batches, per-token prefill and per-sequence decode costs, a KV-cache limit),
//! not a calibration of any particular GPU.

use std::time::Duration;

use super::blocks::BLOCK_TOKENS;
use super::model::ModelParams;

/// Names accepted by [`by_name`].
pub const NAMES: &[&str] = &["tiny", "7b-24gb"];

/// A fast, small engine for tests and demos: 5 ms steps, 32 sequences, a knee
/// in the tens of requests per second (about 72 req/s for 128 in / 64 out
/// tokens), so a sweep brackets it in seconds. Approximates nothing real.
pub fn tiny() -> ModelParams {
    ModelParams {
        max_num_seqs: 32,
        max_num_batched_tokens: 2048,
        kv_cache_tokens: 16_384,
        max_model_len: 4096,
        step_base: Duration::from_millis(5),
        per_prefill_token: Duration::from_micros(5),
        per_decode_seq: Duration::from_micros(50),
        prefill_interference: 1.0,
        block_tokens: BLOCK_TOKENS,
        per_context_token: std::time::Duration::ZERO,
        per_request: std::time::Duration::ZERO,
        per_prefill_pair: std::time::Duration::ZERO,
        per_prefill_step: std::time::Duration::ZERO,
        stalls: crate::sim::params::HostStalls::NONE,
    }
}

/// Shaped like a 7B-parameter model in fp16 served by vLLM on a single 24 GB
/// GPU (RTX 4090 / L4 / A10G class), **simulated, not measured**:
///
/// - `max_num_seqs` 256 and `max_num_batched_tokens` 2048 (vLLM defaults);
/// - 14 ms fixed step cost: reading ~14.5 GB of weights per step at ~1 TB/s;
/// - 100 µs per prefill token (~10k prompt tokens/s, compute-bound);
/// - 60 µs per decoding sequence (its KV reads and per-token compute);
/// - a 57,344-token KV cache: ~7 GiB left after weights at 0.9 memory
///   utilisation, at 128 KiB per token for a GQA model (32 layers, 8 KV heads
///   of 128, fp16); `max_model_len` 8192.
pub fn seven_b_24gb() -> ModelParams {
    ModelParams {
        max_num_seqs: 256,
        max_num_batched_tokens: 2048,
        kv_cache_tokens: 57_344,
        max_model_len: 8192,
        step_base: Duration::from_millis(14),
        per_prefill_token: Duration::from_micros(100),
        per_decode_seq: Duration::from_micros(60),
        prefill_interference: 1.0,
        block_tokens: BLOCK_TOKENS,
        per_context_token: std::time::Duration::ZERO,
        per_request: std::time::Duration::ZERO,
        per_prefill_pair: std::time::Duration::ZERO,
        per_prefill_step: std::time::Duration::ZERO,
        stalls: crate::sim::params::HostStalls::NONE,
    }
}

/// The preset called `name`, if any.
pub fn by_name(name: &str) -> Option<ModelParams> {
    match name {
        "tiny" => Some(tiny()),
        "7b-24gb" => Some(seven_b_24gb()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_named_preset_is_valid() {
        for name in NAMES {
            let p = by_name(name).expect("listed preset exists");
            assert_eq!(p.validate(), Ok(()), "{name}");
        }
    }
}

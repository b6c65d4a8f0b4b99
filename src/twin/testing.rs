//! Test fixtures for the twin: a complete profile with known values.

use super::profile::{
    Estimate, PrefixCaching, ProbeSummary, ProfileParams, ServerProfile, SCHEMA_VERSION,
};

/// A profile of the `tiny` preset's parameters with ±5% (2σ) on the costs,
/// a batch limit seen at 32, a KV cache reported as 16,384 tokens, a budget
/// only known to be at least 1,024, and full interference.
pub fn sample() -> ServerProfile {
    let fit = |v: f64| Estimate::fitted(v, v * 0.025, 0.0, "synthetic");
    ServerProfile {
        schema_version: SCHEMA_VERSION,
        kneecap_version: "test".into(),
        base_url: "http://127.0.0.1:1".into(),
        simulated: true,
        model: "kneecap-sim".into(),
        gauges: Some("vllm".into()),
        budget_s: 60.0,
        elapsed_s: 50.0,
        params: ProfileParams {
            step_base_ms: fit(5.0),
            prefill_token_us: fit(5.0),
            prefill_fixed_ms: fit(5.2),
            decode_seq_us: fit(50.0),
            max_num_seqs: Estimate::fitted(32.0, 0.5, 1.0, "synthetic"),
            kv_cache_tokens: Estimate::reported(16_384.0, "synthetic"),
            max_num_batched_tokens: Estimate::lower_bound(1024.0, "synthetic"),
            max_model_len: Estimate::reported(4096.0, "synthetic"),
            prefill_interference: Estimate::fitted(1.0, 0.02, 0.0, "synthetic"),
            prefix_caching: PrefixCaching {
                enabled: Some(true),
                saved_fraction: Some(0.98),
                uncertainty: Some(0.01),
                how: "synthetic".into(),
            },
        },
        warnings: vec![],
        probes: vec![ProbeSummary {
            name: "prefill".into(),
            requests: 12,
            failed: 0,
            duration_s: 3.0,
            detail: "synthetic".into(),
        }],
    }
}

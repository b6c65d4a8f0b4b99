//! What a server publishes about itself: vLLM's `vllm:cache_config_info` on
//! `/metrics` (its KV cache in tokens and blocks, the block size, whether
//! prefix caching is on) and, from a vLLM started with
//! `VLLM_SERVER_DEV_MODE=1`, its scheduler limits in
//! `GET /server_info?config_format=json`. Pure parsing; the callers fetch.

use super::prom_text::parse_labels;

/// vLLM's cache configuration, as its info metric's labels give it (one
/// engine's: the first line; data-parallel engines share one config).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CacheConfigInfo {
    /// `kv_cache_size_tokens`: the KV cache the engine allocated, in tokens.
    pub kv_cache_tokens: Option<u64>,
    /// `block_size`: tokens per KV block (the prefix cache's unit).
    pub block_size: Option<u32>,
    /// `num_gpu_blocks`: KV blocks allocated (CPU blocks on a CPU build).
    pub num_blocks: Option<u64>,
    /// `enable_prefix_caching`.
    pub prefix_caching: Option<bool>,
    /// `kv_cache_memory_bytes`, when the engine was given a byte budget.
    pub kv_cache_bytes: Option<u64>,
}

/// The info metric's name.
pub const CACHE_CONFIG_INFO: &str = "vllm:cache_config_info";

/// The cache configuration in a Prometheus text body, if the server
/// publishes one (labels it lacks, or holds as `None`, stay `None`).
pub fn parse_cache_config(text: &str) -> Option<CacheConfigInfo> {
    let labels = text
        .lines()
        .find_map(|l| parse_labels(l, CACHE_CONFIG_INFO))?;
    let get = |key: &str| {
        labels
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    };
    let num = |key: &str| {
        get(key)
            .and_then(|v| v.parse::<f64>().ok())
            .filter(|v| *v >= 0.0)
    };
    Some(CacheConfigInfo {
        kv_cache_tokens: num("kv_cache_size_tokens").map(|v| v as u64),
        block_size: num("block_size").map(|v| v as u32),
        num_blocks: num("num_gpu_blocks").map(|v| v as u64),
        prefix_caching: get("enable_prefix_caching").and_then(|v| match v {
            "True" | "true" | "1" => Some(true),
            "False" | "false" | "0" => Some(false),
            _ => None,
        }),
        kv_cache_bytes: num("kv_cache_memory_bytes").map(|v| v as u64),
    })
}

/// vLLM's scheduler limits, as its dev-mode `/server_info` gives them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SchedulerLimits {
    /// `max_num_seqs`: the running batch's limit.
    pub max_num_seqs: Option<u32>,
    /// `max_num_batched_tokens`: the token budget of one engine step.
    pub max_num_batched_tokens: Option<u32>,
    /// `enable_chunked_prefill`.
    pub chunked_prefill: Option<bool>,
}

/// The path that answers with vLLM's whole configuration as JSON (served
/// only with `VLLM_SERVER_DEV_MODE=1`).
pub const SERVER_INFO_PATH: &str = "/server_info?config_format=json";

/// The parts of `/server_info`'s answer read here; the rest is ignored.
#[derive(serde::Deserialize)]
struct ServerInfoBody {
    vllm_config: VllmConfig,
}

#[derive(serde::Deserialize)]
struct VllmConfig {
    scheduler_config: SchedulerConfig,
}

#[derive(serde::Deserialize)]
struct SchedulerConfig {
    max_num_seqs: Option<u32>,
    max_num_batched_tokens: Option<u32>,
    enable_chunked_prefill: Option<bool>,
}

/// The scheduler limits in a `/server_info?config_format=json` body, or
/// `None` when it is not that (another server's page, vLLM's text form).
pub fn parse_scheduler_limits(body: &[u8]) -> Option<SchedulerLimits> {
    let b: ServerInfoBody = serde_json::from_slice(body).ok()?;
    let s = b.vllm_config.scheduler_config;
    Some(SchedulerLimits {
        max_num_seqs: s.max_num_seqs,
        max_num_batched_tokens: s.max_num_batched_tokens,
        chunked_prefill: s.enable_chunked_prefill,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// vLLM 0.32's line on a CPU build (labels abridged, order kept).
    const VLLM_032: &str = "# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig\n\
# TYPE vllm:cache_config_info gauge\n\
vllm:cache_config_info{_block_size_resolved=\"True\",block_size=\"128\",cache_dtype=\"auto\",enable_prefix_caching=\"True\",engine=\"0\",gpu_memory_utilization=\"0.92\",kv_cache_max_concurrency=\"45.5\",kv_cache_memory_bytes=\"2147483648\",kv_cache_size_tokens=\"93184\",num_cpu_blocks=\"None\",num_gpu_blocks=\"728\",num_gpu_blocks_override=\"None\"} 1.0\n\
vllm:num_requests_running{engine=\"0\",model_name=\"smollm2\"} 0.0\n";

    #[test]
    fn reads_vllms_cache_config() {
        let c = parse_cache_config(VLLM_032).unwrap();
        assert_eq!(
            c,
            CacheConfigInfo {
                kv_cache_tokens: Some(93_184),
                block_size: Some(128),
                num_blocks: Some(728),
                prefix_caching: Some(true),
                kv_cache_bytes: Some(2_147_483_648),
            }
        );
        // 728 blocks of 128 tokens: the two figures agree.
        assert_eq!(728 * 128, c.kv_cache_tokens.unwrap());
    }

    #[test]
    fn missing_or_none_labels_stay_unknown() {
        let older = "vllm:cache_config_info{block_size=\"16\",enable_prefix_caching=\"False\",num_gpu_blocks=\"None\"} 1.0\n";
        let c = parse_cache_config(older).unwrap();
        assert_eq!(c.block_size, Some(16));
        assert_eq!(c.prefix_caching, Some(false));
        assert_eq!((c.num_blocks, c.kv_cache_tokens), (None, None));
        assert_eq!(parse_cache_config("vllm:num_requests_running 1\n"), None);
        assert_eq!(parse_cache_config("llamacpp:requests_processing 0\n"), None);
    }

    #[test]
    fn reads_the_scheduler_limits_of_a_dev_mode_vllm() {
        // vLLM 0.32's answer, abridged to a few of its keys.
        let body = br#"{"vllm_config":{"model_config":{"max_model_len":2048},"scheduler_config":{"runner_type":"generate","max_num_batched_tokens":2048,"max_num_seqs":128,"enable_chunked_prefill":true,"policy":"fcfs"}},"vllm_env":{},"system_env":{}}"#;
        assert_eq!(
            parse_scheduler_limits(body),
            Some(SchedulerLimits {
                max_num_seqs: Some(128),
                max_num_batched_tokens: Some(2048),
                chunked_prefill: Some(true),
            })
        );
        // Without config_format=json vLLM sends its config as one string.
        let text = br#"{"vllm_config":"model='x', max_num_seqs=128"}"#;
        assert_eq!(parse_scheduler_limits(text), None);
        assert_eq!(parse_scheduler_limits(b"Not Found"), None);
    }
}

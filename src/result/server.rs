//! What the server said about itself when a run or sweep began (`server` in
//! both results): the model it loaded and its context length from
//! `GET /v1/models`, its KV cache and prefix caching from vLLM's
//! `vllm:cache_config_info`, its scheduler limits from a dev-mode vLLM's
//! `/server_info`. Reported by the server, not measured.

/// The server's own account of what a result was measured on; a field the
/// server does not publish is left out.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct ServerInfo {
    /// Where the cache and scheduler figures come from: `vllm` (its info
    /// metric, its `/server_info`); absent when only the model listing
    /// answered.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// `root` of the first `/v1/models` entry: what the server loaded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model_root: Option<String>,
    /// `max_model_len` of that entry: the context length, prompt and output.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_model_len: Option<u32>,
    /// The KV cache the engine allocated, in tokens.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kv_cache_tokens: Option<u64>,
    /// Tokens per KV block (the prefix cache's unit).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub block_size: Option<u32>,
    /// KV blocks allocated.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub num_blocks: Option<u64>,
    /// Whether the server caches prompt prefixes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prefix_caching: Option<bool>,
    /// The KV cache's size in bytes, when the engine was given one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kv_cache_bytes: Option<u64>,
    /// The running batch's limit (vLLM's `max_num_seqs`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_num_seqs: Option<u32>,
    /// The token budget of one engine step (`max_num_batched_tokens`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_num_batched_tokens: Option<u32>,
    /// Whether long prompts are prefilled in chunks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chunked_prefill: Option<bool>,
}

impl ServerInfo {
    /// True when the server said nothing at all.
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}

//! What the server said about itself when a run or sweep began (`server` in
//! both results): the model it loaded and its context length from
//! `GET /v1/models`, its KV cache and prefix caching from vLLM's
//! `vllm:cache_config_info`. Reported by the server, not measured.

/// The server's own account of what a result was measured on; every field
/// is `null` where the server does not publish it.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct ServerInfo {
    /// Where the cache figures come from: `vllm` (its info metric), or
    /// `null` when only the model listing answered.
    pub source: Option<String>,
    /// `root` of the first `/v1/models` entry: what the server loaded.
    pub model_root: Option<String>,
    /// `max_model_len` of that entry: the context length, prompt and output.
    pub max_model_len: Option<u32>,
    /// The KV cache the engine allocated, in tokens.
    pub kv_cache_tokens: Option<u64>,
    /// Tokens per KV block (the prefix cache's unit).
    pub block_size: Option<u32>,
    /// KV blocks allocated.
    pub num_blocks: Option<u64>,
    /// Whether the server caches prompt prefixes.
    pub prefix_caching: Option<bool>,
    /// The KV cache's size in bytes, when the engine was given one.
    pub kv_cache_bytes: Option<u64>,
}

impl ServerInfo {
    /// True when the server said nothing at all.
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}

//! The server's prefix-cache hit rate over a run or a sweep step
//! (`prefix_cache` in both results).

/// Prompt tokens the server looked up in its prefix cache during a run, and
/// how many it found: vLLM's `prefix_cache_{queries,hits}` counters scraped
/// before and after, or llama.cpp's per-request `timings.cache_n` (hits) and
/// `cache_n + prompt_n` (queries).
#[derive(Debug, Clone, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub struct PrefixCacheStats {
    /// `vllm` (metrics counters) or `llama.cpp` (per-request timings).
    pub source: String,
    /// Prompt tokens looked up.
    pub queried_tokens: u64,
    /// Prompt tokens found cached.
    pub hit_tokens: u64,
    /// `hit_tokens / queried_tokens` (`null` when nothing was queried).
    pub hit_rate: Option<f64>,
}

impl PrefixCacheStats {
    /// The stats for `queried` and `hit` tokens from `source`.
    pub fn new(source: &str, queried: u64, hit: u64) -> Self {
        Self {
            source: source.into(),
            queried_tokens: queried,
            hit_tokens: hit,
            hit_rate: (queried > 0).then(|| hit as f64 / queried as f64),
        }
    }

    /// True when the counts are the client's own (llama.cpp's per-request
    /// timings), not a server-wide counter's delta.
    pub fn per_request(&self) -> bool {
        self.source == "llama.cpp"
    }

    /// The counts of two disjoint sets of requests added up (`None` from two
    /// different sources).
    pub fn add(&self, other: &Self) -> Option<Self> {
        (self.source == other.source).then(|| {
            Self::new(
                &self.source,
                self.queried_tokens + other.queried_tokens,
                self.hit_tokens + other.hit_tokens,
            )
        })
    }
}

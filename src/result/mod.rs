//! Result: every result kneecap writes and reads back, as serde-derived
//! types, below the floors that compute them (`sweep`, `merge`, `cmd`) and
//! the one that renders them (`report`). A sweep ([`sweep::SweepResult`]:
//! its steps, knee, calibration and cost), the one verdict type
//! ([`Verdict`], with the confidence test's [`Decision`]), the blocks of a
//! sharded run or sweep ([`shard`], [`shard_sweep`]: typed, with `add` for
//! the merge), and the step evidence written beside them ([`evidence`]).
//! Plain data with accessors and additions; no clock, no I/O, nothing
//! imported from the floors above.

pub mod cost;
pub mod evidence;
#[cfg(test)]
pub(crate) mod fixture;
pub mod series;
pub mod shard;
pub mod shard_sweep;
pub mod sweep;
pub mod verdict;

pub use verdict::{Decision, LoadUnit, Verdict};

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
}

//! RunResult: everything one `kneecap run` (or `kneecap merge` of a
//! sharded run) produced — what was asked for ([`RunHeader`]), the summary
//! and the per-request records, and what kneecap adds ([`KneecapInfo`]).
//! Built by [`super::assemble`]; written and read back as
//! [`super::json::RunJson`]; rendered by `report`. Plain data with accessors.

use super::cache::PrefixCacheStats;
use super::shard::{MergedBlock, ShardRun};
use crate::client::openai::Backend;
use crate::metrics::stats::Summary;
use crate::metrics::MetricName;
use crate::metrics::RequestRecord;

/// Everything a run produced; every output renders from this.
#[derive(Debug, Clone)]
pub struct RunResult {
    /// Local time `YYYYMMDD-HHMMSS`, as vLLM writes it.
    pub date: String,
    /// What was asked for: vLLM's header keys and kneecap's identity of the load.
    pub header: RunHeader,
    pub summary: Summary,
    /// Per-request records (dataset order).
    pub records: Vec<RequestRecord>,
    pub kneecap: KneecapInfo,
}

/// What identifies a run: vLLM's header keys and kneecap's identity of the
/// load. `kneecap run` fills it from its config; `kneecap merge` reads it
/// back from a shard's JSON ([`super::json::RunJson::header`]).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RunHeader {
    pub backend: String,
    pub label: Option<String>,
    pub model_id: String,
    pub tokenizer_id: Option<String>,
    pub num_prompts: usize,
    /// `--metadata` pairs, in the order given.
    pub metadata: Vec<(String, String)>,
    pub request_rate: f64,
    pub burstiness: f64,
    pub max_concurrency: Option<usize>,
    /// (strategy, start rps, end rps) when ramp-up was used.
    pub ramp_up: Option<(String, u32, u32)>,
    /// Which stats blocks to show (`--percentile-metrics`).
    pub percentile_metrics: Vec<MetricName>,
    /// `--metric-percentiles`.
    pub percentiles: Vec<f64>,
    /// Server root the run targeted (no credentials).
    pub target: String,
    pub simulated: bool,
    pub sim_preset: Option<String>,
    pub endpoint: String,
    pub dataset: String,
    /// Human description of the arrival process.
    pub arrival: String,
    pub seed: u64,
    /// `--duration` bound, when the run was time-bounded.
    pub duration_bound_s: Option<f64>,
    /// What the server said about itself (`kneecap.server`).
    pub server: Option<super::ServerInfo>,
}

/// What kneecap adds beyond vLLM's keys, besides the load's identity (which
/// is in the [`RunHeader`]).
#[derive(Debug, Clone, Default)]
pub struct KneecapInfo {
    pub version: String,
    /// Stopped by Ctrl-C / SIGTERM: the result is partial.
    pub interrupted: bool,
    /// RFC 3339 wall-clock start.
    pub started_at: String,
    /// First few failure messages (secrets redacted).
    pub first_errors: Vec<String>,
    pub warmups_ok: Option<(usize, usize)>,
    /// Did the generator keep to its schedule (see [`GeneratorVerdict`]).
    pub generator: Option<GeneratorVerdict>,
    /// `--shard i/N`: what `kneecap merge` needs (written as `kneecap.shard`).
    pub shard: Option<ShardRun>,
    /// A result made by `kneecap merge`: how it was merged (`kneecap.merged`).
    pub merged: Option<MergedBlock>,
    /// The server's prefix-cache hit rate over the run (`kneecap.prefix_cache`).
    pub prefix_cache: Option<PrefixCacheStats>,
    /// The server's speculative decoding over the run (`kneecap.spec_decode`,
    /// and vLLM's `spec_decode_*` keys).
    pub spec_decode: Option<super::SpecDecodeStats>,
    /// `--gpu-metrics-url`: the GPUs' power and energy over the run
    /// (`kneecap.gpu`).
    pub gpu: Option<super::GpuStats>,
    /// `--multi-turn`: the sessions (`kneecap.sessions`).
    pub sessions: Option<crate::metrics::session::SessionSummary>,
}

/// The load generator's self-check for a run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GeneratorVerdict {
    pub health: crate::metrics::health::GeneratorHealth,
    /// False with `--request-rate inf` or a closed loop, where lateness is not a generator property.
    pub lateness_judged: bool,
    pub cpu_busy_fraction: Option<f64>,
    pub runtime_lag_p99_ms: Option<f64>,
}

impl RunResult {
    /// Which stats blocks are shown/saved, following vLLM: client queue time
    /// only with a concurrency cap; queue-inclusive E2EL only with a cap and
    /// a finite rate; no TTFT, TPOT or ITL for a pooling backend.
    pub fn shown_metrics(&self) -> Vec<MetricName> {
        let pooling = Backend::is_pooling_name(&self.header.backend);
        self.header
            .percentile_metrics
            .iter()
            .copied()
            .filter(|m| match m {
                MetricName::Ttft | MetricName::Tpot | MetricName::Itl => !pooling,
                MetricName::ClientQueueTime => self.header.max_concurrency.is_some(),
                MetricName::E2elIncludingClientQueue => {
                    self.header.max_concurrency.is_some() && self.header.request_rate.is_finite()
                }
                _ => true,
            })
            .collect()
    }

    /// The distribution behind a metric name.
    pub fn distribution(&self, m: MetricName) -> &crate::metrics::stats::Distribution {
        let s = &self.summary;
        match m {
            MetricName::Ttft => &s.ttft,
            MetricName::Tpot => &s.tpot,
            MetricName::Itl => &s.itl,
            MetricName::E2el => &s.e2el,
            MetricName::ClientQueueTime => &s.client_queue_time,
            MetricName::E2elIncludingClientQueue => &s.e2el_including_client_queue,
        }
    }
}

//! Report: the one result type of a run ([`RunResult`]), how it is put
//! together ([`assemble`]) and its renderings — the vLLM-compatible JSON
//! ([`json::RunJson`], also read back) and the console summary. Renderers
//! are pure functions of the result; writing files happens in [`save`].

pub mod assemble;
pub mod chart;
pub mod console;
pub mod explain;
pub mod html;
pub mod json;
pub mod knee_text;
pub mod misses;
pub mod numbers;
pub mod save;
pub mod sessions;
pub mod table;

use crate::client::openai::Backend;
use crate::metrics::stats::Summary;
use crate::metrics::MetricName;
use crate::metrics::RequestRecord;
pub use assemble::{RunHeader, RunOutcome};

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
    pub shard: Option<crate::result::shard::ShardRun>,
    /// A result made by `kneecap merge`: how it was merged (`kneecap.merged`).
    pub merged: Option<json::kneecap::MergedBlock>,
    /// The server's prefix-cache hit rate over the run (`kneecap.prefix_cache`).
    pub prefix_cache: Option<crate::result::PrefixCacheStats>,
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
        let pooling = Backend::from_name(&self.header.backend).is_some_and(Backend::is_pooling);
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

/// Python's `str(float)` for the few values vLLM prints that way (`10.0`, `inf`, `2.5`).
pub fn python_float(v: f64) -> String {
    if v.is_infinite() {
        return if v > 0.0 { "inf".into() } else { "-inf".into() };
    }
    if v.fract() == 0.0 && v.abs() < 1e16 {
        return format!("{v:.1}");
    }
    format!("{v}")
}

#[cfg(test)]
mod tests {
    use super::python_float;

    #[test]
    fn floats_print_like_python() {
        assert_eq!(python_float(10.0), "10.0");
        assert_eq!(python_float(2.5), "2.5");
        assert_eq!(python_float(f64::INFINITY), "inf");
    }
}

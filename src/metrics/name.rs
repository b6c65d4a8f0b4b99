//! Names: the shared vocabulary of metrics — the metric names that get a
//! stats block (vLLM's `--percentile-metrics`) and the percentile set kneecap
//! always computes for its own numbers.
//! No logic beyond naming.

/// Percentiles kneecap always computes for its own block and for every sweep
/// step (p50, p90, p99, p99.9), whatever `--metric-percentiles` says.
pub const KNEECAP_PERCENTILES: [f64; 4] = [50.0, 90.0, 99.0, 99.9];

/// An unknown `--percentile-metrics` key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--percentile-metrics: unknown metric '{0}' (choose from ttft, tpot, itl, e2el, client_queue_time, e2el_including_client_queue)")]
pub struct UnknownMetric(pub String);

/// Metrics that can get a stats block (vLLM's `--percentile-metrics`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricName {
    Ttft,
    Tpot,
    Itl,
    E2el,
    ClientQueueTime,
    E2elIncludingClientQueue,
}

impl MetricName {
    /// The key used in flags and JSON (`ttft`, `e2el`, ...).
    pub fn key(self) -> &'static str {
        match self {
            MetricName::Ttft => "ttft",
            MetricName::Tpot => "tpot",
            MetricName::Itl => "itl",
            MetricName::E2el => "e2el",
            MetricName::ClientQueueTime => "client_queue_time",
            MetricName::E2elIncludingClientQueue => "e2el_including_client_queue",
        }
    }

    /// Parse a `--percentile-metrics` key; the error names the flag.
    pub fn parse(s: &str) -> Result<Self, UnknownMetric> {
        Ok(match s.trim() {
            "ttft" => MetricName::Ttft,
            "tpot" => MetricName::Tpot,
            "itl" => MetricName::Itl,
            "e2el" => MetricName::E2el,
            "client_queue_time" => MetricName::ClientQueueTime,
            "e2el_including_client_queue" => MetricName::E2elIncludingClientQueue,
            other => return Err(UnknownMetric(other.to_string())),
        })
    }
}

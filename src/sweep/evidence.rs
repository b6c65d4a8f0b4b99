//! Evidence: everything one sweep step left behind, in the form both the
//! live sweep (from its request records) and `kneecap merge` (from the
//! shards' summed counters and merged histograms) can produce, and that the
//! one step judge ([`super::step::judge_step`]) weighs. Plain data. PURE.

use super::confidence::SloConfidence;
use super::slo::SloOutcome;
use super::steady::Steadiness;
use crate::client::scrape::QueueSample;
use crate::metrics::health::GeneratorHealth;
use crate::metrics::stats::Distribution;
use std::collections::BTreeMap;
use std::time::Duration;

/// The latency distributions of a step's measurement window.
#[derive(Debug, Clone, Default)]
pub struct StepDists {
    pub ttft: Distribution,
    pub tpot: Distribution,
    pub itl: Distribution,
    pub e2el: Distribution,
    pub ttft_from_due: Distribution,
    /// Dispatch lateness (sent − due).
    pub lateness: Distribution,
}

/// The counts and rates of a step's measurement window.
#[derive(Debug, Clone, Default)]
pub struct StepCounts {
    /// Requests due in the window (the error rate's denominator).
    pub n_requests: usize,
    pub completed: usize,
    pub failed: usize,
    /// Requests meeting every per-request SLO, per second.
    pub goodput: f64,
    pub output_token_rate: f64,
    pub mean_input_tokens: f64,
    pub mean_output_tokens: f64,
    pub errors_by_kind: BTreeMap<String, u64>,
    /// The first few failure messages (redacted by the client at the source).
    pub first_errors: Vec<String>,
}

/// Everything one step left behind, in the form both the live sweep and
/// `kneecap merge` can produce.
#[derive(Debug, Clone, Default)]
pub struct StepEvidence {
    pub load: f64,
    /// The measurement window (from the step start).
    pub window: (Duration, Duration),
    pub counts: StepCounts,
    pub dists: StepDists,
    /// One outcome per configured SLO.
    pub slo_outcomes: Vec<SloOutcome>,
    /// The client-side steady-state check (the queue trend is added here).
    pub steadiness: Steadiness,
    /// The server's queue gauges over the step, and where they came from.
    pub queue: Vec<QueueSample>,
    pub queue_source: Option<String>,
    pub generator: GeneratorHealth,
    pub cpu_busy_fraction: Option<f64>,
    pub event_loop_lag_p99_ms: Option<f64>,
    /// Warnings beyond the SLOs' and the generator's (e.g. a shard late to its slot).
    pub extra_warnings: Vec<String>,
    /// Cut short by a signal (on some shard): the verdict is `interrupted`.
    pub interrupted: bool,
    /// An adaptive step: the confidence asked and each SLO's confidence
    /// (aligned with `slo_outcomes`).
    pub confidence: Option<(f64, Vec<Option<SloConfidence>>)>,
    /// The adaptive step ended its releases early, decided.
    pub ended_early: bool,
    /// The twin's prior on the verdict, as the step weighed it (its
    /// confidences above include it).
    pub twin_prior: Option<crate::result::twin::StepPriorRow>,
}

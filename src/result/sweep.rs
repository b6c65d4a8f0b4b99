//! SweepResult: the one result type of a sweep. The sweep JSON, the console
//! table and charts, the HTML report, `kneecap report` and `kneecap compare`
//! all render from it. Plain serializable data; no logic beyond accessors
//! and pricing ([`SweepResult::price`]).

use super::cache::PrefixCacheStats;
use super::cost::{usd_per_million_output_tokens, CostSummary, Pricing};
use super::explain::KneeExplain;
use super::series::LatencyPoint;
use super::shard_sweep::{MergedSweep, StepShard, SweepIdentity};
pub use super::verdict::{Decision, LoadUnit, Verdict};
use crate::client::scrape::QueueSample;
use serde::{Deserialize, Serialize};

/// How a statistic with no finite value is written: it lands on a failed
/// request, counted as +∞ (`sweep::slo`).
pub const INFINITE: &str = "∞ (failed)";

/// Schema version of the sweep JSON.
pub const SCHEMA_VERSION: u32 = 1;

/// The sweep JSON's `kind`: what tells a sweep from a run result.
pub const KIND: &str = "kneecap_sweep";

/// Whether a parsed JSON object is a sweep result (its `kind` is [`KIND`]).
pub fn is_sweep(doc: &serde_json::Map<String, serde_json::Value>) -> bool {
    doc.get("kind").and_then(serde_json::Value::as_str) == Some(KIND)
}

/// The whole sweep.
#[derive(Debug, Clone, Serialize, Deserialize, Default)]
pub struct SweepResult {
    /// Always [`KIND`].
    pub kind: String,
    pub schema_version: u32,
    pub kneecap_version: String,
    pub started_at: String,
    /// The workload the knee belongs to (a knee without it is meaningless).
    pub workload: Workload,
    /// What the server said about itself when the sweep began: the model it
    /// loaded, its context length, its KV cache (vLLM's info metric).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<super::ServerInfo>,
    /// The SLOs as given (`p99_ttft_ms<=500`, ...).
    pub slos: Vec<String>,
    pub max_error_rate: f64,
    /// `rate` (open loop, req/s) or `concurrency` (closed loop, streams).
    pub mode: LoadUnit,
    /// The calibration probe, when one ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calibration: Option<CalibrationRow>,
    /// `--twin` / `--predict`: the knee the twin predicted, beside the
    /// measured one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prediction: Option<super::twin::TwinKnee>,
    /// Every step in the order it ran.
    pub steps: Vec<StepResult>,
    pub knee: KneeSummary,
    /// Estimated service rate μ (req/s) from the throughput plateau.
    pub service_rate_estimate: Option<f64>,
    /// Lowest load at which the server's waiting queue left zero.
    pub queue_onset_load: Option<f64>,
    /// The built-in simulator's computed μ, when the target was the simulator.
    pub sim_service_rate: Option<f64>,
    /// True when the target was the built-in simulator: numbers are simulated.
    pub simulated: bool,
    /// Stopped by Ctrl-C / SIGTERM: the steps so far are kept.
    pub interrupted: bool,
    /// True once the search finished (false while running or if interrupted).
    pub complete: bool,
    /// A shard's file (`--shard i/N`): its identity (`kneecap merge` reads it);
    /// its steps hold only its share of the load.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<SweepIdentity>,
    /// A merged sharded sweep: which shards, how well their steps aligned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merged: Option<MergedSweep>,
    /// `--gpu-hour-cost`: dollars per million output tokens at the knee.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<CostSummary>,
}

/// Workload shape printed beside the knee.
#[derive(Debug, Clone, Serialize, Deserialize, Default)]
pub struct Workload {
    pub target: String,
    pub endpoint: String,
    pub model: String,
    pub dataset: String,
    /// Mean prompt tokens the requests carried (server usage when reported).
    pub mean_input_tokens: f64,
    /// Mean output tokens requested (`max_tokens`).
    pub mean_output_tokens: f64,
    pub arrival: String,
    pub burstiness: f64,
    pub seed: u64,
    pub step_warmup_s: f64,
    pub step_min_duration_s: f64,
    pub step_min_requests: usize,
    /// `--multi-turn`: the session shape (the load is then sessions per
    /// second, or users, and every turn is one request).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sessions: Option<String>,
}

/// The knee as an interval.
#[derive(Debug, Clone, Serialize, Deserialize, Default, PartialEq)]
pub struct KneeSummary {
    /// Highest passing load below the lowest failing one.
    pub last_pass: Option<f64>,
    /// Lowest failing load.
    pub first_fail: Option<f64>,
    /// Goodput (req/s meeting every SLO) at `last_pass`.
    pub goodput_at_knee: Option<f64>,
    /// The search stopped because the load generator could not go higher.
    pub bounded_by_generator: bool,
    /// A step passed above a failing one: the curve is not monotonic.
    pub non_monotonic: bool,
    /// Confidence (0–1) that the `last_pass` step really meets the SLOs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_pass_confidence: Option<f64>,
    /// Confidence (0–1) that the `first_fail` step really misses an SLO.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_fail_confidence: Option<f64>,
    /// Loads between the two ends whose adaptive step reached its cap with
    /// its SLO verdict still within noise (the noise band), ascending.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub undecided: Vec<f64>,
    /// `last_pass` was decided by pooling the evidence of these steps (it
    /// and the ones above it, below `first_fail`), ascending.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub last_pass_pooled: Vec<f64>,
    /// No pass was decided: `last_pass` is the lowest load whose point
    /// estimate passed, and its confidence is below the level asked.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub last_pass_within_noise: bool,
    /// What binds the knee, read off the server's gauges at the first
    /// failing step (`twin::measured`; set by the command layer once the
    /// search ends). Absent while no step failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub explain: Option<KneeExplain>,
    /// `--gpu-metrics-url`: GPU energy per output token at `last_pass`, J.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub energy_per_token_j: Option<f64>,
}

/// One load level of the sweep.
#[derive(Debug, Clone, Serialize, Deserialize, Default)]
pub struct StepResult {
    /// Offered load: req/s (rate mode) or streams (concurrency mode).
    pub load: f64,
    /// `pass`, `fail`, `generator_limited`, or `interrupted` (cut short by a signal; not used for the knee).
    pub verdict: Verdict,
    pub reasons: Vec<String>,
    pub warnings: Vec<String>,
    /// Measurement window (s from the step start).
    pub window_start_s: f64,
    pub window_end_s: f64,
    /// Requests due in the window.
    pub n_requests: usize,
    pub completed: usize,
    pub failed: usize,
    pub error_rate: f64,
    pub offered_rate: f64,
    pub achieved_rate: f64,
    pub goodput: f64,
    pub output_token_rate: f64,
    pub mean_input_tokens: f64,
    pub mean_output_tokens: f64,
    pub ttft_ms: Dist,
    pub tpot_ms: Dist,
    pub itl_ms: Dist,
    pub e2el_ms: Dist,
    pub ttft_from_due_ms: Dist,
    pub lateness_ms: Dist,
    pub slo_outcomes: Vec<SloOutcomeRow>,
    pub steady: SteadyRow,
    pub generator: GeneratorRow,
    /// Where the queue gauges came from (`vllm`, `llama_cpp`) if scraped.
    pub queue_source: Option<String>,
    pub queue: Vec<QueueSample>,
    pub mean_waiting: Option<f64>,
    pub max_waiting: Option<f64>,
    pub mean_running: Option<f64>,
    pub errors_by_kind: std::collections::BTreeMap<String, u64>,
    pub first_errors: Vec<String>,
    /// Due offsets (s from the step start) of every request of the step, sorted
    /// (`--save-detailed` only): the intended schedule.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub due_times_s: Vec<f64>,
    /// Client latency percentiles over the step, on the gauges' time axis
    /// (kept with `--html`, which charts them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub latency_series: Vec<LatencyPoint>,
    /// `--gpu-hour-cost`: dollars per million output tokens at this step's rate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usd_per_million_output_tokens: Option<f64>,
    /// An adaptive step: how sure its SLO verdict is and why it ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<DecisionRow>,
    /// A shard's step: counters, histograms and steady-state inputs that
    /// `kneecap merge` adds up (written by the command layer, `cmd/sweep/sharded.rs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<StepShard>,
    /// The server's prefix-cache hit rate over the step (vLLM's counters'
    /// delta from its start to its end, or llama.cpp's per-request timings).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix_cache: Option<PrefixCacheStats>,
    /// The server's speculative decoding over the step (vLLM's counters'
    /// delta from its start to its end, or SGLang's gauges at its end).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec_decode: Option<crate::result::SpecDecodeStats>,
    /// `--gpu-metrics-url`: the GPUs' power and energy over the step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<crate::result::GpuStats>,
    /// Which prompts the step sent (absent from sweeps written before each
    /// step drew its own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompts: Option<StepPrompts>,
    /// `--reset-prefix-cache`: the server dropped its prefix cache before the step.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub prefix_cache_reset: bool,
    /// A workload with no designed sharing found more of its prompt tokens
    /// cached than fresh prompts explain: why, and what it does to the
    /// step's TTFT (marked `!` in the step table's `cache hit` column).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_warning: Option<String>,
}

/// Which prompts a sweep step sent: enough to draw them again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepPrompts {
    pub draw: PromptDraw,
    /// The dataset seed of the step's draw: `--seed` for step 0 (the
    /// prompts `kneecap run` sends) and with `--reuse-prompts`, else one
    /// derived from `--seed` and the step's index. A dataset file is
    /// shuffled once with `--seed`; its steps take successive windows.
    pub seed: u64,
    /// A dataset file: where the step's window starts in the file's
    /// shuffled order (its prompts, then the ones after it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_row: Option<usize>,
    /// A trace: the salt its hash ids were expanded with (0: as `kneecap run`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_salt: Option<u64>,
}

/// How a step's prompts relate to the earlier steps'.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PromptDraw {
    /// Drawn for this step: no earlier step sent them.
    Fresh,
    /// The sweep's first prompts again (`--reuse-prompts`).
    Reused,
    /// The dataset ran out: some of them were sent by an earlier step.
    Repeated,
}

/// A distribution summary in milliseconds.
#[derive(Debug, Clone, Serialize, Deserialize, Default, PartialEq)]
pub struct Dist {
    pub count: usize,
    pub mean: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
}

/// One SLO's verdict on a step. A failed or timed-out request is a sample
/// of +∞ (a miss): `observed_ms`, `samples` and `tail_samples` count them,
/// and `vllm_observed_ms` keeps vLLM's statistic over successes only.
#[derive(Debug, Clone, Serialize, Deserialize, Default)]
pub struct SloOutcomeRow {
    pub slo: String,
    /// The statistic judged, failures counted, ms; `null` without samples,
    /// or when it is +∞: it lands on failed requests (`failures` > 0).
    pub observed_ms: Option<f64>,
    pub pass: bool,
    /// Samples, failed requests included.
    pub samples: usize,
    pub tail_samples: usize,
    /// Failed requests of the window, each a +∞ sample (absent: none).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub failures: usize,
    /// How many of the tail samples are failed requests.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub failed_in_tail: usize,
    /// vLLM's statistic, over the successful requests only, ms (what
    /// `vllm bench serve` prints); present when some request failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vllm_observed_ms: Option<f64>,
    pub warning: Option<String>,
    /// The exact binomial confidence of this SLO's verdict (percentile and
    /// goodput-form SLOs of an adaptive step).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confidence: Option<SloConfidenceRow>,
}

/// How sure one SLO's verdict is (see `sweep::confidence`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SloConfidenceRow {
    /// Confidence that the SLO holds, 0–1.
    pub pass: f64,
    /// Confidence that it is missed, 0–1.
    pub fail: f64,
    /// Samples' worth of independent evidence (after the dependence correction).
    pub effective_samples: usize,
    /// Of those, how many met the bound (`null` in sweeps written before it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effective_within: Option<usize>,
    /// The quantile the SLO bounds, 0–1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quantile: Option<f64>,
    /// Distribution-free interval of the percentile at the sweep's level, ms
    /// (`null`: the samples cannot bound that end).
    pub interval_low_ms: Option<f64>,
    pub interval_high_ms: Option<f64>,
}

/// The closed-loop probe of μ that ran before the search.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct CalibrationRow {
    /// One row per probe level, in order.
    pub levels: Vec<ProbeLevelRow>,
    /// `plateau`, `budget`, `limit` (a μ to start from), `errors` or
    /// `stalled` (the search fell back to doubling from `--start`).
    pub end: String,
    /// The probed service rate μ, req/s (`null` when the probe ended without one).
    pub service_rate: Option<f64>,
    /// Where the search started.
    pub start_load: f64,
    /// Wall time the probe took, seconds.
    pub duration_s: f64,
}

/// One level of the calibration probe.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct ProbeLevelRow {
    pub concurrency: usize,
    pub completed: usize,
    pub failed: usize,
    /// Requests still unanswered when the probe's budget ran out.
    #[serde(default)]
    pub stuck: usize,
    /// Mean end-to-end latency of the completed requests, ms.
    pub mean_e2el_ms: Option<f64>,
    /// Completed requests per second by Little's law (streams / mean latency).
    pub throughput: Option<f64>,
    pub duration_s: f64,
}

/// Where an adaptive step's SLO verdict stood when it ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DecisionRow {
    /// Confidence asked (`--confidence`).
    pub level: f64,
    /// `pass`, `fail` or `undecided` (the step reached its cap first).
    pub decision: Decision,
    /// How sure that decision is, 0–1.
    pub confidence: f64,
    /// Requests the SLO tests rest on, failed ones included (each a miss).
    pub samples: usize,
    /// The fewest effective samples of any SLO test.
    pub effective_samples: usize,
    /// The step ended its releases early because it was decided.
    pub ended_early: bool,
    /// The twin's prior on the verdict, when the sweep had one (its
    /// confidence above includes it where the step agreed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub twin_prior: Option<super::twin::StepPriorRow>,
}

#[derive(Debug, Clone, Serialize, Deserialize, Default)]
pub struct SteadyRow {
    pub steady: bool,
    pub throughput_ratio: f64,
    pub mean_in_flight: f64,
    pub mean_time_in_system_s: f64,
    pub littles_gap: f64,
    pub in_flight_slope_per_s: f64,
    pub backlog_at_end: usize,
    pub reasons: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, Default)]
pub struct GeneratorRow {
    pub limited: bool,
    pub lateness_p50_ms: f64,
    pub lateness_p99_ms: f64,
    pub lateness_max_ms: f64,
    pub cpu_busy_fraction: Option<f64>,
    pub event_loop_lag_p99_ms: Option<f64>,
    pub reasons: Vec<String>,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

impl StepResult {
    pub fn passed(&self) -> bool {
        self.verdict == Verdict::Pass
    }
}

impl SweepResult {
    /// Steps sorted by load (the order charts and tables use).
    pub fn steps_by_load(&self) -> Vec<&StepResult> {
        let mut v: Vec<&StepResult> = self.steps.iter().collect();
        v.sort_by(|a, b| a.load.total_cmp(&b.load));
        v
    }

    /// Unit of the load axis.
    pub fn load_unit(&self) -> &'static str {
        load_unit(self.workload.sessions.is_some(), self.mode)
    }

    /// Price every step and the knee (the last passing step at the knee's
    /// load) at `p` (`--gpu-hour-cost`, `--gpus`).
    pub fn price(&mut self, p: Pricing) {
        for s in &mut self.steps {
            s.usd_per_million_output_tokens = usd_per_million_output_tokens(p, s.output_token_rate);
        }
        let knee = self.knee.last_pass.and_then(|load| {
            self.steps
                .iter()
                .rev()
                .find(|s| s.load == load && s.verdict == Verdict::Pass)
        });
        self.cost = Some(CostSummary {
            gpu_hour_cost: p.gpu_hour_cost,
            gpus: p.gpus,
            knee_load: knee.map(|s| s.load),
            knee_output_token_rate: knee.map(|s| s.output_token_rate),
            usd_per_million_output_tokens_at_knee: knee
                .and_then(|s| s.usd_per_million_output_tokens),
        });
    }
}

/// Unit of a sweep's load axis: sessions/s or users for multi-turn
/// sessions, else the mode's own ([`LoadUnit::axis`]).
pub fn load_unit(sessions: bool, mode: LoadUnit) -> &'static str {
    match (sessions, mode) {
        (true, LoadUnit::Rate) => "sessions/s",
        (true, LoadUnit::Concurrency) => "users",
        (_, mode) => mode.axis(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_knee_is_priced_at_its_passing_step() {
        let step = |load: f64, verdict: Verdict, rate: f64| StepResult {
            load,
            verdict,
            output_token_rate: rate,
            ..StepResult::default()
        };
        let mut r = SweepResult {
            steps: vec![
                step(1.0, Verdict::Pass, 100.0),
                step(2.0, Verdict::Pass, 200.0),
                step(4.0, Verdict::Fail, 250.0),
            ],
            knee: KneeSummary {
                last_pass: Some(2.0),
                first_fail: Some(4.0),
                ..KneeSummary::default()
            },
            ..SweepResult::default()
        };
        let p = Pricing {
            gpu_hour_cost: 3.6,
            gpus: 1,
        };
        r.price(p);
        let c = r.cost.clone().unwrap();
        assert_eq!(c.knee_load, Some(2.0));
        // $0.001/s at 200 tok/s: $5 per million.
        assert!((c.usd_per_million_output_tokens_at_knee.unwrap() - 5.0).abs() < 1e-9);
        assert!((r.steps[0].usd_per_million_output_tokens.unwrap() - 10.0).abs() < 1e-9);
    }
}

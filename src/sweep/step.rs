//! Step: the one judge of a sweep step. The live sweep (from its request
//! records) and `kneecap merge` (from the shards' summed counters and merged
//! histograms) each gather a step's [`StepEvidence`]; [`judge_step`] adds the
//! server's queue trend to the steady-state check, weighs SLOs, errors,
//! steadiness and generator health, and assembles the [`StepResult`] both
//! write. PURE: no clock, no I/O.

use super::confidence::{self, SloConfidence};
use super::failures::judge_failures;
use super::rows::{dist, queue_stats, slo_row, steady_row, verdict_of};
use super::slo::SloOutcome;
use super::steady::{self, Steadiness};
use super::{judge, StepVerdictInput};
use crate::client::scrape::QueueSample;
use crate::metrics::health::{self, GeneratorHealth};
use crate::metrics::stats::Distribution;
use crate::result::sweep::{
    DecisionRow, GeneratorRow, SloConfidenceRow, SloOutcomeRow, StepResult, Verdict,
};
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
}

/// Judge one step and assemble its row of the sweep result.
pub fn judge_step(mut e: StepEvidence, max_error_rate: f64) -> StepResult {
    let failed = judge_failures(&e.counts, max_error_rate, &mut e.generator);
    let (w0, w1) = e.window;
    let slo_rows = slo_rows(&e);
    let steadiness = with_queue_trend(e.steadiness, &e.queue, e.window);
    let c = &e.counts;
    let error_rate = if c.n_requests == 0 {
        0.0
    } else {
        c.failed as f64 / c.n_requests as f64
    };
    let input = StepVerdictInput {
        slo_outcomes: &e.slo_outcomes,
        error_rate,
        max_error_rate,
        steadiness: &steadiness,
        generator: &e.generator,
    };
    let (verdict, reasons) = failed.unwrap_or_else(|| judge(&input));
    // An SLO with a binomial confidence states how sure it is; its
    // few-tail-samples warning would only repeat that less precisely.
    let has_confidence = |i: usize| {
        e.confidence
            .as_ref()
            .is_some_and(|(_, each)| each.get(i).is_some_and(Option::is_some))
    };
    let mut warnings: Vec<String> = e
        .slo_outcomes
        .iter()
        .enumerate()
        .filter(|(i, _)| !has_confidence(*i))
        .filter_map(|(_, o)| o.warning.clone())
        .collect();
    warnings.extend(e.generator.warnings.iter().cloned());
    warnings.extend(e.extra_warnings.iter().cloned());
    let (mean_waiting, max_waiting, mean_running) = queue_stats(&e.queue, w0, w1);
    let d = &e.dists;
    StepResult {
        load: e.load,
        verdict: if e.interrupted {
            Verdict::Interrupted
        } else {
            verdict_of(verdict)
        },
        reasons,
        warnings,
        window_start_s: w0.as_secs_f64(),
        window_end_s: w1.as_secs_f64(),
        n_requests: c.n_requests,
        completed: c.completed,
        failed: c.failed,
        error_rate,
        offered_rate: steadiness.offered_rate,
        achieved_rate: steadiness.achieved_rate,
        goodput: c.goodput,
        output_token_rate: c.output_token_rate,
        mean_input_tokens: c.mean_input_tokens,
        mean_output_tokens: c.mean_output_tokens,
        ttft_ms: dist(&d.ttft),
        tpot_ms: dist(&d.tpot),
        itl_ms: dist(&d.itl),
        e2el_ms: dist(&d.e2el),
        ttft_from_due_ms: dist(&d.ttft_from_due),
        lateness_ms: dist(&d.lateness),
        slo_outcomes: slo_rows,
        decision: e
            .confidence
            .as_ref()
            .map(|(level, each)| decision_row(*level, each, e.ended_early, c.completed + c.failed)),
        steady: steady_row(&steadiness),
        generator: GeneratorRow {
            limited: e.generator.limited,
            lateness_p50_ms: d.lateness.median_ms,
            lateness_p99_ms: health::p99_ms(&d.lateness),
            lateness_max_ms: d.lateness.max_ms,
            cpu_busy_fraction: e.cpu_busy_fraction,
            event_loop_lag_p99_ms: e.event_loop_lag_p99_ms,
            reasons: e.generator.reasons.clone(),
        },
        queue_source: e.queue_source,
        queue: e.queue,
        mean_waiting,
        max_waiting,
        mean_running,
        errors_by_kind: e.counts.errors_by_kind,
        first_errors: e.counts.first_errors,
        due_times_s: Vec::new(),
        latency_series: Vec::new(),
        usd_per_million_output_tokens: None,
        shard: None,
        prefix_cache: None,
    }
}

/// The SLO rows, with each SLO's confidence when the step has them.
fn slo_rows(e: &StepEvidence) -> Vec<SloOutcomeRow> {
    let confidence = |i: usize| {
        e.confidence
            .as_ref()
            .and_then(|(_, each)| each.get(i).copied().flatten())
    };
    e.slo_outcomes
        .iter()
        .enumerate()
        .map(|(i, o)| SloOutcomeRow {
            warning: o.warning.clone().filter(|_| confidence(i).is_none()),
            confidence: confidence(i).map(|c| SloConfidenceRow {
                pass: c.pass,
                fail: c.fail,
                effective_samples: c.effective_samples,
                effective_within: Some(c.effective_within),
                quantile: Some(c.quantile),
                interval_low_ms: c.interval_low_ms,
                interval_high_ms: c.interval_high_ms,
            }),
            ..slo_row(o)
        })
        .collect()
}

/// Where the step's SLO verdict stood: the decision its confidences support.
fn decision_row(
    level: f64,
    each: &[Option<SloConfidence>],
    ended_early: bool,
    samples: usize,
) -> DecisionRow {
    let (decision, confidence) = confidence::decide(each, level);
    DecisionRow {
        level,
        decision,
        confidence,
        samples,
        effective_samples: each
            .iter()
            .flatten()
            .map(|c| c.effective_samples)
            .min()
            .unwrap_or(0),
        ended_early,
    }
}

/// The step is not steady when the server's waiting queue grew over the window.
fn with_queue_trend(
    mut s: Steadiness,
    queue: &[QueueSample],
    window: (Duration, Duration),
) -> Steadiness {
    let waiting: Vec<(f64, f64)> = queue
        .iter()
        .filter_map(|q| q.waiting.map(|w| (q.t_s, w)))
        .collect();
    if let Some(trend) = steady::queue_trend(&waiting, window).filter(|t| t.growing()) {
        s.reasons.push(trend.reason());
        s.steady = false;
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn steady_evidence() -> StepEvidence {
        StepEvidence {
            load: 10.0,
            window: (Duration::from_secs(1), Duration::from_secs(11)),
            counts: StepCounts {
                n_requests: 100,
                completed: 100,
                ..StepCounts::default()
            },
            steadiness: Steadiness {
                steady: true,
                offered_rate: 10.0,
                achieved_rate: 10.0,
                ..Steadiness::default()
            },
            ..StepEvidence::default()
        }
    }

    fn queue(waiting: impl Fn(f64) -> f64) -> Vec<QueueSample> {
        (0..12)
            .map(|i| QueueSample {
                t_s: i as f64,
                waiting: Some(waiting(i as f64)),
                running: Some(4.0),
                kv_cache_usage: None,
                preemptions: None,
            })
            .collect()
    }

    #[test]
    fn a_steady_step_with_a_flat_queue_passes_with_its_window_and_queue_means() {
        let e = StepEvidence {
            queue: queue(|_| 0.0),
            ..steady_evidence()
        };
        let step = judge_step(e, 0.01);
        assert_eq!(step.verdict, Verdict::Pass, "{:?}", step.reasons);
        assert_eq!((step.window_start_s, step.window_end_s), (1.0, 11.0));
        assert_eq!(step.mean_waiting, Some(0.0));
        assert_eq!(step.mean_running, Some(4.0));
    }

    #[test]
    fn a_growing_server_queue_makes_a_client_steady_step_fail_as_not_steady() {
        let e = StepEvidence {
            queue: queue(|t| 10.0 * t),
            ..steady_evidence()
        };
        let step = judge_step(e, 0.01);
        assert_eq!(step.verdict, Verdict::Fail);
        assert!(!step.steady.steady);
        assert!(
            step.reasons.iter().any(|r| r.starts_with("not steady:")),
            "{:?}",
            step.reasons
        );
    }

    #[test]
    fn the_error_rate_counts_failures_over_every_request_due_in_the_window() {
        let mut e = steady_evidence();
        e.counts.failed = 3;
        e.counts.completed = 97;
        let step = judge_step(e, 0.01);
        assert_eq!(step.error_rate, 0.03);
        assert_eq!(step.verdict, Verdict::Fail);
    }

    #[test]
    fn a_step_where_most_requests_failed_is_judged_on_them_not_on_the_generator() {
        let mut e = steady_evidence();
        e.counts.failed = 100;
        e.counts.completed = 0;
        e.counts.errors_by_kind.insert("http_status".into(), 100);
        e.counts.first_errors = vec![r#"HTTP 400 Bad Request: {"message":"too long"}"#.into()];
        e.generator = health::generator_health(
            &Distribution {
                max_ms: 655.0,
                percentiles_ms: vec![(99.0, 655.0)],
                ..Distribution::default()
            },
            1.0,
            None,
            None,
        );
        assert!(
            e.generator.limited,
            "the self-check alone would blame the generator"
        );
        let step = judge_step(e, 0.01);
        assert_eq!(step.verdict, Verdict::Fail);
        assert_eq!(
            step.reasons,
            vec![
                "most requests failed: 100 of 100 (100%, 1% allowed; http_status 100); \
                  first: HTTP 400 Bad Request: \"too long\""
            ]
        );
        assert!(!step.generator.limited && step.generator.reasons.is_empty());
        assert!(
            step.warnings
                .iter()
                .any(|w| w.contains("self-check is not weighed")),
            "{:?}",
            step.warnings
        );
    }

    #[test]
    fn an_interrupted_step_keeps_its_data_but_not_a_verdict() {
        let e = StepEvidence {
            interrupted: true,
            ..steady_evidence()
        };
        let step = judge_step(e, 0.01);
        assert_eq!(step.verdict, Verdict::Interrupted);
        assert_eq!(step.n_requests, 100);
    }

    #[test]
    fn warnings_gather_the_generators_and_the_callers() {
        let mut e = steady_evidence();
        e.generator.warnings.push("CPU 85% busy".into());
        e.extra_warnings.push("shard 1/2 started late".into());
        let step = judge_step(e, 0.01);
        assert_eq!(
            step.warnings,
            vec!["CPU 85% busy", "shard 1/2 started late"]
        );
    }
}

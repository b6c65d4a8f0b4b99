//! Step: the one judge of a sweep step. The live sweep (from its request
//! records) and `kneecap merge` (from the shards' summed counters and merged
//! histograms) each gather a step's [`StepEvidence`]; [`judge_step`] adds the
//! server's queue trend to the steady-state check, weighs SLOs, errors,
//! steadiness and generator health into one typed [`Judgement`], and builds
//! from it both the [`StepResult`] row the sweep writes and the
//! [`StepPoint`] the knee search reads ([`Judged`]). PURE: no clock, no I/O.

use super::confidence::{self, Decision, SloConfidence};
pub use super::evidence::{StepCounts, StepDists, StepEvidence};
use super::failures::judge_failures;
use super::point::StepPoint;
use super::rows::{dist, queue_stats, slo_row, steady_row};
use super::slo::SloOutcome;
use super::steady::{self, Steadiness};
use super::{judge, slo_misses_only, StepVerdictInput};
use crate::client::scrape::QueueSample;
use crate::metrics::health;
use crate::result::sweep::{
    DecisionRow, GeneratorRow, SloConfidenceRow, SloOutcomeRow, StepResult, Verdict,
};
use std::time::Duration;

/// A judged step: the row the sweep writes and the point the search reads,
/// both built from one [`Judgement`].
#[derive(Debug, Clone)]
pub struct Judged {
    pub row: StepResult,
    pub point: StepPoint,
}

/// What the judge found about one step, typed.
#[derive(Debug, Clone, PartialEq)]
pub struct Judgement {
    /// `interrupted` when the evidence was cut short by a signal, else the
    /// verdict on the failures ([`judge_failures`]) or on everything ([`judge`]).
    pub verdict: Verdict,
    /// Every reason the step is not a pass (empty for a pass).
    pub reasons: Vec<String>,
    /// Every reason is a missed SLO (no error-rate, steadiness, generator
    /// or mostly-failed reason): a fail that is the SLO test's alone.
    pub slo_misses_only: bool,
    /// The steady-state check with the server's queue trend added.
    pub steadiness: Steadiness,
    /// Failed / all requests due in the window (0 without requests).
    pub error_rate: f64,
    /// An adaptive step: the SLO test's decision at the level asked and how
    /// sure it is.
    pub decision: Option<(Decision, f64)>,
}

/// Judge one step: its row of the sweep result and its point for the search.
pub fn judge_step(mut e: StepEvidence, max_error_rate: f64) -> Judged {
    let j = judgement(&mut e, max_error_rate);
    let point = point(&e, &j);
    Judged {
        row: row(e, j),
        point,
    }
}

/// Weigh the evidence (the generator's verdict may be set aside when most
/// requests failed, see [`judge_failures`]).
pub fn judgement(e: &mut StepEvidence, max_error_rate: f64) -> Judgement {
    let failed = judge_failures(&e.counts, max_error_rate, &mut e.generator);
    let steadiness = with_queue_trend(e.steadiness.clone(), &e.queue, e.window);
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
    let slo_only = failed.is_none() && slo_misses_only(&input);
    let (verdict, reasons) = failed.unwrap_or_else(|| judge(&input));
    Judgement {
        verdict: if e.interrupted {
            Verdict::Interrupted
        } else {
            verdict
        },
        reasons,
        slo_misses_only: slo_only,
        steadiness,
        error_rate,
        decision: e
            .confidence
            .as_ref()
            .map(|(level, each)| confidence::decide(each, *level)),
    }
}

/// The search's point: the verdict, the flows, and how sure the SLO test is.
fn point(e: &StepEvidence, j: &Judgement) -> StepPoint {
    let (mean_waiting, _, _) = queue_stats(&e.queue, e.window.0, e.window.1);
    let each = |i: usize| slo_confidence(e, i);
    StepPoint {
        load: e.load,
        verdict: j.verdict,
        achieved_rate: j.steadiness.achieved_rate,
        offered_rate: j.steadiness.offered_rate,
        steady: j.steadiness.steady,
        goodput: e.counts.goodput,
        mean_waiting,
        confidence: verdict_confidence(&e.slo_outcomes, each, j.verdict),
        // Within noise on its SLOs at the cap; a step that also failed the
        // steady-state check (a growing queue) or its error bound failed
        // for that, decided.
        undecided: j.decision.is_some_and(|(d, _)| d == Decision::Undecided)
            && (j.verdict == Verdict::Pass || j.slo_misses_only),
        evidence: (0..e.slo_outcomes.len())
            .map(|i| each(i).map(|c| c.evidence()))
            .collect(),
        level: e.confidence.as_ref().map(|(level, _)| *level),
    }
}

/// How sure a step's verdict is, from its SLOs' confidences: a pass as
/// sure as its least sure SLO, a failure as its surest missed SLO. `None`
/// without confidences, or when no SLO was missed in a failed step (it
/// failed on errors or steadiness, which the binomial test does not cover).
fn verdict_confidence(
    outcomes: &[SloOutcome],
    each: impl Fn(usize) -> Option<SloConfidence>,
    verdict: Verdict,
) -> Option<f64> {
    let each = outcomes
        .iter()
        .enumerate()
        .filter_map(|(i, o)| each(i).map(|c| (o.pass, c)));
    match verdict {
        Verdict::Pass => each.map(|(_, c)| c.pass).reduce(f64::min),
        Verdict::Fail => each
            .filter(|(pass, _)| !pass)
            .map(|(_, c)| c.fail)
            .reduce(f64::max),
        Verdict::GeneratorLimited | Verdict::Interrupted => None,
    }
}

/// SLO `i`'s confidence, when the step has one.
fn slo_confidence(e: &StepEvidence, i: usize) -> Option<SloConfidence> {
    e.confidence
        .as_ref()
        .and_then(|(_, each)| each.get(i).copied().flatten())
}

/// The step's row of the sweep result.
fn row(e: StepEvidence, j: Judgement) -> StepResult {
    let (w0, w1) = e.window;
    let (mean_waiting, max_waiting, mean_running) = queue_stats(&e.queue, w0, w1);
    let (c, d) = (&e.counts, &e.dists);
    StepResult {
        load: e.load,
        verdict: j.verdict,
        reasons: j.reasons,
        warnings: warnings(&e),
        window_start_s: w0.as_secs_f64(),
        window_end_s: w1.as_secs_f64(),
        n_requests: c.n_requests,
        completed: c.completed,
        failed: c.failed,
        error_rate: j.error_rate,
        offered_rate: j.steadiness.offered_rate,
        achieved_rate: j.steadiness.achieved_rate,
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
        slo_outcomes: slo_rows(&e),
        decision: j
            .decision
            .map(|(decision, confidence)| decision_row(&e, decision, confidence)),
        steady: steady_row(&j.steadiness),
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
        // What the command layer adds: the prompts drawn, the cache reset.
        ..StepResult::default()
    }
}

/// The SLOs' warnings, the generator's and the caller's. An SLO with a
/// binomial confidence states how sure it is; its few-tail-samples warning
/// would only repeat that less precisely.
fn warnings(e: &StepEvidence) -> Vec<String> {
    let mut warnings: Vec<String> = e
        .slo_outcomes
        .iter()
        .enumerate()
        .filter(|(i, _)| slo_confidence(e, *i).is_none())
        .filter_map(|(_, o)| o.warning.clone())
        .collect();
    warnings.extend(e.generator.warnings.iter().cloned());
    warnings.extend(e.extra_warnings.iter().cloned());
    warnings
}

/// The SLO rows, with each SLO's confidence when the step has them.
fn slo_rows(e: &StepEvidence) -> Vec<SloOutcomeRow> {
    let confidence = |i: usize| slo_confidence(e, i);
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

/// Where the step's SLO test stood: its decision, how sure it is, and on
/// how many samples.
fn decision_row(e: &StepEvidence, decision: Decision, confidence: f64) -> DecisionRow {
    let (level, each) = e
        .confidence
        .as_ref()
        .map_or((0.0, &[][..]), |(l, each)| (*l, each));
    DecisionRow {
        level,
        decision,
        confidence,
        samples: e.counts.completed + e.counts.failed,
        effective_samples: each
            .iter()
            .flatten()
            .map(|c| c.effective_samples)
            .min()
            .unwrap_or(0),
        ended_early: e.ended_early,
        twin_prior: e.twin_prior.clone(),
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
#[path = "step_tests.rs"]
mod tests;

//! Adaptive steps: when a running sweep step has seen enough. The command
//! layer looks at the step every [`LOOK_EVERY`] and asks [`AdaptiveRule::look`]
//! whether to end its releases. PURE: the elapsed time and the records so far
//! are passed in.
//!
//! A step never ends before its minimum (warm-up plus the minimum measured
//! time and request count), and always ends at its cap. In between it ends
//! as soon as its verdict is decided at the confidence asked
//! ([`super::confidence`]): a step far from the knee ends at its minimum, a
//! step whose percentile interval straddles the bound runs on, gathering
//! samples, until it is decided or capped. Only requests that have finished
//! count, and only those due before the oldest one still in flight, so a slow
//! request is never left out because it is slow; a request that failed or
//! timed out counts as over every bound ([`super::slo`]), so a failing one
//! is never left out either.
//!
//! **Looks.** Testing the growing sample every 250 ms and stopping at the
//! first look that clears the bar would make "90% confident" a much weaker
//! promise: chance gets hundreds of tries. So the verdict is tested only
//! on the samples due before a few *checkpoints* ([`AdaptiveRule::checkpoints`]:
//! the minimum length and each doubling of it below the cap), each once its
//! requests have all finished, and at the step's end on its whole window;
//! every confidence is corrected for the number of tests `K`
//! (the checkpoints and the final judgement of the step's whole window) by
//! the union bound: a verdict reported as `c` confident was, at its test,
//! `1 − (1 − c)/K` confident ([`adjusted`]), so the chance that any of the
//! step's tests went wrong is at most `1 − c`.
//!
//! A *pass* also needs the step to look steady so far ([`super::steady`] over
//! the window up to the look, with the requests still in flight counted as
//! unfinished): a short window that passes its SLOs while the number in
//! flight is still climbing runs on, so the step's final steady-state check
//! sees a long enough window. A *fail* ends the step whatever the queue does.

use super::confidence::{self, union_bound, Decision, SloConfidence};
use super::point::StepPoint;
use super::prior::{self as twin_prior, StepPrior};
use super::slo::Slo;
use super::steady::{self, SteadyThresholds};
use crate::metrics::{ErrorKind, RequestError, RequestRecord};
use crate::result::Verdict;
use std::time::Duration;

/// How often a running step is looked at.
pub const LOOK_EVERY: Duration = Duration::from_millis(250);

/// When an adaptive step may end.
#[derive(Debug, Clone, PartialEq)]
pub struct AdaptiveRule {
    /// Start of the measurement window (the warm-up's end), from the step start.
    pub window_start: Duration,
    /// The step never ends before this (warm-up + minimum measured time).
    pub min_length: Duration,
    /// Nor before this many requests are due in the window and finished.
    pub min_requests: usize,
    /// The step always ends here.
    pub cap: Duration,
    /// Confidence the verdict needs (e.g. 0.90), after the correction for
    /// the number of tests.
    pub level: f64,
    /// The twin's prior on this step's verdict ([`super::prior`]), when the
    /// sweep has a twin.
    pub prior: Option<StepPrior>,
}

/// What one look at a running step found.
#[derive(Debug, Clone, PartialEq)]
pub struct Look {
    /// The verdict the samples support so far.
    pub decision: Decision,
    /// How sure that verdict is (of the leading one when undecided).
    pub confidence: f64,
    /// Finished requests the look rested on.
    pub samples: usize,
    /// The window so far passed the steady-state check (what a pass needs
    /// to end the step early). Checked only for a pass past the minimum;
    /// false otherwise.
    pub steady: bool,
    /// Whether the step should end its releases now.
    pub end: bool,
}

impl AdaptiveRule {
    /// Look at the step `elapsed` after its start. `finished` are the
    /// records that have finished (any order); `in_flight` holds the due
    /// time of each request released and still running.
    pub fn look(
        &self,
        elapsed: Duration,
        slos: &[Slo],
        finished: &[RequestRecord],
        in_flight: &[Duration],
    ) -> Look {
        let oldest_in_flight = in_flight.iter().min().copied();
        // The latest checkpoint whose requests have all finished.
        let cutoff = self
            .checkpoints()
            .into_iter()
            .rev()
            .find(|&c| c <= elapsed && oldest_in_flight.is_none_or(|o| o >= c))
            .unwrap_or(Duration::ZERO);
        let mut sample: Vec<RequestRecord> = finished
            .iter()
            .filter(|r| r.due >= self.window_start && r.due < cutoff)
            .cloned()
            .collect();
        sample.sort_by_key(|r| r.due);
        let (decision, confidence, _) =
            step_decision_with(slos, &sample, self.level, self.tests(), self.prior.as_ref());
        let long_enough = elapsed >= self.min_length && sample.len() >= self.min_requests;
        let steady = long_enough
            && decision == Decision::Pass
            && self.steady_so_far(elapsed, finished, in_flight);
        let decided = match decision {
            Decision::Pass => steady,
            Decision::Fail => true,
            Decision::Undecided => false,
        };
        Look {
            decision,
            confidence,
            samples: sample.len(),
            steady,
            end: elapsed >= self.cap || (long_enough && decided),
        }
    }

    /// When a running step's verdict is tested: the minimum length and each
    /// doubling of it below the cap. (At the cap the step ends, and its
    /// whole window is judged.)
    pub fn checkpoints(&self) -> Vec<Duration> {
        let mut out = Vec::new();
        let mut t = self.min_length.max(LOOK_EVERY);
        while t < self.cap {
            out.push(t);
            t *= 2;
        }
        out
    }

    /// How many tests a step's confidences are corrected for: one per
    /// checkpoint and the final judgement of the whole window.
    pub fn tests(&self) -> usize {
        self.checkpoints().len() + 1
    }

    /// The steady-state check over `[window_start, elapsed)`, the requests
    /// still in flight counted as sent at their due time and not finished.
    fn steady_so_far(
        &self,
        elapsed: Duration,
        finished: &[RequestRecord],
        in_flight: &[Duration],
    ) -> bool {
        let running = in_flight.iter().map(|&due| RequestRecord {
            due,
            released: due,
            sent: due,
            // Sent and never finished by the window's end: `steady` keeps a
            // cancelled record that has a first token in flight up to w1.
            first_token: Some(due),
            error: Some(RequestError {
                kind: ErrorKind::Cancelled,
                status: None,
                message: String::new(),
            }),
            ..RequestRecord::default()
        });
        let records: Vec<RequestRecord> = finished.iter().cloned().chain(running).collect();
        steady::assess(
            &records,
            (self.window_start, elapsed),
            &SteadyThresholds::default(),
        )
        .steady
    }
}

/// The decision the SLOs' confidences support over `records` (in due
/// order), each confidence corrected for `tests` tests ([`adjusted`]).
pub fn step_decision(
    slos: &[Slo],
    records: &[RequestRecord],
    level: f64,
    tests: usize,
) -> (Decision, f64, Vec<Option<SloConfidence>>) {
    step_decision_with(slos, records, level, tests, None)
}

/// [`step_decision`] with the twin's prior on the step added where it
/// agrees with the samples ([`super::prior::apply`]) before the correction
/// for the tests.
pub fn step_decision_with(
    slos: &[Slo],
    records: &[RequestRecord],
    level: f64,
    tests: usize,
    prior: Option<&StepPrior>,
) -> (Decision, f64, Vec<Option<SloConfidence>>) {
    let each: Vec<Option<SloConfidence>> = twin_prior::weigh(slos, records, level, prior)
        .0
        .into_iter()
        .map(|c| c.map(|c| adjusted(c, tests)))
        .collect();
    let (decision, sure) = confidence::decide(&each, level);
    (decision, sure, each)
}

/// The search's point for a step at `load` whose measured window is
/// `window` (in due order), as the live judge gives it for a steady step
/// with a healthy generator: the verdict is the SLOs' point estimate over
/// the window, its confidence and evidence are judged once more over it,
/// corrected for the rule's tests. For searches run in fake or virtual time.
pub fn window_point(
    load: f64,
    slos: &[Slo],
    window: &[RequestRecord],
    rule: &AdaptiveRule,
) -> StepPoint {
    let held: Vec<bool> = slos
        .iter()
        .map(|s| super::slo::evaluate(s, window).pass)
        .collect();
    let pass = held.iter().all(|&h| h);
    let (decision, _, each) =
        step_decision_with(slos, window, rule.level, rule.tests(), rule.prior.as_ref());
    // As the live sweep's rows: a pass as sure as its least sure SLO, a
    // failure as its surest missed one.
    let sure = each
        .iter()
        .zip(&held)
        .filter_map(|(c, &h)| match (c, pass) {
            (Some(c), true) => Some(c.pass),
            (Some(c), false) if !h => Some(c.fail),
            _ => None,
        });
    StepPoint {
        load,
        verdict: if pass { Verdict::Pass } else { Verdict::Fail },
        achieved_rate: load,
        offered_rate: load,
        steady: true,
        goodput: load,
        mean_waiting: None,
        confidence: sure.reduce(if pass { f64::min } else { f64::max }),
        undecided: decision == Decision::Undecided,
        evidence: each.iter().map(|c| c.map(|c| c.evidence())).collect(),
        level: Some(rule.level),
    }
}

/// A confidence from one test, corrected for `tests` tests by the union
/// bound: `1 − tests·(1 − c)`, at least 0. One test leaves it unchanged.
pub fn adjusted(c: SloConfidence, tests: usize) -> SloConfidence {
    SloConfidence {
        pass: union_bound(c.pass, tests),
        fail: union_bound(c.fail, tests),
        ..c
    }
}

#[cfg(test)]
#[path = "adaptive_tests.rs"]
mod tests;

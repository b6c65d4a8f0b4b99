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
//! request is never left out because it is slow.
//!
//! A *pass* also needs the step to look steady so far ([`super::steady`] over
//! the window up to the look, with the requests still in flight counted as
//! unfinished): a short window that passes its SLOs while the number in
//! flight is still climbing runs on, so the step's final steady-state check
//! sees a long enough window. A *fail* ends the step whatever the queue does.

use super::confidence::{self, Decision, SloConfidence};
use super::slo::Slo;
use super::steady::{self, SteadyThresholds};
use crate::metrics::{ErrorKind, RequestError, RequestRecord};
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
    /// Confidence the verdict needs (e.g. 0.90).
    pub level: f64,
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
        let cutoff = oldest_in_flight.unwrap_or(elapsed).min(elapsed);
        let mut sample: Vec<RequestRecord> = finished
            .iter()
            .filter(|r| r.due >= self.window_start && r.due < cutoff)
            .cloned()
            .collect();
        sample.sort_by_key(|r| r.due);
        let (decision, confidence, _) = step_decision(slos, &sample, self.level);
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

/// The decision the SLOs' confidences support over `records` (in due order).
pub fn step_decision(
    slos: &[Slo],
    records: &[RequestRecord],
    level: f64,
) -> (Decision, f64, Vec<Option<SloConfidence>>) {
    let each: Vec<Option<SloConfidence>> = slos
        .iter()
        .map(|s| confidence::slo_confidence(s, records, level))
        .collect();
    let (decision, sure) = confidence::decide(&each, level);
    (decision, sure, each)
}

#[cfg(test)]
#[path = "adaptive_tests.rs"]
mod tests;

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

use super::confidence::{self, Decision, SloConfidence};
use super::slo::Slo;
use crate::metrics::RequestRecord;
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
    /// Whether the step should end its releases now.
    pub end: bool,
}

impl AdaptiveRule {
    /// Look at the step `elapsed` after its start. `finished` are the
    /// records that have finished (any order); `oldest_in_flight` is the due
    /// time of the oldest request still running, if any.
    pub fn look(
        &self,
        elapsed: Duration,
        slos: &[Slo],
        finished: &[RequestRecord],
        oldest_in_flight: Option<Duration>,
    ) -> Look {
        let cutoff = oldest_in_flight.unwrap_or(elapsed).min(elapsed);
        let mut sample: Vec<RequestRecord> = finished
            .iter()
            .filter(|r| r.due >= self.window_start && r.due < cutoff)
            .cloned()
            .collect();
        sample.sort_by_key(|r| r.due);
        let (decision, confidence, _) = step_decision(slos, &sample, self.level);
        let long_enough = elapsed >= self.min_length && sample.len() >= self.min_requests;
        let end = elapsed >= self.cap || (long_enough && decision != Decision::Undecided);
        Look {
            decision,
            confidence,
            samples: sample.len(),
            end,
        }
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

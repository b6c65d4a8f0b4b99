//! Multi-turn sessions in a run's outputs: the `kneecap.sessions` JSON block
//! and the console lines (sessions by outcome, duration, think time kept,
//! TTFT by turn number: turn 1 against later turns shows the prefix cache).

use super::json::dist::DistJson;
use crate::metrics::session::SessionSummary;
use serde::{Deserialize, Serialize};
use std::fmt::Write;

/// `kneecap.sessions`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SessionsJson {
    pub started: usize,
    pub completed: usize,
    /// Ended by a failed turn.
    pub failed: usize,
    /// Ended by the end of the run (or a sweep step's drain limit, or Ctrl-C).
    pub cut: usize,
    pub turns_sent: usize,
    /// First turn sent to last answer, completed sessions.
    pub duration: DistJson,
    /// Measured: a turn's send minus the previous answer's last token.
    pub think_time: DistJson,
    pub ttft_by_turn: Vec<TurnTtftJson>,
}

/// TTFT of the successful requests that were turn `turn` of their session.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct TurnTtftJson {
    pub turn: u32,
    pub ttft: DistJson,
}

impl SessionsJson {
    pub fn of(s: &SessionSummary) -> Self {
        SessionsJson {
            started: s.started,
            completed: s.completed,
            failed: s.failed,
            cut: s.cut,
            turns_sent: s.turns_sent,
            duration: DistJson::of(&s.duration),
            think_time: DistJson::of(&s.think_time),
            ttft_by_turn: s
                .ttft_by_turn
                .iter()
                .map(|t| TurnTtftJson {
                    turn: t.turn,
                    ttft: DistJson::of(&t.ttft),
                })
                .collect(),
        }
    }
}

/// The console lines of the kneecap block.
pub fn console_lines(out: &mut String, s: &SessionSummary) {
    let _ = writeln!(
        out,
        "{:<40} {} started, {} completed, {} failed, {} cut by the run's end ({} turns)",
        "Sessions:", s.started, s.completed, s.failed, s.cut, s.turns_sent
    );
    let d = &s.duration;
    if d.count > 0 {
        let _ = writeln!(
            out,
            "{:<40} mean {:.1}  p50 {:.1}  p99 {:.1}",
            "Session duration (ms):",
            d.mean_ms,
            d.median_ms,
            d.percentile_ms(99.0).unwrap_or(f64::NAN)
        );
    }
    let t = &s.think_time;
    if t.count > 0 {
        let _ = writeln!(
            out,
            "{:<40} mean {:.1}  p50 {:.1}  max {:.1}",
            "Think time kept (ms):", t.mean_ms, t.median_ms, t.max_ms
        );
    }
    for turn in &s.ttft_by_turn {
        let d = &turn.ttft;
        let _ = writeln!(
            out,
            "{:<40} mean {:.2}  p50 {:.2}  p99 {:.2}  (n={})",
            format!("TTFT turn {} (ms):", turn.turn),
            d.mean_ms,
            d.median_ms,
            d.percentile_ms(99.0).unwrap_or(f64::NAN),
            d.count
        );
    }
}

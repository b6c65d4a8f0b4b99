//! The run JSON's `kneecap.sessions` block (`--multi-turn`): sessions by
//! outcome, their duration and think time, TTFT by turn number.

use super::dist::DistJson;
use crate::metrics::session::SessionSummary;
use serde::{Deserialize, Serialize};

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

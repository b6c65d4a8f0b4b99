//! Multi-turn sessions: how each session ended, and the numbers over them
//! (sessions completed / failed / cut, session duration, the think time
//! actually kept, TTFT by turn number). Pure: built from the engine's records.

use super::record::{ErrorKind, RequestRecord};
use super::stats::{distribution, Distribution};
use super::KNEECAP_PERCENTILES;
use std::collections::BTreeMap;
use std::time::Duration;

/// How a session ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SessionEnd {
    /// Every planned turn succeeded.
    #[default]
    Completed,
    /// A turn failed; the session stopped there.
    Failed,
    /// The run ended first (its end, a sweep step's drain limit, or Ctrl-C).
    Cut,
}

/// One session as the engine ran it (offsets from the run's start).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SessionRecord {
    pub session: usize,
    /// When its first turn was due.
    pub due: Duration,
    /// When its first turn was sent.
    pub start: Duration,
    /// When its last turn ended (its last token, or its failure).
    pub end: Duration,
    pub turns_planned: u32,
    /// Turns that succeeded.
    pub turns_ok: u32,
    pub outcome: SessionEnd,
}

impl SessionRecord {
    /// The outcome of a session whose last turn ended with `last`
    /// (`None`: every planned turn was sent and succeeded).
    pub fn classify(last_error: Option<ErrorKind>, turns_ok: u32, planned: u32) -> SessionEnd {
        match last_error {
            Some(ErrorKind::Cancelled) => SessionEnd::Cut,
            Some(_) => SessionEnd::Failed,
            None if turns_ok >= planned => SessionEnd::Completed,
            None => SessionEnd::Cut,
        }
    }
}

/// TTFT of the requests that were turn `turn` of their session.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TurnTtft {
    pub turn: u32,
    pub ttft: Distribution,
}

/// The sessions of a run.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SessionSummary {
    pub started: usize,
    pub completed: usize,
    pub failed: usize,
    pub cut: usize,
    /// Turns sent (one request each), failed ones included.
    pub turns_sent: usize,
    /// First turn sent to last turn answered, completed sessions only.
    pub duration: Distribution,
    /// Measured think time: a turn's send minus the previous turn's last token.
    pub think_time: Distribution,
    /// Successful requests' TTFT by turn number (1 = the opening turn).
    pub ttft_by_turn: Vec<TurnTtft>,
}

/// Summarize `sessions` and the turn records among `records`.
pub fn summarize(records: &[RequestRecord], sessions: &[SessionRecord]) -> SessionSummary {
    let count = |end| sessions.iter().filter(|s| s.outcome == end).count();
    let durations: Vec<f64> = sessions
        .iter()
        .filter(|s| s.outcome == SessionEnd::Completed)
        .map(|s| s.end.saturating_sub(s.start).as_secs_f64())
        .collect();
    SessionSummary {
        started: sessions.len(),
        completed: count(SessionEnd::Completed),
        failed: count(SessionEnd::Failed),
        cut: count(SessionEnd::Cut),
        turns_sent: records.iter().filter(|r| r.turn.is_some()).count(),
        duration: distribution(&durations, &KNEECAP_PERCENTILES),
        think_time: distribution(&think_times(records), &KNEECAP_PERCENTILES),
        ttft_by_turn: ttft_by_turn(records),
    }
}

fn ttft_by_turn(records: &[RequestRecord]) -> Vec<TurnTtft> {
    let mut by_turn: BTreeMap<u32, Vec<f64>> = BTreeMap::new();
    for r in records.iter().filter(|r| r.is_ok()) {
        if let (Some(t), Some(ttft)) = (r.turn, r.ttft()) {
            by_turn.entry(t.turn).or_default().push(ttft.as_secs_f64());
        }
    }
    by_turn
        .into_iter()
        .map(|(turn, v)| TurnTtft {
            turn,
            ttft: distribution(&v, &KNEECAP_PERCENTILES),
        })
        .collect()
}

/// Gaps between a successful turn's last token and its session's next send.
fn think_times(records: &[RequestRecord]) -> Vec<f64> {
    let mut ends: BTreeMap<(usize, u32), Duration> = BTreeMap::new();
    for r in records.iter().filter(|r| r.is_ok()) {
        if let (Some(t), Some(end)) = (r.turn, r.last_token) {
            ends.insert((t.session, t.turn), end);
        }
    }
    records
        .iter()
        .filter_map(|r| {
            let t = r.turn?;
            let prev = ends.get(&(t.session, t.turn.checked_sub(1)?))?;
            Some(r.sent.saturating_sub(*prev).as_secs_f64())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::record::{RequestError, SessionTurn};

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    fn turn(session: usize, turn: u32, sent: u64, ttft: u64, end: u64) -> RequestRecord {
        RequestRecord {
            sent: ms(sent),
            first_token: Some(ms(sent + ttft)),
            last_token: Some(ms(end)),
            turn: Some(SessionTurn { session, turn }),
            ..Default::default()
        }
    }

    #[test]
    fn sessions_are_counted_by_how_they_ended_and_ttft_is_split_by_turn() {
        let mut failed = turn(1, 2, 300, 0, 300);
        failed.first_token = None;
        failed.error = Some(RequestError {
            kind: ErrorKind::Status,
            status: Some(500),
            message: "boom".into(),
        });
        let records = vec![
            turn(0, 1, 0, 100, 150),
            turn(0, 2, 200, 20, 260),
            turn(1, 1, 10, 90, 180),
            failed,
        ];
        let sessions = vec![
            SessionRecord {
                session: 0,
                start: ms(0),
                end: ms(260),
                turns_planned: 2,
                turns_ok: 2,
                outcome: SessionRecord::classify(None, 2, 2),
                ..Default::default()
            },
            SessionRecord {
                session: 1,
                start: ms(10),
                end: ms(300),
                turns_planned: 3,
                turns_ok: 1,
                outcome: SessionRecord::classify(Some(ErrorKind::Status), 1, 3),
                ..Default::default()
            },
        ];
        let s = summarize(&records, &sessions);
        assert_eq!((s.started, s.completed, s.failed, s.cut), (2, 1, 1, 0));
        assert_eq!(s.turns_sent, 4);
        assert_eq!(s.duration.count, 1);
        assert!((s.duration.mean_ms - 260.0).abs() < 1e-6);
        let firsts = &s.ttft_by_turn[0];
        assert_eq!((firsts.turn, firsts.ttft.count), (1, 2));
        assert!((firsts.ttft.mean_ms - 95.0).abs() < 1e-6);
        assert_eq!(
            s.ttft_by_turn[1].ttft.count, 1,
            "the failed turn has no TTFT"
        );
        // Think times: 200-150 (session 0) and 300-180 (session 1's failed turn).
        assert_eq!(s.think_time.count, 2);
        assert!((s.think_time.mean_ms - 85.0).abs() < 1e-6);
    }

    #[test]
    fn a_cancelled_or_unfinished_session_is_cut_not_failed() {
        assert_eq!(
            SessionRecord::classify(Some(ErrorKind::Cancelled), 1, 3),
            SessionEnd::Cut
        );
        assert_eq!(SessionRecord::classify(None, 1, 3), SessionEnd::Cut);
        assert_eq!(
            SessionRecord::classify(Some(ErrorKind::Timeout), 0, 3),
            SessionEnd::Failed
        );
    }
}

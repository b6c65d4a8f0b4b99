//! Engine: driving multi-turn sessions. Each session sends its turns one
//! after another over the chat API; a turn's request carries the whole
//! history with the server's actual answers, and the next turn is due a think
//! time after the previous answer ended. A failed turn ends its session.
//!
//! Session starts and later turns are woken at their due instants by the
//! level's alarm thread ([`super::alarm`]), not by tasks spinning on the
//! runtime. Session starts follow the level's releases: open loop, one session per
//! scheduled offset; closed loop, `max_concurrency` users each running
//! sessions back to back until the level's time is up. With a cap, a user
//! slot is held through think time (a user thinks before typing again).
//! Every turn is one [`RequestRecord`], seen by the level's observer as it
//! finishes; every session ends in one [`SessionRecord`].

use super::alarm::Alarms;
use super::{
    earliest, earliest_offset, wait_some_true, wait_true, EngineOutput, Finished, LoadPlan,
    Releases,
};
use crate::client::http::HttpClient;
use crate::metrics::session::SessionRecord;
use crate::metrics::{ErrorKind, RequestError, RequestRecord, SessionTurn};
use crate::workload::sample::estimate_tokens;
use crate::workload::session::{History, SessionSpec};
use indicatif::ProgressBar;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};
use tokio::sync::{watch, Semaphore};
use tokio::task::JoinSet;

/// What session tasks tell the collecting loop.
enum Event {
    /// A turn's request was released.
    Released(usize, Duration),
    /// A turn's record is final.
    Finished(RequestRecord),
    /// A session ended.
    Ended(SessionRecord),
    /// No more sessions will start; this many did.
    StartsDone(usize),
}

/// Shared state of a running session level.
struct Shared {
    client: Arc<HttpClient>,
    sessions: Arc<Vec<SessionSpec>>,
    prefix: String,
    t0: Instant,
    /// User slots (`max_concurrency`), held for a whole session.
    users: Option<Arc<Semaphore>>,
    /// Request numbers, in release order.
    next_index: AtomicUsize,
    /// Session numbers, in start order.
    next_session: AtomicUsize,
    /// No new session or turn after this is set (the level's end).
    stop: watch::Receiver<bool>,
    /// Cancel whatever is in flight.
    cancel: watch::Receiver<bool>,
    /// Wakes session starts and later turns at their due instants.
    alarms: Alarms,
    events: UnboundedSender<Event>,
}

/// Run one load level of sessions to completion (or interruption).
pub(super) async fn run_sessions(
    client: Arc<HttpClient>,
    plan: LoadPlan,
    sessions: Arc<Vec<SessionSpec>>,
    progress: ProgressBar,
    interrupt: watch::Receiver<bool>,
) -> EngineOutput {
    let (cancel, cancel_rx) = watch::channel(false);
    let (stop, stop_rx) = watch::channel(false);
    let (events, rx) = unbounded_channel();
    let started_at = SystemTime::now();
    let sh = Arc::new(Shared {
        client,
        sessions,
        prefix: plan.request_id_prefix.clone(),
        t0: Instant::now(),
        users: plan.max_concurrency.map(|n| Arc::new(Semaphore::new(n))),
        next_index: AtomicUsize::new(0),
        next_session: AtomicUsize::new(0),
        stop: stop_rx,
        cancel: cancel_rx,
        alarms: Alarms::start(),
        events,
    });
    let mut collector = Collector {
        rx,
        stop,
        cancel,
        progress,
        finished: Finished::new(plan.fold_itl, plan.watch.as_ref()),
        started: None,
        ended: Vec::new(),
        interrupted: false,
        releases_ended_at: None,
    };
    let starter = tokio::spawn(start_sessions(sh.clone(), plan.releases.clone()));
    collector.run(&sh, &plan, interrupt).await;
    starter.abort();
    collector.output(sh.t0.elapsed(), started_at)
}

/// The level's collecting loop: what the session tasks report, and when to
/// stop new turns (time up, interrupt, the watch's early end) or cancel the
/// ones in flight.
struct Collector {
    rx: UnboundedReceiver<Event>,
    /// No new session or turn.
    stop: watch::Sender<bool>,
    /// Cancel whatever is in flight.
    cancel: watch::Sender<bool>,
    progress: ProgressBar,
    finished: Finished,
    /// How many sessions started, once no more will.
    started: Option<usize>,
    ended: Vec<SessionRecord>,
    interrupted: bool,
    releases_ended_at: Option<Duration>,
}

impl Collector {
    /// Collects until every started session has ended.
    async fn run(&mut self, sh: &Shared, plan: &LoadPlan, mut interrupt: watch::Receiver<bool>) {
        let mut end = plan.watch.as_ref().map(|w| w.end_releases.clone());
        let mut deadline = plan
            .cancel_at
            .map(|d| tokio::time::Instant::from_std(sh.t0 + d));
        // A closed loop sends no new turn once its time is up.
        let mut stop_at = match plan.releases {
            Releases::ClosedFor(limit) => Some(tokio::time::Instant::from_std(sh.t0 + limit)),
            Releases::Scheduled(_) => None,
        };
        while self.started != Some(self.ended.len()) {
            let sleep_until = deadline.unwrap_or_else(far_future);
            tokio::select! {
                _ = tokio::time::sleep_until(stop_at.unwrap_or_else(far_future)), if stop_at.is_some() => {
                    let _ = self.stop.send(true);
                    stop_at = None;
                }
                ev = self.rx.recv() => match ev {
                    Some(ev) => self.on_event(ev),
                    None => break,
                },
                _ = wait_true(&mut interrupt), if !self.interrupted => {
                    self.interrupted = true;
                    let _ = self.stop.send(true);
                    deadline = earliest(Some(tokio::time::Instant::now() + plan.grace), deadline);
                }
                _ = wait_some_true(end.as_mut()), if self.releases_ended_at.is_none() => {
                    let at = sh.t0.elapsed();
                    self.releases_ended_at = Some(at);
                    let _ = self.stop.send(true);
                    let drain = plan.watch.as_ref().map(|w| at + w.drain);
                    deadline = earliest(earliest_offset(None, drain).map(|d| tokio::time::Instant::from_std(sh.t0 + d)), deadline);
                }
                _ = tokio::time::sleep_until(sleep_until), if deadline.is_some() => {
                    let _ = self.stop.send(true);
                    let _ = self.cancel.send(true);
                    deadline = None;
                }
            }
        }
    }

    fn on_event(&mut self, ev: Event) {
        match ev {
            Event::Released(i, due) => self.finished.released(i, due),
            Event::Finished(rec) => self.finished.push_or_stop(rec, &[&self.stop, &self.cancel]),
            Event::Ended(s) => {
                self.progress.inc(1);
                self.ended.push(s);
            }
            Event::StartsDone(n) => self.started = Some(n),
        }
    }

    /// The level's output: records and sessions in order.
    fn output(self, duration: Duration, started_at: SystemTime) -> EngineOutput {
        let refused = self.finished.refusals.tripped().cloned();
        let Finished {
            mut records, fold, ..
        } = self.finished;
        let mut ended = self.ended;
        records.sort_by_key(|r| r.index);
        ended.sort_by_key(|s| s.session);
        self.progress.finish_and_clear();
        EngineOutput {
            records,
            duration,
            started_at,
            interrupted: self.interrupted,
            fold,
            releases_ended_at: self.releases_ended_at,
            sessions: ended,
            refused,
        }
    }
}

fn far_future() -> tokio::time::Instant {
    tokio::time::Instant::now() + Duration::from_secs(86_400 * 365)
}

/// Start sessions as the releases say, then report how many started.
async fn start_sessions(sh: Arc<Shared>, releases: Releases) {
    let started = match releases {
        Releases::Scheduled(offsets) => scheduled_starts(&sh, &offsets).await,
        Releases::ClosedFor(limit) => users_for(&sh, limit).await,
    };
    let _ = sh.events.send(Event::StartsDone(started));
}

/// Open loop: one session per offset (each waits for a user slot, if capped).
async fn scheduled_starts(sh: &Arc<Shared>, offsets: &[Duration]) -> usize {
    let mut stop = sh.stop.clone();
    let mut started = 0;
    for &due in offsets {
        tokio::select! {
            _ = sh.alarms.until(sh.t0 + due) => {}
            _ = wait_true(&mut stop) => break,
        }
        let n = sh.next_session.fetch_add(1, Ordering::Relaxed);
        let sh2 = sh.clone();
        tokio::spawn(async move {
            let permit = match &sh2.users {
                Some(users) => {
                    let mut stop = sh2.stop.clone();
                    tokio::select! {
                        p = users.clone().acquire_owned() => p.ok(),
                        _ = wait_true(&mut stop) => None,
                    }
                }
                None => None,
            };
            let record = match (&sh2.users, permit) {
                (Some(_), None) => unstarted(n, due, &sh2),
                (_, _permit) => run_session(&sh2, n, due).await,
            };
            let _ = sh2.events.send(Event::Ended(record));
        });
        started += 1;
    }
    started
}

/// Closed loop: `max_concurrency` users, each running sessions back to back
/// until `limit` from t0 (when the collecting loop sets `stop`, no session
/// or turn starts).
async fn users_for(sh: &Arc<Shared>, limit: Duration) -> usize {
    let Some(users) = sh.users.as_ref().map(|u| u.available_permits()) else {
        return 0;
    };
    let mut set = JoinSet::new();
    for _ in 0..users {
        let sh = sh.clone();
        set.spawn(async move {
            let mut ran = 0;
            while sh.t0.elapsed() < limit && !*sh.stop.borrow() {
                let n = sh.next_session.fetch_add(1, Ordering::Relaxed);
                let record = run_session(&sh, n, sh.t0.elapsed()).await;
                let _ = sh.events.send(Event::Ended(record));
                ran += 1;
            }
            ran
        });
    }
    let mut total = 0;
    while let Some(next) = set.join_next().await {
        total += next.unwrap_or(0);
    }
    total
}

/// A session that never got a user slot before the level ended.
fn unstarted(n: usize, due: Duration, sh: &Shared) -> SessionRecord {
    let spec = &sh.sessions[n % sh.sessions.len()];
    SessionRecord {
        session: n,
        due,
        start: due,
        end: sh.t0.elapsed(),
        turns_planned: spec.turns.len() as u32,
        turns_ok: 0,
        outcome: SessionRecord::classify(None, 0, spec.turns.len() as u32),
    }
}

/// One session: its turns in order, each due a think time after the
/// previous answer; the first failure ends it.
async fn run_session(sh: &Shared, n: usize, due: Duration) -> SessionRecord {
    let spec = &sh.sessions[n % sh.sessions.len()];
    let planned = spec.turns.len() as u32;
    let mut history = History::default();
    let mut record = SessionRecord {
        session: n,
        due,
        start: sh.t0.elapsed(),
        turns_planned: planned,
        ..Default::default()
    };
    let (mut turn_due, mut last_error) = (due, None);
    for (k, turn) in spec.turns.iter().enumerate() {
        if k > 0 && !think(sh, turn_due).await {
            break;
        }
        history.push_user(turn);
        let rec = send_turn(sh, &history, turn, n, k, turn_due).await;
        if k == 0 {
            record.start = rec.sent;
        }
        record.end = rec.last_token.unwrap_or_else(|| sh.t0.elapsed());
        last_error = rec.error.as_ref().map(|e| e.kind);
        let answer = rec.is_ok().then(|| {
            let tokens = match rec.output_tokens {
                0 => estimate_tokens(&rec.generated_text),
                t => t,
            };
            (rec.generated_text.clone(), tokens)
        });
        let _ = sh.events.send(Event::Finished(rec));
        let Some((text, tokens)) = answer else { break };
        record.turns_ok += 1;
        history.push_answer(text, tokens);
        if let Some(gap) = spec.think.get(k) {
            turn_due = sh.t0.elapsed() + *gap;
        }
    }
    record.outcome = SessionRecord::classify(last_error, record.turns_ok, planned);
    record
}

/// Wait until `due`; false when the level ended first.
async fn think(sh: &Shared, due: Duration) -> bool {
    let mut stop = sh.stop.clone();
    tokio::select! {
        _ = sh.alarms.until(sh.t0 + due) => !*sh.stop.borrow(),
        _ = wait_true(&mut stop) => false,
    }
}

/// Send turn `k` (0-based) of session `n` with the history so far.
async fn send_turn(
    sh: &Shared,
    history: &History,
    turn: &crate::workload::session::TurnSpec,
    n: usize,
    k: usize,
    due: Duration,
) -> RequestRecord {
    let index = sh.next_index.fetch_add(1, Ordering::Relaxed);
    let released = sh.t0.elapsed();
    let _ = sh.events.send(Event::Released(index, due));
    let mut spec = history.request(turn);
    spec.index = index;
    let mut rec = RequestRecord {
        index,
        due,
        released,
        turn: Some(SessionTurn {
            session: n,
            turn: k as u32 + 1,
        }),
        ..Default::default()
    };
    let request_id = format!("{}{}", sh.prefix, index);
    let mut cancel = sh.cancel.clone();
    let done = tokio::select! {
        _ = sh.client.stream(&spec, &request_id, sh.t0, &mut rec) => true,
        _ = wait_true(&mut cancel) => false,
    };
    if !done {
        if rec.sent.is_zero() {
            rec.sent = sh.t0.elapsed();
        }
        rec.error = Some(RequestError {
            kind: ErrorKind::Cancelled,
            status: None,
            message: "interrupted while in flight".into(),
        });
    }
    rec
}

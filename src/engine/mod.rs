//! Engine: drives one load level ([`drive_level`]). Releases requests on
//! schedule (open loop) or under a concurrency cap (closed loop), drives the
//! HTTP client, and collects one [`RequestRecord`] per request. No
//! statistics here. A level whose first requests the server all refuses the
//! same way stops at once ([`crate::metrics::refusal`]).

pub mod alarm;
pub mod dispatch;
pub mod probe;
mod session;

use crate::client::http::HttpClient;
use crate::metrics::fold::ItlFold;
use crate::metrics::refusal::{Refusal, RefusalWatch};
use crate::metrics::session::SessionRecord;
use crate::metrics::{ErrorKind, RequestError, RequestRecord};
use crate::workload::session::SessionSpec;
use crate::workload::RequestSpec;
use dispatch::Release;
use indicatif::ProgressBar;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;

/// When requests are released.
#[derive(Debug, Clone, PartialEq)]
pub enum Releases {
    /// Open loop: one release per offset (the schedule); `--request-rate inf`
    /// gives all zeros. Request `i` uses workload spec `i % specs.len()`.
    Scheduled(Vec<Duration>),
    /// Closed loop for a fixed time: a new request as soon as the cap allows,
    /// until `Duration` has passed since t0 (needs a concurrency cap).
    ClosedFor(Duration),
}

/// One load level, ready to run.
pub struct LoadPlan {
    pub specs: Arc<Vec<RequestSpec>>,
    pub releases: Releases,
    pub max_concurrency: Option<usize>,
    pub request_id_prefix: String,
    /// How long in-flight requests may finish after an interrupt.
    pub grace: Duration,
    /// Cancel whatever is still in flight at this offset from t0 (a sweep
    /// step's drain limit). `None`: wait for every request (bounded by the
    /// per-request timeout).
    pub cancel_at: Option<Duration>,
    /// Fold ITL gaps into a histogram past [`crate::metrics::fold::FOLD_AFTER_ITLS`]
    /// (off when per-request detail is wanted, or a sweep slices records by time).
    pub fold_itl: bool,
    /// Watches the level as it runs, and may end its releases early (an
    /// adaptive sweep step that has its verdict). `None` for plain runs.
    pub watch: Option<Watch>,
    /// Multi-turn sessions: the releases start sessions (and
    /// `max_concurrency` counts users), each turn is one request.
    pub sessions: Option<Arc<Vec<SessionSpec>>>,
}

/// Sees each request released and each record finished, on the engine's
/// collecting task (never on a request's own timing path).
pub trait Observer: Send + Sync {
    /// Request `index`, due at `due` from t0, was released.
    fn released(&self, index: usize, due: Duration);
    /// A request finished (or failed); its record is final.
    fn finished(&self, record: &RequestRecord);
}

/// An observer and the signal that ends releases early (not an interrupt:
/// what was released still runs to the end, within `cancel_at`).
#[derive(Clone)]
pub struct Watch {
    pub observer: Arc<dyn Observer>,
    pub end_releases: watch::Receiver<bool>,
    /// After an early end, what is in flight may finish for this long.
    pub drain: Duration,
}

/// What the engine observed.
pub struct EngineOutput {
    /// One record per released request, in index order.
    pub records: Vec<RequestRecord>,
    /// vLLM's benchmark duration: t0 until every request finished.
    pub duration: Duration,
    /// Wall-clock time of t0.
    pub started_at: SystemTime,
    /// True when the run was stopped by Ctrl-C / SIGTERM.
    pub interrupted: bool,
    /// The folded ITL gaps, when `fold_itl` was set.
    pub fold: Option<ItlFold>,
    /// When the watch ended releases early (offset from t0).
    pub releases_ended_at: Option<Duration>,
    /// How each session ended (empty without sessions).
    pub sessions: Vec<SessionRecord>,
    /// The level's first requests were all refused the same way: it
    /// stopped releasing and cancelled what was in flight.
    pub refused: Option<Refusal>,
}

/// Finished records, and the fold that keeps a long run's memory bounded.
struct Finished {
    records: Vec<RequestRecord>,
    fold: Option<ItlFold>,
    observer: Option<Arc<dyn Observer>>,
    refusals: RefusalWatch,
}

impl Finished {
    fn new(fold: bool, watch: Option<&Watch>) -> Self {
        Finished {
            records: Vec::new(),
            fold: fold.then(ItlFold::default),
            observer: watch.map(|w| w.observer.clone()),
            refusals: RefusalWatch::default(),
        }
    }

    fn push(&mut self, mut rec: RequestRecord) {
        if let Some(o) = &self.observer {
            o.finished(&rec);
        }
        self.refusals.see(&rec);
        if let Some(fold) = self.fold.as_mut() {
            fold.admit(&mut rec, &mut self.records);
        }
        self.records.push(rec);
    }

    fn released(&self, index: usize, due: Duration) {
        if let Some(o) = &self.observer {
            o.released(index, due);
        }
    }

    /// The first requests were all refused the same way: stop the level.
    fn refused(&self) -> bool {
        self.refusals.tripped().is_some()
    }

    /// Push a record; once the level is refused, signal each of `stop`.
    fn push_or_stop(&mut self, rec: RequestRecord, stop: &[&watch::Sender<bool>]) {
        self.push(rec);
        if self.refused() {
            for s in stop {
                let _ = s.send(true);
            }
        }
    }
}

/// Shared state of a running load level.
struct Ctx {
    client: Arc<HttpClient>,
    specs: Arc<Vec<RequestSpec>>,
    prefix: String,
    t0: Instant,
    cap: Option<Arc<Semaphore>>,
    cancel_rx: watch::Receiver<bool>,
    progress: ProgressBar,
}

/// Drive one load level to completion (or interruption): release its
/// requests, collect one record per request. The command layer runs a level
/// through `cmd::prepare::run_level`, which wraps this.
pub async fn drive_level(
    client: Arc<HttpClient>,
    plan: LoadPlan,
    progress: ProgressBar,
    interrupt: watch::Receiver<bool>,
) -> EngineOutput {
    if let Some(sessions) = plan.sessions.clone() {
        return session::run_sessions(client, plan, sessions, progress, interrupt).await;
    }
    let (cancel_tx, cancel_rx) = watch::channel(false);
    let started_at = SystemTime::now();
    let ctx = Arc::new(Ctx {
        client,
        specs: plan.specs,
        prefix: plan.request_id_prefix,
        t0: Instant::now(),
        cap: plan.max_concurrency.map(|n| Arc::new(Semaphore::new(n))),
        cancel_rx,
        progress,
    });
    let stop_dispatch = Arc::new(AtomicBool::new(false));
    let mut tasks = JoinSet::new();
    let mut records = Finished::new(plan.fold_itl, plan.watch.as_ref());
    records.records.reserve(ctx.specs.len());
    let mut interrupted = false;
    let mut releases_ended_at = None;
    {
        let dispatch = release_all(
            &ctx,
            &plan.releases,
            &stop_dispatch,
            &mut tasks,
            &mut records,
        );
        tokio::pin!(dispatch);
        let mut interrupt = interrupt.clone();
        let mut end = plan.watch.as_ref().map(|w| w.end_releases.clone());
        tokio::select! {
            _ = &mut dispatch => {}
            _ = wait_true(&mut interrupt) => { interrupted = true; stop_dispatch.store(true, Ordering::Relaxed); }
            _ = wait_some_true(end.as_mut()) => {
                releases_ended_at = Some(ctx.t0.elapsed());
                stop_dispatch.store(true, Ordering::Relaxed);
            }
        }
    }
    let early_cancel = releases_ended_at
        .zip(plan.watch.as_ref())
        .map(|(end, w)| end + w.drain);
    let cancel_at = earliest_offset(plan.cancel_at, early_cancel)
        .map(|d| tokio::time::Instant::from_std(ctx.t0 + d));
    let interrupted = drain(
        &mut tasks,
        &mut records,
        interrupted,
        plan.grace,
        cancel_at,
        interrupt,
        &cancel_tx,
    )
    .await;
    let duration = ctx.t0.elapsed();
    let refused = records.refusals.tripped().cloned();
    let Finished {
        mut records, fold, ..
    } = records;
    records.sort_by_key(|r| r.index);
    ctx.progress.finish_and_clear();
    EngineOutput {
        records,
        duration,
        started_at,
        interrupted,
        fold,
        releases_ended_at,
        sessions: Vec::new(),
        refused,
    }
}

fn earliest_offset(a: Option<Duration>, b: Option<Duration>) -> Option<Duration> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, None) => x,
        (None, y) => y,
    }
}

/// [`wait_true`] on an optional receiver; never resolves without one.
async fn wait_some_true(rx: Option<&mut watch::Receiver<bool>>) {
    match rx {
        Some(rx) => wait_true(rx).await,
        None => std::future::pending().await,
    }
}

async fn wait_true(rx: &mut watch::Receiver<bool>) {
    while !*rx.borrow_and_update() {
        if rx.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// Release every request of the plan, spawning one task per request.
/// Finished tasks are reaped as it goes, so a long run holds one record per
/// finished request, not a finished task.
async fn release_all(
    ctx: &Arc<Ctx>,
    releases: &Releases,
    stop: &Arc<AtomicBool>,
    tasks: &mut JoinSet<RequestRecord>,
    records: &mut Finished,
) {
    match releases {
        Releases::Scheduled(due) => {
            let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
            let due = due.clone();
            let (t0, stop2) = (ctx.t0, stop.clone());
            let thread = std::thread::Builder::new()
                .name("kneecap-dispatch".into())
                .spawn(move || dispatch::run(t0, &due, tx, stop2));
            if thread.is_err() {
                stop.store(true, Ordering::Relaxed);
                return;
            }
            while let Some(release) = rx.recv().await {
                let (index, due) = (release.index, release.due);
                tasks.spawn(one_request(ctx.clone(), release, None));
                records.released(index, due);
                reap(tasks, records);
                if records.refused() {
                    stop.store(true, Ordering::Relaxed);
                    return;
                }
            }
        }
        Releases::ClosedFor(limit) => {
            let Some(cap) = ctx.cap.clone() else { return };
            // A server that stalls every stream holds every permit: the
            // wait for a free slot ends at the limit, so the level still
            // ends (and its drain cancels what is stuck).
            let limit_at = tokio::time::Instant::from_std(ctx.t0 + *limit);
            for index in 0.. {
                let permit = tokio::select! {
                    p = cap.clone().acquire_owned() => p,
                    _ = tokio::time::sleep_until(limit_at) => return,
                };
                let Ok(permit) = permit else {
                    return;
                };
                let now = ctx.t0.elapsed();
                if now >= *limit || stop.load(Ordering::Relaxed) {
                    return;
                }
                let release = Release {
                    index,
                    due: now,
                    released: now,
                };
                tasks.spawn(one_request(ctx.clone(), release, Some(permit)));
                records.released(index, now);
                reap(tasks, records);
                if records.refused() {
                    return;
                }
                tokio::task::yield_now().await;
            }
        }
    }
}

/// Move the records of finished tasks out of the set, without waiting.
fn reap(tasks: &mut JoinSet<RequestRecord>, records: &mut Finished) {
    while let Some(done) = tasks.try_join_next() {
        // A panicked task has nothing to record (should not happen).
        if let Ok(rec) = done {
            records.push(rec);
        }
    }
}

/// Wait for in-flight requests; after an interrupt, give them `grace`, then
/// cancel. Returns whether the run was interrupted.
async fn drain(
    tasks: &mut JoinSet<RequestRecord>,
    records: &mut Finished,
    mut interrupted: bool,
    grace: Duration,
    cancel_at: Option<tokio::time::Instant>,
    mut interrupt: watch::Receiver<bool>,
    cancel: &watch::Sender<bool>,
) -> bool {
    if records.refused() {
        let _ = cancel.send(true); // what is still in flight
    }
    let grace_end = interrupted.then(|| tokio::time::Instant::now() + grace);
    let mut deadline = earliest(grace_end, cancel_at);
    loop {
        let sleep_until = deadline
            .unwrap_or_else(|| tokio::time::Instant::now() + Duration::from_secs(86_400 * 365));
        tokio::select! {
            next = tasks.join_next() => match next {
                None => break,
                Some(Ok(rec)) => records.push_or_stop(rec, &[cancel]),
                Some(Err(_)) => {} // a panicked task: nothing to record (should not happen)
            },
            _ = wait_true(&mut interrupt), if !interrupted => {
                interrupted = true;
                deadline = earliest(Some(tokio::time::Instant::now() + grace), deadline);
            }
            _ = tokio::time::sleep_until(sleep_until), if deadline.is_some() => {
                let _ = cancel.send(true);
                deadline = None;
            }
        }
    }
    interrupted
}

fn earliest(
    a: Option<tokio::time::Instant>,
    b: Option<tokio::time::Instant>,
) -> Option<tokio::time::Instant> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, None) => x,
        (None, y) => y,
    }
}

/// One request: wait for the cap, send, stream, record.
async fn one_request(
    ctx: Arc<Ctx>,
    release: Release,
    permit: Option<OwnedSemaphorePermit>,
) -> RequestRecord {
    let spec = &ctx.specs[release.index % ctx.specs.len()];
    let mut rec = RequestRecord {
        index: release.index,
        due: release.due,
        released: release.released,
        ..Default::default()
    };
    let mut cancel = ctx.cancel_rx.clone();
    let _permit = match (&ctx.cap, permit) {
        (_, Some(p)) => Some(p),
        (None, None) => None,
        (Some(cap), None) => tokio::select! {
            p = cap.clone().acquire_owned() => p.ok(),
            _ = wait_true(&mut cancel) => { return cancelled(&ctx, rec, "interrupted before it was sent"); }
        },
    };
    let request_id = format!("{}{}", ctx.prefix, release.index);
    let done = tokio::select! {
        _ = ctx.client.stream(spec, &request_id, ctx.t0, &mut rec) => true,
        _ = wait_true(&mut cancel) => false,
    };
    if !done {
        return cancelled(&ctx, rec, "interrupted while in flight");
    }
    ctx.progress.inc(1);
    rec
}

fn cancelled(ctx: &Ctx, mut rec: RequestRecord, why: &str) -> RequestRecord {
    if rec.sent.is_zero() {
        rec.sent = ctx.t0.elapsed();
    }
    rec.error = Some(RequestError {
        kind: ErrorKind::Cancelled,
        status: None,
        message: why.into(),
    });
    rec
}

/// Send `count` copies of the first request (bounded by the cap) and discard
/// them, as vLLM's `--num-warmups` does.
pub async fn warm_up(
    client: Arc<HttpClient>,
    spec: RequestSpec,
    count: usize,
    cap: Option<usize>,
    prefix: &str,
) -> usize {
    let sem = Arc::new(Semaphore::new(cap.unwrap_or(count.max(1))));
    let mut set = JoinSet::new();
    let t0 = Instant::now();
    for i in 0..count {
        let (client, spec, sem) = (client.clone(), spec.clone(), sem.clone());
        let id = format!("{prefix}warmup-{i}");
        set.spawn(async move {
            let _p = sem.acquire_owned().await;
            let mut rec = RequestRecord::default();
            client.stream(&spec, &id, t0, &mut rec).await;
            rec.is_ok()
        });
    }
    let mut ok = 0;
    while let Some(r) = set.join_next().await {
        ok += usize::from(matches!(r, Ok(true)));
    }
    ok
}

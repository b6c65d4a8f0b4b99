//! Watching a run live: the engine observer that aggregates snapshots
//! ([`Aggregator`]), the pure state model ([`state`]), and the two views
//! drawn from it: the terminal dashboard ([`dashboard`]) and kneecap's own
//! Prometheus exposition ([`prom`]). Nothing here reads a clock or touches a
//! terminal or socket; the command layer ticks, draws and serves.

pub mod buckets;
pub mod dashboard;
pub mod prom;
pub mod state;

use crate::engine::Observer;
use crate::metrics::RequestRecord;
use state::LiveState;
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

/// The engine observer behind the dashboard and `/metrics`. The engine
/// calls it on its collecting task, which also releases requests: it never
/// waits there for a lock. It trims each record and sends it down a channel
/// (lock-free); the readers (a dashboard frame, a scrape, the gauge tick)
/// fold what arrived into the state when they look.
pub struct Aggregator {
    tx: mpsc::Sender<Event>,
    inner: Mutex<Inner>,
}

enum Event {
    Released(Duration),
    Finished(Box<RequestRecord>),
    Update(Box<dyn FnOnce(&mut LiveState) + Send>),
}

struct Inner {
    state: LiveState,
    rx: mpsc::Receiver<Event>,
}

impl Inner {
    fn catch_up(&mut self) {
        for event in self.rx.try_iter() {
            match event {
                Event::Released(due) => self.state.released(due),
                Event::Finished(r) => self.state.finished(&r),
                Event::Update(f) => f(&mut self.state),
            }
        }
    }
}

impl Aggregator {
    pub fn new(state: LiveState) -> Self {
        let (tx, rx) = mpsc::channel();
        Aggregator {
            tx,
            inner: Mutex::new(Inner { state, rx }),
        }
    }

    /// Change the state (a gauge reading, a new phase, a line said) when a
    /// reader next looks. Never waits for the lock: a writer on the async
    /// runtime must not wait for the drawing thread, which runs at the lowest
    /// CPU priority and may hold the lock for a while on a busy machine.
    pub fn post(&self, f: impl FnOnce(&mut LiveState) + Send + 'static) {
        let _ = self.tx.send(Event::Update(Box::new(f)));
    }

    /// Read (or change) the state after folding in what was reported so
    /// far. Takes the lock: only for readers off the async runtime (the
    /// drawing thread, a scrape on a blocking thread) and tests.
    pub fn with<R>(&self, f: impl FnOnce(&mut LiveState) -> R) -> R {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner.catch_up();
        f(&mut inner.state)
    }

    /// A copy to draw from, pruned to the window at `now`.
    pub fn snapshot(&self, now: Duration) -> LiveState {
        self.with(|s| {
            s.prune(now);
            s.clone()
        })
    }
}

impl Observer for Aggregator {
    fn released(&self, _index: usize, due: Duration) {
        let _ = self.tx.send(Event::Released(due));
    }

    fn finished(&self, r: &RequestRecord) {
        // Only what the live views use (no text, no server timings).
        let trimmed = RequestRecord {
            index: r.index,
            due: r.due,
            released: r.released,
            sent: r.sent,
            first_token: r.first_token,
            last_token: r.last_token,
            output_tokens: r.output_tokens,
            itl: r.itl.clone(),
            error: r.error.clone(),
            ..RequestRecord::default()
        };
        let _ = self.tx.send(Event::Finished(Box::new(trimmed)));
    }
}

/// Two observers of one level (an adaptive step's monitor and the live view).
pub struct Tee(pub Arc<dyn Observer>, pub Arc<dyn Observer>);

impl Observer for Tee {
    fn released(&self, index: usize, due: Duration) {
        self.0.released(index, due);
        self.1.released(index, due);
    }

    fn finished(&self, record: &RequestRecord) {
        self.0.finished(record);
        self.1.finished(record);
    }
}

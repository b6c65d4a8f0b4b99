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
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// The engine observer behind the dashboard and `/metrics`. It runs on the
/// engine's collecting task (never a request's timing path) and holds its
/// lock only to count; views are computed from a copy.
pub struct Aggregator {
    state: Mutex<LiveState>,
}

impl Aggregator {
    pub fn new(state: LiveState) -> Self {
        Aggregator {
            state: Mutex::new(state),
        }
    }

    /// The state, for a short update (a gauge reading, a new phase).
    pub fn lock(&self) -> MutexGuard<'_, LiveState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A copy to draw from, pruned to the window at `now`.
    pub fn snapshot(&self, now: Duration) -> LiveState {
        let mut s = self.lock();
        s.prune(now);
        s.clone()
    }
}

impl Observer for Aggregator {
    fn released(&self, _index: usize, due: Duration) {
        self.lock().released(due);
    }

    fn finished(&self, record: &RequestRecord) {
        self.lock().finished(record);
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

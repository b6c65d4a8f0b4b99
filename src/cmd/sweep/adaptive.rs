//! The live side of an adaptive step: an engine observer that keeps what
//! has finished and what is still in flight, and the loop that looks at it
//! every [`LOOK_EVERY`] and ends the step's releases once the pure rule
//! ([`crate::sweep::adaptive`]) says the verdict is decided.

use crate::engine::Observer;
use crate::metrics::RequestRecord;
use crate::sweep::adaptive::{AdaptiveRule, Look, LOOK_EVERY};
use crate::sweep::slo::{Slo, SloMetric};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// What the engine reported since the last look. The lock is held only to
/// push or to swap the vector out, never while the verdict is computed.
#[derive(Default)]
pub(crate) struct Monitor {
    keep_itl: bool,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Due time of each released request still in flight, by index (index
    /// order is due order for both schedules and closed loops).
    in_flight: BTreeMap<usize, Duration>,
    /// Finished since the last look, trimmed to what the SLOs need.
    new: Vec<RequestRecord>,
}

impl Monitor {
    pub(crate) fn new(slos: &[Slo]) -> Self {
        Monitor {
            keep_itl: slos.iter().any(|s| s.metric == SloMetric::Itl),
            state: Mutex::default(),
        }
    }

    /// Take what finished since the last call, and the due times in flight.
    fn take(&self) -> (Vec<RequestRecord>, Vec<Duration>) {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let in_flight = s.in_flight.values().copied().collect();
        (std::mem::take(&mut s.new), in_flight)
    }
}

impl Observer for Monitor {
    fn released(&self, index: usize, due: Duration) {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        s.in_flight.insert(index, due);
    }

    fn finished(&self, record: &RequestRecord) {
        let trimmed = RequestRecord {
            generated_text: String::new(),
            server_timings: None,
            itl: if self.keep_itl {
                record.itl.clone()
            } else {
                Vec::new()
            },
            ..record.clone()
        };
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        s.in_flight.remove(&record.index);
        s.new.push(trimmed);
    }
}

/// Look at the step every [`LOOK_EVERY`] until the rule ends it (then
/// signal `end`) or the level finishes on its own (`done`). Returns the last
/// look. The verdict is computed off the runtime's worker threads, so the
/// requests' read stamps never wait for it.
pub(crate) async fn watch_step(
    monitor: Arc<Monitor>,
    rule: AdaptiveRule,
    slos: Vec<Slo>,
    end: watch::Sender<bool>,
    mut done: watch::Receiver<bool>,
) -> Option<Look> {
    let t0 = Instant::now();
    let slos = Arc::new(slos);
    let mut finished: Arc<Vec<RequestRecord>> = Arc::new(Vec::new());
    let mut last = None;
    loop {
        tokio::select! {
            _ = tokio::time::sleep(LOOK_EVERY) => {}
            _ = done.changed() => return last,
        }
        let (new, in_flight) = monitor.take();
        Arc::make_mut(&mut finished).extend(new);
        let (rule, slos, seen) = (rule.clone(), slos.clone(), finished.clone());
        let elapsed = t0.elapsed();
        let look =
            tokio::task::spawn_blocking(move || rule.look(elapsed, &slos, &seen, &in_flight))
                .await
                .ok()?;
        let ended = look.end;
        last = Some(look);
        if ended {
            let _ = end.send(true);
            return last;
        }
    }
}

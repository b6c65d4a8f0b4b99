//! Alarms: one thread wakes each waiting task at its due instant. Tasks
//! register an instant and await a oneshot; the thread keeps the alarms in a
//! min-heap, sleeps until the earliest (with 1 ns timer slack, then a short
//! spin, as the dispatcher does), is woken early when an earlier alarm
//! arrives, and fires every alarm already due at each wake-up. It ends when
//! the last [`Alarms`] handle is dropped (the level's end): one thread per
//! level, none per task, and no task spins on the runtime.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender, TryRecvError};
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// Below this remaining wait the thread spins instead of sleeping: a sleep
/// wakes up ~50–100 µs late even with minimal timer slack.
const SPIN_MARGIN: Duration = Duration::from_micros(150);

/// Alarms not yet due, earliest first (pure: time is passed in).
pub struct AlarmQueue<T> {
    heap: BinaryHeap<Reverse<Keyed<T>>>,
    seq: u64,
}

/// One alarm; equal instants keep their registration order.
struct Keyed<T> {
    at: Instant,
    seq: u64,
    item: T,
}

impl<T> PartialEq for Keyed<T> {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}
impl<T> Eq for Keyed<T> {}
impl<T> PartialOrd for Keyed<T> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl<T> Ord for Keyed<T> {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.at, self.seq).cmp(&(other.at, other.seq))
    }
}

impl<T> Default for AlarmQueue<T> {
    fn default() -> Self {
        Self {
            heap: BinaryHeap::new(),
            seq: 0,
        }
    }
}

impl<T> AlarmQueue<T> {
    /// Add an alarm due at `at`.
    pub fn push(&mut self, at: Instant, item: T) {
        self.seq += 1;
        self.heap.push(Reverse(Keyed {
            at,
            seq: self.seq,
            item,
        }));
    }

    /// When the earliest alarm is due.
    pub fn next_at(&self) -> Option<Instant> {
        self.heap.peek().map(|Reverse(k)| k.at)
    }

    /// Remove and return every alarm due at or before `now`, in due order.
    pub fn pop_due(&mut self, now: Instant) -> Vec<T> {
        let mut due = Vec::new();
        while self.next_at().is_some_and(|at| at <= now) {
            if let Some(Reverse(k)) = self.heap.pop() {
                due.push(k.item);
            }
        }
        due
    }

    /// Alarms waiting.
    pub fn len(&self) -> usize {
        self.heap.len()
    }

    /// True when no alarm waits.
    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }
}

/// What the thread tells a woken task: its place in the firing order and
/// when it fired.
#[derive(Debug, Clone, Copy)]
pub struct Fired {
    pub order: u64,
    pub at: Instant,
}

type Request = (Instant, oneshot::Sender<Fired>);

/// A handle on the alarm thread; clones share it. When the thread could not
/// be started, waits fall back to the runtime's (millisecond) timer.
#[derive(Clone)]
pub struct Alarms {
    tx: Option<Sender<Request>>,
}

impl Alarms {
    /// Start the alarm thread (it ends when the last handle is dropped).
    pub fn start() -> Self {
        Self::spawn().map_or(Self { tx: None }, |(alarms, _)| alarms)
    }

    /// Start the alarm thread; the join handle is for tests.
    pub fn spawn() -> std::io::Result<(Self, std::thread::JoinHandle<()>)> {
        let (tx, rx) = channel();
        let handle = std::thread::Builder::new()
            .name("kneecap-alarms".into())
            .spawn(move || run(rx))?;
        Ok((Self { tx: Some(tx) }, handle))
    }

    /// Wait until `at`.
    pub async fn until(&self, at: Instant) {
        let _ = self.wait(at).await;
    }

    /// Wait until `at`; what the thread said when it fired (`None`: already
    /// due, or the runtime's timer stood in for the thread).
    pub async fn wait(&self, at: Instant) -> Option<Fired> {
        if Instant::now() >= at {
            return None;
        }
        if let Some(tx) = &self.tx {
            let (fire, fired) = oneshot::channel();
            if tx.send((at, fire)).is_ok() {
                if let Ok(f) = fired.await {
                    return Some(f);
                }
            }
        }
        tokio::time::sleep_until(tokio::time::Instant::from_std(at)).await;
        None
    }
}

/// The alarm thread: until every handle is gone.
fn run(rx: Receiver<Request>) {
    super::dispatch::reduce_timer_slack();
    let mut queue: AlarmQueue<oneshot::Sender<Fired>> = AlarmQueue::default();
    let mut order = 0u64;
    loop {
        let now = Instant::now();
        for fire in queue.pop_due(now) {
            order += 1;
            // A receiver dropped meanwhile (its task stopped waiting): fine.
            let _ = fire.send(Fired { order, at: now });
        }
        let next = match queue.next_at() {
            None => rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
            Some(at) => {
                let left = at.saturating_duration_since(Instant::now());
                if left > SPIN_MARGIN {
                    rx.recv_timeout(left - SPIN_MARGIN)
                } else {
                    match rx.try_recv() {
                        Ok(r) => Ok(r),
                        Err(TryRecvError::Empty) => {
                            std::hint::spin_loop();
                            std::thread::yield_now();
                            continue;
                        }
                        Err(TryRecvError::Disconnected) => Err(RecvTimeoutError::Disconnected),
                    }
                }
            }
        };
        match next {
            Ok((at, fire)) => {
                queue.push(at, fire);
                // Take whatever else arrived meanwhile in the same wake-up.
                while let Ok((at, fire)) = rx.try_recv() {
                    queue.push(at, fire);
                }
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return,
        }
    }
}

#[cfg(test)]
#[path = "alarm_tests.rs"]
mod tests;

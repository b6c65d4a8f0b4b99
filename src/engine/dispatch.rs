//! Dispatcher: releases each request at its due time from a dedicated thread
//! with a high-resolution wait (the async runtime's millisecond timer is too
//! coarse), releasing every arrival already due at each wake-up. It never
//! waits on responses: in open loop it only hands releases to the runtime.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc::UnboundedSender;

/// One request released by the dispatcher.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Release {
    /// Arrival index (position in the global schedule).
    pub index: usize,
    /// Offset from t0 at which it was due.
    pub due: Duration,
    /// Offset from t0 at which the dispatcher released it.
    pub released: Duration,
}

/// Below this remaining wait the thread spins instead of sleeping: a sleep
/// wakes up ~50–100 µs late even with minimal timer slack.
const SPIN_MARGIN: Duration = Duration::from_micros(150);

/// Which releases are due at `now` (pure): indices `[next, end)` of `due`
/// whose offset is ≤ `now`. Returns the end of that run.
pub fn due_until(due: &[Duration], next: usize, now: Duration) -> usize {
    let mut end = next;
    while end < due.len() && due[end] <= now {
        end += 1;
    }
    end
}

/// Run the dispatcher on the current thread until every offset is released,
/// `cancel` is set, or the receiver is gone.
pub fn run(t0: Instant, due: &[Duration], tx: UnboundedSender<Release>, cancel: Arc<AtomicBool>) {
    reduce_timer_slack();
    let mut next = 0;
    while next < due.len() {
        if cancel.load(Ordering::Relaxed) {
            return;
        }
        wait_until(t0 + due[next], &cancel);
        let now = t0.elapsed();
        let end = due_until(due, next, now).max(next + 1);
        for (i, d) in due.iter().enumerate().take(end).skip(next) {
            let release = Release {
                index: i,
                due: *d,
                released: t0.elapsed(),
            };
            if tx.send(release).is_err() {
                return;
            }
        }
        next = end;
    }
}

/// Sleep most of the way, then spin the last stretch; wakes early if cancelled.
fn wait_until(deadline: Instant, cancel: &AtomicBool) {
    loop {
        let now = Instant::now();
        if now >= deadline {
            return;
        }
        let left = deadline - now;
        if left > SPIN_MARGIN {
            // Cap each sleep so a cancel is noticed within 50 ms.
            std::thread::sleep((left - SPIN_MARGIN).min(Duration::from_millis(50)));
            if cancel.load(Ordering::Relaxed) {
                return;
            }
        } else {
            std::hint::spin_loop();
            std::thread::yield_now();
        }
    }
}

/// Ask Linux for 1 ns timer slack on this thread (default 50 µs), so sleeps
/// end closer to their deadline. Best effort; harmless elsewhere.
#[allow(unsafe_code)]
pub(super) fn reduce_timer_slack() {
    #[cfg(target_os = "linux")]
    // SAFETY: prctl(PR_SET_TIMERSLACK) takes plain integers, touches no memory
    // of ours, and only affects the calling thread.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn every_arrival_already_due_is_released_in_one_wake() {
        let due = [ms(0), ms(1), ms(1), ms(5), ms(9)];
        assert_eq!(due_until(&due, 0, ms(1)), 3);
        assert_eq!(
            due_until(&due, 3, ms(4)),
            3,
            "nothing new is due before 5 ms"
        );
        assert_eq!(
            due_until(&due, 3, ms(100)),
            5,
            "a late wake-up catches up on everything"
        );
    }

    #[test]
    fn dispatcher_releases_all_in_order_and_records_release_times() {
        let due: Vec<Duration> = (0..50).map(|i| Duration::from_micros(200 * i)).collect();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let t0 = Instant::now();
        run(t0, &due, tx, Arc::new(AtomicBool::new(false)));
        let mut got = Vec::new();
        while let Ok(r) = rx.try_recv() {
            got.push(r);
        }
        assert_eq!(got.len(), 50);
        for (i, r) in got.iter().enumerate() {
            assert_eq!(r.index, i);
            assert_eq!(r.due, due[i]);
            assert!(r.released >= r.due, "released before due: {r:?}");
        }
    }

    #[test]
    fn cancelled_dispatcher_stops_releasing() {
        let due: Vec<Duration> = (0..10).map(|i| Duration::from_secs(100 + i)).collect();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let cancel = Arc::new(AtomicBool::new(true));
        run(Instant::now(), &due, tx, cancel);
        assert!(rx.try_recv().is_err());
    }
}

//! The wall clock of the command layer: Unix time as a [`StartAt`], and
//! sleeping until `--start-at` or a sharded sweep step's slot. The pure
//! `shard` rules decide *when*; this file only reads the clock and sleeps.

use crate::shard::StartAt;
use anyhow::Result;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Now as a [`StartAt`] (wall clock).
pub fn now() -> StartAt {
    let ns = match SystemTime::now().duration_since(UNIX_EPOCH) {
        Ok(d) => d.as_nanos() as i128,
        Err(e) => -(e.duration().as_nanos() as i128),
    };
    StartAt(ns)
}

/// Sleep until `start` (checked by [`crate::shard::wait_for_start`] first).
pub async fn wait_until(start: StartAt) -> Result<()> {
    let wait = crate::shard::wait_for_start(start, now()).map_err(anyhow::Error::msg)?;
    if !wait.is_zero() {
        eprintln!(
            "kneecap: waiting {:.1} s for --start-at {}",
            wait.as_secs_f64(),
            start.rfc3339()
        );
    }
    // Sleep most of the way on the timer, then re-read the wall clock: the
    // start is a wall-clock instant shared with other machines.
    tokio::time::sleep(wait.saturating_sub(Duration::from_millis(5))).await;
    loop {
        let left = start.0 - now().0;
        if left <= 0 {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_nanos(left as u64)).await;
    }
}

/// Wall-clock time as Unix seconds.
pub fn unix_s(t: SystemTime) -> f64 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => d.as_secs_f64(),
        Err(e) => -e.duration().as_secs_f64(),
    }
}

/// Sleep until a sweep step's slot (see [`crate::shard::step_starts`]). Returns how
/// far (ms) the slot was already past when the shard got to it — the previous
/// step overran its slot — or `None` when the shard was on time and waited.
pub async fn wait_for_slot(slot: StartAt) -> Option<f64> {
    let behind = now().0 - slot.0;
    if behind > 0 {
        return Some(behind as f64 / 1e6);
    }
    tokio::time::sleep(
        Duration::from_nanos((-behind) as u64).saturating_sub(Duration::from_millis(5)),
    )
    .await;
    loop {
        let left = slot.0 - now().0;
        if left <= 0 {
            return None;
        }
        tokio::time::sleep(Duration::from_nanos(left as u64)).await;
    }
}

/// CPU seconds this process has used so far, every thread counted (`None`
/// where the OS clock is not available).
pub fn cpu_seconds() -> Option<f64> {
    #[cfg(target_os = "linux")]
    {
        use nix::time::{clock_gettime, ClockId};
        clock_gettime(ClockId::CLOCK_PROCESS_CPUTIME_ID)
            .ok()
            .map(|t| t.tv_sec() as f64 + t.tv_nsec() as f64 * 1e-9)
    }
    #[cfg(not(target_os = "linux"))]
    {
        None
    }
}

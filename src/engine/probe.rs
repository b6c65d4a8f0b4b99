//! Self-measurement of the load generator: process CPU time (getrusage) and
//! an event-loop lag probe (how late a short async sleep wakes up). These
//! feed the generator-health verdict; they never touch the server.

use std::time::{Duration, Instant};
use tokio::sync::watch;

/// User + system CPU time this process has used so far.
#[allow(unsafe_code)]
pub fn process_cpu_time() -> Option<Duration> {
    #[cfg(unix)]
    {
        let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
        // SAFETY: getrusage writes a rusage struct into the pointer we pass,
        // which points to properly sized, writable memory.
        let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr()) };
        if rc != 0 {
            return None;
        }
        // SAFETY: rc == 0 means the kernel filled the struct.
        let u = unsafe { usage.assume_init() };
        let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, (t.tv_usec as u32) * 1000);
        Some(tv(u.ru_utime) + tv(u.ru_stime))
    }
    #[cfg(not(unix))]
    {
        None
    }
}

/// CPU use between two readings as a fraction of all cores (0..1).
pub fn cpu_busy_fraction(cpu_before: Duration, cpu_after: Duration, wall: Duration) -> Option<f64> {
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1) as f64;
    if wall.is_zero() {
        return None;
    }
    Some(cpu_after.saturating_sub(cpu_before).as_secs_f64() / (wall.as_secs_f64() * cores))
}

/// Measure event-loop lag until `stop` turns true: every `every`, spawn a
/// task that is ready at once and record how long the runtime took to poll
/// it (milliseconds). This is the delay any ready request task (a response
/// chunk to timestamp, a request to send) sees; unlike timing a sleep, it is
/// not blurred by the timer wheel's 1 ms resolution.
pub async fn lag_probe(every: Duration, mut stop: watch::Receiver<bool>) -> Vec<f64> {
    let mut lags = Vec::new();
    loop {
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            _ = stop.changed() => break,
        }
        if *stop.borrow() {
            break;
        }
        let ready_at = Instant::now();
        if let Ok(polled_at) = tokio::spawn(async { Instant::now() }).await {
            lags.push(polled_at.saturating_duration_since(ready_at).as_secs_f64() * 1e3);
        }
    }
    lags
}

/// What the generator measured about itself while some work ran.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SelfCheck {
    /// Process CPU time / (wall time × cores) over the work.
    pub cpu_busy_fraction: Option<f64>,
    /// Runtime scheduling lag samples (ms), one per probe period.
    pub lags_ms: Vec<f64>,
}

impl SelfCheck {
    /// p99 of the lag samples (ms), by the stats module's percentile.
    pub fn lag_p99_ms(&self) -> Option<f64> {
        let mut lags = self.lags_ms.clone();
        lags.sort_by(f64::total_cmp);
        (!lags.is_empty()).then(|| crate::metrics::stats::percentile(&lags, 99.0))
    }
}

/// Run `work` with the lag probe beside it and the process CPU measured
/// around it.
pub async fn self_checked<T>(
    work: impl std::future::Future<Output = T>,
    every: Duration,
) -> (T, SelfCheck) {
    let (stop_tx, stop_rx) = watch::channel(false);
    let cpu0 = process_cpu_time();
    let t0 = Instant::now();
    let run = async {
        let out = work.await;
        let _ = stop_tx.send(true);
        out
    };
    let (out, lags_ms) = tokio::join!(run, lag_probe(every, stop_rx));
    let cpu_busy_fraction = match (cpu0, process_cpu_time()) {
        (Some(a), Some(b)) => cpu_busy_fraction(a, b, t0.elapsed()),
        _ => None,
    };
    (
        out,
        SelfCheck {
            cpu_busy_fraction,
            lags_ms,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_time_grows_when_we_burn_cpu() {
        let before = process_cpu_time().unwrap();
        let t = Instant::now();
        let mut x = 0u64;
        while t.elapsed() < Duration::from_millis(50) {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        }
        std::hint::black_box(x);
        let after = process_cpu_time().unwrap();
        assert!(after > before);
    }

    #[test]
    fn busy_fraction_divides_by_cores_and_wall_time() {
        let cores = std::thread::available_parallelism().unwrap().get() as f64;
        let f = cpu_busy_fraction(
            Duration::ZERO,
            Duration::from_secs(1),
            Duration::from_secs(2),
        )
        .unwrap();
        assert!((f - 0.5 / cores).abs() < 1e-12);
        assert!(cpu_busy_fraction(Duration::ZERO, Duration::ZERO, Duration::ZERO).is_none());
    }

    #[test]
    fn lag_p99_is_numpy_linear_over_the_samples() {
        // np.percentile(np.arange(1, 101), 99) == 99.01
        let check = SelfCheck {
            cpu_busy_fraction: None,
            lags_ms: (1..=100).rev().map(f64::from).collect(),
        };
        assert!((check.lag_p99_ms().unwrap() - 99.01).abs() < 1e-9);
        assert_eq!(SelfCheck::default().lag_p99_ms(), None);
    }
}

//! Receive stamps: which clock each successful request's arrival times came
//! from (the kernel's receive time or the task's read), and the client
//! scheduling delay, the task's read minus the kernel's receive time at the
//! first token. The delay is what task-stamped latencies would have added;
//! the generator self-check reports it. PURE: reads records, never a clock.
use super::{distribution, successful, Distribution};
use crate::metrics::{RequestRecord, StampSource};

/// The percentiles the scheduling delay is reported at, whatever
/// `--metric-percentiles` says.
pub const PERCENTILES: [f64; 2] = [50.0, 99.0];

/// Stamp sources and the scheduling delay over one run's successful requests.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct StampStats {
    /// Successful requests whose first token was kernel-stamped.
    pub kernel: usize,
    /// Successful requests stamped on their task (no kernel stamp).
    pub task: usize,
    /// Task read minus kernel receive time at the first token (ms), over
    /// the kernel-stamped requests.
    pub scheduling_delay: Distribution,
    /// TTFT as the tasks saw it (kernel-stamped TTFT plus the delay), ms.
    pub ttft_task_stamped: Distribution,
}

impl StampStats {
    /// Count the sources and summarize the delays of `records`' successes.
    pub fn of(records: &[RequestRecord], percentiles: &[f64]) -> Self {
        let (mut kernel, mut task) = (0, 0);
        let mut delays = Vec::new();
        let mut ttft_task = Vec::new();
        for r in successful(records) {
            match r.stamp {
                StampSource::Kernel => kernel += 1,
                StampSource::Task => task += 1,
            }
            if let Some(d) = r.first_token_delay {
                delays.push(d.as_secs_f64());
            }
            if let Some(t) = r.ttft_task_stamped() {
                ttft_task.push(t.as_secs_f64());
            }
        }
        StampStats {
            kernel,
            task,
            scheduling_delay: distribution(&delays, percentiles),
            ttft_task_stamped: distribution(&ttft_task, percentiles),
        }
    }

    /// `kernel`, `task`, `mixed`, or `none` (no successful request).
    pub fn source(&self) -> &'static str {
        match (self.kernel, self.task) {
            (0, 0) => "none",
            (_, 0) => "kernel",
            (0, _) => "task",
            _ => "mixed",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{failed, ms, ok};
    use super::*;
    use crate::metrics::ErrorKind;

    fn kernel_stamped(delay_ms: u64) -> RequestRecord {
        let mut r = ok(0, 100, &[10], 2);
        r.stamp = StampSource::Kernel;
        r.first_token_delay = Some(ms(delay_ms));
        r
    }

    #[test]
    fn sources_are_counted_and_delays_summarized_over_successes() {
        let mut lost = failed(0, ErrorKind::Reset);
        lost.stamp = StampSource::Kernel;
        lost.first_token_delay = Some(ms(500));
        let records = [
            kernel_stamped(1),
            kernel_stamped(3),
            ok(0, 100, &[10], 2),
            lost,
        ];
        let s = StampStats::of(&records, &[50.0]);
        assert_eq!((s.kernel, s.task, s.source()), (2, 1, "mixed"));
        assert_eq!(s.scheduling_delay.count, 2);
        assert!((s.scheduling_delay.median_ms - 2.0).abs() < 1e-9);
        assert!((s.scheduling_delay.max_ms - 3.0).abs() < 1e-9);
        // Task-stamped TTFT: 101, 103 and the task-stamped request's 100.
        assert!((s.ttft_task_stamped.max_ms - 103.0).abs() < 1e-9);
        assert!((s.ttft_task_stamped.median_ms - 101.0).abs() < 1e-9);
    }

    #[test]
    fn the_source_names_what_every_success_used() {
        let all_kernel = StampStats::of(&[kernel_stamped(0)], &[]);
        assert_eq!(all_kernel.source(), "kernel");
        assert_eq!(StampStats::of(&[ok(0, 1, &[], 1)], &[]).source(), "task");
        assert_eq!(StampStats::of(&[], &[]).source(), "none");
    }
}

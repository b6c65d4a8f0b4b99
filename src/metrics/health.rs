//! Generator health: was the load generator itself the bottleneck during a
//! step (load-generation.md G7)? A limited step is never the server's knee.
//! PURE: judges numbers the caller measured; no clock, no I/O.
//!
//! The lateness bound is `max(1 ms, 10% of the mean inter-arrival gap 1/λ)`.
//! The generator is **limited** when dispatch lateness p99 exceeds the bound,
//! when the process's CPU busy fraction (CPU time / (wall · cores)) is at least
//! [`CPU_LIMITED`], or when the event-loop lag p99 exceeds the same bound. A CPU
//! busy fraction of at least [`CPU_WARN`] is only a warning. The lateness
//! judged is that of the requests the server did not turn away at once
//! ([`judged_lateness`]).
use crate::metrics::refusal::failed_at_once;
use crate::metrics::stats::{self, request, Distribution};
use crate::metrics::RequestRecord;
use serde::{Deserialize, Serialize};

/// CPU busy fraction (of the available cores) that marks a step limited.
pub const CPU_LIMITED: f64 = 0.95;
/// CPU busy fraction that earns a warning (k6's guidance).
pub const CPU_WARN: f64 = 0.80;
/// The lateness bound never goes below this many ms.
pub const LATENESS_FLOOR_MS: f64 = 1.0;
/// Share of the mean inter-arrival gap allowed as lateness p99.
pub const LATENESS_GAP_FRACTION: f64 = 0.10;

/// The generator's verdict for one step.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct GeneratorHealth {
    /// True when the generator could not hold the schedule.
    pub limited: bool,
    /// Why it was limited (empty when healthy).
    pub reasons: Vec<String>,
    /// Signs of strain that did not make it limited.
    pub warnings: Vec<String>,
    /// Dispatch lateness p99 (ms) as judged.
    pub lateness_p99_ms: f64,
    /// The bound lateness and event-loop lag were held to (ms).
    pub lateness_bound_ms: f64,
    /// Client scheduling delay p99 (ms), when reads were kernel-stamped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduling_delay_p99_ms: Option<f64>,
}

impl GeneratorHealth {
    /// Note the client scheduling delay p99 (ms): how much later than the
    /// kernel the request tasks saw their first tokens. Over the lateness
    /// bound it is a warning: the kernel-stamped latencies do not include
    /// it, but task-stamped ones (vLLM's clients) would.
    pub fn with_scheduling_delay(mut self, p99_ms: Option<f64>) -> Self {
        self.scheduling_delay_p99_ms = p99_ms;
        let bound = self.lateness_bound_ms;
        if let Some(d) = p99_ms.filter(|d| *d > bound) {
            self.warnings.push(format!(
                "client scheduling delay p99 {d:.3} ms > {bound:.3} ms (latencies use kernel receive stamps, which exclude it)"
            ));
        }
        self
    }
}

/// `max(1 ms, 10% of 1/λ)` in ms; just the 1 ms floor when λ is not a
/// positive finite rate (closed loop, or nothing offered).
pub fn lateness_bound_ms(offered_rate: f64) -> f64 {
    if offered_rate.is_finite() && offered_rate > 0.0 {
        LATENESS_FLOOR_MS.max(LATENESS_GAP_FRACTION * 1000.0 / offered_rate)
    } else {
        LATENESS_FLOOR_MS
    }
}

/// The dispatch lateness the generator is judged on (ms; median and p99):
/// every request that was sent, except those the server turned away at once
/// ([`failed_at_once`]). Such a request measured nothing, and it frees its
/// slot at once: a closed loop whose requests are all refused releases
/// thousands a second, and each waits behind the others for the runtime, so
/// its lateness measures the refusals, not the schedule the server saw.
pub fn judged_lateness(records: &[RequestRecord]) -> Distribution {
    let late: Vec<f64> = records
        .iter()
        .filter(|r| request::was_sent(r) && !failed_at_once(r))
        .map(request::lateness_seconds)
        .collect();
    stats::distribution(&late, &[50.0, 99.0])
}

/// p99 of `d` from its percentile list, or its max when p99 was not requested.
pub fn p99_ms(d: &Distribution) -> f64 {
    d.percentile_ms(99.0).unwrap_or(d.max_ms)
}

/// Judge the generator over one step. `lateness` is the step's dispatch
/// lateness distribution (ms); `cpu_busy_fraction` is CPU time / (wall ·
/// cores); `event_loop_lag_p99_ms` comes from the lag probe, if any.
pub fn generator_health(
    lateness: &Distribution,
    offered_rate: f64,
    cpu_busy_fraction: Option<f64>,
    event_loop_lag_p99_ms: Option<f64>,
) -> GeneratorHealth {
    let bound = lateness_bound_ms(offered_rate);
    generator_health_with_bound(lateness, bound, cpu_busy_fraction, event_loop_lag_p99_ms)
}

/// [`generator_health`] with an explicit lateness bound in ms (the user's
/// `--max-lateness-ms`), instead of the one derived from the offered rate.
pub fn generator_health_with_bound(
    lateness: &Distribution,
    bound: f64,
    cpu_busy_fraction: Option<f64>,
    event_loop_lag_p99_ms: Option<f64>,
) -> GeneratorHealth {
    let p99 = p99_ms(lateness);
    let mut health = GeneratorHealth {
        lateness_p99_ms: p99,
        lateness_bound_ms: bound,
        ..GeneratorHealth::default()
    };
    if p99 > bound {
        health.reasons.push(format!(
            "dispatch lateness p99 {p99:.3} ms > {bound:.3} ms bound"
        ));
    }
    if let Some(cpu) = cpu_busy_fraction {
        let pct = cpu * 100.0;
        if cpu >= CPU_LIMITED {
            health.reasons.push(format!(
                "generator CPU {pct:.0}% busy ≥ {:.0}%",
                CPU_LIMITED * 100.0
            ));
        } else if cpu >= CPU_WARN {
            health.warnings.push(format!(
                "generator CPU {pct:.0}% busy ≥ {:.0}%",
                CPU_WARN * 100.0
            ));
        }
    }
    if let Some(lag) = event_loop_lag_p99_ms {
        if lag > bound {
            health.reasons.push(format!(
                "event-loop lag p99 {lag:.3} ms > {bound:.3} ms bound"
            ));
        }
    }
    health.limited = !health.reasons.is_empty();
    health
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lateness(p99: f64, max: f64) -> Distribution {
        Distribution {
            count: 1000,
            max_ms: max,
            percentiles_ms: vec![(50.0, 0.05), (99.0, p99)],
            ..Distribution::default()
        }
    }

    #[test]
    fn lateness_bound_is_ten_percent_of_the_gap_with_a_one_ms_floor() {
        assert_eq!(lateness_bound_ms(10.0), 10.0); // gap 100 ms
        assert_eq!(lateness_bound_ms(100.0), 1.0); // gap 10 ms → exactly the floor
        assert_eq!(lateness_bound_ms(5000.0), 1.0); // 0.02 ms, floored
        assert_eq!(lateness_bound_ms(0.0), 1.0);
        assert_eq!(lateness_bound_ms(f64::INFINITY), 1.0);
    }

    #[test]
    fn lateness_p99_exactly_at_the_bound_is_healthy_and_just_above_is_limited() {
        let at = generator_health(&lateness(10.0, 50.0), 10.0, None, None);
        assert!(!at.limited, "{at:?}");
        let above = generator_health(&lateness(10.001, 50.0), 10.0, None, None);
        assert!(above.limited);
        assert!(above.reasons[0].contains("lateness p99"), "{above:?}");
    }

    #[test]
    fn at_high_rates_the_one_ms_floor_applies() {
        assert!(!generator_health(&lateness(1.0, 9.0), 1000.0, None, None).limited);
        assert!(generator_health(&lateness(1.01, 9.0), 1000.0, None, None).limited);
    }

    #[test]
    fn a_missing_p99_falls_back_to_the_max() {
        let no_p99 = Distribution {
            max_ms: 12.0,
            percentiles_ms: vec![(50.0, 0.1)],
            ..Distribution::default()
        };
        assert_eq!(p99_ms(&no_p99), 12.0);
        assert!(generator_health(&no_p99, 10.0, None, None).limited);
        assert!(!generator_health(&lateness(0.5, 12.0), 10.0, None, None).limited);
    }

    #[test]
    fn cpu_at_95_percent_is_limited_and_at_80_percent_only_warned() {
        let quiet = lateness(0.1, 0.2);
        let busy = generator_health(&quiet, 10.0, Some(0.95), None);
        assert!(busy.limited && busy.reasons[0].contains("CPU"));
        let nearly = generator_health(&quiet, 10.0, Some(0.949), None);
        assert!(!nearly.limited);
        assert_eq!(nearly.warnings.len(), 1);
        let calm = generator_health(&quiet, 10.0, Some(0.79), None);
        assert!(!calm.limited && calm.warnings.is_empty());
    }

    #[test]
    fn a_scheduling_delay_over_the_bound_warns_but_does_not_limit() {
        let quiet = lateness(0.1, 0.2);
        let slow = generator_health(&quiet, 10.0, None, None).with_scheduling_delay(Some(12.0));
        assert!(!slow.limited, "{slow:?}");
        assert_eq!(slow.scheduling_delay_p99_ms, Some(12.0));
        assert!(
            slow.warnings[0].contains("scheduling delay p99 12.000"),
            "{slow:?}"
        );
        let fine = generator_health(&quiet, 10.0, None, None).with_scheduling_delay(Some(9.0));
        assert!(fine.warnings.is_empty());
        let none = generator_health(&quiet, 10.0, None, None).with_scheduling_delay(None);
        assert_eq!(none.scheduling_delay_p99_ms, None);
    }

    #[test]
    fn lateness_is_judged_without_the_requests_turned_away_at_once() {
        use crate::metrics::stats::testing::{failed, ms, ok};
        use crate::metrics::ErrorKind;
        let late = |mut r: RequestRecord, by: u64| {
            r.sent += ms(by);
            r
        };
        let mut refused = failed(0, ErrorKind::Status);
        refused.error.as_mut().unwrap().status = Some(400);
        let mut server_error = failed(0, ErrorKind::Status);
        server_error.error.as_mut().unwrap().status = Some(500);
        let records = vec![
            late(ok(0, 10, &[], 1), 2),
            late(ok(0, 10, &[], 1), 2),
            late(refused.clone(), 300),
            late(failed(0, ErrorKind::RateLimited), 300),
            late(failed(0, ErrorKind::Connect), 300),
            late(server_error, 40),
        ];
        let d = judged_lateness(&records);
        assert_eq!(
            d.count, 3,
            "two answers and a 5xx (it may come after the work)"
        );
        assert!((d.max_ms - 40.0).abs() < 1e-9, "{d:?}");
        let all_refused = judged_lateness(&[late(refused, 300)]);
        assert_eq!((all_refused.count, p99_ms(&all_refused)), (0, 0.0));
        assert!(!generator_health(&all_refused, 1.0, None, None).limited);
    }

    #[test]
    fn event_loop_lag_is_held_to_the_lateness_bound() {
        let quiet = lateness(0.1, 0.2);
        assert!(!generator_health(&quiet, 10.0, None, Some(10.0)).limited);
        let lagging = generator_health(&quiet, 10.0, None, Some(10.5));
        assert!(lagging.limited && lagging.reasons[0].contains("event-loop"));
    }
}

//! Calibration: a short closed-loop probe of the service rate μ before the
//! open-loop search, so the search starts near the knee instead of at
//! 1 req/s. PURE: the command layer runs each level and passes what it saw.
//!
//! The probe runs 1, 2, … concurrent streams, doubling (quadrupling while
//! throughput still scales almost linearly). A closed loop without think
//! time completes `X = c / R` requests per second (Little's law, `R` the mean
//! end-to-end latency). A level is short, a few latencies, so its mean
//! latency is pulled down by the first wave (all `c` streams start on an
//! empty queue, and a batch server takes them in together). So `R` is the
//! mean latency of the requests *sent after the first completion*
//! ([`steady_latency`]): each was sent when a stream came back, into a
//! system that already held the other `c − 1` streams, which is the steady
//! state of a closed loop; they are drained to the end, so a slow one is not
//! left out. Only without enough of them does `X` come from the rate of
//! completions ([`departure_rate`]), and then from the plain `c / R`.
//! (Counting completions over a level a few latencies long overstates `X`
//! on a batch server whose completions come in waves: 107 req/s against
//! 72.5 on the `tiny` preset at 32–128 streams.) While the server has free batch slots, doubling `c`
//! nearly doubles `X`; once the batch is full, extra streams only queue and
//! `X` stays at μ. The probe stops when `X` rises by less than
//! [`PLATEAU_GAIN`], at the first failed request, when a level completes
//! nothing (a stalled server), or when its time budget would be exceeded.
//! Only a plateau (or a budget reached while still climbing, a lower bound)
//! gives a μ to start from; errors and stalls fall back to the doubling search.

use super::knee::SearchPlan;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// `X` must grow by at least this factor per doubling to keep probing.
pub const PLATEAU_GAIN: f64 = 1.10;
/// The search starts at this fraction of the probed μ.
pub const START_FRACTION: f64 = 0.75;
/// Shortest probe level.
pub const MIN_LEVEL: Duration = Duration::from_millis(1500);
/// A level lasts this many of the previous level's mean latencies (each
/// stream then completes about that many requests).
const LEVEL_LATENCIES: f64 = 3.0;
/// Throughput that grew by at least this factor per doubling is far from
/// the plateau: the next level quadruples the streams instead of doubling.
const LINEAR_GAIN: f64 = 1.8;

/// What one probe level saw.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbeLevel {
    /// Concurrent streams.
    pub concurrency: usize,
    /// Requests that finished successfully.
    pub completed: usize,
    /// Requests that failed (an error from the server or the connection).
    pub failed: usize,
    /// Requests still unanswered when the probe's budget ran out (cancelled):
    /// the server stalls them.
    pub stuck: usize,
    /// Mean end-to-end latency of the completed requests, seconds.
    pub mean_e2el_s: Option<f64>,
    /// How long the level ran, seconds.
    pub duration_s: f64,
    /// Completions per second while every stream was running
    /// ([`departure_rate`]).
    #[serde(default)]
    pub departure_rate: Option<f64>,
    /// Mean end-to-end latency of the requests sent after the first
    /// completion, seconds ([`steady_latency`]).
    #[serde(default)]
    pub steady_e2el_s: Option<f64>,
}

impl ProbeLevel {
    /// Completed requests per second: Little's law over the steady
    /// latency, else the measured departure rate, else `c / R` over every
    /// completed request.
    pub fn throughput(&self) -> Option<f64> {
        let steady = self
            .steady_e2el_s
            .filter(|r| *r > 0.0)
            .map(|r| self.concurrency as f64 / r);
        steady.or(self.departure_rate).or_else(|| {
            self.mean_e2el_s
                .filter(|r| *r > 0.0 && self.completed > 0)
                .map(|r| self.concurrency as f64 / r)
        })
    }
}

/// Fewest completions a departure rate rests on.
const MIN_DEPARTURES: usize = 4;

/// The rate of completions from the first one (the start-up transient of
/// an empty queue is over once something has left) to the last one by
/// `releases_end`, the end of the level's releases, while all its streams
/// were running: completions after the first over the time between first
/// and last. `ends` are the successful requests' completion times from the
/// level's start. `None` with fewer than `MIN_DEPARTURES` (4) of them.
pub fn departure_rate(ends: &[Duration], releases_end: Duration) -> Option<f64> {
    let first = *ends.iter().min()?;
    let inside: Vec<Duration> = ends
        .iter()
        .copied()
        .filter(|&e| e > first && e <= releases_end)
        .collect();
    let last = *inside.iter().max()?;
    let span = (last - first).as_secs_f64();
    (inside.len() >= MIN_DEPARTURES && span > 0.0).then(|| inside.len() as f64 / span)
}

/// The mean latency, seconds, of the requests sent at or after the first
/// completion: `(sent, end)` of each successful request, from the level's
/// start. `None` with fewer than `MIN_DEPARTURES` (4) of them.
pub fn steady_latency(visits: &[(Duration, Duration)]) -> Option<f64> {
    let first = visits.iter().map(|v| v.1).min()?;
    let late: Vec<f64> = visits
        .iter()
        .filter(|v| v.0 >= first)
        .map(|v| v.1.saturating_sub(v.0).as_secs_f64())
        .collect();
    (late.len() >= MIN_DEPARTURES).then(|| late.iter().sum::<f64>() / late.len() as f64)
}

/// Why the probe ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProbeEnd {
    /// Throughput stopped rising: μ found.
    Plateau,
    /// The budget ran out while throughput still rose: μ is a lower bound.
    Budget,
    /// The concurrency limit was reached while throughput still rose.
    Limit,
    /// A request failed.
    Errors,
    /// A level completed nothing, or left a request unanswered to the end
    /// of the budget.
    Stalled,
}

impl ProbeEnd {
    /// Whether the probe's μ may start the search.
    pub fn usable(self) -> bool {
        matches!(self, ProbeEnd::Plateau | ProbeEnd::Budget | ProbeEnd::Limit)
    }
}

/// What the probe does next.
#[derive(Debug, Clone, PartialEq)]
pub enum ProbeStep {
    /// Run `concurrency` streams for `length`.
    Run {
        concurrency: usize,
        length: Duration,
    },
    /// Stop; `mu` is the highest throughput seen when the end is usable.
    Done { end: ProbeEnd, mu: Option<f64> },
}

/// The next probe level, given the levels so far, the time spent and the
/// budget, and the most streams allowed.
pub fn next_probe(
    levels: &[ProbeLevel],
    spent: Duration,
    budget: Duration,
    max_concurrency: usize,
) -> ProbeStep {
    let Some(last) = levels.last() else {
        return ProbeStep::Run {
            concurrency: 1,
            length: MIN_LEVEL.min(budget),
        };
    };
    let done = |end: ProbeEnd| ProbeStep::Done {
        end,
        mu: end.usable().then(|| best(levels)).flatten(),
    };
    if last.completed == 0 || last.stuck > 0 {
        return done(ProbeEnd::Stalled);
    }
    if last.failed > 0 {
        return done(ProbeEnd::Errors);
    }
    let mut jump = 2;
    if let [.., prev, last] = levels {
        if let (Some(a), Some(b)) = (prev.throughput(), last.throughput()) {
            if b < a * PLATEAU_GAIN {
                return done(ProbeEnd::Plateau);
            }
            if b >= a * LINEAR_GAIN {
                jump = 4;
            }
        }
    }
    let concurrency = last.concurrency * jump;
    if concurrency > max_concurrency {
        return done(ProbeEnd::Limit);
    }
    let latency = last.mean_e2el_s.unwrap_or(0.0);
    let length = MIN_LEVEL.max(Duration::from_secs_f64(LEVEL_LATENCIES * latency));
    if spent + length > budget {
        return done(ProbeEnd::Budget);
    }
    ProbeStep::Run {
        concurrency,
        length,
    }
}

/// The search plan after the probe: an automatic rate search starting at
/// [`START_FRACTION`] of μ, whose climb stops at μ first; unchanged (the
/// doubling search from `--start`) when the probe found no μ.
pub fn plan_after(plan: &SearchPlan, mu: Option<f64>) -> SearchPlan {
    match (plan.clone(), mu) {
        (
            SearchPlan::Auto {
                factor,
                tolerance,
                max_load,
                max_steps,
                unit,
                ..
            },
            Some(mu),
        ) if mu.is_finite() && mu > 0.0 => SearchPlan::Auto {
            start: (mu * START_FRACTION).min(max_load),
            factor,
            tolerance,
            max_load,
            max_steps,
            unit,
            ceiling: Some(mu),
            opening: Vec::new(),
        },
        (plan, _) => plan,
    }
}

/// The highest throughput of any level.
fn best(levels: &[ProbeLevel]) -> Option<f64> {
    levels
        .iter()
        .filter_map(ProbeLevel::throughput)
        .reduce(f64::max)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A server with `slots` slots and a fixed service time `s`: c streams
    /// see R = s·max(1, c/slots).
    fn level(c: usize, slots: usize, s: f64) -> ProbeLevel {
        ProbeLevel {
            concurrency: c,
            completed: 50,
            failed: 0,
            stuck: 0,
            mean_e2el_s: Some(s * (c as f64 / slots as f64).max(1.0)),
            duration_s: 2.0,
            departure_rate: None,
            steady_e2el_s: None,
        }
    }

    fn probe(server: impl Fn(usize) -> ProbeLevel, budget: Duration) -> (Vec<usize>, ProbeStep) {
        let (mut levels, mut spent) = (Vec::new(), Duration::ZERO);
        loop {
            match next_probe(&levels, spent, budget, 4096) {
                ProbeStep::Run {
                    concurrency,
                    length,
                } => {
                    spent += length;
                    levels.push(server(concurrency));
                }
                done => return (levels.iter().map(|l| l.concurrency).collect(), done),
            }
        }
    }

    #[test]
    fn from_the_probed_rate_the_search_brackets_the_knee_in_few_steps() {
        // The server: μ = 4 / 0.095 s ≈ 42.1 req/s, true knee ≈ 35.
        use crate::result::Verdict;
        use crate::sweep::knee::{knee, next_load, LoadUnit, StepPoint};
        let mu = 4.0 / 0.095;
        let plan = plan_after(&SearchPlan::auto(1.0, 4096.0, LoadUnit::Rate), Some(mu));
        let mut history: Vec<StepPoint> = Vec::new();
        while let Some(load) = next_load(&plan, &history) {
            let verdict = if load <= 35.0 {
                Verdict::Pass
            } else {
                Verdict::Fail
            };
            history.push(StepPoint {
                load,
                verdict,
                achieved_rate: load,
                offered_rate: load,
                steady: true,
                goodput: load,
                mean_waiting: None,
                confidence: None,
                undecided: false,
                evidence: vec![],
                level: None,
            });
        }
        let loads: Vec<f64> = history.iter().map(|p| p.load).collect();
        assert!(
            (loads[0] - 0.75 * mu).abs() < 1e-9,
            "starts at 3/4 μ: {loads:?}"
        );
        assert!(
            (loads[1] - mu).abs() < 1e-9,
            "climbs to μ, not 2× past it: {loads:?}"
        );
        assert!(loads.len() <= 6, "{loads:?}");
        let k = knee(&history);
        let (pass, fail) = (k.last_pass.unwrap(), k.first_fail.unwrap());
        assert!(pass >= 0.95 * 35.0 && fail <= 1.05 * 35.0, "{pass}..{fail}");
        assert!(
            loads.iter().all(|&l| l >= 35.0 / 2.0),
            "no step below half the knee"
        );
    }

    #[test]
    fn without_a_rate_the_plan_is_the_doubling_search() {
        let plan = SearchPlan::auto(1.0, 4096.0, crate::sweep::knee::LoadUnit::Rate);
        assert_eq!(plan_after(&plan, None), plan);
    }

    #[test]
    fn a_four_slot_server_plateaus_at_its_service_rate() {
        let (cs, done) = probe(|c| level(c, 4, 0.095), Duration::from_secs(20));
        assert_eq!(cs, [1, 2, 8, 32], "quadruples while throughput scales");
        let ProbeStep::Done { end, mu } = done else {
            panic!()
        };
        assert_eq!(end, ProbeEnd::Plateau);
        assert!((mu.unwrap() - 4.0 / 0.095).abs() < 1e-9);
    }

    #[test]
    fn errors_and_stalls_end_the_probe_without_a_rate() {
        let failing = |c| ProbeLevel {
            failed: usize::from(c >= 2),
            ..level(c, 4, 0.1)
        };
        let (cs, done) = probe(failing, Duration::from_secs(20));
        assert_eq!(cs, [1, 2]);
        assert_eq!(
            done,
            ProbeStep::Done {
                end: ProbeEnd::Errors,
                mu: None
            }
        );
        let stalled = |c| ProbeLevel {
            completed: 0,
            mean_e2el_s: None,
            ..level(c, 4, 0.1)
        };
        let (_, done) = probe(stalled, Duration::from_secs(20));
        assert_eq!(
            done,
            ProbeStep::Done {
                end: ProbeEnd::Stalled,
                mu: None
            }
        );
        // Some requests answered, one left hanging to the budget's end: a
        // server that stalls some requests is not measured as a fast one.
        let hanging = |c| ProbeLevel {
            stuck: usize::from(c >= 2),
            ..level(c, 4, 0.1)
        };
        let (cs, done) = probe(hanging, Duration::from_secs(20));
        assert_eq!(cs, [1, 2]);
        assert_eq!(
            done,
            ProbeStep::Done {
                end: ProbeEnd::Stalled,
                mu: None
            }
        );
    }

    /// A closed loop of `c` streams on `slots` slots with service time `s`,
    /// run for `length` from an empty queue: each request's (sent, end).
    fn closed_loop(c: usize, slots: usize, s: f64, length: f64) -> Vec<(f64, f64)> {
        let mut free = vec![0.0f64; slots];
        let mut next_send = vec![0.0f64; c];
        let mut ends = Vec::new();
        loop {
            let (stream, &sent) = next_send
                .iter()
                .enumerate()
                .min_by(|a, b| a.1.total_cmp(b.1))
                .unwrap();
            if sent >= length {
                return ends;
            }
            let slot = (0..slots)
                .min_by(|&a, &b| free[a].total_cmp(&free[b]))
                .unwrap();
            let end = free[slot].max(sent) + s;
            free[slot] = end;
            next_send[stream] = end;
            ends.push((sent, end));
        }
    }

    #[test]
    fn the_departure_rate_is_mu_when_the_mean_latency_is_pulled_down_by_the_first_wave() {
        // 4 slots, 95 ms: μ = 42.1/s. 32 streams for 1.5 s: the first wave
        // starts on an empty queue, so c / mean R overstates μ.
        let visits = closed_loop(32, 4, 0.095, 1.5);
        let mean_r = visits.iter().map(|(a, b)| b - a).sum::<f64>() / visits.len() as f64;
        assert!(
            32.0 / mean_r > 45.0,
            "c / R overstates μ: {}",
            32.0 / mean_r
        );
        let ends: Vec<Duration> = visits
            .iter()
            .map(|v| Duration::from_secs_f64(v.1))
            .collect();
        let length = Duration::from_secs_f64(1.5);
        let rate = departure_rate(&ends, length).unwrap();
        assert!((rate - 42.1).abs() < 1.0, "departure rate {rate}");
        // Below the slots, it is c / s.
        let ends2: Vec<Duration> = closed_loop(2, 4, 0.095, 1.5)
            .iter()
            .map(|v| Duration::from_secs_f64(v.1))
            .collect();
        let two = departure_rate(&ends2, length).unwrap();
        assert!((two - 21.05).abs() < 1.0, "two streams: {two}");
        assert_eq!(departure_rate(&ends[..3], length), None, "too few");
        assert_eq!(departure_rate(&[], length), None);
    }

    #[test]
    fn the_steady_latency_gives_mu_where_the_first_wave_overstates_it() {
        let at = |v: &[(f64, f64)]| -> Vec<(Duration, Duration)> {
            v.iter()
                .map(|&(a, b)| (Duration::from_secs_f64(a), Duration::from_secs_f64(b)))
                .collect()
        };
        // A batch server: 32 slots, 0.44 s per request (μ = 72.7/s), 128
        // streams for 1.5 s: the first wave of 128 holds four batches, so
        // c / mean R over every request says ~93/s.
        let visits = closed_loop(128, 32, 0.44, 1.5);
        let all = visits.iter().map(|(a, b)| b - a).sum::<f64>() / visits.len() as f64;
        assert!(128.0 / all > 85.0, "c / R overstates μ: {}", 128.0 / all);
        let r = steady_latency(&at(&visits)).unwrap();
        assert!((128.0 / r - 72.7).abs() < 1.5, "steady: {}", 128.0 / r);
        // The 4-slot server at 32 streams: 42.1/s.
        let r = steady_latency(&at(&closed_loop(32, 4, 0.095, 1.5))).unwrap();
        assert!((32.0 / r - 42.1).abs() < 1.0, "4 slots: {}", 32.0 / r);
        // Below the slots every request takes its service time.
        let r = steady_latency(&at(&closed_loop(2, 4, 0.095, 1.5))).unwrap();
        assert!((r - 0.095).abs() < 1e-9, "{r}");
        let level = ProbeLevel {
            steady_e2el_s: Some(0.44 * 4.0),
            departure_rate: Some(107.0),
            ..level(128, 32, 0.44)
        };
        assert!((level.throughput().unwrap() - 72.7).abs() < 0.1);
        // Too few sent after the first completion: no steady latency.
        assert_eq!(steady_latency(&at(&closed_loop(4, 4, 1.0, 0.9))), None);
    }

    #[test]
    fn the_budget_bounds_the_probe() {
        // 64 slots of 1 s requests: levels last 3 latencies, so a 12 s
        // budget ends the climb; μ is the best level so far (a lower bound).
        let (cs, done) = probe(|c| level(c, 64, 1.0), Duration::from_secs(12));
        assert_eq!(cs, [1, 2, 8, 32]);
        let ProbeStep::Done { end, mu } = done else {
            panic!()
        };
        assert_eq!(end, ProbeEnd::Budget);
        assert_eq!(mu, Some(32.0));
        let (cs, done) = probe(|c| level(c, 64, 1.0), Duration::from_secs(6));
        assert_eq!(cs, [1, 2], "a short budget stops sooner");
        assert!(matches!(done, ProbeStep::Done { end: ProbeEnd::Budget, mu: Some(m) } if m == 2.0));
    }
}

//! Host stalls: the engine paused by what shares its machine. Pure and
//! seeded.
//!
//! On a machine whose cores the engine shares (vLLM on CPU beside its own
//! API server and the load generator), a step now and then takes 2–10
//! times its cost: a thread of the step was off its core. Measured on
//! vLLM 0.32's CPU engine on the 2-core dev host (docs/benchmarks/
//! 2026-12-07.md, "Stalls"): 11–16% of decode steps, 2.5–4 stalls per
//! second of engine time, each adding 100–150 ms on average; a lone step's
//! median is its cost, its mean 20–60% more. The mean moves capacity, the
//! tail moves every p99.
//!
//! The model: stalls arrive as a Poisson process in *engine time* (the
//! time steps take, idle time excluded) at [`HostStalls::rate_per_s`], and
//! each lengthens the step it falls in by a draw from a Gamma distribution
//! of shape [`SHAPE`] and mean [`HostStalls::mean`]. A step of cost `d`
//! thus lasts `d × (1 + rate × mean)` on average. The clock counts engine
//! time in whole nanoseconds, so a run of steps taken at once consumes it
//! exactly as the same steps one by one do (`model_decode_run`).

use rand::rngs::StdRng;
use rand::SeedableRng;
use rand_distr::{Distribution, Exp, Gamma};
use std::time::Duration;

/// The stall sizes' Gamma shape: sd = mean / √2. The measured excess of a
/// stalled step over its median had sd/mean 0.4–1.1; 2 sits between an
/// exponential's heavy tail (1) and the tighter runs.
pub const SHAPE: f64 = 2.0;

/// How often the engine stalls and for how long (0 rate: never).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HostStalls {
    /// Stalls per second of engine time.
    pub rate_per_s: f64,
    /// Their mean length.
    pub mean: Duration,
}

impl HostStalls {
    /// No stalls: the built-in presets, and a profile that saw none.
    pub const NONE: HostStalls = HostStalls {
        rate_per_s: 0.0,
        mean: Duration::ZERO,
    };

    /// Whether there are any.
    pub fn active(&self) -> bool {
        self.rate_per_s > 0.0 && self.rate_per_s.is_finite() && !self.mean.is_zero()
    }

    /// The share of engine time they add on average (`rate × mean`).
    pub fn share(&self) -> f64 {
        if self.active() {
            self.rate_per_s * self.mean.as_secs_f64()
        } else {
            0.0
        }
    }

    /// Checks the values are usable; the message names the field.
    pub fn validate(&self) -> Result<(), String> {
        if !(self.rate_per_s.is_finite() && (0.0..=MAX_RATE_PER_S).contains(&self.rate_per_s)) {
            return Err(format!(
                "stall rate must be between 0 and {MAX_RATE_PER_S} per second, got {}",
                self.rate_per_s
            ));
        }
        if self.mean > MAX_MEAN {
            return Err(format!(
                "stall mean must be at most {} s, got {} s",
                MAX_MEAN.as_secs(),
                self.mean.as_secs_f64()
            ));
        }
        Ok(())
    }
}

/// The most stalls per second of engine time a parameter set may ask for.
pub const MAX_RATE_PER_S: f64 = 1000.0;
/// The longest mean stall.
pub const MAX_MEAN: Duration = Duration::from_secs(60);

/// The stalls of one engine, drawn as its steps consume engine time.
#[derive(Debug, Clone)]
pub struct StallClock {
    gap: Exp<f64>,
    size: Gamma<f64>,
    rng: StdRng,
    /// Engine time left before the next stall.
    until_next: Duration,
}

impl StallClock {
    /// The clock for `stalls` seeded by `seed`; `None` when there are none.
    pub fn new(stalls: HostStalls, seed: u64) -> Option<Self> {
        if !stalls.active() {
            return None;
        }
        let gap = Exp::new(stalls.rate_per_s).ok()?;
        let size = Gamma::new(SHAPE, stalls.mean.as_secs_f64() / SHAPE).ok()?;
        let mut rng = StdRng::seed_from_u64(seed ^ 0x57a1_1c10_c4a5_0001);
        let until_next = seconds(gap.sample(&mut rng));
        Some(Self {
            gap,
            size,
            rng,
            until_next,
        })
    }

    /// Engine time left before the next stall: a step (or a run of steps)
    /// shorter than this has none.
    pub fn until_next(&self) -> Duration {
        self.until_next
    }

    /// Runs `busy` of engine time; what the stalls falling in it add.
    pub fn run(&mut self, busy: Duration) -> Duration {
        let mut left = busy;
        let mut extra = Duration::ZERO;
        while self.until_next <= left {
            left -= self.until_next;
            extra = extra.saturating_add(seconds(self.size.sample(&mut self.rng)));
            // A stall's arrival gap is at least 1 ns, so the loop ends.
            self.until_next = seconds(self.gap.sample(&mut self.rng)).max(Duration::from_nanos(1));
        }
        self.until_next -= left;
        extra
    }
}

/// A non-negative number of seconds as a `Duration`, saturating.
fn seconds(s: f64) -> Duration {
    Duration::try_from_secs_f64(s.max(0.0)).unwrap_or(Duration::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stalls(rate: f64, mean_ms: u64) -> HostStalls {
        HostStalls {
            rate_per_s: rate,
            mean: Duration::from_millis(mean_ms),
        }
    }

    #[test]
    fn none_draws_nothing() {
        assert!(StallClock::new(HostStalls::NONE, 1).is_none());
        assert!(StallClock::new(stalls(3.0, 0), 1).is_none());
        assert_eq!(HostStalls::NONE.share(), 0.0);
    }

    #[test]
    fn the_mean_share_is_rate_times_mean() {
        // 3 stalls a second of 100 ms: 0.3 s more per second, over 2,000 s
        // of 40-ms steps (≈ 6,000 stalls: the share within ±5%).
        let mut c = StallClock::new(stalls(3.0, 100), 7).unwrap();
        let step = Duration::from_millis(40);
        let n = 50_000;
        let extra: Duration = (0..n).map(|_| c.run(step)).sum();
        let share = extra.as_secs_f64() / (step.as_secs_f64() * f64::from(n));
        assert!((share - 0.3).abs() < 0.015, "share {share}");
        // About 1 − e^(−0.12) ≈ 11% of the steps stall.
        let mut c = StallClock::new(stalls(3.0, 100), 8).unwrap();
        let stalled = (0..n).filter(|_| !c.run(step).is_zero()).count();
        let f = stalled as f64 / f64::from(n);
        assert!((f - 0.113).abs() < 0.01, "stalled share {f}");
    }

    #[test]
    fn a_span_run_at_once_stalls_as_its_steps_do() {
        let mut whole = StallClock::new(stalls(5.0, 80), 3).unwrap();
        let mut parts = whole.clone();
        // Steps that end before the next stall, then one across it.
        let room = whole.until_next();
        let step = room / 7;
        let at_once = whole.run(step * 6);
        let one_by_one: Duration = (0..6).map(|_| parts.run(step)).sum();
        assert_eq!((at_once, one_by_one), (Duration::ZERO, Duration::ZERO));
        assert_eq!(whole.until_next(), parts.until_next());
        assert!(!whole.run(step * 2).is_zero());
    }

    #[test]
    fn seeds_draw_apart_and_repeat() {
        let draws = |seed| {
            let mut c = StallClock::new(stalls(4.0, 100), seed).unwrap();
            (0..200)
                .map(|_| c.run(Duration::from_millis(30)))
                .collect::<Vec<_>>()
        };
        assert_eq!(draws(1), draws(1));
        assert_ne!(draws(1), draws(2));
    }

    #[test]
    fn validation_names_the_field() {
        assert!(stalls(-1.0, 10)
            .validate()
            .unwrap_err()
            .contains("stall rate"));
        assert!(stalls(f64::NAN, 10).validate().is_err());
        assert!(HostStalls {
            rate_per_s: 1.0,
            mean: Duration::from_secs(61)
        }
        .validate()
        .unwrap_err()
        .contains("stall mean"));
        assert!(stalls(3.0, 100).validate().is_ok());
    }
}

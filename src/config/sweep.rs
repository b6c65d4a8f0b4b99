//! Sweep config: validated, clap-free settings of `kneecap sweep` — the SLOs,
//! the search plan and the step timing — on top of a run's [`RunConfig`].
//! Pure data and the step-length arithmetic; built by `cmd::args::sweep`.

use super::RunConfig;
use crate::sweep::knee::{LoadUnit, SearchPlan};
use crate::sweep::slo::Slo;
use std::path::PathBuf;
use std::time::Duration;

/// How long each step runs.
#[derive(Debug, Clone, PartialEq)]
pub struct StepTiming {
    /// Excluded from statistics at the start of each step.
    pub warmup: Duration,
    /// Minimum measured time after the warm-up.
    pub min_measured: Duration,
    /// Minimum requests due in the measured window (open loop).
    pub min_requests: usize,
    /// Cap on warm-up + measured time.
    pub max_total: Duration,
    /// How long in-flight requests may finish after the last arrival.
    pub drain: Duration,
    /// Refinement steps (after the first failure) measure this many times
    /// longer: telling 0.9 μ from 1.1 μ needs more arrivals than telling μ from 2 μ.
    pub refine_factor: f64,
}

impl StepTiming {
    /// The timing of a refinement step: `refine_factor` times the measured
    /// time and request minimum (the warm-up, drain and cap stay).
    pub fn refined(&self) -> StepTiming {
        let f = self.refine_factor.max(1.0);
        StepTiming {
            min_measured: self.min_measured.mul_f64(f),
            min_requests: (self.min_requests as f64 * f).round() as usize,
            ..self.clone()
        }
    }

    /// Total step length (warm-up + measured window) at `rate` req/s; the
    /// measured window is long enough for `min_requests` arrivals, within `max_total`.
    pub fn length_for_rate(&self, rate: f64) -> Duration {
        let for_count = if rate > 0.0 && rate.is_finite() {
            Duration::from_secs_f64(self.min_requests as f64 / rate)
        } else {
            Duration::ZERO
        };
        let measured = self.min_measured.max(for_count);
        (self.warmup + measured).min(self.max_total.max(self.warmup + Duration::from_secs(1)))
    }

    /// Total step length in closed-loop mode.
    pub fn length_closed(&self) -> Duration {
        (self.warmup + self.min_measured)
            .min(self.max_total.max(self.warmup + Duration::from_secs(1)))
    }
}

/// A fully validated `kneecap sweep`.
#[derive(Debug, Clone)]
pub struct SweepConfig {
    pub run: RunConfig,
    pub slos: Vec<Slo>,
    pub max_error_rate: f64,
    /// What a step's load counts: request rate (open loop) or concurrent streams.
    pub mode: LoadUnit,
    pub plan: SearchPlan,
    pub timing: StepTiming,
    pub metrics_url: Option<String>,
    /// `--confidence`: adaptive steps end once their verdict is this sure;
    /// `None` (without `--adaptive`, or a sharded sweep): every step runs its set length.
    pub confidence: Option<f64>,
    /// `--calibrate-budget`: probe μ in closed loop first, for at most this
    /// long, and start the search near the knee it implies; `None`: no probe.
    pub calibrate: Option<Duration>,
    /// `--max-lateness-ms`: the generator-health lateness bound, when set.
    pub max_lateness_ms: Option<f64>,
    pub output: Option<PathBuf>,
    pub html: Option<PathBuf>,
    /// `--gpu-hour-cost` / `--gpus`: price the knee and each step.
    pub pricing: Option<crate::result::cost::Pricing>,
    /// `--reuse-prompts`: every step sends the first step's prompts
    /// (otherwise each step draws its own).
    pub reuse_prompts: bool,
    /// `--reset-prefix-cache`: ask the server to drop its prefix cache
    /// before each step.
    pub reset_prefix_cache: bool,
    /// `--twin FILE` / `--predict`: open the search at a twin's predicted knee.
    pub twin: Option<TwinPlan>,
}

/// Where a sweep's twin comes from, and whether it sets the tolerance.
#[derive(Debug, Clone, PartialEq)]
pub struct TwinPlan {
    pub source: TwinSource,
    /// No `--tolerance` was given: the predicted interval's width (when
    /// wider than the default) ends the search once both ends are confirmed.
    pub interval_tolerance: bool,
    /// `--twin-prior-weight`: samples the twin's prediction at a step's load
    /// counts as in an adaptive step's verdict (`sweep::prior`); 0: none.
    pub prior_weight: usize,
}

/// The server profile a twin is built from.
#[derive(Debug, Clone, PartialEq)]
pub enum TwinSource {
    /// `--twin FILE`: a profile `kneecap profile` wrote.
    File(PathBuf),
    /// `--predict`: profile the target first, within this budget.
    Measure(Duration),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timing() -> StepTiming {
        StepTiming {
            warmup: Duration::from_secs(2),
            min_measured: Duration::from_secs(10),
            min_requests: 200,
            max_total: Duration::from_secs(60),
            drain: Duration::from_secs(5),
            refine_factor: 2.0,
        }
    }

    #[test]
    fn low_rates_get_longer_steps_to_collect_enough_requests() {
        let t = timing();
        assert_eq!(
            t.length_for_rate(100.0),
            Duration::from_secs(12),
            "10 s already holds 1000 arrivals"
        );
        assert_eq!(
            t.length_for_rate(10.0),
            Duration::from_secs(22),
            "200 requests need 20 s at 10/s"
        );
        assert_eq!(
            t.length_for_rate(1.0),
            Duration::from_secs(60),
            "capped by --step-max-duration"
        );
    }
}

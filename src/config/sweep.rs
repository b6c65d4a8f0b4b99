//! Sweep config: validated, clap-free settings of `kneecap sweep` — the SLOs,
//! the search plan and the step timing — on top of a run's [`RunConfig`].

use super::{RunConfig, Target};
use crate::cli::sweep::{SweepArgs, SweepMode};
use crate::sweep::knee::{LoadUnit, SearchPlan};
use crate::sweep::slo::{self, Slo};
use anyhow::{bail, Result};
use std::path::PathBuf;
use std::str::FromStr;
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
    pub mode: SweepMode,
    pub plan: SearchPlan,
    pub timing: StepTiming,
    pub metrics_url: Option<String>,
    /// `--max-lateness-ms`: the generator-health lateness bound, when set.
    pub max_lateness_ms: Option<f64>,
    pub output: Option<PathBuf>,
    pub html: Option<PathBuf>,
}

impl TryFrom<&SweepArgs> for SweepConfig {
    type Error = anyhow::Error;

    fn try_from(a: &SweepArgs) -> Result<Self> {
        let run = RunConfig::try_from(&a.run)?;
        let sim = matches!(run.target, Target::Sim { .. });
        if !(0.0..=1.0).contains(&a.max_error_rate) {
            bail!(
                "--max-error-rate: {} must be between 0 and 1 (e.g. 0.01 for 1%)",
                a.max_error_rate
            );
        }
        if !(a.tolerance > 0.0 && a.tolerance < 1.0) {
            bail!(
                "--tolerance: {} must be between 0 and 1 (e.g. 0.1 for 10%)",
                a.tolerance
            );
        }
        let timing = timing(a, sim)?;
        let plan = plan(a, sim)?;
        check_shard(&run, &plan, a.mode)?;
        Ok(SweepConfig {
            slos: slos(a)?,
            max_error_rate: a.max_error_rate,
            mode: a.mode,
            plan,
            timing,
            metrics_url: a.metrics_url.clone(),
            max_lateness_ms: positive(a.max_lateness_ms, "--max-lateness-ms")?,
            output: a.output.clone(),
            html: a.html.clone(),
            run,
        })
    }
}

/// `--shard` on a sweep: a fixed step list (with the automatic search each
/// shard would judge steps on its own share of the load, and the shards'
/// searches would drift apart), a common `--start-at` (the step slots count
/// from it), and at least one stream per shard at every listed concurrency.
fn check_shard(run: &RunConfig, plan: &SearchPlan, mode: SweepMode) -> Result<()> {
    let Some(shard) = run.shard else {
        return Ok(());
    };
    let SearchPlan::List(loads) = plan else {
        bail!("--shard {shard}: a sharded sweep needs a fixed step list (--rates a,b,c or --mode concurrency --concurrencies a,b,c); with the automatic search each shard would judge steps on its share of the load and the shards would drift apart");
    };
    if run.start_at.is_none() {
        bail!("--shard {shard}: a sharded sweep needs --start-at (a common start a few seconds ahead): every shard runs step k in the same wall-clock slot counted from it");
    }
    if mode == SweepMode::Concurrency {
        for &c in loads {
            shard
                .concurrency(c.round() as usize, "--concurrencies")
                .map_err(anyhow::Error::msg)?;
        }
    }
    Ok(())
}

fn positive(v: Option<f64>, flag: &str) -> Result<Option<f64>> {
    match v {
        Some(x) if !(x.is_finite() && x > 0.0) => bail!("{flag}: {x} must be a positive number"),
        _ => Ok(v),
    }
}

fn slos(a: &SweepArgs) -> Result<Vec<Slo>> {
    let mut out = Vec::new();
    for s in &a.slos {
        out.push(Slo::from_str(s).map_err(|e| anyhow::anyhow!("--slo: {e}"))?);
    }
    for item in a.run.goodput.iter().flat_map(|g| g.split_whitespace()) {
        out.push(
            slo::from_goodput(item, a.goodput_ratio)
                .map_err(|e| anyhow::anyhow!("--goodput: {e}"))?,
        );
    }
    Ok(out)
}

/// Step timing; the built-in simulator gets short steps so a sweep takes about a minute.
fn timing(a: &SweepArgs, sim: bool) -> Result<StepTiming> {
    let (warmup, measured, requests) = if sim {
        (Duration::from_secs(1), Duration::from_secs(4), 80)
    } else {
        (Duration::from_secs(3), Duration::from_secs(15), 200)
    };
    let t = StepTiming {
        warmup: a.step_warmup.unwrap_or(warmup),
        min_measured: a.step_duration.unwrap_or(measured),
        min_requests: a.step_min_requests.unwrap_or(requests),
        max_total: a.step_max_duration,
        drain: a.step_drain,
        refine_factor: a.step_refine_factor,
    };
    if !(1.0..=20.0).contains(&t.refine_factor) {
        bail!(
            "--step-refine-factor: {} must be between 1 and 20",
            t.refine_factor
        );
    }
    if t.min_measured.is_zero() {
        bail!("--step-duration must be greater than 0");
    }
    Ok(t)
}

fn plan(a: &SweepArgs, sim: bool) -> Result<SearchPlan> {
    let (unit, list): (LoadUnit, Vec<f64>) = match a.mode {
        SweepMode::Rate => {
            if !a.concurrencies.is_empty() {
                bail!("--concurrencies needs --mode concurrency (use --rates for request rates)");
            }
            (LoadUnit::Rate, a.rates.clone())
        }
        SweepMode::Concurrency => {
            if !a.rates.is_empty() {
                bail!("--rates needs --mode rate (use --concurrencies with --mode concurrency)");
            }
            (
                LoadUnit::Concurrency,
                a.concurrencies.iter().map(|&c| c as f64).collect(),
            )
        }
    };
    let plan = if list.is_empty() {
        let start = a.start.unwrap_or(if sim && unit == LoadUnit::Rate {
            4.0
        } else {
            1.0
        });
        SearchPlan::Auto {
            start,
            factor: 2.0,
            tolerance: a.tolerance,
            max_load: a.max_load,
            max_steps: a.max_steps,
            unit,
        }
    } else {
        SearchPlan::List(list)
    };
    plan.validate().map_err(|e| match &plan {
        SearchPlan::List(_) => anyhow::anyhow!("--rates/--concurrencies: {e}"),
        SearchPlan::Auto { .. } => anyhow::anyhow!("--start/--max-load/--max-steps: {e}"),
    })?;
    Ok(plan)
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

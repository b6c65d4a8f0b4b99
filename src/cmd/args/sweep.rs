//! Sweep arguments to [`SweepConfig`]: the SLOs, the search plan and the
//! step timing on top of the run's config, with every cross-field rule of
//! `kneecap sweep` (each message names the flag and the fix).

use super::profile::{MAX_BUDGET_S, MIN_BUDGET_S};
use super::run::run_config;
use crate::cli::sweep::{SweepArgs, SweepMode};
use crate::config::sweep::{StepTiming, SweepConfig, TwinPlan, TwinSource};
use crate::config::{RunConfig, Target};
use crate::result::cost::Pricing;
use crate::sweep::knee::{LoadUnit, SearchPlan};
use crate::sweep::slo::{self, Slo};
use crate::workload::dataset::DatasetKind;
use anyhow::{bail, Result};
use std::str::FromStr;
use std::time::Duration;

/// Validate `kneecap sweep`'s arguments into a [`SweepConfig`].
pub fn sweep_config(a: &SweepArgs) -> Result<SweepConfig> {
    let run = run_config(&a.run)?;
    let sim = matches!(run.target, Target::Sim { .. });
    if !(0.0..=1.0).contains(&a.max_error_rate) {
        bail!(
            "--max-error-rate: {} must be between 0 and 1 (e.g. 0.01 for 1%)",
            a.max_error_rate
        );
    }
    let tolerance = a.tolerance.unwrap_or(DEFAULT_TOLERANCE);
    if !(tolerance > 0.0 && tolerance < 1.0) {
        bail!("--tolerance: {tolerance} must be between 0 and 1 (e.g. 0.1 for 10%)");
    }
    let timing = timing(a, sim)?;
    let mode = mode(a, &run)?;
    let plan = plan(a, mode, sim)?;
    check_shard(&run, &plan, mode)?;
    let twin = twin_plan(a, &run, &plan, mode)?;
    if !(a.confidence > 0.5 && a.confidence < 1.0) {
        bail!(
            "--confidence: {} must be between 0.5 and 1 (e.g. 0.9 for 90%)",
            a.confidence
        );
    }
    let adaptive = a.adaptive && run.shard.is_none();
    // The probe sets the start of an automatic rate search; a start or load
    // list the user gave wins, and shards never probe on their own.
    let probe = a.calibrate
        && a.start.is_none()
        && mode == SweepMode::Rate
        && matches!(plan, SearchPlan::Auto { .. })
        && run.shard.is_none()
        && !a.calibrate_budget.is_zero();
    Ok(SweepConfig {
        confidence: adaptive.then_some(a.confidence),
        calibrate: probe.then_some(a.calibrate_budget),
        slos: slos(a)?,
        max_error_rate: a.max_error_rate,
        mode: unit(mode),
        plan,
        timing,
        metrics_url: a.metrics_url.clone(),
        max_lateness_ms: positive(a.max_lateness_ms, "--max-lateness-ms")?,
        output: a.output.clone(),
        html: a.html.clone(),
        pricing: pricing(a)?,
        reuse_prompts: a.reuse_prompts,
        reset_prefix_cache: a.reset_prefix_cache,
        twin,
        run,
    })
}

/// `--tolerance` when not given.
const DEFAULT_TOLERANCE: f64 = 0.10;

/// `--twin FILE` / `--predict`: only an automatic open-loop rate search of
/// single requests can open at a predicted knee (the twin predicts req/s).
fn twin_plan(
    a: &SweepArgs,
    run: &RunConfig,
    plan: &SearchPlan,
    mode: SweepMode,
) -> Result<Option<TwinPlan>> {
    let flag = match (&a.twin, a.predict) {
        (None, false) if a.twin_prior_weight.is_some() => {
            bail!("--twin-prior-weight weighs a twin's prediction: add --twin FILE or --predict, or drop it")
        }
        (None, false) => return Ok(None),
        (Some(_), _) => "--twin",
        (None, true) => "--predict",
    };
    if mode != SweepMode::Rate || !matches!(plan, SearchPlan::Auto { .. }) {
        bail!("{flag} opens the automatic rate search: drop --rates/--mode (the twin predicts a request rate)");
    }
    if run.sessions.is_some() || run.shard.is_some() || run.api.is_pooling() {
        bail!("{flag} predicts single generation requests from one process: drop --multi-turn, --shard or the pooling --backend");
    }
    if matches!(run.dataset.kind, DatasetKind::RandomMm(_)) {
        bail!("{flag} predicts text prompts; the twin does not model image tokens yet: drop {flag} for --dataset-name random-mm");
    }
    if a.slos.is_empty() && a.run.goodput.is_empty() {
        bail!("{flag} needs an SLO (e.g. --slo 'p99_ttft_ms<=500'): the predicted knee is where one fails");
    }
    let source = match &a.twin {
        Some(path) => {
            // Read now so a bad file stops the sweep before its server starts.
            super::sim::load_profile(path, "--twin")?;
            TwinSource::File(path.clone())
        }
        None => {
            let b = a.twin_budget;
            if !(MIN_BUDGET_S..=MAX_BUDGET_S).contains(&b) {
                bail!("--twin-budget must be between {MIN_BUDGET_S} and {MAX_BUDGET_S} seconds, got {b}");
            }
            TwinSource::Measure(Duration::from_secs_f64(b))
        }
    };
    if a.twin_prior_weight.is_some() && !a.adaptive {
        bail!("--twin-prior-weight weighs an adaptive step's verdict: add --adaptive, or drop it");
    }
    Ok(Some(TwinPlan {
        source,
        interval_tolerance: a.tolerance.is_none(),
        prior_weight: a.twin_prior_weight.unwrap_or(0),
    }))
}

/// `--gpu-hour-cost` and `--gpus` (1 unless given).
fn pricing(a: &SweepArgs) -> Result<Option<Pricing>> {
    match (a.gpu_hour_cost, a.gpus) {
        (None, None) => Ok(None),
        (None, Some(_)) => {
            bail!("--gpus needs --gpu-hour-cost (dollars per GPU-hour, e.g. --gpu-hour-cost 2.50)")
        }
        (Some(c), _) if !(c.is_finite() && c > 0.0) => bail!(
            "--gpu-hour-cost: {c} must be a positive number of dollars per GPU-hour (e.g. 2.50)"
        ),
        (Some(_), Some(0)) => bail!("--gpus: 0 must be at least 1"),
        (Some(c), gpus) => Ok(Some(Pricing {
            gpu_hour_cost: c,
            gpus: gpus.unwrap_or(1),
        })),
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
    if mode == SweepMode::TraceSpeed {
        bail!("--shard {shard}: a trace-speed sweep cannot be sharded yet (each shard would replay its share of a bursty trace); sweep from one machine, or add --no-self-timed to sweep the rate");
    }
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
/// Adaptive steps run longer by themselves when undecided, so their minimum is shorter.
fn timing(a: &SweepArgs, sim: bool) -> Result<StepTiming> {
    let (warmup, measured, requests) = match (sim, !a.adaptive) {
        (true, _) => (Duration::from_secs(1), Duration::from_secs(4), 80),
        (false, false) => (Duration::from_secs(2), Duration::from_secs(6), 100),
        (false, true) => (Duration::from_secs(3), Duration::from_secs(15), 200),
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

/// What the sweep varies: a self-timed trace sets its own arrivals, so its
/// sweep varies the replay speed (`--mode rate`, the default, becomes
/// trace-speed); `--mode trace-speed` needs such a trace.
fn mode(a: &SweepArgs, run: &RunConfig) -> Result<SweepMode> {
    match (run.load.trace_speed.is_some(), a.mode) {
        (true, SweepMode::Concurrency) => bail!(
            "--mode concurrency: a self-timed trace sets its own arrivals; sweep its speed (the default) or add --no-self-timed to sweep concurrency with its prompts"
        ),
        (true, _) => Ok(SweepMode::TraceSpeed),
        (false, SweepMode::TraceSpeed) => bail!(
            "--mode trace-speed needs a trace with timestamps: --dataset-name timed_trace --dataset-path FILE"
        ),
        (false, mode) => Ok(mode),
    }
}

fn plan(a: &SweepArgs, mode: SweepMode, sim: bool) -> Result<SearchPlan> {
    let (unit, list): (LoadUnit, Vec<f64>) = match mode {
        SweepMode::TraceSpeed => {
            if !a.concurrencies.is_empty() {
                bail!("--concurrencies needs --mode concurrency (a trace-speed sweep takes speeds with --rates, e.g. 1,2,4)");
            }
            (LoadUnit::TraceSpeed, a.rates.clone())
        }
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
        let start =
            a.start
                .or(a.run.trace.trace_speed)
                .unwrap_or(if sim && unit == LoadUnit::Rate {
                    4.0
                } else {
                    1.0
                });
        SearchPlan::Auto {
            start,
            factor: 2.0,
            tolerance: a.tolerance.unwrap_or(DEFAULT_TOLERANCE),
            max_load: a.max_load,
            max_steps: a.max_steps,
            unit,
            ceiling: None,
            opening: Vec::new(),
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

fn unit(mode: SweepMode) -> LoadUnit {
    match mode {
        SweepMode::Rate => LoadUnit::Rate,
        SweepMode::Concurrency => LoadUnit::Concurrency,
        SweepMode::TraceSpeed => LoadUnit::TraceSpeed,
    }
}

#[cfg(test)]
#[path = "sweep_tests.rs"]
mod tests;

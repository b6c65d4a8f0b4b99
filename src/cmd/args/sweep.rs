//! Sweep arguments to [`SweepConfig`]: the SLOs, the search plan and the
//! step timing on top of the run's config, with every cross-field rule of
//! `kneecap sweep` (each message names the flag and the fix).

use super::run::run_config;
use crate::cli::sweep::{SweepArgs, SweepMode};
use crate::config::sweep::{StepTiming, SweepConfig};
use crate::config::{RunConfig, Target};
use crate::report::cost::Pricing;
use crate::sweep::knee::{LoadUnit, SearchPlan};
use crate::sweep::slo::{self, Slo};
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
    if !(a.tolerance > 0.0 && a.tolerance < 1.0) {
        bail!(
            "--tolerance: {} must be between 0 and 1 (e.g. 0.1 for 10%)",
            a.tolerance
        );
    }
    let timing = timing(a, sim)?;
    let mode = mode(a, &run)?;
    let plan = plan(a, mode, sim)?;
    check_shard(&run, &plan, mode)?;
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
        run,
    })
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
            tolerance: a.tolerance,
            max_load: a.max_load,
            max_steps: a.max_steps,
            unit,
            ceiling: None,
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
mod tests {
    use super::*;
    use crate::cmd::args::tests_support::{argv, assert_rows_rejected, sweep_args};
    use crate::sweep::slo::SloStat;

    const REAL: &str = "--base-url http://127.0.0.1:9";
    const START_AT: &str = "--start-at 1777636800";

    fn config(line: &str) -> SweepConfig {
        let args = argv(line);
        sweep_config(&sweep_args(&args)).unwrap_or_else(|e| panic!("`{line}` is valid: {e:#}"))
    }

    /// Each row: `COMMAND LINE => a fragment of the error it must give`.
    fn all_rejected(rows: &[&str]) {
        assert_rows_rejected(rows, |args| sweep_config(&sweep_args(args)));
    }

    fn auto_start(line: &str) -> (f64, LoadUnit) {
        match config(line).plan {
            SearchPlan::Auto { start, unit, .. } => (start, unit),
            other => panic!("`{line}`: expected the automatic search, got {other:?}"),
        }
    }

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    #[test]
    fn a_self_timed_trace_sweeps_its_speed() {
        let base = "--dataset-name timed_trace --dataset-path Cargo.toml";
        assert_eq!(auto_start(base), (1.0, LoadUnit::TraceSpeed));
        assert_eq!(
            auto_start(&format!("{base} --trace-speed 3")),
            (3.0, LoadUnit::TraceSpeed)
        );
        let c = config(&format!("{base} --rates 1,2.5"));
        assert_eq!(
            (c.plan, c.mode),
            (SearchPlan::List(vec![1.0, 2.5]), LoadUnit::TraceSpeed)
        );
        assert_eq!(
            config(&format!("{base} --calibrate")).calibrate,
            None,
            "no probe for a trace"
        );
        let rate = config(&format!("{base} --no-self-timed --request-rate 5"));
        assert_eq!(rate.mode, LoadUnit::Rate);
        all_rejected(&[
            "--mode trace-speed => --mode trace-speed needs a trace with timestamps",
            "--dataset-name timed_trace --dataset-path Cargo.toml --mode concurrency => sets its own arrivals",
            "--dataset-name timed_trace --dataset-path Cargo.toml --concurrencies 2 => --concurrencies needs --mode concurrency",
            "--dataset-name timed_trace --dataset-path Cargo.toml --rates 1,2 --shard 0/2 --start-at 1777636800 => cannot be sharded",
        ]);
    }

    #[test]
    fn sim_gets_short_step_timing() {
        let t = config("").timing;
        assert_eq!(
            (t.warmup, t.min_measured, t.min_requests),
            (secs(1), secs(4), 80)
        );
    }

    #[test]
    fn real_servers_get_full_fixed_steps_or_shorter_adaptive_ones() {
        let c = config(REAL);
        let t = &c.timing;
        assert_eq!(
            (t.warmup, t.min_measured, t.min_requests),
            (secs(3), secs(15), 200)
        );
        assert_eq!((c.confidence, c.calibrate), (None, None));
        let c = config(&format!("{REAL} --adaptive --calibrate"));
        let t = &c.timing;
        assert_eq!(
            (t.warmup, t.min_measured, t.min_requests),
            (secs(2), secs(6), 100),
            "adaptive steps lengthen themselves; their minimum is short"
        );
        assert_eq!(c.confidence, Some(0.9));
        assert_eq!(c.calibrate, Some(secs(20)));
    }

    #[test]
    fn a_given_start_list_or_mode_skips_the_probe() {
        for extra in ["--start 5", "--rates 1,2", "--mode concurrency"] {
            let c = config(&format!("{REAL} --calibrate {extra}"));
            assert_eq!(c.calibrate, None, "{extra}");
        }
        let row = format!("{REAL} --confidence 1.5 => --confidence: 1.5 must be between 0.5 and 1");
        assert_rows_rejected(&[row.as_str()], |args| sweep_config(&sweep_args(args)));
    }

    #[test]
    fn step_flags_override_the_default_timing() {
        let t = config(
            "--step-warmup 2s --step-duration 7s --step-min-requests 9 \
             --step-max-duration 60s --step-drain 5s --step-refine-factor 3",
        );
        let want = StepTiming {
            warmup: secs(2),
            min_measured: secs(7),
            min_requests: 9,
            max_total: secs(60),
            drain: secs(5),
            refine_factor: 3.0,
        };
        assert_eq!(t.timing, want);
    }

    #[test]
    fn start_defaults_to_4_for_sim_rate_sweeps() {
        assert_eq!(auto_start(""), (4.0, LoadUnit::Rate));
    }

    #[test]
    fn start_defaults_to_1_for_sim_concurrency_sweeps() {
        assert_eq!(
            auto_start("--mode concurrency"),
            (1.0, LoadUnit::Concurrency)
        );
    }

    #[test]
    fn start_defaults_to_1_against_a_real_server() {
        assert_eq!(auto_start(REAL), (1.0, LoadUnit::Rate));
    }

    #[test]
    fn explicit_start_wins_over_the_default() {
        assert_eq!(auto_start("--start 2.5").0, 2.5);
    }

    #[test]
    fn automatic_search_takes_tolerance_max_load_and_max_steps() {
        let c = config("--tolerance 0.2 --max-load 64 --max-steps 5");
        let (start, factor, tolerance, max_load, max_steps) = (4.0, 2.0, 0.2, 64.0, 5);
        let unit = LoadUnit::Rate;
        let want = SearchPlan::Auto {
            start,
            factor,
            tolerance,
            max_load,
            max_steps,
            unit,
            ceiling: None,
        };
        assert_eq!(c.plan, want);
    }

    #[test]
    fn explicit_loads_replace_the_automatic_search() {
        assert_eq!(
            config("--rates 2,4.5").plan,
            SearchPlan::List(vec![2.0, 4.5])
        );
        let c = config("--mode concurrency --concurrencies 1,3");
        assert_eq!(
            (c.plan, c.mode),
            (SearchPlan::List(vec![1.0, 3.0]), LoadUnit::Concurrency)
        );
    }

    #[test]
    fn bounds_are_inclusive_where_the_rules_say_so() {
        assert_eq!(config("--max-error-rate 0").max_error_rate, 0.0);
        assert_eq!(config("--max-error-rate 1").max_error_rate, 1.0);
        config("--step-refine-factor 1");
        config("--step-refine-factor 20");
        assert_eq!(config("--max-lateness-ms 2.5").max_lateness_ms, Some(2.5));
    }

    #[test]
    fn sweep_rules_name_their_flag() {
        all_rejected(&[
            "--max-error-rate 1.5 => --max-error-rate: 1.5 must be between 0 and 1",
            "--max-error-rate=-0.1 => --max-error-rate: -0.1 must be between 0 and 1",
            // Tolerance is strictly inside (0, 1).
            "--tolerance 0 => --tolerance: 0 must be between 0 and 1",
            "--tolerance 1 => --tolerance: 1 must be between 0 and 1",
            "--step-refine-factor 0.5 => --step-refine-factor: 0.5 must be between 1 and 20",
            "--step-refine-factor 21 => --step-refine-factor: 21 must be between 1 and 20",
            "--step-duration 0s => --step-duration must be greater than 0",
            "--max-lateness-ms 0 => --max-lateness-ms: 0 must be a positive number",
            "--max-lateness-ms inf => --max-lateness-ms: inf must be a positive number",
        ]);
    }

    #[test]
    fn plan_rules_name_their_flag() {
        all_rejected(&[
            // Each list needs its mode.
            "--concurrencies 1,2 => --concurrencies needs --mode concurrency",
            "--mode concurrency --rates 1,2 => --rates needs --mode rate",
            // The plan's own checks are prefixed with the flags that make the plan.
            "--rates 2,0 => --rates/--concurrencies: load 0 is not a positive number",
            "--mode concurrency --concurrencies 0 => --rates/--concurrencies: load 0",
            "--start 10 --max-load 5 => --start/--max-load/--max-steps: need 0 < start",
            "--max-steps 0 => --start/--max-load/--max-steps: tolerance and max steps",
        ]);
    }

    #[test]
    fn shard_rules_name_their_flag() {
        all_rejected(&[
            // A sharded sweep needs a fixed step list.
            "--shard 0/2 --start-at 1777636800 => --shard 0/2: a sharded sweep needs a fixed step",
            // A sharded sweep needs a common start.
            "--shard 0/2 --rates 1,2 => --shard 0/2: a sharded sweep needs --start-at",
            // Every listed concurrency leaves every shard a stream.
            "--shard 1/2 --start-at 1777636800 --mode concurrency --concurrencies 4,1 => \
             --concurrencies 1 split over 2 shards",
        ]);
    }

    #[test]
    fn sharded_sweeps_with_a_list_and_a_start_are_accepted() {
        config(&format!(
            "--shard 1/2 {START_AT} --mode concurrency --concurrencies 2,4"
        ));
        // Rates need no per-shard check: a shard may get a fraction of a request per second.
        config(&format!("--shard 1/2 {START_AT} --rates 0.5,1"));
    }

    #[test]
    fn slos_and_goodput_items_become_slos_at_the_goodput_ratio() {
        let c = sweep_config(&sweep_args(&[
            "--slo",
            "mean_tpot_ms<50",
            "--goodput",
            "ttft:500 e2el:2000",
            "--goodput-ratio",
            "0.9",
        ]))
        .unwrap();
        assert_eq!(c.slos.len(), 3);
        assert_eq!(c.slos[0], "mean_tpot_ms<50".parse::<Slo>().unwrap());
        assert_eq!(c.slos[1], slo::from_goodput("ttft:500", 0.9).unwrap());
        assert_eq!(c.slos[2].stat, SloStat::Attainment(0.9));
    }

    #[test]
    fn slo_and_goodput_rules_name_their_flag() {
        all_rejected(&[
            "--slo fast => --slo: invalid SLO `fast`",
            "--goodput ttft:500 --goodput-ratio 1.5 => --goodput: goodput ratio 1.5 is not in",
            // The run's rules apply to a sweep too.
            "--endpoint v1/completions => --endpoint: 'v1/completions' must start with '/'",
        ]);
    }

    #[test]
    fn gpu_pricing_needs_a_positive_cost_and_at_least_one_gpu() {
        let p = config("--gpu-hour-cost 2.50 --gpus 8").pricing.unwrap();
        assert_eq!((p.gpu_hour_cost, p.gpus), (2.5, 8));
        assert_eq!(config("--gpu-hour-cost 2").pricing.unwrap().gpus, 1);
        assert_eq!(config("").pricing, None);
        for (line, flag) in [
            ("--gpus 2", "--gpus needs --gpu-hour-cost"),
            ("--gpu-hour-cost 0", "--gpu-hour-cost: 0"),
            ("--gpu-hour-cost 2 --gpus 0", "--gpus: 0"),
        ] {
            let e = sweep_config(&sweep_args(&argv(line)))
                .unwrap_err()
                .to_string();
            assert!(e.starts_with(flag), "{line}: {e}");
        }
    }

    #[test]
    fn outputs_and_metrics_url_pass_through() {
        let c = config("-o s.json --html s.html --metrics-url http://m/metrics");
        assert_eq!(c.output.as_deref(), Some(std::path::Path::new("s.json")));
        assert_eq!(c.html.as_deref(), Some(std::path::Path::new("s.html")));
        assert_eq!(c.metrics_url.as_deref(), Some("http://m/metrics"));
    }
}

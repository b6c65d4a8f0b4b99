//! Unit tests of the sweep arguments.

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
        opening: Vec::new(),
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

#[test]
fn twin_rules_name_their_flag() {
    let profile = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/profile.json");
    all_rejected(&[
        "--predict => --predict needs an SLO",
        "--predict --slo p99_ttft_ms<=500 --dataset-name random-mm --backend openai-chat --endpoint /v1/chat/completions => --predict predicts text prompts",
        "--predict --slo p99_ttft_ms<=500 --rates 1,2 => --predict opens the automatic rate search",
        "--predict --slo p99_ttft_ms<=500 --mode concurrency => --predict opens the automatic rate search",
        "--predict --slo p99_ttft_ms<=500 --twin-budget 5 => --twin-budget must be between 10 and 3600",
        "--twin /no/such/profile.json --slo p99_ttft_ms<=500 => --twin: cannot read '/no/such/profile.json'",
        "--slo p99_ttft_ms<=500 --adaptive --twin-prior-weight 2000 => --twin-prior-weight weighs a twin's prediction: add --twin FILE or --predict",
        "--predict --slo p99_ttft_ms<=500 --twin-prior-weight 2000 => --twin-prior-weight weighs an adaptive step's verdict: add --adaptive",
    ]);
    // Both choose where the search starts: clap refuses the pair.
    let both = ["kneecap", "sweep", "--predict", "--calibrate"];
    let e = <crate::cli::Cli as clap::Parser>::try_parse_from(both).unwrap_err();
    assert!(e.to_string().contains("cannot be used with"), "{e}");
    let c = config(&format!("--twin {profile} --slo p99_ttft_ms<=500"));
    let t = c.twin.expect("a twin");
    assert_eq!(t.source, TwinSource::File(profile.into()));
    assert!(t.interval_tolerance, "no --tolerance given");
    let c = config("--predict --twin-budget 30 --tolerance 0.05 --slo p99_ttft_ms<=500");
    let t = c.twin.expect("a twin");
    assert_eq!(t.source, TwinSource::Measure(secs(30)));
    assert!(!t.interval_tolerance, "--tolerance given");
    assert_eq!(t.prior_weight, 0, "the twin's prior is opt-in");
    let c = config("--predict --adaptive --twin-prior-weight 2000 --slo p99_ttft_ms<=500");
    assert_eq!(c.twin.expect("a twin").prior_weight, 2000);
    assert!(config("--slo p99_ttft_ms<=500").twin.is_none());
}

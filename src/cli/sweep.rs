//! `kneecap sweep` arguments: every `run` flag (target, dataset, sampling),
//! plus the SLO, the search and the step length. The sweep sets the request
//! rate (or concurrency) of each step itself.

use super::duration::parse_duration;
use super::run::RunArgs;
use clap::{Args, ValueEnum};
use std::path::PathBuf;
use std::time::Duration;

/// What the sweep varies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SweepMode {
    /// Open loop: the request rate (Poisson by default).
    Rate,
    /// Closed loop: the number of concurrent streams.
    Concurrency,
    /// A replayed trace's speed-up (the default with a self-timed
    /// timed_trace dataset): the knee is the fastest replay that meets the SLO.
    TraceSpeed,
}

#[derive(Debug, Clone, Args)]
pub struct SweepArgs {
    /// SLO a step must meet, e.g. p99_ttft_ms<=500 (repeatable; any of ttft,
    /// tpot, itl, e2el, or ttfo: time to the first answer token of a reasoning
    /// model; pNN, mean or median).
    #[arg(long = "slo", value_name = "SLO", action = clap::ArgAction::Append, help_heading = "Sweep")]
    pub slos: Vec<String>,
    /// Largest failed-request fraction a passing step may have.
    #[arg(long, default_value_t = 0.01, help_heading = "Sweep")]
    pub max_error_rate: f64,
    /// With vLLM-style --goodput KEY:MS: the fraction of requests that must be good.
    #[arg(long, default_value_t = 0.99, help_heading = "Sweep")]
    pub goodput_ratio: f64,
    #[arg(long, value_enum, default_value = "rate", help_heading = "Sweep")]
    pub mode: SweepMode,
    /// Explicit loads instead of the automatic search, e.g. 2,4,8,16.
    #[arg(long, value_delimiter = ',', help_heading = "Sweep")]
    pub rates: Vec<f64>,
    /// Explicit concurrencies for --mode concurrency, e.g. 1,2,4,8.
    #[arg(long, value_delimiter = ',', help_heading = "Sweep")]
    pub concurrencies: Vec<usize>,
    /// First load of the automatic search [default: 1 req/s, or 1 stream].
    #[arg(long, help_heading = "Sweep")]
    pub start: Option<f64>,
    /// Upper bound of the automatic search.
    #[arg(long, default_value_t = 4096.0, help_heading = "Sweep")]
    pub max_load: f64,
    /// Stop refining when (first fail - last pass) / last pass is at most this
    /// [default: 0.10; with --twin or --predict, the predicted interval's
    /// width when wider: its two ends confirm the prediction].
    #[arg(long, help_heading = "Sweep")]
    pub tolerance: Option<f64>,
    #[arg(long, default_value_t = 16, help_heading = "Sweep")]
    pub max_steps: usize,
    /// Confidence a step's SLO verdict needs before the step ends (adaptive
    /// steps: a step far from the knee ends at its minimum, one whose
    /// percentile straddles the bound runs on, up to 4× its minimum within --step-max-duration;
    /// the verdict is tested at the minimum, twice it and the cap, corrected for those tests).
    #[arg(long, default_value_t = 0.90, help_heading = "Sweep")]
    pub confidence: f64,
    /// Adaptive steps (experimental): a step ends once its SLO verdict has
    /// --confidence, instead of running its set length. Off by default: on
    /// short windows the steady-state check is still noisy.
    #[arg(long, help_heading = "Sweep")]
    pub adaptive: bool,
    /// Before a rate search, probe the service rate μ in closed loop for at
    /// most this long and start near the knee it implies.
    #[arg(long, default_value = "20s", value_parser = parse_duration, help_heading = "Sweep")]
    pub calibrate_budget: Duration,
    /// Before an automatic rate search, probe μ in closed loop (within
    /// --calibrate-budget) and start at ¾ μ instead of doubling from --start.
    #[arg(long, help_heading = "Sweep")]
    pub calibrate: bool,
    /// Open the automatic rate search at the knee a server profile
    /// (`kneecap profile -o FILE`) predicts for this workload and SLO: the
    /// prediction's interval ends are the first steps, the search goes on from
    /// what they show, and the result sets predicted beside measured.
    #[arg(long, value_name = "PROFILE", conflicts_with_all = ["predict", "calibrate"], help_heading = "Twin")]
    pub twin: Option<PathBuf>,
    /// As --twin, with a profile measured first (`kneecap profile` within
    /// --twin-budget), written beside the sweep JSON as NAME.profile.json.
    #[arg(long, conflicts_with = "calibrate", help_heading = "Twin")]
    pub predict: bool,
    /// Time budget of --predict's profile, seconds.
    #[arg(
        long,
        default_value_t = 60.0,
        value_name = "SECONDS",
        help_heading = "Twin"
    )]
    pub twin_budget: f64,
    /// With --twin/--predict and --adaptive: let each step's verdict weigh
    /// the twin's prediction at its load as this many samples (e.g. 2000),
    /// added only where the step's own samples lean the same way (a
    /// SIMULATED prior: it changes how soon a step may stop, never which way
    /// it goes), and open the search where the twin is clear. Honest only as
    /// far as the twin is right: see BENCHMARKS.md [default: 0, off].
    #[arg(long, value_name = "SAMPLES", help_heading = "Twin")]
    pub twin_prior_weight: Option<usize>,
    /// Minimum measured time per step, after the warm-up window
    /// [default: 15s (6s with --adaptive); 4s against the built-in simulator].
    #[arg(long, value_parser = parse_duration, help_heading = "Sweep")]
    pub step_duration: Option<Duration>,
    /// Minimum measured requests per step; the step is lengthened to get them
    /// [default: 200 (100 with --adaptive); 80 against the built-in simulator].
    #[arg(long, help_heading = "Sweep")]
    pub step_min_requests: Option<usize>,
    /// Longest a step may run (measured window + warm-up), whatever the minimums say.
    #[arg(long, default_value = "120s", value_parser = parse_duration, help_heading = "Sweep")]
    pub step_max_duration: Duration,
    /// Warm-up window at the start of each step, excluded from the statistics
    /// [default: 3s (2s with --adaptive); 1s against the built-in simulator].
    #[arg(long, value_parser = parse_duration, help_heading = "Sweep")]
    pub step_warmup: Option<Duration>,
    /// With --fixed-steps: refinement steps (once a step has failed) measure
    /// this many times longer (adaptive steps lengthen themselves).
    #[arg(long, default_value_t = 2.5, help_heading = "Sweep")]
    pub step_refine_factor: f64,
    /// How long in-flight requests may finish after a step's last arrival.
    #[arg(long, default_value = "15s", value_parser = parse_duration, help_heading = "Sweep")]
    pub step_drain: Duration,
    /// Generator health: the dispatch-lateness p99 (and runtime lag) bound in ms
    /// above which a step is "generator-limited" [default: max(1 ms, 10% of the
    /// mean gap between arrivals)]. Raise it only on a machine you know is busy.
    #[arg(long, help_heading = "Sweep")]
    pub max_lateness_ms: Option<f64>,
    /// Send the same prompts at every step (the first step's): a server's
    /// prefix cache then serves later steps from what earlier ones left, a
    /// warm-cache benchmark. By default each step
    /// draws its own prompts (a seed derived from --seed and the step's
    /// index; a dataset file's next rows), as fresh traffic would be.
    #[arg(long, help_heading = "Sweep")]
    pub reuse_prompts: bool,
    /// Before each step, ask the server to drop its prefix cache: vLLM's
    /// POST /reset_prefix_cache (served when vLLM runs with
    /// VLLM_SERVER_DEV_MODE=1), else SGLang's POST /flush_cache.
    #[arg(long, help_heading = "Sweep")]
    pub reset_prefix_cache: bool,
    /// Prometheus endpoint to scrape for queue gauges [default: TARGET/metrics].
    #[arg(long, help_heading = "Sweep")]
    pub metrics_url: Option<String>,
    /// Sweep JSON, rewritten after every step [default: kneecap-sweep-DATE.json].
    #[arg(short = 'o', long, help_heading = "Sweep")]
    pub output: Option<PathBuf>,
    /// Also write a self-contained HTML report.
    #[arg(long, help_heading = "Sweep")]
    pub html: Option<PathBuf>,
    /// Dollars per GPU-hour: the report and JSON give $ per million output
    /// tokens at the knee and at each step.
    #[arg(long, value_name = "USD", help_heading = "Sweep")]
    pub gpu_hour_cost: Option<f64>,
    /// GPUs serving the model, for --gpu-hour-cost [default: 1].
    #[arg(long, help_heading = "Sweep")]
    pub gpus: Option<u32>,

    #[command(flatten)]
    pub run: RunArgs,
}

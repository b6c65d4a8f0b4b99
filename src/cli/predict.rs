//! `kneecap predict` arguments: clap syntax only; the command layer turns
//! them into a validated, clap-free `PredictOptions`.

use std::path::PathBuf;

/// Predict the knee of the simulator's engine model for a workload, in
/// virtual time (CPU seconds, no server): the highest Poisson arrival rate
/// meeting every --slo, with an interval, what binds it and what moves it.
/// PREDICTED, not measured: confirm it with `kneecap sweep`.
#[derive(Debug, Clone, clap::Args)]
pub struct PredictArgs {
    /// Engine preset: `tiny` or `7b-24gb` (see `kneecap sim --help`).
    #[arg(long, default_value = "tiny", help_heading = "Engine")]
    pub preset: String,
    /// The engine model from a `kneecap profile` JSON instead of a preset:
    /// its parameters (the overrides below still apply on top, to ask "what
    /// if"), and an interval over the ends of their uncertainty, widened when
    /// the profile flagged a misfit.
    #[arg(
        long,
        value_name = "FILE",
        conflicts_with = "preset",
        help_heading = "Engine"
    )]
    pub profile: Option<PathBuf>,
    /// Draw the profile's host stalls as random pauses (as `sim --profile`
    /// does) instead of taking them at their mean: the latency tails
    /// (p99) stretch too, and the knee moves with them.
    #[arg(long, requires = "profile", help_heading = "Engine")]
    pub draw_stalls: bool,
    /// The engine overrides `kneecap sim` takes.
    #[command(flatten, next_help_heading = "Engine")]
    pub engine: super::sim::SimEngineArgs,

    /// Prompt tokens of each request (after the shared prefix).
    #[arg(long, default_value_t = 1024, help_heading = "Workload")]
    pub random_input_len: u32,
    /// Output tokens of each request.
    #[arg(long, default_value_t = 128, help_heading = "Workload")]
    pub random_output_len: u32,
    /// A float in [0,1), or {"input": r1, "output": r2}: lengths drawn
    /// uniformly within ± this share, as `kneecap run` draws them.
    #[arg(long, default_value = "0.0", help_heading = "Workload")]
    pub random_range_ratio: String,
    /// Tokens of one prefix every prompt starts with (as `kneecap run`).
    #[arg(long, default_value_t = 0, help_heading = "Workload")]
    pub random_prefix_len: u32,
    /// Gamma shape of inter-arrival gaps (1 = Poisson, inf = evenly spaced).
    #[arg(long, default_value = "1.0", value_parser = super::run::parse_rate, help_heading = "Workload")]
    pub burstiness: f64,

    /// The SLO every request population must meet (e.g. 'p99_ttft_ms<=500';
    /// repeatable, all must hold).
    #[arg(long = "slo", value_name = "SLO", required = true, action = clap::ArgAction::Append)]
    pub slos: Vec<String>,
    /// Replicas needed to serve this rate (req/s) within the SLO.
    #[arg(long, value_name = "REQ_S")]
    pub target_rate: Option<f64>,
    /// Also predict the latency at these loads (req/s), e.g. 2,4,6: TTFT,
    /// TPOT and E2E at each, beside what a measured sweep step shows.
    #[arg(
        long,
        value_name = "LIST",
        value_delimiter = ',',
        conflicts_with = "grid"
    )]
    pub at_rates: Vec<f64>,
    /// Write the prediction as JSON (versioned, `predicted: true`).
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,

    /// Predict over a grid of shapes instead of one workload.
    #[arg(long, help_heading = "Grid")]
    pub grid: bool,
    /// The grid's prompt lengths (tokens, shared prefix included).
    #[arg(
        long,
        value_name = "LIST",
        default_value = "256,1024,4096",
        requires = "grid",
        help_heading = "Grid"
    )]
    pub grid_input: String,
    /// The grid's output lengths.
    #[arg(
        long,
        value_name = "LIST",
        default_value = "64,256",
        requires = "grid",
        help_heading = "Grid"
    )]
    pub grid_output: String,
    /// The grid's shared-prefix shares of the prompt (0..1).
    #[arg(
        long,
        value_name = "LIST",
        default_value = "0",
        requires = "grid",
        help_heading = "Grid"
    )]
    pub grid_prefix: String,
    /// Write the grid's heat map as a self-contained HTML file.
    #[arg(long, value_name = "FILE", requires = "grid", help_heading = "Grid")]
    pub html: Option<PathBuf>,

    /// Measured requests per simulated run, after the warm-up.
    #[arg(
        long,
        default_value_t = 20_000,
        value_name = "N",
        help_heading = "Search"
    )]
    pub requests: usize,
    /// Warm-up requests per simulated run, left out of the statistics.
    #[arg(
        long,
        default_value_t = 2_000,
        value_name = "N",
        help_heading = "Search"
    )]
    pub warmup: usize,
    /// Independent seeds (--seed, --seed + 1, ...): the knee's own spread.
    #[arg(long, default_value_t = 3, value_name = "N", help_heading = "Search")]
    pub seeds: u32,
    /// The first seed of the arrival gaps and lengths.
    #[arg(long, default_value_t = 0, help_heading = "Search")]
    pub seed: u64,
    /// Stop each search when its bracket is narrower than this share of the rate.
    #[arg(
        long,
        default_value_t = 0.0025,
        value_name = "FRACTION",
        help_heading = "Search"
    )]
    pub precision: f64,
    /// Skip "what moves it" (two more searches at ±25% of the binding parameter; six when
    /// compute binds, which also decides prefill vs decode compute).
    #[arg(long, help_heading = "Search")]
    pub no_moves: bool,
}

//! `kneecap profile` arguments: clap syntax only. The target flags are
//! `run`'s; the built-in simulator (without --base-url) takes `sim`'s
//! engine overrides.

use super::run::RunArgs;
use super::sim::SimEngineArgs;
use clap::Args;
use std::path::PathBuf;

/// Measure a server's model once: short designed probes fit the simulator's
/// parameters (step base, prefill and decode costs, batch limit, KV cache,
/// token budget, prefill interference, prefix caching), each with its
/// uncertainty. Prints a table and writes the profile JSON (`kneecap sim
/// --profile FILE` serves it).
#[derive(Debug, Clone, Args)]
pub struct ProfileArgs {
    /// Time budget for all the probes, seconds; they are sized to fit.
    #[arg(
        long,
        default_value_t = 120.0,
        value_name = "SECONDS",
        help_heading = "Profile"
    )]
    pub budget: f64,
    /// Profile JSON to write [default: kneecap-profile-DATE.json].
    #[arg(short = 'o', long, value_name = "FILE", help_heading = "Profile")]
    pub output: Option<PathBuf>,
    /// Prometheus endpoint to scrape for the running and KV gauges
    /// [default: TARGET/metrics].
    #[arg(long, help_heading = "Profile")]
    pub metrics_url: Option<String>,
    /// Fit again the observations a profile JSON holds (what its probes
    /// saw, which `kneecap profile` writes into it), with this kneecap's
    /// fit; no server is contacted and the probes are not sent again.
    #[arg(long, value_name = "FILE", help_heading = "Profile")]
    pub refit: Option<PathBuf>,
    /// The built-in simulator's engine (without --base-url), as `kneecap sim` takes it.
    #[command(flatten, next_help_heading = "Built-in simulator")]
    pub sim: SimEngineArgs,
    #[command(flatten)]
    pub run: RunArgs,
}

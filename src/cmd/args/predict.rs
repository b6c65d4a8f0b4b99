//! Predict arguments to [`PredictOptions`]: the engine (a preset with the
//! simulator's overrides), the workload, the SLOs, the search and the grid,
//! each rule naming its flag.

use super::dataset::parse_range_ratio;
use super::sim::{engine_params, load_profile, override_params, MAX_TRUTH_SEEDS};
use crate::cli::predict::PredictArgs;
use crate::sim::params::HostStalls;
use crate::sim::virtual_time::VirtualLoad;
use crate::sim::ModelParams;
use crate::sweep::slo::Slo;
use crate::twin::grid::{prefix_tokens, GridSpec};
use crate::twin::knee::{needs_token_times, TruthConfig};
use crate::twin::predict::{distinct_corners, Misfit, PredictConfig};
use anyhow::{bail, Result};
use std::path::PathBuf;
use std::str::FromStr;

/// Most cells a grid may have (each is a full prediction).
pub const MAX_GRID_CELLS: usize = 64;

/// A validated `kneecap predict`.
#[derive(Debug, Clone)]
pub struct PredictOptions {
    /// Where the central parameters came from (`preset tiny`, ...).
    pub source: String,
    /// The prediction (the single workload's, or the grid's base).
    pub config: PredictConfig,
    /// `--grid`: the shapes.
    pub grid: Option<GridSpec>,
    /// `--target-rate`.
    pub target_rate: Option<f64>,
    /// `--at-rates`.
    pub at_rates: Vec<f64>,
    /// `-o FILE`.
    pub output: Option<PathBuf>,
    /// `--html FILE`.
    pub html: Option<PathBuf>,
}

/// Validate `kneecap predict`'s flags; errors name the flag and the fix.
pub fn predict_options(a: &PredictArgs) -> Result<PredictOptions> {
    let engine = engine(a)?;
    let params = engine.params.clone();
    let slos = a
        .slos
        .iter()
        .map(|s| Slo::from_str(s).map_err(|e| anyhow::anyhow!("--slo: {e}")))
        .collect::<Result<Vec<_>>>()?;
    check_search(a)?;
    let range_ratio = parse_range_ratio(&a.random_range_ratio)?;
    let grid = a.grid.then(|| grid_spec(a)).transpose()?;
    if grid.is_none() {
        check_shape(a, &params, range_ratio)?;
    }
    if let Some(r) = a.target_rate {
        if !(r.is_finite() && r > 0.0) {
            bail!("--target-rate must be a positive number of req/s, got {r}");
        }
    }
    if let Some(r) = a.at_rates.iter().find(|r| !(r.is_finite() && **r > 0.0)) {
        bail!("--at-rates must list positive numbers of req/s (e.g. 2,4,6), got {r}");
    }
    let load = VirtualLoad {
        token_times: needs_token_times(&slos),
        shared_prefix: a.random_prefix_len,
        prefix_caching: engine.prefix_caching,
        ..VirtualLoad::fixed(
            a.random_input_len,
            a.random_output_len,
            a.warmup,
            a.requests,
        )
    };
    let truth = TruthConfig {
        params,
        load,
        slos,
        range_ratio,
        burstiness: a.burstiness,
        seeds: (0..u64::from(a.seeds))
            .map(|k| a.seed.wrapping_add(k))
            .collect(),
        precision: a.precision,
        tail: engine.tail,
    };
    Ok(PredictOptions {
        source: engine.source,
        config: PredictConfig {
            truth,
            corners: engine.corners,
            moves: !a.no_moves && grid.is_none(),
            misfit: engine.misfit,
        },
        grid,
        target_rate: a.target_rate,
        at_rates: a.at_rates.clone(),
        output: a.output.clone(),
        html: a.html.clone(),
    })
}

/// The engine model: a preset's exact parameters, or a profile's central
/// ones with its corners and misfit; the overrides on top of either.
struct Engine {
    source: String,
    params: ModelParams,
    corners: Vec<ModelParams>,
    prefix_caching: bool,
    misfit: Option<Misfit>,
    /// The host's stalls redrawn over each TTFT (a profile's, at its mean).
    tail: HostStalls,
}

fn engine(a: &PredictArgs) -> Result<Engine> {
    let no_cache = a.engine.no_enable_prefix_caching;
    let Some(path) = &a.profile else {
        return Ok(Engine {
            source: format!("preset {}", a.preset),
            params: engine_params(&a.preset, &a.engine)?,
            corners: Vec::new(),
            prefix_caching: !no_cache,
            misfit: None,
            tail: HostStalls::NONE,
        });
    };
    let profile = load_profile(path, "--profile")?;
    // The stalls at their mean, or drawn over the costs without them.
    let stalls = |p: ModelParams| if a.draw_stalls { profile.drawn(p) } else { p };
    let mut params = stalls(profile.params());
    override_params(&a.engine, &mut params)?;
    // Each corner with the same overrides (an overridden parameter is exact).
    let mut adjusted = Vec::new();
    for c in profile.corners() {
        let mut p = stalls(c.params);
        override_params(&a.engine, &mut p)
            .map_err(|e| anyhow::anyhow!("--profile corner '{}': {e:#}", c.name))?;
        adjusted.push(p);
    }
    let corners = distinct_corners(&params, adjusted);
    Ok(Engine {
        source: format!("profile {}", path.display()),
        params,
        corners,
        prefix_caching: !no_cache && profile.params.prefix_caching.enabled.unwrap_or(true),
        misfit: profile.misfit(),
        // Drawn in the engine, or at their mean there and over each TTFT.
        tail: if a.draw_stalls {
            HostStalls::NONE
        } else {
            profile.host_stalls()
        },
    })
}

fn check_search(a: &PredictArgs) -> Result<()> {
    if a.requests == 0 {
        bail!("--requests must be at least 1");
    }
    if a.seeds == 0 || a.seeds > MAX_TRUTH_SEEDS {
        bail!("--seeds must be between 1 and {MAX_TRUTH_SEEDS}");
    }
    if !(a.precision > 0.0 && a.precision < 1.0) {
        bail!(
            "--precision must be a fraction in (0, 1), e.g. 0.0025, got {}",
            a.precision
        );
    }
    Ok(())
}

/// The single workload's lengths: not empty, and (at their longest) within
/// `max_model_len`.
fn check_shape(a: &PredictArgs, p: &ModelParams, (ri, ro): (f64, f64)) -> Result<()> {
    if a.random_output_len == 0 || a.random_input_len + a.random_prefix_len == 0 {
        bail!("--random-input-len (with --random-prefix-len) and --random-output-len must be at least 1");
    }
    let longest = |len: u32, r: f64| (f64::from(len) * (1.0 + r)).ceil() as u64;
    let total = u64::from(a.random_prefix_len)
        + longest(a.random_input_len, ri)
        + longest(a.random_output_len, ro);
    if total > u64::from(p.max_model_len) {
        bail!(
            "--random-prefix-len + --random-input-len + --random-output-len reach {total} tokens, over --max-model-len {}: the server would refuse them; shorten the workload or raise --max-model-len (and --kv-cache-tokens)",
            p.max_model_len
        );
    }
    Ok(())
}

fn list<T: FromStr>(flag: &str, s: &str) -> Result<Vec<T>> {
    let items: Vec<T> = s
        .split(',')
        .map(|x| {
            x.trim().parse().map_err(|_| {
                anyhow::anyhow!(
                    "{flag}: '{}' is not a number (a comma-separated list, e.g. 256,1024)",
                    x.trim()
                )
            })
        })
        .collect::<Result<_>>()?;
    Ok(items)
}

fn grid_spec(a: &PredictArgs) -> Result<GridSpec> {
    let inputs: Vec<u32> = list("--grid-input", &a.grid_input)?;
    let outputs: Vec<u32> = list("--grid-output", &a.grid_output)?;
    let prefix_shares: Vec<f64> = list("--grid-prefix", &a.grid_prefix)?;
    if inputs.contains(&0) || outputs.contains(&0) {
        bail!("--grid-input and --grid-output lengths must be at least 1");
    }
    if let Some(bad) = prefix_shares.iter().find(|s| !(0.0..1.0).contains(*s)) {
        bail!("--grid-prefix: {bad} must be a share in [0, 1), e.g. 0,0.5,0.9");
    }
    if let Some(&i) = inputs
        .iter()
        .find(|&&i| prefix_shares.iter().any(|&s| prefix_tokens(i, s) == i))
    {
        bail!("--grid-input {i} with --grid-prefix leaves no prompt tokens of its own; lower the share");
    }
    let cells = inputs.len() * outputs.len() * prefix_shares.len();
    if cells > MAX_GRID_CELLS {
        bail!("the grid has {cells} cells, over {MAX_GRID_CELLS}: shorten --grid-input, --grid-output or --grid-prefix");
    }
    Ok(GridSpec {
        inputs,
        outputs,
        prefix_shares,
    })
}

#[cfg(test)]
#[path = "predict_tests.rs"]
mod tests;

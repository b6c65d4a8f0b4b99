//! The twin's prior on one sweep step: the step's load run in virtual time
//! over the twin's central parameters and each corner, every seed, and the
//! lowest and highest share of requests over each SLO's bound
//! ([`crate::sweep::prior`] says how a step weighs it). Pure: seeded, no
//! clock.

use super::knee::{keeps_up, load_for_seed, records, run_at, TruthConfig};
use crate::sim::virtual_time::unit_gaps;
use crate::sim::ModelParams;
use crate::sweep::prior::{share_over, SloPrior, StepPrior};

/// The prior for a step at `load` (req/s): `truth` holds the central
/// parameters, the workload, the SLOs and the seeds; `corners` the parameter
/// sets at the ends of their ranges. A set that cannot keep up at `load`
/// ([`keeps_up`]) counts every request as over every bound: in steady state
/// its queue grows without end.
pub fn step_prior(
    truth: &TruthConfig,
    corners: &[ModelParams],
    load: f64,
    weight: usize,
) -> Result<StepPrior, String> {
    if !(load.is_finite() && load > 0.0) {
        return Err(format!("the step's load must be above 0, got {load}"));
    }
    let sets: Vec<&ModelParams> = std::iter::once(&truth.params).chain(corners).collect();
    let shares: Vec<Result<Vec<Vec<Option<f64>>>, String>> = std::thread::scope(|s| {
        let handles: Vec<_> = sets
            .iter()
            .map(|&params| s.spawn(move || set_shares(truth, params, load)))
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("a prior thread panicked".into()))
            })
            .collect()
    });
    let runs: Vec<Vec<Option<f64>>> = shares
        .into_iter()
        .collect::<Result<Vec<_>, _>>()?
        .into_iter()
        .flatten()
        .collect();
    let slos = (0..truth.slos.len())
        .map(|j| {
            let each: Vec<f64> = runs.iter().filter_map(|r| r[j]).collect();
            (!each.is_empty()).then(|| SloPrior {
                share_over_low: each.iter().copied().fold(f64::INFINITY, f64::min),
                share_over_high: each.iter().copied().fold(0.0, f64::max),
            })
        })
        .collect();
    Ok(StepPrior { weight, slos })
}

/// How far past the allowed share a twin-clear load's least favourable
/// parameter set must be: at most half the allowed share over the bound for
/// a pass, at least twice it for a fail.
pub const CLEAR_MARGIN: f64 = 2.0;

/// Each step of the search for twin-clear loads, as a ratio.
const CLEAR_STEP: f64 = 1.06;

/// At most this many moves from the predicted interval's end.
const CLEAR_MOVES: usize = 12;

/// The twin-clear loads around a predicted interval `(low, high)`: the
/// highest load at or below `low` where every parameter set and seed of the
/// twin meets every SLO with at most half the allowed share over its bound,
/// and the lowest at or above `high` where every one misses some SLO by at
/// least twice the allowed share ([`CLEAR_MARGIN`]). There the twin's
/// prior leans clearly ([`crate::sweep::prior`]), so a step there can be
/// decided early; at the interval's ends it is silent. `None` for an end
/// not found within 12 moves of 6% each.
pub fn clear_loads(
    truth: &TruthConfig,
    corners: &[ModelParams],
    (low, high): (f64, f64),
) -> Result<(Option<f64>, Option<f64>), String> {
    let quantiles: Vec<Option<f64>> = truth.slos.iter().map(|s| s.quantile()).collect();
    let clear_pass = |p: &StepPrior| {
        p.slos.iter().zip(&quantiles).all(|(s, q)| match (s, q) {
            (Some(s), Some(q)) => s.share_over_high * CLEAR_MARGIN <= 1.0 - q,
            _ => true,
        })
    };
    let clear_fail = |p: &StepPrior| {
        p.slos.iter().zip(&quantiles).any(|(s, q)| match (s, q) {
            (Some(s), Some(q)) => s.share_over_low >= (1.0 - q) * CLEAR_MARGIN,
            _ => false,
        })
    };
    let pass = walk(low, 1.0 / CLEAR_STEP, |load| {
        Ok(clear_pass(&step_prior(truth, corners, load, 0)?))
    })?;
    let fail = walk(high, CLEAR_STEP, |load| {
        Ok(clear_fail(&step_prior(truth, corners, load, 0)?))
    })?;
    Ok((pass, fail))
}

/// The first load from `start`, moving by the ratio `by` at most
/// [`CLEAR_MOVES`] times, where `clear` holds.
fn walk(
    start: f64,
    by: f64,
    clear: impl Fn(f64) -> Result<bool, String>,
) -> Result<Option<f64>, String> {
    let mut load = start;
    for _ in 0..CLEAR_MOVES {
        if load > 0.0 && clear(load)? {
            return Ok(Some(load));
        }
        load *= by;
    }
    Ok(None)
}

/// Each seed's share over each SLO's bound for one parameter set.
fn set_shares(
    truth: &TruthConfig,
    params: &ModelParams,
    rate: f64,
) -> Result<Vec<Vec<Option<f64>>>, String> {
    truth
        .seeds
        .iter()
        .map(|&seed| {
            let load = load_for_seed(truth, seed)?;
            let gaps = unit_gaps(seed, truth.burstiness, load.gaps_needed())?;
            let run = run_at(truth, params, (&load, &gaps, seed), rate)?;
            let kept_up = keeps_up(&run);
            let recs = records(&run);
            Ok(truth
                .slos
                .iter()
                .map(|s| share_over(s, &recs).map(|x| if kept_up { x } else { 1.0 }))
                .collect())
        })
        .collect()
}

#[cfg(test)]
#[path = "prior_tests.rs"]
mod tests;

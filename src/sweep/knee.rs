//! The knee search: which load to measure next, and what the measured steps
//! say about the knee. PURE: works on the verdicts the caller collected; no
//! clock, no I/O.
//!
//! **Auto search.** Start at `start`; multiply by `factor` while steps pass (up
//! to `max_load`). After the first failure, bisect between the highest pass
//! below the lowest failure and that failure until `(fail − pass)/pass ≤
//! tolerance`. If nothing below the lowest failure has passed, step down by
//! `factor` until a step passes or the floor `start/`[`STEP_DOWN_FLOOR_DIVISOR`]
//! is passed (below a step that passed within noise, once: see
//! `auto_candidate`). A generator-limited step ends the search: higher loads cannot be
//! measured. At most `max_steps` steps are taken.
//!
//! **The noise band.** An adaptive step that reached its cap with its SLO
//! verdict still within noise (`undecided`) is never a bracket end: the knee
//! interval runs from the highest *decided* pass to the lowest *decided*
//! failure, and the undecided loads between them are reported inside it
//! (their percentile is within noise of the bound: that is where the knee
//! is). Bisection then splits the wider of the gaps between a decided end
//! and the band (the failing side first on a tie: above the knee
//! the share over the bound climbs fast, so a failure is decided sooner than
//! a pass), so the ends move towards the band from both sides until the
//! interval is within the tolerance; when the band's lowest load passed
//! within noise, only the gap above the band is split (a step below it
//! could only pass further from the knee). A pass end may also be decided
//! by the steps from it up to the lowest decided failure together
//! ([`super::pooled`]), and a pass within noise just below the failure is
//! measured once more before the search steps down. Without adaptive
//! steps nothing is undecided and this is plain bisection.
//!
//! The midpoint is **geometric** (`√(pass·fail)`): the stop rule is relative,
//! and the geometric midpoint halves `ln(fail/pass)` whichever way the step
//! goes, so the worst-case number of steps to reach a relative tolerance is the
//! least. (The arithmetic midpoint of 32..64 leaves 32..48, ratio 1.5, on a
//! failure but 48..64, ratio 1.33, on a pass.)
//!
//! **Concurrency loads** ([`LoadUnit::Concurrency`]) are integers: starts and
//! midpoints are rounded, and bisection stops only when pass and fail are
//! adjacent integers (the tolerance is not used), so the knee is exact.
pub use super::moves::STEP_DOWN_FLOOR_DIVISOR;
use super::moves::{bisect, climb_under, opening_next, step_down};
pub use super::point::StepPoint;
use crate::result::Verdict;
use serde::{Deserialize, Serialize};

pub use super::plateau::{
    queue_onset, service_rate_estimate, service_rate_from_queue, QUEUE_ONSET_WAITING,
    SATURATED_RATIO,
};
pub use crate::result::LoadUnit;

/// Which loads a sweep measures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum SearchPlan {
    /// Bracket and bisect (module docs). Defaults: factor 2, tolerance 0.10.
    Auto {
        /// First load measured.
        start: f64,
        /// Growth (and step-down) factor, > 1.
        factor: f64,
        /// Relative bracket width that ends bisection (rate loads only).
        tolerance: f64,
        /// Highest load the climb may reach.
        max_load: f64,
        /// Most steps the search takes.
        max_steps: usize,
        /// Rates or (integer) concurrencies.
        unit: LoadUnit,
        /// The calibration probe's service rate μ: the climb does not jump
        /// past it (a load at μ already fails, so it brackets the knee) until
        /// a step at it has passed.
        #[serde(default)]
        ceiling: Option<f64>,
        /// Loads measured first, ascending (a twin's predicted knee
        /// interval, `sweep --twin`): each in turn while every step below it
        /// passed; then the search goes on from what they showed.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        opening: Vec<f64>,
    },
    /// Exactly these loads, in order (duplicates skipped; loads at or above a
    /// generator-limited one are skipped because they cannot be measured).
    List(Vec<f64>),
}

impl SearchPlan {
    /// An auto plan with the default factor 2, tolerance 0.10 and 20 steps.
    pub fn auto(start: f64, max_load: f64, unit: LoadUnit) -> Self {
        SearchPlan::Auto {
            start,
            factor: 2.0,
            tolerance: 0.10,
            max_load,
            max_steps: 20,
            unit,
            ceiling: None,
            opening: Vec::new(),
        }
    }

    /// The same plan with these stop rules (an auto plan's tolerance and
    /// step budget); a list is unchanged.
    pub fn with_stops(mut self, tolerance: f64, max_steps: usize) -> Self {
        if let SearchPlan::Auto {
            tolerance: t,
            max_steps: m,
            ..
        } = &mut self
        {
            (*t, *m) = (tolerance, max_steps);
        }
        self
    }

    /// The same auto plan measuring `loads` first (ascending; see
    /// [`SearchPlan::Auto`]'s `opening`), starting at the lowest; a list is
    /// unchanged.
    pub fn with_opening(mut self, mut loads: Vec<f64>) -> Self {
        if let SearchPlan::Auto {
            start,
            max_load,
            opening,
            ..
        } = &mut self
        {
            loads.retain(|&l| l.is_finite() && l > 0.0 && l <= *max_load);
            loads.sort_by(f64::total_cmp);
            loads.dedup();
            if let Some(&first) = loads.first() {
                *start = first;
            }
            *opening = loads;
        }
        self
    }

    /// Check the plan's numbers; [`next_load`] returns `None` for invalid plans.
    pub fn validate(&self) -> Result<(), String> {
        match self {
            SearchPlan::List(loads) if loads.is_empty() => Err("empty load list".into()),
            SearchPlan::List(loads) => match loads.iter().find(|l| !(l.is_finite() && **l > 0.0)) {
                Some(bad) => Err(format!("load {bad} is not a positive number")),
                None => Ok(()),
            },
            SearchPlan::Auto {
                start,
                factor,
                tolerance,
                max_load,
                max_steps,
                ..
            } => {
                let positive = |x: f64| x.is_finite() && x > 0.0;
                if !positive(*start) || !positive(*max_load) || start > max_load {
                    return Err(format!("need 0 < start ({start}) ≤ max load ({max_load})"));
                }
                if !(factor.is_finite() && *factor > 1.0) {
                    return Err(format!("factor {factor} must be > 1"));
                }
                if !positive(*tolerance) || *max_steps == 0 {
                    return Err("tolerance and max steps must be positive".into());
                }
                Ok(())
            }
        }
    }
}

/// The knee as an interval, with the caveats that come with it.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Knee {
    /// Highest passing load below `first_fail` (highest pass if none failed).
    pub last_pass: Option<f64>,
    /// Lowest failing load (generator-limited steps are not failures).
    pub first_fail: Option<f64>,
    /// A generator-limited step below `first_fail` (or with no failure) stopped
    /// the search: the knee is at least `last_pass`, maybe higher.
    pub bounded_by_generator: bool,
    /// Goodput of the `last_pass` step.
    pub goodput_at_knee: Option<f64>,
    /// A step above `first_fail` passed: the curve is noisy or not monotonic.
    pub non_monotonic: bool,
    /// Confidence of the `last_pass` step's pass, and of the `first_fail`
    /// step's failure (adaptive steps).
    pub last_pass_confidence: Option<f64>,
    pub first_fail_confidence: Option<f64>,
    /// Loads measured above `last_pass` (and below `first_fail`) whose
    /// verdict stayed within noise at the step's cap, ascending: the noise
    /// band around the bound.
    #[serde(default)]
    pub undecided: Vec<f64>,
    /// When `last_pass` was decided by pooling its step's evidence with
    /// the steps above it ([`super::pooled`]): the loads pooled, ascending.
    #[serde(default)]
    pub last_pass_pooled: Vec<f64>,
    /// Without a decided pass: the lowest load below `first_fail` whose
    /// point estimate passed, and its (pooled) confidence, below the level
    /// asked. The interval's lower end, within noise.
    #[serde(default)]
    pub pass_within_noise: Option<(f64, f64)>,
}

fn loads_with(history: &[StepPoint], verdict: Verdict) -> impl Iterator<Item = f64> + '_ {
    history
        .iter()
        .filter(move |p| p.verdict == verdict)
        .map(|p| p.load)
}

fn measured(history: &[StepPoint], load: f64) -> bool {
    history.iter().any(|p| p.load == load)
}

/// One point per load. A load passes only when every measurement of it
/// passed: a failure anywhere (decided or not) makes it a failure, since a
/// re-test that contradicts the first measurement shows the load is within
/// noise of the bound, and the knee is the highest load *shown* to meet the
/// SLOs. Otherwise the latest measurement stands.
fn effective(history: &[StepPoint]) -> Vec<StepPoint> {
    let rank = |v: Verdict| match v {
        Verdict::Pass => 0,
        Verdict::GeneratorLimited => 1,
        Verdict::Fail | Verdict::Interrupted => 2,
    };
    let mut out: Vec<StepPoint> = Vec::with_capacity(history.len());
    for p in history {
        match out.iter_mut().find(|q| q.load == p.load) {
            Some(q) if rank(p.verdict) >= rank(q.verdict) => *q = p.clone(),
            Some(_) => {}
            None => out.push(p.clone()),
        }
    }
    out
}

/// The next load to measure, or `None` when the search is over.
pub fn next_load(plan: &SearchPlan, history: &[StepPoint]) -> Option<f64> {
    plan.validate().ok()?;
    let lowest_limited = loads_with(history, Verdict::GeneratorLimited).reduce(f64::min);
    match plan {
        SearchPlan::List(loads) => loads
            .iter()
            .copied()
            .filter(|&l| lowest_limited.is_none_or(|g| l < g))
            .find(|&l| !measured(history, l)),
        SearchPlan::Auto { max_steps, .. } => {
            if history.len() >= *max_steps || lowest_limited.is_some() {
                return None;
            }
            let points = effective(history);
            auto_candidate(plan, &points, history)
                .filter(|&c| !measured(history, c) || retest(history, c))
        }
    }
}

/// Whether `load` may be measured again: it was measured once, and that
/// step passed within noise (its evidence and the re-test's are pooled).
fn retest(raw: &[StepPoint], load: f64) -> bool {
    let mut at = raw.iter().filter(|p| p.load == load);
    matches!((at.next(), at.next()), (Some(p), None) if p.undecided && p.verdict == Verdict::Pass)
}

fn auto_candidate(plan: &SearchPlan, history: &[StepPoint], raw: &[StepPoint]) -> Option<f64> {
    let SearchPlan::Auto {
        start,
        factor,
        tolerance,
        max_load,
        unit,
        ceiling,
        ref opening,
        ..
    } = *plan
    else {
        return None;
    };
    let integer = unit == LoadUnit::Concurrency;
    let fix = |x: f64| if integer { x.round().max(1.0) } else { x };
    if history.is_empty() {
        return Some(fix(start));
    }
    if let Some(next) = opening_next(opening, raw) {
        return Some(fix(next));
    }
    let knee = knee(history);
    // The undecided loads above the decided pass and below the decided
    // failure: the search steps past them, never stops on them.
    let band: Vec<f64> = undecided_between(history, knee.last_pass, knee.first_fail);
    match (knee.last_pass, knee.first_fail) {
        (Some(pass), None) => {
            let from = band.last().copied().unwrap_or(pass);
            climb_under(from, factor, ceiling, fix(max_load), integer)
        }
        (Some(pass), Some(fail)) => {
            let low_passed = band.first().is_some_and(|&l| passed_at(history, l));
            bisect(pass, fail, &band, low_passed, tolerance, integer)
        }
        (None, Some(_)) if band.first().is_some_and(|&low| passed_at(history, low)) => {
            below_a_noisy_pass(history, raw, &band, (factor, start), integer)
        }
        (None, Some(fail)) => step_down(
            band.first().copied().unwrap_or(fail),
            factor,
            start,
            integer,
        ),
        // Only undecided steps: below the band if its lowest step's point
        // estimate failed, above it otherwise.
        (None, None) => match (band.first(), band.last()) {
            (Some(&low), Some(&high)) => {
                if !passed_at(history, low) {
                    step_down(low, factor, start, integer)
                } else if !passed_at(history, high) {
                    // The top of the band failed within noise (e.g. at μ):
                    // the knee is near, so a quarter step up decides a
                    // failure without a long overload.
                    climb_under(
                        high,
                        1.0 + (factor - 1.0) / 4.0,
                        None,
                        fix(max_load),
                        integer,
                    )
                } else {
                    climb_under(high, factor, ceiling, fix(max_load), integer)
                }
            }
            _ => None,
        },
    }
}

/// Below the failure, the lowest step of the `band` passed within noise:
/// measure it again first (the two steps' evidence is pooled, see
/// `super::pooled`, so near the knee twice the samples may decide it; one
/// re-test per search). Still undecided: step down once (by `factor`, not
/// below the floor from `start`), pooled with both. If that is undecided
/// too (a second undecided pass), a lower load still gets fewer requests
/// in a step's cap, so stop and leave the knee below the failure with the
/// band listed.
fn below_a_noisy_pass(
    history: &[StepPoint],
    raw: &[StepPoint],
    band: &[f64],
    (factor, start): (f64, f64),
    integer: bool,
) -> Option<f64> {
    let retested = raw
        .iter()
        .any(|p| raw.iter().filter(|q| q.load == p.load).count() > 1);
    if !retested && retest(raw, band[0]) {
        return Some(band[0]);
    }
    let passes = band.iter().filter(|&&l| passed_at(history, l)).count();
    if passes > 1 {
        return None;
    }
    step_down(band[0], factor, start, integer)
}

/// Whether the (effective) point at `load` passed.
fn passed_at(history: &[StepPoint], load: f64) -> bool {
    history
        .iter()
        .any(|p| p.load == load && p.verdict == Verdict::Pass)
}

/// The undecided loads strictly above `pass` and below `fail` (either end
/// may be open), ascending.
fn undecided_between(history: &[StepPoint], pass: Option<f64>, fail: Option<f64>) -> Vec<f64> {
    let mut band: Vec<f64> = history
        .iter()
        .filter(|p| p.undecided && p.verdict != Verdict::GeneratorLimited)
        .map(|p| p.load)
        .filter(|&l| pass.is_none_or(|p| l > p) && fail.is_none_or(|f| l < f))
        .collect();
    band.sort_by(f64::total_cmp);
    band.dedup();
    band
}

/// The knee implied by `history` (any order; a re-tested load counts once,
/// see `effective`).
pub fn knee(history: &[StepPoint]) -> Knee {
    let raw = history;
    let points = effective(history);
    let history = points.as_slice();
    let decided = |v: Verdict| {
        history
            .iter()
            .filter(move |p| p.verdict == v && !p.undecided)
            .map(|p| p.load)
    };
    let first_fail = decided(Verdict::Fail).reduce(f64::min);
    let below_fail = |l: &f64| first_fail.is_none_or(|f| *l < f);
    let own_pass = decided(Verdict::Pass).filter(below_fail).reduce(f64::max);
    let pooled = super::pooled::pass_end(raw, history, own_pass, first_fail);
    let last_pass = pooled.as_ref().map(|p| p.load).or(own_pass);
    let confidence_at = |load: Option<f64>, v: Verdict| {
        let load = load?;
        history
            .iter()
            .find(|p| p.load == load && p.verdict == v)
            .and_then(|p| p.confidence)
    };
    let goodput_at_knee = last_pass.and_then(|l| {
        history
            .iter()
            .find(|p| p.load == l && p.verdict == Verdict::Pass)
            .map(|p| p.goodput)
    });
    let bounded_by_generator =
        loads_with(history, Verdict::GeneratorLimited).any(|l| below_fail(&l));
    Knee {
        last_pass,
        first_fail,
        bounded_by_generator,
        goodput_at_knee,
        non_monotonic: first_fail.is_some_and(|f| decided(Verdict::Pass).any(|l| l > f)),
        last_pass_confidence: match &pooled {
            Some(p) => Some(p.confidence),
            None => confidence_at(last_pass, Verdict::Pass),
        },
        first_fail_confidence: confidence_at(first_fail, Verdict::Fail),
        undecided: undecided_between(history, last_pass, first_fail),
        last_pass_pooled: pooled.map(|p| p.loads).unwrap_or_default(),
        pass_within_noise: match last_pass {
            Some(_) => None,
            None => super::pooled::within_noise(raw, history, first_fail),
        },
    }
}

#[cfg(test)]
#[path = "knee_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "knee_band_tests.rs"]
mod band_tests;

#[cfg(test)]
#[path = "knee_sequence_tests.rs"]
mod sequence_tests;

#[cfg(test)]
#[path = "knee_opening_tests.rs"]
mod opening_tests;

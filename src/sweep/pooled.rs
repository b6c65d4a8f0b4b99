//! Evidence pooled across steps: a pass end decided by the steps at and
//! above it together, when no one of them is decided alone. PURE.
//!
//! **Why it is sound.** The share of requests over a latency bound does not
//! fall as the offered load rises (more load, longer queues). So if steps at
//! loads `L ≤ l₁ ≤ … < F` are pooled, the pooled share over the bound is at
//! least the share at `L`: a pooled sample that meets the SLO with
//! confidence `c` vouches for `L` with at least `c`. Every step measured in
//! `[L, F)` is pooled, whatever its own verdict (`F` is the lowest decided
//! failure), so no step is picked for looking good. Each step adds its
//! *effective* samples ([`super::confidence`]: bursts already counted once,
//! failed requests counted as over the bound).
//!
//! **Multiplicity.** Each candidate `L` (a load whose point estimate passed,
//! above the highest pass decided alone) is one more test; with `m`
//! candidates every pooled confidence is corrected by the union bound over
//! `m + 1` tests (the `+ 1` for the steps' own tests), so the chance that the
//! end reported is wrong stays within `1 − level`. A pool of one step is that
//! step's own test again and is not taken.

use super::confidence::{pooled_pass, union_bound, Evidence};
use super::point::StepPoint;
use crate::result::Verdict;

/// A pass end decided by pooling.
#[derive(Debug, Clone, PartialEq)]
pub struct PooledPass {
    /// The load vouched for (the lowest of the pool).
    pub load: f64,
    /// Its confidence, after the correction for the candidates tried.
    pub confidence: f64,
    /// The loads pooled, ascending.
    pub loads: Vec<f64>,
}

/// The highest load above `own_pass` (the highest pass decided alone) and
/// below `first_fail` that pooling decides, if any. `raw` is every step
/// measured (re-tests included: their evidence adds up); `points` has one
/// point per load (a load passes only if every measurement of it passed).
pub fn pass_end(
    raw: &[StepPoint],
    points: &[StepPoint],
    own_pass: Option<f64>,
    first_fail: Option<f64>,
) -> Option<PooledPass> {
    let level = raw.iter().find_map(|p| p.level)?;
    let mut candidates: Vec<f64> = points
        .iter()
        .filter(|p| p.verdict == Verdict::Pass)
        .map(|p| p.load)
        .filter(|&l| own_pass.is_none_or(|o| l > o) && first_fail.is_none_or(|f| l < f))
        .collect();
    candidates.sort_by(|a, b| b.total_cmp(a));
    let tests = candidates.len() + 1;
    candidates.into_iter().find_map(|load| {
        let pool = pool_from(raw, load, first_fail);
        if pool.len() < 2 {
            return None;
        }
        let confidence = union_bound(pooled(&pool)?, tests);
        (confidence >= level).then(|| PooledPass {
            load,
            confidence,
            loads: loads_of(&pool),
        })
    })
}

/// Without a decided pass: the lowest load below `first_fail` whose point
/// estimate passed, with the confidence of everything pooled from it up
/// (corrected as in [`pass_end`]), or its own when it was the only step.
pub fn within_noise(
    raw: &[StepPoint],
    points: &[StepPoint],
    first_fail: Option<f64>,
) -> Option<(f64, f64)> {
    let passes: Vec<&StepPoint> = points
        .iter()
        .filter(|p| p.verdict == Verdict::Pass && first_fail.is_none_or(|f| p.load < f))
        .collect();
    let lowest = passes.iter().map(|p| p.load).reduce(f64::min)?;
    let pool = pool_from(raw, lowest, first_fail);
    let own = points
        .iter()
        .find(|p| p.load == lowest)
        .and_then(|p| p.confidence);
    let pooled = (pool.len() >= 2)
        .then(|| pooled(&pool).map(|c| union_bound(c, passes.len() + 1)))
        .flatten();
    let confidence = match (own, pooled) {
        (Some(a), Some(b)) => a.max(b),
        (a, b) => a.or(b)?,
    };
    Some((lowest, confidence))
}

/// Every measured (not generator-limited) step at or above `load` and below
/// `first_fail`.
fn pool_from(raw: &[StepPoint], load: f64, first_fail: Option<f64>) -> Vec<&StepPoint> {
    raw.iter()
        .filter(|p| p.verdict != Verdict::GeneratorLimited)
        .filter(|p| p.load >= load && first_fail.is_none_or(|f| p.load < f))
        .collect()
}

fn pooled(pool: &[&StepPoint]) -> Option<f64> {
    let evidence: Vec<&[Option<Evidence>]> = pool.iter().map(|p| p.evidence.as_slice()).collect();
    pooled_pass(&evidence)
}

fn loads_of(pool: &[&StepPoint]) -> Vec<f64> {
    let mut loads: Vec<f64> = pool.iter().map(|p| p.load).collect();
    loads.sort_by(f64::total_cmp);
    loads.dedup();
    loads
}

#[cfg(test)]
#[path = "pooled_tests.rs"]
mod tests;

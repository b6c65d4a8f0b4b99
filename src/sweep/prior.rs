//! The twin's prior on a step's verdict: what the server's twin predicts a
//! step will find, counted as a stated number of samples beside the step's
//! own, in the currency of [`super::confidence`]. PURE.
//!
//! **The form.** The binomial test of a percentile SLO counts effective
//! samples `n` and how many met the bound, `w`; its confidence that the SLO
//! holds, `P(Bin(n, q) ≤ w − 1)`, is also the posterior probability that
//! the share within the bound is at least `q` under a Beta(0, 1) prior
//! (the posterior is Beta(w, n − w + 1)). The twin runs the step's load in virtual time over each of its
//! parameter sets and seeds ([`crate::twin`]) and gives, per SLO, the lowest
//! and highest share of requests over the bound. The prior is that share
//! taken as `weight` more samples: for a pass, `weight` samples of which
//! the *highest* predicted share (the twin's least favourable parameter set)
//! missed the bound; for a fail, the *lowest*. So the prior never argues
//! beyond the twin's own least favourable case.
//!
//! **The step keeps the last word.** The prior is added only where it
//! leans the way the step's own samples already lean: a pass prior (every
//! parameter set predicts the SLO holds) only to an SLO the step's window
//! holds, a fail prior (every set predicts a miss) only to one it misses.
//! And the samples must lean that way by themselves at even odds or better
//! ([`EVEN_ODDS`]: a p99 with no miss needs 69 effective samples), so a
//! handful of requests at a step's start never counts as agreement. Where
//! the twin and the samples disagree, the samples are too few, or the
//! twin's sets straddle the bound, the step is judged on its samples alone.
//! The prior changes how soon a step may stop and how sure its verdict is
//! stated, never which way the verdict goes. Evidence pooled across steps ([`super::pooled`]) stays
//! the samples' alone, so the prior is counted once per step, not pooled.
//!
//! How much weight is honest is measured, not assumed:
//! `examples/twin_prior_calibration.rs` draws hidden servers, gives each a
//! twin (its profile as measured, and one whose costs are wrong by ±15% on
//! purpose), and counts how often a step decided with the prior is wrong
//! (docs/benchmarks/2026-12-04.md "A twin's prior on a step's verdict"): never, with the
//! twin as profiled; often, with the wrong one. So the prior is opt-in
//! (`sweep --twin-prior-weight N`), and a sweep stops taking it after the
//! first step whose samples contradict the twin.

use super::confidence::{binomial_cdf, SloConfidence};
use super::slo::{sample_sequence, Slo};
use crate::metrics::RequestRecord;
pub use crate::result::twin::Backing;
use crate::result::twin::{SloPriorRow, StepPriorRow};
use serde::{Deserialize, Serialize};

/// How sure the step's own samples must be of the verdict the twin leans
/// to before the prior is added.
pub const EVEN_ODDS: f64 = 0.5;

/// The twin's prediction for one SLO at one load.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SloPrior {
    /// The lowest share of requests over the bound among the twin's
    /// parameter sets and seeds (0–1).
    pub share_over_low: f64,
    /// The highest share.
    pub share_over_high: f64,
}

/// The twin's prior on one step: one entry per SLO (`None` for means, which
/// have no binomial test), and its weight in samples.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepPrior {
    /// Samples the prediction counts as.
    pub weight: usize,
    /// Aligned with the sweep's SLOs.
    pub slos: Vec<Option<SloPrior>>,
}

impl SloPrior {
    /// The twin's lean on an SLO bounding quantile `q`: `Some(true)` when
    /// every parameter set meets it, `Some(false)` when every one misses it.
    pub fn lean(&self, q: f64) -> Option<bool> {
        let allowed = 1.0 - q;
        if self.share_over_high <= allowed {
            Some(true)
        } else if self.share_over_low > allowed {
            Some(false)
        } else {
            None
        }
    }
}

/// `c` (one test's confidence on the step's samples) with the prior added
/// where it agrees with `held` (whether the step's window met this SLO).
/// The interval and the sample counts stay the samples' own.
pub fn with_prior(
    c: SloConfidence,
    prior: Option<&SloPrior>,
    weight: usize,
    held: bool,
) -> (SloConfidence, Backing) {
    let Some(p) = prior.filter(|_| weight > 0) else {
        return (c, Backing::Silent);
    };
    let Some(lean) = p.lean(c.quantile) else {
        return (c, Backing::Silent);
    };
    if lean != held {
        return (c, Backing::Contradicted);
    }
    // The samples must lean the twin's way by themselves, at even odds or
    // better (a p99 with no miss: 69 effective samples), before the prior
    // is added: a handful of requests at a step's start is no agreement.
    let own = if lean { c.pass } else { c.fail };
    if own < EVEN_ODDS {
        return (c, Backing::TooFew);
    }
    let m = weight as f64;
    let n = c.effective_samples + weight;
    let out = if lean {
        // The least favourable set's share over the bound, rounded against
        // the pass.
        let within = (m * (1.0 - p.share_over_high)).floor() as usize;
        let w = c.effective_within + within;
        SloConfidence {
            pass: binomial_cdf(n, c.quantile, w as i64 - 1),
            ..c
        }
    } else {
        let within = (m * (1.0 - p.share_over_low)).ceil() as usize;
        let w = c.effective_within + within;
        SloConfidence {
            fail: 1.0 - binomial_cdf(n, c.quantile, w as i64),
            ..c
        }
    };
    (out, Backing::Agrees)
}

/// Every SLO's confidence with the step's prior added ([`with_prior`]);
/// `held[i]` says whether SLO `i` held over the step's window.
pub fn apply(
    each: &[Option<SloConfidence>],
    prior: Option<&StepPrior>,
    held: &[bool],
) -> (Vec<Option<SloConfidence>>, Vec<Backing>) {
    each.iter()
        .enumerate()
        .map(|(i, c)| {
            let slo = prior.and_then(|p| p.slos.get(i).copied().flatten());
            let weight = prior.map_or(0, |p| p.weight);
            match c {
                Some(c) => {
                    let (c, b) = with_prior(*c, slo.as_ref(), weight, held.get(i) == Some(&true));
                    (Some(c), b)
                }
                None => (None, Backing::Silent),
            }
        })
        .unzip()
}

/// The SLOs' confidences over `records` (in due order, one test each) with
/// the prior added where the samples agree ([`apply`]), and what each SLO
/// made of the prior: the one place a step's samples meet its prior.
pub fn weigh(
    slos: &[Slo],
    records: &[RequestRecord],
    level: f64,
    prior: Option<&StepPrior>,
) -> (Vec<Option<SloConfidence>>, Vec<Backing>) {
    let alone: Vec<Option<SloConfidence>> = slos
        .iter()
        .map(|s| super::confidence::slo_confidence(s, records, level))
        .collect();
    if prior.is_none() {
        let silent = vec![Backing::Silent; alone.len()];
        return (alone, silent);
    }
    let held: Vec<bool> = slos
        .iter()
        .map(|s| super::slo::evaluate(s, records).pass)
        .collect();
    apply(&alone, prior, &held)
}

/// The row a step writes: the prior and what each SLO made of it
/// (`backing`, from [`weigh`]).
pub fn row(prior: &StepPrior, backing: &[Backing]) -> StepPriorRow {
    StepPriorRow {
        weight: prior.weight,
        slos: prior
            .slos
            .iter()
            .zip(backing)
            .map(|(p, &backing)| {
                p.map(|p| SloPriorRow {
                    share_over_low: p.share_over_low,
                    share_over_high: p.share_over_high,
                    backing,
                })
            })
            .collect(),
    }
}

/// The share of `records`' samples of `slo`'s metric that miss its bound (a
/// failed request misses every bound), the quantity a pass prior is made
/// of; `None` for a mean SLO or without samples.
pub fn share_over(slo: &Slo, records: &[RequestRecord]) -> Option<f64> {
    slo.quantile()?;
    let values = sample_sequence(slo, records);
    let bound = slo.threshold_ms / 1000.0;
    let over = values.iter().filter(|&&v| !slo.op.holds(v, bound)).count();
    (!values.is_empty()).then(|| over as f64 / values.len() as f64)
}

#[cfg(test)]
#[path = "prior_tests.rs"]
mod tests;

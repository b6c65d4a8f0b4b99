//! Confidence: how sure a step's SLO verdict is. Exact binomial bounds on a
//! percentile from order statistics (no normal approximation), the sample
//! count deflated for autocorrelation, and the rule that ends an adaptive
//! step once its verdict is decided. PURE: no clock, no I/O.
//!
//! **The test.** An SLO `pQ_metric <= b` holds for the server when the true
//! Q-th percentile is within `b`, i.e. when a request meets `b` with
//! probability `F(b) ≥ q` (`q = Q/100`). Of `n` independent samples, the
//! number `W` within `b` is binomial `Bin(n, F(b))`; at the boundary
//! `F(b) = q`. So:
//!
//! - confidence that the SLO **holds** = `P(Bin(n, q) ≤ W − 1)`: how unlikely
//!   `W` or more samples within `b` would be if the server were just failing;
//! - confidence that it **misses** = `P(Bin(n, q) > W)`.
//!
//! This is the order-statistic argument: the SLO holds with confidence `c`
//! exactly when the order statistic that bounds the percentile from above at
//! level `c` is within `b`. Goodput-form SLOs (`ttft:500@0.95`) are the same
//! test with `q` = the ratio. Means have no distribution-free interval and
//! are left to the step's minimum length.
//!
//! **Dependence.** Latencies of neighbouring requests are correlated under
//! queueing (a burst delays several in a row), so `n` samples carry less than
//! `n` samples' worth of evidence. Two corrections are computed and the
//! larger is used:
//!
//! - *Bursts* ([`burst_factor`]): the samples over the bound are grouped by
//!   excursion (a run of samples above the window's median); with burst
//!   sizes `S`, the count over the bound has `Σ S² / Σ S` times the variance
//!   of independent samples (a compound Poisson count), so `n` is divided by
//!   that. A window with no exceedance says nothing about how exceedances
//!   cluster, so the same is computed for the window's own slowest `1 − q`.
//! - *AR(1)*: the within/over sequence, and that of the slowest `1 − q`,
//!   as an AR(1) process: with lag-1 autocorrelation `ρ > 0`, the effective
//!   count is `n·(1 − ρ)/(1 + ρ)`.
//!
//! How honest the result is, is measured rather than assumed:
//! `examples/confidence_calibration.rs` runs the slot server of issue 14 in
//! virtual time at its true knee and counts how often a step says "pass at
//! 90%" there (docs/benchmarks/2026-12-02.md "Is the stated confidence honest?").
//!
//! ITL gaps of one request are dependent too: their effective count is at
//! most the number of requests.
//!
//! **Failures.** A request that failed or timed out is a sample over every
//! bound (+∞, [`super::slo`]), in its place in due order: it counts against
//! `W`, and failures that come together (a server refusing for a while)
//! form a burst like any other excursion.

use super::slo::{sample_sequence, Slo, SloMetric};
use crate::metrics::stats;
use crate::metrics::RequestRecord;
use serde::{Deserialize, Serialize};

/// Default confidence an adaptive step needs before its verdict is decided.
pub const DEFAULT_CONFIDENCE: f64 = 0.90;

/// The effective-sample factor never drops below this (a fully correlated
/// window still counts as a few independent samples per hundred).
const MIN_EFFECTIVE_FRACTION: f64 = 0.02;

/// How sure one SLO's verdict is, from one step's samples.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SloConfidence {
    /// Samples the test saw.
    pub samples: usize,
    /// Samples' worth of independent evidence after the dependence correction.
    pub effective_samples: usize,
    /// Of those, how many met the bound (scaled by the same correction).
    pub effective_within: usize,
    /// The quantile the SLO bounds (0.99 for a p99).
    pub quantile: f64,
    /// Confidence that the SLO holds for the server (0–1).
    pub pass: f64,
    /// Confidence that the SLO is missed (0–1).
    pub fail: f64,
    /// Two-sided order-statistic interval of the percentile at the level
    /// asked, ms; `None` at an end the samples cannot bound (or that lands
    /// on a failed request: no finite bound).
    pub interval_low_ms: Option<f64>,
    pub interval_high_ms: Option<f64>,
}

impl SloConfidence {
    /// The part of this confidence that adds up across steps.
    pub fn evidence(&self) -> Evidence {
        Evidence {
            effective_samples: self.effective_samples,
            effective_within: self.effective_within,
            quantile: self.quantile,
        }
    }
}

pub use crate::result::Decision;

/// `P(Bin(n, q) ≤ k)`, exactly: the probability mass summed in log space (no
/// normal approximation; fine for the sample counts of a step).
pub fn binomial_cdf(n: usize, q: f64, k: i64) -> f64 {
    if k < 0 {
        return 0.0;
    }
    if k as usize >= n || q <= 0.0 {
        return 1.0;
    }
    if q >= 1.0 {
        return 0.0;
    }
    let (ln_q, ln_p) = (q.ln(), (1.0 - q).ln());
    let mut ln_pmf = n as f64 * ln_p;
    let mut ln_sum = ln_pmf;
    for j in 0..k as usize {
        ln_pmf += ((n - j) as f64 / (j + 1) as f64).ln() + ln_q - ln_p;
        ln_sum = ln_add(ln_sum, ln_pmf);
    }
    ln_sum.exp().clamp(0.0, 1.0)
}

fn ln_add(a: f64, b: f64) -> f64 {
    let (hi, lo) = if a > b { (a, b) } else { (b, a) };
    hi + (lo - hi).exp().ln_1p()
}

/// The AR(1) effective-sample fraction `(1 − ρ)/(1 + ρ)` of a 0/1 sequence,
/// in `[MIN_EFFECTIVE_FRACTION, 1]`; 1 when it has no variance or ρ ≤ 0.
pub fn effective_fraction(over: &[bool]) -> f64 {
    let x: Vec<f64> = over.iter().map(|&b| f64::from(u8::from(b))).collect();
    ar1_fraction(&x)
}

/// The AR(1) effective-sample fraction `(1 − ρ)/(1 + ρ)` of any sequence
/// (ρ its lag-1 autocorrelation), in `[MIN_EFFECTIVE_FRACTION, 1]`; 1 when
/// it has no variance, fewer than 3 values, or ρ ≤ 0.
pub fn ar1_fraction(x: &[f64]) -> f64 {
    let n = x.len();
    if n < 3 {
        return 1.0;
    }
    let mean = x.iter().sum::<f64>() / n as f64;
    let var: f64 = x.iter().map(|v| (v - mean).powi(2)).sum();
    // Equal values summed in floating point leave a variance of rounding
    // error, whose "autocorrelation" means nothing.
    if var.is_nan() || var <= 1e-18 * n as f64 * mean * mean || var == 0.0 {
        return 1.0;
    }
    let cov: f64 = x.windows(2).map(|w| (w[0] - mean) * (w[1] - mean)).sum();
    let rho = cov / var;
    if rho.is_nan() || rho <= 0.0 {
        return 1.0;
    }
    ((1.0 - rho) / (1.0 + rho)).clamp(MIN_EFFECTIVE_FRACTION, 1.0)
}

/// Which values are at or above the sample's own `q` quantile (its order
/// statistic at rank ⌈q·n⌉): the top `1 − q` of the window, whose clustering
/// stands in for that of the exceedances of the bound when the window has
/// none (or too few to show it).
fn over_own(values: &[f64], sorted: &[f64], q: f64) -> Vec<bool> {
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    let cut = sorted[rank - 1];
    values.iter().map(|&v| v >= cut).collect()
}

/// The design effect of bursts: `Σ S² / Σ S`, where `S` counts the
/// `marked` samples inside each *excursion*, a maximal run of samples (in
/// due order) above `typical` (the window's median). A queue burst lifts
/// every request in it above the typical latency, so the marked samples of
/// one excursion rise and fall together. If bursts come at random and their
/// sizes are independent (a compound Poisson count), the count of marked
/// samples has `Σ S² / Σ S` times the variance of independent ones, so the
/// evidence is worth that many times fewer samples. At least 1 (no marked
/// sample, or none sharing an excursion).
pub fn burst_factor(values: &[f64], marked: &[bool], typical: f64) -> f64 {
    let (mut sum, mut sum_sq, mut current) = (0.0_f64, 0.0_f64, 0.0_f64);
    for (&v, &m) in values.iter().zip(marked) {
        if v <= typical {
            sum_sq += current * current;
            current = 0.0;
        } else if m {
            current += 1.0;
            sum += 1.0;
        }
    }
    sum_sq += current * current;
    if sum > 0.0 {
        (sum_sq / sum).max(1.0)
    } else {
        1.0
    }
}

/// How sure `slo`'s verdict is over `records` (successful ones give their
/// samples, failed ones a sample over the bound), which must be in due
/// order; `level` sets the interval's coverage. `None` for means, or
/// without samples.
pub fn slo_confidence(slo: &Slo, records: &[RequestRecord], level: f64) -> Option<SloConfidence> {
    let q = slo.quantile()?;
    let values = sample_sequence(slo, records);
    if values.is_empty() {
        return None;
    }
    let bound = slo.threshold_ms / 1000.0;
    let over: Vec<bool> = values.iter().map(|&v| !slo.op.holds(v, bound)).collect();
    let mut sorted = values.clone();
    sorted.sort_by(f64::total_cmp);
    let top = over_own(&values, &sorted, q);
    let median = stats::median(&sorted);
    let burst = burst_factor(&values, &over, median).max(burst_factor(&values, &top, median));
    let mut fraction = effective_fraction(&over)
        .min(effective_fraction(&top))
        .min(1.0 / burst);
    if slo.metric == SloMetric::Itl {
        // Each request that gave samples: its gaps, or its one failure.
        let requests = records
            .iter()
            .filter(|r| !r.is_ok() || !r.itl.is_empty())
            .count()
            .max(1);
        fraction = fraction.min(requests as f64 / values.len() as f64);
    }
    let n = values.len();
    let n_eff = ((n as f64 * fraction).round() as usize).max(1);
    let within = over.iter().filter(|o| !**o).count();
    let w_eff = ((within as f64 * fraction).round() as usize).min(n_eff);
    let (low, high) = order_interval(&sorted, q, level, n_eff);
    Some(SloConfidence {
        samples: n,
        effective_samples: n_eff,
        effective_within: w_eff,
        quantile: q,
        pass: binomial_cdf(n_eff, q, w_eff as i64 - 1),
        fail: 1.0 - binomial_cdf(n_eff, q, w_eff as i64),
        interval_low_ms: low,
        interval_high_ms: high,
    })
}

/// The two-sided distribution-free interval of the `q` quantile at coverage
/// `level`: order statistics `x(l) ≤ ξ ≤ x(u)` with `P(l ≤ B < u) ≥ level`,
/// `B ~ Bin(n_eff, q)`, positions scaled back to the ranks of `sorted` (the
/// window's values, ascending).
fn order_interval(sorted: &[f64], q: f64, level: f64, n_eff: usize) -> (Option<f64>, Option<f64>) {
    let alpha = (1.0 - level.clamp(0.0, 1.0)) / 2.0;
    let scale = sorted.len() as f64 / n_eff as f64;
    // An end on a failed request (+∞) is not bounded either.
    let rank = |j: usize| -> Option<f64> {
        let i = ((j as f64 * scale).round() as usize).clamp(1, sorted.len());
        (j >= 1 && j <= n_eff)
            .then(|| sorted[i - 1] * 1000.0)
            .filter(|v| v.is_finite())
    };
    // Lower: the largest l with P(B ≤ l − 1) ≤ α; upper: the smallest u with
    // P(B ≤ u − 1) ≥ 1 − α. One pass over the cumulative distribution.
    let cdf = cumulative(n_eff, q);
    let low = (1..=n_eff).take_while(|&l| cdf[l - 1] <= alpha).last();
    let high = (1..=n_eff).find(|&u| cdf[u - 1] >= 1.0 - alpha);
    (low.and_then(rank), high.and_then(rank))
}

/// `P(Bin(n, q) ≤ k)` for every `k` in `0..n`, in one pass (log space).
fn cumulative(n: usize, q: f64) -> Vec<f64> {
    if q <= 0.0 || q >= 1.0 {
        return (0..n).map(|k| binomial_cdf(n, q, k as i64)).collect();
    }
    let (ln_q, ln_p) = (q.ln(), (1.0 - q).ln());
    let mut ln_pmf = n as f64 * ln_p;
    let mut ln_sum = ln_pmf;
    let mut out = Vec::with_capacity(n);
    for j in 0..n {
        out.push(ln_sum.exp().clamp(0.0, 1.0));
        ln_pmf += ((n - j) as f64 / (j + 1) as f64).ln() + ln_q - ln_p;
        ln_sum = ln_add(ln_sum, ln_pmf);
    }
    out
}

/// The verdict the confidences support at `level`, and how sure it is: a
/// fail as soon as one SLO is missed with confidence `level`; a pass once
/// every SLO with an interval holds with it. Means (`None`) do not block a
/// pass. The confidence returned is that of the leading verdict.
pub fn decide(confidences: &[Option<SloConfidence>], level: f64) -> (Decision, f64) {
    let known: Vec<&SloConfidence> = confidences.iter().flatten().collect();
    let fail = known.iter().map(|c| c.fail).fold(0.0, f64::max);
    if fail >= level {
        return (Decision::Fail, fail);
    }
    let pass = known.iter().map(|c| c.pass).fold(1.0, f64::min);
    if !known.is_empty() && pass >= level {
        return (Decision::Pass, pass);
    }
    (Decision::Undecided, pass.max(fail))
}

/// One SLO's evidence from one step, in a form that adds up across steps:
/// effective samples, how many of them met the bound, and the quantile.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Evidence {
    pub effective_samples: usize,
    pub effective_within: usize,
    pub quantile: f64,
}

/// Confidence that every SLO holds at the lowest of several steps' loads,
/// from their evidence pooled (`steps[i][j]`: step `i`'s evidence for SLO
/// `j`, `None` for means). Sound when the share of requests over a bound
/// does not fall as the load rises: then the pooled share is at least the
/// lowest load's, so a pooled pass is a pass there. The least sure SLO
/// sets it; `None` when no SLO has evidence.
pub fn pooled_pass(steps: &[&[Option<Evidence>]]) -> Option<f64> {
    let slos = steps.iter().map(|e| e.len()).max().unwrap_or(0);
    (0..slos)
        .filter_map(|j| {
            let each: Vec<Evidence> = steps
                .iter()
                .filter_map(|e| e.get(j).copied().flatten())
                .collect();
            let q = each.first()?.quantile;
            let n: usize = each.iter().map(|e| e.effective_samples).sum();
            let w: usize = each.iter().map(|e| e.effective_within).sum();
            Some(binomial_cdf(n, q, w as i64 - 1))
        })
        .reduce(f64::min)
}

/// One test's confidence `c` as a share of `tests` tests' (union bound):
/// `1 − tests·(1 − c)`, at least 0.
pub fn union_bound(c: f64, tests: usize) -> f64 {
    (1.0 - tests.max(1) as f64 * (1.0 - c)).clamp(0.0, 1.0)
}

#[cfg(test)]
#[path = "confidence_tests.rs"]
mod tests;

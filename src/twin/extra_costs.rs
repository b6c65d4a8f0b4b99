//! The decode step's costs beyond its batch, from decode levels that vary
//! them: the context the decoders attend over (levels of long prompts).
//! The cost of each request admitted is in the engine model but not yet
//! probed ([`fit`] says why). Pure.
//!
//! A level's plain decode step `y` (its token gap less the prompts' share,
//! [`super::decode`]) is modelled as `y = base + d × D + c × (D × ctx)`, with
//! `D` the decoding batch and `ctx` the mean context of the window's gaps.
//! Least squares over the levels' median gaps (a long-context level's gaps
//! with no prompt waiting beside them) gives `c` (per context token)
//! with its standard error from the residuals; `base` and `d` then come from
//! the line through the levels' mean gaps less `c × D × ctx`.
//!
//! When no level's context is [`CONTEXT_SPREAD`] times another's, `c` is not
//! probed and stays 0, said so; a fitted value below 0 is held at 0 with
//! its uncertainty (a cost cannot be negative); one the probes cannot tell
//! from 0 (σ ≥ its value) is marked not identifiable, its range from 0 up.
//! Measured on vLLM 0.32 on a 2-core CPU (docs/benchmarks/2026-12-06.md):
//! 16 streams decoding took 82, 128 and 160 ms a step for 8-, 512- and
//! 1024-token prompts.

use super::profile::Estimate;

/// Least ratio of the levels' largest mean context to their smallest for
/// the context cost to be fitted.
pub const CONTEXT_SPREAD: f64 = 3.0;

/// One level as the fit sees it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    /// Decoding batch `D`.
    pub batch: f64,
    /// Mean context of its gaps, tokens.
    pub context: f64,
    /// The plain decode step `y`, seconds.
    pub step_s: f64,
}

/// The context's cost, seconds per context token of a decoder in a step,
/// and both costs as the profile reports them (µs; ms).
#[derive(Debug, Clone, PartialEq)]
pub struct ExtraCosts {
    pub context_s: f64,
    pub context_token_us: Estimate,
    pub request_ms: Estimate,
}

impl ExtraCosts {
    /// What the term adds to point `p`'s step, seconds.
    pub fn at(&self, p: &Point) -> f64 {
        self.context_s * p.batch * p.context
    }
}

/// Fits the context's cost on `medians` (each level's step from its median
/// gap, which a stall of a second does not move) when the levels vary the
/// context; `levels` describes them for `how`. The cost of a request is not
/// probed yet: a level of short outputs at 8 streams, fitted the same way,
/// gave 2.4 ms for a true 20 ms in fake time (its admissions fall mostly in
/// steps where nothing else decodes, so they do not lengthen the gaps it
/// measures), so it stays 0 and says so.
pub fn fit(medians: &[Point], levels: &str) -> ExtraCosts {
    let ctx = |f: fn(f64, f64) -> f64, init: f64| medians.iter().map(|p| p.context).fold(init, f);
    let (lo, hi) = (ctx(f64::min, f64::INFINITY), ctx(f64::max, 0.0));
    let varies_context = lo > 0.0 && hi / lo >= CONTEXT_SPREAD;
    let context = varies_context
        .then(|| {
            let x: Vec<Vec<f64>> = medians
                .iter()
                .map(|p| vec![1.0, p.batch, p.batch * p.context])
                .collect();
            let y: Vec<f64> = medians.iter().map(|p| p.step_s).collect();
            least_squares(&x, &y)
        })
        .flatten()
        .map(|(b, se)| (b[2], se[2]));
    let context_token_us = estimate(
        context.map(|(b, se)| (b * 1e6, se * 1e6)),
        varies_context,
        &format!(
            "decode levels with prompts of {lo:.0}..{hi:.0} context tokens, median gaps, a long level's gaps with no prompt waiting ({levels})"
        ),
        "no decode level had a context more than 3x another's",
    );
    ExtraCosts {
        context_s: context_token_us.value * 1e-6,
        context_token_us,
        request_ms: Estimate::assumed(
            0.0,
            0.0,
            Some(0.0),
            "not probed (the probes do not yet separate it from the decode step): 0 assumed",
        ),
    }
}

/// A cost's estimate: fitted (held at 0 when below it; not identifiable
/// when its σ is not below its value), or not probed.
fn estimate(fitted: Option<(f64, f64)>, probed: bool, what: &str, unprobed: &str) -> Estimate {
    let how = format!("the coefficient of a least-squares plane of the decode step over {what}");
    let Some((value, se)) = fitted.filter(|(b, se)| b.is_finite() && se.is_finite()) else {
        let why = match probed {
            true => "the levels did not determine it (a singular fit)".to_string(),
            false => unprobed.to_string(),
        };
        return Estimate::assumed(0.0, 0.0, Some(0.0), format!("not probed: {why}; 0 assumed"));
    };
    Estimate::fitted_cost(value, se, how)
}

/// Ordinary least squares of `y` on the rows of `x` (each row the same
/// `k` regressors): the coefficients and their standard errors. `None`
/// with no more rows than regressors or a singular design. The columns are
/// scaled to unit size first, so regressors of very different magnitude
/// (1, a batch, tokens) solve as well as alike ones.
pub fn least_squares(x: &[Vec<f64>], y: &[f64]) -> Option<(Vec<f64>, Vec<f64>)> {
    let (n, k) = (x.len(), x.first()?.len());
    if n <= k || y.len() != n {
        return None;
    }
    let scale: Vec<f64> = (0..k)
        .map(|j| (x.iter().map(|r| r[j] * r[j]).sum::<f64>() / n as f64).sqrt())
        .collect();
    if scale.iter().any(|s| !s.is_normal()) {
        return None;
    }
    let z = |r: &[f64], j: usize| r[j] / scale[j];
    let mut a = vec![vec![0.0; k]; k];
    let mut b = vec![0.0; k];
    for (r, yi) in x.iter().zip(y) {
        for (i, (row, bi)) in a.iter_mut().zip(b.iter_mut()).enumerate() {
            *bi += z(r, i) * yi;
            for (j, aij) in row.iter_mut().enumerate() {
                *aij += z(r, i) * z(r, j);
            }
        }
    }
    let inv = invert(a)?;
    let beta: Vec<f64> = (0..k)
        .map(|i| (0..k).map(|j| inv[i][j] * b[j]).sum())
        .collect();
    let rss: f64 = x
        .iter()
        .zip(y)
        .map(|(r, yi)| yi - (0..k).map(|j| beta[j] * z(r, j)).sum::<f64>())
        .map(|e| e * e)
        .sum();
    let s2 = rss / (n - k) as f64;
    let coef = (0..k).map(|j| beta[j] / scale[j]).collect();
    let se = (0..k)
        .map(|j| (s2 * inv[j][j]).max(0.0).sqrt() / scale[j])
        .collect();
    Some((coef, se))
}

/// The inverse of a symmetric positive matrix by Gauss-Jordan elimination
/// with partial pivoting; `None` when a pivot vanishes (singular).
fn invert(mut a: Vec<Vec<f64>>) -> Option<Vec<Vec<f64>>> {
    let k = a.len();
    let mut inv: Vec<Vec<f64>> = (0..k)
        .map(|i| (0..k).map(|j| f64::from(u8::from(i == j))).collect())
        .collect();
    for c in 0..k {
        let p = (c..k).max_by(|&i, &j| a[i][c].abs().total_cmp(&a[j][c].abs()))?;
        if a[p][c].abs().partial_cmp(&1e-10) != Some(std::cmp::Ordering::Greater) {
            return None;
        }
        a.swap(c, p);
        inv.swap(c, p);
        let d = a[c][c];
        for j in 0..k {
            a[c][j] /= d;
            inv[c][j] /= d;
        }
        for i in (0..k).filter(|&i| i != c) {
            let f = a[i][c];
            for j in 0..k {
                a[i][j] -= f * a[c][j];
                inv[i][j] -= f * inv[c][j];
            }
        }
    }
    Some(inv)
}

#[cfg(test)]
#[path = "extra_costs_tests.rs"]
mod tests;

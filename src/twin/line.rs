//! Straight-line least squares with the standard errors of its two
//! coefficients and a lack-of-fit check: the one fit every twin parameter
//! that is a cost per unit comes from. Pure.
//!
//! `y = a + b·x` by ordinary least squares. The residual variance is
//! `s² = RSS / (n − 2)`, so the standard errors `se(b) = s / √Sxx` and
//! `se(a) = s·√(1/n + x̄²/Sxx)` grow with any scatter, noise or curvature.
//!
//! **Lack of fit.** When some `x` values repeat (or lie within [`X_MERGE`]
//! of the span of each other: one x measured twice), the residuals split into
//! *pure error* (the spread of repeats about their own mean) and *lack of
//! fit* (the spread of those means about the line). The line is called
//! *not linear* when lack of fit is both significant (its mean square at
//! least [`LACK_OF_FIT_F`] times the pure error's) and material (a group
//! mean sits more than [`MATERIAL`] of its value, and more than the `floor`
//! the caller passes, off the line). A non-linear fit's slope is widened to
//! cover every local slope between neighbouring groups (each within 2σ),
//! and its intercept to cover the largest group residual: a tight interval
//! is never reported for a bad fit.

use crate::metrics::stats::mean;

/// Lack of fit this many times the pure error is significant (about the
/// 1% point of F for the group counts the probes use).
pub const LACK_OF_FIT_F: f64 = 10.0;
/// A group mean this far off the line (relative) is a material departure.
pub const MATERIAL: f64 = 0.03;

/// A fitted line.
#[derive(Debug, Clone, PartialEq)]
pub struct Line {
    pub intercept: f64,
    pub slope: f64,
    /// Standard errors, widened when not linear.
    pub se_intercept: f64,
    pub se_slope: f64,
    /// Points fitted.
    pub n: usize,
    /// Root mean square residual.
    pub rms: f64,
    /// Why the line does not describe the data, when it does not.
    pub not_linear: Option<String>,
}

impl Line {
    /// `a + b·x`.
    pub fn at(&self, x: f64) -> f64 {
        self.intercept + self.slope * x
    }
}

/// Fits `points` (x, y). `None` with fewer than 3 points or fewer than 2
/// distinct `x` (x closer than [`X_MERGE`] of their span count as one).
/// `floor` is the smallest departure (in y's unit) that counts
/// as material, whatever its relative size (the measurement's resolution).
pub fn fit(points: &[(f64, f64)], floor: f64) -> Option<Line> {
    let n = points.len();
    let xs: Vec<f64> = points.iter().map(|p| p.0).collect();
    let ys: Vec<f64> = points.iter().map(|p| p.1).collect();
    let (mx, my) = (mean(&xs), mean(&ys));
    let sxx: f64 = xs.iter().map(|x| (x - mx) * (x - mx)).sum();
    if n < 3 || sxx <= 0.0 || groups(points).len() < 2 {
        return None;
    }
    let sxy: f64 = points.iter().map(|(x, y)| (x - mx) * (y - my)).sum();
    let slope = sxy / sxx;
    let intercept = my - slope * mx;
    let rss: f64 = points
        .iter()
        .map(|(x, y)| (y - intercept - slope * x).powi(2))
        .sum();
    let s = (rss / (n - 2) as f64).sqrt();
    let mut line = Line {
        intercept,
        slope,
        se_slope: s / sxx.sqrt(),
        se_intercept: s * (1.0 / n as f64 + mx * mx / sxx).sqrt(),
        n,
        rms: (rss / n as f64).sqrt(),
        not_linear: None,
    };
    check_linear(&mut line, points, floor);
    Some(line)
}

/// Fits `y = b·x` (no intercept) by least squares, for when a physical
/// intercept of at least zero is known and the free line's fell below it.
/// `s² = RSS / (n − 1)`, `se(b) = s / √Σx²`; no lack-of-fit check (the
/// caller knows the free line missed). `None` with fewer than 2 points or
/// all `x` zero.
pub fn through_origin(points: &[(f64, f64)]) -> Option<Line> {
    let n = points.len();
    let sxx: f64 = points.iter().map(|(x, _)| x * x).sum();
    if n < 2 || sxx <= 0.0 {
        return None;
    }
    let slope = points.iter().map(|(x, y)| x * y).sum::<f64>() / sxx;
    let rss: f64 = points.iter().map(|(x, y)| (y - slope * x).powi(2)).sum();
    Some(Line {
        intercept: 0.0,
        slope,
        se_intercept: 0.0,
        se_slope: (rss / (n - 1) as f64).sqrt() / sxx.sqrt(),
        n,
        rms: (rss / n as f64).sqrt(),
        not_linear: None,
    })
}

/// Points whose x lie within [`X_MERGE`] of the x span (or a billionth of
/// their size) of a group's first x: one x, measured twice. A decode level
/// repeated at the batch limit (256 streams offered, 128 ran, as at 128
/// offered) gives two batches a rounding error apart; as two groups their
/// gap would divide a noise difference into an absurd local slope.
pub const X_MERGE: f64 = 0.005;

/// A group of points at one x.
struct Group {
    /// Mean x and mean y of its points.
    x: f64,
    y: f64,
    /// Points in it.
    k: usize,
    /// Sum of squares of its ys about their mean (pure error).
    ss: f64,
}

/// How far apart two x may be and still count as one: [`X_MERGE`] of the
/// span, or a billionth of the largest |x|.
fn x_tolerance(points: &[(f64, f64)]) -> f64 {
    let (lo, hi) = points
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), p| {
            (lo.min(p.0), hi.max(p.0))
        });
    (X_MERGE * (hi - lo)).max(1e-9 * lo.abs().max(hi.abs()))
}

/// The points grouped by x (see [`X_MERGE`]), ascending.
fn groups(points: &[(f64, f64)]) -> Vec<Group> {
    let tol = x_tolerance(points);
    let mut sorted = points.to_vec();
    sorted.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut members: Vec<Vec<(f64, f64)>> = Vec::new();
    for p in sorted {
        match members.last_mut() {
            Some(g) if p.0 - g[0].0 <= tol => g.push(p),
            _ => members.push(vec![p]),
        }
    }
    members
        .into_iter()
        .map(|g| {
            let xs: Vec<f64> = g.iter().map(|p| p.0).collect();
            let ys: Vec<f64> = g.iter().map(|p| p.1).collect();
            let y = mean(&ys);
            Group {
                x: mean(&xs),
                y,
                k: g.len(),
                ss: ys.iter().map(|v| (v - y).powi(2)).sum(),
            }
        })
        .collect()
}

/// The lack-of-fit test; widens `line` and says why when it fails.
fn check_linear(line: &mut Line, points: &[(f64, f64)], floor: f64) {
    let g = groups(points);
    let pure: f64 = g.iter().map(|gr| gr.ss).sum();
    let lof: f64 = g
        .iter()
        .map(|gr| gr.k as f64 * (gr.y - line.at(gr.x)).powi(2))
        .sum();
    let (df_pure, df_lof) = (points.len() - g.len(), g.len().saturating_sub(2));
    if df_lof == 0 {
        return;
    }
    // Without repeats there is no pure error: only materiality decides.
    let significant = df_pure == 0 || lof / df_lof as f64 > LACK_OF_FIT_F * (pure / df_pure as f64);
    let worst = g
        .iter()
        .map(|gr| (gr.y - line.at(gr.x), gr.y.abs()))
        .max_by(|a, b| a.0.abs().total_cmp(&b.0.abs()))
        .unwrap_or((0.0, 0.0));
    let material = worst.0.abs() > floor.max(MATERIAL * worst.1);
    if !(significant && material) {
        return;
    }
    // Neighbouring groups are more than the x tolerance apart: no zero gap.
    let local: Vec<f64> = g
        .windows(2)
        .map(|w| (w[1].y - w[0].y) / (w[1].x - w[0].x))
        .collect();
    let lo = local.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = local.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let reach = (line.slope - lo).abs().max((hi - line.slope).abs());
    line.se_slope = line.se_slope.max(reach / 2.0);
    line.se_intercept = line.se_intercept.max(worst.0.abs());
    line.not_linear = Some(format!(
        "not linear: a group mean is {:.3} off the line ({:.0}% of it), and the slope between neighbouring points runs from {lo:.4} to {hi:.4}",
        worst.0,
        100.0 * worst.0.abs() / worst.1.max(f64::MIN_POSITIVE)
    ));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_points_give_the_line_and_zero_errors() {
        let pts: Vec<(f64, f64)> = [16.0, 512.0, 1024.0, 2048.0]
            .iter()
            .flat_map(|&x| [(x, 5.0 + 0.02 * x), (x, 5.0 + 0.02 * x)])
            .collect();
        let l = fit(&pts, 0.0).unwrap();
        assert!((l.slope - 0.02).abs() < 1e-12 && (l.intercept - 5.0).abs() < 1e-9);
        assert!(l.se_slope < 1e-9 && l.se_intercept < 1e-6);
        assert_eq!(l.not_linear, None);
        assert_eq!(l.n, 8);
    }

    #[test]
    fn standard_errors_are_the_textbook_ones() {
        // x = 0,1,2,3,4, residuals +1,−1,0,−1,+1 about y = 2 + 3x:
        // RSS = 4, s² = 4/3, Sxx = 10, se(b) = √(4/30), se(a) = √(4/3·(1/5 + 4/10)).
        let r = [1.0, -1.0, 0.0, -1.0, 1.0];
        let pts: Vec<(f64, f64)> = (0..5)
            .map(|i| (f64::from(i), 2.0 + 3.0 * f64::from(i) + r[i as usize]))
            .collect();
        let l = fit(&pts, 100.0).unwrap();
        assert!((l.slope - 3.0).abs() < 1e-12, "{}", l.slope);
        assert!((l.se_slope - (4.0f64 / 30.0).sqrt()).abs() < 1e-12);
        assert!((l.se_intercept - (4.0f64 / 3.0 * 0.6).sqrt()).abs() < 1e-12);
    }

    #[test]
    fn a_curve_is_flagged_and_its_slope_interval_covers_every_local_slope() {
        // TTFT growing with n²: y = 2 + x², local slopes 3, 5, 7.
        let pts: Vec<(f64, f64)> = [1.0, 2.0, 3.0, 4.0]
            .iter()
            .flat_map(|&x| [(x, 2.0 + x * x + 0.001), (x, 2.0 + x * x - 0.001)])
            .collect();
        let l = fit(&pts, 0.0).unwrap();
        assert!(l.not_linear.as_deref().unwrap().starts_with("not linear"));
        assert!((l.slope - 5.0).abs() < 1e-9);
        assert!(l.slope - 2.0 * l.se_slope <= 3.0 + 1e-9);
        assert!(l.slope + 2.0 * l.se_slope >= 7.0 - 1e-9);
        // Its intercept's interval covers the worst group residual (1.0).
        assert!(l.se_intercept >= 1.0 - 1e-9, "{l:?}");
    }

    #[test]
    fn noise_alone_is_not_a_misfit() {
        // A line with ±2% alternating noise on repeats: pure error explains it.
        let pts: Vec<(f64, f64)> = [100.0, 200.0, 300.0, 400.0]
            .iter()
            .flat_map(|&x| {
                let y = 1.0 + 0.01 * x;
                [(x, y * 1.02), (x, y * 0.98), (x, y * 1.01), (x, y * 0.99)]
            })
            .collect();
        let l = fit(&pts, 0.0).unwrap();
        assert_eq!(l.not_linear, None, "{l:?}");
        assert!((l.slope - 0.01).abs() < 3.0 * l.se_slope);
        assert!(l.se_slope > 0.0);
    }

    #[test]
    fn a_line_through_the_origin_has_the_least_squares_slope() {
        // y = 2x with residuals +1, −1, +1 at x = 1, 2, 2: b = Σxy/Σx² = 19/9.
        let l = through_origin(&[(1.0, 3.0), (2.0, 3.0), (2.0, 5.0)]).unwrap();
        assert!((l.slope - 19.0 / 9.0).abs() < 1e-12, "{l:?}");
        assert_eq!((l.intercept, l.se_intercept), (0.0, 0.0));
        let rss: f64 = [(1.0, 3.0), (2.0, 3.0), (2.0, 5.0)]
            .iter()
            .map(|(x, y)| (y - l.slope * x).powi(2))
            .sum();
        assert!((l.se_slope - (rss / 2.0 / 9.0).sqrt()).abs() < 1e-12);
        assert_eq!(through_origin(&[(1.0, 1.0)]), None);
        assert_eq!(through_origin(&[(0.0, 1.0), (0.0, 2.0)]), None);
    }

    /// The decode levels of issue 38 (vLLM 0.32 on CPU): batches 1 … 128,
    /// then 128 again (256 streams offered, 128 ran), the two top batches a
    /// rounding error apart; the step flat at small batches (the weights'
    /// read) and compute-bound at large ones, so the line misfits.
    fn vllm_decode_levels() -> Vec<(f64, f64)> {
        let step = |d: f64| 0.030f64.max(0.0015 * d);
        let mut pts: Vec<(f64, f64)> = [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0]
            .iter()
            .map(|&d| (d, step(d)))
            .collect();
        pts.push((128.0 * (1.0 + 4.0 * f64::EPSILON), step(128.0) + 0.004));
        pts
    }

    #[test]
    fn a_repeated_top_batch_is_one_batch_not_a_zero_gap() {
        let l = fit(&vllm_decode_levels(), 1e-4).unwrap();
        assert!(l.not_linear.is_some(), "{l:?}");
        // Every local slope is between 0 and 1.5 ms per sequence: no
        // division by the top batches' rounding-error gap.
        assert!(l.se_slope.is_finite() && l.se_slope < 1e-3, "{l:?}");
        assert!(l.se_slope < l.slope, "{l:?}");
        let why = l.not_linear.unwrap();
        assert!(why.contains("from 0.0000 to 0.0015"), "{why}");
    }

    #[test]
    fn xs_a_rounding_error_apart_are_one_x() {
        let pts = [(128.0, 1.0), (128.0 + 1e-12, 2.0), (128.0 - 1e-12, 3.0)];
        assert_eq!(fit(&pts, 0.0), None);
        // Near x are repeats: their spread is pure error, not lack of fit.
        let near: Vec<(f64, f64)> = [0.0, 100.0, 200.0, 300.0]
            .iter()
            .flat_map(|&x| [(x, 1.0 + x), (x + 0.1, 1.0 + x + 2.0)])
            .collect();
        let l = fit(&near, 0.0).unwrap();
        assert_eq!(l.not_linear, None, "{l:?}");
    }

    #[test]
    fn too_few_or_degenerate_points_give_none() {
        assert_eq!(fit(&[(1.0, 1.0), (2.0, 2.0)], 0.0), None);
        assert_eq!(fit(&[(1.0, 1.0), (1.0, 2.0), (1.0, 3.0)], 0.0), None);
    }
}

//! The statistics behind "is the change bigger than noise?". PURE: numbers
//! and a seed in, intervals out; no clock, no I/O.
//!
//! - [`bootstrap_diff`]: seeded percentile-bootstrap 95% CI of the difference
//!   (B − A) of a percentile of two samples (NumPy-linear percentiles),
//!   resampling requests: a request's ITLs stay together ([`Sample`]).
//! - [`poisson_rate_diff`]: normal-approximation 95% CI of the difference of
//!   two rates, treating completions as Poisson counts over the duration.
//! - [`KneeInterval`]: the knee as the half-open bracket [last pass, first fail).

use crate::metrics::stats::percentile;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;

/// Bootstrap resamples per interval.
pub const RESAMPLES: usize = 1000;
/// Fixed seed: the same two files always give the same interval.
pub const SEED: u64 = 0x006b_6e65_6563_6170;
/// Two-sided 95%: the normal quantile used by the Poisson interval.
const Z95: f64 = 1.959_964;

/// A 95% confidence interval of a difference (B − A).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct DiffInterval {
    pub low: f64,
    pub high: f64,
}

impl DiffInterval {
    /// The interval excludes 0: the change is bigger than the noise.
    pub fn significant(&self) -> bool {
        self.low > 0.0 || self.high < 0.0
    }
}

/// A sample for the bootstrap: values, ascending, each tagged with the
/// request it came from. The bootstrap resamples requests, so the ITLs of one
/// request (which move together) count as one draw, not as independent ones.
#[derive(Debug, Clone, Default)]
pub struct Sample {
    values: Vec<f64>,
    group: Vec<usize>,
    n_groups: usize,
}

impl Sample {
    /// One value per request (TTFT, E2EL).
    pub fn independent(values: &[f64]) -> Self {
        Self::build(
            values.iter().enumerate().map(|(i, &v)| (v, i)),
            values.len(),
        )
    }

    /// Several values per request (ITLs); requests without values are skipped.
    pub fn grouped(groups: &[Vec<f64>]) -> Self {
        let non_empty: Vec<&Vec<f64>> = groups.iter().filter(|g| !g.is_empty()).collect();
        let tagged = non_empty
            .iter()
            .enumerate()
            .flat_map(|(g, vs)| vs.iter().map(move |&v| (v, g)));
        Self::build(tagged, non_empty.len())
    }

    fn build(tagged: impl Iterator<Item = (f64, usize)>, n_groups: usize) -> Self {
        let mut pairs: Vec<(f64, usize)> = tagged.collect();
        pairs.sort_by(|a, b| a.0.total_cmp(&b.0));
        let (values, group) = pairs.into_iter().unzip();
        Sample {
            values,
            group,
            n_groups,
        }
    }

    /// Percentile `p` of a resample given as draws per request, without
    /// sorting it: walk the values, each weighted by its request's draws, to
    /// the two order statistics NumPy's linear method interpolates between.
    fn resampled_percentile(&self, draws: &[u32], p: f64) -> f64 {
        let weight = |i: usize| draws[self.group[i]] as usize;
        let total: usize = (0..self.values.len()).map(weight).sum();
        if total == 0 {
            return 0.0;
        }
        let rank = (total - 1) as f64 * (p / 100.0).clamp(0.0, 1.0);
        let below = rank.floor() as usize;
        let above = (below + 1).min(total - 1);
        let kth = |k: usize| {
            let mut seen = 0;
            for (i, v) in self.values.iter().enumerate() {
                seen += weight(i);
                if seen > k {
                    return *v;
                }
            }
            self.values[self.values.len() - 1]
        };
        let (lo, hi) = (kth(below), kth(above));
        let fraction = rank - below as f64;
        // Same interpolation as `percentile` (NumPy's `_lerp`).
        if fraction >= 0.5 {
            hi - (hi - lo) * (1.0 - fraction)
        } else {
            lo + (hi - lo) * fraction
        }
    }
}

/// 95% CI of `percentile(b, p) − percentile(a, p)` by a seeded bootstrap;
/// `None` when either sample has fewer than 2 values.
pub fn bootstrap_diff(
    a: &Sample,
    b: &Sample,
    p: f64,
    resamples: usize,
    seed: u64,
) -> Option<DiffInterval> {
    bootstrap_diffs(a, b, &[p], resamples, seed).and_then(|v| v.first().copied())
}

/// [`bootstrap_diff`] for several percentiles from the same resamples.
pub fn bootstrap_diffs(
    a: &Sample,
    b: &Sample,
    ps: &[f64],
    resamples: usize,
    seed: u64,
) -> Option<Vec<DiffInterval>> {
    let enough = |s: &Sample| s.n_groups >= 2 && s.values.len() >= 2;
    if !enough(a) || !enough(b) || resamples == 0 {
        return None;
    }
    let mut rng = StdRng::seed_from_u64(seed);
    let (mut da, mut db) = (vec![0u32; a.n_groups], vec![0u32; b.n_groups]);
    let mut diffs: Vec<Vec<f64>> = vec![Vec::with_capacity(resamples); ps.len()];
    for _ in 0..resamples {
        draw(&mut db, &mut rng);
        draw(&mut da, &mut rng);
        for (d, &p) in diffs.iter_mut().zip(ps) {
            d.push(b.resampled_percentile(&db, p) - a.resampled_percentile(&da, p));
        }
    }
    Some(
        diffs
            .into_iter()
            .map(|mut d| {
                d.sort_by(f64::total_cmp);
                DiffInterval {
                    low: percentile(&d, 2.5),
                    high: percentile(&d, 97.5),
                }
            })
            .collect(),
    )
}

/// Resample with replacement: `draws[i]` = how often request `i` was drawn.
fn draw(draws: &mut [u32], rng: &mut StdRng) {
    let n = draws.len();
    draws.iter_mut().for_each(|c| *c = 0);
    for _ in 0..n {
        draws[rng.random_range(0..n)] += 1;
    }
}

/// 95% CI of `count_b / secs_b − count_a / secs_a`, completions taken as
/// Poisson counts (variance = count); `None` without a positive duration.
pub fn poisson_rate_diff(
    count_a: f64,
    secs_a: f64,
    count_b: f64,
    secs_b: f64,
) -> Option<DiffInterval> {
    let ok = |c: f64, t: f64| c.is_finite() && c >= 0.0 && t.is_finite() && t > 0.0;
    if !ok(count_a, secs_a) || !ok(count_b, secs_b) {
        return None;
    }
    let diff = count_b / secs_b - count_a / secs_a;
    let se = (count_a / (secs_a * secs_a) + count_b / (secs_b * secs_b)).sqrt();
    Some(DiffInterval {
        low: diff - Z95 * se,
        high: diff + Z95 * se,
    })
}

/// Where the knee can be: at or above the last passing load, below the first
/// failing one. A missing bound is open (0 or infinity).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct KneeInterval {
    pub last_pass: Option<f64>,
    pub first_fail: Option<f64>,
}

impl KneeInterval {
    fn low(&self) -> f64 {
        self.last_pass.unwrap_or(0.0)
    }

    fn high(&self) -> f64 {
        self.first_fail.unwrap_or(f64::INFINITY)
    }

    /// True when both bounds are unknown: nothing to compare.
    pub fn unknown(&self) -> bool {
        self.last_pass.is_none() && self.first_fail.is_none()
    }

    /// The two brackets share a load: the knees may be equal. Brackets that
    /// only touch (A fails at 16, B passes at 16) do not overlap.
    pub fn overlaps(&self, other: &KneeInterval) -> bool {
        self.low() < other.high() && other.low() < self.high()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sorted(v: &[f64]) -> Vec<f64> {
        let mut s = v.to_vec();
        s.sort_by(f64::total_cmp);
        s
    }

    fn ind(v: &[f64]) -> Sample {
        Sample::independent(v)
    }

    /// A deterministic, skewed sample (latency-like) of `n` values around `scale`.
    fn sample(n: usize, scale: f64) -> Vec<f64> {
        (0..n)
            .map(|i| scale * (1.0 + ((i * 7919) % 101) as f64 / 50.0))
            .collect()
    }

    #[test]
    fn identical_samples_are_not_significant() {
        let a = sample(200, 0.1);
        for p in [50.0, 99.0] {
            let ci = bootstrap_diff(&ind(&a), &ind(&a), p, RESAMPLES, SEED).unwrap();
            assert!(!ci.significant(), "p{p}: {ci:?}");
            assert!(ci.low <= 0.0 && ci.high >= 0.0);
        }
    }

    #[test]
    fn a_clear_doubling_is_significant_and_the_interval_holds_the_shift() {
        let a = sample(200, 0.1);
        let b: Vec<f64> = a.iter().map(|x| x * 2.0).collect();
        let ci = bootstrap_diff(&ind(&a), &ind(&b), 50.0, RESAMPLES, SEED).unwrap();
        let true_diff = percentile(&sorted(&b), 50.0) - percentile(&sorted(&a), 50.0);
        assert!(ci.significant() && ci.low > 0.0, "{ci:?}");
        assert!(
            ci.low <= true_diff && true_diff <= ci.high,
            "{ci:?} vs {true_diff}"
        );
        let faster = bootstrap_diff(&ind(&b), &ind(&a), 99.0, RESAMPLES, SEED).unwrap();
        assert!(faster.significant() && faster.high < 0.0, "{faster:?}");
    }

    #[test]
    fn bootstrap_is_reproducible_with_the_seed() {
        let (a, b) = (sample(50, 1.0), sample(60, 1.1));
        let x = bootstrap_diff(&ind(&a), &ind(&b), 99.0, 200, 7);
        assert_eq!(x, bootstrap_diff(&ind(&a), &ind(&b), 99.0, 200, 7));
    }

    #[test]
    fn several_percentiles_share_resamples_and_match_single_runs() {
        let (a, b) = (sample(80, 1.0), sample(90, 1.2));
        let both = bootstrap_diffs(&ind(&a), &ind(&b), &[50.0, 99.0], 300, 3).unwrap();
        assert_eq!(both.len(), 2);
        assert_eq!(
            Some(both[0]),
            bootstrap_diff(&ind(&a), &ind(&b), 50.0, 300, 3)
        );
    }

    #[test]
    fn one_draw_of_each_request_gives_the_numpy_percentile() {
        let v = sample(37, 1.0);
        let s = ind(&v);
        let ones = vec![1u32; 37];
        for p in [0.0, 12.5, 50.0, 99.0, 100.0] {
            assert_eq!(s.resampled_percentile(&ones, p), percentile(&sorted(&v), p));
        }
        let g = Sample::grouped(&[vec![3.0, 1.0], vec![], vec![2.0]]);
        assert_eq!(g.n_groups, 2);
        assert_eq!(g.resampled_percentile(&[1, 1], 50.0), 2.0);
        assert_eq!(g.resampled_percentile(&[0, 3], 50.0), 2.0, "only request 2");
        assert_eq!(g.resampled_percentile(&[2, 0], 0.0), 1.0);
    }

    #[test]
    fn grouped_itls_are_resampled_by_request() {
        // Each request's ITLs move together: 20 fast requests, 20 slow ones.
        let req = |i: usize, scale: f64| vec![scale * (1.0 + (i % 5) as f64 / 10.0); 50];
        let a: Vec<Vec<f64>> = (0..40)
            .map(|i| req(i, if i % 2 == 0 { 1.0 } else { 3.0 }))
            .collect();
        let b: Vec<Vec<f64>> = a
            .iter()
            .map(|r| r.iter().map(|x| x * 1.02).collect())
            .collect();
        let flat = |g: &[Vec<f64>]| ind(&g.concat());
        let by_request =
            bootstrap_diff(&Sample::grouped(&a), &Sample::grouped(&b), 50.0, 500, 1).unwrap();
        let naive = bootstrap_diff(&flat(&a), &flat(&b), 50.0, 500, 1).unwrap();
        assert!(
            by_request.high - by_request.low > naive.high - naive.low,
            "clustered CI {by_request:?} should be wider than the naive {naive:?}"
        );
    }

    #[test]
    fn tiny_samples_give_no_interval() {
        assert!(bootstrap_diff(&ind(&[1.0]), &ind(&[1.0, 2.0]), 50.0, 10, 1).is_none());
    }

    #[test]
    fn poisson_interval_separates_clear_rate_changes_only() {
        let same = poisson_rate_diff(1000.0, 100.0, 1000.0, 100.0).unwrap();
        assert!(!same.significant());
        let doubled = poisson_rate_diff(1000.0, 100.0, 2000.0, 100.0).unwrap();
        assert!(doubled.significant() && doubled.low > 0.0);
        assert!(poisson_rate_diff(10.0, 0.0, 10.0, 1.0).is_none());
    }

    #[test]
    fn knee_brackets_overlap_only_when_they_share_loads() {
        let k = |p: Option<f64>, f: Option<f64>| KneeInterval {
            last_pass: p,
            first_fail: f,
        };
        let a = k(Some(32.0), Some(36.0));
        assert!(a.overlaps(&k(Some(34.0), Some(40.0))));
        assert!(!a.overlaps(&k(Some(16.0), Some(24.0))));
        assert!(!a.overlaps(&k(Some(36.0), Some(40.0))), "touching");
        assert!(a.overlaps(&k(Some(8.0), None)), "open top");
        assert!(!a.overlaps(&k(None, Some(16.0))), "below 16");
    }
}

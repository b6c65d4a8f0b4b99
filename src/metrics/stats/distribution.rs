//! Distribution: the one implementation of mean, median, population std and
//! percentiles (NumPy's defaults), and vLLM's percentile key spelling. PURE:
//! plain numbers in, plain numbers out; empty inputs give 0, never NaN or a panic.
use super::Distribution;

/// Summarise `values_seconds` as a [`Distribution`] in milliseconds.
///
/// Like vLLM, statistics are taken over seconds and then multiplied by 1000;
/// an empty list gives 0 for every statistic (vLLM's `np.mean(xs or 0)`).
/// `percentiles` are kept in the order given.
pub fn distribution(values_seconds: &[f64], percentiles: &[f64]) -> Distribution {
    let mut sorted = values_seconds.to_vec();
    sorted.sort_by(f64::total_cmp);
    let ms = |seconds: f64| seconds * 1000.0;
    Distribution {
        count: sorted.len(),
        mean_ms: ms(mean(&sorted)),
        median_ms: ms(median(&sorted)),
        std_ms: ms(std_population(&sorted)),
        max_ms: ms(sorted.last().copied().unwrap_or(0.0)),
        percentiles_ms: percentiles
            .iter()
            .map(|&p| (p, ms(percentile(&sorted, p))))
            .collect(),
    }
}

/// Arithmetic mean; 0 for an empty slice.
pub fn mean(values: &[f64]) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    values.iter().sum::<f64>() / values.len() as f64
}

/// Population standard deviation (NumPy's default `ddof = 0`, as vLLM reports);
/// 0 for an empty slice.
pub fn std_population(values: &[f64]) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    let m = mean(values);
    let squares: Vec<f64> = values.iter().map(|x| (x - m) * (x - m)).collect();
    mean(&squares).sqrt()
}

/// Median of an ascending slice, as `np.median`: the middle value, or the mean
/// of the two middle values for an even length; 0 for an empty slice.
pub fn median(sorted: &[f64]) -> f64 {
    let n = sorted.len();
    match n {
        0 => 0.0,
        _ if n % 2 == 1 => sorted[n / 2],
        _ => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
    }
}

/// Robust spread of an ascending slice: 1.4826 × the median absolute
/// deviation from its median (σ for normal data, and a few outliers, a
/// host's stalls, do not move it); 0 for an empty slice.
pub fn robust_sigma(sorted: &[f64]) -> f64 {
    let mid = median(sorted);
    let mut dev: Vec<f64> = sorted.iter().map(|v| (v - mid).abs()).collect();
    dev.sort_by(f64::total_cmp);
    1.4826 * median(&dev)
}

/// Standard error of the median of an ascending slice, 1.253 ×
/// [`robust_sigma`] / √n; 0 for an empty slice.
pub fn median_error(sorted: &[f64]) -> f64 {
    match sorted.len() {
        0 => 0.0,
        n => 1.253 * robust_sigma(sorted) / (n as f64).sqrt(),
    }
}

/// Centre of the shortest half of an ascending slice (the "shorth"): the
/// median of the ⌊n/2⌋ + 1 consecutive values that span the least range.
/// When under half the values are pushed one way (a host's stalls lengthen
/// some readings) it stays with the rest, where the median moves toward
/// them; for symmetric data it is near the median. 0 for an empty slice.
pub fn shorth_center(sorted: &[f64]) -> f64 {
    let n = sorted.len();
    if n == 0 {
        return 0.0;
    }
    let h = n / 2 + 1;
    let range = |i: usize| sorted[i + h - 1] - sorted[i];
    let least = (0..=n - h).map(range).fold(f64::INFINITY, f64::min);
    // The middle one of equally short halves (evenly spread data: the median).
    let shortest: Vec<usize> = (0..=n - h)
        .filter(|&i| range(i) <= least + 1e-12 * least.abs())
        .collect();
    let start = shortest[(shortest.len() - 1) / 2];
    median(&sorted[start..start + h])
}

/// Percentile `p` (0–100) of an ascending slice, by NumPy's default method
/// (`method="linear"`): rank = p/100·(n−1), linear interpolation between the
/// two closest ranks. This is the only percentile implementation in kneecap.
///
/// The interpolation is written as NumPy's `_lerp` (from the upper neighbour
/// when the fraction is ≥ 0.5) so results agree to the last bit. `p` outside
/// [0, 100] is clamped, NaN counts as 0, and an empty slice gives 0.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    percentile_by(sorted.len(), p, |k| sorted[k])
}

/// [`percentile`] over `n` ascending values read through `nth` (0-based), for
/// sources that are not a slice (a histogram's buckets). Same rule, same `_lerp`.
pub fn percentile_by(n: usize, p: f64, nth: impl Fn(usize) -> f64) -> f64 {
    if n == 0 {
        return 0.0;
    }
    let q = if p.is_nan() {
        0.0
    } else {
        (p / 100.0).clamp(0.0, 1.0)
    };
    let rank = (n - 1) as f64 * q;
    let below = (rank.floor() as usize).min(n - 1);
    let above = (below + 1).min(n - 1);
    let fraction = rank - below as f64;
    let (a, b) = (nth(below), nth(above));
    let diff = b - a;
    if fraction >= 0.5 {
        b - diff * (1.0 - fraction)
    } else {
        a + diff * fraction
    }
}

/// vLLM's JSON key for percentile `p`: `p99`, `p50`, `p99.9`, `p99.99` — the
/// integer when `p` is whole, otherwise Python's shortest `str(float)`.
pub fn percentile_key(p: f64) -> String {
    format!("p{}", python_float_str(p))
}

/// `str(int(p)) if int(p) == p else str(p)` in Python.
fn python_float_str(p: f64) -> String {
    if p.is_finite() && p.fract() == 0.0 {
        // Rust prints whole floats without a fraction, like `str(int(p))`;
        // `+ 0.0` turns −0 into 0, as `int(-0.0)` does.
        return format!("{}", p + 0.0);
    }
    // Python switches to exponent notation below 1e-4, with at least two
    // exponent digits (`1e-05`); Rust's `{}` never does. (Non-whole floats are
    // all below 2^53, so Python's large-number switch at 1e16 cannot apply.)
    if p.is_finite() && p.abs() < 1e-4 {
        return python_exponent_str(p);
    }
    format!("{p}")
}

/// `1e-05`, `2.5e-07`: Rust's shortest `{:e}` with Python's exponent padding.
fn python_exponent_str(p: f64) -> String {
    let rust = format!("{p:e}");
    match rust.split_once('e') {
        Some((mantissa, exponent)) => {
            let (sign, digits) = match exponent.strip_prefix('-') {
                Some(digits) => ('-', digits),
                None => ('+', exponent),
            };
            format!("{mantissa}e{sign}{digits:0>2}")
        }
        None => rust,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Unsorted on purpose; `distribution` must sort.
    const ODD: [f64; 7] = [0.1, 0.25, 0.031, 1.7, 0.42, 0.09, 0.333];
    const EVEN: [f64; 8] = [3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0];

    fn sorted(values: &[f64]) -> Vec<f64> {
        let mut v = values.to_vec();
        v.sort_by(f64::total_cmp);
        v
    }

    fn assert_close(got: f64, want: f64) {
        assert!(
            (got - want).abs() <= 1e-12 * want.abs().max(1.0),
            "got {got}, want {want}"
        );
    }

    #[test]
    fn the_shorth_stays_with_the_majority_where_the_median_moves() {
        // Nine readings 0.8..1.2 and seven pushed up past 1.6 (stalls).
        let mut v: Vec<f64> = (0..9).map(|i| 0.8 + 0.05 * f64::from(i)).collect();
        v.extend((0..7).map(|i| 1.6 + 0.05 * f64::from(i)));
        v.sort_by(f64::total_cmp);
        assert!(
            (shorth_center(&v) - 1.0).abs() < 1e-9,
            "{}",
            shorth_center(&v)
        );
        assert!((median(&v) - 1.175).abs() < 1e-9);
        // Symmetric: the median's neighbourhood.
        let sym = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0];
        assert!((shorth_center(&sym) - median(&sym)).abs() <= 0.5);
        assert_eq!((shorth_center(&[]), shorth_center(&[2.0])), (0.0, 2.0));
    }

    #[test]
    fn the_robust_sigma_ignores_an_outlier_and_the_median_error_shrinks_with_n() {
        // Deviations from 3: 2, 1, 0, 1, 97: MAD 1.
        let v = [1.0, 2.0, 3.0, 4.0, 100.0];
        assert!((robust_sigma(&v) - 1.4826).abs() < 1e-12);
        assert!((median_error(&v) - 1.253 * 1.4826 / 5f64.sqrt()).abs() < 1e-12);
        assert_eq!((robust_sigma(&[]), median_error(&[])), (0.0, 0.0));
        assert_eq!(median_error(&[7.0]), 0.0);
    }

    #[test]
    fn percentile_matches_numpy_linear_on_an_odd_length() {
        let x = sorted(&ODD);
        // np.percentile(ODD, p)
        let numpy = [
            (0.0, 0.031),
            (25.0, 0.095),
            (50.0, 0.25),
            (90.0, 0.932_000_000_000_000_4),
            (99.0, 1.623_199_999_999_999_3),
            (99.9, 1.692_320_000_000_000_7),
            (100.0, 1.7),
        ];
        for (p, want) in numpy {
            // NumPy's `_lerp` is reproduced operation by operation: bit-exact.
            assert_eq!(percentile(&x, p), want, "p = {p}");
        }
    }

    #[test]
    fn percentile_matches_numpy_linear_on_an_even_length() {
        let x = sorted(&EVEN);
        // np.percentile(EVEN, p)
        let numpy = [
            (0.0, 1.0),
            (25.0, 1.75),
            (50.0, 3.5),
            (90.0, 6.899_999_999_999_999_5),
            (99.0, 8.79),
            (99.9, 8.979_000_000_000_001),
            (100.0, 9.0),
        ];
        for (p, want) in numpy {
            // NumPy's `_lerp` is reproduced operation by operation: bit-exact.
            assert_eq!(percentile(&x, p), want, "p = {p}");
        }
    }

    #[test]
    fn percentile_clamps_out_of_range_requests() {
        let x = sorted(&EVEN);
        assert_eq!(percentile(&x, -5.0), 1.0);
        assert_eq!(percentile(&x, 250.0), 9.0);
        assert_eq!(percentile(&x, f64::NAN), 1.0);
    }

    #[test]
    fn median_of_an_even_length_averages_the_middle_values() {
        // np.median(EVEN) == 3.5, np.median(ODD) == 0.25
        assert_eq!(median(&sorted(&EVEN)), 3.5);
        assert_eq!(median(&sorted(&ODD)), 0.25);
    }

    #[test]
    fn std_is_the_population_std_not_the_sample_std() {
        // np.std(EVEN) == 2.5708704751503917 (ddof=1 would give 2.7484...)
        assert_close(std_population(&EVEN), 2.570_870_475_150_391_7);
        // np.std(ODD) == 0.5395041941544144
        assert_close(std_population(&ODD), 0.539_504_194_154_414_4);
        assert_eq!(std_population(&[0.0421]), 0.0);
    }

    #[test]
    fn distribution_reports_numpy_statistics_in_milliseconds() {
        let d = distribution(&ODD, &[99.0, 50.0]);
        assert_eq!(d.count, 7);
        // np.mean(ODD)*1000, np.median(ODD)*1000, np.std(ODD)*1000, np.percentile(ODD, 99)*1000
        assert_close(d.mean_ms, 417.714_285_714_285_7);
        assert_close(d.median_ms, 250.0);
        assert_close(d.std_ms, 539.504_194_154_414_4);
        assert_close(d.max_ms, 1700.0);
        assert_eq!(d.percentiles_ms.len(), 2);
        assert_eq!(d.percentiles_ms[0].0, 99.0);
        assert_close(d.percentiles_ms[0].1, 1_623.199_999_999_999_4);
        assert_eq!(d.percentiles_ms[1].0, 50.0);
        assert_close(d.percentiles_ms[1].1, 250.0);
    }

    #[test]
    fn empty_inputs_give_zeros() {
        let d = distribution(&[], &[99.0, 99.9]);
        let want = Distribution {
            count: 0,
            mean_ms: 0.0,
            median_ms: 0.0,
            std_ms: 0.0,
            max_ms: 0.0,
            percentiles_ms: vec![(99.0, 0.0), (99.9, 0.0)],
        };
        assert_eq!(d, want);
        assert_eq!(mean(&[]), 0.0);
        assert_eq!(median(&[]), 0.0);
        assert_eq!(percentile(&[], 50.0), 0.0);
    }

    #[test]
    fn percentile_key_writes_whole_numbers_as_integers_and_others_as_shortest_decimals() {
        let cases = [
            (99.0, "p99"),
            (50.0, "p50"),
            (0.0, "p0"),
            (100.0, "p100"),
            (99.9, "p99.9"),
            (99.99, "p99.99"),
            (25.5, "p25.5"),
            (0.1, "p0.1"),
            (0.00001, "p1e-05"),
            (0.000025, "p2.5e-05"),
            (-0.0, "p0"),
            (1e20, "p100000000000000000000"),
        ];
        for (p, want) in cases {
            assert_eq!(percentile_key(p), want, "p = {p}");
        }
    }
}

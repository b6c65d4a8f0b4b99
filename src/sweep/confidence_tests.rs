//! Tests of the binomial confidence: exact values against hand computations,
//! the dependence correction, and the decision rule.
use super::*;
use crate::metrics::ErrorKind;
use crate::sweep::testing::{failed, ms, ok};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

fn records_with_ttft(ttft_ms: impl IntoIterator<Item = u64>) -> Vec<RequestRecord> {
    ttft_ms
        .into_iter()
        .enumerate()
        .map(|(i, t)| ok(i as u64 * 10, t, &[], 1))
        .collect()
}

fn slo(text: &str) -> Slo {
    text.parse().expect("valid SLO")
}

#[test]
fn binomial_cdf_matches_hand_computed_values() {
    // Bin(10, 1/2): P(X ≤ 5) = 638/1024.
    assert!((binomial_cdf(10, 0.5, 5) - 638.0 / 1024.0).abs() < 1e-12);
    // P(X ≤ n − 1) = 1 − qⁿ.
    let p = binomial_cdf(230, 0.99, 229);
    assert!((p - (1.0 - 0.99f64.powi(230))).abs() < 1e-9, "{p}");
    assert_eq!(binomial_cdf(10, 0.3, -1), 0.0);
    assert_eq!(binomial_cdf(10, 0.3, 10), 1.0);
    // Large n stays finite and monotone.
    let a = binomial_cdf(100_000, 0.99, 98_900);
    let b = binomial_cdf(100_000, 0.99, 99_000);
    assert!(a < b && (0.0..=1.0).contains(&a), "{a} {b}");
    assert!((b - 0.5).abs() < 0.05, "the mean sits near the median: {b}");
}

#[test]
fn a_p99_with_no_exceedance_needs_about_230_samples_for_90_percent() {
    let s = slo("p99_ttft_ms<=300");
    let c100 = slo_confidence(&s, &records_with_ttft(vec![50; 100]), 0.9).unwrap();
    let c230 = slo_confidence(&s, &records_with_ttft(vec![50; 230]), 0.9).unwrap();
    assert!((c100.pass - (1.0 - 0.99f64.powi(100))).abs() < 1e-9);
    assert!(c100.pass < 0.9 && c230.pass >= 0.9, "{c100:?} {c230:?}");
    assert_eq!(c230.fail, 0.0);
    assert_eq!(
        decide(&[Some(c100)], 0.9).0,
        Decision::Undecided,
        "100 samples cannot vouch for a p99"
    );
    assert_eq!(decide(&[Some(c230)], 0.9).0, Decision::Pass);
}

#[test]
fn five_percent_over_the_bound_fails_a_p99_with_certainty() {
    let values = (0..1000).map(|i| if i % 20 == 0 { 900 } else { 50 });
    let c = slo_confidence(&slo("p99_ttft_ms<=300"), &records_with_ttft(values), 0.9).unwrap();
    assert!(c.fail > 0.999, "{c:?}");
    assert_eq!(decide(&[Some(c)], 0.9).0, Decision::Fail);
}

#[test]
fn clustered_exceedances_count_as_fewer_independent_samples() {
    // 1000 samples, 10 over the bound: spread out vs in one burst.
    let spread = (0..1000).map(|i| if i % 100 == 0 { 900 } else { 50 });
    let burst = (0..1000).map(|i| if i < 10 { 900 } else { 50 });
    let s = slo("p99_ttft_ms<=300");
    let a = slo_confidence(&s, &records_with_ttft(spread), 0.9).unwrap();
    let b = slo_confidence(&s, &records_with_ttft(burst), 0.9).unwrap();
    assert_eq!(a.effective_samples, 1000);
    assert!(b.effective_samples < 100, "{b:?}");
    assert_eq!(effective_fraction(&[true, false, true, false, true]), 1.0);
}

#[test]
fn a_window_with_no_exceedance_takes_its_dependence_from_the_latencies() {
    // 300 samples, none over 300 ms: independent, they vouch for a p99
    // (1 − 0.99³⁰⁰ = 95%). Drifting slowly (a queue building and draining),
    // the same count is a few independent looks and vouches for nothing.
    let s = slo("p99_ttft_ms<=300");
    let mut rng = StdRng::seed_from_u64(3);
    let independent: Vec<u64> = (0..300).map(|_| rng.random_range(50..250)).collect();
    let drifting: Vec<u64> = (0..300)
        .map(|i| 150 + (100.0 * (i as f64 / 40.0).sin()) as u64)
        .collect();
    let a = slo_confidence(&s, &records_with_ttft(independent), 0.9).unwrap();
    let b = slo_confidence(&s, &records_with_ttft(drifting), 0.9).unwrap();
    assert!(a.effective_samples > 250 && a.pass > 0.9, "{a:?}");
    assert!(b.effective_samples < 100 && b.pass < 0.7, "{b:?}");
    assert!(
        ar1_fraction(&[0.05; 100]) == 1.0,
        "equal values are not dependent"
    );
}

#[test]
fn the_order_statistic_interval_brackets_the_sample_percentile() {
    // TTFTs 1..=1000 ms in a random order: the sample p90 is ≈ 900 ms.
    let shuffled = |n: u64| {
        let mut v: Vec<u64> = (1..=n).collect();
        v.shuffle(&mut StdRng::seed_from_u64(1));
        v
    };
    let c = slo_confidence(
        &slo("p90_ttft_ms<=2000"),
        &records_with_ttft(shuffled(1000)),
        0.95,
    )
    .unwrap();
    let (lo, hi) = (c.interval_low_ms.unwrap(), c.interval_high_ms.unwrap());
    assert!(lo < 900.0 && 900.0 < hi, "{lo} {hi}");
    assert!(
        hi - lo < 50.0,
        "1000 samples pin a p90 down to a few %: {lo} {hi}"
    );
    // A p99.9 of 100 samples has no upper order statistic.
    let c = slo_confidence(
        &slo("p99.9_ttft_ms<=2000"),
        &records_with_ttft(shuffled(100)),
        0.95,
    )
    .unwrap();
    assert_eq!(c.interval_high_ms, None);
}

#[test]
fn means_have_no_interval_and_do_not_block_a_pass() {
    let recs = records_with_ttft(vec![50; 300]);
    assert_eq!(slo_confidence(&slo("mean_ttft_ms<=300"), &recs, 0.9), None);
    let p99 = slo_confidence(&slo("p99_ttft_ms<=300"), &recs, 0.9);
    assert_eq!(decide(&[None, p99], 0.9).0, Decision::Pass);
    assert_eq!(decide(&[None], 0.9).0, Decision::Undecided);
}

#[test]
fn goodput_form_slos_use_their_ratio_as_the_quantile() {
    // ttft:300@0.9 with 5% over: passes, and surely so with 1000 samples.
    let values = (0..1000).map(|i| if i % 20 == 0 { 900 } else { 50 });
    let c = slo_confidence(&slo("ttft:300@0.9"), &records_with_ttft(values), 0.9).unwrap();
    assert!(c.pass > 0.999, "{c:?}");
}

#[test]
fn a_burst_counts_once_and_isolated_slow_requests_count_each() {
    // 1000 TTFTs alternating 40/60 ms; above 60 ms (the typical latency
    // passed in) is an excursion, so every other sample ends one. Ten slow samples in one run of 10: one burst of 10.
    let base = |i: usize| if i % 2 == 0 { 40.0 } else { 60.0 };
    let burst: Vec<f64> = (0..1000)
        .map(|i| {
            if (500..510).contains(&i) {
                900.0
            } else {
                base(i)
            }
        })
        .collect();
    let spread: Vec<f64> = (0..1000)
        .map(|i| if i % 100 == 1 { 900.0 } else { base(i) })
        .collect();
    let slow = |v: &[f64]| v.iter().map(|&x| x > 300.0).collect::<Vec<bool>>();
    assert_eq!(burst_factor(&burst, &slow(&burst), 60.0), 10.0);
    assert_eq!(burst_factor(&spread, &slow(&spread), 60.0), 1.0);
    // Two bursts of 9 and 1: (81 + 1) / 10.
    let mixed: Vec<f64> = (0..1000)
        .map(|i| {
            if (100..109).contains(&i) || i == 701 {
                900.0
            } else {
                base(i)
            }
        })
        .collect();
    assert!((burst_factor(&mixed, &slow(&mixed), 60.0) - 8.2).abs() < 1e-9);
    // Nothing marked, or nothing at all: no correction.
    assert_eq!(burst_factor(&burst, &[false; 1000], 60.0), 1.0);
    assert_eq!(burst_factor(&[], &[], 60.0), 1.0);
}

#[test]
fn a_window_whose_slowest_one_percent_is_one_burst_cannot_vouch_for_a_p99() {
    // 3000 samples under the bound (so no exceedance to cluster), but the
    // slowest 30 come as one queue burst: 3000 / 30 = 100 looks, too few for
    // a p99 (230 needed). Spread out, the same values vouch for it.
    let s = slo("p99_ttft_ms<=300");
    let burst = (0..3000).map(|i| match i {
        1000..1030 => 250,
        _ => 40 + (i % 2) * 20,
    });
    let c = slo_confidence(&s, &records_with_ttft(burst), 0.9).unwrap();
    assert!(c.effective_samples <= 110, "{c:?}");
    assert!(c.pass < 0.9, "{c:?}");
    let spread = (0..3000).map(|i| if i % 100 == 1 { 250 } else { 40 + (i % 2) * 20 });
    let c = slo_confidence(&s, &records_with_ttft(spread), 0.9).unwrap();
    assert!(c.effective_samples >= 2900 && c.pass > 0.999, "{c:?}");
}

#[test]
fn failed_requests_count_against_the_bound_in_their_place() {
    // 300 fast requests pass p99 ≤ 300 with 1 − 0.99³⁰⁰ ≈ 95%.
    let s = slo("p99_ttft_ms<=300");
    let fast = records_with_ttft(vec![50; 300]);
    let clean = slo_confidence(&s, &fast, 0.9).unwrap();
    assert!(
        (clean.pass - (1.0 - 0.99f64.powi(300))).abs() < 1e-9,
        "{clean:?}"
    );
    assert_eq!(decide(&[Some(clean)], 0.9).0, Decision::Pass);
    // The same with 9 failures (2.9%), one every 34 requests: isolated
    // misses, so no burst or AR(1) deflation: 309 samples, 300 within.
    let mut records = fast;
    for k in 0..9 {
        let mut f = failed(0, ErrorKind::Timeout);
        f.due = ms(k * 340 + 5);
        records.insert(k as usize * 34 + 17, f);
    }
    let c = slo_confidence(&s, &records, 0.9).unwrap();
    assert_eq!(
        (c.samples, c.effective_samples, c.effective_within),
        (309, 309, 300)
    );
    assert!(
        (c.fail - (1.0 - binomial_cdf(309, 0.99, 300))).abs() < 1e-12,
        "{c:?}"
    );
    assert!(c.fail > 0.99, "{c:?}");
    assert_eq!(decide(&[Some(c)], 0.9).0, Decision::Fail);
    // The p99's interval lands on failures: no finite bound, never ∞ or NaN.
    assert_eq!(c.interval_high_ms, None);
    assert!(c.interval_low_ms.is_none_or(f64::is_finite));
}

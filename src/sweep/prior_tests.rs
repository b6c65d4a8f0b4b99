//! Tests of the twin's prior: it adds to the verdict the samples already
//! lean to, never turns one, and argues from the least favourable case.
use super::*;

/// A p99's confidence on `n` effective samples of which `over` missed.
fn p99(n: usize, over: usize) -> SloConfidence {
    let w = n - over;
    SloConfidence {
        samples: n,
        effective_samples: n,
        effective_within: w,
        quantile: 0.99,
        pass: binomial_cdf(n, 0.99, w as i64 - 1),
        fail: 1.0 - binomial_cdf(n, 0.99, w as i64),
        interval_low_ms: None,
        interval_high_ms: None,
    }
}

fn prior(low: f64, high: f64) -> SloPrior {
    SloPrior {
        share_over_low: low,
        share_over_high: high,
    }
}

#[test]
fn a_pass_prior_adds_its_weight_to_a_window_that_held() {
    let c = p99(80, 0);
    assert!(
        c.pass < 0.6,
        "80 samples alone are far from sure: {}",
        c.pass
    );
    let (with, b) = with_prior(c, Some(&prior(0.0, 0.001)), 600, true);
    assert_eq!(b, Backing::Agrees);
    // 680 samples of which 80 + floor(600 × 0.999) = 679 within.
    let expected = binomial_cdf(680, 0.99, 678);
    assert!(
        (with.pass - expected).abs() < 1e-12,
        "{} {expected}",
        with.pass
    );
    assert!(with.pass > 0.98, "{}", with.pass);
    assert_eq!(with.fail, c.fail, "a pass prior says nothing about a miss");
    assert_eq!(
        with.effective_samples, 80,
        "the samples stay the step's own"
    );
}

#[test]
fn the_samples_must_lean_at_even_odds_by_themselves() {
    // No miss in 68 effective samples: 1 − 0.99^68 < 0.5.
    let few = p99(68, 0);
    let (same, b) = with_prior(few, Some(&prior(0.0, 0.0)), 600, true);
    assert_eq!((same, b), (few, Backing::TooFew));
    let (more, b) = with_prior(p99(69, 0), Some(&prior(0.0, 0.0)), 600, true);
    assert_eq!(b, Backing::Agrees);
    assert!(more.pass > 0.98);
    // One miss in 100 samples leans neither way at even odds.
    let one = p99(100, 1);
    assert!(one.fail < 0.5 && one.pass < 0.5);
    assert_eq!(
        with_prior(one, Some(&prior(0.05, 0.2)), 600, false).1,
        Backing::TooFew
    );
}

#[test]
fn the_least_favourable_share_sets_the_prior() {
    let c = p99(80, 0);
    let (gentle, _) = with_prior(c, Some(&prior(0.0, 0.0)), 600, true);
    let (harsh, _) = with_prior(c, Some(&prior(0.0, 0.008)), 600, true);
    assert!(harsh.pass < gentle.pass, "{} {}", harsh.pass, gentle.pass);
    // One parameter set over the allowed 1%: the twin does not lean.
    let (same, b) = with_prior(c, Some(&prior(0.0, 0.012)), 600, true);
    assert_eq!((same, b), (c, Backing::Silent));
}

#[test]
fn the_prior_never_turns_a_verdict() {
    // The twin says pass, the window missed: samples alone.
    let c = p99(60, 3);
    let (same, b) = with_prior(c, Some(&prior(0.0, 0.001)), 600, false);
    assert_eq!((same, b), (c, Backing::Contradicted));
    // The twin says fail, the window held.
    let c = p99(60, 0);
    let (same, b) = with_prior(c, Some(&prior(0.05, 0.2)), 600, true);
    assert_eq!((same, b), (c, Backing::Contradicted));
}

#[test]
fn a_fail_prior_adds_to_a_miss_from_the_lowest_share() {
    let c = p99(30, 1);
    assert!(c.fail >= 0.5, "{}", c.fail);
    let (with, b) = with_prior(c, Some(&prior(0.04, 0.3)), 200, false);
    assert_eq!(b, Backing::Agrees);
    // 230 samples of which 29 + ceil(200 × 0.96) = 221 within.
    let expected = 1.0 - binomial_cdf(230, 0.99, 221);
    assert!((with.fail - expected).abs() < 1e-12);
    assert!(
        with.fail > c.fail && with.fail > 0.99,
        "{} {}",
        with.fail,
        c.fail
    );
    assert_eq!(with.pass, c.pass);
}

#[test]
fn no_weight_or_no_prior_leaves_the_samples_alone() {
    let c = p99(50, 0);
    assert_eq!(with_prior(c, Some(&prior(0.0, 0.0)), 0, true).0, c);
    assert_eq!(with_prior(c, None, 600, true), (c, Backing::Silent));
}

#[test]
fn apply_follows_each_slo_and_skips_means() {
    let each = vec![Some(p99(80, 0)), None, Some(p99(40, 2))];
    let step = StepPrior {
        weight: 600,
        slos: vec![Some(prior(0.0, 0.0)), None, Some(prior(0.0, 0.0))],
    };
    let (out, backing) = apply(&each, Some(&step), &[true, true, false]);
    assert_eq!(
        backing,
        vec![Backing::Agrees, Backing::Silent, Backing::Contradicted]
    );
    assert!(out[0].unwrap().pass > each[0].unwrap().pass);
    assert_eq!(out[1], None);
    assert_eq!(out[2], each[2]);
    let (alone, _) = apply(&each, None, &[true, true, false]);
    assert_eq!(alone, each);
}

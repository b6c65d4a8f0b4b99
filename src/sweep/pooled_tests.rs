//! Tests of evidence pooled across steps.
use super::*;
use crate::sweep::knee::{knee, next_load, LoadUnit, SearchPlan};

/// A step at `load` with `n` effective samples of a p99, `within` of them
/// under the bound; undecided unless `decided`. Its own confidence is
/// corrected for 3 tests, as an adaptive step's is.
fn step(load: f64, verdict: Verdict, n: usize, within: usize, decided: bool) -> StepPoint {
    let own = crate::sweep::confidence::binomial_cdf(n, 0.99, within as i64 - 1);
    let own = union_bound(own, 3);
    StepPoint {
        load,
        verdict,
        achieved_rate: load,
        offered_rate: load,
        steady: true,
        goodput: load,
        mean_waiting: None,
        confidence: Some(own),
        undecided: !decided,
        evidence: vec![Some(Evidence {
            effective_samples: n,
            effective_within: within,
            quantile: 0.99,
        })],
        level: Some(0.9),
    }
}

#[test]
fn two_passes_within_noise_decide_the_lower_one_together() {
    // 300 effective samples, none over: 95% alone, short of 90% after a
    // step's own correction for its tests. 600 pooled: 99.8%, 99.3% after
    // the correction for the two candidates (and the steps' own tests).
    let history = [
        step(30.0, Verdict::Pass, 300, 300, false),
        step(42.0, Verdict::Fail, 300, 200, true),
        step(33.0, Verdict::Pass, 300, 300, false),
    ];
    let k = knee(&history);
    assert_eq!(k.last_pass, Some(30.0), "{k:?}");
    assert_eq!(k.last_pass_pooled, vec![30.0, 33.0]);
    let c = k.last_pass_confidence.unwrap();
    assert!((c - (1.0 - 3.0 * 0.99f64.powi(600))).abs() < 1e-9, "{c}");
    assert_eq!(k.undecided, vec![33.0]);
    assert_eq!(k.pass_within_noise, None);
    // The search now bisects between the pooled pass and the band.
    let plan = SearchPlan::auto(30.0, 1000.0, LoadUnit::Rate);
    let next = next_load(&plan, &history).expect("a bisection step");
    assert!(next > 33.0 && next < 42.0, "{next}");
}

#[test]
fn a_step_inside_the_pool_counts_whatever_its_own_verdict() {
    // The step at 33 failed its point estimate (6 of 300 over): pooled, the
    // share over is 1%, so nothing is vouched for. Leaving it out because
    // it looked bad is what would bias the pool.
    let history = [
        step(30.0, Verdict::Pass, 300, 300, false),
        step(33.0, Verdict::Fail, 300, 294, false),
        step(42.0, Verdict::Fail, 300, 200, true),
    ];
    let k = knee(&history);
    assert_eq!(k.last_pass, None, "{k:?}");
    assert!(k.last_pass_pooled.is_empty());
    // The interval still has a lower end, within noise, with its confidence.
    let (load, c) = k.pass_within_noise.expect("a pass within noise");
    assert_eq!(load, 30.0);
    assert!(c < 0.9, "{c}");
}

#[test]
fn steps_at_or_above_the_decided_failure_are_not_pooled() {
    // A pass above the lowest decided failure (noise) adds nothing to the
    // pool below it, and a lone step is never its own pool.
    let history = [
        step(30.0, Verdict::Pass, 300, 300, false),
        step(40.0, Verdict::Fail, 300, 200, true),
        step(44.0, Verdict::Pass, 300, 300, false),
    ];
    let k = knee(&history);
    assert_eq!(k.last_pass, None, "{k:?}");
    let (load, c) = k.pass_within_noise.unwrap();
    assert_eq!(load, 30.0);
    let own = 1.0 - 3.0 * 0.99f64.powi(300);
    assert!((c - own).abs() < 1e-9, "its own confidence: {c}");
}

#[test]
fn without_a_level_or_evidence_nothing_is_pooled() {
    let mut a = step(30.0, Verdict::Pass, 300, 300, false);
    let mut b = step(33.0, Verdict::Pass, 300, 300, false);
    a.level = None;
    b.level = None;
    assert_eq!(pass_end(&[a.clone(), b.clone()], &[a, b], None, None), None);
    let mut a = step(30.0, Verdict::Pass, 300, 300, false);
    let mut b = step(33.0, Verdict::Pass, 300, 300, false);
    a.evidence = vec![None];
    b.evidence = vec![];
    assert_eq!(pass_end(&[a.clone(), b.clone()], &[a, b], None, None), None);
}

#[test]
fn failed_requests_are_misses_in_the_pooled_evidence() {
    use crate::metrics::ErrorKind;
    use crate::sweep::adaptive::{window_point, AdaptiveRule};
    use crate::sweep::testing::{failed, ok};
    use std::time::Duration;
    let rule = AdaptiveRule {
        window_start: Duration::ZERO,
        min_length: Duration::from_secs(10),
        min_requests: 0,
        cap: Duration::from_secs(40),
        level: 0.9,
        prior: None,
    };
    let slos = ["p99_ttft_ms<=300".parse().expect("valid SLO")];
    let fast = |n: u64| (0..n).map(|i| ok(i * 10, 50, &[], 1)).collect::<Vec<_>>();
    // Two fast steps of 300: pooled, 600 samples, none over (module docs).
    let low = window_point(10.0, &slos, &fast(300), &rule);
    let clean = window_point(12.0, &slos, &fast(300), &rule);
    let both = [low.clone(), clean];
    let pooled = pass_end(&both, &both, None, None).expect("pooled pass");
    assert_eq!(pooled.load, 10.0);
    // The step above with 2 failed requests: its p99 (tail 4) still passes,
    // but its evidence holds 302 samples, 300 within, and the pool falls
    // to P(Bin(602, 0.99) ≤ 599) ≈ 94%, 82% after the correction: no pass.
    let mut window = fast(300);
    for k in [100, 200] {
        window.insert(k, failed(k as u64 * 10, ErrorKind::Timeout));
    }
    let failing = window_point(12.0, &slos, &window, &rule);
    assert_eq!(failing.verdict, Verdict::Pass);
    let want = Evidence {
        effective_samples: 302,
        effective_within: 300,
        quantile: 0.99,
    };
    assert_eq!(failing.evidence, vec![Some(want)]);
    let both = [low, failing];
    assert_eq!(pass_end(&both, &both, None, None), None);
    let pooled = crate::sweep::confidence::binomial_cdf(602, 0.99, 599);
    assert!(union_bound(pooled, 3) < 0.9, "{pooled}");
}

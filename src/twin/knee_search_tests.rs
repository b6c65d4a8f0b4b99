//! Tests of the knee search on made-up verdicts: it ends at the same
//! bracket a bisection would accept, in fewer runs when the margins are
//! informative, and still ends when they say nothing.

use super::*;

/// A run whose verdict is `rate <= knee` and whose margin is `margin(rate)`.
fn runner(
    knee: f64,
    margin: impl Fn(f64) -> f64,
) -> impl FnMut(f64) -> Result<(Probe, ()), String> {
    move |rate| {
        let pass = rate <= knee;
        let m = margin(rate);
        let margin = if pass { m.min(0.0) } else { m.max(1e-12) };
        Ok((Probe { rate, pass, margin }, ()))
    }
}

fn bracket(found: &Located<()>) -> (f64, f64) {
    (
        found.pass.as_ref().unwrap().0.rate,
        found.fail.as_ref().unwrap().0.rate,
    )
}

fn cold(guess: f64) -> Start {
    Start {
        guess,
        step: 0.15,
        slope: None,
        other: None,
    }
}

#[test]
fn a_smooth_margin_closes_the_bracket_around_the_knee_in_few_runs() {
    // A queue's p99 blowing up towards 12 req/s, bound crossed at 10.
    let m = |r: f64| (2.0 / (12.0 - r.min(11.99))).ln() - (2.0f64 / 2.0).ln();
    let found = locate((0.1, 18.0), cold(8.0), 0.0025, runner(10.0, m)).unwrap();
    let (lo, hi) = bracket(&found);
    assert!(lo <= 10.0 && hi > 10.0, "{lo} {hi}");
    assert!(hi - lo <= 0.0025 * lo, "{lo} {hi}");
    // Bisection from [0.1, 18] to 0.25% takes 12 runs.
    assert!(found.runs <= 7, "{} runs: {:?}", found.runs, found.probes);
}

#[test]
fn a_margin_that_says_nothing_still_ends_at_the_precision() {
    // Margins of ±1 whatever the rate: the search falls back to halving.
    let m = |r: f64| if r <= 10.0 { -1.0 } else { 1.0 };
    let found = locate((0.1, 18.0), cold(3.0), 0.0025, runner(10.0, m)).unwrap();
    let (lo, hi) = bracket(&found);
    assert!(
        lo <= 10.0 && hi > 10.0 && hi - lo <= 0.0025 * lo,
        "{lo} {hi}"
    );
    assert!(found.runs <= 30, "{} runs", found.runs);
    let inf = |r: f64| {
        if r <= 10.0 {
            f64::NEG_INFINITY
        } else {
            f64::INFINITY
        }
    };
    let found = locate((0.1, 18.0), cold(3.0), 0.0025, runner(10.0, inf)).unwrap();
    let (lo, hi) = bracket(&found);
    assert!(
        lo <= 10.0 && hi > 10.0 && hi - lo <= 0.0025 * lo,
        "{lo} {hi}"
    );
}

#[test]
fn a_hint_at_the_knee_with_its_slope_needs_two_runs() {
    let m = |r: f64| 8.0 * (r / 10.0).ln();
    let hint = Start {
        guess: 9.99,
        step: 0.03,
        slope: Some(8.0),
        other: None,
    };
    let found = locate((0.1, 18.0), hint, 0.0025, runner(10.0, m)).unwrap();
    assert_eq!(found.runs, 2, "{:?}", found.probes);
    let (lo, hi) = bracket(&found);
    assert!(
        lo <= 10.0 && hi > 10.0 && hi - lo <= 0.0025 * lo,
        "{lo} {hi}"
    );
}

#[test]
fn the_ends_of_the_range_stop_the_search() {
    let m = |r: f64| (r / 10.0).ln();
    let low = locate((20.0, 40.0), cold(30.0), 0.01, runner(10.0, m)).unwrap();
    assert!(low.pass.is_none());
    assert_eq!(low.fail.as_ref().unwrap().0.rate, 20.0);
    let high = locate((1.0, 5.0), cold(2.0), 0.01, runner(10.0, m)).unwrap();
    assert!(high.fail.is_none());
    assert_eq!(high.pass.as_ref().unwrap().0.rate, 5.0);
}

#[test]
fn every_probe_lies_inside_the_range_and_passes_exactly_below_the_knee() {
    let m = |r: f64| 3.0 * (r / 7.0).ln();
    let found = locate((0.5, 9.0), cold(8.9), 0.001, runner(7.0, m)).unwrap();
    for p in &found.probes {
        assert!((0.5..=9.0).contains(&p.rate), "{p:?}");
        assert_eq!(p.pass, p.rate <= 7.0, "{p:?}");
    }
    assert_eq!(found.runs, found.probes.len());
}

#[test]
fn the_slope_near_a_knee_is_fitted_from_the_probes_beside_it() {
    let probe = |rate: f64| Probe {
        rate,
        pass: rate <= 10.0,
        margin: 4.0 * (rate / 10.0).ln(),
    };
    let probes: Vec<Probe> = [2.0, 9.5, 9.9, 10.1, 10.5].map(probe).to_vec();
    let s = slope_near(&probes, 10.0, 0.1).unwrap();
    assert!((s - 4.0).abs() < 1e-9, "{s}");
    assert!(slope_near(&probes[..1], 2.0, 0.1).is_none());
    let flat: Vec<Probe> = [9.5, 10.5]
        .map(|r| Probe {
            rate: r,
            pass: true,
            margin: -1.0,
        })
        .to_vec();
    assert!(slope_near(&flat, 10.0, 0.1).is_none());
}

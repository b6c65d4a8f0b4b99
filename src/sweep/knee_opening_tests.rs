//! Tests of the opening loads (`sweep --twin`: a predicted interval's ends
//! measured first): which loads the search takes, and in fake time on the
//! synthetic server of `knee_sequence_tests`, how soon it is bracketed.
use super::sequence_tests::{step, sweep, KNEE};
use super::tests::{loads, point};
use super::*;
use std::time::Duration;

fn opened(lo: f64, hi: f64) -> SearchPlan {
    SearchPlan::auto(1.0, 4096.0, LoadUnit::Rate).with_opening(vec![hi, lo])
}

fn undecided(load: f64, verdict: Verdict) -> StepPoint {
    StepPoint {
        undecided: true,
        ..point(load, verdict)
    }
}

#[test]
fn the_ends_come_first_low_then_high_then_the_bracket_is_split() {
    let plan = opened(10.0, 20.0);
    assert_eq!(next_load(&plan, &[]), Some(10.0));
    let h = vec![point(10.0, Verdict::Pass)];
    assert_eq!(next_load(&plan, &h), Some(20.0));
    // A pass within noise at the low end still goes to the high end.
    assert_eq!(
        next_load(&plan, &[undecided(10.0, Verdict::Pass)]),
        Some(20.0)
    );
    let h = vec![point(10.0, Verdict::Pass), point(20.0, Verdict::Fail)];
    let mid = next_load(&plan, &h).unwrap();
    assert!((mid - 200f64.sqrt()).abs() < 1e-9, "{mid}");
}

#[test]
fn a_low_end_that_fails_skips_the_high_end_and_steps_down() {
    let plan = opened(10.0, 20.0);
    let h = vec![point(10.0, Verdict::Fail)];
    assert_eq!(next_load(&plan, &h), Some(5.0));
}

#[test]
fn a_high_end_that_passes_climbs_past_it() {
    let plan = opened(10.0, 20.0);
    let h = vec![point(10.0, Verdict::Pass), point(20.0, Verdict::Pass)];
    assert_eq!(next_load(&plan, &h), Some(40.0));
}

#[test]
fn opening_loads_above_max_load_are_dropped_and_the_plan_stays_valid() {
    let plan = SearchPlan::auto(1.0, 15.0, LoadUnit::Rate).with_opening(vec![10.0, 20.0]);
    assert!(plan.validate().is_ok());
    let h = vec![point(10.0, Verdict::Pass)];
    assert_eq!(next_load(&plan, &h), Some(15.0), "climbs to max load");
    // A list plan ignores an opening.
    let list = SearchPlan::List(vec![3.0]).with_opening(vec![1.0]);
    assert_eq!(list, SearchPlan::List(vec![3.0]));
}

/// The search opened at `lo..hi`, each step run by the synthetic server.
fn opened_sweep(lo: f64, hi: f64, seed: u64) -> (Vec<StepPoint>, Duration) {
    let plan = opened(lo, hi).with_stops(0.05, 6);
    let mut history: Vec<StepPoint> = Vec::new();
    let mut took = Duration::ZERO;
    while let Some(load) = next_load(&plan, &history) {
        let (p, t) = step(load, seed * 100 + history.len() as u64);
        took += t;
        history.push(p);
    }
    (history, took)
}

#[test]
fn opened_at_a_good_prediction_the_search_brackets_the_knee_sooner_than_calibrated() {
    // A prediction of 35 (33.3–36.8, ±5%) against the calibrated start at
    // ¾ μ: over ten seeded sweeps in fake time the opened search takes less
    // measured time, and its bracket holds the knee as often.
    let (mut opened_s, mut calibrated_s) = (0.0, 0.0);
    let (mut opened_in, mut calibrated_in) = (0, 0);
    for seed in 30..40 {
        let (h, t) = opened_sweep(KNEE * 0.95, KNEE * 1.05, seed);
        assert_eq!(loads(&h)[0], KNEE * 0.95, "{:?}", loads(&h));
        opened_s += t.as_secs_f64();
        let k = knee(&h);
        opened_in += usize::from(
            k.last_pass.unwrap_or(0.0) < KNEE && k.first_fail.is_some_and(|f| KNEE < f),
        );
        let (h, t) = sweep(seed);
        calibrated_s += t.as_secs_f64();
        let k = knee(&h);
        calibrated_in += usize::from(
            k.last_pass.unwrap_or(0.0) < KNEE && k.first_fail.is_some_and(|f| KNEE < f),
        );
    }
    eprintln!("opened {opened_s:.0} s ({opened_in}/10 hold the knee), calibrated {calibrated_s:.0} s ({calibrated_in}/10)");
    assert!(
        opened_s < calibrated_s,
        "opened {opened_s:.0} s vs calibrated {calibrated_s:.0} s"
    );
    assert!(
        opened_in + 1 >= calibrated_in,
        "{opened_in} vs {calibrated_in}"
    );
}

//! Tests for `knee.rs` (kept apart to keep the module short).
use super::*;

pub(super) fn point(load: f64, verdict: Verdict) -> StepPoint {
    StepPoint {
        load,
        verdict,
        achieved_rate: load,
        offered_rate: load,
        steady: verdict == Verdict::Pass,
        goodput: load * 0.9,
        mean_waiting: None,
        confidence: None,
        undecided: false,
        evidence: vec![],
        level: None,
    }
}

/// Drive the search with `oracle` until it stops; returns the measured steps.
fn run(plan: &SearchPlan, oracle: impl Fn(f64) -> Verdict) -> Vec<StepPoint> {
    let mut history = Vec::new();
    while let Some(load) = next_load(plan, &history) {
        assert!(history.len() < 100, "search did not stop");
        history.push(point(load, oracle(load)));
    }
    history
}

fn pass_up_to(limit: f64) -> impl Fn(f64) -> Verdict {
    move |load| {
        if load <= limit {
            Verdict::Pass
        } else {
            Verdict::Fail
        }
    }
}

pub(super) fn loads(history: &[StepPoint]) -> Vec<f64> {
    history.iter().map(|p| p.load).collect()
}

fn auto(start: f64, max_load: f64) -> SearchPlan {
    SearchPlan::auto(start, max_load, LoadUnit::Rate)
}

#[test]
fn auto_search_doubles_then_bisects_to_a_ten_percent_bracket_around_the_truth() {
    let history = run(&auto(1.0, 1000.0), pass_up_to(37.0));
    let l = loads(&history);
    assert_eq!(l[..7], [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0]);
    assert!(
        (l[7] - (32.0f64 * 64.0).sqrt()).abs() < 1e-9,
        "geometric midpoint"
    );
    let k = knee(&history);
    let (pass, fail) = (k.last_pass.expect("pass"), k.first_fail.expect("fail"));
    assert!(pass <= 37.0 && 37.0 < fail, "{pass}..{fail}");
    assert!((fail - pass) / pass <= 0.10, "{pass}..{fail}");
    assert!(!k.bounded_by_generator && !k.non_monotonic);
    assert!(history.len() <= 20);
}

#[test]
fn the_search_never_measures_a_load_twice() {
    let history = run(&auto(1.0, 1000.0), pass_up_to(37.0));
    for (i, a) in history.iter().enumerate() {
        assert!(
            !history[i + 1..].iter().any(|b| b.load == a.load),
            "{}",
            a.load
        );
    }
}

#[test]
fn a_failing_first_step_steps_down_until_a_pass_then_bisects() {
    let history = run(&auto(16.0, 1000.0), pass_up_to(3.0));
    assert_eq!(loads(&history)[..4], [16.0, 8.0, 4.0, 2.0]);
    let k = knee(&history);
    let (pass, fail) = (k.last_pass.expect("pass"), k.first_fail.expect("fail"));
    assert!(pass <= 3.0 && 3.0 < fail && (fail - pass) / pass <= 0.10);
}

#[test]
fn stepping_down_stops_at_start_over_64() {
    let history = run(&auto(64.0, 1000.0), |_| Verdict::Fail);
    assert_eq!(loads(&history), [64.0, 32.0, 16.0, 8.0, 4.0, 2.0, 1.0]);
    assert_eq!(knee(&history).last_pass, None);
}

#[test]
fn a_generator_limited_step_ends_the_search_and_the_knee_says_so() {
    let oracle = |load: f64| {
        if load >= 16.0 {
            Verdict::GeneratorLimited
        } else {
            Verdict::Pass
        }
    };
    let history = run(&auto(1.0, 1000.0), oracle);
    assert_eq!(loads(&history), [1.0, 2.0, 4.0, 8.0, 16.0]);
    let k = knee(&history);
    assert_eq!((k.last_pass, k.first_fail), (Some(8.0), None));
    assert!(k.bounded_by_generator);
    assert_eq!(k.goodput_at_knee, Some(8.0 * 0.9));
}

#[test]
fn a_generator_limit_above_a_server_failure_does_not_bound_the_knee() {
    let history = [
        point(10.0, Verdict::Pass),
        point(20.0, Verdict::Fail),
        point(40.0, Verdict::GeneratorLimited),
    ];
    assert!(!knee(&history).bounded_by_generator);
}

#[test]
fn climbing_stops_at_max_load_after_measuring_it() {
    let history = run(&auto(1.0, 10.0), |_| Verdict::Pass);
    assert_eq!(loads(&history), [1.0, 2.0, 4.0, 8.0, 10.0]);
}

#[test]
fn the_search_takes_at_most_max_steps() {
    let plan = SearchPlan::Auto {
        start: 1.0,
        factor: 2.0,
        tolerance: 0.10,
        max_load: 1e9,
        max_steps: 5,
        unit: LoadUnit::Rate,
        ceiling: None,
        opening: Vec::new(),
    };
    assert_eq!(run(&plan, |_| Verdict::Pass).len(), 5);
}

#[test]
fn list_mode_measures_every_listed_load_in_order_once() {
    let plan = SearchPlan::List(vec![5.0, 1.0, 20.0, 5.0, 10.0]);
    let history = run(&plan, pass_up_to(7.0));
    assert_eq!(loads(&history), [5.0, 1.0, 20.0, 10.0]);
    let k = knee(&history);
    assert_eq!((k.last_pass, k.first_fail), (Some(5.0), Some(10.0)));
}

#[test]
fn list_mode_skips_loads_at_or_above_a_generator_limited_one() {
    let plan = SearchPlan::List(vec![1.0, 4.0, 2.0, 8.0, 3.0]);
    let oracle = |load: f64| {
        if load >= 4.0 {
            Verdict::GeneratorLimited
        } else {
            Verdict::Pass
        }
    };
    assert_eq!(loads(&run(&plan, oracle)), [1.0, 4.0, 2.0, 3.0]);
}

#[test]
fn a_pass_above_the_lowest_failure_is_flagged_non_monotonic() {
    let noisy = [
        point(10.0, Verdict::Pass),
        point(40.0, Verdict::Fail),
        point(30.0, Verdict::Pass),
        point(20.0, Verdict::Fail),
    ];
    let k = knee(&noisy);
    assert_eq!((k.last_pass, k.first_fail), (Some(10.0), Some(20.0)));
    assert!(k.non_monotonic);
    assert_eq!(k.goodput_at_knee, Some(9.0));
    let clean = [point(10.0, Verdict::Pass), point(20.0, Verdict::Fail)];
    assert!(!knee(&clean).non_monotonic);
}

#[test]
fn closed_loop_bisection_uses_integers_and_ends_on_adjacent_ones() {
    let plan = SearchPlan::auto(1.0, 1000.0, LoadUnit::Concurrency);
    let history = run(&plan, pass_up_to(37.0));
    assert!(
        history.iter().all(|p| p.load.fract() == 0.0),
        "{:?}",
        loads(&history)
    );
    assert_eq!(
        loads(&history)[..8],
        [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 45.0]
    );
    let k = knee(&history);
    assert_eq!((k.last_pass, k.first_fail), (Some(37.0), Some(38.0)));
}

#[test]
fn closed_loop_step_down_ends_at_one_concurrent_request() {
    let plan = SearchPlan::auto(4.0, 1000.0, LoadUnit::Concurrency);
    assert_eq!(loads(&run(&plan, |_| Verdict::Fail)), [4.0, 2.0, 1.0]);
}

#[test]
fn invalid_plans_are_rejected_and_measure_nothing() {
    let bad = [
        SearchPlan::auto(0.0, 10.0, LoadUnit::Rate),
        SearchPlan::auto(20.0, 10.0, LoadUnit::Rate),
        SearchPlan::Auto {
            start: 1.0,
            factor: 1.0,
            tolerance: 0.1,
            max_load: 10.0,
            max_steps: 5,
            unit: LoadUnit::Rate,
            ceiling: None,
            opening: Vec::new(),
        },
        SearchPlan::List(vec![]),
        SearchPlan::List(vec![1.0, f64::NAN]),
    ];
    for plan in bad {
        assert!(plan.validate().is_err(), "{plan:?}");
        assert_eq!(next_load(&plan, &[]), None);
    }
}

#[test]
fn service_rate_is_the_median_achieved_rate_of_saturated_steps() {
    let step = |load: f64, achieved: f64, steady: bool| StepPoint {
        achieved_rate: achieved,
        steady,
        ..point(load, Verdict::Fail)
    };
    let points = [
        step(10.0, 10.0, true),
        step(20.0, 19.5, false), // 97.5%: keeping up
        step(40.0, 25.0, false), // saturated
        step(80.0, 24.0, false), // saturated
        step(30.0, 26.0, false), // 86.7%: saturated
        step(16.0, 13.6, true),  // 85% by chance, but steady: not saturated
    ];
    assert_eq!(service_rate_estimate(&points), Some(25.0));
    assert_eq!(service_rate_estimate(&points[..2]), None);
}

#[test]
fn queue_onset_is_the_lowest_load_whose_waiting_gauge_reached_one_half() {
    let waiting = |load: f64, w: Option<f64>| StepPoint {
        mean_waiting: w,
        confidence: None,
        ..point(load, Verdict::Pass)
    };
    let points = [
        waiting(40.0, Some(3.0)),
        waiting(10.0, Some(0.1)),
        waiting(30.0, Some(0.6)),
        waiting(20.0, Some(0.49)),
        waiting(25.0, Some(0.5)),
        waiting(5.0, None),
    ];
    assert_eq!(queue_onset(&points), Some(25.0));
    assert_eq!(queue_onset(&points[1..2]), None);
    assert_eq!(queue_onset(&[waiting(1.0, None)]), None);
}

#[test]
fn closed_loop_climb_advances_by_at_least_one_even_with_a_small_factor() {
    let plan = SearchPlan::Auto {
        start: 1.0,
        factor: 1.2,
        tolerance: 0.1,
        max_load: 4.0,
        max_steps: 20,
        unit: LoadUnit::Concurrency,
        ceiling: None,
        opening: Vec::new(),
    };
    assert_eq!(loads(&run(&plan, |_| Verdict::Pass)), [1.0, 2.0, 3.0, 4.0]);
}

#[test]
fn a_generator_limited_first_step_leaves_no_knee_but_names_the_generator() {
    let history = run(&auto(100.0, 1000.0), |_| Verdict::GeneratorLimited);
    assert_eq!(loads(&history), [100.0]);
    let k = knee(&history);
    assert_eq!(
        (k.last_pass, k.first_fail, k.goodput_at_knee),
        (None, None, None)
    );
    assert!(k.bounded_by_generator);
}

#[test]
fn closed_loop_service_rate_comes_from_steps_where_the_server_queued() {
    let step = |load: f64, achieved: f64, waiting: Option<f64>| StepPoint {
        achieved_rate: achieved,
        mean_waiting: waiting,
        confidence: None,
        ..point(load, Verdict::Pass)
    };
    let points = [
        step(16.0, 42.0, Some(0.0)),
        step(32.0, 64.0, Some(0.2)),
        step(64.0, 74.0, Some(30.0)),
        step(45.0, 72.5, Some(12.0)),
        step(38.0, 72.4, Some(5.0)),
    ];
    assert_eq!(service_rate_from_queue(&points), Some(72.5));
    assert_eq!(service_rate_from_queue(&points[..2]), None);
    assert_eq!(service_rate_from_queue(&[step(8.0, 8.0, None)]), None);
}

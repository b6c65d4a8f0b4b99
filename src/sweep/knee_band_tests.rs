//! Tests of the knee search around the noise band: adaptive steps that end
//! within noise, re-tests, and the climb and bisection beside the band.
use super::tests::{loads, point};
use super::*;

/// Drive the search with an oracle that also says whether each measurement
/// of a load was decided (`undecided(load, nth measurement)`).
fn run_noisy(plan: &SearchPlan, oracle: impl Fn(f64, usize) -> (Verdict, bool)) -> Vec<StepPoint> {
    let mut history: Vec<StepPoint> = Vec::new();
    while let Some(load) = next_load(plan, &history) {
        let nth = history.iter().filter(|p| p.load == load).count();
        let (verdict, undecided) = oracle(load, nth);
        history.push(StepPoint {
            undecided,
            ..point(load, verdict)
        });
        assert!(history.len() <= 30, "runaway search: {history:?}");
    }
    history
}

#[test]
fn an_undecided_step_is_inside_the_interval_never_an_end() {
    // Decided passes up to 33, decided failures above 36; in between every
    // step reaches its cap undecided (its point estimate passes up to 35).
    // The interval's ends are the decided steps around that noise band,
    // and the search splits the gaps on both sides of it.
    let plan = SearchPlan::auto(8.0, 1000.0, LoadUnit::Rate);
    let history = run_noisy(&plan, |load, _| match load {
        l if l <= 33.0 => (Verdict::Pass, false),
        l if l <= 35.0 => (Verdict::Pass, true),
        l if l <= 36.0 => (Verdict::Fail, true),
        _ => (Verdict::Fail, false),
    });
    let k = knee(&history);
    let (pass, fail) = (k.last_pass.unwrap(), k.first_fail.unwrap());
    assert!(pass <= 33.0 && fail > 36.0, "{k:?} {:?}", loads(&history));
    // The band (33–36, 9%) is nearly the tolerance (10%): the ends close in
    // until the gaps beside it are under a quarter of the tolerance.
    assert!(pass >= 32.0 && fail <= 37.0, "{k:?}");
    assert!(!k.undecided.is_empty(), "{k:?}");
    assert!(k.undecided.iter().all(|&l| pass < l && l < fail), "{k:?}");
    assert!(
        history
            .iter()
            .all(|p| history.iter().filter(|q| q.load == p.load).count() == 1),
        "no load measured twice: {:?}",
        loads(&history)
    );
}

#[test]
fn the_widest_gap_around_the_band_is_split_first_upper_on_a_tie() {
    let at = |load: f64, verdict: Verdict, undecided: bool| StepPoint {
        undecided,
        ..point(load, verdict)
    };
    let plan = SearchPlan::Auto {
        start: 32.0,
        factor: 2.0,
        tolerance: 0.05,
        max_load: 1000.0,
        max_steps: 20,
        unit: LoadUnit::Rate,
        ceiling: None,
        opening: Vec::new(),
    };
    let mut history = vec![
        at(32.0, Verdict::Pass, false),
        at(40.0, Verdict::Fail, false),
        at(36.0, Verdict::Fail, true),
    ];
    // Gaps 32–36 (1.125) and 36–40 (1.111): the lower one is wider.
    assert_eq!(next_load(&plan, &history), Some((32.0f64 * 36.0).sqrt()));
    // Equal gaps: the failing side first.
    history[1].load = 40.5;
    assert_eq!(next_load(&plan, &history), Some((36.0f64 * 40.5).sqrt()));
    // The band's lowest load passed within noise: a step below it could
    // only pass further from the knee, so the gap above it is split.
    history[1].load = 40.0;
    history[2].verdict = Verdict::Pass;
    assert_eq!(next_load(&plan, &history), Some((36.0f64 * 40.0).sqrt()));
    history[2].verdict = Verdict::Fail;
    // Once the decided ends are within the tolerance, the search is over.
    history.push(at(37.0, Verdict::Fail, false));
    history.push(at(35.5, Verdict::Pass, false));
    assert_eq!(next_load(&plan, &history), None);
    let k = knee(&history);
    assert_eq!((k.last_pass, k.first_fail), (Some(35.5), Some(37.0)));
    assert_eq!(k.undecided, vec![36.0]);
}

#[test]
fn a_search_that_only_sees_noise_above_a_pass_still_ends() {
    // Every step at or above 30 is undecided (failing on its point
    // estimate); below, decided passes. No decided failure is ever seen:
    // the search climbs past the band to the maximum and ends there.
    let plan = SearchPlan::auto(8.0, 1000.0, LoadUnit::Rate);
    let history = run_noisy(&plan, |load, _| {
        if load >= 30.0 {
            (Verdict::Fail, true)
        } else {
            (Verdict::Pass, false)
        }
    });
    let k = knee(&history);
    assert_eq!(k.first_fail, None, "{k:?}");
    assert!(k.last_pass.unwrap() < 30.0);
    assert!(k.undecided.contains(&1000.0), "{k:?}");
}

#[test]
fn an_undecided_first_step_is_left_by_its_point_estimate() {
    let plan = SearchPlan::auto(32.0, 1000.0, LoadUnit::Rate);
    let failing = [StepPoint {
        undecided: true,
        ..point(32.0, Verdict::Fail)
    }];
    assert_eq!(next_load(&plan, &failing), Some(16.0));
    let passing = [StepPoint {
        undecided: true,
        ..point(32.0, Verdict::Pass)
    }];
    assert_eq!(next_load(&plan, &passing), Some(64.0));
    assert_eq!(
        knee(&passing).last_pass,
        None,
        "an undecided pass is no end"
    );
}

#[test]
fn below_an_undecided_pass_the_search_retests_it_then_steps_down_once() {
    // The first step passes within noise, the climb fails decided. A load
    // half as high may be far enough under the bound to be decided: try it.
    let plan = SearchPlan::auto(2.0, 1000.0, LoadUnit::Rate);
    let undecided_pass = |load: f64| StepPoint {
        undecided: true,
        ..point(load, Verdict::Pass)
    };
    let history = [undecided_pass(2.0), point(4.0, Verdict::Fail)];
    assert_eq!(
        next_load(&plan, &history),
        Some(2.0),
        "the pass within noise is measured again first"
    );
    let k = knee(&history);
    assert_eq!((k.last_pass, k.first_fail), (None, Some(4.0)));
    assert_eq!(k.undecided, vec![2.0]);
    // Re-tested and still within noise: step down, once; never a third time.
    let history = [
        undecided_pass(2.0),
        point(4.0, Verdict::Fail),
        undecided_pass(2.0),
    ];
    assert_eq!(next_load(&plan, &history), Some(1.0));
    // That one passes decided: the bracket has its pass end, and the
    // search bisects towards the band.
    let history = [
        undecided_pass(2.0),
        point(4.0, Verdict::Fail),
        point(1.0, Verdict::Pass),
    ];
    let k = knee(&history);
    assert_eq!((k.last_pass, k.first_fail), (Some(1.0), Some(4.0)));
    let next = next_load(&plan, &history).expect("a bisection step");
    assert!(next > 2.0 && next < 4.0, "{next}");
    // Still within noise lower down: the percentile stays near the bound,
    // a lower load gets fewer requests in its cap, so stop.
    let history = [
        undecided_pass(2.0),
        point(4.0, Verdict::Fail),
        undecided_pass(2.0),
        undecided_pass(1.0),
    ];
    assert_eq!(next_load(&plan, &history), None);
    assert_eq!(knee(&history).undecided, vec![1.0, 2.0]);
    // An undecided failure below the decided one: step down past it.
    let history = [
        StepPoint {
            undecided: true,
            ..point(2.0, Verdict::Fail)
        },
        point(4.0, Verdict::Fail),
    ];
    assert_eq!(next_load(&plan, &history), Some(1.0));
}

#[test]
fn an_undecided_first_pass_climbs_to_the_probed_service_rate_not_past_it() {
    // The calibrated start (¾ μ) passes within noise: the next load is μ,
    // which fails and brackets the knee, not 2 × ¾ μ, far into overload.
    let plan = SearchPlan::Auto {
        start: 31.5,
        factor: 2.0,
        tolerance: 0.05,
        max_load: 4096.0,
        max_steps: 16,
        unit: LoadUnit::Rate,
        ceiling: Some(42.0),
        opening: Vec::new(),
    };
    let history = [StepPoint {
        undecided: true,
        ..point(31.5, Verdict::Pass)
    }];
    assert_eq!(next_load(&plan, &history), Some(42.0));
    // Once μ has been measured and passed, the climb goes on past it.
    let history = [history[0].clone(), point(42.0, Verdict::Pass)];
    assert_eq!(next_load(&plan, &history), Some(84.0));
}

#[test]
fn above_a_band_whose_top_failed_within_noise_the_climb_is_a_quarter_step() {
    // ¾ μ passed within noise and μ failed within noise: the knee is
    // between or just above, so the next load is 1.25 μ, not 2 μ.
    let plan = SearchPlan::Auto {
        start: 54.0,
        factor: 2.0,
        tolerance: 0.05,
        max_load: 4096.0,
        max_steps: 16,
        unit: LoadUnit::Rate,
        ceiling: Some(72.0),
        opening: Vec::new(),
    };
    let within_noise = |load: f64, verdict: Verdict| StepPoint {
        undecided: true,
        ..point(load, verdict)
    };
    let history = [
        within_noise(54.0, Verdict::Pass),
        within_noise(72.0, Verdict::Fail),
    ];
    assert_eq!(next_load(&plan, &history), Some(90.0));
}

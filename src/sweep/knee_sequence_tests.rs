//! The whole search in fake time: calibrated start, adaptive steps on
//! synthetic sample streams, the noise band, the bracket and its
//! confidences. No clock: each step is a seeded stream of requests looked
//! at every 250 ms of fake time, as the live sweep does.
use super::*;
use crate::metrics::RequestRecord;
use crate::sweep::adaptive::{window_point, AdaptiveRule};
use crate::sweep::calibrate::plan_after;
use crate::sweep::slo::Slo;
use crate::sweep::testing::{look_until_end, ok};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::time::Duration;

/// The synthetic server's knee for `p99_ttft_ms<=300`: 1% of requests are
/// over 300 ms here, and the share doubles with every 1 req/s (about the
/// slot server's slope near its knee).
pub(super) const KNEE: f64 = 35.0;

fn share_over(load: f64) -> f64 {
    (0.01 * 2f64.powf(load - KNEE)).min(1.0)
}

/// Requests due every 1/load s for `length`; each is over 300 ms (900 ms)
/// with probability `share_over(load)`, else 50–250 ms.
fn stream(load: f64, length: Duration, seed: u64) -> Vec<RequestRecord> {
    let mut rng = StdRng::seed_from_u64(seed);
    let n = (load * length.as_secs_f64()) as u64;
    (0..n)
        .map(|i| {
            let sent_ms = (i as f64 * 1000.0 / load) as u64;
            let ttft = if rng.random::<f64>() < share_over(load) {
                900
            } else {
                rng.random_range(50..250)
            };
            let mut r = ok(sent_ms, ttft, &[], 1);
            r.index = i as usize;
            r
        })
        .collect()
}

/// One adaptive step: the rule looks every 250 ms until it ends the step.
/// Returns the step's point and when it ended.
pub(super) fn step(load: f64, seed: u64) -> (StepPoint, Duration) {
    let rule = AdaptiveRule {
        window_start: Duration::from_secs(2),
        min_length: Duration::from_secs(8),
        min_requests: 100,
        cap: Duration::from_secs(32),
        level: 0.9,
        prior: None,
    };
    let slos = vec!["p99_ttft_ms<=300".parse::<Slo>().unwrap()];
    let records = stream(load, rule.cap + Duration::from_secs(2), seed);
    let (t, _) = look_until_end(&rule, &slos, &records);
    // As the live judge does: the step's verdict is the point estimate over
    // its whole window (the requests in flight drain), and its confidence
    // is judged once more over that window, corrected for the tests.
    let window: Vec<RequestRecord> = records
        .iter()
        .filter(|r| r.due >= rule.window_start && r.due < t)
        .cloned()
        .collect();
    let point = window_point(load, &slos, &window, &rule);
    (point, t)
}

/// The calibrated search (μ = 42.1 req/s, the slot server's) at tolerance
/// 5% and at most 6 steps, each step run by [`step`].
pub(super) fn sweep(seed: u64) -> (Vec<StepPoint>, Duration) {
    let plan = plan_after(
        &SearchPlan::auto(1.0, 4096.0, LoadUnit::Rate),
        Some(4.0 / 0.095),
    )
    .with_stops(0.05, 6);
    let mut history: Vec<StepPoint> = Vec::new();
    let mut took = Duration::ZERO;
    while let Some(load) = next_load(&plan, &history) {
        let (point, t) = step(load, seed * 100 + history.len() as u64);
        took += t;
        history.push(point);
    }
    (history, took)
}

#[test]
fn the_calibrated_adaptive_search_brackets_the_knee_with_decided_ends() {
    let (history, took) = sweep(1);
    let loads: Vec<f64> = history.iter().map(|p| p.load).collect();
    let summary: Vec<(f64, Verdict, bool)> = history
        .iter()
        .map(|p| ((p.load * 100.0).round() / 100.0, p.verdict, p.undecided))
        .collect();
    // The step sequence: ¾ μ passes, μ fails, then the bracket is split.
    assert!((loads[0] - 0.75 * 42.105).abs() < 0.01, "{summary:?}");
    assert_eq!(history[0].verdict, Verdict::Pass, "{summary:?}");
    assert!((loads[1] - 42.105).abs() < 0.01, "{summary:?}");
    assert_eq!(history[1].verdict, Verdict::Fail, "{summary:?}");
    assert!(!history[0].undecided && !history[1].undecided);
    assert!(history.len() <= 6, "{summary:?}");
    assert!(took <= Duration::from_secs(150), "{took:?}: {summary:?}");
    let k = knee(&history);
    let (pass, fail) = (k.last_pass.unwrap(), k.first_fail.unwrap());
    // Both ends are decided, at the confidence asked, and contain the knee.
    assert!(pass < KNEE && KNEE < fail, "{k:?} {summary:?}");
    assert!(k.last_pass_confidence.unwrap() >= 0.9, "{k:?}");
    assert!(k.first_fail_confidence.unwrap() >= 0.9, "{k:?}");
    for end in [pass, fail] {
        let p = history.iter().find(|p| p.load == end).unwrap();
        assert!(!p.undecided, "an end is never undecided: {summary:?}");
    }
    // Undecided steps lie inside the interval.
    for p in history.iter().filter(|p| p.undecided) {
        assert!(pass < p.load && p.load < fail, "{summary:?}");
        assert!(k.undecided.contains(&p.load), "{k:?}");
    }
    // No step below half the knee.
    assert!(loads.iter().all(|&l| l >= KNEE / 2.0), "{summary:?}");
}

#[test]
fn over_seeds_the_ends_are_decided_and_contain_the_knee() {
    // The bracket's ends are decided at 90% each; over ten seeded sweeps
    // the knee may fall outside at most once or twice by chance.
    let mut outside = 0;
    let mut within_ten_percent = 0;
    for seed in 10..20 {
        let (history, _) = sweep(seed);
        let k = knee(&history);
        let (Some(pass), Some(fail)) = (k.last_pass, k.first_fail) else {
            panic!("no bracket: {history:?}");
        };
        outside += usize::from(!(pass < KNEE && KNEE < fail));
        within_ten_percent += usize::from(pass >= 0.9 * KNEE && fail <= 1.1 * KNEE);
        assert!(k.last_pass_confidence.unwrap() >= 0.9, "{k:?}");
        assert!(k.first_fail_confidence.unwrap() >= 0.9, "{k:?}");
    }
    assert!(outside <= 2, "{outside}/10 brackets missed the knee");
    assert!(
        within_ten_percent >= 8,
        "{within_ten_percent}/10 within ±10%"
    );
}

//! Adaptive steps driven by synthetic sample streams in fake time.
use super::*;
use crate::sweep::testing::ok;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const RATE: f64 = 40.0;

fn rule() -> AdaptiveRule {
    AdaptiveRule {
        window_start: Duration::from_secs(2),
        min_length: Duration::from_secs(8),
        min_requests: 100,
        cap: Duration::from_secs(120),
        level: 0.9,
        prior: None,
    }
}

/// Requests due every 1/RATE s; a fraction `p_over` (independently) has a
/// TTFT of 900 ms, the rest 50–250 ms. Each finishes at its first token.
fn stream(p_over: f64, seed: u64) -> Vec<crate::metrics::RequestRecord> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..(RATE * 130.0) as u64)
        .map(|i| {
            let sent_ms = (i as f64 * 1000.0 / RATE) as u64;
            let ttft = if rng.random::<f64>() < p_over {
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

/// Look every 250 ms, as the live step does, until the rule ends the step.
fn run(records: &[crate::metrics::RequestRecord], slo: &str) -> (Duration, Look) {
    run_with(&rule(), records, slo)
}

fn run_with(
    rule: &AdaptiveRule,
    records: &[crate::metrics::RequestRecord],
    slo: &str,
) -> (Duration, Look) {
    crate::sweep::testing::look_until_end(rule, &[slo.parse::<Slo>().unwrap()], records)
}

#[test]
fn the_verdict_is_tested_at_checkpoints_and_corrected_for_their_number() {
    let r = rule();
    let secs = |v: Vec<Duration>| v.iter().map(Duration::as_secs).collect::<Vec<_>>();
    assert_eq!(secs(r.checkpoints()), [8, 16, 32, 64]);
    assert_eq!(r.tests(), 5, "four checkpoints and the final judgement");
    let c = crate::sweep::confidence::SloConfidence {
        samples: 1000,
        effective_samples: 1000,
        effective_within: 990,
        quantile: 0.99,
        pass: 0.99,
        fail: 0.0,
        interval_low_ms: None,
        interval_high_ms: None,
    };
    let a = adjusted(c, 5);
    assert!((a.pass - 0.95).abs() < 1e-12 && a.fail == 0.0, "{a:?}");
    assert_eq!(adjusted(c, 1), c);
}

#[test]
fn a_clear_pass_ends_at_the_first_checkpoint_with_enough_samples() {
    // No sample over the bound: a p99 needs ⌈ln(0.1/5)/ln(0.99)⌉ = 390
    // samples for 90% after the correction for 5 tests; at 40 req/s after
    // a 2 s warm-up the 8 s checkpoint has 240, the 16 s one 560.
    let (t, look) = run(&stream(0.0, 1), "p99_ttft_ms<=300");
    assert_eq!(look.decision, Decision::Pass);
    assert!(look.confidence >= 0.9);
    assert!(
        t > Duration::from_secs(16) && t <= Duration::from_secs(17),
        "ended at {t:?}"
    );
}

#[test]
fn a_clear_fail_ends_at_the_minimum() {
    let (t, look) = run(&stream(0.05, 2), "p99_ttft_ms<=300");
    assert_eq!(look.decision, Decision::Fail);
    assert!(t <= Duration::from_secs(9), "ended at {t:?}");
}

#[test]
fn fast_successes_do_not_hide_the_failures_of_a_step() {
    // The clear pass above, with every 30th request failed (3.3%): each
    // failure is a miss, so the step fails at its minimum.
    let mut records = stream(0.0, 1);
    for r in records.iter_mut().filter(|r| r.index % 30 == 7) {
        r.error = Some(crate::metrics::RequestError {
            kind: crate::metrics::ErrorKind::Timeout,
            status: None,
            message: "timeout".into(),
        });
    }
    let (t, look) = run(&records, "p99_ttft_ms<=300");
    assert_eq!(look.decision, Decision::Fail);
    assert!(look.confidence >= 0.9);
    assert!(t <= Duration::from_secs(9), "ended at {t:?}");
}

#[test]
fn a_step_straddling_the_bound_runs_on_instead_of_deciding_on_a_noisy_sample() {
    // Exactly 1% over 300 ms: the true p99 sits on the bound. With 90%
    // confidence asked, the rule may decide only when chance makes the
    // sample look clear-cut, which the binomial test bounds at 10% per side.
    let mut ended_at_minimum = 0;
    let mut capped = 0;
    let mut long_runs = 0;
    for seed in 0..10 {
        let (t, look) = run(&stream(0.01, 100 + seed), "p99_ttft_ms<=300");
        ended_at_minimum += usize::from(t <= Duration::from_secs(9));
        long_runs += usize::from(t >= Duration::from_secs(24));
        if t >= rule().cap {
            capped += 1;
            assert_eq!(look.decision, Decision::Undecided);
        }
    }
    // A chance decision is possible (the test bounds each side's error at
    // 10%), but rare: most straddling steps must run on.
    assert!(
        ended_at_minimum <= 2,
        "{ended_at_minimum}/10 ended at their minimum"
    );
    // Looking every 250 ms is repeated testing, so chance decisions add up
    // over a long step; still, most straddling steps run well past their
    // minimum before anything is decided.
    assert!(
        long_runs >= 5,
        "most run past 3× their minimum: {long_runs}/10 ({capped} capped)"
    );
}

#[test]
fn a_slow_request_in_flight_holds_back_the_sample_behind_it() {
    let slos = vec!["p99_ttft_ms<=300".parse::<Slo>().unwrap()];
    let recs = stream(0.0, 3);
    let t = Duration::from_secs(10);
    let finished: Vec<_> = recs.iter().filter(|r| r.due < t).cloned().collect();
    let all = rule().look(t, &slos, &finished, &[]);
    let held = rule().look(t, &slos, &finished, &[Duration::from_secs(3)]);
    assert!(
        held.samples < all.samples / 4,
        "{} vs {}",
        held.samples,
        all.samples
    );
    assert!(!held.end, "too few samples before the slow request to end");
}

#[test]
fn a_pass_while_the_queue_still_grows_runs_on_to_the_cap() {
    // One server taking 1/30 s per request, offered 40 req/s: the number in
    // flight climbs all step long. The first token comes at once (20–60 ms,
    // independent); the rest waits its turn. Every TTFT meets the SLO, so
    // only the steady-state gate can keep the step running.
    let mut rng = StdRng::seed_from_u64(7);
    let mut free_at = 0u64;
    let records: Vec<_> = (0..(RATE * 30.0) as u64)
        .map(|i| {
            let sent = (i as f64 * 1000.0 / RATE) as u64;
            free_at = free_at.max(sent) + 33;
            let ttft = rng.random_range(20..60);
            let mut r = ok(sent, ttft, &[(free_at - sent).saturating_sub(ttft)], 2);
            r.index = i as usize;
            r
        })
        .collect();
    let capped = AdaptiveRule {
        cap: Duration::from_secs(20),
        ..rule()
    };
    let (t, look) = run_with(&capped, &records, "p99_ttft_ms<=60000");
    assert!(!look.steady, "the queue grew");
    assert_eq!(t, capped.cap, "ended at {t:?}, before the cap");
}

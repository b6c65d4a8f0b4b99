//! Unit tests of `kneecap run`'s command layer.

use super::*;
use crate::cmd::args::run::run_config;
use crate::cmd::args::tests_support::{argv, run_args};

fn config(line: &str) -> RunConfig {
    run_config(&run_args(&argv(line))).expect("a valid command line")
}

fn late_by(ms: f64) -> stats::Distribution {
    stats::distribution(&vec![ms / 1e3; 100], &KNEECAP_PERCENTILES)
}

#[test]
fn releases_are_seeded_and_follow_num_prompts() {
    let load = config("--request-rate 10 --num-prompts 50 --seed 3").load;
    let (a, b) = (
        releases(&load, 7, None).unwrap(),
        releases(&load, 7, None).unwrap(),
    );
    match (a, b) {
        (Releases::Scheduled(a), Releases::Scheduled(b)) => {
            assert_eq!(a.len(), 50);
            assert_eq!(a, b, "the same seed gives the same schedule");
        }
        other => panic!("expected schedules, got {other:?}"),
    }
}

#[test]
fn a_self_timed_trace_is_due_at_its_timestamps_over_the_speed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.jsonl");
    std::fs::write(&path, "").unwrap();
    let base = format!(
        "--dataset-name timed_trace --dataset-path {}",
        path.display()
    );
    let stamps = [0.5, 1.0, 3.0];
    let at = |line: &str| match releases(&config(line).load, 3, Some(&stamps)).unwrap() {
        Releases::Scheduled(d) => d.iter().map(Duration::as_secs_f64).collect::<Vec<_>>(),
        other => panic!("expected a schedule, got {other:?}"),
    };
    assert_eq!(at(&base), [0.5, 1.0, 3.0]);
    assert_eq!(
        at(&format!("{base} --trace-speed 2 --request-rate 100")),
        [0.25, 0.5, 1.5]
    );
    assert_eq!(at(&format!("{base} --duration 2s")), [0.5, 1.0]);
    // --no-self-timed: the rate sets the schedule (10 req/s, 3 requests: last at 0.3 s).
    let d = at(&format!(
        "{base} --no-self-timed --request-rate 10 --num-prompts 3"
    ));
    assert!((d[2] - 0.3).abs() < 1e-9, "{d:?}");
    assert_eq!(
        describe_arrival(&config(&format!("{base} --trace-speed 4")).load),
        "trace timestamps at 4x speed (self-timed)"
    );
    // The lateness bound follows the trace's own rate: 3 requests over 1.5 s.
    let cfg = config(&format!("{base} --trace-speed 2"));
    let due = Releases::Scheduled(schedule::trace_offsets(&stamps, 2.0));
    assert_eq!(offered_rate(&cfg, &due), 2.0);
}

#[test]
fn a_duration_with_an_infinite_rate_is_a_closed_loop_for_that_time() {
    let load = config("--duration 3s --max-concurrency 4").load;
    match releases(&load, 7, None).unwrap() {
        Releases::ClosedFor(d) => assert_eq!(d, Duration::from_secs(3)),
        other => panic!("expected a closed loop, got {other:?}"),
    }
}

#[test]
fn lateness_is_judged_only_for_a_finite_rate_schedule() {
    let check = engine::probe::SelfCheck::default();
    let judged = generator_verdict(&Summary::default(), &late_by(500.0), 10.0, true, &check);
    assert!(judged.lateness_judged);
    assert!(judged.health.limited, "500 ms late at 10 req/s");
    // 2 ms late: over the 1 ms bound at 200 req/s, under the 10 ms one at 10 req/s.
    assert!(
        generator_verdict(&Summary::default(), &late_by(2.0), 200.0, true, &check)
            .health
            .limited
    );
    assert!(
        !generator_verdict(&Summary::default(), &late_by(2.0), 10.0, true, &check)
            .health
            .limited
    );
    let unjudged = generator_verdict(
        &Summary::default(),
        &late_by(500.0),
        f64::INFINITY,
        false,
        &check,
    );
    assert!(!unjudged.lateness_judged);
    assert!(!unjudged.health.limited, "{:?}", unjudged.health.reasons);
}

#[test]
fn arrivals_are_described_in_words() {
    for (line, want) in [
        ("--request-rate 10", "poisson 10 req/s"),
        (
            "--request-rate 10 --burstiness 0.5",
            "gamma(burstiness 0.5) 10 req/s",
        ),
        ("--request-rate inf", "all at once (rate inf)"),
        (
            "--request-rate inf --max-concurrency 8",
            "closed loop (rate inf), max concurrency 8",
        ),
    ] {
        assert_eq!(describe_arrival(&config(line).load), want, "{line}");
    }
}

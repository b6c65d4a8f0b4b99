//! The one step judge's tests: verdicts, windows, warnings, and the
//! search's point built beside the row.
use super::*;
use crate::metrics::stats::Distribution;

fn steady_evidence() -> StepEvidence {
    StepEvidence {
        load: 10.0,
        window: (Duration::from_secs(1), Duration::from_secs(11)),
        counts: StepCounts {
            n_requests: 100,
            completed: 100,
            ..StepCounts::default()
        },
        steadiness: Steadiness {
            steady: true,
            offered_rate: 10.0,
            achieved_rate: 10.0,
            ..Steadiness::default()
        },
        ..StepEvidence::default()
    }
}

fn queue(waiting: impl Fn(f64) -> f64) -> Vec<QueueSample> {
    (0..12)
        .map(|i| QueueSample {
            t_s: i as f64,
            waiting: Some(waiting(i as f64)),
            running: Some(4.0),
            kv_cache_usage: None,
            preemptions: None,
        })
        .collect()
}

#[test]
fn a_steady_step_with_a_flat_queue_passes_with_its_window_and_queue_means() {
    let e = StepEvidence {
        queue: queue(|_| 0.0),
        ..steady_evidence()
    };
    let step = judge_step(e, 0.01).row;
    assert_eq!(step.verdict, Verdict::Pass, "{:?}", step.reasons);
    assert_eq!((step.window_start_s, step.window_end_s), (1.0, 11.0));
    assert_eq!(step.mean_waiting, Some(0.0));
    assert_eq!(step.mean_running, Some(4.0));
}

#[test]
fn a_growing_server_queue_makes_a_client_steady_step_fail_as_not_steady() {
    let e = StepEvidence {
        queue: queue(|t| 10.0 * t),
        ..steady_evidence()
    };
    let step = judge_step(e, 0.01).row;
    assert_eq!(step.verdict, Verdict::Fail);
    assert!(!step.steady.steady);
    assert!(
        step.reasons.iter().any(|r| r.starts_with("not steady:")),
        "{:?}",
        step.reasons
    );
}

#[test]
fn the_error_rate_counts_failures_over_every_request_due_in_the_window() {
    let mut e = steady_evidence();
    e.counts.failed = 3;
    e.counts.completed = 97;
    let step = judge_step(e, 0.01).row;
    assert_eq!(step.error_rate, 0.03);
    assert_eq!(step.verdict, Verdict::Fail);
}

#[test]
fn a_step_where_most_requests_failed_is_judged_on_them_not_on_the_generator() {
    let mut e = steady_evidence();
    e.counts.failed = 100;
    e.counts.completed = 0;
    e.counts.errors_by_kind.insert("http_status".into(), 100);
    e.counts.first_errors = vec![r#"HTTP 400 Bad Request: {"message":"too long"}"#.into()];
    e.generator = health::generator_health(
        &Distribution {
            max_ms: 655.0,
            percentiles_ms: vec![(99.0, 655.0)],
            ..Distribution::default()
        },
        1.0,
        None,
        None,
    );
    assert!(
        e.generator.limited,
        "the self-check alone would blame the generator"
    );
    let step = judge_step(e, 0.01).row;
    assert_eq!(step.verdict, Verdict::Fail);
    assert_eq!(
        step.reasons,
        vec![
            "most requests failed: 100 of 100 (100%, 1% allowed; http_status 100); \
              first: HTTP 400 Bad Request: \"too long\""
        ]
    );
    assert!(!step.generator.limited && step.generator.reasons.is_empty());
    assert!(
        step.warnings
            .iter()
            .any(|w| w.contains("self-check is not weighed")),
        "{:?}",
        step.warnings
    );
}

#[test]
fn an_interrupted_step_keeps_its_data_but_not_a_verdict() {
    let e = StepEvidence {
        interrupted: true,
        ..steady_evidence()
    };
    let step = judge_step(e, 0.01).row;
    assert_eq!(step.verdict, Verdict::Interrupted);
    assert_eq!(step.n_requests, 100);
}

#[test]
fn warnings_gather_the_generators_and_the_callers() {
    let mut e = steady_evidence();
    e.generator.warnings.push("CPU 85% busy".into());
    e.extra_warnings.push("shard 1/2 started late".into());
    let step = judge_step(e, 0.01).row;
    assert_eq!(
        step.warnings,
        vec!["CPU 85% busy", "shard 1/2 started late"]
    );
}

/// A p99 TTFT SLO missed on its point estimate, its binomial test
/// within noise at 0.9 (neither pass nor fail that sure).
fn undecided_miss() -> StepEvidence {
    let mut e = steady_evidence();
    e.slo_outcomes = vec![SloOutcome {
        slo: "p99_ttft_ms<=500".parse().unwrap(),
        observed_ms: Some(520.0),
        pass: false,
        samples: 100,
        tail_samples: 1,
        attained: None,
        warning: Some("few tail samples".into()),
        failures: 0,
        failed_in_tail: 0,
        vllm_observed_ms: None,
    }];
    let c = SloConfidence {
        samples: 100,
        effective_samples: 80,
        effective_within: 79,
        quantile: 0.99,
        pass: 0.3,
        fail: 0.6,
        interval_low_ms: None,
        interval_high_ms: None,
    };
    e.confidence = Some((0.9, vec![Some(c)]));
    e
}

#[test]
fn a_step_failing_only_on_an_slo_within_noise_is_undecided_for_the_search() {
    let judged = judge_step(undecided_miss(), 0.01);
    let (row, point) = (&judged.row, &judged.point);
    assert_eq!(row.verdict, Verdict::Fail);
    assert_eq!(row.decision.as_ref().unwrap().decision, Decision::Undecided);
    assert_eq!(point.verdict, Verdict::Fail);
    assert!(point.undecided, "{point:?}");
    assert_eq!(point.confidence, Some(0.6), "its surest missed SLO");
    assert_eq!(point.level, Some(0.9));
    assert_eq!(point.evidence[0].unwrap().effective_within, 79);
    assert_eq!((point.offered_rate, point.achieved_rate), (10.0, 10.0));
    assert!(
        row.warnings.is_empty(),
        "the confidence replaces the warning"
    );
}

#[test]
fn a_step_that_also_failed_its_error_bound_or_steadiness_is_decided() {
    let mut e = undecided_miss();
    e.counts.failed = 5;
    e.counts.completed = 95;
    let judged = judge_step(e, 0.01);
    assert_eq!(judged.row.verdict, Verdict::Fail);
    assert!(!judged.point.undecided, "failed on errors, decided");
    let e = StepEvidence {
        queue: queue(|t| 10.0 * t),
        ..undecided_miss()
    };
    assert!(!judge_step(e, 0.01).point.undecided, "not steady, decided");
}

#[test]
fn an_interrupted_step_is_interrupted_in_its_row_and_its_point() {
    let e = StepEvidence {
        interrupted: true,
        ..undecided_miss()
    };
    let judged = judge_step(e, 0.01);
    assert_eq!(judged.row.verdict, Verdict::Interrupted);
    assert_eq!(judged.point.verdict, Verdict::Interrupted);
    assert_eq!(judged.point.confidence, None);
}

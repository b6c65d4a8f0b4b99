//! Failures: the verdict on a step where most requests failed. Such a step
//! is judged on its failures (how many, of which kinds, what the server said
//! first), not on its latencies or on the generator's self-check: a request
//! that failed measured no latency, and one that failed at once frees its
//! slot at once, so a wall of them strains the generator with work the
//! server never did. PURE: no clock, no I/O.

use super::evidence::StepCounts;
use crate::metrics::health::GeneratorHealth;
use crate::metrics::refusal::server_message;
use crate::metrics::ErrorKind;
use crate::result::Verdict;

/// A step is judged on its failures when more than this share of its
/// requests failed.
pub const MOSTLY_FAILED: f64 = 0.5;

/// Failure kinds that may be the client's own doing: kneecap cancelling what
/// was in flight at the step's end, or not getting a connection through (a
/// starved generator shows both). Every other kind is the server's answer.
const CLIENT_SIDE: [ErrorKind; 2] = [ErrorKind::Cancelled, ErrorKind::Connect];

/// The verdict on the step's failures, when more than [`MOSTLY_FAILED`] of
/// its requests failed: a failure, for one reason (the step line shows a
/// step's first): how many failed, of which kinds, and the first server
/// message. The generator's verdict is then set aside: not limited, its
/// reasons kept as a warning. `None` otherwise (the step is judged as usual).
pub fn judge_failures(
    counts: &StepCounts,
    max_error_rate: f64,
    generator: &mut GeneratorHealth,
) -> Option<(Verdict, Vec<String>)> {
    if counts.n_requests == 0 {
        return None;
    }
    let error_rate = counts.failed as f64 / counts.n_requests as f64;
    // Only failures on the server's side count here: a starved generator's
    // own cancellations and connect errors are the generator's to explain.
    let answered: u64 = counts
        .errors_by_kind
        .iter()
        .filter(|(kind, _)| !CLIENT_SIDE.iter().any(|c| c.as_str() == kind.as_str()))
        .map(|(_, n)| *n)
        .sum();
    if answered as f64 / counts.n_requests as f64 <= MOSTLY_FAILED {
        return None;
    }
    let kinds: Vec<String> = counts
        .errors_by_kind
        .iter()
        .map(|(kind, n)| format!("{kind} {n}"))
        .collect();
    let mut reason = format!(
        "most requests failed: {} of {} ({}, {} allowed",
        counts.failed,
        counts.n_requests,
        percent(error_rate),
        percent(max_error_rate)
    );
    if !kinds.is_empty() {
        reason.push_str(&format!("; {}", kinds.join(", ")));
    }
    reason.push(')');
    if let Some(first) = counts.first_errors.first() {
        reason.push_str(&format!("; {}", first_failure(first)));
    }
    set_aside(generator);
    Some((Verdict::Fail, vec![reason]))
}

/// Not limited; what the self-check found becomes a warning.
fn set_aside(g: &mut GeneratorHealth) {
    if g.limited {
        g.warnings.push(format!(
            "the generator's self-check is not weighed when most requests failed: {}",
            g.reasons.join("; ")
        ));
    }
    g.limited = false;
    g.reasons.clear();
}

/// `first: HTTP 400 Bad Request: "the server's message"`, or the client's
/// own line for a failure without a status.
fn first_failure(line: &str) -> String {
    match line
        .strip_prefix("HTTP ")
        .and_then(|rest| rest.split_once(": "))
    {
        Some((status, _)) => format!("first: HTTP {status}: \"{}\"", server_message(line)),
        None => format!("first: {line}"),
    }
}

/// A 0–1 fraction as a percentage with at most one decimal.
fn percent(fraction: f64) -> String {
    format!("{}%", (fraction * 1000.0).round() / 10.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    const REFUSED: &str = r#"HTTP 400 Bad Request: {"error":{"message":"This model's maximum context length is 4096 tokens. However, your request has 4096 input tokens.","type":"BadRequestError","param":null,"code":400}}"#;

    fn counts(failed: usize, n: usize, kinds: &[(&str, u64)], first: &[&str]) -> StepCounts {
        StepCounts {
            n_requests: n,
            completed: n - failed,
            failed,
            errors_by_kind: kinds
                .iter()
                .map(|(k, v)| (k.to_string(), *v))
                .collect::<BTreeMap<_, _>>(),
            first_errors: first.iter().map(|s| s.to_string()).collect(),
            ..StepCounts::default()
        }
    }

    fn strained() -> GeneratorHealth {
        GeneratorHealth {
            limited: true,
            reasons: vec!["dispatch lateness p99 655.000 ms > 100.000 ms bound".into()],
            ..GeneratorHealth::default()
        }
    }

    #[test]
    fn a_step_of_refusals_is_judged_on_them_with_the_servers_message() {
        let c = counts(83, 83, &[("http_status", 83)], &[REFUSED]);
        let mut g = strained();
        let (verdict, reasons) = judge_failures(&c, 0.01, &mut g).expect("judged on its failures");
        assert_eq!(verdict, Verdict::Fail);
        assert_eq!(
            reasons,
            vec!["most requests failed: 83 of 83 (100%, 1% allowed; http_status 83); \
                  first: HTTP 400 Bad Request: \"This model's maximum context length is 4096 tokens. \
                  However, your request has 4096 input tokens.\""]
        );
        assert!(!g.limited && g.reasons.is_empty(), "set aside: {g:?}");
        assert_eq!(g.warnings.len(), 1);
        assert!(
            g.warnings[0].contains("dispatch lateness p99 655.000 ms"),
            "{g:?}"
        );
        for line in reasons.iter().chain(&g.warnings) {
            let lower = line.to_lowercase();
            assert!(
                !lower.contains("generator limited") && !lower.contains("generator-limited"),
                "{line}"
            );
        }
    }

    #[test]
    fn failures_of_several_kinds_are_listed_and_a_healthy_generator_sets_nothing_aside() {
        let c = counts(
            70,
            100,
            &[("http_status", 40), ("timeout", 30)],
            &["no complete response within --request-timeout 30s"],
        );
        let mut g = GeneratorHealth::default();
        let (_, reasons) = judge_failures(&c, 0.01, &mut g).unwrap();
        assert_eq!(
            reasons,
            vec![
                "most requests failed: 70 of 100 (70%, 1% allowed; http_status 40, timeout 30); \
                  first: no complete response within --request-timeout 30s"
            ]
        );
        assert_eq!(g, GeneratorHealth::default());
    }

    #[test]
    fn half_or_fewer_failed_is_judged_as_usual() {
        let mut g = strained();
        let c = counts(50, 100, &[("http_status", 50)], &[REFUSED]);
        assert_eq!(judge_failures(&c, 0.01, &mut g), None);
        assert_eq!(judge_failures(&counts(0, 0, &[], &[]), 0.01, &mut g), None);
        assert_eq!(g, strained(), "the generator's verdict stands");
        let c = counts(51, 100, &[("http_status", 51)], &[REFUSED]);
        assert!(judge_failures(&c, 0.01, &mut g).is_some());
    }

    #[test]
    fn a_starved_generators_cancellations_and_connect_errors_leave_its_verdict_standing() {
        let mut g = strained();
        let c = counts(86, 100, &[("cancelled", 64), ("connect", 22)], &[]);
        assert_eq!(judge_failures(&c, 0.01, &mut g), None);
        assert_eq!(g, strained());
    }
}

//! Tests of two sweeps side by side.
use super::*;
use crate::compare::rule::{judge, parse};
use crate::result::fixture::sweep_with;

#[test]
fn a_knee_drop_beyond_the_bracket_is_significant() {
    let a = sweep_with(&[8.0, 16.0, 32.0], &[40.0]);
    let b = sweep_with(&[8.0, 16.0], &[24.0, 32.0]);
    let c = compare("a.json", &a, "b.json", &b);
    assert!(c.knee_significant, "{}", c.knee_verdict);
    assert!(c.knee_verdict.contains("below"));
    assert_eq!(c.knee_change_pct, Some(-50.0));
    assert_eq!(c.levels.len(), 3, "8, 16 and 32 are common");
    assert!(c.warnings.is_empty(), "{:?}", c.warnings);
    let knee = pairs(&parse("knee_drop>10%").unwrap().metric, &a, &b, ["a", "b"]).unwrap();
    assert!(judge(&parse("knee_drop>10%").unwrap(), &knee).held);
}

#[test]
fn overlapping_brackets_are_within_resolution() {
    let a = sweep_with(&[32.0], &[40.0]);
    let b = sweep_with(&[36.0], &[44.0]);
    let c = compare("a", &a, "b", &b);
    assert!(!c.knee_significant);
    assert!(c.knee_verdict.contains("within measurement resolution"));
}

#[test]
fn different_workloads_and_slos_warn_loudly() {
    let a = sweep_with(&[8.0], &[16.0]);
    let mut b = sweep_with(&[8.0], &[16.0]);
    b.workload.mean_input_tokens = 2048.0;
    b.slos = vec!["p99_ttft_ms<=200".into()];
    let c = compare("a", &a, "b", &b);
    assert_eq!(c.warnings.len(), 2, "{:?}", c.warnings);
    assert!(c.warnings[0].contains("apples to oranges") && c.warnings[0].contains("input tokens"));
    assert!(render(&c, false).starts_with("WARNING"));
}

#[test]
fn latency_conditions_use_every_common_level_and_unknown_stats_are_errors() {
    let a = sweep_with(&[8.0, 16.0], &[24.0]);
    let b = sweep_with(&[8.0, 16.0], &[24.0]);
    let m = parse("p99_ttft_increase>20%").unwrap().metric;
    assert_eq!(pairs(&m, &a, &b, ["a", "b"]).unwrap().len(), 3);
    let m = parse("p95_ttft_increase>20%").unwrap().metric;
    assert!(pairs(&m, &a, &b, ["a", "b"])
        .unwrap_err()
        .contains("p90, p99"));
    let none = sweep_with(&[], &[]);
    let m = parse("knee_drop>10%").unwrap().metric;
    assert!(pairs(&m, &a, &none, ["a.json", "b.json"])
        .unwrap_err()
        .contains("b.json"));
}

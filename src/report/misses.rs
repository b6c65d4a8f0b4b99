//! Misses: how a sweep shows the SLOs that failed requests changed. A failed
//! or timed-out request is a sample of +∞ (`sweep::slo`), so beside the
//! statistic judged, a step's row keeps vLLM's over successes only; this
//! module writes the two side by side for the console (the notes under the
//! step table, the live step line) and the HTML table. Pure formatting.

use super::numbers::load_label;
use crate::result::sweep::{SloOutcomeRow, StepResult, SweepResult, INFINITE};

/// The statistic judged, as text: `812.3`, `∞ (failed)` (it lands on a
/// failed request), or `-` without samples.
pub fn observed_text(o: &SloOutcomeRow) -> String {
    match o.observed_ms {
        Some(v) if v.is_finite() => format!("{v:.1}"),
        Some(_) => "-".into(),
        None if o.samples > 0 => INFINITE.into(),
        None => "-".into(),
    }
}

/// vLLM's statistic (over successes) as text, `-` when none succeeded.
pub fn vllm_text(o: &SloOutcomeRow) -> String {
    match o.vllm_observed_ms {
        Some(v) if v.is_finite() => format!("{v:.1}"),
        _ => "-".into(),
    }
}

/// `6 failed, 3 of 3 tail samples`.
fn failed_text(o: &SloOutcomeRow) -> String {
    format!(
        "{} failed, {} of {} tail samples",
        o.failures, o.failed_in_tail, o.tail_samples
    )
}

/// When failed requests were among its samples: `p99_ttft_ms<=500: vLLM
/// 45.2 ms (successes only), with failures ∞ (failed) (6 failed, 3 of 3
/// tail samples) → FAIL`.
pub fn describe(o: &SloOutcomeRow) -> Option<String> {
    (o.failures > 0).then(|| {
        format!(
            "{}: vLLM {} ms (successes only), with failures {} ({}) → {}",
            o.slo,
            vllm_text(o),
            observed_text(o),
            failed_text(o),
            if o.pass { "pass" } else { "FAIL" }
        )
    })
}

/// One step's SLOs that failed requests changed, one line each.
pub fn step_notes(s: &StepResult) -> Vec<String> {
    s.slo_outcomes.iter().filter_map(describe).collect()
}

/// The lines under the console's step table: what failed requests did to
/// each step's SLOs (empty when no request failed).
pub fn lines(r: &SweepResult) -> Vec<String> {
    let mut out = Vec::new();
    for s in r.steps_by_load() {
        for note in step_notes(s) {
            out.push(format!(
                "  {} {}: {note}",
                load_label(s.load),
                r.load_unit()
            ));
        }
    }
    if !out.is_empty() {
        out.insert(
            0,
            "failed requests counted as misses (+∞): vLLM's statistic is over successes only"
                .into(),
        );
    }
    out
}

/// The HTML table of the same: headers, and one row per step and SLO that
/// failed requests changed (no rows when no request failed).
pub fn table(r: &SweepResult) -> (Vec<String>, Vec<Vec<String>>) {
    let heads = [
        "load",
        "SLO",
        "vLLM (successes)",
        "with failures",
        "failed",
        "failed in tail",
        "SLO verdict",
    ]
    .iter()
    .map(|h| h.to_string())
    .collect();
    let rows = r
        .steps_by_load()
        .into_iter()
        .flat_map(|s| {
            s.slo_outcomes
                .iter()
                .filter(|o| o.failures > 0)
                .map(move |o| {
                    vec![
                        load_label(s.load),
                        o.slo.clone(),
                        vllm_text(o),
                        observed_text(o),
                        o.failures.to_string(),
                        format!("{} of {}", o.failed_in_tail, o.tail_samples),
                        if o.pass { "pass" } else { "fail" }.into(),
                    ]
                })
        })
        .collect();
    (heads, rows)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::result::sweep::Verdict;

    fn outcome(observed: Option<f64>, failures: usize, pass: bool) -> SloOutcomeRow {
        SloOutcomeRow {
            slo: "p99_ttft_ms<=500".into(),
            observed_ms: observed,
            pass,
            samples: 300,
            tail_samples: 3,
            failures,
            failed_in_tail: failures.min(3),
            vllm_observed_ms: (failures > 0).then_some(45.24),
            ..SloOutcomeRow::default()
        }
    }

    fn sweep_of(outcomes: Vec<SloOutcomeRow>) -> SweepResult {
        SweepResult {
            steps: vec![StepResult {
                load: 8.0,
                verdict: Verdict::Fail,
                slo_outcomes: outcomes,
                ..StepResult::default()
            }],
            ..SweepResult::default()
        }
    }

    #[test]
    fn a_statistic_on_a_failure_reads_infinite_and_one_without_samples_a_dash() {
        assert_eq!(observed_text(&outcome(None, 6, false)), "∞ (failed)");
        assert_eq!(observed_text(&outcome(Some(123.45), 1, true)), "123.5");
        let empty = SloOutcomeRow {
            samples: 0,
            ..outcome(None, 0, false)
        };
        assert_eq!(observed_text(&empty), "-");
    }

    #[test]
    fn both_statistics_are_shown_only_where_failures_changed_them() {
        let r = sweep_of(vec![outcome(None, 6, false), outcome(Some(40.0), 0, true)]);
        let lines = lines(&r);
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert_eq!(
            lines[1],
            "  8.0 req/s: p99_ttft_ms<=500: vLLM 45.2 ms (successes only), \
             with failures ∞ (failed) (6 failed, 3 of 3 tail samples) → FAIL"
        );
        let (heads, rows) = table(&r);
        assert_eq!(heads.len(), rows[0].len());
        let want = [
            "8.0",
            "p99_ttft_ms<=500",
            "45.2",
            "∞ (failed)",
            "6",
            "3 of 3",
            "fail",
        ];
        assert_eq!(rows, vec![want.map(String::from).to_vec()]);
    }

    #[test]
    fn a_sweep_without_failures_has_no_notes() {
        let r = sweep_of(vec![outcome(Some(40.0), 0, true)]);
        assert!(lines(&r).is_empty());
        assert!(table(&r).1.is_empty());
    }
}

//! Two runs side by side (A = baseline, B = candidate): throughput, goodput
//! and latency stats with their relative change, and whether each change is
//! bigger than noise. PURE.
//!
//! Significance rules:
//! - latency medians and percentiles: a seeded bootstrap 95% CI of B − A from
//!   the per-request arrays (`latencies` for E2EL; `ttfts`, `itls` with
//!   `--save-detailed`), resampling requests (a request's ITLs stay
//!   together); significant when the CI excludes 0. Without the
//!   arrays in both files (and always for means and TPOT): unknown.
//! - request throughput and goodput: completions taken as Poisson counts over
//!   the duration, normal-approximation 95% CI; token throughput: unknown.

use super::input::RunData;
use super::layout::{change_pct, fmt_change, fmt_opt, Table};
use super::rule::{Metric, Pair, Stat};
use super::stats::{bootstrap_diffs, poisson_rate_diff, DiffInterval, RESAMPLES, SEED};
use crate::metrics::stats::{percentile, percentile_key};
use serde::Serialize;
use std::fmt::Write;

/// The comparison of two runs.
#[derive(Debug, Clone, Serialize)]
pub struct RunComparison {
    pub baseline_file: String,
    pub candidate_file: String,
    pub rows: Vec<Row>,
    /// Load / shape mismatches: the comparison is apples to oranges.
    pub warnings: Vec<String>,
}

/// One metric, both sides.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// The JSON key (`p99_ttft_ms`, `request_throughput`).
    pub metric: String,
    pub baseline: Option<f64>,
    pub candidate: Option<f64>,
    pub change_pct: Option<f64>,
    /// 95% CI of candidate − baseline, when it could be computed.
    pub ci: Option<DiffInterval>,
    /// `significant`, `not significant` or `unknown (why)`.
    pub significance: String,
}

/// Compare run `a` (baseline, file `fa`) with `b` (candidate).
pub fn compare(fa: &str, a: &RunData, fb: &str, b: &RunData) -> RunComparison {
    let mut rows = vec![
        rate_row("request_throughput", a, b, |r| r.get("completed")),
        rate_row("request_goodput", a, b, |r| {
            Some(r.get("request_goodput")? * r.get("duration")?)
        }),
        plain_row(
            "output_throughput",
            a,
            b,
            "unknown (token counts are not Poisson)",
        ),
    ];
    for name in ["ttft", "tpot", "itl", "e2el"] {
        rows.extend(latency_rows(name, a, b));
    }
    for key in ["gpu_joules_per_output_token", "gpu_mean_power_w"] {
        rows.push(plain_row(key, a, b, "unknown (one energy total per run)"));
    }
    rows.retain(|r| r.baseline.is_some() || r.candidate.is_some());
    RunComparison {
        baseline_file: fa.to_string(),
        candidate_file: fb.to_string(),
        rows,
        warnings: mismatches(a, b),
    }
}

fn plain_row(key: &str, a: &RunData, b: &RunData, why: &str) -> Row {
    let (x, y) = (a.get(key), b.get(key));
    Row {
        metric: key.to_string(),
        baseline: x,
        candidate: y,
        change_pct: change_pct(x, y),
        ci: None,
        significance: why.to_string(),
    }
}

fn with_ci(mut row: Row, ci: Option<DiffInterval>, why: &str) -> Row {
    row.significance = match ci {
        Some(ci) if ci.significant() => "significant".into(),
        Some(_) => "not significant".into(),
        None => format!("unknown ({why})"),
    };
    row.ci = ci;
    row
}

fn rate_row(key: &str, a: &RunData, b: &RunData, count: impl Fn(&RunData) -> Option<f64>) -> Row {
    let ci = match (count(a), a.get("duration"), count(b), b.get("duration")) {
        (Some(ca), Some(ta), Some(cb), Some(tb)) => poisson_rate_diff(ca, ta, cb, tb),
        _ => None,
    };
    with_ci(plain_row(key, a, b, ""), ci, "no count or duration")
}

/// `mean_/median_/pNN_<name>_ms` keys in either file, in A's order then B's.
fn latency_keys(name: &str, a: &RunData, b: &RunData) -> Vec<String> {
    let suffix = format!("_{name}_ms");
    let mut keys: Vec<String> = Vec::new();
    for (k, _) in a.scalars.iter().chain(&b.scalars) {
        let stat = k.strip_suffix(&suffix).unwrap_or("std");
        let wanted = stat == "mean" || stat == "median" || stat.starts_with('p');
        if wanted && !keys.contains(k) {
            keys.push(k.clone());
        }
    }
    keys
}

/// The rows of one latency metric; medians and percentiles get their CIs
/// from one shared bootstrap of the per-request arrays.
fn latency_rows(name: &str, a: &RunData, b: &RunData) -> Vec<Row> {
    let keys = latency_keys(name, a, b);
    let suffix = format!("_{name}_ms");
    let ps: Vec<Option<f64>> = keys
        .iter()
        .map(|k| match k.strip_suffix(&suffix).unwrap_or(k) {
            "median" => Some(50.0),
            s => s.strip_prefix('p').and_then(|x| x.parse::<f64>().ok()),
        })
        .collect();
    let tested: Vec<f64> = ps.iter().flatten().copied().collect();
    let (cis, why) = match (a.sample_ms(name), b.sample_ms(name)) {
        (Some(xa), Some(xb)) => {
            let cis = bootstrap_diffs(&xa, &xb, &tested, RESAMPLES, SEED);
            (cis, "too few samples")
        }
        _ => (None, "no per-request arrays in both files"),
    };
    let mut next = cis.into_iter().flatten();
    keys.iter()
        .zip(ps)
        .map(|(key, p)| match p {
            Some(_) => with_ci(plain_row(key, a, b, ""), next.next(), why),
            None => with_ci(
                plain_row(key, a, b, ""),
                None,
                "only medians and percentiles are tested",
            ),
        })
        .collect()
}

/// What makes two runs incomparable: different offered load or request shape.
fn mismatches(a: &RunData, b: &RunData) -> Vec<String> {
    let mut diffs = Vec::new();
    for key in ["request_rate", "max_concurrency", "burstiness"] {
        let (x, y) = (a.get(key), b.get(key));
        if x != y {
            diffs.push(format!("{key} {} vs {}", fmt_opt(x, 2), fmt_opt(y, 2)));
        }
    }
    let mean = |r: &RunData, total: &str| Some(r.get(total)? / r.get("completed")?);
    for (total, name) in [
        ("total_input_tokens", "mean input tokens"),
        ("total_output_tokens", "mean output tokens"),
    ] {
        let (x, y) = (mean(a, total), mean(b, total));
        if change_pct(x, y).is_some_and(|c| c.abs() > 5.0) {
            diffs.push(format!("{name} {} vs {}", fmt_opt(x, 1), fmt_opt(y, 1)));
        }
    }
    if diffs.is_empty() {
        return vec![];
    }
    vec![format!(
        "WARNING: the runs' workloads differ ({}): the comparison is apples to oranges",
        diffs.join("; ")
    )]
}

/// Baseline/candidate values for a `--fail-if` metric.
pub fn pairs(
    metric: &Metric,
    a: &RunData,
    b: &RunData,
    files: [&str; 2],
) -> Result<Vec<Pair>, String> {
    let key =
        match metric {
            Metric::KneeDrop => return Err(
                "knee_drop needs two sweeps; these are runs (use throughput_drop or goodput_drop)"
                    .into(),
            ),
            Metric::GoodputDrop => "request_goodput".to_string(),
            Metric::ThroughputDrop => "request_throughput".to_string(),
            Metric::LatencyIncrease { stat, name } => {
                let s = match stat {
                    Stat::Mean => "mean".to_string(),
                    Stat::Median => "median".to_string(),
                    Stat::P(p) => percentile_key(*p),
                };
                format!("{s}_{name}_ms")
            }
        };
    let value = |r: &RunData, file: &str| {
        r.get(&key)
            .filter(|v| v.is_finite())
            .or_else(|| from_samples(metric, r))
            .ok_or_else(|| missing(file, &key))
    };
    Ok(vec![Pair {
        place: key.clone(),
        baseline: value(a, files[0])?,
        candidate: value(b, files[1])?,
    }])
}

/// A latency percentile computed from the per-request array when the key is missing.
fn from_samples(metric: &Metric, r: &RunData) -> Option<f64> {
    let Metric::LatencyIncrease { stat, name } = metric else {
        return None;
    };
    let p = match stat {
        Stat::Mean => return None,
        Stat::Median => 50.0,
        Stat::P(p) => *p,
    };
    let mut v = r.values(name)?;
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    Some(percentile(&v, p) * 1000.0)
}

fn missing(file: &str, key: &str) -> String {
    let hint = match key {
        "request_goodput" => " (run with --goodput to record it)",
        k if k.contains("_itl_") || k.contains("_tpot_") => {
            " (see --percentile-metrics / --metric-percentiles)"
        }
        _ => "",
    };
    format!("{file} has no '{key}'{hint}")
}

/// Render as aligned text or Markdown.
pub fn render(c: &RunComparison, markdown: bool) -> String {
    let mut out = String::new();
    for w in &c.warnings {
        let _ = if markdown {
            writeln!(out, "> **{w}**\n")
        } else {
            writeln!(out, "{w}\n")
        };
    }
    let mut t = Table::new(&[
        "metric",
        &format!("A ({})", c.baseline_file),
        &format!("B ({})", c.candidate_file),
        "change",
        "95% CI of B−A",
        "significance",
    ]);
    for r in &c.rows {
        let ci = r.ci.map_or_else(
            || "-".to_string(),
            |ci| {
                format!(
                    "[{}, {}]",
                    fmt_opt(Some(ci.low), 2),
                    fmt_opt(Some(ci.high), 2)
                )
            },
        );
        t.push(vec![
            r.metric.clone(),
            fmt_opt(r.baseline, 2),
            fmt_opt(r.candidate, 2),
            fmt_change(r.change_pct),
            ci,
            r.significance.clone(),
        ]);
    }
    out.push_str(&if markdown {
        t.to_markdown()
    } else {
        t.to_text()
    });
    out.push_str(
        "\nsignificance: latency medians/percentiles by a seeded bootstrap (1000 resamples of the \
         requests) of the per-request arrays; request rates as Poisson counts; \
         significant = the 95% CI excludes 0\n",
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::input::{parse, Input};

    fn run(latencies: &[f64], completed: usize, p99: f64) -> RunData {
        let text = serde_json::json!({
            "duration": 10.0, "completed": completed, "request_rate": 10.0,
            "total_input_tokens": completed * 100, "total_output_tokens": completed * 10,
            "request_throughput": completed as f64 / 10.0,
            "median_e2el_ms": 1000.0 * latencies[latencies.len() / 2], "p99_e2el_ms": p99,
            "latencies": latencies,
        })
        .to_string();
        match parse(&text).unwrap() {
            Input::Run(r) => *r,
            Input::Sweep(_) => panic!("run expected"),
        }
    }

    fn latencies(scale: f64) -> Vec<f64> {
        (0..100)
            .map(|i| scale * (1.0 + (i % 17) as f64 / 10.0))
            .collect()
    }

    fn row<'a>(c: &'a RunComparison, key: &str) -> &'a Row {
        c.rows.iter().find(|r| r.metric == key).unwrap()
    }

    #[test]
    fn identical_runs_are_not_significant() {
        let a = run(&latencies(0.5), 100, 1200.0);
        let c = compare("a", &a, "b", &a);
        assert_eq!(row(&c, "median_e2el_ms").significance, "not significant");
        assert_eq!(row(&c, "p99_e2el_ms").significance, "not significant");
        assert_eq!(
            row(&c, "request_throughput").significance,
            "not significant"
        );
        assert!(c.warnings.is_empty());
    }

    #[test]
    fn doubled_latencies_are_significant() {
        let (a, b) = (
            run(&latencies(0.5), 100, 1200.0),
            run(&latencies(1.0), 100, 2400.0),
        );
        let c = compare("a", &a, "b", &b);
        let median = row(&c, "median_e2el_ms");
        assert_eq!(median.significance, "significant");
        assert!(median.ci.unwrap().low > 0.0);
        assert_eq!(median.change_pct.map(|x| x.round()), Some(100.0));
    }

    #[test]
    fn without_arrays_significance_is_unknown() {
        let a = RunData {
            scalars: vec![("p99_ttft_ms".into(), 10.0)],
            ..Default::default()
        };
        let c = compare("a", &a, "b", &a);
        assert!(row(&c, "p99_ttft_ms").significance.starts_with("unknown"));
    }

    #[test]
    fn fail_if_pairs_name_the_missing_key_and_file() {
        let a = run(&latencies(0.5), 100, 1200.0);
        let m = crate::compare::rule::parse("goodput_drop>5%")
            .unwrap()
            .metric;
        let e = pairs(&m, &a, &a, ["a.json", "b.json"]).unwrap_err();
        assert!(
            e.contains("a.json") && e.contains("request_goodput") && e.contains("--goodput"),
            "{e}"
        );
        let m = crate::compare::rule::parse("p90_e2el_increase>5%")
            .unwrap()
            .metric;
        assert_eq!(
            pairs(&m, &a, &a, ["a", "b"]).unwrap().len(),
            1,
            "computed from latencies"
        );
        let m = crate::compare::rule::parse("knee_drop>5%").unwrap().metric;
        assert!(pairs(&m, &a, &a, ["a", "b"])
            .unwrap_err()
            .contains("two sweeps"));
    }
}

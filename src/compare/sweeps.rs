//! Two sweeps side by side (A = baseline, B = candidate): the knee brackets
//! and whether they differ beyond the measurement resolution, goodput at the
//! knee, μ, queue onset, per-common-load latencies, and loud warnings when the
//! workloads or SLOs differ. PURE.

use super::layout::{change_pct, fmt_change, fmt_opt, Table};
use super::rule::{Metric, Pair, Stat};
use super::stats::KneeInterval;
use crate::result::sweep::{Dist, StepResult, SweepResult, Verdict};
use serde::Serialize;
use std::fmt::Write;

/// The comparison of two sweeps.
#[derive(Debug, Clone, Serialize)]
pub struct SweepComparison {
    pub baseline: SweepSide,
    pub candidate: SweepSide,
    /// Load unit (`req/s` or `streams`).
    pub unit: String,
    /// Relative change of the last passing load, percent.
    pub knee_change_pct: Option<f64>,
    /// The knee brackets do not overlap.
    pub knee_significant: bool,
    pub knee_verdict: String,
    /// Load levels both sweeps measured.
    pub levels: Vec<Level>,
    /// Workload / SLO mismatches: the comparison is apples to oranges.
    pub warnings: Vec<String>,
}

/// One sweep's headline numbers.
#[derive(Debug, Clone, Serialize)]
pub struct SweepSide {
    pub file: String,
    pub knee: KneeInterval,
    pub goodput_at_knee: Option<f64>,
    pub service_rate_estimate: Option<f64>,
    pub queue_onset_load: Option<f64>,
    pub peak_achieved_rate: Option<f64>,
    pub slos: Vec<String>,
    pub workload: String,
}

/// A load level present in both sweeps.
#[derive(Debug, Clone, Serialize)]
pub struct Level {
    pub load: f64,
    pub baseline: LevelStats,
    pub candidate: LevelStats,
}

/// What the table shows for one side at one level.
#[derive(Debug, Clone, Serialize)]
pub struct LevelStats {
    pub verdict: Verdict,
    pub achieved_rate: f64,
    pub ttft_p50_ms: Option<f64>,
    pub ttft_p99_ms: Option<f64>,
    pub tpot_p99_ms: Option<f64>,
}

/// Compare sweep `a` (baseline, from file `fa`) with `b` (candidate).
pub fn compare(fa: &str, a: &SweepResult, fb: &str, b: &SweepResult) -> SweepComparison {
    let (sa, sb) = (side(fa, a), side(fb, b));
    let overlaps = sa.knee.overlaps(&sb.knee);
    let known = !sa.knee.unknown() && !sb.knee.unknown();
    let knee_verdict = if !known {
        "knee change unknown: a sweep has no passing or failing step".to_string()
    } else if overlaps {
        "knee change within measurement resolution (the brackets overlap)".to_string()
    } else if sb.knee.last_pass.unwrap_or(0.0) >= sa.knee.first_fail.unwrap_or(f64::INFINITY) {
        format!(
            "knee change significant: B's knee is above A's (the brackets do not overlap{})",
            joint_confidence(b.knee.last_pass_confidence, a.knee.first_fail_confidence)
        )
    } else {
        format!(
            "knee change significant: B's knee is below A's (the brackets do not overlap{})",
            joint_confidence(a.knee.last_pass_confidence, b.knee.first_fail_confidence)
        )
    };
    SweepComparison {
        knee_change_pct: change_pct(sa.knee.last_pass, sb.knee.last_pass),
        knee_significant: known && !overlaps,
        knee_verdict,
        levels: common_levels(a, b),
        warnings: mismatches(a, b),
        unit: a.load_unit().to_string(),
        baseline: sa,
        candidate: sb,
    }
}

/// The knees are ordered as stated when the higher sweep's passing step
/// really passes and the lower sweep's failing step really fails; the two
/// sweeps are independent, so that holds with the product of their
/// confidences (adaptive sweeps only).
fn joint_confidence(pass: Option<f64>, fail: Option<f64>) -> String {
    match pass.zip(fail) {
        Some((p, f)) => format!("; confidence {:.0}%", p * f * 100.0),
        None => String::new(),
    }
}

fn side(file: &str, r: &SweepResult) -> SweepSide {
    SweepSide {
        file: file.to_string(),
        knee: KneeInterval {
            last_pass: r.knee.last_pass,
            first_fail: r.knee.first_fail,
        },
        goodput_at_knee: r.knee.goodput_at_knee,
        service_rate_estimate: r.service_rate_estimate,
        queue_onset_load: r.queue_onset_load,
        peak_achieved_rate: r.steps.iter().map(|s| s.achieved_rate).reduce(f64::max),
        slos: r.slos.clone(),
        workload: crate::report::table::workload_line(r)
            .trim_start_matches("workload: ")
            .to_string(),
    }
}

fn same_load(x: f64, y: f64) -> bool {
    (x - y).abs() <= 1e-6 * x.abs().max(y.abs()).max(1.0)
}

/// Steps at the same load in both sweeps, by load.
fn common_steps<'a>(
    a: &'a SweepResult,
    b: &'a SweepResult,
) -> Vec<(&'a StepResult, &'a StepResult)> {
    a.steps_by_load()
        .into_iter()
        .filter_map(|sa| {
            b.steps
                .iter()
                .find(|sb| same_load(sa.load, sb.load))
                .map(|sb| (sa, sb))
        })
        .collect()
}

fn common_levels(a: &SweepResult, b: &SweepResult) -> Vec<Level> {
    let stats = |s: &StepResult| {
        let some = |d: &Dist, v: f64| (d.count > 0).then_some(v);
        LevelStats {
            verdict: s.verdict,
            achieved_rate: s.achieved_rate,
            ttft_p50_ms: some(&s.ttft_ms, s.ttft_ms.p50),
            ttft_p99_ms: some(&s.ttft_ms, s.ttft_ms.p99),
            tpot_p99_ms: some(&s.tpot_ms, s.tpot_ms.p99),
        }
    };
    common_steps(a, b)
        .into_iter()
        .map(|(sa, sb)| Level {
            load: sa.load,
            baseline: stats(sa),
            candidate: stats(sb),
        })
        .collect()
}

/// What makes two sweeps incomparable: a different workload or different SLOs.
fn mismatches(a: &SweepResult, b: &SweepResult) -> Vec<String> {
    let (wa, wb) = (&a.workload, &b.workload);
    let mut diffs = Vec::new();
    let mut text = |name: &str, x: &str, y: &str| {
        if x != y {
            diffs.push(format!("{name} '{x}' vs '{y}'"));
        }
    };
    text("mode", a.mode.name(), b.mode.name());
    text("dataset", &wa.dataset, &wb.dataset);
    text("arrival", &wa.arrival, &wb.arrival);
    let mut num = |name: &str, x: f64, y: f64| {
        if change_pct(Some(x), Some(y)).is_some_and(|c| c.abs() > 5.0) {
            diffs.push(format!("{name} {x:.1} vs {y:.1}"));
        }
    };
    num(
        "mean input tokens",
        wa.mean_input_tokens,
        wb.mean_input_tokens,
    );
    num(
        "mean output tokens",
        wa.mean_output_tokens,
        wb.mean_output_tokens,
    );
    num("burstiness", wa.burstiness, wb.burstiness);
    let mut warnings = Vec::new();
    if !diffs.is_empty() {
        warnings.push(format!(
            "WARNING: the workloads differ ({}): the comparison is apples to oranges",
            diffs.join("; ")
        ));
    }
    let sorted = |v: &[String]| {
        let mut v: Vec<String> = v.iter().map(|s| s.replace(' ', "")).collect();
        v.sort();
        v
    };
    if sorted(&a.slos) != sorted(&b.slos) || a.max_error_rate != b.max_error_rate {
        warnings.push(format!(
            "WARNING: the SLOs differ ({}, max error rate {} vs {}, max error rate {}): \
             the knees answer different questions",
            slo_list(&a.slos),
            a.max_error_rate,
            slo_list(&b.slos),
            b.max_error_rate
        ));
    }
    for (name, r) in [("A", a), ("B", b)] {
        if r.interrupted || !r.complete {
            warnings.push(format!(
                "warning: sweep {name} did not finish (interrupted or still running): its knee may be incomplete"
            ));
        }
        if r.knee.non_monotonic {
            warnings.push(format!(
                "warning: sweep {name} is not monotonic (a step passed above a failing one): its knee is noisy"
            ));
        }
    }
    if a.simulated != b.simulated {
        warnings.push(
            "WARNING: one sweep ran against the built-in simulator, the other did not".into(),
        );
    }
    warnings
}

fn slo_list(slos: &[String]) -> String {
    if slos.is_empty() {
        "none".into()
    } else {
        slos.join(", ")
    }
}

/// Baseline/candidate pairs for a `--fail-if` metric; latency metrics give
/// one pair per common load level (the condition holds if any level worsens).
pub fn pairs(
    metric: &Metric,
    a: &SweepResult,
    b: &SweepResult,
    files: [&str; 2],
) -> Result<Vec<Pair>, String> {
    let one = |what: &str, x: Option<f64>, y: Option<f64>| match (x, y) {
        (Some(x), Some(y)) => Ok(vec![Pair {
            place: what.to_string(),
            baseline: x,
            candidate: y,
        }]),
        (None, _) => Err(format!("{}: {what} is unknown", files[0])),
        (_, None) => Err(format!("{}: {what} is unknown", files[1])),
    };
    let peak = |r: &SweepResult| r.steps.iter().map(|s| s.achieved_rate).reduce(f64::max);
    match metric {
        Metric::KneeDrop => one("last passing load", a.knee.last_pass, b.knee.last_pass),
        Metric::GoodputDrop => one(
            "goodput at the knee",
            a.knee.goodput_at_knee,
            b.knee.goodput_at_knee,
        ),
        Metric::ThroughputDrop => one("peak achieved rate", peak(a), peak(b)),
        Metric::LatencyIncrease { stat, name } => latency_pairs(*stat, name, a, b),
    }
}

fn latency_pairs(
    stat: Stat,
    name: &str,
    a: &SweepResult,
    b: &SweepResult,
) -> Result<Vec<Pair>, String> {
    let pick = dist_stat(stat)?;
    let dist = |s: &StepResult| match name {
        "ttft" => s.ttft_ms.clone(),
        "tpot" => s.tpot_ms.clone(),
        "itl" => s.itl_ms.clone(),
        _ => s.e2el_ms.clone(),
    };
    let pairs: Vec<Pair> = common_steps(a, b)
        .into_iter()
        .filter(|(sa, sb)| dist(sa).count > 0 && dist(sb).count > 0)
        .map(|(sa, sb)| Pair {
            place: format!(
                "{stat} {name} at {} {}",
                fmt_opt(Some(sa.load), 1),
                a.load_unit()
            ),
            baseline: pick(&dist(sa)),
            candidate: pick(&dist(sb)),
        })
        .collect();
    if pairs.is_empty() {
        return Err(format!(
            "no load level with {name} samples in both sweeps; the sweeps share no load level to compare"
        ));
    }
    Ok(pairs)
}

fn dist_stat(stat: Stat) -> Result<fn(&Dist) -> f64, String> {
    Ok(match stat {
        Stat::Mean => |d| d.mean,
        Stat::Median => |d| d.p50,
        Stat::P(50.0) => |d| d.p50,
        Stat::P(90.0) => |d| d.p90,
        Stat::P(99.0) => |d| d.p99,
        Stat::P(99.9) => |d| d.p999,
        Stat::P(p) => {
            return Err(format!(
                "sweep steps keep only mean, median, p90, p99 and p99.9, not p{p}"
            ))
        }
    })
}

/// Render as aligned text (`markdown` = false) or Markdown.
pub fn render(c: &SweepComparison, markdown: bool) -> String {
    let mut out = String::new();
    for w in &c.warnings {
        let _ = if markdown {
            writeln!(out, "> **{w}**")
        } else {
            writeln!(out, "{w}")
        };
    }
    if !c.warnings.is_empty() {
        out.push('\n');
    }
    let table = |t: Table| {
        if markdown {
            t.to_markdown()
        } else {
            t.to_text()
        }
    };
    out.push_str(&table(headline(c)));
    let _ = writeln!(out, "\n{}", c.knee_verdict);
    if let Some(pct) = c.knee_change_pct {
        let _ = writeln!(out, "last passing load: {} (B vs A)", fmt_change(Some(pct)));
    }
    out.push('\n');
    if c.levels.is_empty() {
        out.push_str("no common load levels: the sweeps measured different loads\n");
    } else {
        let _ = writeln!(
            out,
            "common load levels ({}; latencies in ms; A → B):\n",
            c.unit
        );
        out.push_str(&table(levels_table(c)));
    }
    for (name, side) in [("A", &c.baseline), ("B", &c.candidate)] {
        let _ = writeln!(out, "\n{name} SLOs: {}", slo_list(&side.slos));
        let _ = write!(out, "{name} workload: {}", side.workload);
    }
    out.push('\n');
    out
}

fn headline(c: &SweepComparison) -> Table {
    let (a, b) = (&c.baseline, &c.candidate);
    let mut t = Table::new(&[
        "",
        &format!("A ({})", a.file),
        &format!("B ({})", b.file),
        "change",
    ]);
    let bracket = |k: &KneeInterval| match (k.last_pass, k.first_fail) {
        (Some(p), Some(f)) => format!("{p:.1} .. {f:.1}"),
        (Some(p), None) => format!("≥ {p:.1}"),
        (None, Some(f)) => format!("< {f:.1}"),
        (None, None) => "-".into(),
    };
    t.push(vec![
        format!("knee ({})", c.unit),
        bracket(&a.knee),
        bracket(&b.knee),
        fmt_change(c.knee_change_pct),
    ]);
    let mut row = |name: &str, x: Option<f64>, y: Option<f64>| {
        t.push(vec![
            name.into(),
            fmt_opt(x, 1),
            fmt_opt(y, 1),
            fmt_change(change_pct(x, y)),
        ]);
    };
    row(
        "goodput at knee (req/s)",
        a.goodput_at_knee,
        b.goodput_at_knee,
    );
    row(
        "service rate μ (req/s)",
        a.service_rate_estimate,
        b.service_rate_estimate,
    );
    row(
        &format!("queue onset ({})", c.unit),
        a.queue_onset_load,
        b.queue_onset_load,
    );
    row(
        "peak achieved (req/s)",
        a.peak_achieved_rate,
        b.peak_achieved_rate,
    );
    t
}

fn levels_table(c: &SweepComparison) -> Table {
    let mut t = Table::new(&[
        "load",
        "verdict",
        "achieved",
        "TTFT p50",
        "TTFT p99",
        "TPOT p99",
        "TTFT p99 change",
    ]);
    let arrow = |x: String, y: String| format!("{x} → {y}");
    for l in &c.levels {
        let (a, b) = (&l.baseline, &l.candidate);
        t.push(vec![
            fmt_opt(Some(l.load), 1),
            arrow(
                crate::report::table::verdict_label(a.verdict),
                crate::report::table::verdict_label(b.verdict),
            ),
            arrow(
                fmt_opt(Some(a.achieved_rate), 1),
                fmt_opt(Some(b.achieved_rate), 1),
            ),
            arrow(fmt_opt(a.ttft_p50_ms, 1), fmt_opt(b.ttft_p50_ms, 1)),
            arrow(fmt_opt(a.ttft_p99_ms, 1), fmt_opt(b.ttft_p99_ms, 1)),
            arrow(fmt_opt(a.tpot_p99_ms, 1), fmt_opt(b.tpot_p99_ms, 1)),
            fmt_change(change_pct(a.ttft_p99_ms, b.ttft_p99_ms)),
        ]);
    }
    t
}

#[cfg(test)]
#[path = "sweeps_tests.rs"]
mod tests;

//! `kneecap report` renderings of one saved result. PURE: returns Strings.
//!
//! Sweeps: the console table and charts exactly as a sweep ends (text), the
//! step table as Markdown or CSV (one row per step, for CI), or the sweep JSON.
//! Runs: a compact summary in `vllm bench serve`'s layout, or key/value
//! Markdown, CSV or JSON of every numeric key.

use super::input::RunData;
use super::layout::Table;
use crate::report::table;
use crate::result::sweep::{StepResult, SweepResult};
use serde_json::{json, Map, Value};
use std::fmt::Write;

/// Output format of `kneecap report` / `kneecap compare`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Text,
    Markdown,
    Csv,
    Json,
}

/// Chart width of the re-rendered sweep, as at the end of `kneecap sweep`.
const CHART_WIDTH: u32 = 100;

/// Render a sweep in `format`.
pub fn sweep(r: &SweepResult, format: Format) -> String {
    match format {
        Format::Text => format!(
            "{}{}\n",
            table::render(r),
            crate::report::chart::render(r, CHART_WIDTH)
        ),
        Format::Markdown => sweep_markdown(r),
        Format::Csv => step_table(r, true).to_csv(),
        Format::Json => serde_json::to_string_pretty(r).unwrap_or_default() + "\n",
    }
}

fn sweep_markdown(r: &SweepResult) -> String {
    let mut out = String::new();
    if r.simulated {
        out.push_str("> **SIMULATED**: numbers come from kneecap's built-in simulator\n\n");
    }
    let _ = writeln!(out, "{}\n", table::units_caption(r));
    out.push_str(&step_table(r, false).to_markdown());
    out.push('\n');
    for line in table::summary_lines(r) {
        let _ = writeln!(out, "- {line}");
    }
    out
}

/// One row per step, sorted by load. `raw` keeps full precision (CSV).
pub fn step_table(r: &SweepResult, raw: bool) -> Table {
    let mut t = Table::new(&[
        "load",
        "verdict",
        "offered_rate",
        "achieved_rate",
        "goodput",
        "error_rate",
        "ttft_p50_ms",
        "ttft_p99_ms",
        "tpot_p99_ms",
        "itl_p99_ms",
        "e2el_p99_ms",
        "mean_waiting",
        "steady",
        "reason",
    ]);
    for s in r.steps_by_load() {
        t.push(step_row(s, raw));
    }
    t
}

fn step_row(s: &StepResult, raw: bool) -> Vec<String> {
    let n = |v: f64, prec: usize| {
        if raw {
            if v.is_finite() {
                format!("{v}")
            } else {
                String::new()
            }
        } else {
            table::num(v, prec)
        }
    };
    let lat = |d: &crate::result::sweep::Dist, v: f64| {
        if d.count == 0 {
            String::new()
        } else {
            n(v, 1)
        }
    };
    vec![
        n(s.load, 1),
        s.verdict.name().to_string(),
        n(s.offered_rate, 2),
        n(s.achieved_rate, 2),
        n(s.goodput, 2),
        n(s.error_rate, 4),
        lat(&s.ttft_ms, s.ttft_ms.p50),
        lat(&s.ttft_ms, s.ttft_ms.p99),
        lat(&s.tpot_ms, s.tpot_ms.p99),
        lat(&s.itl_ms, s.itl_ms.p99),
        lat(&s.e2el_ms, s.e2el_ms.p99),
        s.mean_waiting.map_or_else(String::new, |w| n(w, 1)),
        s.steady.steady.to_string(),
        s.reasons.first().cloned().unwrap_or_default(),
    ]
}

/// Render a run in `format`.
pub fn run(r: &RunData, format: Format) -> String {
    match format {
        Format::Text => run_text(r),
        Format::Markdown => scalar_table(r).to_markdown(),
        Format::Csv => scalar_table(r).to_csv(),
        Format::Json => {
            let mut m = Map::new();
            for (k, v) in &r.texts {
                m.insert(k.clone(), json!(v));
            }
            for (k, v) in &r.scalars {
                let value = if v.is_finite() {
                    json!(v)
                } else {
                    json!("inf")
                };
                m.insert(k.clone(), value);
            }
            serde_json::to_string_pretty(&Value::Object(m)).unwrap_or_default() + "\n"
        }
    }
}

fn scalar_table(r: &RunData) -> Table {
    let mut t = Table::new(&["key", "value"]);
    for (k, v) in &r.scalars {
        t.push(vec![k.clone(), format!("{v}")]);
    }
    t
}

/// vLLM's labels, in vLLM's order, for whichever keys the file has.
const TOTALS: [(&str, &str); 13] = [
    ("completed", "Successful requests:"),
    ("failed", "Failed requests:"),
    ("max_concurrency", "Maximum request concurrency:"),
    ("request_rate", "Request rate configured (RPS):"),
    ("duration", "Benchmark duration (s):"),
    ("total_input_tokens", "Total input tokens:"),
    ("total_output_tokens", "Total generated tokens:"),
    ("request_throughput", "Request throughput (req/s):"),
    ("request_goodput", "Request goodput (req/s):"),
    ("output_throughput", "Output token throughput (tok/s):"),
    (
        "max_output_tokens_per_s",
        "Peak output token throughput (tok/s):",
    ),
    ("max_concurrent_requests", "Peak concurrent requests:"),
    ("total_token_throughput", "Total token throughput (tok/s):"),
];

/// Latency blocks: key infix, vLLM's section title, short name.
const BLOCKS: [(&str, &str, &str); 4] = [
    ("ttft", "Time to First Token", "TTFT"),
    ("tpot", "Time per Output Token (excl. 1st token)", "TPOT"),
    ("itl", "Inter-token Latency", "ITL"),
    ("e2el", "End-to-end Latency", "E2EL"),
];

fn run_text(r: &RunData) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{:=^50}", " Serving Benchmark Result ");
    for (key, label) in TOTALS {
        let Some(v) = r.get(key).filter(|v| v.is_finite()) else {
            continue;
        };
        let is_count = matches!(key, "completed" | "failed" | "max_concurrency")
            || key.starts_with("total_") && key.ends_with("_tokens");
        if is_count {
            let _ = writeln!(out, "{label:<40} {:<10}", v as i64);
        } else {
            let _ = writeln!(out, "{label:<40} {v:<10.2}");
        }
    }
    for (infix, title, short) in BLOCKS {
        let suffix = format!("_{infix}_ms");
        let keys: Vec<&(String, f64)> = r
            .scalars
            .iter()
            .filter(|(k, _)| k.ends_with(&suffix) && !k.starts_with("std_"))
            .collect();
        if keys.is_empty() {
            continue;
        }
        let _ = writeln!(out, "{title:-^50}");
        for (k, v) in keys {
            let stat = &k[..k.len() - suffix.len()];
            let label = match stat {
                "mean" => format!("Mean {short} (ms):"),
                "median" => format!("Median {short} (ms):"),
                p => format!("{} {short} (ms):", p.to_uppercase()),
            };
            let _ = writeln!(out, "{label:<40} {v:<10.2}");
        }
    }
    let _ = writeln!(out, "{}", "=".repeat(50));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::input::{parse, Input};
    use crate::result::fixture;

    #[test]
    fn sweep_text_is_the_end_of_sweep_table_and_charts() {
        let r = fixture::sweep();
        let text = sweep(&r, Format::Text);
        assert!(text.starts_with(&table::render(&r)));
        assert!(text.contains("knee: between 32.0 and 36.0"));
    }

    #[test]
    fn sweep_csv_and_markdown_have_one_row_per_step() {
        let r = fixture::sweep();
        let csv = sweep(&r, Format::Csv);
        assert_eq!(csv.lines().count(), 1 + r.steps.len());
        assert!(csv.lines().nth(1).unwrap().starts_with("8,pass,"), "{csv}");
        let md = sweep(&r, Format::Markdown);
        assert_eq!(
            md.lines().filter(|l| l.starts_with("| ")).count(),
            2 + r.steps.len()
        );
        assert!(md.contains("- knee: between"));
    }

    #[test]
    fn run_summary_follows_vllm_layout_for_keys_present() {
        let text = r#"{"completed": 98, "failed": 2, "duration": 10.0, "request_rate": "inf",
            "request_throughput": 9.8, "mean_ttft_ms": 12.0, "median_ttft_ms": 11.0,
            "std_ttft_ms": 1.0, "p99_ttft_ms": 30.0, "p99.9_itl_ms": 4.0}"#;
        let Input::Run(r) = parse(text).unwrap() else {
            panic!("run")
        };
        let out = run(&r, Format::Text);
        assert!(
            out.contains("Successful requests:                     98"),
            "{out}"
        );
        assert!(
            !out.contains("Request rate configured"),
            "inf rate is not shown"
        );
        assert!(out.contains("P99 TTFT (ms):") && out.contains("P99.9 ITL (ms):"));
        assert!(!out.contains("Std") && !out.contains("TPOT"));
    }
}

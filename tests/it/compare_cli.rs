//! `kneecap report` and `kneecap compare` end to end on small hand-written
//! result files: exit codes (0 ok, 1 a --fail-if held, 2 errors) and messages.

use assert_cmd::Command;
use predicates::prelude::*;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use tempfile::TempDir;

fn kneecap() -> Command {
    Command::cargo_bin("kneecap").unwrap()
}

fn write(dir: &TempDir, name: &str, text: &str) -> PathBuf {
    let path = dir.path().join(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn step(load: f64, pass: bool) -> Value {
    let ttft_p99 = if pass { 80.0 + load } else { 900.0 };
    json!({
        "load": load, "verdict": if pass { "pass" } else { "fail" },
        "reasons": if pass { vec![] } else { vec!["p99_ttft_ms 900 > 500"] },
        "offered_rate": load, "achieved_rate": load * 0.99, "goodput": load * 0.98,
        "ttft_ms": {"count": 200, "mean": 40.0, "p50": 35.0, "p90": 60.0, "p99": ttft_p99, "p999": ttft_p99, "max": ttft_p99},
        "tpot_ms": {"count": 200, "mean": 20.0, "p50": 20.0, "p90": 25.0, "p99": 30.0, "p999": 31.0, "max": 32.0},
        "steady": {"steady": pass}
    })
}

/// A sweep whose steps pass up to `last_pass` and fail from `first_fail`.
fn sweep(passes: &[f64], fails: &[f64]) -> String {
    let steps: Vec<Value> = passes
        .iter()
        .map(|&l| step(l, true))
        .chain(fails.iter().map(|&l| step(l, false)))
        .collect();
    let last_pass = passes.iter().copied().reduce(f64::max);
    json!({
        "kind": "kneecap_sweep", "schema_version": 1, "mode": "rate",
        "workload": {"target": "http://gpu:8000", "model": "llama", "dataset": "random",
                     "mean_input_tokens": 512.0, "mean_output_tokens": 128.0,
                     "arrival": "poisson", "burstiness": 1.0},
        "slos": ["p99_ttft_ms<=500"], "max_error_rate": 0.01,
        "steps": steps,
        "knee": {"last_pass": last_pass, "first_fail": fails.iter().copied().reduce(f64::min),
                 "goodput_at_knee": last_pass.map(|l| l * 0.98)},
        "service_rate_estimate": 45.0, "complete": true
    })
    .to_string()
}

/// A run file as `vllm bench serve --save-detailed` writes it.
fn run(latencies: &[f64]) -> String {
    let n = latencies.len();
    json!({
        "date": "20261201-000000", "backend": "vllm", "model_id": "llama",
        "request_rate": 10.0, "burstiness": 1.0, "duration": 10.0,
        "completed": n, "failed": 0, "total_input_tokens": n * 100,
        "total_output_tokens": n * 10, "request_throughput": n as f64 / 10.0,
        "output_throughput": n as f64, "median_ttft_ms": 50.0, "p99_ttft_ms": 90.0,
        "median_e2el_ms": 500.0, "p99_e2el_ms": 900.0,
        "ttfts": latencies.iter().map(|x| x / 10.0).collect::<Vec<f64>>(),
        "latencies": latencies,
    })
    .to_string()
}

fn latencies() -> Vec<f64> {
    (0..120).map(|i| 0.4 + (i % 13) as f64 * 0.05).collect()
}

fn arg(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Baseline with the knee at 40 req/s; candidate at 28 (−30%).
fn knee_drop_files(dir: &TempDir) -> (PathBuf, PathBuf) {
    let a = write(dir, "a.json", &sweep(&[8.0, 16.0, 32.0, 40.0], &[48.0]));
    let b = write(dir, "b.json", &sweep(&[8.0, 16.0, 28.0], &[32.0, 48.0]));
    (a, b)
}

#[test]
fn knee_drop_beyond_the_limit_exits_1_and_says_why() {
    let dir = TempDir::new().unwrap();
    let (a, b) = knee_drop_files(&dir);
    kneecap()
        .args(["compare", arg(&a), arg(&b), "--fail-if", "knee_drop>10%"])
        .assert()
        .code(1)
        .stdout(predicate::str::contains("fail-if knee_drop>10%: HELD"))
        .stdout(predicate::str::contains("worse by 30.0%"))
        .stderr(predicate::str::contains("--fail-if knee_drop>10% held"));
}

#[test]
fn the_same_comparison_without_conditions_exits_0_and_calls_the_drop_significant() {
    let dir = TempDir::new().unwrap();
    let (a, b) = knee_drop_files(&dir);
    kneecap()
        .args(["compare", arg(&a), arg(&b)])
        .assert()
        .code(0)
        .stdout(predicate::str::contains("knee change significant"))
        .stdout(predicate::str::contains("40.0 .. 48.0"))
        .stdout(predicate::str::contains("WARNING").not());
    kneecap()
        .args(["compare", arg(&a), arg(&b), "--fail-if", "knee_drop>40%"])
        .assert()
        .code(0);
}

#[test]
fn identical_runs_are_not_significant() {
    let dir = TempDir::new().unwrap();
    let a = write(&dir, "r1.json", &run(&latencies()));
    let b = write(&dir, "r2.json", &run(&latencies()));
    let out = kneecap()
        .args(["compare", arg(&a), arg(&b), "--format", "json"])
        .args(["--fail-if", "p99_ttft_increase>20%"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = v["comparison"]["rows"].as_array().unwrap();
    let sig = |m: &str| rows.iter().find(|r| r["metric"] == m).unwrap()["significance"].clone();
    assert_eq!(sig("median_e2el_ms"), "not significant");
    assert_eq!(sig("p99_ttft_ms"), "not significant");
    assert_eq!(sig("request_throughput"), "not significant");
    assert_eq!(v["fail_if"][0]["held"], false);
}

#[test]
fn doubled_run_latencies_are_significant() {
    let dir = TempDir::new().unwrap();
    let slow: Vec<f64> = latencies().iter().map(|x| x * 2.0).collect();
    let a = write(&dir, "r1.json", &run(&latencies()));
    let b = write(&dir, "r2.json", &run(&slow));
    kneecap()
        .args(["compare", arg(&a), arg(&b)])
        .assert()
        .code(0)
        .stdout(predicate::str::is_match(r"median_e2el_ms .* significant\n").unwrap());
}

#[test]
fn a_missing_file_exits_2_naming_it() {
    let dir = TempDir::new().unwrap();
    let (a, _) = knee_drop_files(&dir);
    let missing = dir.path().join("nope.json");
    kneecap()
        .args(["compare", arg(&a), arg(&missing)])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("nope.json"));
    kneecap()
        .args(["report", arg(&missing)])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("cannot read").and(predicate::str::contains("nope.json")));
}

#[test]
fn non_json_and_unknown_shapes_exit_2_naming_the_file() {
    let dir = TempDir::new().unwrap();
    let junk = write(&dir, "junk.json", "hello");
    let odd = write(&dir, "odd.json", r#"{"x": 1}"#);
    kneecap()
        .args(["report", arg(&junk)])
        .assert()
        .code(2)
        .stderr(
            predicate::str::contains("junk.json").and(predicate::str::contains("not valid JSON")),
        );
    kneecap()
        .args(["report", arg(&odd)])
        .assert()
        .code(2)
        .stderr(
            predicate::str::contains("odd.json").and(predicate::str::contains("unknown shape")),
        );
}

#[test]
fn mixing_a_sweep_and_a_run_exits_2() {
    let dir = TempDir::new().unwrap();
    let (a, _) = knee_drop_files(&dir);
    let r = write(&dir, "r.json", &run(&latencies()));
    kneecap()
        .args(["compare", arg(&a), arg(&r)])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("cannot compare a sweep"));
}

#[test]
fn a_condition_that_cannot_be_evaluated_exits_2() {
    let dir = TempDir::new().unwrap();
    let a = write(&dir, "r1.json", &run(&latencies()));
    kneecap()
        .args(["compare", arg(&a), arg(&a), "--fail-if", "goodput_drop>5%"])
        .assert()
        .code(2)
        .stderr(
            predicate::str::contains("request_goodput").and(predicate::str::contains("r1.json")),
        );
    kneecap()
        .args(["compare", arg(&a), arg(&a), "--fail-if", "knee_drop"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("METRIC>VALUE"));
}

#[test]
fn report_of_a_sweep_prints_the_knee_line() {
    let dir = TempDir::new().unwrap();
    let (a, _) = knee_drop_files(&dir);
    kneecap()
        .args(["report", arg(&a)])
        .assert()
        .code(0)
        .stdout(predicate::str::contains(
            "knee: between 40.0 and 48.0 req/s",
        ));
    let csv = kneecap()
        .args(["report", arg(&a), "--format", "csv"])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8(csv.stdout).unwrap().lines().count(),
        1 + 5
    );
}

#[test]
fn report_html_writes_an_svg_report() {
    let dir = TempDir::new().unwrap();
    let (a, _) = knee_drop_files(&dir);
    let html = dir.path().join("out").join("report.html");
    kneecap()
        .args(["report", arg(&a), "--html", arg(&html)])
        .assert()
        .code(0);
    let text = std::fs::read_to_string(&html).unwrap();
    assert!(text.contains("<svg"), "no chart in the HTML report");
}

#[test]
fn report_of_an_old_vllm_run_with_infinity_is_a_vllm_summary() {
    let dir = TempDir::new().unwrap();
    let text = r#"{"backend": "vllm", "request_rate": Infinity, "duration": 2.5,
        "completed": 10, "request_throughput": 4.0, "request_goodput:": 3.0,
        "mean_ttft_ms": 12.5, "median_ttft_ms": 11.0, "std_ttft_ms": NaN, "p99_ttft_ms": 40.0}"#;
    let f = write(&dir, "vllm.json", text);
    kneecap()
        .args(["report", arg(&f)])
        .assert()
        .code(0)
        .stdout(predicate::str::contains("Successful requests:"))
        .stdout(predicate::str::contains("Request goodput (req/s):"))
        .stdout(predicate::str::contains("P99 TTFT (ms):"));
}

#[test]
fn an_absolute_latency_bound_is_judged_per_common_load() {
    let dir = TempDir::new().unwrap();
    let (a, b) = knee_drop_files(&dir);
    // At 32 req/s A passes (p99 TTFT 112 ms) and B fails (900 ms).
    kneecap()
        .args([
            "compare",
            arg(&a),
            arg(&b),
            "--fail-if",
            "p99_ttft_increase>50ms",
        ])
        .assert()
        .code(1)
        .stdout(predicate::str::contains("at 32.0 req/s: 112 → 900"));
}

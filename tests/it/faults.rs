//! Bad servers: every fault the simulator can inject, and a server that goes
//! away mid-run. The run must complete, classify every failure correctly
//! (checked request by request against the sim's server log, which records the
//! fault it injected), write valid JSON, and never hang.

use assert_cmd::Command;
use kneecap::sim::{self, Faults, SimConfig};
use serde_json::Value;
use std::collections::HashMap;
use std::time::{Duration, Instant};

async fn start(cfg: SimConfig) -> sim::SimHandle {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    sim::start(cfg, listener).await.unwrap()
}

async fn kneecap(args: Vec<String>) -> std::process::Output {
    tokio::task::spawn_blocking(move || {
        Command::cargo_bin("kneecap")
            .unwrap()
            .timeout(Duration::from_secs(120))
            .args(args)
            .output()
            .unwrap()
    })
    .await
    .unwrap()
}

fn args(url: &str, dir: &std::path::Path, extra: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = [
        "run",
        "--base-url",
        url,
        "--random-input-len",
        "32",
        "--random-output-len",
        "16",
        "--save-result",
        "--save-detailed",
        "--result-dir",
        dir.to_str().unwrap(),
        "--result-filename",
        "r.json",
        "--request-id-prefix",
        "f-",
        "--disable-tqdm",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    v.extend(extra.iter().map(|s| s.to_string()));
    v
}

/// The failure class kneecap must report for each injected fault.
fn expected_kinds(fault: Option<&str>) -> &'static [&'static str] {
    match fault {
        None => &[],
        Some("http_500") => &["http_status"],
        Some("http_429") => &["http_429"],
        // Cut before the first token looks like a reset; after it, truncated.
        Some("cut_stream") => &["truncated", "reset"],
        Some("malformed") => &["protocol"],
        Some("error_event") => &["server_error"],
        Some("stall") => &["timeout"],
        Some(other) => panic!("unknown fault {other}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_injected_fault_is_classified_request_by_request() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("server_log.jsonl");
    let mut cfg = SimConfig::from_preset("tiny").unwrap();
    cfg.server_log = Some(log.clone());
    cfg.faults = Faults {
        http_500: 0.08,
        http_429: 0.08,
        cut_stream: 0.08,
        malformed: 0.08,
        stall: Duration::from_secs(4),
        stall_rate: 0.08,
        error_event: 0.08,
    };
    let handle = start(cfg).await;
    let url = format!("http://{}", handle.addr());
    let started = Instant::now();
    let out = kneecap(args(
        &url,
        dir.path(),
        &[
            "--num-prompts",
            "120",
            "--request-rate",
            "60",
            "--request-timeout",
            "1500ms",
        ],
    ))
    .await;
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "the run must not hang on stalls"
    );
    assert!(
        out.status.success(),
        "the run completes: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    handle.shutdown().await.unwrap();

    let json: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("r.json")).unwrap()).unwrap();
    let kinds = json["kneecap"]["error_kinds"].as_array().unwrap();
    let faults: HashMap<usize, Option<String>> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter_map(|v| {
            let id = v["request_id"].as_str()?.strip_prefix("f-")?.parse().ok()?;
            Some((id, v["fault"].as_str().map(String::from)))
        })
        .collect();
    assert_eq!(faults.len(), 120, "one server log line per request");
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for (i, kind) in kinds.iter().enumerate() {
        let fault = faults[&i].as_deref();
        let allowed = expected_kinds(fault);
        match kind.as_str() {
            None => assert!(
                allowed.is_empty(),
                "request {i}: fault {fault:?} reported as success"
            ),
            Some(k) => assert!(
                allowed.contains(&k),
                "request {i}: fault {fault:?} reported as {k}"
            ),
        }
        *seen.entry(fault.unwrap_or("none")).or_default() += 1;
    }
    for f in [
        "http_500",
        "http_429",
        "cut_stream",
        "malformed",
        "stall",
        "error_event",
        "none",
    ] {
        assert!(
            seen.get(f).copied().unwrap_or(0) > 0,
            "no request got {f}: {seen:?}"
        );
    }
    let failed = json["failed"].as_u64().unwrap() as usize;
    assert_eq!(
        failed,
        120 - seen["none"],
        "failed count equals injected faults"
    );
    assert_eq!(json["completed"].as_u64().unwrap() as usize, seen["none"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_goes_down_mid_run_fails_the_rest_fast_and_the_run_still_saves() {
    let dir = tempfile::tempdir().unwrap();
    let handle = start(SimConfig::from_preset("tiny").unwrap()).await;
    let url = format!("http://{}", handle.addr());
    let run = tokio::spawn(kneecap(args(
        &url,
        dir.path(),
        &["--num-prompts", "200", "--request-rate", "40"],
    )));
    tokio::time::sleep(Duration::from_millis(1500)).await;
    handle.shutdown().await.unwrap();
    let started = Instant::now();
    let out = run.await.unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "never hangs after the server is gone"
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("r.json")).unwrap()).unwrap();
    let (completed, failed) = (
        json["completed"].as_u64().unwrap(),
        json["failed"].as_u64().unwrap(),
    );
    assert_eq!(completed + failed, 200);
    assert!(
        completed > 10 && failed > 50,
        "completed {completed}, failed {failed}"
    );
    let by_kind = json["kneecap"]["errors_by_kind"].as_object().unwrap();
    assert!(by_kind.contains_key("connect"), "{by_kind:?}");
}

/// A sweep step against a simulator whose successful requests are all fast
/// but about 2% of whose requests fail (HTTP 500) or time out (a stream
/// stalled past `--request-timeout`, after its first token): the failed
/// requests are misses, so `p99_ttft_ms` fails on them, while vLLM's p99
/// over the successes would pass; the error rate stays within
/// `--max-error-rate 0.05`, so the SLO is what fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sweep_step_with_2_percent_failures_misses_its_p99_on_them() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = SimConfig::from_preset("tiny").unwrap();
    cfg.faults = Faults {
        http_500: 0.01,
        stall: Duration::from_secs(4),
        stall_rate: 0.01,
        ..Faults::default()
    };
    let handle = start(cfg).await;
    let url = format!("http://{}", handle.addr());
    let out_path = dir.path().join("sweep.json");
    let args: Vec<String> = [
        "sweep",
        "--base-url",
        &url,
        "--random-input-len",
        "32",
        "--random-output-len",
        "16",
        // Seeded faults (sim seed 0): about 12 of the ~600 requests due in
        // the window fail, twice the p99's tail of 6.
        "--rates",
        "100",
        "--slo",
        "p99_ttft_ms<=500",
        "--max-error-rate",
        "0.05",
        "--step-duration",
        "6s",
        "--step-warmup",
        "1s",
        "--step-min-requests",
        "100",
        "--step-drain",
        "2s",
        "--request-timeout",
        "1s",
        // The SLO, not a loaded test machine, must decide the step.
        "--max-lateness-ms",
        "100",
        "--disable-tqdm",
        "-o",
        out_path.to_str().unwrap(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let started = Instant::now();
    let out = kneecap(args).await;
    assert!(started.elapsed() < Duration::from_secs(60), "bounded");
    handle.shutdown().await.unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(1),
        "no step passes\n{stdout}\n{stderr}"
    );

    let json: Value = serde_json::from_str(&std::fs::read_to_string(&out_path).unwrap()).unwrap();
    let step = &json["steps"][0];
    let (n, failed) = (
        step["n_requests"].as_u64().unwrap(),
        step["failed"].as_u64().unwrap(),
    );
    let rate = step["error_rate"].as_f64().unwrap();
    assert!(
        failed > 0 && rate > 0.005 && rate <= 0.05,
        "about 2% failed: {failed} of {n}"
    );
    let slo = &step["slo_outcomes"][0];
    assert_eq!(slo["slo"], "p99_ttft_ms<=500");
    assert_eq!(slo["pass"], false, "{slo}");
    assert_eq!(slo["failures"].as_u64(), Some(failed), "{slo}");
    // Both percentiles: vLLM's over the successes (fast) and the one judged,
    // which lands on the failures (no finite value, written as null).
    let vllm = slo["vllm_observed_ms"].as_f64().expect("vLLM's p99");
    assert!(vllm < 500.0, "the successes are fast: {slo}");
    assert!(slo["observed_ms"].is_null(), "{slo}");
    assert_eq!(slo["failed_in_tail"], slo["tail_samples"], "{slo}");
    assert_eq!(step["verdict"], "fail");
    let reasons: Vec<&str> = step["reasons"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        reasons
            .iter()
            .any(|r| r.starts_with("p99_ttft_ms ∞ (failed) > 500")),
        "{reasons:?}"
    );
    assert!(
        !reasons.iter().any(|r| r.contains("error rate")),
        "{reasons:?}"
    );
    // The console says both too: the step line and the notes under the table.
    let console = format!("{stdout}{stderr}");
    assert!(
        console.contains("failures as misses: p99_ttft_ms<=500: vLLM ")
            && console.contains("with failures ∞ (failed)"),
        "{console}"
    );
}

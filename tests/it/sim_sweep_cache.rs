//! Each sweep step reports the server's prefix-cache hit rate: against the
//! simulator, whose trace records what each request found cached (ground
//! truth), a shared-prefix sweep's per-step hit and query counts are the
//! sum over that step's requests, and a workload without sharing shows ~0
//! (in its first step: later steps resend the same prompts).

use crate::common;

use common::cli::{run, strings};
use serde_json::Value;

/// Timing-sensitive: one at a time.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

const PREFIX: &str = "swc-";

/// Sweep the simulator at two light rates with `workload`; the sweep JSON,
/// stdout and stderr, the trace's request lines grouped by step, and the
/// trace's summary.
async fn sweep(workload: &[&str]) -> (Value, [String; 2], Vec<Vec<Value>>, Value) {
    let dir = tempfile::tempdir().unwrap();
    let sim = common::sim::tiny(dir.path().join("trace.jsonl")).await;
    let path = dir.path().join("sweep.json");
    let mut args = strings(&[
        "sweep",
        "--base-url",
        &sim.url,
        "--rates",
        "4,8",
        "--slo",
        "p99_ttft_ms<=5000",
        "--step-duration",
        "2s",
        "--step-warmup",
        "500ms",
        "--step-min-requests",
        "8",
        "--step-drain",
        "5s",
        "--max-lateness-ms",
        "50",
        "--request-id-prefix",
        PREFIX,
        "--disable-tqdm",
        "-o",
        path.to_str().unwrap(),
    ]);
    args.extend(strings(workload));
    let out = run(args, vec![]).await;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stdout}\n{stderr}");
    sim.handle.shutdown().await.unwrap();
    let result: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    // Steps run one after another, each drained before the next: in arrival
    // order, a step begins at its request 0.
    let (mut requests, summary) = common::sim::requests(&sim.trace, PREFIX);
    requests.sort_by(|a, b| {
        a["arrival_s"]
            .as_f64()
            .unwrap()
            .total_cmp(&b["arrival_s"].as_f64().unwrap())
    });
    let mut steps: Vec<Vec<Value>> = Vec::new();
    for r in requests {
        assert_eq!(r["preemptions"], 0, "light load: one admission each");
        match steps.last_mut() {
            Some(step) if common::sim::index(&r, PREFIX) != 0 => step.push(r),
            _ => steps.push(vec![r]),
        }
    }
    (result, [stdout, stderr], steps, summary)
}

/// Each step's reported counts against the sum over its traced requests;
/// returns the steps' hit rates.
fn check_steps_against_trace(result: &Value, steps: &[Vec<Value>]) -> Vec<f64> {
    let reported = result["steps"].as_array().unwrap();
    assert_eq!(reported.len(), steps.len(), "one trace group per step");
    let mut rates = Vec::new();
    for (k, (step, traced)) in reported.iter().zip(steps).enumerate() {
        let pc = &step["prefix_cache"];
        assert_eq!(pc["source"], "vllm", "step {k}: {pc}");
        let cached = common::sim::total(traced, "cached_tokens");
        let prompt = common::sim::total(traced, "prompt_tokens");
        assert_eq!(pc["hit_tokens"].as_u64(), Some(cached), "step {k}: {pc}");
        assert_eq!(
            pc["queried_tokens"].as_u64(),
            Some(prompt),
            "step {k}: {pc}"
        );
        rates.push(pc["hit_rate"].as_f64().unwrap());
    }
    rates
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shared_prefix_sweep_reports_each_steps_hit_rate_as_the_server_counted_it() {
    let _serial = SERIAL.lock().await;
    let (result, [stdout, stderr], steps, summary) = sweep(&[
        "--dataset-name",
        "prefix_repetition",
        "--prefix-repetition-prefix-len",
        "256",
        "--prefix-repetition-suffix-len",
        "32",
        "--prefix-repetition-num-prefixes",
        "2",
        "--prefix-repetition-output-len",
        "4",
    ])
    .await;
    let rates = check_steps_against_trace(&result, &steps);
    eprintln!("per-step hit rates: {rates:?}");
    // 256 of 288 tokens shared, 2 prefixes: all but each prefix's first
    // request find the 16 shared blocks; at least 8 requests a step.
    assert!(
        rates.iter().all(|r| *r > 6.0 / 8.0 * 256.0 / 288.0),
        "{rates:?}"
    );
    // The steps' counts and the warm-up's add up to the server's totals.
    let steps_hit: u64 = result["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["prefix_cache"]["hit_tokens"].as_u64().unwrap())
        .sum();
    assert!(steps_hit <= summary["prefix_cache_hits"].as_u64().unwrap());
    // The table has the column, each step line its rate.
    let cell = format!("{:.1}%", rates[0] * 100.0);
    assert!(
        stdout.contains("cache hit") && stdout.contains(&cell),
        "{stdout}"
    );
    for rate in &rates {
        let said = format!("cache hit {:.1}%", rate * 100.0);
        assert!(stderr.contains(&said), "a step line says {said}: {stderr}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sweep_without_shared_prefixes_reports_a_hit_rate_near_zero() {
    let _serial = SERIAL.lock().await;
    let (result, _stdout, steps, _) =
        sweep(&["--random-input-len", "288", "--random-output-len", "4"]).await;
    let rates = check_steps_against_trace(&result, &steps);
    eprintln!("per-step hit rates: {rates:?}");
    // Later steps send the same prompts again (request i of every step uses
    // prompt i), so what an earlier step left in the cache can hit; the
    // first step has nothing to find.
    assert!(rates[0] < 0.05, "{rates:?}");
}

//! The simulator's prefix cache seen through kneecap: the hit rate kneecap
//! reports against the simulator's own per-request server log and counters, and a
//! sweep whose knee moves with prefix sharing as the capacity model says.

use assert_cmd::Command;
use kneecap::sim::{self, SimConfig};
use serde_json::Value;
use std::time::Duration;

/// Timing-sensitive: one at a time.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn kneecap(args: Vec<String>) -> std::process::Output {
    Command::cargo_bin("kneecap")
        .unwrap()
        .timeout(Duration::from_secs(400))
        .args(args)
        .output()
        .unwrap()
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reported_hit_rate_equals_the_simulators_per_request_cached_tokens() {
    let _serial = SERIAL.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("server_log.jsonl");
    let mut cfg = SimConfig::from_preset("tiny").unwrap();
    cfg.server_log = Some(log.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let handle = sim::start(cfg, listener).await.unwrap();
    let url = format!("http://{}", handle.addr());
    let args = strings(&[
        "run",
        "--base-url",
        &url,
        "--dataset-name",
        "prefix_repetition",
        "--prefix-repetition-prefix-len",
        "256",
        "--prefix-repetition-suffix-len",
        "40",
        "--prefix-repetition-num-prefixes",
        "3",
        "--prefix-repetition-output-len",
        "4",
        "--num-prompts",
        "30",
        "--request-rate",
        "20",
        "--save-result",
        "--result-dir",
        dir.path().to_str().unwrap(),
        "--result-filename",
        "r.json",
        "--disable-tqdm",
    ]);
    let out = tokio::task::spawn_blocking(move || kneecap(args))
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    handle.shutdown().await.unwrap();

    let result: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("r.json")).unwrap()).unwrap();
    let pc = &result["kneecap"]["prefix_cache"];
    assert_eq!(pc["source"], "vllm");
    let (mut cached, mut prompt, mut summary) = (0u64, 0u64, None);
    for line in std::fs::read_to_string(&log).unwrap().lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        if v["request_id"].is_string() {
            assert_eq!(v["preemptions"], 0, "light load: one admission each");
            cached += v["cached_tokens"].as_u64().unwrap();
            prompt += u64::from(v["prompt_tokens"].as_u64().unwrap() as u32);
        } else if v.get("summary").is_some() {
            summary = Some(v["summary"].clone());
        }
    }
    // Ground truth 1: the sum of what each request found cached.
    assert_eq!(pc["hit_tokens"].as_u64(), Some(cached), "{pc}");
    assert_eq!(pc["queried_tokens"].as_u64(), Some(prompt), "{pc}");
    // Ground truth 2: the simulator's own counters (nothing else was sent).
    let summary = summary.expect("server log summary line");
    assert_eq!(pc["hit_tokens"], summary["prefix_cache_hits"]);
    assert_eq!(pc["queried_tokens"], summary["prefix_cache_queries"]);
    // 3 prefixes of 16 blocks: every request after the first of its prefix
    // hits all 16 blocks.
    assert_eq!(cached, 27 * 256);
    assert!(
        stdout.contains("Prefix cache hit rate (server):"),
        "{stdout}"
    );
}

/// A simulator whose cost is mostly prefill, so prefix sharing matters:
/// without sharing the per-step token budget binds (μ ≈ 33 req/s), with 90%
/// shared the batch size does (μ ≈ 132 req/s). One limit binds clearly in
/// each case, so the formula's μ is what the engine sustains.
fn prefill_heavy() -> SimConfig {
    let mut cfg = SimConfig::from_preset("tiny").unwrap();
    cfg.params.max_num_seqs = 32;
    cfg.params.kv_cache_tokens = 100_000;
    cfg.params.step_base = Duration::from_millis(20);
    cfg.params.per_prefill_token = Duration::from_micros(20);
    cfg
}

/// Prompts of 1008 tokens: 56 shared blocks (896 tokens) + 112 own, 8 out.
const N_IN: u32 = 1008;
const N_OUT: u32 = 8;

/// The knee of an automatic sweep from `start` req/s with `dataset`, and the
/// sweep JSON.
async fn knee(start: f64, dataset: &[&str]) -> (f64, Value) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sweep.json");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let handle = sim::start(prefill_heavy(), listener).await.unwrap();
    let url = format!("http://{}", handle.addr());
    let mut args = strings(&[
        "sweep",
        "--base-url",
        &url,
        "--slo",
        // 1 s is ~16 steps of 61 ms; a queue growing above μ crosses it.
        "p99_ttft_ms<=1000",
        "--start",
        &start.to_string(),
        // A 25% bracket, not 10%: each knee is checked to (0.6 μ, μ), and a
        // refinement step (2.5 times as long as a search step) is ~10 s.
        "--tolerance",
        "0.25",
        "--step-duration",
        "3s",
        "--step-warmup",
        "1s",
        "--step-min-requests",
        "60",
        "--step-drain",
        "5s",
        "--max-lateness-ms",
        "25",
        "--disable-tqdm",
        "-o",
        path.to_str().unwrap(),
    ]);
    args.extend(strings(dataset));
    let out = tokio::task::spawn_blocking(move || kneecap(args))
        .await
        .unwrap();
    handle.shutdown().await.unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let text = std::fs::read_to_string(&path).unwrap_or_else(|_| panic!("no sweep JSON\n{stderr}"));
    let json: Value = serde_json::from_str(&text).unwrap();
    let knee = json["knee"]["last_pass"]
        .as_f64()
        .unwrap_or_else(|| panic!("no knee\n{stderr}"));
    (knee, json)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sharing_ninety_percent_of_each_prompt_moves_the_knee_as_explain_says() {
    let _serial = SERIAL.lock().await;
    let cfg = prefill_heavy();
    let h = 896.0 / f64::from(N_IN);
    let mu_plain = sim::service_rate(&cfg, N_IN, N_OUT);
    let mu_shared = sim::service_rate_cached(&cfg, N_IN, N_OUT, h);
    // Each search starts at about half its μ: the doubling steps below
    // that pass as surely and only cost time (from 16, the shared sweep
    // spent two more steps getting there).
    let start = |mu: f64| (mu / 2.0).round();
    let (plain, _) = knee(
        start(mu_plain),
        &["--random-input-len", "1008", "--random-output-len", "8"],
    )
    .await;
    let (shared, _) = knee(
        start(mu_shared),
        &[
            "--dataset-name",
            "prefix_repetition",
            "--prefix-repetition-prefix-len",
            "896",
            "--prefix-repetition-suffix-len",
            "112",
            "--prefix-repetition-num-prefixes",
            "1",
            "--prefix-repetition-output-len",
            "8",
            "--ignore-eos",
        ],
    )
    .await;
    // The tolerance of the knee tests in sim_e2e.rs: just below μ.
    assert!(
        plain < mu_plain && plain > 0.6 * mu_plain,
        "no sharing: knee {plain} vs μ {mu_plain:.1}"
    );
    assert!(
        shared < mu_shared && shared > 0.6 * mu_shared,
        "90% shared: knee {shared} vs μ {mu_shared:.1}"
    );
    assert!(
        shared >= 2.0 * plain,
        "knee {shared} vs {plain} without sharing"
    );
}

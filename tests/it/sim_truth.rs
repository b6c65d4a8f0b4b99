//! The virtual-time simulation against the real-time simulator: `kneecap run`
//! at a modest rate against the built-in sim, and the discrete-event model fed
//! the very same arrival times (kneecap's seeded schedule), must agree on the
//! TTFT distribution; and `kneecap sim --explain --slo` prints the true knee.

use assert_cmd::Command;
use kneecap::schedule::{self, Arrival};
use kneecap::sim::virtual_time::{simulate, VirtualLoad};
use kneecap::sim::{self, ModelParams, SimConfig};
use rand::{rngs::StdRng, SeedableRng};
use serde_json::Value;
use std::time::Duration;

fn kneecap(args: &[String]) -> std::process::Output {
    Command::cargo_bin("kneecap")
        .unwrap()
        .timeout(Duration::from_secs(300))
        .args(args)
        .output()
        .unwrap()
}

/// The slot server: 4 slots, 5 ms steps, no per-token cost (μ ≈ 42 req/s at
/// 16 in / 19 out).
fn slot_server() -> ModelParams {
    ModelParams {
        max_num_seqs: 4,
        per_prefill_token: Duration::ZERO,
        per_decode_seq: Duration::ZERO,
        ..sim::preset::tiny()
    }
}

/// NumPy-linear percentile of an ascending slice.
fn percentile(sorted: &[f64], p: f64) -> f64 {
    let rank = (sorted.len() - 1) as f64 * p / 100.0;
    let (lo, hi) = (rank.floor() as usize, rank.ceil() as usize);
    sorted[lo] + (sorted[hi] - sorted[lo]) * (rank - lo as f64)
}

fn sorted(mut v: Vec<f64>) -> Vec<f64> {
    v.sort_by(f64::total_cmp);
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_virtual_time_ttfts_match_a_real_run_on_the_same_arrivals() {
    const N: usize = 300;
    const RATE: f64 = 30.0;
    const SEED: u64 = 7;
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = SimConfig::from_preset("tiny").unwrap();
    cfg.params = slot_server();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let handle = sim::start(cfg, listener).await.unwrap();
    let url = format!("http://{}", handle.addr());
    let args: Vec<String> = [
        "run",
        "--base-url",
        &url,
        "--num-prompts",
        &N.to_string(),
        "--request-rate",
        &RATE.to_string(),
        "--seed",
        &SEED.to_string(),
        "--random-input-len",
        "16",
        "--random-output-len",
        "19",
        "--save-result",
        "--save-detailed",
        "--result-dir",
        dir.path().to_str().unwrap(),
        "--result-filename",
        "r.json",
        "--disable-tqdm",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let out = tokio::task::spawn_blocking(move || kneecap(&args))
        .await
        .unwrap();
    handle.shutdown().await.unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let result: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("r.json")).unwrap()).unwrap();
    assert_eq!(result["completed"], N);
    let real: Vec<f64> = result["ttfts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();

    // The same schedule the run used, as unit gaps at RATE.
    let offsets = schedule::offsets(
        N,
        &Arrival::Gamma {
            rate: RATE,
            burstiness: 1.0,
        },
        &mut StdRng::seed_from_u64(SEED),
    );
    let mut last = 0.0;
    let gaps: Vec<f64> = offsets
        .iter()
        .map(|o| {
            let gap = (o.as_secs_f64() - last) * RATE;
            last = o.as_secs_f64();
            gap
        })
        .collect();
    let load = VirtualLoad::fixed(16, 19, 0, N);
    let des = simulate(&slot_server(), &load, &gaps, RATE).unwrap();
    let virt: Vec<f64> = des
        .requests
        .iter()
        .map(|r| r.ttft().as_secs_f64())
        .collect();

    let (real, virt) = (sorted(real), sorted(virt));
    let (r50, v50) = (percentile(&real, 50.0), percentile(&virt, 50.0));
    let (r99, v99) = (percentile(&real, 99.0), percentile(&virt, 99.0));
    let report = format!("p50 real {r50:.4} virtual {v50:.4}; p99 real {r99:.4} virtual {v99:.4}");
    eprintln!("TTFT seconds at {RATE} req/s: {report}");
    // Loose enough for step-clock lag on a loaded 2-core machine; far
    // tighter than the gap between an idle server (p99 = one 5 ms step)
    // and this load (p99 several steps of queueing).
    assert!((r50 - v50).abs() <= 0.005f64.max(0.25 * v50), "{report}");
    assert!((r99 - v99).abs() <= 0.015f64.max(0.35 * v99), "{report}");
    assert!(v99 > 0.02, "the load should queue: {report}");
}

#[test]
fn explain_with_an_slo_prints_the_true_knee_as_text_and_json() {
    let base = "sim --explain --max-num-seqs 4 --step-base-ms 5 --prefill-token-us 0 \
                --decode-seq-us 0 --input-len 16 --output-len 19 --slo p99_ttft_ms<=300 \
                --truth-requests 2000 --truth-warmup 200 --truth-seeds 2";
    let args: Vec<String> = base.split_whitespace().map(String::from).collect();
    let out = kneecap(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("service rate mu = 42.11 req/s"), "{text}");
    let line = text
        .lines()
        .find(|l| l.starts_with("true knee for p99_ttft_ms<=300: "))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        line.contains("virtual-time simulation, 2 seeds x 2000 requests"),
        "{line}"
    );

    let mut args = args;
    args.push("--json".into());
    let out = kneecap(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["simulated"], true);
    let knee = &v["true_knee"];
    assert_eq!(knee["method"], "virtual-time simulation");
    assert_eq!(knee["slos"][0], "p99_ttft_ms<=300");
    let median = knee["median_req_s"].as_f64().unwrap();
    // The text headline is the same median, to one decimal.
    assert!(
        line.contains(&format!(": {median:.1} req/s")),
        "{line} vs {median}"
    );
    assert!(median > 20.0 && median < v["mu_req_s"].as_f64().unwrap());
    assert_eq!(knee["seeds"].as_array().unwrap().len(), 2);
}

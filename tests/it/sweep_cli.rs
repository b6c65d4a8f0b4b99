//! `kneecap sweep` end to end against a test server with a fixed number of
//! slots and a fixed service time, whose capacity is known: μ = slots / service.
//! Each test has its own server and they run side by side (no module lock):
//! the generator check is relaxed (`--max-lateness-ms 25`) so a busy machine
//! cannot turn a step generator-limited, and the assertions leave room for it.

use crate::common;

use assert_cmd::Command;
use common::Behaviour;
use serde_json::Value;
use std::time::Duration;

/// 4 slots; each request takes 20 ms to its first token and 7 × 10 ms more:
/// service time 90 ms, so μ = 4 / 0.090 ≈ 44.4 req/s.
fn slotted() -> Behaviour {
    Behaviour {
        ttft: Duration::from_millis(20),
        per_token: Duration::from_millis(10),
        slots: Some(4),
        ..Default::default()
    }
}
const MU: f64 = 4.0 / 0.090;

async fn sweep(url: String, extra: &[&str]) -> (Value, std::process::Output) {
    let dir = tempfile::tempdir().unwrap();
    let out_path = dir.path().join("sweep.json");
    let mut args: Vec<String> = [
        "sweep",
        "--base-url",
        &url,
        "--random-input-len",
        "16",
        "--random-output-len",
        "8",
        "--step-duration",
        "3s",
        "--step-warmup",
        "1s",
        "--step-min-requests",
        "60",
        "--step-drain",
        "3s",
        "--disable-tqdm",
        // These tests check the knee logic, not the generator: a loaded CI
        // machine must not turn steps into "generator-limited" ones.
        "--max-lateness-ms",
        "25",
        "-o",
        out_path.to_str().unwrap(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.extend(extra.iter().map(|s| s.to_string()));
    let out = tokio::task::spawn_blocking(move || {
        Command::cargo_bin("kneecap")
            .unwrap()
            .timeout(Duration::from_secs(300))
            .args(args)
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let text = std::fs::read_to_string(&out_path).unwrap_or_else(|_| {
        panic!(
            "no sweep JSON; stderr:\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (serde_json::from_str(&text).unwrap(), out)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_sweep_brackets_the_knee_between_60_percent_of_mu_and_mu() {
    let server = common::start(slotted()).await;
    // From 16 (over a third of μ): 8 passed as surely and, at 60 requests
    // a step, took 7.5 s.
    let (json, out) = sweep(
        server.url(),
        &["--slo", "p99_ttft_ms<=300", "--start", "16"],
    )
    .await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "exit {:?}\n{stderr}",
        out.status.code()
    );
    let knee = &json["knee"];
    let last_pass = knee["last_pass"]
        .as_f64()
        .unwrap_or_else(|| panic!("no passing step\n{stderr}"));
    let first_fail = knee["first_fail"]
        .as_f64()
        .unwrap_or_else(|| panic!("no failing step\n{stderr}"));
    assert!(
        last_pass < MU && last_pass > 0.6 * MU,
        "last pass {last_pass} vs μ {MU:.1}\n{stderr}"
    );
    assert!(
        first_fail > last_pass && (first_fail - last_pass) / last_pass <= 0.1 + 1e-9,
        "bracket {last_pass}..{first_fail}"
    );
    assert!(json["complete"].as_bool().unwrap());
    assert_eq!(json["workload"]["dataset"], "random");
    assert_eq!(json["slos"][0], "p99_ttft_ms<=300");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("knee"), "{stdout}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_far_above_capacity_is_judged_unsteady_not_only_slow() {
    let server = common::start(slotted()).await;
    // No latency SLO at all: only the steady-state check can fail this step.
    let (json, out) = sweep(server.url(), &["--rates", "100"]).await;
    let step = &json["steps"][0];
    assert_eq!(
        step["verdict"],
        "fail",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(step["steady"]["steady"], false);
    let reasons = step["reasons"].as_array().unwrap();
    assert!(!reasons.is_empty());
    let achieved = step["achieved_rate"].as_f64().unwrap();
    assert!(
        achieved < 0.8 * 100.0 && achieved > 0.6 * MU,
        "achieved {achieved}: the server's plateau"
    );
    assert_eq!(out.status.code(), Some(1), "no step passed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calibration_finds_mu_and_starts_the_search_near_the_knee() {
    let server = common::start(slotted()).await;
    let (json, out) = sweep(
        server.url(),
        &[
            "--slo",
            "p99_ttft_ms<=300",
            "--max-steps",
            "1",
            "--calibrate",
            "--adaptive",
        ],
    )
    .await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    let cal = &json["calibration"];
    assert_eq!(cal["end"], "plateau", "{stderr}");
    let mu = cal["service_rate"].as_f64().unwrap();
    assert!(
        (mu / MU - 1.0).abs() < 0.25,
        "probed μ {mu} vs {MU:.1}\n{stderr}"
    );
    let first = json["steps"][0]["load"].as_f64().unwrap();
    assert!(
        (first - 0.75 * mu).abs() < 1e-6,
        "first step {first} at ¾ μ"
    );
    assert!(stderr.contains("calibration (plateau)"), "{stderr}");
    // The probe drew prompts of its own: none of them is a step's, so it
    // warmed no server cache for the steps.
    let levels = cal["levels"].as_array().unwrap();
    let probe_n: u64 = levels
        .iter()
        .map(|l| {
            ["completed", "failed", "stuck"]
                .iter()
                .map(|k| l[*k].as_u64().unwrap())
                .sum::<u64>()
        })
        .sum();
    let mut truths = server.truths.lock().unwrap().clone();
    truths.sort_by(|a, b| a.received.total_cmp(&b.received));
    let prompts = |ts: &[common::Truth]| -> std::collections::HashSet<String> {
        ts.iter().map(|t| t.body["prompt"].to_string()).collect()
    };
    let (probe, steps) = truths.split_at(probe_n as usize);
    assert!(
        !steps.is_empty(),
        "{probe_n} probe requests of {}",
        truths.len()
    );
    assert!(
        prompts(probe).is_disjoint(&prompts(steps)),
        "the probe sent a step's prompt"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reset_prefix_cache_on_a_server_without_it_says_so_once_and_sweeps_on() {
    let server = common::start(slotted()).await;
    let (json, out) = sweep(server.url(), &["--rates", "20,30", "--reset-prefix-cache"]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let said: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("--reset-prefix-cache"))
        .collect();
    assert_eq!(said.len(), 1, "one line for the whole sweep: {stderr}");
    assert!(said[0].contains("offers neither"), "{said:?}");
    assert!(
        said[0].contains("/flush_cache answered HTTP 404"),
        "{said:?}"
    );
    let steps = json["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 2, "{stderr}");
    assert!(steps.iter().all(|s| s.get("prefix_cache_reset").is_none()));
}

/// The probe stops within its budget against a server that starts failing
/// or stalls, and the search falls back to doubling from --start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calibration_stops_on_errors_and_stalls_and_falls_back_to_doubling() {
    for (behaviour, end) in [
        (
            Behaviour {
                fail_after: Some(20),
                ..slotted()
            },
            "errors",
        ),
        (
            Behaviour {
                stall_after: Some(1),
                ..slotted()
            },
            "stalled",
        ),
    ] {
        let server = common::start(behaviour).await;
        let (json, out) = sweep(
            server.url(),
            &[
                "--slo",
                "p99_ttft_ms<=300",
                "--calibrate",
                "--calibrate-budget",
                "4s",
                "--max-steps",
                "1",
                // The step only shows where the search starts: 1 s of it
                // (after the warm-up) does.
                "--step-max-duration",
                "2s",
            ],
        )
        .await;
        let stderr = String::from_utf8_lossy(&out.stderr);
        let cal = &json["calibration"];
        assert_eq!(cal["end"], end, "{stderr}");
        assert!(cal["service_rate"].is_null());
        let took = cal["duration_s"].as_f64().unwrap();
        assert!(took <= 4.0 + 1.0, "probe took {took} s for a 4 s budget");
        assert!(
            stderr.contains("falling back to the doubling search from 1 req/s"),
            "{stderr}"
        );
        assert_eq!(json["steps"][0]["load"], 1.0, "doubling starts at --start");
    }
}

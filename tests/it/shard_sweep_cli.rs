//! Sharded sweeps end to end: 3 `kneecap sweep --shard i/3` processes with a
//! common `--start-at` against a slot-limited test server of known capacity,
//! merged by `kneecap merge` into a sweep whose knee brackets μ; the union of
//! the shards' intended send times per step is the single-process sweep's
//! schedule, and together they send its prompts, each step its own;
//! refusals (missing shard, auto-search with --shard) exit 2.

use crate::common;

use assert_cmd::Command;
use common::{Behaviour, TestServer};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// 4 slots, 20 ms to the first token and 7 × 10 ms more: service time 90 ms,
/// so μ = 4 / 0.090 ≈ 44.4 req/s.
fn slotted() -> Behaviour {
    Behaviour {
        ttft: Duration::from_millis(20),
        per_token: Duration::from_millis(10),
        slots: Some(4),
        ..Default::default()
    }
}
const MU: f64 = 4.0 / 0.090;

async fn kneecap(args: Vec<String>) -> std::process::Output {
    tokio::task::spawn_blocking(move || {
        Command::cargo_bin("kneecap")
            .unwrap()
            .timeout(Duration::from_secs(180))
            .env_remove("OPENAI_API_KEY")
            .args(args)
            .output()
            .unwrap()
    })
    .await
    .unwrap()
}

/// Two ~3.5 s steps: 12 req/s (below μ) and 100 req/s (above), seeded.
fn sweep_args(server: &TestServer, out: &Path, extra: &[String]) -> Vec<String> {
    let mut a: Vec<String> = [
        "sweep",
        "--base-url",
        &server.url(),
        "--random-input-len",
        "16",
        "--random-output-len",
        "8",
        "--rates",
        "12,100",
        "--slo",
        "p99_ttft_ms<=300",
        "--step-duration",
        "2.5s",
        "--step-warmup",
        "1s",
        "--step-min-requests",
        "30",
        "--step-drain",
        "2s",
        "--seed",
        "11",
        "--save-detailed",
        "--disable-tqdm",
        // The knee logic is under test, not the generator: a busy 2-core
        // machine running 3 shards must not make steps generator-limited.
        "--max-lateness-ms",
        "250",
        "-o",
        out.to_str().unwrap(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    a.extend(extra.iter().cloned());
    a
}

fn read(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn floats(v: &Value) -> Vec<f64> {
    v.as_array()
        .map(|a| a.iter().map(|x| x.as_f64().unwrap()).collect())
        .unwrap_or_default()
}

/// The prompts a test server received, per sweep step, sorted. A sender
/// (request-id prefix: one process) numbers its requests from 0 at every
/// step, so its step ends where its numbers start again.
fn prompts_by_step(server: &TestServer) -> Vec<Vec<String>> {
    let mut truths = server.truths.lock().unwrap().clone();
    truths.sort_by(|a, b| a.received.total_cmp(&b.received));
    // Per sender: its last request number and the step it is in.
    let mut senders: std::collections::HashMap<String, (usize, usize)> = Default::default();
    let mut steps: Vec<Vec<String>> = Vec::new();
    for t in truths {
        let Some((sender, n)) = t.request_id.rsplit_once('-') else {
            continue;
        };
        let Ok(n) = n.parse::<usize>() else {
            continue; // not a step's request
        };
        let (last, step) = senders.entry(sender.to_string()).or_insert((n, 0));
        if n < *last && n <= 2 && *last >= 5 {
            *step += 1;
        }
        *last = n;
        if steps.len() <= *step {
            steps.resize(*step + 1, Vec::new());
        }
        steps[*step].push(t.body["prompt"].to_string());
    }
    for s in &mut steps {
        s.sort();
    }
    steps
}

/// Per step, the shards together sent the single sweep's prompts (the
/// prompts each server received), the second step's are its own, and every
/// shard's JSON names the same draw as the single sweep's.
fn assert_shards_sent_the_single_sweeps_prompts(
    (single_server, single): (&TestServer, &Value),
    (server, shards): (&TestServer, &[Value]),
) {
    let single_prompts = prompts_by_step(single_server);
    let shard_prompts = prompts_by_step(server);
    assert_eq!(single_prompts.len(), 2, "two steps");
    assert_eq!(shard_prompts, single_prompts, "shards drew other prompts");
    assert!(
        single_prompts[1]
            .iter()
            .all(|p| !single_prompts[0].contains(p)),
        "step 1 resent step 0's prompts"
    );
    let seeds: Vec<Vec<Value>> = shards
        .iter()
        .chain([single])
        .map(|s| (0..2).map(|k| s["steps"][k]["prompts"].clone()).collect())
        .collect();
    assert!(seeds.iter().all(|s| *s == seeds[0]), "{seeds:?}");
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_sweep_shards_merge_into_the_single_process_sweep_with_the_knee_at_mu() {
    let dir = tempfile::tempdir().unwrap();

    // The single-process sweep: its per-step intended schedule.
    let single_server = common::start(slotted()).await;
    let single_path = dir.path().join("single.json");
    let out = kneecap(sweep_args(&single_server, &single_path, &[])).await;
    let single = read(&single_path);
    assert_eq!(
        single["steps"].as_array().map(Vec::len),
        Some(2),
        "single-process sweep: {}",
        stderr(&out)
    );

    // Three shards against a fresh server, steps in common wall-clock slots.
    let server = common::start(slotted()).await;
    let start = (chrono::Utc::now().timestamp() + 3).to_string();
    let files: Vec<PathBuf> = (0..3)
        .map(|i| dir.path().join(format!("shard-{i}.json")))
        .collect();
    let mut handles = Vec::new();
    for (i, f) in files.iter().enumerate() {
        let extra = vec![
            "--shard".to_string(),
            format!("{i}/3"),
            "--start-at".to_string(),
            start.clone(),
        ];
        handles.push(tokio::spawn(kneecap(sweep_args(&server, f, &extra))));
    }
    for h in handles {
        let out = h.await.unwrap();
        assert_eq!(out.status.code(), Some(0), "shard: {}", stderr(&out));
    }
    let shards: Vec<Value> = files.iter().map(|f| read(f)).collect();

    // 1. Per step, the union of the shards' due times is the single schedule.
    for k in 0..2 {
        let mut union: Vec<f64> = shards
            .iter()
            .flat_map(|s| floats(&s["steps"][k]["due_times_s"]))
            .collect();
        union.sort_by(f64::total_cmp);
        let want = floats(&single["steps"][k]["due_times_s"]);
        assert!(want.len() > 20, "step {k}: {} arrivals", want.len());
        assert_eq!(union, want, "step {k}: shards' schedule differs");
        for s in &shards {
            let late = s["steps"][k]["shard"]["start_lateness_ms"]
                .as_f64()
                .unwrap();
            assert!(
                late.abs() < 500.0,
                "step {k} started {late} ms off its slot"
            );
        }
    }

    // 1b. Together the shards sent the single sweep's prompts, step by step.
    assert_shards_sent_the_single_sweeps_prompts((&single_server, &single), (&server, &shards));

    // 2. The merge: a sweep in the single-process format with the knee around μ.
    let merged_path = dir.path().join("merged.json");
    let mut args = vec!["merge".to_string()];
    args.extend(files.iter().map(|f| f.display().to_string()));
    args.extend(["-o".to_string(), merged_path.display().to_string()]);
    let out = kneecap(args).await;
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "merge: {err}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("knee"), "console table: {stdout}");
    let merged = read(&merged_path);
    assert_eq!(merged["kind"], "kneecap_sweep");
    assert!(merged.get("shard").is_none());
    assert_eq!(merged["merged"]["shards"], 3);
    let verdicts: Vec<&str> = (0..2)
        .map(|k| merged["steps"][k]["verdict"].as_str().unwrap())
        .collect();
    assert_eq!(verdicts, ["pass", "fail"], "{}", merged["steps"]);
    let (pass, fail) = (
        merged["knee"]["last_pass"].as_f64().unwrap(),
        merged["knee"]["first_fail"].as_f64().unwrap(),
    );
    assert!(pass < MU && MU < fail, "knee {pass}..{fail} vs μ {MU:.1}");
    // The merged knee is explained from the merged steps: this server
    // exports no gauges, so what binds it is unknown, and the console says so.
    let explain = &merged["knee"]["explain"];
    assert_eq!(explain["binds"], "unknown", "{explain}");
    let line = format!("binds: {}", explain["line"].as_str().unwrap());
    assert!(stdout.lines().any(|l| l == line), "{line}: {stdout}");
    for k in 0..2 {
        let n: u64 = shards
            .iter()
            .map(|s| s["steps"][k]["n_requests"].as_u64().unwrap())
            .sum();
        assert_eq!(merged["steps"][k]["n_requests"].as_u64(), Some(n));
        let offered = merged["steps"][k]["offered_rate"].as_f64().unwrap();
        let load = merged["steps"][k]["load"].as_f64().unwrap();
        assert!(
            (offered - load).abs() < 0.5 * load,
            "step {k}: offered {offered} for {load}"
        );
    }
    let achieved = merged["steps"][1]["achieved_rate"].as_f64().unwrap();
    assert!(
        achieved < 0.8 * 100.0,
        "above μ the merged throughput plateaus: {achieved}"
    );
    eprintln!(
        "merged knee {pass}..{fail} req/s (μ {MU:.1}); step achieved {:.1} / {achieved:.1} req/s",
        merged["steps"][0]["achieved_rate"].as_f64().unwrap()
    );

    // 3. `kneecap report` renders the merged sweep, HTML included.
    let html = dir.path().join("merged.html");
    let out = kneecap(vec![
        "report".into(),
        merged_path.display().to_string(),
        "--html".into(),
        html.display().to_string(),
    ])
    .await;
    assert_eq!(out.status.code(), Some(0), "report: {}", stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("knee"));
    assert!(std::fs::read_to_string(&html).unwrap().contains("<html"));

    // 4. A missing shard makes the merge invalid: exit 2, one loud line.
    let out = kneecap(vec![
        "merge".into(),
        files[0].display().to_string(),
        files[2].display().to_string(),
    ])
    .await;
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("shard 1/3 is missing"), "{err}");
    assert_eq!(err.lines().count(), 1, "one clear line: {err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sharded_sweep_needs_a_fixed_step_list_and_a_common_start() {
    let start = (chrono::Utc::now().timestamp() + 30).to_string();
    for (extra, want) in [
        (
            vec!["--shard", "0/2", "--start-at", &start],
            "fixed step list",
        ),
        (
            vec!["--shard", "0/2", "--rates", "5,10"],
            "needs --start-at",
        ),
        (
            vec![
                "--shard",
                "2/3",
                "--start-at",
                &start,
                "--mode",
                "concurrency",
                "--concurrencies",
                "8,2",
            ],
            "--concurrencies 2",
        ),
    ] {
        let mut args: Vec<String> = [
            "sweep",
            "--base-url",
            "http://127.0.0.1:9",
            "--disable-tqdm",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        args.extend(extra.iter().map(|s| s.to_string()));
        let out = kneecap(args).await;
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{extra:?}: {err}");
        assert!(err.contains(want), "wanted '{want}' in: {err}");
        assert_eq!(err.lines().count(), 1, "one clear line: {err}");
    }
}

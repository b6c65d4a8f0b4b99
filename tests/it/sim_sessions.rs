//! Multi-turn sessions against the simulator's server log (its ground truth):
//! each turn resends the history with the server's own answers, think times
//! hold, the cache-hit rate kneecap reports is the simulator's, and a failed
//! turn ends its session and is counted.

use crate::common;

use common::cli::{run, strings};
use serde_json::Value;
use std::path::Path;

/// Timing-sensitive: one at a time.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// User turns of words of at most 6 letters: one simulator token each.
const TURNS: [&str; 4] = [
    "alpha beta gamma delta omega sigma kappa theta lambda iota zeta eta",
    "how does the knee move when the cache holds the prefix",
    "and what if more users come back after they think",
    "tell me once more in short words",
];

fn words(s: &str) -> u64 {
    s.split_whitespace().count() as u64
}

/// Three conversations of four user turns; the file's own answers are
/// never sent (the server's replace them).
fn write_conversations(path: &Path) {
    let mut lines = String::new();
    for c in 0..3 {
        let mut messages = Vec::new();
        for (k, t) in TURNS.iter().enumerate() {
            let user = if k == 0 {
                format!("{t} conv{c}")
            } else {
                t.to_string()
            };
            messages.push(serde_json::json!({"role": "user", "content": user}));
            messages.push(serde_json::json!({"role": "assistant", "content": "a file answer that must not be sent"}));
        }
        lines.push_str(&serde_json::json!({ "messages": messages }).to_string());
        lines.push('\n');
    }
    std::fs::write(path, lines).unwrap();
}

/// The session requests in index order, and the server log's summary.
fn log_lines(log: &Path) -> (Vec<Value>, Value) {
    let (mut requests, summary) = common::sim::requests(log, "sess-");
    requests.sort_by_key(|v| common::sim::index(v, "sess-"));
    (requests, summary)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_turn_resends_the_history_after_its_think_time_and_the_cache_rate_is_the_servers() {
    let _serial = SERIAL.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("conv.jsonl");
    write_conversations(&data);
    let sim = common::sim::tiny(dir.path().join("server_log.jsonl")).await;
    let (url, log) = (sim.url.clone(), sim.log.clone());
    let args = strings(&[
        "run",
        "--base-url",
        &url,
        "--backend",
        "openai-chat",
        "--multi-turn",
        "--dataset-name",
        "custom",
        "--dataset-path",
        data.to_str().unwrap(),
        "--custom-output-len",
        "6",
        "--num-prompts",
        "3",
        "--disable-shuffle",
        // One user: sessions run one after another, so requests 4k..4k+3
        // are session k's turns.
        "--multi-turn-concurrency",
        "1",
        "--multi-turn-delay-ms",
        "50",
        "--request-id-prefix",
        "sess-",
        "--save-result",
        "--save-detailed",
        "--result-dir",
        dir.path().to_str().unwrap(),
        "--result-filename",
        "r.json",
        "--disable-tqdm",
    ]);
    let out = run(args, vec![]).await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    sim.handle.shutdown().await.unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let result: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("r.json")).unwrap()).unwrap();
    let (requests, summary) = log_lines(&log);
    assert_eq!(requests.len(), 12, "3 sessions of 4 turns");

    let mut gaps_ms = Vec::new();
    for (s, session) in requests.chunks(4).enumerate() {
        let first = words(TURNS[0]) + 1;
        assert_eq!(
            session[0]["prompt_tokens"].as_u64(),
            Some(first),
            "session {s}"
        );
        for k in 1..4 {
            let (prev, this) = (&session[k - 1], &session[k]);
            let answer = prev["output_tokens"].as_u64().unwrap();
            assert!((1..=6).contains(&answer), "{answer} answer tokens");
            let want = prev["prompt_tokens"].as_u64().unwrap() + answer + words(TURNS[k]);
            assert_eq!(
                this["prompt_tokens"].as_u64(),
                Some(want),
                "session {s} turn {}",
                k + 1
            );
            // Every full block of the previous turn's prompt is served from the cache.
            let prev_full = prev["prompt_tokens"].as_u64().unwrap() / 16 * 16;
            assert!(
                this["cached_tokens"].as_u64().unwrap() >= prev_full,
                "{this}"
            );
            let gap = this["arrival_s"].as_f64().unwrap() - prev["finish_s"].as_f64().unwrap();
            gaps_ms.push(gap * 1e3);
        }
    }
    gaps_ms.sort_by(f64::total_cmp);
    eprintln!("server-side think gaps (ms), 50 ms asked: {gaps_ms:.2?}");
    let p90 = gaps_ms[gaps_ms.len() * 9 / 10 - 1];
    assert!(
        gaps_ms[0] >= 49.0,
        "think time shorter than 50 ms: {gaps_ms:?}"
    );
    // 10 ms of slack: on a shared 2-core machine a timer wakes a few ms
    // late; a think time counted from the wrong event is off by a whole
    // turn (tens of ms), which this still catches.
    assert!(
        p90 <= 60.0,
        "think time not within 10 ms at light load: {gaps_ms:?}"
    );
    assert!(*gaps_ms.last().unwrap() < 80.0, "{gaps_ms:?}");

    let pc = &result["kneecap"]["prefix_cache"];
    let cached = common::sim::total(&requests, "cached_tokens");
    let queried = common::sim::total(&requests, "prompt_tokens");
    assert_eq!(pc["hit_tokens"].as_u64(), Some(cached), "{pc}");
    assert_eq!(pc["queried_tokens"].as_u64(), Some(queried), "{pc}");
    assert_eq!(pc["hit_tokens"], summary["prefix_cache_hits"]);
    assert_eq!(pc["queried_tokens"], summary["prefix_cache_queries"]);
    // Short prompts: only full 16-token blocks are shared.
    assert!(pc["hit_rate"].as_f64().unwrap() > 0.3, "{pc}");

    let s = &result["kneecap"]["sessions"];
    assert_eq!(
        (
            s["started"].as_u64(),
            s["completed"].as_u64(),
            s["failed"].as_u64()
        ),
        (Some(3), Some(3), Some(0)),
        "{s}"
    );
    assert_eq!(s["turns_sent"].as_u64(), Some(12));
    let turns: Vec<u64> = s["ttft_by_turn"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["ttft"]["count"].as_u64().unwrap())
        .collect();
    assert_eq!(turns, [3, 3, 3, 3]);
    // One user: each session's four turns are consecutive requests.
    let pairs = result["kneecap"]["session_turns"].as_array().unwrap();
    let mut seen = Vec::new();
    for (k, chunk) in pairs.chunks(4).enumerate() {
        let session = &chunk[0][0];
        let turns: Vec<&Value> = chunk.iter().map(|p| &p[1]).collect();
        assert!(
            chunk.iter().all(|p| &p[0] == session),
            "chunk {k}: {chunk:?}"
        );
        assert_eq!(turns, [1, 2, 3, 4], "chunk {k}");
        seen.push(session.as_u64().unwrap());
    }
    seen.sort_unstable();
    assert_eq!(seen, [0, 1, 2]);
    assert!(stdout.contains("TTFT turn 4 (ms):"), "{stdout}");
    assert!(stdout.contains("Sessions:"), "{stdout}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_turn_ends_its_session_and_is_counted() {
    let _serial = SERIAL.lock().await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    // The first 5 POSTs are answered, then HTTP 500: session 0's four turns
    // and session 1's first pass, session 1's second turn fails.
    let server = common::start_on(
        listener,
        common::Behaviour {
            fail_after: Some(5),
            ..Default::default()
        },
    );
    let dir = tempfile::tempdir().unwrap();
    let args = strings(&[
        "run",
        "--base-url",
        &server.url(),
        "--backend",
        "openai-chat",
        "--multi-turn",
        "--multi-turn-num-turns",
        "4",
        "--random-input-len",
        "8",
        "--random-output-len",
        "4",
        "--num-prompts",
        "3",
        "--multi-turn-concurrency",
        "1",
        "--save-result",
        "--result-dir",
        dir.path().to_str().unwrap(),
        "--result-filename",
        "r.json",
        "--disable-tqdm",
    ]);
    let out = run(args, vec![]).await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let result: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("r.json")).unwrap()).unwrap();
    let s = &result["kneecap"]["sessions"];
    // Session 2 starts after session 1 failed and fails on its first turn.
    assert_eq!(
        (
            s["started"].as_u64(),
            s["completed"].as_u64(),
            s["failed"].as_u64(),
            s["cut"].as_u64()
        ),
        (Some(3), Some(1), Some(2), Some(0)),
        "{s}"
    );
    assert_eq!(s["turns_sent"].as_u64(), Some(7), "4 + 2 + 1 turns");
    assert_eq!(result["completed"].as_u64(), Some(5));
    assert_eq!(result["failed"].as_u64(), Some(2));
    let truths = server.truths.lock().unwrap();
    assert_eq!(truths.len(), 7, "no turn sent after a failure");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sweep_over_users_reports_its_knee_in_users() {
    let _serial = SERIAL.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sweep.json");
    let args = strings(&[
        "sweep",
        "--backend",
        "openai-chat",
        "--multi-turn",
        "--multi-turn-num-turns",
        "3",
        "--random-input-len",
        "64",
        "--per-turn-input-len",
        "16",
        "--random-output-len",
        "8",
        "--multi-turn-delay-ms",
        "50",
        "--mode",
        "concurrency",
        "--concurrencies",
        "1,2",
        "--slo",
        "p99_ttft_ms<=2000",
        "--step-duration",
        "2s",
        "--step-warmup",
        "500ms",
        "--step-drain",
        "2s",
        "--max-lateness-ms",
        "50",
        "--disable-tqdm",
        "-o",
        path.to_str().unwrap(),
    ]);
    let out = run(args, vec![]).await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("knee: above 2 users"), "{stdout}");
    let sweep: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(sweep["workload"]["sessions"], "3 turns, think 50 ms");
    assert_eq!(sweep["steps"].as_array().unwrap().len(), 2);
}

//! `kneecap run` and `kneecap sweep` on bad input and hostile servers: one
//! clear line and exit status 2 for usage errors, no panics, and secrets a
//! server echoes back redacted from every output (against our own streaming
//! test server on 127.0.0.1:0).

use crate::common;

use common::cli::{kneecap, run, strings};
use common::Behaviour;
use std::time::{Duration, Instant};

fn assert_usage_error(args: &[&str], needle: &str) {
    let out = kneecap().args(args).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "args {args:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(needle),
        "stderr for {args:?} lacks '{needle}':\n{stderr}"
    );
    assert!(
        !stderr.contains("panicked") && !stderr.contains("RUST_BACKTRACE"),
        "{stderr}"
    );
}

#[test]
fn bad_input_gets_one_clear_line_and_exit_status_2() {
    assert_usage_error(&["run", "--no-such-flag"], "--no-such-flag");
    assert_usage_error(
        &[
            "run",
            "--base-url",
            "http://127.0.0.1:1",
            "--num-prompts",
            "1",
        ],
        "cannot reach the server",
    );
    assert_usage_error(
        &[
            "run",
            "--base-url",
            "http://127.0.0.1:1",
            "--dataset-name",
            "sharegpt",
            "--dataset-path",
            "/no/such/file.json",
        ],
        "/no/such/file.json",
    );
    assert_usage_error(
        &["run", "--ramp-up-strategy", "linear", "--request-rate", "5"],
        "--ramp-up-strategy",
    );
    assert_usage_error(&["run", "--max-concurrency", "0"], "--max-concurrency");
    assert_usage_error(
        &[
            "run",
            "--backend",
            "openai-chat",
            "--endpoint",
            "/v1/completions",
        ],
        "--endpoint",
    );
    assert_usage_error(&["run", "--goodput", "ttft=5"], "--goodput");
    assert_usage_error(&["run", "--extra-body", "[1,2]"], "--extra-body");
}

/// Every file under `dir` plus the captured output, as one string.
fn everything_written(dir: &std::path::Path, out: &std::process::Output) -> String {
    let mut all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    for entry in std::fs::read_dir(dir).unwrap() {
        all.push_str(&std::fs::read_to_string(entry.unwrap().path()).unwrap_or_default());
    }
    all
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_echoed_back_by_a_server_are_redacted_from_every_output() {
    let server = common::start(Behaviour {
        status: Some(401),
        ..Default::default()
    })
    .await;
    let secret = "sk-live-9f8e7d6c5b4a";
    let header_secret = "hdr-token-1a2b3c4d";
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap().to_string();
    let run_args = strings(&[
        "run",
        "--base-url",
        &server.url(),
        "--num-prompts",
        "3",
        "--random-input-len",
        "8",
        "--random-output-len",
        "2",
        "--header",
        &format!("x-api-key={header_secret}"),
        "--save-result",
        "--save-detailed",
        "--result-dir",
        &d,
        "--result-filename",
        "run.json",
        "--disable-tqdm",
    ]);
    let sweep_args = strings(&[
        "sweep",
        "--base-url",
        &server.url(),
        "--rates",
        "5",
        "--step-duration",
        "1s",
        "--step-warmup",
        "0s",
        "--step-min-requests",
        "3",
        "--random-input-len",
        "8",
        "--random-output-len",
        "2",
        "--header",
        &format!("x-api-key={header_secret}"),
        "-o",
        &format!("{d}/sweep.json"),
        "--html",
        &format!("{d}/sweep.html"),
        "--disable-tqdm",
    ]);
    let env = vec![("OPENAI_API_KEY".to_string(), secret.to_string())];
    let run_out = run(run_args, env.clone()).await;
    let sweep_out = run(sweep_args, env).await;
    let truths = server.truths.lock().unwrap().clone();
    assert!(
        truths
            .iter()
            .any(|t| t.headers.iter().any(|(_, v)| v.contains(secret))),
        "key was sent"
    );
    for out in [&run_out, &sweep_out] {
        let all = everything_written(dir.path(), out);
        assert!(
            all.contains("test failure (got"),
            "the server's error message is shown: {all}"
        );
        assert!(all.contains("[REDACTED]"), "the echoed secret is replaced");
        for s in [secret, header_secret] {
            let at = all
                .find(s)
                .map(|i| &all[i.saturating_sub(300)..(i + 50).min(all.len())]);
            assert!(at.is_none(), "secret leaked: …{}…", at.unwrap_or(""));
        }
    }
}

/// Whether an output blames the load generator (in any of its spellings).
fn blames_the_generator(all: &str) -> bool {
    let lower = all.to_lowercase();
    ["generator limited", "generator-limited", "gen-limited"]
        .iter()
        .any(|s| lower.contains(s))
}

/// stdout and stderr of a finished command, as one string.
fn both(out: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A refused command: exit 2, within `bound`, with the simulator's own
/// message and the fix on stderr, and no word against the generator.
fn assert_refused(out: &std::process::Output, took: Duration, bound: Duration) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{}", both(out));
    assert!(took < bound, "took {took:?}: {}", both(out));
    assert!(
        stderr.contains("maximum context length is 4096 tokens"),
        "the server's own message: {stderr}"
    );
    assert!(
        stderr.contains("--random-input-len") && stderr.contains("--max-model-len"),
        "what to change: {stderr}"
    );
    assert!(!blames_the_generator(&both(out)), "{}", both(out));
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sweep_and_a_run_whose_every_request_is_refused_stop_at_once() {
    // Issue 25's command line: the built-in simulator (tiny, 4096-token
    // context) refuses every 4096-token prompt with HTTP 400.
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let shape = ["--random-input-len", "4096", "--random-output-len", "32"];
    let mut sweep = strings(&["sweep", "--slo", "p99_ttft_ms<=500", "--disable-tqdm"]);
    sweep.extend(strings(&shape));
    sweep.extend(strings(&["-o", &format!("{d}/sweep.json")]));
    let mut run_line = strings(&["run", "--disable-tqdm"]);
    run_line.extend(strings(&shape));
    for args in [sweep, run_line] {
        let started = Instant::now();
        let out = run(args, vec![]).await;
        assert_refused(&out, started.elapsed(), Duration::from_secs(30));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_run_stops_after_its_first_requests_and_a_refused_ready_check_before_any() {
    let dir = tempfile::tempdir().unwrap();
    let sim = common::sim::tiny(dir.path().join("server_log.jsonl")).await;
    let line = |extra: &[&str]| {
        let mut v = strings(&[
            "run",
            "--base-url",
            &sim.url,
            "--random-input-len",
            "4096",
            "--random-output-len",
            "32",
            "--num-prompts",
            "400",
            "--request-id-prefix",
            "r-",
            "--disable-tqdm",
        ]);
        v.extend(strings(extra));
        v
    };
    let started = Instant::now();
    let out = run(line(&["--request-rate", "50"]), vec![]).await;
    assert_refused(&out, started.elapsed(), Duration::from_secs(30));
    let started = Instant::now();
    let out = run(line(&["--ready-check-timeout-sec", "60"]), vec![]).await;
    assert_refused(&out, started.elapsed(), Duration::from_secs(30));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("ready check"), "{stderr}");
    sim.handle.shutdown().await.unwrap();
    let (sent, _) = common::sim::requests(&sim.log, "r-");
    assert!(
        (10..40).contains(&sent.len()),
        "the run stops after its first 10 refusals, not its 400 requests: {} sent",
        sent.len()
    );
    let (checks, _) = common::sim::requests(&sim.log, "ready-check");
    assert_eq!(checks.len(), 1, "a refused ready check is not retried");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ready_check_still_waits_through_server_errors() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = kneecap::sim::SimConfig::from_preset("tiny").unwrap();
    cfg.faults.http_500 = 1.0;
    let sim = common::sim::logged(cfg, dir.path().join("server_log.jsonl")).await;
    let out = run(
        strings(&[
            "run",
            "--base-url",
            &sim.url,
            "--random-input-len",
            "16",
            "--num-prompts",
            "5",
            "--ready-check-timeout-sec",
            "6",
            "--disable-tqdm",
        ]),
        vec![],
    )
    .await;
    sim.handle.shutdown().await.unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--ready-check-timeout-sec 6"), "{stderr}");
    let (checks, _) = common::sim::requests(&sim.log, "ready-check");
    assert_eq!(
        checks.len(),
        2,
        "a 5xx is retried after 5 s, until the timeout"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_where_only_some_requests_are_too_long_completes() {
    // Prompts of 2880-4320 tokens against a 4096-token context: about one
    // in six is refused, and refusals come back long before the answers.
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let out = run(
        strings(&[
            "run",
            "--random-input-len",
            "3600",
            "--random-range-ratio",
            "0.2",
            "--random-output-len",
            "32",
            "--num-prompts",
            "80",
            "--save-result",
            "--result-dir",
            d,
            "--result-filename",
            "r.json",
            "--disable-tqdm",
        ]),
        vec![],
    )
    .await;
    assert!(out.status.success(), "{}", both(&out));
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("r.json")).unwrap()).unwrap();
    let (completed, failed) = (json["completed"].as_u64(), json["failed"].as_u64());
    let (completed, failed) = (completed.unwrap(), failed.unwrap());
    assert_eq!(completed + failed, 80);
    assert!(
        failed >= 10,
        "enough refusals that a rule counting any ten would stop the run: {failed}"
    );
    assert!(completed >= 50, "{completed} completed");
}

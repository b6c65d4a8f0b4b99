//! Ctrl-C (SIGINT) during `kneecap run` and `kneecap sweep`: in-flight
//! requests get a short grace period, the partial result is written (and
//! marked interrupted), and the exit status is 2.

use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn kneecap_bin() -> std::path::PathBuf {
    assert_cmd::cargo::cargo_bin("kneecap")
}

/// Start kneecap; once a line of its stderr satisfies `ready` (60 s at
/// most), wait `then`, send SIGINT, and wait for it to exit. Waiting for a
/// line rather than a fixed time keeps a slow host from interrupting before
/// the load began (or before the step the test needs had finished).
fn interrupt_when(
    args: &[&str],
    ready: fn(&str) -> bool,
    then: Duration,
) -> (std::process::ExitStatus, String) {
    let mut child = Command::new(kneecap_bin())
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut all = String::new();
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(ready(&line));
            all.push_str(&line);
            all.push('\n');
        }
        all
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    // Timed out, or stderr closed: interrupt anyway; the assertions say what
    // the process did.
    while let Ok(false) = rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {}
    std::thread::sleep(then);
    let kill = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let started = Instant::now();
    let status = child.wait().unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "took too long to stop after SIGINT"
    );
    (status, reader.join().unwrap())
}

#[test]
fn sigint_during_run_writes_a_valid_partial_result_and_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.json");
    let (status, stderr) = interrupt_when(
        &[
            "run",
            "--num-prompts",
            "2000",
            "--request-rate",
            "20",
            "--random-input-len",
            "64",
            "--random-output-len",
            "16",
            "--disable-tqdm",
            "--save-result",
            "--result-filename",
            path.to_str().unwrap(),
        ],
        // 3 s after the built-in simulator is up: about 60 of the 2000 sent.
        |l| l.contains("started the built-in simulator"),
        Duration::from_secs(3),
    );
    assert_eq!(status.code(), Some(2), "{stderr}");
    let json: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(json["kneecap"]["interrupted"], true);
    let completed = json["completed"].as_u64().unwrap();
    assert!(completed > 0 && completed < 2000, "partial: {completed}");
}

#[test]
fn sigint_during_sweep_keeps_every_finished_step() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sweep.json");
    let (status, stderr) = interrupt_when(
        &[
            "sweep",
            "--rates",
            "10,20,40",
            "--random-input-len",
            "64",
            "--random-output-len",
            "16",
            "--step-duration",
            "2s",
            "--step-warmup",
            "1s",
            "--step-min-requests",
            "10",
            // This test is about the interrupt, not the generator: a loaded
            // machine once made the first step generator-limited (dispatch
            // lateness p99 10.25 ms against the default 10 ms), which ends a
            // sweep with status 1 before any SIGINT.
            "--max-lateness-ms",
            "25",
            "--disable-tqdm",
            "-o",
            path.to_str().unwrap(),
        ],
        // A second into the second step, once the first has been judged.
        |l| l.contains("→ PASS"),
        Duration::from_secs(1),
    );
    assert_eq!(status.code(), Some(2), "{stderr}");
    let json: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(json["interrupted"], true);
    assert_eq!(json["complete"], false);
    let steps = json["steps"].as_array().unwrap();
    assert!(!steps.is_empty(), "{stderr}");
    assert!(
        steps.iter().any(|s| s["verdict"] == "pass"),
        "a finished step is kept: {stderr}"
    );
    let last = steps.last().unwrap();
    assert_eq!(last["verdict"], "interrupted", "{stderr}");
}

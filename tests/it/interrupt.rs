//! Ctrl-C (SIGINT) during `kneecap run` and `kneecap sweep`: in-flight
//! requests get a short grace period, the partial result is written (and
//! marked interrupted), and the exit status is 2.

use serde_json::Value;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn kneecap_bin() -> std::path::PathBuf {
    assert_cmd::cargo::cargo_bin("kneecap")
}

/// Start kneecap, send SIGINT after `after`, and wait for it to exit.
fn interrupt_after(args: &[&str], after: Duration) -> (std::process::ExitStatus, String) {
    let child = Command::new(kneecap_bin())
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(after);
    let kill = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let started = Instant::now();
    let out = child.wait_with_output().unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "took too long to stop after SIGINT"
    );
    (
        out.status,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn sigint_during_run_writes_a_valid_partial_result_and_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.json");
    let (status, stderr) = interrupt_after(
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
    let (status, stderr) = interrupt_after(
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
            "--disable-tqdm",
            "-o",
            path.to_str().unwrap(),
        ],
        Duration::from_secs(5),
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

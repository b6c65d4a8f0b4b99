//! A load generator that cannot keep its schedule must say so: a run at a
//! rate one runtime thread cannot meet is flagged GENERATOR-LIMITED, and a
//! sweep step at that rate is `generator_limited`, never the server's knee.

use assert_cmd::Command;
use serde_json::Value;
use std::time::Duration;

fn starved() -> Command {
    let mut c = Command::cargo_bin("kneecap").unwrap();
    // One runtime thread shared by the client and the embedded simulator.
    c.env("KNEECAP_WORKER_THREADS", "1")
        .timeout(Duration::from_secs(120));
    c
}

#[test]
fn a_run_at_a_rate_one_thread_cannot_meet_is_flagged_generator_limited() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.json");
    let out = starved()
        .args([
            "run",
            "--request-rate",
            "20000",
            "--num-prompts",
            "8000",
            "--random-input-len",
            "8",
            "--random-output-len",
            "2",
            "--disable-tqdm",
            "--save-result",
            "--result-filename",
            path.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("GENERATOR-LIMITED"), "{stdout}");
    let json: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(json["kneecap"]["generator"]["limited"], true);
}

#[test]
fn a_starved_sweep_step_is_generator_limited_not_the_servers_knee() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sweep.json");
    let out = starved()
        .args([
            "sweep",
            "--rates",
            "20000",
            "--random-input-len",
            "8",
            "--random-output-len",
            "2",
            "--step-duration",
            "1s",
            "--step-warmup",
            "0.2s",
            "--step-min-requests",
            "10",
            "--step-drain",
            "3s",
            "--disable-tqdm",
            "-o",
            path.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    let json: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap())
        .unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&out.stderr)));
    let step = &json["steps"][0];
    assert_eq!(
        step["verdict"],
        "generator_limited",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        json["knee"]["first_fail"],
        Value::Null,
        "a generator-limited step is not a server failure"
    );
}

//! Issue 38: `kneecap predict` and `kneecap sim --profile` never panic on a
//! profile, however wrong. The profile vLLM 0.32 gave at 5e5ceb1 (decode
//! 1,504 µs ± 3.5e18, step base 28 ± 48.6 ms, KV 17,516 ± 28,269 tokens)
//! panicked in `sim::virtual_time::arrival_times` and printed a backtrace;
//! now it predicts (a wide interval) or says in one line what is wrong.
//! Bounded: small virtual-time loads, no server, no network.

use assert_cmd::Command;
use std::time::Duration;

const VLLM_5E5CEB1: &str = "tests/data/profile-5e5ceb1.json";

fn kneecap(args: &[&str]) -> std::process::Output {
    Command::cargo_bin("kneecap")
        .unwrap()
        .timeout(Duration::from_secs(300))
        .args(args)
        .output()
        .unwrap()
}

/// Exit 0 with a prediction, or exit 2 with one `error:` line; never a
/// panic or a backtrace.
fn no_panic(out: &std::process::Output) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !err.contains("panicked") && !err.contains("backtrace"),
        "{err}"
    );
    match out.status.code() {
        Some(0) => {
            let text = String::from_utf8_lossy(&out.stdout);
            assert!(text.starts_with("PREDICTED knee: "), "{text}");
        }
        Some(2) => {
            let lines: Vec<&str> = err.lines().filter(|l| l.starts_with("error:")).collect();
            assert_eq!(lines.len(), 1, "{err}");
        }
        other => panic!("exit {other:?}: {err}"),
    }
}

#[test]
fn issue_38_the_5e5ceb1_vllm_profile_predicts_without_a_panic() {
    let out = kneecap(&[
        "predict",
        "--profile",
        VLLM_5E5CEB1,
        "--random-input-len",
        "128",
        "--random-output-len",
        "32",
        "--slo",
        "p99_ttft_ms<=2000",
        "--requests",
        "2000",
        "--warmup",
        "200",
        "--seeds",
        "1",
        "--no-moves",
    ]);
    no_panic(&out);
    // The profile's parameters the probes did not pin down widen the
    // interval, and the line says which.
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("decode per sequence: not identifiable"),
        "{text}"
    );
}

#[test]
fn issue_38_a_profile_out_of_range_is_one_line_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.json");
    let text = std::fs::read_to_string(VLLM_5E5CEB1)
        .unwrap()
        .replace("\"value\": 1504.0", "\"value\": -1504.0");
    std::fs::write(&bad, text).unwrap();
    let bad = bad.to_str().unwrap();
    let predict = kneecap(&["predict", "--profile", bad, "--slo", "p99_ttft_ms<=2000"]);
    no_panic(&predict);
    assert_eq!(predict.status.code(), Some(2));
    let err = String::from_utf8_lossy(&predict.stderr);
    assert!(err.contains("params.decode_seq_us.value is -1504"), "{err}");
    // The simulator refuses it before it binds a port.
    let sim = kneecap(&["sim", "--profile", bad, "--port", "0"]);
    assert_eq!(sim.status.code(), Some(2));
    let err = String::from_utf8_lossy(&sim.stderr);
    assert!(
        err.lines().count() == 1 && err.contains("params.decode_seq_us"),
        "{err}"
    );
}

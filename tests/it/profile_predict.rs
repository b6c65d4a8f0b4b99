//! `kneecap profile` then `kneecap predict --profile` end to end: the
//! simulator runs with hidden parameters, a short profile measures it over
//! HTTP, and the knee predicted from the profile for a workload the probes
//! never sent (1024-token prompts, 128-token outputs) lands near the
//! simulator's own virtual-time knee (`sim --explain --slo`) for the same
//! hidden parameters. Bounded: a 10 s profile budget on loopback, small
//! virtual-time loads.

use assert_cmd::Command;
use serde_json::Value;
use std::time::Duration;

/// The hidden engine: none of these is the `tiny` preset's value.
const HIDDEN: &[&str] = &[
    "--max-num-seqs",
    "12",
    "--step-base-ms",
    "8",
    "--prefill-token-us",
    "60",
    "--decode-seq-us",
    "400",
    "--prefill-interference",
    "0.6",
    "--kv-cache-tokens",
    "40000",
];

const SLO: &str = "p99_ttft_ms<=1000";

fn kneecap(args: &[&str]) -> std::process::Output {
    let out = Command::cargo_bin("kneecap")
        .unwrap()
        .timeout(Duration::from_secs(300))
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "kneecap {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn profile(path: &str) -> Value {
    let mut args = vec!["profile", "--budget", "10", "-o", path];
    args.extend_from_slice(HIDDEN);
    let out = kneecap(&args);
    let table = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(table.contains("prefill interference"), "{table}");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn predicted(profile: &str) -> Value {
    let out = kneecap(&[
        "predict",
        "--profile",
        profile,
        "--slo",
        SLO,
        "--random-input-len",
        "1024",
        "--random-output-len",
        "128",
        "--requests",
        "2000",
        "--warmup",
        "200",
        "--seeds",
        "2",
        "--no-moves",
        "-o",
        &format!("{profile}.predict.json"),
    ]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.starts_with("PREDICTED knee: "), "{text}");
    assert!(
        text.contains(&format!("engine profile {profile}")),
        "{text}"
    );
    let json = std::fs::read_to_string(format!("{profile}.predict.json")).unwrap();
    serde_json::from_str(&json).unwrap()
}

fn true_knee() -> f64 {
    let mut args = vec![
        "sim",
        "--explain",
        "--input-len",
        "1024",
        "--output-len",
        "128",
        "--slo",
        SLO,
        "--truth-requests",
        "2000",
        "--truth-warmup",
        "200",
        "--truth-seeds",
        "2",
        "--json",
    ];
    args.extend_from_slice(HIDDEN);
    let t: Value = serde_json::from_slice(&kneecap(&args).stdout).unwrap();
    t["true_knee"]["median_req_s"].as_f64().unwrap()
}

#[test]
fn a_knee_predicted_from_a_short_profile_is_near_the_simulators_true_knee() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("profile.json");
    let path = path.to_str().unwrap();
    let p = profile(path);
    assert!(
        p["elapsed_s"].as_f64().unwrap() <= 10.0 + 2.0,
        "the profile kept to its budget: {}",
        p["elapsed_s"]
    );
    let prediction = predicted(path);
    let engine = &prediction["engine"];
    assert!(
        engine["corners"].as_u64().unwrap() > 0,
        "a profile's uncertainty gives corners: {engine}"
    );
    let knee = &prediction["knee"];
    let (central, low, high) = (
        knee["knee_req_s"].as_f64().unwrap(),
        knee["low_req_s"].as_f64().unwrap(),
        knee["high_req_s"].as_f64().unwrap(),
    );
    assert!(low <= central && central <= high, "{knee}");
    let truth = true_knee();
    assert!(
        (central - truth).abs() <= 0.25 * truth,
        "predicted {central:.2} req/s (interval {low:.2}-{high:.2}) vs the true knee {truth:.2}"
    );
}

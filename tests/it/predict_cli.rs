//! `kneecap predict` end to end: the knee it prints and saves is labelled
//! PREDICTED, agrees with `kneecap sim --explain --slo` (the same model, the
//! same seeds), explains itself, and the grid writes its table, JSON and heat
//! map. Bounded: small virtual-time loads, no server, no network.

use assert_cmd::Command;
use serde_json::Value;
use std::time::Duration;

fn kneecap(args: &[&str]) -> std::process::Output {
    Command::cargo_bin("kneecap")
        .unwrap()
        .timeout(Duration::from_secs(300))
        .args(args)
        .output()
        .unwrap()
}

const ENGINE: &[&str] = &["--preset", "tiny", "--max-num-seqs", "8"];

#[test]
fn the_predicted_knee_is_the_simulators_true_knee_and_explains_itself() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("p.json");
    let json = json.to_str().unwrap();
    let slo = "p99_ttft_ms<=400";
    let mut args = vec!["predict", "--slo", slo, "--random-input-len", "256"];
    args.extend_from_slice(ENGINE);
    args.extend([
        "--random-output-len",
        "64",
        "--requests",
        "2000",
        "--warmup",
        "200",
        "--seeds",
        "2",
        "--target-rate",
        "100",
        "--at-rates",
        "5,1000",
        "-o",
        json,
    ]);
    let out = kneecap(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("PREDICTED knee: "), "{text}");
    assert!(lines[0].contains("not a measurement"), "{text}");
    assert!(text.contains("  binds: batch slots full: "), "{text}");
    assert!(
        text.contains("  what moves it: max_num_seqs 8: at 6 (−25%) "),
        "{text}"
    );
    assert!(
        text.contains("  replicas for 100 req/s within the SLO: "),
        "{text}"
    );
    assert!(text.contains(" CPU s ("), "{text}");
    assert!(text.contains("  PREDICTED latency (ms) at "), "{text}");
    assert!(text.contains("(overloaded: the queue grows)"), "{text}");

    let p: Value = serde_json::from_str(&std::fs::read_to_string(json).unwrap()).unwrap();
    assert_eq!(p["kind"], "kneecap-predict");
    assert_eq!(
        (p["schema_version"].as_u64(), p["predicted"].as_bool()),
        (Some(1), Some(true))
    );
    let knee = &p["knee"];
    assert_eq!(knee["explain"]["binds"], "batch_slots");
    // The latency at a light load and far past the knee.
    let at = p["at_rates"].as_array().unwrap();
    assert_eq!(at.len(), 2, "{at:?}");
    assert_eq!(
        (at[0]["steady"].as_bool(), at[1]["steady"].as_bool()),
        (Some(true), Some(false))
    );
    let ttft = |i: usize, q: &str| at[i]["ttft_ms"][q].as_f64().unwrap();
    assert!(
        ttft(0, "p50") > 0.0 && ttft(0, "p50") <= ttft(0, "p99"),
        "{at:?}"
    );
    assert!(ttft(1, "p99") > 10.0 * ttft(0, "p99"), "{at:?}");
    let predicted = knee["knee_req_s"].as_f64().unwrap();
    let replicas = p["target"]["replicas"].as_u64().unwrap();
    assert_eq!(replicas, (100.0 / predicted).ceil() as u64);
    let moves = &knee["explain"]["moves"];
    assert!(
        moves["minus_25"]["knee"].as_f64().unwrap() < predicted,
        "{moves}"
    );
    assert!(
        moves["plus_25"]["knee"].as_f64().unwrap() > predicted,
        "{moves}"
    );

    let mut truth = vec![
        "sim",
        "--explain",
        "--input-len",
        "256",
        "--output-len",
        "64",
    ];
    truth.extend_from_slice(ENGINE);
    truth.extend([
        "--slo",
        slo,
        "--truth-requests",
        "2000",
        "--truth-warmup",
        "200",
        "--truth-seeds",
        "2",
        "--json",
    ]);
    let out = kneecap(&truth);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let t: Value = serde_json::from_slice(&out.stdout).unwrap();
    let true_knee = t["true_knee"]["median_req_s"].as_f64().unwrap();
    // The same model, seeds and search: the same knee.
    assert!(
        (predicted - true_knee).abs() <= 1e-9 * true_knee,
        "{predicted} vs {true_knee}"
    );
}

#[test]
fn the_grid_prints_a_table_and_writes_its_json_and_heat_map() {
    let dir = tempfile::tempdir().unwrap();
    let (json, html) = (dir.path().join("g.json"), dir.path().join("g.html"));
    let out = kneecap(&[
        "predict",
        "--slo",
        "p99_ttft_ms<=500",
        "--grid",
        "--grid-input",
        "128,1024",
        "--grid-output",
        "32",
        "--grid-prefix",
        "0,0.5",
        "--requests",
        "1000",
        "--warmup",
        "100",
        "--seeds",
        "1",
        "-o",
        json.to_str().unwrap(),
        "--html",
        html.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.starts_with("PREDICTED knee (req/s, [interval] binding) over the grid"),
        "{text}"
    );
    assert_eq!(text.matches("  prefix share ").count(), 2, "{text}");
    let g: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let cells = g["grid"].as_array().unwrap();
    assert_eq!(cells.len(), 4);
    let knee = |i: usize| cells[i]["prediction"]["knee_req_s"].as_f64().unwrap();
    // Shared-prefix shares after plain prompts; longer prompts serve fewer.
    assert!(knee(1) < knee(0) && knee(3) < knee(2), "{cells:?}");
    assert!(
        knee(3) > knee(1),
        "a cached half prompt serves more: {cells:?}"
    );
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.starts_with("<!DOCTYPE html>") && page.contains(">PREDICTED</span>"));
}

#[test]
fn a_bad_flag_is_a_usage_error_naming_it() {
    for (args, flag) in [
        (
            &["predict", "--slo", "p99_ttft_ms<=500", "--seeds", "0"][..],
            "--seeds",
        ),
        (&["predict", "--slo", "nonsense"][..], "--slo"),
        (
            &["predict", "--slo", "ttft:1", "--at-rates", "2,-1"][..],
            "--at-rates",
        ),
        (
            &["predict", "--slo", "ttft:1", "--random-input-len", "5000"][..],
            "--max-model-len",
        ),
    ] {
        let out = kneecap(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(flag), "{args:?}: {err}");
    }
}

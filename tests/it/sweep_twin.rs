//! `sweep --predict`: the sweep profiles the server first (a real profile
//! over HTTP, written beside the sweep JSON), predicts the knee for its own
//! workload in virtual time, opens the search at the prediction's interval
//! ends, and sets predicted beside measured in the JSON and on the console.

use crate::common;

use common::cli::{run, short_steps, strings};
use kneecap::sim::SimConfig;
use kneecap::twin::ServerProfile;
use serde_json::Value;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_predicted_sweep_opens_at_the_interval_ends_and_sets_prediction_beside_measurement() {
    let dir = tempfile::tempdir().unwrap();
    let sim = common::sim::logged(
        SimConfig::from_preset("tiny").unwrap(),
        dir.path().join("server_log.jsonl"),
    )
    .await;
    let path = dir.path().join("sweep.json");
    let mut args = strings(&[
        "sweep",
        "--base-url",
        &sim.url,
        "--predict",
        "--twin-budget",
        "10",
        "--slo",
        "p99_ttft_ms<=300",
        "--random-input-len",
        "128",
        "--random-output-len",
        "16",
        "--max-steps",
        "2",
        "-o",
        path.to_str().unwrap(),
    ]);
    args.extend(short_steps("5s", "50"));
    let out = run(args, vec![]).await;
    sim.handle.shutdown().await.unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "{stdout}\n{stderr}"
    );
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let p = &r["prediction"];
    let f = |v: &Value| v.as_f64().unwrap_or_else(|| panic!("{v} in {p}"));
    let (knee, low, high) = (f(&p["knee_req_s"]), f(&p["low_req_s"]), f(&p["high_req_s"]));
    // A corner of a profile taken on a busy host may pass no rate at all:
    // then the low end is 0 and the search opens around the knee (below).
    assert!(
        0.0 < knee && 0.0 <= low && low <= knee && knee <= high,
        "{p}"
    );
    // The profile was measured now and written beside the sweep JSON.
    let written = dir.path().join("sweep.profile.json");
    assert_eq!(p["profile_path"], written.display().to_string(), "{p}");
    let profile: Value = serde_json::from_str(&std::fs::read_to_string(&written).unwrap()).unwrap();
    assert!(profile["params"].is_object(), "{profile}");
    assert!(f(&p["profile_s"]) <= 10.0 + 5.0, "within the budget: {p}");
    // The opening (3 significant digits), low first: the interval's ends,
    // or, when the interval is narrower than the 10% tolerance, the loads
    // 10% apart around the predicted knee.
    let opening: Vec<f64> = p["opening"].as_array().unwrap().iter().map(f).collect();
    assert_eq!(opening.len(), 2, "{p}");
    let near = |a: f64, b: f64| (a / b - 1.0).abs() < 0.01;
    if low > 0.0 && high / low >= 1.10 {
        assert!(near(opening[0], low) && near(opening[1], high), "{p}");
    } else {
        let centre = (opening[0] * opening[1]).sqrt();
        assert!(
            near(opening[1] / opening[0], 1.10) && near(centre, knee),
            "{p}"
        );
    }
    let steps = r["steps"].as_array().unwrap();
    let loads: Vec<f64> = steps.iter().map(|s| f(&s["load"])).collect();
    assert_eq!(
        loads[0], opening[0],
        "the first step is the low end: {loads:?}"
    );
    if steps[0]["verdict"] == "pass" {
        assert_eq!(loads[1], opening[1], "then the high end: {loads:?}");
    } else {
        assert!(
            loads[1] < opening[0],
            "a failed low end steps down: {loads:?}"
        );
    }
    // Predicted beside measured: the agreement follows the two intervals.
    let k = &r["knee"];
    let (pass, fail) = (k["last_pass"].as_f64(), k["first_fail"].as_f64());
    let want = match (pass, fail) {
        (Some(a), _) if a > high => "above",
        (_, Some(b)) if b < low => "below",
        (Some(_), Some(_)) => "confirmed",
        _ => "open",
    };
    assert_eq!(p["agreement"], want, "{p}\n{k}");
    let line = stdout
        .lines()
        .find(|l| l.starts_with("predicted knee:"))
        .unwrap_or_else(|| panic!("no prediction line:\n{stdout}"));
    assert!(
        line.contains("SIMULATED") && line.contains("measured"),
        "{line}"
    );
    assert!(stderr.contains("profiling the server first"), "{stderr}");
}

/// `sweep --predict --adaptive`: each step's verdict weighs the twin's
/// prediction at its load (a stated number of samples), and the search
/// opens at the twin-clear loads outside the predicted interval, where the
/// twin's least favourable parameter set passes with at most half the
/// allowed share over the bound, or fails with at least twice it.
///
/// The twin is a committed profile (no misfit: a busy host cannot turn the
/// prior off by flagging one) and the simulator runs its central values.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_adaptive_predicted_sweep_weighs_the_twin_at_each_step() {
    let profile_path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/profile.json");
    let profile =
        ServerProfile::from_json(&std::fs::read_to_string(profile_path).unwrap()).unwrap();
    assert!(profile.misfit().is_none());
    let mut engine = SimConfig::from_preset("tiny").unwrap();
    profile.apply(&mut engine);
    let dir = tempfile::tempdir().unwrap();
    let sim = common::sim::logged(engine, dir.path().join("server_log.jsonl")).await;
    let path = dir.path().join("sweep.json");
    let mut args = strings(&[
        "sweep",
        "--base-url",
        &sim.url,
        "--twin",
        profile_path,
        "--adaptive",
        "--twin-prior-weight",
        "2000",
        "--step-max-duration",
        "15s",
        "--slo",
        "p99_ttft_ms<=300",
        "--random-input-len",
        "128",
        "--random-output-len",
        "16",
        "--max-steps",
        "2",
        "-o",
        path.to_str().unwrap(),
    ]);
    args.extend(short_steps("5s", "50"));
    let out = run(args, vec![]).await;
    sim.handle.shutdown().await.unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(matches!(out.status.code(), Some(0 | 1)), "{stderr}");
    assert!(
        stderr.contains("weighs the twin's prediction at its load as 2000 samples"),
        "{stderr}"
    );
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let p = &r["prediction"];
    let f = |v: &Value| v.as_f64().unwrap_or_else(|| panic!("{v} in {p}"));
    let opening: Vec<f64> = p["opening"].as_array().unwrap().iter().map(f).collect();
    let (low, high) = (f(&p["low_req_s"]), f(&p["high_req_s"]));
    assert!(
        opening[0] <= low * 1.01 && opening[1] >= high * 0.99,
        "opened outside the interval: {p}"
    );
    let steps = r["steps"].as_array().unwrap();
    for s in steps {
        let prior = &s["decision"]["twin_prior"];
        assert_eq!(prior["weight"], 2000, "{s}");
        let slo = &prior["slos"][0];
        assert!(
            f(&slo["share_over_low"]) <= f(&slo["share_over_high"]),
            "{slo}"
        );
        let backing = slo["backing"].as_str().unwrap();
        assert!(
            ["agrees", "contradicted", "too_few", "silent"].contains(&backing),
            "{backing}"
        );
    }
    // The first step is the clear pass end: every parameter set of the twin
    // within half the allowed 1% there.
    assert_eq!(f(&steps[0]["load"]), opening[0]);
    let first = &steps[0]["decision"]["twin_prior"]["slos"][0];
    assert!(f(&first["share_over_high"]) <= 0.005, "{first}");
    if steps[0]["verdict"] == "pass" && steps.len() > 1 {
        assert_eq!(f(&steps[1]["load"]), opening[1]);
        let second = &steps[1]["decision"]["twin_prior"]["slos"][0];
        assert!(f(&second["share_over_low"]) >= 0.02, "{second}");
    }
}

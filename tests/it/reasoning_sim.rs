//! Reasoning models (issue 13) against the simulator with `--reasoning-tokens`:
//! vLLM's TTFT is the first reasoning delta, kneecap's TTFO the first answer
//! delta (both checked against the sim's server log), reasoning tokens are counted
//! exactly, and an SLO on TTFO decides a sweep step.

use crate::common;

use common::cli::{run, strings};
use kneecap::sim::{self, api::ReasoningField, SimConfig};
use serde_json::Value;

/// These tests measure timing: one at a time.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

const REASONING: u32 = 50;

async fn reasoning_sim(log: Option<std::path::PathBuf>, field: ReasoningField) -> sim::SimHandle {
    let mut cfg = SimConfig::from_preset("tiny").unwrap();
    cfg.server_log = log;
    cfg.reasoning_tokens = REASONING;
    cfg.reasoning_field = field;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    sim::start(cfg, listener).await.unwrap()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

async fn ttft_and_ttfo_match_the_server_log(field: ReasoningField) {
    let _serial = SERIAL.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("server_log.jsonl");
    let handle = reasoning_sim(Some(log.clone()), field).await;
    let url = format!("http://{}", handle.addr());
    let out = run(
        strings(&[
            "run",
            "--base-url",
            &url,
            "--backend",
            "openai-chat",
            "--num-prompts",
            "20",
            "--request-rate",
            "5",
            "--random-input-len",
            "32",
            "--random-output-len",
            "64",
            "--save-result",
            "--save-detailed",
            "--result-dir",
            dir.path().to_str().unwrap(),
            "--result-filename",
            "r.json",
            "--request-id-prefix",
            "e-",
            "--disable-tqdm",
        ]),
        vec![],
    )
    .await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    handle.shutdown().await.unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("Reasoning tokens:"), "{stdout}");

    let r: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("r.json")).unwrap()).unwrap();
    assert_eq!(r["completed"], 20);
    let k = &r["kneecap"];
    assert_eq!(
        k["reasoning"]["total_reasoning_tokens"],
        20 * REASONING,
        "{}",
        k["reasoning"]
    );
    assert_eq!(k["reasoning"]["reasoning_requests"], 20);
    // The answer's TPOT spreads 14 answer tokens, not 64.
    assert!(k["reasoning"]["answer_tpot"]["count"] == 20);
    let (mut ttft_diffs, mut ttfo_diffs) = (Vec::new(), Vec::new());
    for line in std::fs::read_to_string(&log).unwrap().lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        let Some(id) = v["request_id"].as_str() else {
            continue;
        };
        let i: usize = id.trim_start_matches("e-").parse().unwrap();
        assert_eq!(v["reasoning_tokens"], REASONING, "{line}");
        assert_eq!(k["reasoning_tokens"][i], REASONING, "request {i}");
        let arrival = v["arrival_s"].as_f64().unwrap();
        let server_ttft = v["first_reasoning_s"].as_f64().unwrap() - arrival;
        let server_ttfo = v["first_answer_s"].as_f64().unwrap() - arrival;
        assert!(server_ttfo > server_ttft + 0.1, "{line}");
        ttft_diffs.push((r["ttfts"][i].as_f64().unwrap() - server_ttft) * 1e3);
        ttfo_diffs.push((k["ttfos"][i].as_f64().unwrap() - server_ttfo) * 1e3);
    }
    assert_eq!(ttft_diffs.len(), 20, "one server log line per request");
    for (name, diffs) in [("TTFT", ttft_diffs), ("TTFO", ttfo_diffs)] {
        let m = median(diffs.clone());
        assert!(
            (0.0..1.0).contains(&m),
            "client {name} minus the server log's (ms), median {m}: {diffs:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ttft_is_the_first_reasoning_delta_and_ttfo_the_first_answer_vllm_field() {
    ttft_and_ttfo_match_the_server_log(ReasoningField::Reasoning).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ttft_and_ttfo_with_llama_cpps_reasoning_content_field() {
    ttft_and_ttfo_match_the_server_log(ReasoningField::ReasoningContent).await;
}

/// One sweep step at a light rate with a TTFT and a TTFO SLO of `ttfo_ms`.
async fn one_step(url: &str, ttfo_ms: u32) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sweep.json");
    let out = run(
        strings(&[
            "sweep",
            "--base-url",
            url,
            "--backend",
            "openai-chat",
            "--rates",
            "4",
            "--random-input-len",
            "32",
            "--random-output-len",
            "64",
            "--step-duration",
            "3s",
            "--step-warmup",
            "0.5s",
            "--step-min-requests",
            "10",
            "--step-drain",
            "5s",
            "--max-lateness-ms",
            "50",
            "--slo",
            "p99_ttft_ms<=150",
            "--slo",
            &format!("p99_ttfo_ms<={ttfo_ms}"),
            "--disable-tqdm",
            "-o",
            path.to_str().unwrap(),
        ]),
        vec![],
    )
    .await;
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let text = std::fs::read_to_string(&path).unwrap_or_else(|_| panic!("no sweep JSON: {stderr}"));
    let json: Value = serde_json::from_str(&text).unwrap();
    json["steps"][0].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_slo_on_ttfo_decides_a_sweep_step() {
    let _serial = SERIAL.lock().await;
    let handle = reasoning_sim(None, ReasoningField::Reasoning).await;
    let url = format!("http://{}", handle.addr());
    // 50 reasoning tokens at ≥ 5 ms a step: TTFO ≥ 250 ms, TTFT a few steps.
    let strict = one_step(&url, 150).await;
    let loose = one_step(&url, 2000).await;
    handle.shutdown().await.unwrap();
    let outcome = |step: &Value, metric: &str| -> Value {
        step["slo_outcomes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|o| o["slo"].as_str().unwrap().contains(metric))
            .cloned()
            .unwrap_or_else(|| panic!("no {metric} outcome: {step}"))
    };
    assert_eq!(outcome(&strict, "ttft")["pass"], true, "{strict}");
    assert_eq!(outcome(&strict, "ttfo")["pass"], false, "{strict}");
    assert_eq!(strict["verdict"], "fail", "{}", strict["reasons"]);
    assert_eq!(outcome(&loose, "ttfo")["pass"], true, "{loose}");
    assert_eq!(loose["verdict"], "pass", "{}", loose["reasons"]);
}

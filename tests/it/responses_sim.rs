//! `--backend openai-responses` against the simulator's `/v1/responses`
//! (issue 13): counts and TTFT match the sim's server log (ground truth).

use crate::common;

use common::cli::{run, strings};
use kneecap::sim::{self, SimConfig};
use serde_json::Value;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn responses_runs_match_the_server_log() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("server_log.jsonl");
    let mut cfg = SimConfig::from_preset("tiny").unwrap();
    cfg.server_log = Some(log.clone());
    cfg.reasoning_tokens = 4;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let handle = sim::start(cfg, listener).await.unwrap();
    let url = format!("http://{}", handle.addr());
    let out = run(
        strings(&[
            "run",
            "--base-url",
            &url,
            "--backend",
            "openai-responses",
            "--num-prompts",
            "12",
            "--request-rate",
            "6",
            "--random-input-len",
            "32",
            "--random-output-len",
            "16",
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
    let r: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("r.json")).unwrap()).unwrap();
    assert_eq!(r["backend"], "openai-responses");
    assert_eq!(r["completed"], 12, "{}", r["kneecap"]["first_errors"]);
    let mut diffs = Vec::new();
    let mut prompt_total = 0;
    for line in std::fs::read_to_string(&log).unwrap().lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        let Some(id) = v["request_id"].as_str() else {
            continue;
        };
        assert_eq!(v["endpoint"], "responses");
        let i: usize = id.trim_start_matches("e-").parse().unwrap();
        assert_eq!(r["output_lens"][i], v["output_tokens"], "request {i}");
        prompt_total += v["prompt_tokens"].as_u64().unwrap();
        let server_ttft = v["first_token_s"].as_f64().unwrap() - v["arrival_s"].as_f64().unwrap();
        diffs.push((r["ttfts"][i].as_f64().unwrap() - server_ttft) * 1e3);
        let server_ttfo = v["first_answer_s"].as_f64().unwrap() - v["arrival_s"].as_f64().unwrap();
        let client_ttfo = r["kneecap"]["ttfos"][i].as_f64().unwrap();
        assert!(
            (client_ttfo - server_ttfo).abs() < 0.05,
            "TTFO {client_ttfo} vs {server_ttfo}"
        );
    }
    assert_eq!(diffs.len(), 12);
    assert_eq!(r["total_output_tokens"], 12 * 16);
    assert_eq!(
        r["total_input_tokens"], prompt_total,
        "input counts from usage"
    );
    assert_eq!(r["kneecap"]["reasoning"]["total_reasoning_tokens"], 12 * 4);
    diffs.sort_by(f64::total_cmp);
    let median = diffs[diffs.len() / 2];
    assert!(
        (0.0..1.0).contains(&median),
        "client TTFT minus the server log's (ms), median {median}: {diffs:?}"
    );
}

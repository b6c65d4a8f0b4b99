//! `kneecap run` end to end against our own streaming test server on
//! 127.0.0.1:0: measured numbers versus the server's ground truth, vLLM JSON
//! keys, request bodies and headers, and HTTP errors counted by class (CLI
//! errors and redaction: tests/run_errors_cli.rs).

use crate::common;

use common::cli::{run, strings};
use common::{Behaviour, TestServer};
use serde_json::Value;
use std::time::Duration;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

async fn light_load_run(server: &TestServer, dir: &std::path::Path, extra: &[&str]) -> Value {
    let mut args = strings(&[
        "run",
        "--base-url",
        &server.url(),
        "--num-prompts",
        "20",
        "--request-rate",
        "20",
        "--random-input-len",
        "16",
        "--random-output-len",
        "8",
        "--seed",
        "1",
        "--percentile-metrics",
        "ttft,tpot,itl,e2el",
        "--metric-percentiles",
        "50,99",
        "--save-result",
        "--save-detailed",
        "--result-dir",
        dir.to_str().unwrap(),
        "--result-filename",
        "r.json",
        "--request-id-prefix",
        "t-",
        "--disable-tqdm",
    ]);
    args.extend(strings(extra));
    let out = run(args, vec![]).await;
    assert!(
        out.status.success(),
        "kneecap failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(dir.join("r.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn light_load_numbers_match_the_servers_ground_truth_within_a_millisecond() {
    let server = common::start(Behaviour {
        ttft: Duration::from_millis(30),
        per_token: Duration::from_millis(10),
        ..Default::default()
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let json = light_load_run(&server, dir.path(), &[]).await;

    assert_eq!(json["completed"], 20);
    assert_eq!(json["failed"], 0);
    assert_eq!(
        json["total_output_tokens"],
        20 * 8,
        "usage.completion_tokens summed"
    );
    assert_eq!(
        json["total_input_tokens"],
        20 * 7,
        "usage.prompt_tokens overrides the dataset count"
    );

    let truths = server.truths.lock().unwrap().clone();
    assert_eq!(truths.len(), 20);
    let ttfts = json["ttfts"].as_array().unwrap();
    let mut ttft_diff = Vec::new();
    let mut tpot_diff = Vec::new();
    for t in &truths {
        let i: usize = t.request_id.trim_start_matches("t-").parse().unwrap();
        let server_ttft = t.event_times[0] - t.received;
        ttft_diff.push((ttfts[i].as_f64().unwrap() - server_ttft).abs() * 1e3);
        let n = t.event_times.len() as f64;
        let server_tpot = (t.event_times.last().unwrap() - t.event_times[0]) / (n - 1.0);
        let client_latency = json["latencies"][i].as_f64().unwrap();
        let client_tpot = (client_latency - ttfts[i].as_f64().unwrap()) / (n - 1.0);
        tpot_diff.push((client_tpot - server_tpot).abs() * 1e3);
    }
    assert!(
        median(ttft_diff.clone()) < 1.0,
        "client TTFT vs server truth (ms): {ttft_diff:?}"
    );
    assert!(
        median(tpot_diff.clone()) < 1.0,
        "client TPOT vs server truth (ms): {tpot_diff:?}"
    );
    // The configured delays, with room for a loaded machine.
    let ttft = json["median_ttft_ms"].as_f64().unwrap();
    let tpot = json["median_tpot_ms"].as_f64().unwrap();
    let itl = json["median_itl_ms"].as_f64().unwrap();
    assert!((29.0..45.0).contains(&ttft), "median TTFT {ttft}");
    assert!((9.0..13.0).contains(&tpot), "median TPOT {tpot}");
    assert!((9.0..13.0).contains(&itl), "median ITL {itl}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn result_json_has_vllm_keys_in_vllm_units() {
    let server = common::start(Behaviour::default()).await;
    let dir = tempfile::tempdir().unwrap();
    let json = light_load_run(
        &server,
        dir.path(),
        &[
            "--goodput",
            "ttft:1000",
            "tpot:500",
            "--metadata",
            "team=infra",
        ],
    )
    .await;
    for key in [
        "date",
        "endpoint_type",
        "backend",
        "label",
        "model_id",
        "tokenizer_id",
        "num_prompts",
        "request_rate",
        "burstiness",
        "max_concurrency",
        "duration",
        "completed",
        "failed",
        "total_input_tokens",
        "total_output_tokens",
        "request_throughput",
        "request_goodput",
        "output_throughput",
        "total_token_throughput",
        "latencies",
        "queue_times",
        "max_output_tokens_per_s",
        "max_concurrent_requests",
        "rtfx",
        "mean_ttft_ms",
        "median_ttft_ms",
        "std_ttft_ms",
        "p50_ttft_ms",
        "p99_ttft_ms",
        "mean_tpot_ms",
        "p99_itl_ms",
        "mean_e2el_ms",
        "p99_e2el_ms",
        "input_lens",
        "output_lens",
        "ttfts",
        "itls",
        "errors",
        "kneecap",
    ] {
        assert!(json.get(key).is_some(), "missing key {key}");
    }
    assert_eq!(json["team"], "infra");
    assert_eq!(
        json["model_id"], "org/test-model",
        "model discovered from /v1/models root"
    );
    assert_eq!(json["request_rate"], 20.0);
    let goodput = json["request_goodput"].as_f64().unwrap();
    let throughput = json["request_throughput"].as_f64().unwrap();
    assert!(
        (goodput - throughput).abs() < 1e-9,
        "every request meets a loose SLO"
    );
    // Seconds in arrays, milliseconds in stats.
    let lat0 = json["latencies"][0].as_f64().unwrap();
    assert!(lat0 > 0.01 && lat0 < 1.0, "latency in seconds: {lat0}");
    assert!(json["mean_e2el_ms"].as_f64().unwrap() > 10.0);
    let k = &json["kneecap"];
    // The generator's self-check is always there (its verdict depends on the machine).
    assert!(k["generator"]["limited"].is_boolean(), "{}", k["generator"]);
    assert_eq!(
        k["generator"]["lateness_judged"], true,
        "a finite-rate schedule is judged"
    );
    assert!(k["generator"]["lateness_bound_ms"].as_f64().unwrap() >= 1.0);
    assert!(k["dispatch_lateness"]["p99_ms"].as_f64().is_some());
    assert!(
        k["ttft_from_due"]["p50_ms"].as_f64().unwrap()
            >= json["median_ttft_ms"].as_f64().unwrap() - 0.5
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_inf_is_written_as_the_string_inf_and_default_stats_omit_e2el() {
    let server = common::start(Behaviour::default()).await;
    let dir = tempfile::tempdir().unwrap();
    let args = strings(&[
        "bench",
        "serve",
        "--backend",
        "vllm",
        "--use-beam-search",
        "--trust_remote_code",
        "--tokenizer_mode",
        "auto",
        "--base-url",
        &server.url(),
        "--num-prompts",
        "5",
        "--random-input-len",
        "8",
        "--random-output-len",
        "4",
        "--save-result",
        "--result-dir",
        dir.path().to_str().unwrap(),
        "--result-filename",
        "r.json",
        "--disable-tqdm",
    ]);
    let out = run(args, vec![]).await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("r.json")).unwrap()).unwrap();
    assert_eq!(json["request_rate"], "inf");
    assert!(
        json.get("mean_e2el_ms").is_none(),
        "vLLM does not save E2EL stats by default"
    );
    assert!(
        json.get("ttfts").is_none(),
        "per-request arrays only with --save-detailed"
    );
    assert_eq!(json["backend"], "vllm");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("============ Serving Benchmark Result ============"),
        "{stdout}"
    );
    assert!(
        stdout.contains("Successful requests:                     5"),
        "{stdout}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_requests_use_messages_and_max_completion_tokens() {
    let server = common::start(Behaviour::default()).await;
    let dir = tempfile::tempdir().unwrap();
    let json = light_load_run(
        &server,
        dir.path(),
        &["--backend", "openai-chat", "--temperature", "0.5"],
    )
    .await;
    assert_eq!(json["completed"], 20);
    let truths = server.truths.lock().unwrap().clone();
    let body = &truths[0].body;
    assert!(
        body["messages"][0]["content"][0]["text"].is_string(),
        "{body}"
    );
    assert_eq!(body["max_completion_tokens"], 8);
    assert_eq!(body["stream"], true);
    assert_eq!(body["stream_options"]["include_usage"], true);
    assert_eq!(body["ignore_eos"], true, "forced for the random dataset");
    assert_eq!(body["temperature"], 0.5);
    assert!(body.get("max_tokens").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_key_and_headers_are_sent_but_never_saved() {
    let server = common::start(Behaviour::default()).await;
    let dir = tempfile::tempdir().unwrap();
    let secret = "sk-test-0123456789abcdef";
    let args = strings(&[
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
        "X-Custom=hdr-secret-value",
        "--save-result",
        "--save-detailed",
        "--result-dir",
        dir.path().to_str().unwrap(),
        "--result-filename",
        "r.json",
        "--disable-tqdm",
    ]);
    let out = run(args, vec![("OPENAI_API_KEY".into(), secret.into())]).await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let truths = server.truths.lock().unwrap().clone();
    let h = &truths[0].headers;
    assert!(
        h.contains(&("authorization".into(), format!("Bearer {secret}"))),
        "{h:?}"
    );
    assert!(
        h.contains(&("x-custom".into(), "hdr-secret-value".into())),
        "{h:?}"
    );
    assert!(
        h.iter()
            .any(|(k, v)| k == "x-request-id" && v.starts_with("bench-")),
        "{h:?}"
    );
    let saved = std::fs::read_to_string(dir.path().join("r.json")).unwrap();
    let printed = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    for text in [&saved, &printed] {
        assert!(
            !text.contains(secret) && !text.contains("hdr-secret-value"),
            "secret leaked"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_errors_are_counted_and_classified_not_dropped() {
    let server = common::start(Behaviour {
        status: Some(503),
        ..Default::default()
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let args = strings(&[
        "run",
        "--base-url",
        &server.url(),
        "--num-prompts",
        "4",
        "--random-input-len",
        "8",
        "--random-output-len",
        "2",
        "--save-result",
        "--result-dir",
        dir.path().to_str().unwrap(),
        "--result-filename",
        "r.json",
        "--disable-tqdm",
    ]);
    let out = run(args, vec![]).await;
    assert!(
        out.status.success(),
        "the run completed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("r.json")).unwrap()).unwrap();
    assert_eq!(json["completed"], 0);
    assert_eq!(json["failed"], 4);
    assert_eq!(json["kneecap"]["errors_by_kind"]["http_status"], 4);
    assert!(json["kneecap"]["first_errors"][0]
        .as_str()
        .unwrap()
        .contains("503"));
}

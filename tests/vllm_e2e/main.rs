//! kneecap end to end against the real vLLM engine: vLLM 0.32's CPU build
//! serving a SmolLM2-135M-shaped model with random weights
//! (`scripts/vllm-server.sh`). Runs only when `KNEECAP_VLLM` and
//! `KNEECAP_VLLM_MODEL` are set — `scripts/vllm-server.sh env` builds the
//! venv and prints both — and otherwise prints a skip line and passes.
//!
//! Two servers, one test each (a vLLM start costs 1–3 minutes here):
//! - the default engine (`max_num_seqs` 128, `max_num_batched_tokens`
//!   2048, prefix caching on) in dev mode: a run against the server's own
//!   counters and histograms, its prefix cache and `--reset-prefix-cache`
//!   with the step gauges (`cache`), the refusals of bad input, and the run
//!   side by side with vLLM's own client (`side_by_side`), and the twin:
//!   a profile, the knee it predicts for a held-out shape, and a sweep that
//!   must bracket that knee within ±25% (`twin`);
//! - a small engine (8 sequences, 256 tokens a step) without dev mode
//!   (`small`): a server that is not ready yet, a sweep that brackets its
//!   knee, and the one line for a reset the server does not offer.

mod cache;
mod side_by_side;
mod small;
mod support;
mod twin;

use serde_json::Value;
use std::path::Path;
use std::time::Duration;
use support::{f, json, kneecap_line, text, tokenizer, vllm_env, Metrics, VllmServer, SERIAL};

/// How far a client's mean may sit above the server's own mean over the
/// same requests: the HTTP server's parsing, the stream's framing and the
/// loopback hops, none of which the engine's histograms see. Measured here
/// (2-core box, 32 requests at 2 req/s, 128 in / 32 out): kneecap +3.6 to
/// +10 ms for TTFT and +2 to +7 ms for E2E on means of 0.2–13 s, the same as
/// vLLM's own client, on a quiet host; on 2026-12-06, with the host slower,
/// +34 to +95 ms for kneecap's TTFT (on means of 0.3–0.7 s) and +76 ms for
/// vLLM's client, each run's E2E offset within 12 ms of its TTFT offset: a
/// delay common to both ends of a request, the server's API front end
/// before its engine's clock starts, not the client's. Hence 100 ms and a
/// 10% share for a busy machine.
pub fn offset_bound_ms(server_mean_ms: f64) -> f64 {
    100.0 + 0.1 * server_mean_ms
}

#[test]
fn default_vllm_engine_in_dev_mode() {
    let Some(_) = vllm_env("default_vllm_engine_in_dev_mode") else {
        return;
    };
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let server = VllmServer::start(true, &[]);
    let dir = tempfile::tempdir().unwrap();
    run_agrees_with_the_servers_own_counters(&server, dir.path());
    cache::prefix_cache_hits_and_resets(&server, dir.path());
    bad_input_gets_one_line_and_no_file(&server, dir.path());
    side_by_side::kneecap_and_vllms_client_read_the_same_server(&server, dir.path());
    twin::a_profile_predicts_a_held_out_knee_within_25_percent(&server, dir.path());
}

#[test]
fn small_vllm_engine_without_dev_mode() {
    let Some(_) = vllm_env("small_vllm_engine_without_dev_mode") else {
        return;
    };
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    small::not_ready_then_a_sweep_brackets_the_knee();
}

/// One `kneecap run` (128 in / 32 out, 32 requests at 2 req/s, completions,
/// no `--model`): its JSON in vLLM's shape, its counts equal to the server's
/// own counters' deltas, its TTFT and E2E means at or just above the
/// server's histograms', and what the server said about itself.
fn run_agrees_with_the_servers_own_counters(server: &VllmServer, dir: &Path) {
    let before = server.metrics();
    let run = run_json(server, dir, "run.json", "--seed 0");
    let after = server.metrics();
    assert_eq!(
        (run["completed"].as_u64(), run["failed"].as_u64()),
        (Some(32), Some(0))
    );
    let counted = |name: &str| after.delta(&before, name);
    assert_eq!(counted("vllm:request_success_total"), 32.0, "requests");
    assert_eq!(
        counted("vllm:prompt_tokens_total"),
        f(&run["total_input_tokens"]),
        "prompt tokens: kneecap's total vs the server's counter"
    );
    assert_eq!(
        counted("vllm:generation_tokens_total"),
        f(&run["total_output_tokens"]),
        "generated tokens: kneecap's total vs the server's counter"
    );
    assert_eq!(
        f(&run["total_output_tokens"]),
        32.0 * 32.0,
        "ignore_eos: 32 each"
    );
    for (histogram, key) in [
        ("vllm:time_to_first_token_seconds", "mean_ttft_ms"),
        ("vllm:e2e_request_latency_seconds", "mean_e2el_ms"),
    ] {
        let server_ms = after.mean_since(&before, histogram) * 1e3;
        check_offset(key, f(&run[key]), server_ms);
    }
    vllm_keys_and_model(server, &run);
    server_block(server, &run["kneecap"]["server"]);
}

/// kneecap's mean `key` against the server's over the same requests.
pub fn check_offset(key: &str, client_ms: f64, server_ms: f64) {
    let offset = client_ms - server_ms;
    eprintln!("{key}: client {client_ms:.1} ms, server {server_ms:.1} ms, offset {offset:+.1} ms");
    assert!(
        (0.0..=offset_bound_ms(server_ms)).contains(&offset),
        "{key}: the client's mean {client_ms:.1} ms vs the server's {server_ms:.1} ms \
         (a client cannot see a request sooner than the engine; bound +{:.0} ms)",
        offset_bound_ms(server_ms)
    );
}

/// `kneecap run` of the side-by-side workload with `extra` flags; its JSON.
pub fn run_json(server: &VllmServer, dir: &Path, name: &str, extra: &str) -> Value {
    let line = format!(
        "run --base-url {} --tokenizer {} {WORKLOAD} {extra} --save-result \
         --result-dir {} --result-filename {name} --disable-tqdm",
        server.url,
        tokenizer(),
        dir.display()
    );
    let out = kneecap_line(&line, Duration::from_secs(300));
    let (stdout, stderr) = text(&out);
    assert!(
        out.status.success(),
        "{stdout}\n{stderr}\n{}",
        server.log_tail()
    );
    json(&dir.join(name))
}

/// The workload both clients send in the side-by-side runs.
pub const WORKLOAD: &str = "--backend vllm --endpoint /v1/completions --dataset-name random \
     --random-input-len 128 --random-output-len 32 --num-prompts 32 --request-rate 2 \
     --percentile-metrics ttft,tpot,itl,e2el --metric-percentiles 50,99";

/// vLLM's keys in vLLM's order, and the model named as vLLM's client names
/// it: the listing's `id` in requests (every request was served, and this
/// server answers only to `smollm2`), its `root` as `model_id`.
fn vllm_keys_and_model(server: &VllmServer, run: &Value) {
    let keys: Vec<&str> = run
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    let order = [
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
    ];
    let at: Vec<usize> = order
        .iter()
        .map(|k| {
            keys.iter()
                .position(|x| x == k)
                .unwrap_or_else(|| panic!("no {k}: {keys:?}"))
        })
        .collect();
    assert!(
        at.windows(2).all(|w| w[0] < w[1]),
        "vLLM's key order: {keys:?}"
    );
    for k in [
        "mean_ttft_ms",
        "median_tpot_ms",
        "p99_itl_ms",
        "std_e2el_ms",
        "p50_ttft_ms",
    ] {
        assert!(run[k].is_number(), "{k}");
    }
    let (status, listing) = server.get("/v1/models").unwrap();
    assert_eq!(status, 200);
    let listing: Value = serde_json::from_str(&listing).unwrap();
    let entry = &listing["data"][0];
    assert_eq!(entry["id"], "smollm2");
    assert_eq!(
        run["model_id"], entry["root"],
        "vLLM's model_id is the root"
    );
    assert_eq!(run["kneecap"]["server"]["model_root"], entry["root"]);
}

/// `kneecap.server` against the server's own log and vLLM's CPU defaults.
fn server_block(server: &VllmServer, block: &Value) {
    eprintln!("kneecap.server: {block}");
    let logged = server.logged_kv_tokens();
    assert_eq!(block["source"], "vllm");
    assert_eq!(
        block["kv_cache_tokens"].as_u64(),
        Some(logged),
        "vs the engine's log"
    );
    assert_eq!(block["block_size"], 128);
    assert_eq!(
        block["num_blocks"].as_u64().map(|b| b * 128),
        Some(logged),
        "blocks × block size"
    );
    assert_eq!(block["prefix_caching"], true);
    assert_eq!(block["max_model_len"], 2048, "--max-model-len 2048");
    // vLLM's CPU defaults; read from the dev-mode /server_info.
    assert_eq!(block["max_num_seqs"], 128);
    assert_eq!(block["max_num_batched_tokens"], 2048);
    assert_eq!(block["chunked_prefill"], true);
}

/// A model the server does not serve, and prompts longer than its context:
/// exit 2, one line with the server's own message and the flag to change,
/// and no result file.
fn bad_input_gets_one_line_and_no_file(server: &VllmServer, dir: &Path) {
    let cases = [
        (
            "--model nosuch --random-input-len 16",
            "does not exist",
            "--model",
        ),
        (
            "--random-input-len 3000",
            "maximum context length is 2048",
            "--max-model-len",
        ),
    ];
    for (flags, said, fix) in cases {
        let name = "refused.json";
        let line = format!(
            "run --base-url {} --tokenizer {} {flags} --random-output-len 4 --num-prompts 12 \
             --request-rate inf --save-result --result-dir {} --result-filename {name}",
            server.url,
            tokenizer(),
            dir.display()
        );
        let out = kneecap_line(&line, Duration::from_secs(120));
        let (_, stderr) = text(&out);
        eprintln!("{flags}: {stderr}");
        assert_eq!(out.status.code(), Some(2), "{flags}: {stderr}");
        let errors: Vec<&str> = stderr.lines().filter(|l| l.starts_with("error:")).collect();
        assert_eq!(errors.len(), 1, "{flags}: one line\n{stderr}");
        assert!(
            errors[0].contains(said) && errors[0].contains(fix),
            "{flags}: {}",
            errors[0]
        );
        assert!(!stderr.contains("panicked"), "{stderr}");
        assert!(!dir.join(name).exists(), "{flags}: nothing written");
    }
}

/// Server-side means over a window, for the side-by-side table.
pub fn server_means(before: &Metrics, after: &Metrics) -> (f64, f64) {
    (
        after.mean_since(before, "vllm:time_to_first_token_seconds") * 1e3,
        after.mean_since(before, "vllm:e2e_request_latency_seconds") * 1e3,
    )
}

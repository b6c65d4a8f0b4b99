//! kneecap beside vLLM's own client (`vllm bench serve` from the server's
//! venv) on the same server, workload, seed and rate, each run twice and in
//! turn (kneecap, vLLM, kneecap, vLLM), every run windowed by the server's
//! own counters and histograms.
//!
//! What must agree: the completed count, the token totals and `model_id`
//! (the same dataset sent the same way); kneecap's TTFT and E2E means at or
//! just above the server's own over its run ([`super::check_offset`]), vLLM's
//! client's at or above them (its own overhead is its own: on this 2-core
//! box its mean TTFT sat up to 76 ms above the server's, past the bound
//! kneecap is held to);
//! and the two tools' TTFT, TPOT and E2EL medians within the spread of each
//! tool run twice plus 25% of vLLM's. The 25% is for the server, not the
//! clients: vLLM's client spends several CPU seconds per run on this 2-core
//! box, which the engine loses, so its runs see a slower server (17% on E2E
//! when first measured); the offsets show both read the server they got.

use super::support::{f, json, text, vllm_env, VllmServer};
use super::{check_offset, run_json, server_means, WORKLOAD};
use serde_json::Value;
use std::path::Path;
use std::time::Duration;

/// One run of either tool: its JSON, the server's TTFT and E2E means over
/// it (ms), and the client's CPU time (s).
struct Run {
    json: Value,
    server_ttft_ms: f64,
    server_e2el_ms: f64,
    cpu_s: f64,
}

pub fn kneecap_and_vllms_client_read_the_same_server(server: &VllmServer, dir: &Path) {
    let mut kneecap = Vec::new();
    let mut vllm = Vec::new();
    for i in 0..2 {
        kneecap.push(windowed(server, || kneecap_run(server, dir, i)));
        vllm.push(windowed(server, || vllm_run(server, dir, i)));
    }
    for r in kneecap.iter().chain(&vllm) {
        assert_eq!(r.json["completed"], 32);
        for key in [
            "total_input_tokens",
            "total_output_tokens",
            "model_id",
            "num_prompts",
        ] {
            assert_eq!(
                r.json[key], vllm[0].json[key],
                "{key}: kneecap vs vLLM's client"
            );
        }
    }
    for r in &kneecap {
        check_offset("mean_ttft_ms", f(&r.json["mean_ttft_ms"]), r.server_ttft_ms);
        check_offset("mean_e2el_ms", f(&r.json["mean_e2el_ms"]), r.server_e2el_ms);
    }
    for r in &vllm {
        for (key, server_ms) in [
            ("mean_ttft_ms", r.server_ttft_ms),
            ("mean_e2el_ms", r.server_e2el_ms),
        ] {
            let client_ms = f(&r.json[key]);
            eprintln!(
                "vLLM's client {key}: {client_ms:.1} ms, server {server_ms:.1} ms, offset {:+.1} ms",
                client_ms - server_ms
            );
            assert!(
                client_ms >= server_ms,
                "{key}: vLLM's client saw {client_ms:.1} ms, sooner than the server's {server_ms:.1} ms"
            );
        }
    }
    table(&kneecap, &vllm);
    for key in ["median_ttft_ms", "median_tpot_ms", "median_e2el_ms"] {
        let (k, v) = (medians(&kneecap, key), medians(&vllm, key));
        let spread = (k[0] - k[1]).abs().max((v[0] - v[1]).abs());
        let gap = (mean(&k) - mean(&v)).abs();
        let bound = spread + 0.25 * mean(&v);
        assert!(
            gap <= bound,
            "{key}: kneecap {k:?} vs vLLM's client {v:?}: the tools differ by {gap:.1} ms, \
             more than the spread of each run twice plus 25% ({bound:.1} ms)"
        );
    }
}

/// `run` between two scrapes of the server's metrics.
fn windowed(server: &VllmServer, run: impl FnOnce() -> (Value, f64)) -> Run {
    let before = server.metrics();
    let (json, cpu_s) = run();
    let (server_ttft_ms, server_e2el_ms) = server_means(&before, &server.metrics());
    Run {
        json,
        server_ttft_ms,
        server_e2el_ms,
        cpu_s,
    }
}

fn kneecap_run(server: &VllmServer, dir: &Path, i: usize) -> (Value, f64) {
    let started = cpu_of_children();
    let json = run_json(server, dir, &format!("kneecap-{i}.json"), "--seed 0");
    (json, cpu_of_children() - started)
}

/// `vllm bench serve` with the same flags, offline, from the server's venv.
fn vllm_run(server: &VllmServer, dir: &Path, i: usize) -> (Value, f64) {
    let (vllm, model) = vllm_env("side by side").unwrap();
    let name = format!("vllm-{i}.json");
    let started = cpu_of_children();
    let out = assert_cmd::Command::new(vllm)
        .timeout(Duration::from_secs(300))
        .args(["bench", "serve", "--base-url", &server.url])
        .args(["--tokenizer", model.to_str().unwrap(), "--seed", "0"])
        .args(WORKLOAD.split_whitespace())
        .args(["--save-result", "--result-dir", dir.to_str().unwrap()])
        .args(["--result-filename", &name])
        .env("HF_HUB_OFFLINE", "1")
        .env("TRANSFORMERS_OFFLINE", "1")
        .output()
        .unwrap();
    let cpu = cpu_of_children() - started;
    let (stdout, stderr) = text(&out);
    assert!(
        out.status.success(),
        "vllm bench serve:\n{stdout}\n{stderr}"
    );
    (json(&dir.join(&name)), cpu)
}

/// CPU seconds (user + system) of every waited-for child so far.
fn cpu_of_children() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // After the command's closing parenthesis come fields 3 (state) on;
    // cutime and cstime are fields 16 and 17, in clock ticks (USER_HZ, 100).
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let field = |n: usize| rest.split_whitespace().nth(n - 3)?.parse::<f64>().ok();
    field(16)
        .zip(field(17))
        .map_or(f64::NAN, |(u, s)| (u + s) / 100.0)
}

fn medians(runs: &[Run], key: &str) -> Vec<f64> {
    runs.iter().map(|r| f(&r.json[key])).collect()
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

/// The side-by-side table (BENCHMARKS.md's form), on stderr.
fn table(kneecap: &[Run], vllm: &[Run]) {
    eprintln!("| run | TTFT p50 | TPOT p50 | E2EL p50 | TTFT mean − server's | E2E mean − server's | server E2E mean | client CPU s |");
    eprintln!("|---|---|---|---|---|---|---|---|");
    let runs = kneecap.iter().map(|r| ("kneecap", r));
    for (i, (tool, r)) in runs
        .chain(vllm.iter().map(|r| ("vllm bench serve", r)))
        .enumerate()
    {
        let j = &r.json;
        eprintln!(
            "| {tool} {} | {:.1} | {:.1} | {:.0} | {:+.1} | {:+.1} | {:.0} | {:.1} |",
            i % 2 + 1,
            f(&j["median_ttft_ms"]),
            f(&j["median_tpot_ms"]),
            f(&j["median_e2el_ms"]),
            f(&j["mean_ttft_ms"]) - r.server_ttft_ms,
            f(&j["mean_e2el_ms"]) - r.server_e2el_ms,
            r.server_e2el_ms,
            r.cpu_s
        );
    }
}

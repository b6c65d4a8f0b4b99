//! The twin against the real vLLM engine (issue 38): `kneecap profile`
//! fits the default engine within its budget, with nothing misfit and
//! nothing reported as measured that the probes did not pin down; the
//! figures the server publishes (KV cache, batch limit, token budget) are
//! the server's own; `kneecap predict --profile` gives the knee of a shape
//! no probe sent (128 in / 32 out), and a measured sweep of that shape must
//! bracket a knee within ±25% of it.
//!
//! **The ±25% bar**, as in the llama.cpp test: the prediction `p` is within
//! ±25% of the true knee `k` when `k ∈ [0.8 p, 4/3 p]`; the sweep's bracket
//! `[last pass, first fail]` must lie inside that. Its loads are multiples
//! of `p` that include both ends, with one between and one beyond each.
//! Arrivals are evenly spaced and the SLO is on the TTFT's p90 (2 s): the
//! knee is where the engine's throughput runs out and requests queue, not
//! one slow request of a short step. Steps warm up 10 s and measure 30 s
//! (up to 60): near its capacity the engine's batch grows for tens of
//! seconds, and 20-s steps after a 3-s warm-up read loads at 76-82% of
//! their offered rate there as not steady, below a load that passed
//! (docs/benchmarks/2026-12-07.md, "The mixed level").

use super::support::{f, json, kneecap_line, text, VllmServer};
use serde_json::Value;
use std::path::Path;
use std::time::{Duration, Instant};

/// `profile --budget`, seconds.
const BUDGET_S: u64 = 90;
/// The held-out shape: the probes send 16-token and longer lone prompts
/// with 2-token outputs, 8-token prompts with 64-token outputs,
/// interference prompts with 1-token outputs (`src/twin/plan.rs`) and
/// 256-token prompts with 16-48-token outputs (`src/twin/mixed.rs`).
const SHAPE: &str = "--random-input-len 128 --random-output-len 32";
const SLO: &str = "p90_ttft_ms<=2000";
/// The sweep's loads as multiples of the predicted knee; the bar's ends
/// (0.8 and 4/3) are at [`BAR`].
const AROUND: [f64; 5] = [0.65, 0.8, 1.0, 4.0 / 3.0, 1.6];
const BAR: (usize, usize) = (1, 3);

pub fn a_profile_predicts_a_held_out_knee_within_25_percent(server: &VllmServer, dir: &Path) {
    let t0 = Instant::now();
    let prof = profile(server, dir);
    let knee = predict(dir);
    let p = f(&knee["knee_req_s"]);
    assert!(p > 0.0, "a knee above zero: {knee}");
    let rates: Vec<String> = AROUND.iter().map(|m| format!("{:.3}", m * p)).collect();
    let measured = sweep(server, dir, &rates.join(","));
    let (lp, ff) = (
        measured["knee"]["last_pass"].as_f64(),
        measured["knee"]["first_fail"].as_f64(),
    );
    let load = |i: usize| rates[i].parse::<f64>().unwrap();
    let (bar_low, bar_high) = (load(BAR.0), load(BAR.1));
    eprintln!(
        "TWIN vs MEASURED (vLLM): predicted {p:.3} req/s (interval {:.3}–{:.3}); measured bracket {lp:?}..{ff:?}; ±25% allows {bar_low}..{bar_high}; prefill {:.0} µs/token, decode {:.0} µs/seq; {:.0} s",
        f(&knee["low_req_s"]),
        f(&knee["high_req_s"]),
        f(&prof["params"]["prefill_token_us"]["value"]),
        f(&prof["params"]["decode_seq_us"]["value"]),
        t0.elapsed().as_secs_f64()
    );
    let (Some(lp), Some(ff)) = (lp, ff) else {
        panic!("the sweep did not bracket a knee between {} and {} req/s: the predicted {p:.3} is off by more than 25%", load(0), load(AROUND.len() - 1));
    };
    assert!(
        lp >= bar_low && ff <= bar_high,
        "measured knee in {lp:.3}..{ff:.3} req/s: not all of it within ±25% of the predicted {p:.3} ({bar_low}..{bar_high})"
    );
}

/// The profile, checked: no misfit, every fitted figure pinned down or
/// named not identifiable, the server's figures reported as its own.
fn profile(server: &VllmServer, dir: &Path) -> Value {
    let path = dir.join("profile.json");
    let line = format!(
        "profile --base-url {} --budget {BUDGET_S} -o {}",
        server.url,
        path.display()
    );
    let out = kneecap_line(&line, Duration::from_secs(BUDGET_S + 120));
    let (stdout, stderr) = text(&out);
    eprintln!("{stderr}{stdout}");
    assert!(
        out.status.success(),
        "profile failed:\n{}",
        server.log_tail()
    );
    let prof = json(&path);
    let params = prof["params"].as_object().unwrap();
    // Every estimate (prefix caching is a verdict, not a number).
    for (name, e) in params.iter().filter(|(_, e)| e["value"].is_number()) {
        let (status, value, sigma) = (e["status"].as_str(), f(&e["value"]), f(&e["uncertainty"]));
        assert_ne!(status, Some("misfit"), "{name}: {e}");
        if status == Some("measured") {
            assert!(
                sigma < value.abs(),
                "{name} measured with σ ≥ its value: {e}"
            );
        }
        if status == Some("not_identifiable") {
            assert!(
                e["note"].as_str().is_some_and(|n| !n.is_empty()),
                "{name}: {e}"
            );
        }
    }
    let reported = |name: &str, want: f64| {
        let e = &params[name];
        assert_eq!(e["status"].as_str(), Some("reported"), "{name}: {e}");
        assert!(
            (f(&e["value"]) / want - 1.0).abs() <= 0.15,
            "{name}: {e}, the server's {want}"
        );
    };
    reported("kv_cache_tokens", server.logged_kv_tokens() as f64);
    reported("max_num_batched_tokens", 2048.0);
    reported("max_num_seqs", 128.0);
    // The block size the engine reports (128 on CPU), which the simulator
    // then caches prefixes in.
    let block = &params["block_tokens"];
    assert_eq!(block.as_u64(), Some(128), "block_tokens: {block}");
    prof
}

/// `predict --profile` for the shape; the prediction's `knee`.
fn predict(dir: &Path) -> Value {
    let out_path = dir.join("predict.json");
    let line = format!(
        "predict --profile {} --slo {SLO} {SHAPE} --burstiness inf -o {}",
        dir.join("profile.json").display(),
        out_path.display()
    );
    let out = kneecap_line(&line, Duration::from_secs(120));
    let (stdout, stderr) = text(&out);
    eprintln!("{stdout}");
    assert!(out.status.success(), "predict failed: {stderr}");
    json(&out_path)["knee"].clone()
}

/// The measured sweep of the shape at `rates`, fresh prompts per step.
fn sweep(server: &VllmServer, dir: &Path, rates: &str) -> Value {
    let path = dir.join("twin-sweep.json");
    let line = format!(
        "sweep --base-url {} {SHAPE} --arrival constant --slo {SLO} --rates {rates} \
         --step-duration 30s --step-warmup 10s --step-min-requests 10 --step-max-duration 60s \
         --step-drain 20s --max-lateness-ms 100 --reset-prefix-cache --seed 2001 --disable-tqdm -o {}",
        server.url,
        path.display()
    );
    let out = kneecap_line(&line, Duration::from_secs(900));
    let (_, stderr) = text(&out);
    eprintln!("{stderr}");
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "sweep failed: exit {:?}\n{}",
        out.status.code(),
        server.log_tail()
    );
    let measured = json(&path);
    for s in measured["steps"].as_array().unwrap() {
        eprintln!(
            "  load {:.3}: {}, TTFT p90 {:.0} ms, waiting at most {}",
            f(&s["load"]),
            s["verdict"],
            f(&s["ttft_ms"]["p90"]),
            s["max_waiting"]
        );
    }
    measured
}

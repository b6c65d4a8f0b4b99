//! kneecap end to end against a real inference engine: llama.cpp's
//! `llama-server` on CPU serving SmolLM2-135M. Runs only when
//! `KNEECAP_LLAMA_SERVER` (the binary) and `KNEECAP_LLAMA_MODEL` (the GGUF) are
//! set — `scripts/llama-server.sh env` prints both — and otherwise prints a
//! skip line and passes. Starts the server itself on a free loopback port.
//! `support` holds what the tests share; `twin` checks issue 27's profile
//! and prediction against a measured sweep.

mod support;
mod twin;

use serde_json::Value;
use std::path::Path;
use std::time::{Duration, Instant};
use support::{f, kneecap, llama_env, tokenizer, LlamaServer, SERIAL};

/// `kneecap run` one request at a time (4 requests, 64 in / 32 out) on `backend`;
/// checks the counts and compares each request's TPOT with llama.cpp's own
/// `timings` (kept per request in the detailed JSON's `kneecap.server_timings`).
fn run_and_check(server: &LlamaServer, backend: &str, dir: &Path) -> Value {
    let name = format!("{backend}.json");
    let url = server.url();
    let tok = tokenizer();
    let out = kneecap(
        &[
            "run",
            "--base-url",
            &url,
            "--backend",
            backend,
            "--tokenizer",
            &tok,
            "--random-input-len",
            "64",
            "--random-output-len",
            "32",
            "--num-prompts",
            "4",
            "--max-concurrency",
            "1",
            "--seed",
            "7",
            "--save-result",
            "--save-detailed",
            "--result-dir",
            dir.to_str().unwrap(),
            "--result-filename",
            &name,
            "--disable-tqdm",
        ],
        Duration::from_secs(120),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{backend}: exit {:?}\n{stdout}\n{stderr}\nserver log:\n{}",
        out.status.code(),
        server.log()
    );
    eprintln!("{stdout}");
    let json: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join(&name)).unwrap()).unwrap();
    assert_eq!(json["completed"], 4, "{backend}: {stdout}");
    assert_eq!(json["failed"], 0, "{backend}: {stdout}");
    assert_eq!(json["model_id"], "smollm2", "model id from /v1/models");
    assert!(f(&json["mean_ttft_ms"]) > 0.0);
    assert!(f(&json["p99_ttft_ms"]) > 0.0);
    // ignore_eos is sent for the random dataset: 32 tokens each, counted from usage.
    assert_eq!(
        json["total_output_tokens"],
        4 * 32,
        "{backend}: usage counts"
    );
    assert!(f(&json["total_input_tokens"]) > 0.0);

    let timings = json["kneecap"]["server_timings"]
        .as_array()
        .unwrap_or_else(|| panic!("{backend}: no server_timings in the detailed JSON"));
    assert_eq!(timings.len(), 4);
    for (i, t) in timings.iter().enumerate() {
        let n_out = f(&json["output_lens"][i]);
        assert_eq!(f(&t["predicted_n"]), n_out, "timings agree with usage");
        // llama.cpp's `predicted_ms` runs from the first generated token to the
        // last: n - 1 gaps, the same span as (E2EL - TTFT) / (n - 1).
        let server_tpot = f(&t["predicted_ms"]) / (f(&t["predicted_n"]) - 1.0);
        let latency = f(&json["latencies"][i]);
        let ttft = f(&json["ttfts"][i]);
        let client_tpot = (latency - ttft) * 1e3 / (n_out - 1.0);
        let ratio = client_tpot / server_tpot;
        eprintln!(
            "{backend} request {i}: TTFT {:.1} ms, TPOT client {client_tpot:.2} ms vs server {server_tpot:.2} ms (ratio {ratio:.3})",
            ttft * 1e3
        );
        assert!(
            (0.9..=1.1).contains(&ratio),
            "{backend} request {i}: client TPOT {client_tpot:.2} ms vs llama.cpp's {server_tpot:.2} ms"
        );
    }
    json
}

#[test]
fn run_completions_and_chat_against_llama_cpp() {
    let Some((bin, model)) = llama_env("run_completions_and_chat_against_llama_cpp") else {
        return;
    };
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let server = LlamaServer::start(&bin, &model, 2, 2);
    let dir = tempfile::tempdir().unwrap();
    let completions = run_and_check(&server, "openai", dir.path());
    // Completions prompts are token ids from the tokenizer: the server counts the same.
    assert_eq!(completions["total_input_tokens"], 4 * 64);
    assert_eq!(completions["tokenizer_id"], tokenizer());
    run_and_check(&server, "openai-chat", dir.path());
}

/// Closed loop at 2 streams on 2 slots (16 in / 32 out): the server's service
/// rate μ (req/s) and p99 TTFT (ms) on this machine, measured rather than
/// assumed (a 2-core CI box and a busy laptop differ several-fold).
fn calibrate(server: &LlamaServer, dir: &Path) -> (f64, f64) {
    let url = server.url();
    let tok = tokenizer();
    let out = kneecap(
        &[
            "run",
            "--base-url",
            &url,
            "--tokenizer",
            &tok,
            "--random-input-len",
            "16",
            "--random-output-len",
            "32",
            "--num-prompts",
            "8",
            "--max-concurrency",
            "2",
            "--seed",
            "3",
            "--save-result",
            "--result-dir",
            dir.to_str().unwrap(),
            "--result-filename",
            "calibrate.json",
            "--disable-tqdm",
        ],
        Duration::from_secs(120),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("calibrate.json")).unwrap())
            .unwrap();
    assert_eq!(json["failed"], 0);
    (f(&json["request_throughput"]), f(&json["p99_ttft_ms"]))
}

#[test]
fn sweep_finds_a_knee_where_llama_cpp_starts_deferring_requests() {
    let Some((bin, model)) =
        llama_env("sweep_finds_a_knee_where_llama_cpp_starts_deferring_requests")
    else {
        return;
    };
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let server = LlamaServer::start(&bin, &model, 2, 2);
    let dir = tempfile::tempdir().unwrap();
    let (mu, ttft_p99) = calibrate(&server, dir.path());
    // Two loads well below μ (constant arrivals: a request never waits for a
    // slot) and one far above it (the deferred queue builds up), with a TTFT
    // SLO loose enough for the low loads and far below the queueing delay
    // that 4 μ builds in a 12 s step (about 36 service times).
    let rates: Vec<String> = [0.2, 0.4, 4.0]
        .iter()
        .map(|k| format!("{:.3}", k * mu))
        .collect();
    let rates = rates.join(",");
    let slo = format!("p99_ttft_ms<={:.0}", (2.0 * ttft_p99).max(1000.0));
    eprintln!("calibrated: μ ≈ {mu:.2} req/s, p99 TTFT {ttft_p99:.0} ms at 2 streams; rates {rates}; SLO {slo}");
    let out_path = dir.path().join("sweep.json");
    let url = server.url();
    let tok = tokenizer();
    let started = Instant::now();
    let out = kneecap(
        &[
            "sweep",
            "--base-url",
            &url,
            "--tokenizer",
            &tok,
            "--random-input-len",
            "16",
            "--random-output-len",
            "32",
            "--arrival",
            "constant",
            "--slo",
            &slo,
            "--rates",
            &rates,
            "--step-duration",
            "12s",
            "--step-warmup",
            "2s",
            "--step-min-requests",
            "5",
            "--step-max-duration",
            "40s",
            "--step-drain",
            "20s",
            // The knee here is the server's: a busy CI machine must not turn
            // steps into generator-limited ones.
            "--max-lateness-ms",
            "50",
            "--disable-tqdm",
            "-o",
            out_path.to_str().unwrap(),
        ],
        Duration::from_secs(300),
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!("{stdout}\n{stderr}");
    eprintln!("sweep took {:.0} s", started.elapsed().as_secs_f64());
    assert_eq!(
        out.status.code(),
        Some(0),
        "a knee must be found\nserver log:\n{}",
        server.log()
    );
    let json: Value = serde_json::from_str(&std::fs::read_to_string(&out_path).unwrap()).unwrap();
    assert!(json["complete"].as_bool().unwrap());
    assert_eq!(json["workload"]["model"], "smollm2");
    assert!(
        json["knee"]["first_fail"].is_number(),
        "no step failed: 4 x the calibrated μ ({mu:.2} req/s) did not overload the server; \
         a calibration disturbed by other load on the machine reads μ too low"
    );
    let last_pass = f(&json["knee"]["last_pass"]);
    let first_fail = f(&json["knee"]["first_fail"]);
    assert!(
        last_pass < first_fail && first_fail.is_finite(),
        "knee {last_pass}..{first_fail}"
    );
    assert!(
        last_pass < mu && first_fail > 0.3 * mu,
        "knee {last_pass}..{first_fail} vs measured capacity μ ≈ {mu:.2} req/s"
    );
    for step in json["steps"].as_array().unwrap() {
        let load = f(&step["load"]);
        assert_eq!(
            step["queue_source"], "llamacpp",
            "load {load}: gauges scraped"
        );
        let queue = step["queue"].as_array().unwrap();
        assert!(
            queue.len() >= 10,
            "load {load}: a series sampled every 250 ms"
        );
        let max_waiting = f(&step["max_waiting"]);
        let max_running = queue
            .iter()
            .filter_map(|q| q["running"].as_f64())
            .fold(0.0, f64::max);
        eprintln!(
            "load {load}: verdict {}, max waiting {max_waiting}, max running {max_running}",
            step["verdict"]
        );
        assert!(max_running > 0.0, "load {load}: requests_processing seen");
        if load >= first_fail {
            assert!(
                max_waiting > 0.0,
                "load {load} is above the knee: llama.cpp must defer requests"
            );
        } else {
            assert_eq!(step["failed"], 0, "load {load}");
            assert_eq!(
                max_waiting, 0.0,
                "load {load} is below the knee: no request waits for a slot"
            );
        }
    }
}

/// A multi-turn run on one slot (2 sessions of 3 turns: a 192-token opening,
/// then 16 tokens a turn, 8 out) with llama.cpp's `cache_prompt` on or off.
fn sessions_run(server: &LlamaServer, dir: &Path, cache: bool) -> Value {
    let name = format!("sessions-{cache}.json");
    let line = format!(
        "run --base-url {} --backend openai-chat --tokenizer {} --multi-turn \
         --multi-turn-num-turns 3 --multi-turn-concurrency 1 --random-input-len 192 \
         --per-turn-input-len 16 --random-output-len 8 --num-prompts 2 \
         --extra-body {{\"cache_prompt\":{cache}}} --save-result --result-dir {} \
         --result-filename {name} --disable-tqdm",
        server.url(),
        tokenizer(),
        dir.display()
    );
    let args: Vec<&str> = line.split_whitespace().collect();
    let out = kneecap(&args, Duration::from_secs(180));
    let (stdout, err) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stdout}\n{err}\n{}", server.log());
    serde_json::from_str(&std::fs::read_to_string(dir.join(&name)).unwrap()).unwrap()
}

/// Mean TTFT (ms) of turn 1 and of turns 2 and later, from `kneecap.sessions`.
fn ttft_first_and_later(json: &Value) -> (f64, f64) {
    let s = &json["kneecap"]["sessions"];
    assert_eq!(
        (s["completed"].as_u64(), s["failed"].as_u64()),
        (Some(2), Some(0)),
        "{s}"
    );
    let turns = s["ttft_by_turn"].as_array().unwrap();
    let (first, later) = turns.split_first().unwrap();
    let (sum, n) = later.iter().fold((0.0, 0.0), |(s, n), t| {
        let c = f(&t["ttft"]["count"]);
        (s + f(&t["ttft"]["mean_ms"]) * c, n + c)
    });
    (f(&first["ttft"]["mean_ms"]), sum / n)
}

#[test]
fn later_turns_of_a_session_hit_llama_cpps_prompt_cache() {
    let Some((bin, model)) = llama_env("later_turns_of_a_session_hit_llama_cpps_prompt_cache")
    else {
        return;
    };
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let server = LlamaServer::start(&bin, &model, 1, 2);
    let dir = tempfile::tempdir().unwrap();
    let cached = sessions_run(&server, dir.path(), true);
    let (first, later) = ttft_first_and_later(&cached);
    let pc = &cached["kneecap"]["prefix_cache"];
    eprintln!("cache on: TTFT turn 1 {first:.1} ms, turns 2+ {later:.1} ms; {pc}");
    assert_eq!(pc["source"], "llama.cpp", "{pc}");
    assert!(f(&pc["hit_tokens"]) > 0.0, "cache_n > 0: {pc}");
    // Later turns carry a longer history yet prefill only what the cache lacks.
    assert!(
        later < first,
        "turns 2+ {later:.1} ms vs turn 1 {first:.1} ms"
    );

    // The control: without the cache, the longer history makes them slower.
    let uncached = sessions_run(&server, dir.path(), false);
    let (first_off, later_off) = ttft_first_and_later(&uncached);
    eprintln!("cache off: TTFT turn 1 {first_off:.1} ms, turns 2+ {later_off:.1} ms");
    assert!(
        later_off > later,
        "{later_off:.1} ms uncached vs {later:.1} ms cached"
    );
}

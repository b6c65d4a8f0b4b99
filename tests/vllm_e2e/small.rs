//! A small vLLM engine (8 sequences, 256 tokens a step) without dev mode.
//!
//! While it starts (vLLM listens only once its engine is ready), `kneecap
//! run` says so in one line and exits 2, and `--ready-check-timeout-sec`
//! waits for it instead. Then a closed-loop run at the batch limit measures
//! its service rate μ, and a sweep at 0.3, 0.6 and 3 μ must bracket a knee,
//! print every step's verdict, see vLLM's waiting queue above the knee, and
//! say in one line that `--reset-prefix-cache` needs `VLLM_SERVER_DEV_MODE=1`.

use super::support::{f, json, kneecap_line, text, tokenizer, VllmServer};
use std::net::TcpListener;
use std::path::Path;
use std::time::Duration;

const ENGINE: [&str; 4] = ["--max-num-seqs", "8", "--max-num-batched-tokens", "256"];

pub fn not_ready_then_a_sweep_brackets_the_knee() {
    let dir = tempfile::tempdir().unwrap();
    let server = wait_for_a_starting_server(dir.path());
    let block = &json(&dir.path().join("ready.json"))["kneecap"]["server"];
    eprintln!("kneecap.server without dev mode: {block}");
    assert!(
        block["kv_cache_tokens"].as_u64().is_some_and(|t| t > 0),
        "{block}"
    );
    assert!(
        block["max_num_seqs"].is_null(),
        "no /server_info without dev mode: {block}"
    );
    let (mu, ttft_p99) = calibrate(&server, dir.path());
    sweep(&server, dir.path(), mu, ttft_p99);
}

/// Starts the server on a port chosen here and, before it listens, runs
/// kneecap twice: without a ready check (one line, exit 2) and with one
/// (it waits, then completes every request).
fn wait_for_a_starting_server(dir: &Path) -> VllmServer {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let starting = std::thread::spawn(move || {
        let port = port.to_string();
        let mut flags = vec!["--port", port.as_str()];
        flags.extend(ENGINE);
        VllmServer::start(false, &flags)
    });
    let url = format!("http://127.0.0.1:{port}");
    let run = |extra: &str| {
        let line = format!(
            "run --base-url {url} --tokenizer {} --random-input-len 32 --random-output-len 8 \
             --num-prompts 4 --save-result --result-dir {} --result-filename ready.json \
             --disable-tqdm {extra}",
            tokenizer(),
            dir.display()
        );
        kneecap_line(&line, Duration::from_secs(900))
    };
    let early = run("");
    let (_, stderr) = text(&early);
    eprintln!("before the server listens: {stderr}");
    assert_eq!(early.status.code(), Some(2), "{stderr}");
    assert_eq!(
        stderr.lines().filter(|l| l.starts_with("error:")).count(),
        1,
        "{stderr}"
    );
    assert!(stderr.contains("cannot reach") && stderr.contains("--ready-check-timeout-sec"));
    assert!(
        !starting.is_finished(),
        "the server started before the check: nothing tested"
    );
    let waited = run("--ready-check-timeout-sec 900");
    let server = starting.join().unwrap();
    let (stdout, stderr) = text(&waited);
    assert!(waited.status.success(), "{stdout}\n{stderr}");
    assert_eq!(json(&dir.join("ready.json"))["completed"], 4);
    server
}

/// Closed loop at the batch limit (8 streams, 128 in / 16 out): μ (req/s)
/// and the p99 TTFT (ms) of a full batch, measured on this machine.
fn calibrate(server: &VllmServer, dir: &Path) -> (f64, f64) {
    let line = format!(
        "run --base-url {} --tokenizer {} --random-input-len 128 --random-output-len 16 \
         --num-prompts 32 --max-concurrency 8 --seed 3 --save-result --result-dir {} \
         --result-filename calibrate.json --disable-tqdm",
        server.url,
        tokenizer(),
        dir.display()
    );
    let out = kneecap_line(&line, Duration::from_secs(300));
    assert!(out.status.success(), "{}", text(&out).1);
    let run = json(&dir.join("calibrate.json"));
    assert_eq!(run["failed"], 0);
    (f(&run["request_throughput"]), f(&run["p99_ttft_ms"]))
}

fn sweep(server: &VllmServer, dir: &Path, mu: f64, ttft_p99: f64) {
    let rates: Vec<String> = [0.3, 0.6, 3.0]
        .iter()
        .map(|k| format!("{:.3}", k * mu))
        .collect();
    let slo = format!("p99_ttft_ms<={:.0}", (2.0 * ttft_p99).max(1500.0));
    eprintln!("calibrated: μ ≈ {mu:.2} req/s, p99 TTFT {ttft_p99:.0} ms at 8 streams; SLO {slo}");
    let path = dir.join("sweep.json");
    let line = format!(
        "sweep --base-url {} --tokenizer {} --random-input-len 128 --random-output-len 16 \
         --arrival constant --slo {slo} --rates {} --step-duration 12s --step-warmup 2s \
         --step-min-requests 5 --step-max-duration 40s --step-drain 60s --max-lateness-ms 50 \
         --reset-prefix-cache --disable-tqdm -o {}",
        server.url,
        tokenizer(),
        rates.join(","),
        path.display()
    );
    let out = kneecap_line(&line, Duration::from_secs(420));
    let (stdout, stderr) = text(&out);
    eprintln!("{stderr}{stdout}");
    assert_eq!(
        out.status.code(),
        Some(0),
        "a knee must be found\n{}",
        server.log_tail()
    );
    let resets: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("--reset-prefix-cache"))
        .collect();
    assert_eq!(resets.len(), 1, "said once: {resets:?}");
    assert!(
        resets[0].contains("VLLM_SERVER_DEV_MODE=1"),
        "{}",
        resets[0]
    );
    let sweep = json(&path);
    let steps = sweep["steps"].as_array().unwrap();
    let verdicts = stderr
        .lines()
        .filter(|l| l.trim_start().starts_with("step "))
        .count();
    assert_eq!(verdicts, steps.len(), "every step's verdict printed");
    let (pass, fail) = (
        f(&sweep["knee"]["last_pass"]),
        f(&sweep["knee"]["first_fail"]),
    );
    assert!(
        pass < fail && pass < mu && fail > 0.3 * mu,
        "knee {pass}..{fail}, μ {mu:.2}"
    );
    for step in steps {
        assert_eq!(step["queue_source"], "vllm");
        assert!(!step["prefix_cache_reset"].as_bool().unwrap_or(false));
        if f(&step["load"]) >= fail {
            assert!(
                f(&step["max_waiting"]) > 0.0,
                "above the knee requests wait: {step}"
            );
        }
    }
}

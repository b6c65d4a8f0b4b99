//! GPU power and energy (`--gpu-metrics-url`): against a fake DCGM exporter
//! serving a known power curve in time (a ramp, with or without the energy
//! counter that is its exact integral), the run's mean power is the curve's
//! integral over the sampled window divided by its length, and joules per
//! output token and per request are its energy divided by the run's counts.
//! Against the simulator's gauges (`--gpu-watts-idle 100 --gpu-watts-busy
//! 400`), a sweep's energy per token rises past the knee. And a URL that
//! does not answer, or answers without DCGM's names, is refused in one line.

use crate::common;

use common::cli::{run, short_steps, strings};
use kneecap::sim::gpu::GpuWatts;
use kneecap::sim::SimConfig;
use serde_json::Value;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// GPU 0 ramps `100 + 50 t` W (t in s since the exporter started), GPU 1
/// draws a constant 60 W: together `160 + 50 t`, whose integral is
/// `160 t + 25 t²` J.
fn total_energy_j(t: f64) -> f64 {
    160.0 * t + 25.0 * t * t
}

/// The exporter's body at `t`, with the energy counter or without.
fn dcgm_body(t: f64, counter: bool) -> String {
    let mut s = String::from("# TYPE DCGM_FI_DEV_POWER_USAGE gauge\n");
    s += &format!(
        "DCGM_FI_DEV_POWER_USAGE{{gpu=\"0\",UUID=\"GPU-a\"}} {}\n",
        100.0 + 50.0 * t
    );
    s += "DCGM_FI_DEV_POWER_USAGE{gpu=\"1\",UUID=\"GPU-b\"} 60\n";
    s += "DCGM_FI_DEV_GPU_UTIL{gpu=\"0\",UUID=\"GPU-a\"} 80\nDCGM_FI_DEV_GPU_UTIL{gpu=\"1\",UUID=\"GPU-b\"} 20\n";
    s += "DCGM_FI_DEV_FB_USED{gpu=\"0\",UUID=\"GPU-a\"} 1000\nDCGM_FI_DEV_FB_USED{gpu=\"1\",UUID=\"GPU-b\"} 500\n";
    if counter {
        let e0 = 1000.0 * (100.0 * t + 25.0 * t * t);
        s += &format!("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{{gpu=\"0\",UUID=\"GPU-a\"}} {e0}\n");
        s += &format!(
            "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{{gpu=\"1\",UUID=\"GPU-b\"}} {}\n",
            60_000.0 * t
        );
    }
    s
}

/// A fake DCGM exporter on 127.0.0.1:0: its URL and the times (s since it
/// started) at which it was scraped.
async fn fake_exporter(counter: bool) -> (String, Arc<Mutex<Vec<f64>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/metrics", listener.local_addr().unwrap());
    let scrapes = Arc::new(Mutex::new(Vec::new()));
    let seen = scrapes.clone();
    let t0 = Instant::now();
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            let seen = seen.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 1024];
                while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                    match conn.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
                let t = t0.elapsed().as_secs_f64();
                seen.lock().unwrap().push(t);
                let body = dcgm_body(t, counter);
                let head = format!("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", body.len());
                let _ = conn.write_all((head + &body).as_bytes()).await;
            });
        }
    });
    (url, scrapes)
}

/// `kneecap run` at 20 req/s against the `tiny` simulator, sampling `gpu`
/// every 100 ms: the exit status, stdout+stderr and the result JSON.
async fn run_with_gpu(gpu: &str, dir: &std::path::Path) -> (bool, String, Option<Value>) {
    let sim = common::sim::tiny(dir.join("log.jsonl")).await;
    let path = dir.join("run.json");
    let args = strings(&[
        "run",
        "--base-url",
        &sim.url,
        "--num-prompts",
        "40",
        "--request-rate",
        "20",
        "--random-input-len",
        "32",
        "--random-output-len",
        "24",
        "--gpu-metrics-url",
        gpu,
        "--gpu-sample-interval",
        "100ms",
        "--disable-tqdm",
        "--save-result",
        "--result-filename",
        path.to_str().unwrap(),
    ]);
    let out = run(args, vec![]).await;
    sim.handle.shutdown().await.unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let json = std::fs::read_to_string(&path)
        .ok()
        .map(|t| serde_json::from_str(&t).unwrap());
    (out.status.success(), text, json)
}

/// The run's `kneecap.gpu` against the curve between the first sample (the
/// exporter's second scrape: the first is the start-up check) and the last.
fn check_against_the_curve(result: &Value, scrapes: &[f64], source: &str) {
    let g = &result["kneecap"]["gpu"];
    assert_eq!(g["source"], source, "{g}");
    assert_eq!(g["gpus"], 2);
    let samples = g["samples"].as_u64().unwrap() as usize;
    assert_eq!(scrapes.len(), samples + 1, "a check, then every sample");
    assert!(
        samples >= 10,
        "sampled every 100 ms through a 2 s run: {samples}"
    );
    let (a, b) = (scrapes[1], scrapes[scrapes.len() - 1]);
    let want_mean = (total_energy_j(b) - total_energy_j(a)) / (b - a);
    let mean = g["mean_power_w"].as_f64().unwrap();
    eprintln!(
        "gpu_power run ({source}): mean {mean:.3} W, the curve's {want_mean:.3} W ({:+.3}%)",
        (mean / want_mean - 1.0) * 100.0
    );
    assert!(
        (mean - want_mean).abs() / want_mean < 0.01,
        "mean power {mean} W, the curve's {want_mean} W over [{a}, {b}] s"
    );
    let peak = g["peak_power_w"].as_f64().unwrap();
    assert!(
        (peak - (160.0 + 50.0 * b)).abs() / peak < 0.01,
        "peak {peak} W at {b} s"
    );
    assert_eq!(g["mean_util_pct"], 50.0);
    assert_eq!(g["peak_memory_mib"], 1500.0);
    // By hand: the energy over the run's output tokens and requests.
    let energy = g["energy_j"].as_f64().unwrap();
    assert!((energy - want_mean * (b - a)).abs() / energy < 0.01);
    let tokens = result["total_output_tokens"].as_f64().unwrap();
    let completed = result["completed"].as_f64().unwrap();
    assert_eq!(completed, 40.0);
    let per_token = g["joules_per_output_token"].as_f64().unwrap();
    assert!((per_token - energy / tokens).abs() < 1e-9 * per_token);
    let per_request = g["joules_per_request"].as_f64().unwrap();
    assert!((per_request - energy / 40.0).abs() < 1e-9 * per_request);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runs_power_is_the_curves_integral_from_the_counter() {
    let dir = tempfile::tempdir().unwrap();
    let (url, scrapes) = fake_exporter(true).await;
    let (ok, text, json) = run_with_gpu(&url, dir.path()).await;
    assert!(ok, "{text}");
    check_against_the_curve(&json.unwrap(), &scrapes.lock().unwrap(), "counter");
    assert!(text.contains("GPU Power"), "{text}");
    assert!(text.contains("Energy (J, energy counter):"), "{text}");
    assert!(text.contains("Energy per output token (J):"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_counter_the_power_samples_are_integrated() {
    let dir = tempfile::tempdir().unwrap();
    let (url, scrapes) = fake_exporter(false).await;
    let (ok, text, json) = run_with_gpu(&url, dir.path()).await;
    assert!(ok, "{text}");
    check_against_the_curve(&json.unwrap(), &scrapes.lock().unwrap(), "power_samples");
    assert!(text.contains("Energy (J, power samples):"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_or_non_dcgm_url_is_refused_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}/metrics", l.local_addr().unwrap())
    };
    let (ok, text, json) = run_with_gpu(&closed, dir.path()).await;
    assert!(!ok && json.is_none(), "{text}");
    let line = format!("--gpu-metrics-url {closed}: no answer");
    assert!(text.contains(&line), "{text}");
    // The simulator's own /metrics without --gpu-watts-*: vLLM's names only.
    let sim = common::sim::tiny(dir.path().join("other.jsonl")).await;
    let vllm_only = format!("{}/metrics", sim.url);
    let (ok, text, _) = run_with_gpu(&vllm_only, dir.path()).await;
    sim.handle.shutdown().await.unwrap();
    assert!(!ok, "{text}");
    let line =
        format!("--gpu-metrics-url {vllm_only}: the answer has none of DCGM_FI_DEV_POWER_USAGE");
    assert!(text.contains(&line), "{text}");
}

/// A simulator whose batch step slows with its batch (0.5 ms a sequence
/// over 5 ms), 64 sequences, drawing 100 W idle and 400 W with a full
/// batch: about 9 sequences run at 30 req/s; at 80 req/s, past its ~54 req/s
/// capacity, the batch is full, each step takes 37 ms and requests queue, so
/// each token costs more (the power grows faster than the throughput).
fn metered() -> SimConfig {
    let mut cfg = SimConfig::from_preset("tiny").unwrap();
    cfg.params.max_num_seqs = 64;
    cfg.params.per_decode_seq = Duration::from_micros(500);
    cfg.gpu_watts = Some(GpuWatts {
        idle: 100.0,
        busy: 400.0,
    });
    cfg
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sweeps_energy_per_token_rises_past_the_knee() {
    let dir = tempfile::tempdir().unwrap();
    let sim = common::sim::logged(metered(), dir.path().join("log.jsonl")).await;
    let path = dir.path().join("sweep.json");
    let gpu = format!("{}/metrics", sim.url);
    let mut args = strings(&[
        "sweep",
        "--base-url",
        &sim.url,
        "--rates",
        "30,80",
        "--slo",
        "p99_ttft_ms<=500",
        "--random-input-len",
        "32",
        "--random-output-len",
        "32",
        "--gpu-metrics-url",
        &gpu,
        "--gpu-sample-interval",
        "200ms",
        "-o",
        path.to_str().unwrap(),
    ]);
    args.extend(short_steps("3s", "50"));
    let out = run(args, vec![]).await;
    sim.handle.shutdown().await.unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "{stdout}\n{stderr}"
    );
    let result: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let j = |load: f64| -> f64 {
        let s = result["steps"].as_array().unwrap().iter();
        let step = s.clone().find(|s| s["load"] == load).unwrap();
        assert_eq!(step["gpu"]["source"], "counter", "{step}");
        step["gpu"]["joules_per_output_token"].as_f64().unwrap()
    };
    let knee = &result["knee"];
    assert_eq!(
        (knee["last_pass"].as_f64(), knee["first_fail"].as_f64()),
        (Some(30.0), Some(80.0)),
        "{stdout}"
    );
    let (at_knee, past) = (j(30.0), j(80.0));
    assert!(
        past > at_knee * 1.15,
        "J/token {at_knee} at the knee, {past} past it"
    );
    assert_eq!(knee["energy_per_token_j"].as_f64(), Some(at_knee));
    eprintln!("gpu_power sweep: J/token {at_knee:.3} at 30 req/s (the knee), {past:.3} at 80");
    // The table's columns and the knee line.
    assert!(stdout.contains("J/tok"), "{stdout}");
    assert!(stdout.contains("energy at the knee: "), "{stdout}");
}

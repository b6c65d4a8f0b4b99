//! `timed_trace` replay against the simulator, with its server log (`--trace`) as
//! ground truth: requests reach the server at the trace's (scaled) timestamps, each
//! prompt has the trace's input length, equal leading hash ids become the
//! same KV blocks on the server (the simulator's prefix cache finds exactly
//! the shared blocks), and a malformed row stops the run with one line.
//!
//! The trace is made here: 48 rows over 4.8 s, prompts built
//! from 5 shared "system prompt" chains and continuations of earlier rows,
//! so the expected cache hits can be computed by hand from the ids alone.

use crate::common;

use common::cli::{run, strings};
use kneecap::sim::{self, SimConfig};
use serde_json::Value;
use std::collections::HashMap;
use std::path::Path;

const ROWS: usize = 48;
const SPEED: f64 = 1.0;

/// One trace row: timestamp (s), input length, hash ids.
struct Row {
    ts: f64,
    input: u32,
    ids: Vec<u64>,
}

/// The test trace: deterministic, no RNG, timestamps irregular on purpose.
fn make_rows() -> Vec<Row> {
    let mut rows: Vec<Row> = Vec::new();
    let mut next = 1000u64;
    let mut fresh = |k: usize| -> Vec<u64> {
        let ids = (next..next + k as u64).collect();
        next += k as u64;
        ids
    };
    let systems: Vec<Vec<u64>> = (0..5).map(|s| fresh(3 + s)).collect();
    let mut ts = 0.05;
    for i in 0..ROWS {
        ts += 0.04 + 0.13 * ((i * 7) % 5) as f64 / 4.0;
        let ids = if i % 3 == 2 {
            // A later turn: an earlier row's blocks plus two new ones.
            let mut ids = rows[i - 2].ids.clone();
            ids.extend(fresh(2));
            ids
        } else {
            let mut ids = systems[i % 5].clone();
            ids.extend(fresh(1 + i % 4));
            ids
        };
        // Every fourth row ends in a partial block (never shared, as in vLLM).
        let input = 16 * ids.len() as u32 - if i % 4 == 0 { 5 } else { 0 };
        rows.push(Row { ts, input, ids });
    }
    rows
}

fn write_trace(path: &Path, rows: &[Row]) {
    let text: String = rows
        .iter()
        .map(|r| {
            format!(
                "{{\"timestamp\": {:.3}, \"input_length\": {}, \"output_length\": 4, \"hash_ids\": {:?}}}\n",
                r.ts * 1000.0,
                r.input,
                r.ids
            )
        })
        .collect();
    std::fs::write(path, text).unwrap();
}

/// Full 16-token blocks of row `i` the server has seen before it: the longest
/// run of leading full blocks equal to an earlier row's leading full blocks,
/// leaving at least the prompt's last token to compute (vLLM's rule).
fn expected_cached_tokens(rows: &[Row], i: usize) -> u32 {
    let full = |r: &Row| (r.input / 16) as usize;
    let mine = &rows[i].ids[..full(&rows[i])];
    let best = rows[..i]
        .iter()
        .map(|r| {
            let theirs = &r.ids[..full(r)];
            mine.iter().zip(theirs).take_while(|(a, b)| a == b).count()
        })
        .max()
        .unwrap_or(0);
    16 * (best as u32).min((rows[i].input - 1) / 16)
}

fn percentile(mut v: Vec<f64>, p: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    v[((v.len() - 1) as f64 * p).round() as usize]
}

/// The test trace written to a file, and a simulator (big KV cache, so
/// nothing is evicted) recording its server log, on 127.0.0.1:0.
struct Setup {
    dir: tempfile::TempDir,
    trace_in: std::path::PathBuf,
    sim_log: std::path::PathBuf,
    rows: Vec<Row>,
    handle: sim::SimHandle,
    url: String,
}

async fn setup() -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let (trace_in, sim_log) = (dir.path().join("in.jsonl"), dir.path().join("sim.jsonl"));
    let rows = make_rows();
    write_trace(&trace_in, &rows);
    let mut cfg = SimConfig::from_preset("tiny").unwrap();
    cfg.server_log = Some(sim_log.clone());
    cfg.params.kv_cache_tokens = 1_000_000;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let handle = sim::start(cfg, listener).await.unwrap();
    let url = format!("http://{}", handle.addr());
    Setup {
        dir,
        trace_in,
        sim_log,
        rows,
        handle,
        url,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replay_keeps_the_traces_times_lengths_and_shared_blocks() {
    let Setup {
        dir,
        trace_in,
        sim_log,
        rows,
        handle,
        url,
    } = setup().await;
    // vLLM's own command line (timestamps in ms, as Mooncake's); `--trace-speed`
    // is checked by the unit tests and the sweep test below.
    let out = run(
        strings(&[
            "bench",
            "serve",
            "--base-url",
            &url,
            "--model",
            "kneecap-sim",
            "--dataset-name",
            "timed_trace",
            "--dataset-path",
            trace_in.to_str().unwrap(),
            "--timed-trace-sec-multiplier",
            "0.001",
            "--self-timed",
            "--request-id-prefix",
            "tr-",
            "--save-result",
            "--result-dir",
            dir.path().to_str().unwrap(),
            "--result-filename",
            "r.json",
            "--disable-tqdm",
        ]),
        vec![],
    )
    .await;
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    handle.shutdown().await.unwrap();
    assert!(stderr.contains("at 1x speed (self-timed)"), "{stderr}");
    assert!(!stderr.contains("too few hash ids"), "{stderr}");

    let mut seen: HashMap<usize, Value> = HashMap::new();
    for line in std::fs::read_to_string(&sim_log).unwrap().lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        if let Some(i) = v["request_id"]
            .as_str()
            .and_then(|id| id.strip_prefix("tr-"))
        {
            seen.insert(i.parse().unwrap(), v);
        }
    }
    assert_eq!(seen.len(), ROWS, "every row reached the server once");
    let mut offsets_ms = Vec::new();
    for (i, row) in rows.iter().enumerate() {
        let v = &seen[&i];
        assert_eq!(v["outcome"], "ok", "{v}");
        assert_eq!(
            v["prompt_tokens"].as_u64(),
            Some(u64::from(row.input)),
            "row {i}"
        );
        assert_eq!(
            v["output_tokens"].as_u64(),
            Some(4),
            "row {i}: ignore_eos is forced"
        );
        assert_eq!(
            v["cached_tokens"].as_u64(),
            Some(u64::from(expected_cached_tokens(&rows, i))),
            "row {i}: the server's prefix cache must find exactly the shared leading blocks"
        );
        let arrival = v["arrival_s"].as_f64().unwrap();
        offsets_ms.push((arrival - row.ts / SPEED) * 1e3);
    }
    // Server arrival minus the scaled trace time, less their median (the
    // sim's clock and kneecap's start differ by a constant). Light load
    // (about 10 req/s); the bound is wide for a shared machine, and
    // bench/trace_replay.sh measures the figure for BENCHMARKS.md.
    let middle = percentile(offsets_ms.clone(), 0.5);
    let drift_ms: Vec<f64> = offsets_ms.iter().map(|o| (o - middle).abs()).collect();
    let p99 = percentile(drift_ms.clone(), 0.99);
    eprintln!(
        "arrival drift vs the scaled trace: p50 {:.3} ms, p99 {p99:.3} ms",
        percentile(drift_ms.clone(), 0.5)
    );
    assert!(p99 < 25.0, "arrival drift p99 {p99:.2} ms: {drift_ms:?}");
    let shared: u32 = (0..ROWS).map(|i| expected_cached_tokens(&rows, i)).sum();
    assert!(
        shared > 16 * 60,
        "the trace shares many blocks ({shared} tokens)"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_row_stops_the_run_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.jsonl");
    std::fs::write(
        &path,
        "{\"timestamp\": 0, \"input_length\": 16, \"output_length\": 4, \"hash_ids\": [1]}\n\
         {\"timestamp\": 1, \"input_len\": 16, \"output_length\": 4}\n",
    )
    .unwrap();
    let out = run(
        strings(&[
            "run",
            "--dataset-name",
            "timed_trace",
            "--dataset-path",
            path.to_str().unwrap(),
            "--disable-tqdm",
        ]),
        vec![],
    )
    .await;
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let errors: Vec<&str> = stderr.lines().filter(|l| l.contains("error")).collect();
    assert_eq!(errors.len(), 1, "{stderr}");
    let want = format!("{}:2: field 'input_length' is missing", path.display());
    assert!(
        errors[0].contains(&want) && errors[0].contains("--timed-trace-label-input-length"),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trace_speed_sweep_replays_the_trace_faster_and_fresh_each_step() {
    let Setup {
        dir,
        trace_in,
        sim_log,
        rows,
        handle,
        url,
    } = setup().await;
    let out_json = dir.path().join("sweep.json");
    let out = run(
        strings(&[
            "sweep",
            "--base-url",
            &url,
            "--dataset-name",
            "timed_trace",
            "--dataset-path",
            trace_in.to_str().unwrap(),
            "--timed-trace-sec-multiplier",
            "0.001",
            "--rates",
            "1,3",
            "--slo",
            "p99_ttft_ms<=5000",
            "--step-warmup",
            "0.5s",
            "--step-duration",
            "3s",
            "--step-min-requests",
            "10",
            "--request-id-prefix",
            "sw-",
            "--max-lateness-ms",
            "50",
            "-o",
            out_json.to_str().unwrap(),
            "--disable-tqdm",
        ]),
        vec![],
    )
    .await;
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    handle.shutdown().await.unwrap();
    let result: Value = serde_json::from_str(&std::fs::read_to_string(&out_json).unwrap()).unwrap();
    assert_eq!(result["mode"], "trace_speed");
    let steps = result["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 2, "{result}");
    // The trace's recorded rate: 47 gaps over its span (timestamps in ms).
    let recorded = (ROWS - 1) as f64 / (rows[ROWS - 1].ts - rows[0].ts);
    for (step, speed) in steps.iter().zip([1.0, 3.0]) {
        let offered = step["offered_rate"].as_f64().unwrap();
        let ratio = offered / (speed * recorded);
        assert!(
            (0.6..1.4).contains(&ratio),
            "speed {speed}: offered {offered:.2} req/s vs recorded {recorded:.2} req/s"
        );
    }
    // Each step starts the trace afresh with its own blocks: the first
    // request of every step finds nothing cached, although every step
    // replays the same rows, while later requests of a step do hit.
    let mut firsts = Vec::new();
    let mut hits = 0;
    for line in std::fs::read_to_string(&sim_log).unwrap().lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        match v["request_id"].as_str() {
            Some("sw-0") => firsts.push(v["cached_tokens"].as_u64().unwrap()),
            Some(id) if id.starts_with("sw-") => hits += v["cached_tokens"].as_u64().unwrap(),
            _ => {}
        }
    }
    assert_eq!(firsts, [0, 0], "one first request per step, none cached");
    assert!(hits > 0, "the trace's sharing still shows within a step");
}

//! Golden tests of the result JSON, against the built-in simulator: a seeded
//! `kneecap run`, a seeded `kneecap sweep --rates`, and three `kneecap run
//! --shard i/3` processes plus `kneecap merge` of their files. The shards
//! share one simulator, a `kneecap sim --preset tiny --port 0` child process
//! (not the tests/common TestServer), so every case measures the same `tiny`
//! simulator; run and sweep start it in-process.
//!
//! Each document is normalized to three ordered maps, stored as
//! `tests/golden/<case>.json`:
//! - `types`: every path of the JSON tree, in key order, with its type (null,
//!   bool, int, float, string, array, object; int vs float as serde_json
//!   stores the number). Array elements share one path segment `*`; a path
//!   whose elements differ in type lists the union, e.g. `null|string`.
//! - `exact`: values that must not change at all: everything the seed and the
//!   flags determine (the request schedule `kneecap.due_times`, `input_lens`,
//!   `output_lens`, counts, seed, rates, labels, step windows, verdicts…).
//!   This is the default class of a path. Keys are concrete paths; an array
//!   of scalars (or of arrays of scalars) is one entry.
//! - `timing`: reference latencies, durations and throughputs, compared
//!   within a band (see [`band`]).
//!
//! Paths whose values legitimately vary run to run are compared by type only
//! and are listed in [`RULES`] as `TypeOnly` (or `Opaque` when even their
//! shape may change, `Present` when even their type may: null when a sampled
//! gauge has no reading). `KNEECAP_BLESS=1 cargo test --test golden_json`
//! rewrites the goldens; without it the tests compare, and on a difference
//! write the run's normalized form under `target/tmp/golden-actual/` to diff.

use assert_cmd::Command;
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The cases measure timing: run them one at a time so that they do not load
/// the two cores for each other.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn kneecap() -> Command {
    let mut c = Command::cargo_bin("kneecap").unwrap();
    c.timeout(Duration::from_secs(60));
    c.env_remove("OPENAI_API_KEY");
    c
}

/// The seeded workload shared by the run case and the shards (same flags, so
/// the shards' schedules must add up to the run's). 40 Poisson arrivals at 20
/// req/s: about 2 s of load; lengths vary (range ratio 0.5) so that the
/// seed shows in `input_lens` and `output_lens`.
const WORKLOAD: &[&str] = &[
    "--seed",
    "7",
    "--num-prompts",
    "40",
    "--request-rate",
    "20",
    "--random-input-len",
    "64",
    "--random-output-len",
    "8",
    "--random-range-ratio",
    "0.5",
    "--percentile-metrics",
    "ttft,tpot,itl,e2el",
    "--metric-percentiles",
    "50,90,99",
    "--save-result",
    "--save-detailed",
    "--disable-tqdm",
];

// ---------------------------------------------------------------- classes

use crate::golden_norm;
use golden_norm::{blessing, check_golden, check_golden_but, golden_path};

// ---------------------------------------------------------------- invariants

fn f64s(v: &Value) -> Vec<f64> {
    v.as_array()
        .unwrap()
        .iter()
        .flat_map(|x| match x {
            Value::Array(a) => a.iter().map(|y| y.as_f64().unwrap()).collect(),
            y => vec![y.as_f64().unwrap()],
        })
        .collect()
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

/// A detailed run result agrees with itself: the stats keys come from the
/// per-request arrays they summarize (a mis-wired key fails here whatever
/// the machine's load).
fn check_run_invariants(name: &str, d: &Value) {
    let sum = |k: &str| f64s(&d[k]).iter().sum::<f64>();
    assert_eq!(
        sum("input_lens"),
        d["total_input_tokens"].as_f64().unwrap(),
        "{name}"
    );
    assert_eq!(
        sum("output_lens"),
        d["total_output_tokens"].as_f64().unwrap(),
        "{name}"
    );
    for (array, stat) in [
        ("ttfts", "mean_ttft_ms"),
        ("itls", "mean_itl_ms"),
        ("latencies", "mean_e2el_ms"),
    ] {
        let from_array = mean(&f64s(&d[array])) * 1e3;
        let stated = d[stat].as_f64().unwrap();
        assert!(
            close(from_array, stated),
            "{name}: {stat} {stated} vs mean of {array} {from_array}"
        );
    }
    assert_eq!(d["kneecap"]["e2el"]["mean_ms"], d["mean_e2el_ms"], "{name}");
    let duration = d["duration"].as_f64().unwrap();
    let completed = d["completed"].as_f64().unwrap();
    assert!(
        close(
            d["request_throughput"].as_f64().unwrap(),
            completed / duration
        ),
        "{name}"
    );
    let out_tokens = d["total_output_tokens"].as_f64().unwrap();
    assert!(
        close(
            d["output_throughput"].as_f64().unwrap(),
            out_tokens / duration
        ),
        "{name}"
    );
}

// ---------------------------------------------------------------- helpers

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

fn assert_ok(what: &str, out: &std::process::Output) {
    assert!(
        out.status.success(),
        "{what} exited {:?}:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// One `kneecap sim` child process on 127.0.0.1 with a free port, killed on drop.
struct Sim {
    child: Child,
    url: String,
}

impl Sim {
    fn start() -> Sim {
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_kneecap"))
            .args([
                "sim",
                "--host",
                "127.0.0.1",
                "--port",
                "0",
                "--preset",
                "tiny",
            ])
            .env_remove("OPENAI_API_KEY")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        // Reads every line, so the simulator never blocks on a full pipe.
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let mut sim = Sim {
            child,
            url: String::new(),
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        while sim.url.is_empty() {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = rx
                .recv_timeout(left)
                .expect("`kneecap sim --port 0` printed no address");
            if let Some(at) = line.find("http://127.0.0.1:") {
                let url = line[at..].split_whitespace().next().unwrap();
                sim.url = url.to_string();
            }
        }
        sim
    }
}

impl Drop for Sim {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

// ---------------------------------------------------------------- tests

#[test]
fn a_seeded_run_writes_the_golden_json() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let mut args = strings(&["run", "--sim-preset", "tiny"]);
    args.extend(strings(WORKLOAD));
    args.extend(strings(&["--result-filename", "x.json"]));
    let mut cmd_args = args.clone();
    cmd_args.extend(strings(&["--result-dir", dir.path().to_str().unwrap()]));
    let out = kneecap().args(&cmd_args).output().unwrap();
    assert_ok("kneecap run", &out);
    let doc = read_json(&dir.path().join("x.json"));
    check_run_invariants("run", &doc);
    check_golden(
        "run",
        "kneecap run against the built-in simulator (tiny), seed 7, 40 requests at 20 req/s",
        &args,
        &[("result", &doc)],
    );
}

#[test]
fn a_seeded_two_rate_sweep_writes_the_golden_json() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let args = strings(&[
        "sweep",
        "--sim-preset",
        "tiny",
        "--seed",
        "7",
        "--random-input-len",
        "64",
        "--random-output-len",
        "8",
        "--random-range-ratio",
        "0.5",
        "--rates",
        "10,20",
        "--slo",
        "p99_ttft_ms<=1000",
        "--step-duration",
        "1s",
        "--step-warmup",
        "0.5s",
        "--step-min-requests",
        "10",
        "--step-drain",
        "5s",
        // The verdicts are pinned: a busy machine's dispatch lateness must
        // not turn a step into a "generator-limited" one.
        "--max-lateness-ms",
        "1000",
        "--disable-tqdm",
    ]);
    let path = dir.path().join("sweep.json");
    let mut cmd_args = args.clone();
    cmd_args.extend(strings(&["-o", path.to_str().unwrap()]));
    let out = kneecap().args(&cmd_args).output().unwrap();
    assert_ok("kneecap sweep", &out);
    let doc = read_json(&path);
    // The SLO is judged on the step's own p99 TTFT.
    for step in doc["steps"].as_array().unwrap() {
        assert_eq!(
            step["slo_outcomes"][0]["observed_ms"], step["ttft_ms"]["p99"],
            "{step}"
        );
    }
    check_golden(
        "sweep",
        "kneecap sweep --rates 10,20 against the built-in simulator (tiny), seed 7, 1 s steps",
        &args,
        &[("sweep", &doc)],
    );
}

#[test]
fn three_shards_and_their_merge_write_the_golden_json() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let sim = Sim::start();
    let start_at = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 2;
    // The shard's own flags; --base-url and --start-at vary and are left out
    // of the pinned command line.
    let shard_args = |i: usize| -> Vec<String> {
        let mut a = strings(&["run"]);
        a.extend(strings(WORKLOAD));
        a.extend([
            "--shard".to_string(),
            format!("{i}/3"),
            "--result-filename".into(),
            format!("shard-{i}.json"),
        ]);
        a
    };
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..3)
            .map(|i| {
                let mut a = shard_args(i);
                a.extend([
                    "--base-url".to_string(),
                    sim.url.clone(),
                    "--start-at".into(),
                    start_at.to_string(),
                    "--result-dir".into(),
                    dir.path().display().to_string(),
                ]);
                s.spawn(move || kneecap().args(a).output().unwrap())
            })
            .collect();
        for (i, h) in handles.into_iter().enumerate() {
            assert_ok(&format!("shard {i}/3"), &h.join().unwrap());
        }
    });
    drop(sim);
    let merge_args = strings(&[
        "merge",
        "shard-0.json",
        "shard-1.json",
        "shard-2.json",
        "-o",
        "merged.json",
    ]);
    let out = kneecap()
        .current_dir(dir.path())
        .args(&merge_args)
        .output()
        .unwrap();
    assert_ok("kneecap merge", &out);
    let shards: Vec<Value> = (0..3)
        .map(|i| read_json(&dir.path().join(format!("shard-{i}.json"))))
        .collect();
    let merged = read_json(&dir.path().join("merged.json"));
    for (i, s) in shards.iter().enumerate() {
        check_run_invariants(&format!("shard {i}"), s);
    }
    let total = |k: &str| shards.iter().map(|s| s[k].as_u64().unwrap()).sum::<u64>();
    for k in ["completed", "total_input_tokens", "total_output_tokens"] {
        assert_eq!(merged[k].as_u64().unwrap(), total(k), "{k}");
    }
    // The shards split the single run's seeded schedule between them.
    let run_golden = golden_path("run");
    if !blessing() && run_golden.exists() {
        let mut union: Vec<f64> = shards
            .iter()
            .flat_map(|s| f64s(&s["kneecap"]["due_times"]))
            .collect();
        union.sort_by(f64::total_cmp);
        let run = read_json(&run_golden);
        let mut single = f64s(&run["result"]["exact"]["/kneecap/due_times"]);
        single.sort_by(f64::total_cmp);
        assert_eq!(union, single, "shards' due times vs the run golden's");
    }
    let mut args: Vec<String> = Vec::new();
    for i in 0..3 {
        args.extend(shard_args(i));
        args.push(";".into());
    }
    args.extend(merge_args);
    let queried = server_wide_queries_bound(&shards, &merged);
    check_golden_but(
        "merge",
        "3 x kneecap run --shard i/3 (same workload as the run golden) against one `kneecap sim --preset tiny`, then kneecap merge",
        &args,
        &[
            ("shard-0", &shards[0]),
            ("shard-1", &shards[1]),
            ("shard-2", &shards[2]),
            ("merged", &merged),
        ],
        queried,
    );
}

/// The shards' prefix-cache counts are the shared server's: each shard's
/// window holds its own prompts and as many of the others' as overlapped
/// it, which depends on when each process started and ended. Check those
/// bounds here and pin the count by type in the golden (hits stay exact:
/// random prompts share no prefix, so every window counts none). The merge
/// keeps one shard's reading (they share the server), never their sum.
fn server_wide_queries_bound(shards: &[Value], merged: &Value) -> &'static [&'static str] {
    let queried = |d: &Value| d["kneecap"]["prefix_cache"]["queried_tokens"].as_u64();
    let read: Vec<Option<u64>> = shards.iter().map(queried).collect();
    assert!(
        read.contains(&queried(merged)) && queried(merged).is_some(),
        "merged prefix_cache {} is none of the shards' readings {read:?}",
        merged["kneecap"]["prefix_cache"]
    );
    let all: u64 = shards
        .iter()
        .map(|s| s["total_input_tokens"].as_u64().unwrap())
        .sum();
    for (i, s) in shards.iter().enumerate() {
        let own = s["total_input_tokens"].as_u64().unwrap();
        let queried = s["kneecap"]["prefix_cache"]["queried_tokens"]
            .as_u64()
            .unwrap_or_else(|| panic!("shard {i}: no prefix_cache.queried_tokens"));
        assert!(
            (own..=all).contains(&queried),
            "shard {i}: the server counted {queried} prompt tokens in its window, \
             outside its own {own} .. all shards' {all}"
        );
    }
    &["/kneecap/prefix_cache/queried_tokens"]
}

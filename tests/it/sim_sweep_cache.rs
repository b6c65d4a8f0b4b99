//! Each sweep step reports the server's prefix-cache hit rate: against the
//! simulator, whose server log records what each request found cached (ground
//! truth), a shared-prefix sweep's per-step hit and query counts are the
//! sum over that step's requests, and a workload without sharing shows ~0
//! at every step, because each step draws its own prompts. On a simulator
//! whose KV cache holds every prompt (issue 25's 8M tokens), `--reuse-prompts`
//! makes the later step hit what the first left, and `--reset-prefix-cache`
//! drops it again.

use crate::common;

use common::cli::{run, short_steps, strings};
use kneecap::sim::SimConfig;
use serde_json::Value;
use std::time::Duration;

/// Timing-sensitive: one at a time.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

const PREFIX: &str = "swc-";

/// The `tiny` preset with issue 25's large KV cache: 8M tokens (every
/// prompt a sweep sends stays cached), 20 µs per prefill token, 8,192-token
/// context.
fn large_cache() -> SimConfig {
    let mut cfg = SimConfig::from_preset("tiny").unwrap();
    cfg.params.kv_cache_tokens = 8_000_000;
    cfg.params.per_prefill_token = Duration::from_micros(20);
    cfg.params.max_model_len = 8192;
    cfg
}

/// Issue 25's workload: random 4,096 in / 32 out, 64 prompts a step (the
/// steps send fewer requests than that).
const LONG_PROMPTS: &[&str] = &[
    "--random-input-len",
    "4096",
    "--random-output-len",
    "32",
    "--num-prompts",
    "64",
];

/// Sweep the simulator at two light rates with `workload`; the sweep JSON,
/// stdout and stderr, the server log's request lines grouped by step, and the
/// server log's summary.
async fn sweep(workload: &[&str]) -> (Value, [String; 2], Vec<Vec<Value>>, Value) {
    let tiny = SimConfig::from_preset("tiny").unwrap();
    sweep_on(tiny, ("4,8", LOOSE), workload).await
}

/// An SLO every light step meets: the verdicts are not under test.
const LOOSE: &str = "p99_ttft_ms<=5000";

/// [`sweep`] against `cfg` at `rates`, judged on `slo`.
async fn sweep_on(
    cfg: SimConfig,
    (rates, slo): (&str, &str),
    workload: &[&str],
) -> (Value, [String; 2], Vec<Vec<Value>>, Value) {
    let dir = tempfile::tempdir().unwrap();
    let sim = common::sim::logged(cfg, dir.path().join("server_log.jsonl")).await;
    let path = dir.path().join("sweep.json");
    let mut args = strings(&[
        "sweep",
        "--base-url",
        &sim.url,
        "--rates",
        rates,
        "--slo",
        slo,
        "--request-id-prefix",
        PREFIX,
        "-o",
        path.to_str().unwrap(),
    ]);
    args.extend(short_steps("5s", "50"));
    args.extend(strings(workload));
    let out = run(args, vec![]).await;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    // Completed (1: a short light step may still be judged unsteady; the
    // verdicts are not under test here).
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "{stdout}\n{stderr}"
    );
    sim.handle.shutdown().await.unwrap();
    let result: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let (requests, summary) = common::sim::requests(&sim.log, PREFIX);
    for r in &requests {
        assert_eq!(r["preemptions"], 0, "light load: one admission each");
    }
    let steps = common::sim::by_step(requests, PREFIX);
    (result, [stdout, stderr], steps, summary)
}

/// Each step's reported counts against the sum over its logged requests;
/// returns the steps' hit rates.
fn check_steps_against_log(result: &Value, steps: &[Vec<Value>]) -> Vec<f64> {
    let reported = result["steps"].as_array().unwrap();
    assert_eq!(reported.len(), steps.len(), "one server log group per step");
    let mut rates = Vec::new();
    for (k, (step, logged)) in reported.iter().zip(steps).enumerate() {
        let pc = &step["prefix_cache"];
        assert_eq!(pc["source"], "vllm", "step {k}: {pc}");
        let cached = common::sim::total(logged, "cached_tokens");
        let prompt = common::sim::total(logged, "prompt_tokens");
        assert_eq!(pc["hit_tokens"].as_u64(), Some(cached), "step {k}: {pc}");
        assert_eq!(
            pc["queried_tokens"].as_u64(),
            Some(prompt),
            "step {k}: {pc}"
        );
        rates.push(pc["hit_rate"].as_f64().unwrap());
    }
    rates
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shared_prefix_sweep_reports_each_steps_hit_rate_as_the_server_counted_it() {
    let _serial = SERIAL.lock().await;
    let (result, [stdout, stderr], steps, summary) = sweep(&[
        "--dataset-name",
        "prefix_repetition",
        "--prefix-repetition-prefix-len",
        "256",
        "--prefix-repetition-suffix-len",
        "32",
        "--prefix-repetition-num-prefixes",
        "2",
        "--prefix-repetition-output-len",
        "4",
    ])
    .await;
    let rates = check_steps_against_log(&result, &steps);
    eprintln!("per-step hit rates: {rates:?}");
    // 256 of 288 tokens shared, 2 prefixes: all but each prefix's first
    // request find the 16 shared blocks; at least 8 requests a step.
    assert!(
        rates.iter().all(|r| *r > 6.0 / 8.0 * 256.0 / 288.0),
        "{rates:?}"
    );
    // The steps' counts and the warm-up's add up to the server's totals.
    let steps_hit: u64 = result["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["prefix_cache"]["hit_tokens"].as_u64().unwrap())
        .sum();
    assert!(steps_hit <= summary["prefix_cache_hits"].as_u64().unwrap());
    // The table has the column, each step line its rate.
    let cell = format!("{:.1}%", rates[0] * 100.0);
    assert!(
        stdout.contains("cache hit") && stdout.contains(&cell),
        "{stdout}"
    );
    for rate in &rates {
        let said = format!("cache hit {:.1}%", rate * 100.0);
        assert!(stderr.contains(&said), "a step line says {said}: {stderr}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sweep_without_shared_prefixes_reports_a_hit_rate_near_zero() {
    let _serial = SERIAL.lock().await;
    let (result, _stdout, steps, _) =
        sweep(&["--random-input-len", "288", "--random-output-len", "4"]).await;
    let rates = check_steps_against_log(&result, &steps);
    eprintln!("per-step hit rates: {rates:?}");
    // Each step draws its own prompts: none finds what another left.
    assert!(rates.iter().all(|r| *r < 0.02), "{rates:?}");
}

/// The steps' `prompts` rows: (draw, seed).
fn draws(result: &Value) -> Vec<(String, u64)> {
    result["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let p = &s["prompts"];
            (
                p["draw"].as_str().unwrap().to_string(),
                p["seed"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// The knee bracket: (last pass, first fail).
fn bracket(result: &Value) -> (Option<f64>, Option<f64>) {
    let knee = &result["knee"];
    (knee["last_pass"].as_f64(), knee["first_fail"].as_f64())
}

/// Issue 25's comparison, on steps short enough for a test: 5 req/s, then
/// 10 (the large-cache simulator serves about 12 a second when it must
/// prefill every 4,096-token prompt, so 10 misses a 500 ms p99 TTFT).
const KNEE_RATES: (&str, &str) = ("5,10", "p99_ttft_ms<=500");

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fresh_prompts_find_the_knee_of_a_server_without_prefix_caching_and_reused_ones_hit() {
    let _serial = SERIAL.lock().await;
    let (fresh, [_, stderr], steps, _) = sweep_on(large_cache(), KNEE_RATES, LONG_PROMPTS).await;
    let cold = check_steps_against_log(&fresh, &steps);
    eprintln!(
        "fresh prompts: per-step hit rates {cold:?}, knee {:?}",
        bracket(&fresh)
    );
    assert!(cold.iter().all(|r| *r < 0.02), "{cold:?}");
    assert!(
        !stderr.contains("warning: step"),
        "no hit warning: {stderr}"
    );
    let seeds = draws(&fresh);
    assert_eq!(
        seeds[0],
        ("fresh".to_string(), 0),
        "step 0 keeps --seed (0)"
    );
    assert_eq!(seeds[1].0, "fresh");
    assert_ne!(seeds[1].1, seeds[0].1, "step 1 has its own seed");

    // What fresh traffic sees: the same sweep with prefix caching off.
    let mut off = large_cache();
    off.prefix_caching = false;
    let (uncached, _, _, _) = sweep_on(off, KNEE_RATES, LONG_PROMPTS).await;
    eprintln!("prefix caching off: knee {:?}", bracket(&uncached));
    assert_eq!(
        bracket(&uncached),
        (Some(5.0), Some(10.0)),
        "{}",
        uncached["steps"]
    );
    assert_eq!(bracket(&fresh), bracket(&uncached), "{}", fresh["steps"]);

    // --reuse-prompts: step 1 resends step 0's prompts (and more of its
    // own), and the cache serves what step 0 left.
    let mut reuse = LONG_PROMPTS.to_vec();
    reuse.push("--reuse-prompts");
    let (reused, _, steps, _) = sweep_on(large_cache(), KNEE_RATES, &reuse).await;
    let warm = check_steps_against_log(&reused, &steps);
    eprintln!(
        "--reuse-prompts: per-step hit rates {warm:?}, knee {:?}",
        bracket(&reused)
    );
    assert!(
        warm[0] < 0.02,
        "the first step has nothing to find: {warm:?}"
    );
    assert!(
        warm[1] > warm[0] + 0.25,
        "the second step finds the first's prompts: {warm:?}"
    );
    assert!(draws(&reused)
        .iter()
        .all(|(d, seed)| d == "reused" && *seed == 0));
    // The skipped prefill shows in the step's TTFT.
    let p99 = |r: &Value| r["steps"][1]["ttft_ms"]["p99"].as_f64().unwrap();
    assert!(
        p99(&reused) < p99(&fresh),
        "{} vs {}",
        p99(&reused),
        p99(&fresh)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reset_prefix_cache_brings_reused_prompts_back_to_a_cold_cache() {
    let _serial = SERIAL.lock().await;
    let mut args = LONG_PROMPTS.to_vec();
    args.extend(["--reuse-prompts", "--reset-prefix-cache"]);
    let (result, [_, stderr], steps, _) = sweep_on(large_cache(), ("6,4", LOOSE), &args).await;
    let rates = check_steps_against_log(&result, &steps);
    eprintln!("--reuse-prompts --reset-prefix-cache: per-step hit rates {rates:?}");
    assert!(rates.iter().all(|r| *r < 0.02), "{rates:?}");
    for step in result["steps"].as_array().unwrap() {
        assert_eq!(
            step["prefix_cache_reset"], true,
            "{}",
            step["prefix_cache_reset"]
        );
    }
    let said: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("--reset-prefix-cache"))
        .collect();
    assert_eq!(said.len(), 1, "said once: {said:?}");
    assert!(said[0].contains("POST /reset_prefix_cache"), "{said:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_that_resends_its_own_prompts_is_warned_with_the_fix() {
    let _serial = SERIAL.lock().await;
    // 4 prompts a step, ~10 and ~20 requests: the cache serves the resent ones.
    let (result, [stdout, stderr], steps, _) = sweep(&[
        "--random-input-len",
        "288",
        "--random-output-len",
        "4",
        "--num-prompts",
        "4",
    ])
    .await;
    let rates = check_steps_against_log(&result, &steps);
    eprintln!("per-step hit rates: {rates:?}");
    for (k, step) in result["steps"].as_array().unwrap().iter().enumerate() {
        assert!(rates[k] > 0.3, "step {k} resent prompts: {rates:?}");
        let warned = step["cache_warning"].as_str().unwrap_or_default();
        assert!(warned.contains("prefix-cache hit rate"), "step {k}: {step}");
        assert!(warned.contains("raise --num-prompts"), "{warned}");
        let line = format!("hit rate {:.1}%", rates[k] * 100.0);
        assert!(stderr.contains(&line), "said on stderr: {stderr}");
        let cell = format!("{:.1}%!", rates[k] * 100.0);
        assert!(stdout.contains(&cell), "marked in the table: {stdout}");
    }
}

/// Six prompts of forty distinct words each (`row{i}word{j}`).
fn six_prompts() -> Vec<String> {
    (0..6)
        .map(|i| {
            let words: Vec<String> = (0..40).map(|j| format!("row{i}word{j}")).collect();
            words.join(" ")
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dataset_file_gives_each_step_its_next_rows_and_warns_once_when_it_runs_out() {
    let _serial = SERIAL.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("six.jsonl");
    let rows: Vec<String> = six_prompts()
        .into_iter()
        .map(|p| serde_json::json!({ "prompt": p }).to_string())
        .collect();
    std::fs::write(&file, rows.join("\n")).unwrap();
    let path = file.to_str().unwrap();
    let workload = [
        "--dataset-name",
        "custom",
        "--dataset-path",
        path,
        "--custom-output-len",
        "4",
        "--num-prompts",
        "3",
    ];
    three_steps_over_six_rows(&workload).await;
}

/// A local `hf` dataset (MT-Bench's rows) is a file like any other: each
/// step takes its next rows, not a reshuffle that resends earlier ones.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_local_hf_dataset_gives_each_step_its_next_rows_too() {
    let _serial = SERIAL.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("question.jsonl");
    let rows: Vec<String> = six_prompts()
        .into_iter()
        .enumerate()
        .map(|(i, p)| serde_json::json!({ "question_id": i, "turns": [p] }).to_string())
        .collect();
    std::fs::write(&file, rows.join("\n")).unwrap();
    let path = file.to_str().unwrap();
    let workload = [
        "--dataset-name",
        "hf",
        "--dataset-path",
        path,
        "--hf-name",
        "philschmid/mt-bench",
        "--hf-output-len",
        "4",
        "--num-prompts",
        "3",
    ];
    three_steps_over_six_rows(&workload).await;
}

/// 6 rows, 3 a step, 3 steps: steps 0 and 1 get rows of their own, step 2
/// wraps round to step 0's; warned once, and the server's log agrees.
async fn three_steps_over_six_rows(workload: &[&str]) {
    let tiny = SimConfig::from_preset("tiny").unwrap();
    let (result, [_, stderr], steps, _) = sweep_on(tiny, ("4,6,8", LOOSE), workload).await;
    let rates = check_steps_against_log(&result, &steps);
    eprintln!("per-step hit rates: {rates:?}");
    let said: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("distinct prompts"))
        .collect();
    assert_eq!(said.len(), 1, "warned once: {stderr}");
    assert!(
        said[0].contains("gives 6 distinct prompts and each step sends up to 3"),
        "{}",
        said[0]
    );
    assert!(
        said[0].contains("1 of the 3 steps (from step 3 on)"),
        "{}",
        said[0]
    );
    let windows: Vec<(String, u64)> = result["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let p = &s["prompts"];
            (
                p["draw"].as_str().unwrap().to_string(),
                p["first_row"].as_u64().unwrap(),
            )
        })
        .collect();
    let want = [("fresh", 0), ("fresh", 3), ("repeated", 0)];
    let want: Vec<(String, u64)> = want.iter().map(|(d, r)| (d.to_string(), *r)).collect();
    assert_eq!(windows, want);
    // The server saw it: the second step found nothing of the first's (its
    // own resends aside, it has 3 prompts), the third found the first's.
    let first_of_each = |k: usize| common::sim::total(&steps[k][..1], "cached_tokens");
    assert_eq!(
        first_of_each(1),
        0,
        "step 1's first prompt is new to the server"
    );
    assert!(first_of_each(2) > 0, "step 2's first prompt is step 0's");
}

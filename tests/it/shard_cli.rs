//! Scale-out end to end: one seeded load as 1 process and as 3 `--shard i/3`
//! processes against our own test server on 127.0.0.1:0, `kneecap merge`'s
//! exactness and its refusals, and the Kubernetes Indexed Job manifest.

use crate::common;

use assert_cmd::Command;
use common::{Behaviour, TestServer};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::Duration;

fn kneecap() -> Command {
    let mut c = Command::cargo_bin("kneecap").unwrap();
    c.timeout(Duration::from_secs(120));
    c.env_remove("OPENAI_API_KEY");
    c
}

async fn run(args: Vec<String>) -> std::process::Output {
    tokio::task::spawn_blocking(move || kneecap().args(args).output().unwrap())
        .await
        .unwrap()
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// A small seeded Poisson load, saved with per-request arrays.
fn load_args(server: &TestServer, dir: &Path, file: &str, extra: &[&str]) -> Vec<String> {
    let mut a = strings(&[
        "run",
        "--base-url",
        &server.url(),
        "--num-prompts",
        "60",
        "--request-rate",
        "40",
        "--random-input-len",
        "16",
        "--random-output-len",
        "6",
        "--seed",
        "5",
        "--percentile-metrics",
        "ttft,tpot,itl,e2el",
        "--metric-percentiles",
        "50,90,99",
        "--save-result",
        "--save-detailed",
        "--result-dir",
        dir.to_str().unwrap(),
        "--result-filename",
        file,
        "--disable-tqdm",
    ]);
    a.extend(strings(extra));
    a
}

fn read(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn floats(v: &Value) -> Vec<f64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect()
}

fn sorted(mut v: Vec<f64>) -> Vec<f64> {
    v.sort_by(f64::total_cmp);
    v
}

/// NumPy's linear percentile, written out independently of kneecap's.
fn numpy_linear(sorted: &[f64], p: f64) -> f64 {
    let rank = (sorted.len() - 1) as f64 * p / 100.0;
    let (lo, hi) = (rank.floor() as usize, rank.ceil() as usize);
    sorted[lo] + (sorted[hi] - sorted[lo]) * (rank - lo as f64)
}

fn prompts(server: &TestServer) -> Vec<String> {
    let mut p: Vec<String> = server
        .truths
        .lock()
        .unwrap()
        .iter()
        .map(|t| t.body["prompt"].to_string())
        .collect();
    p.sort();
    p
}

/// Run the 3 shards of the load in parallel with a common start; return their files.
async fn three_shards(server: &TestServer, dir: &Path, extra: &[&str]) -> Vec<PathBuf> {
    let start = (chrono::Utc::now().timestamp() + 2).to_string();
    let mut handles = Vec::new();
    for i in 0..3 {
        let file = format!("shard-{i}.json");
        let shard = format!("{i}/3");
        let mut more = vec!["--shard", &shard, "--start-at", &start];
        more.extend_from_slice(extra);
        handles.push(tokio::spawn(run(load_args(server, dir, &file, &more))));
    }
    for h in handles {
        let out = h.await.unwrap();
        assert!(
            out.status.success(),
            "shard failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    (0..3)
        .map(|i| dir.join(format!("shard-{i}.json")))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_shards_send_the_single_process_load_and_merge_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let single_server = common::start(Behaviour::default()).await;
    let out = run(load_args(&single_server, dir.path(), "single.json", &[])).await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let single = read(&dir.path().join("single.json"));

    let shard_server = common::start(Behaviour::default()).await;
    let files = three_shards(&shard_server, dir.path(), &[]).await;
    let shards: Vec<Value> = files.iter().map(|f| read(f)).collect();

    // 1. Same intended send times: the union of the shards' due offsets is the
    //    single run's schedule, and each request went to exactly one shard.
    let union = sorted(
        shards
            .iter()
            .flat_map(|s| floats(&s["kneecap"]["due_times"]))
            .collect(),
    );
    assert_eq!(union, sorted(floats(&single["kneecap"]["due_times"])));
    let per_shard: Vec<usize> = shards
        .iter()
        .map(|s| s["input_lens"].as_array().unwrap().len())
        .collect();
    assert_eq!(per_shard.iter().sum::<usize>(), 60);
    assert!(per_shard.iter().all(|&n| n > 5), "shares {per_shard:?}");
    // ... and the same prompts.
    assert_eq!(prompts(&shard_server), prompts(&single_server));
    for s in &shards {
        let lateness = s["kneecap"]["shard"]["start_lateness_ms"].as_f64().unwrap();
        assert!(lateness.abs() < 1000.0, "start lateness {lateness} ms");
    }

    // 2. The merge: counters add, percentiles come from the merged histograms
    //    and equal the exact percentiles of the union of the shards' records
    //    within the histogram's precision (half a bucket ≤ 0.05 %, plus 1 µs
    //    rounding).
    let merged_path = dir.path().join("merged.json");
    let mut args: Vec<String> = vec!["merge".into()];
    args.extend(files.iter().map(|f| f.display().to_string()));
    args.extend(strings(&["-o", merged_path.to_str().unwrap()]));
    let out = run(args).await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let merged = read(&merged_path);
    assert_eq!(merged["completed"], 60);
    assert_eq!(merged["kneecap"]["merged"]["shards"], 3);
    let total_out: u64 = shards
        .iter()
        .map(|s| s["total_output_tokens"].as_u64().unwrap())
        .sum();
    assert_eq!(merged["total_output_tokens"].as_u64().unwrap(), total_out);

    let union_of = |key: &str| -> Vec<f64> {
        sorted(
            shards
                .iter()
                .flat_map(|s| {
                    s[key]
                        .as_array()
                        .unwrap()
                        .iter()
                        .flat_map(|x| match x {
                            Value::Array(a) => a.iter().map(|y| y.as_f64().unwrap()).collect(),
                            y => vec![y.as_f64().unwrap()],
                        })
                        .collect::<Vec<f64>>()
                })
                .map(|s| s * 1e3)
                .collect(),
        )
    };
    let mut worst: f64 = 0.0;
    for (metric, key) in [("ttft", "ttfts"), ("itl", "itls"), ("e2el", "latencies")] {
        let exact = union_of(key);
        for p in [50.0, 90.0, 99.0] {
            let want = numpy_linear(&exact, p);
            let pkey = format!("p{p}_{metric}_ms").replace(".0_", "_");
            let got = merged[pkey.as_str()].as_f64().unwrap();
            let rel = (got - want).abs() / want;
            worst = worst.max(rel);
            assert!(
                (got - want).abs() <= want * 0.0005 + 0.001,
                "{pkey}: merged {got} vs exact {want}"
            );
        }
        let mean = exact.iter().sum::<f64>() / exact.len() as f64;
        let got = merged[format!("mean_{metric}_ms").as_str()]
            .as_f64()
            .unwrap();
        assert!(
            (got - mean).abs() <= 0.001,
            "mean {metric}: {got} vs {mean}"
        );
    }
    eprintln!("largest relative difference merged vs exact percentile: {worst:e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn merge_refuses_missing_duplicated_and_mismatched_shards() {
    let dir = tempfile::tempdir().unwrap();
    let server = common::start(Behaviour::default()).await;
    let files = three_shards(&server, dir.path(), &[]).await;
    let other = dir.path().join("other");
    std::fs::create_dir(&other).unwrap();
    let out = run(load_args(
        &server,
        &other,
        "shard-2.json",
        &["--shard", "2/3", "--burstiness", "0.5"],
    ))
    .await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let f = |p: &PathBuf| p.display().to_string();
    let cases: Vec<(Vec<String>, &str)> = vec![
        (vec![f(&files[0]), f(&files[2])], "shard 1/3 is missing"),
        (
            vec![f(&files[0]), f(&files[1]), f(&files[1]), f(&files[2])],
            "shard 1/3 appears more than once",
        ),
        (
            vec![f(&files[0]), f(&files[1]), f(&other.join("shard-2.json"))],
            "workload fingerprint",
        ),
    ];
    for (set, want) in cases {
        let mut args = vec!["merge".to_string()];
        args.extend(set);
        let out = run(args).await;
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{want}: {err}");
        assert!(err.contains(want), "wanted '{want}' in: {err}");
        assert_eq!(err.lines().count(), 1, "one clear line: {err}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_shard_and_start_at_values_are_usage_errors_naming_the_flag() {
    for (extra, want) in [
        (vec!["--shard", "3/3"], "--shard: '3/3'"),
        (vec!["--shard", "two"], "--shard: 'two'"),
        (
            vec!["--shard", "2/4", "--max-concurrency", "2"],
            "--max-concurrency 2",
        ),
        (vec!["--start-at", "yesterday"], "--start-at: 'yesterday'"),
        (vec!["--start-at", "1000000000"], "ago"),
        (vec!["--start-at", "9999999999"], "away"),
    ] {
        let mut args = strings(&["run", "--base-url", "http://127.0.0.1:9", "--disable-tqdm"]);
        args.extend(strings(&extra));
        let out = run(args).await;
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{extra:?}: {err}");
        assert!(err.contains(want), "wanted '{want}' in: {err}");
    }
}

#[test]
fn the_kubernetes_indexed_job_runs_every_shard_once_with_a_common_start() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(root.join("deploy/kubernetes/job.yaml")).unwrap();
    let job: Value = serde_norway::from_str(&text).unwrap();
    assert_eq!(job["apiVersion"], "batch/v1");
    assert_eq!(job["kind"], "Job");
    let spec = &job["spec"];
    assert_eq!(spec["completionMode"], "Indexed");
    assert_eq!(
        spec["backoffLimit"], 0,
        "a retried shard would replay its load late"
    );
    let n = spec["completions"].as_u64().unwrap();
    assert_eq!(
        spec["parallelism"].as_u64(),
        Some(n),
        "all shards must run at once"
    );
    let pod = &spec["template"]["spec"];
    assert_eq!(pod["restartPolicy"], "Never");
    let c = &pod["containers"][0];
    let args: Vec<String> = c["args"]
        .as_array()
        .or_else(|| c["command"].as_array())
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_string())
        .collect();
    let joined = args.join(" ");
    assert!(
        joined.contains(&format!("--shard $(JOB_COMPLETION_INDEX)/{n}"))
            || joined.contains(&format!("--shard \"$(JOB_COMPLETION_INDEX)/{n}\"")),
        "shard arg must use the completion index and N = {n}: {joined}"
    );
    assert!(joined.contains("--start-at"), "{joined}");
    let mount = c["volumeMounts"][0]["mountPath"].as_str().unwrap();
    assert!(
        joined.contains(mount),
        "results must be written under {mount}: {joined}"
    );
    let vol = c["volumeMounts"][0]["name"].as_str().unwrap();
    let volumes = pod["volumes"].as_array().unwrap();
    assert!(
        volumes.iter().any(|v| v["name"] == vol),
        "volume {vol} not declared"
    );
}

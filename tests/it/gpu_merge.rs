//! `kneecap merge` of run shards measuring GPUs (`--gpu-metrics-url`), against
//! two simulators drawing 100 W idle and 400 W busy: shards that scraped the
//! same host keep one reading (the widest) and divide it by every shard's
//! tokens; shards that scraped different hosts add their energy; a shard
//! without a block leaves the merged run without one, and a note says why.

use crate::common;

use common::cli::{run, strings};
use kneecap::sim::gpu::GpuWatts;
use kneecap::sim::SimConfig;
use serde_json::Value;
use std::path::{Path, PathBuf};

fn metered() -> SimConfig {
    let mut cfg = SimConfig::from_preset("tiny").unwrap();
    cfg.gpu_watts = Some(GpuWatts {
        idle: 100.0,
        busy: 400.0,
    });
    cfg
}

/// Shard `i`/2 of a small seeded load against `base` (30 prompts at 30
/// req/s), sampling `gpu` every 100 ms when given; its result file.
async fn shard(i: usize, base: &str, gpu: Option<&str>, dir: &Path, name: &str) -> PathBuf {
    let path = dir.join(name);
    let idx = format!("{i}/2");
    let mut args = strings(&[
        "run",
        "--base-url",
        base,
        "--num-prompts",
        "30",
        "--request-rate",
        "30",
        "--random-input-len",
        "16",
        "--random-output-len",
        "8",
        "--seed",
        "5",
        "--shard",
        &idx,
        "--disable-tqdm",
        "--save-result",
        "--result-filename",
        path.to_str().unwrap(),
    ]);
    if let Some(url) = gpu {
        args.extend(strings(&[
            "--gpu-metrics-url",
            url,
            "--gpu-sample-interval",
            "100ms",
        ]));
    }
    let out = run(args, vec![]).await;
    assert!(
        out.status.success(),
        "shard {i}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    path
}

fn read(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// `kneecap merge` of `files`: the merged JSON and the command's stderr.
async fn merge(files: &[&PathBuf], dir: &Path, name: &str) -> (Value, String) {
    let out_path = dir.join(name);
    let mut args: Vec<String> = vec!["merge".into()];
    args.extend(files.iter().map(|f| f.display().to_string()));
    args.extend(strings(&["-o", out_path.to_str().unwrap()]));
    let out = run(args, vec![]).await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (
        read(&out_path),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * b.abs().max(1.0)
}

fn notes(merged: &Value) -> Vec<String> {
    merged["kneecap"]["merged"]["notes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn merged_gpu_blocks_keep_one_reading_of_the_same_gpus_and_add_distinct_ones() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let a = common::sim::logged(metered(), d.join("a.jsonl")).await;
    let b = common::sim::logged(metered(), d.join("b.jsonl")).await;
    let (ma, mb) = (format!("{}/metrics", a.url), format!("{}/metrics", b.url));

    // 1. Both shards on server A, both scraping A: one reading of one GPU.
    let (s0, s1) = tokio::join!(
        shard(0, &a.url, Some(&ma), d, "same-0.json"),
        shard(1, &a.url, Some(&ma), d, "same-1.json"),
    );
    let shards = [read(&s0), read(&s1)];
    let (merged, stderr) = merge(&[&s0, &s1], d, "same.json").await;
    assert!(!stderr.contains("warning: gpu"), "{stderr}");
    let g = &merged["kneecap"]["gpu"];
    assert_eq!(g["hosts"], serde_json::json!([ma]), "{g}");
    assert_eq!(g["gpus"], 1);
    let widest = shards
        .iter()
        .map(|s| &s["kneecap"]["gpu"])
        .max_by(|x, y| f(&x["duration_s"]).total_cmp(&f(&y["duration_s"])))
        .unwrap();
    assert_eq!(g["energy_j"], widest["energy_j"], "the widest, not a sum");
    assert_eq!(g["mean_power_w"], widest["mean_power_w"]);
    let tokens: u64 = shards
        .iter()
        .map(|s| s["total_output_tokens"].as_u64().unwrap())
        .sum();
    assert_eq!(merged["total_output_tokens"].as_u64(), Some(tokens));
    assert_eq!(g["output_tokens"].as_u64(), Some(tokens));
    assert_eq!(g["completed_requests"], 30);
    let per_token = f(&g["joules_per_output_token"]);
    assert!(close(per_token, f(&g["energy_j"]) / tokens as f64), "{g}");
    assert!(close(f(&g["joules_per_request"]), f(&g["energy_j"]) / 30.0));
    assert!(notes(&merged)
        .iter()
        .any(|n| n.starts_with("gpu: shards that scraped the same")));

    // 2. Shard 0 on A scraping A, shard 1 on B scraping B: two GPUs, added.
    let (t0, t1) = tokio::join!(
        shard(0, &a.url, Some(&ma), d, "apart-0.json"),
        shard(1, &b.url, Some(&mb), d, "apart-1.json"),
    );
    let (g0, g1) = (
        read(&t0)["kneecap"]["gpu"].clone(),
        read(&t1)["kneecap"]["gpu"].clone(),
    );
    let (merged, _) = merge(&[&t0, &t1], d, "apart.json").await;
    let g = &merged["kneecap"]["gpu"];
    assert_eq!(g["hosts"], serde_json::json!([ma, mb]), "{g}");
    assert_eq!(g["gpus"], 2);
    let energy = f(&g0["energy_j"]) + f(&g1["energy_j"]);
    assert!(close(f(&g["energy_j"]), energy), "{g}");
    assert!(close(
        f(&g["mean_power_w"]),
        f(&g0["mean_power_w"]) + f(&g1["mean_power_w"])
    ));
    assert!(close(
        f(&g["peak_power_w"]),
        f(&g0["peak_power_w"]) + f(&g1["peak_power_w"])
    ));
    assert!(
        f(&g["mean_power_w"]) >= 200.0,
        "two GPUs idle at 100 W at least: {g}"
    );
    let tokens = merged["total_output_tokens"].as_u64().unwrap();
    assert!(
        close(f(&g["joules_per_output_token"]), energy / tokens as f64),
        "{g}"
    );
    eprintln!(
        "gpu_merge: same GPUs {per_token:.3} J/token; distinct GPUs {:.0} J over {tokens} tokens = {:.3} J/token",
        energy,
        f(&g["joules_per_output_token"])
    );

    // 3. Shard 1 without --gpu-metrics-url: no block, and one line why.
    let u1 = shard(1, &b.url, None, d, "bare-1.json").await;
    let (merged, stderr) = merge(&[&t0, &u1], d, "mixed.json").await;
    assert!(
        merged["kneecap"].get("gpu").is_none(),
        "{}",
        merged["kneecap"]
    );
    let n = notes(&merged);
    assert!(
        n.iter()
            .any(|l| l.starts_with("gpu: 1 of 2 shards have no GPU block")),
        "{n:?}"
    );
    // ...and the command says so where it runs, not only in the JSON.
    assert!(
        stderr.contains("kneecap: warning: gpu: 1 of 2 shards have no GPU block"),
        "{stderr}"
    );
    a.handle.shutdown().await.unwrap();
    b.handle.shutdown().await.unwrap();
}

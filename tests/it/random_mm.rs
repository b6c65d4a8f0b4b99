//! Images (issue 28): vLLM's `random-mm` command line, copied from its
//! documentation with `vllm` replaced by `kneecap` (fewer, shorter prompts),
//! runs against the simulator, whose server log shows each request's images
//! and their tokens; a custom JSONL row's image reaches the simulator as a
//! data URL; a malformed image entry and a non-chat backend each stop the
//! run with one line and exit status 2.

use crate::common;

use common::cli::{kneecap, run, strings};
use kneecap::sim::SimConfig;

/// Run `args` (a `bench serve` aimed at `sim`), stop the simulator, and
/// read back its log's records of the requests named `prefix*`; the run
/// must succeed. Returns the records and the run's stderr.
async fn served(
    sim: common::sim::LoggedSim,
    args: Vec<String>,
    prefix: &str,
) -> (Vec<serde_json::Value>, String) {
    let out = run(args, vec![]).await;
    sim.handle.shutdown().await.unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    (common::sim::requests(&sim.log, prefix).0, stderr)
}

/// Tokens of a 224×224 image by the simulator's rule (ceil(224/28)²).
const TOKENS_224: u64 = 8 * 8;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vllms_random_mm_command_line_runs_against_the_simulator() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = SimConfig::from_preset("tiny").unwrap();
    cfg.served_model_name = "Qwen/Qwen2.5-VL-3B-Instruct".into();
    let sim = common::sim::logged(cfg, dir.path().join("sim.jsonl")).await;
    let args = strings(&[
        "bench",
        "serve",
        "--backend",
        "openai-chat",
        "--model",
        "Qwen/Qwen2.5-VL-3B-Instruct",
        "--endpoint",
        "/v1/chat/completions",
        "--dataset-name",
        "random-mm",
        "--num-prompts",
        "20",
        "--max-concurrency",
        "10",
        "--random-prefix-len",
        "5",
        "--random-input-len",
        "64",
        "--random-output-len",
        "16",
        "--random-range-ratio",
        "0.2",
        "--random-mm-base-items-per-request",
        "2",
        "--random-mm-limit-mm-per-prompt",
        r#"{"image": 3, "video": 0}"#,
        "--random-mm-bucket-config",
        "{(224, 224, 1): 1.0}",
        "--request-rate",
        "inf",
        "--ignore-eos",
        "--seed",
        "42",
        "--base-url",
        &sim.url,
        "--request-id-prefix",
        "mm-",
        "--disable-tqdm",
    ]);
    let (records, stderr) = served(sim, args, "mm-").await;
    assert_eq!(records.len(), 20, "{stderr}");
    for r in &records {
        assert_eq!(r["outcome"], "ok", "{r}");
        // base 2, range ratio 0: exactly two 224×224 images each.
        assert_eq!(r["images"].as_u64(), Some(2), "{r}");
        assert_eq!(r["image_tokens"].as_u64(), Some(2 * TOKENS_224), "{r}");
        let prompt = r["prompt_tokens"].as_u64().unwrap();
        assert!(prompt > 2 * TOKENS_224 + 40, "{r}");
        // --random-range-ratio 0.2 on 16: [12, 20], run to the end (ignore_eos).
        let output = r["output_tokens"].as_u64().unwrap();
        assert!((12..=20).contains(&output), "{r}");
    }
}

/// The first bytes of a PNG: signature and IHDR with its size.
fn png_head(width: u32, height: u32) -> Vec<u8> {
    let mut png = b"\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR".to_vec();
    png.extend_from_slice(&width.to_be_bytes());
    png.extend_from_slice(&height.to_be_bytes());
    png.extend_from_slice(&[8, 2, 0, 0, 0]);
    png
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_custom_rows_image_file_reaches_the_server_as_data() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("imgs")).unwrap();
    std::fs::write(dir.path().join("imgs/wide.png"), png_head(300, 60)).unwrap();
    let data = dir.path().join("rows.jsonl");
    std::fs::write(
        &data,
        "{\"prompt\": \"describe the picture\", \"images\": [\"imgs/wide.png\"]}\n\
         {\"prompt\": \"no picture here\"}\n",
    )
    .unwrap();
    let sim = common::sim::tiny(dir.path().join("sim.jsonl")).await;
    let args = strings(&[
        "bench",
        "serve",
        "--backend",
        "openai-chat",
        "--base-url",
        &sim.url,
        "--model",
        "kneecap-sim",
        "--dataset-name",
        "custom",
        "--dataset-path",
        data.to_str().unwrap(),
        "--num-prompts",
        "0",
        "--disable-shuffle",
        "--custom-output-len",
        "4",
        "--request-id-prefix",
        "c-",
        "--disable-tqdm",
    ]);
    let (records, stderr) = served(sim, args, "c-").await;
    let mut by_index = records;
    by_index.sort_by_key(|r| common::sim::index(r, "c-"));
    let images: Vec<(u64, u64)> = by_index
        .iter()
        .map(|r| {
            (
                r["images"].as_u64().unwrap(),
                r["image_tokens"].as_u64().unwrap(),
            )
        })
        .collect();
    // 300×60: ceil(60/28)·ceil(300/28) = 3·11.
    assert_eq!(images, vec![(1, 33), (0, 0)], "{stderr}");
}

#[test]
fn a_malformed_image_entry_names_file_line_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("bad.jsonl");
    std::fs::write(
        &data,
        "{\"prompt\": \"fine\"}\n{\"prompt\": \"broken\", \"images\": [\"missing.jpg\"]}\n",
    )
    .unwrap();
    let out = kneecap()
        .args([
            "run",
            "--backend",
            "openai-chat",
            "--dataset-name",
            "custom",
            "--dataset-path",
            data.to_str().unwrap(),
            "--num-prompts",
            "2",
            "--disable-tqdm",
        ])
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = stderr.lines().filter(|l| l.contains("bad.jsonl")).collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(
        lines[0].contains("bad.jsonl:2: \"images\"[0]") && lines[0].contains("missing.jpg"),
        "{stderr}"
    );
}

#[test]
fn random_mm_needs_a_chat_backend() {
    let out = kneecap()
        .args([
            "run",
            "--backend",
            "openai",
            "--dataset-name",
            "random-mm",
            "--num-prompts",
            "2",
        ])
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("random-mm") && stderr.contains("--backend openai-chat"),
        "{stderr}"
    );
}

#[test]
fn bad_random_mm_flags_stop_with_one_line_naming_the_flag() {
    for (flag, value, needle) in [
        (
            "--random-mm-bucket-config",
            "{(720, 1280, 16): 1.0}",
            "video",
        ),
        ("--random-mm-bucket-config", "{(224, 224, 1): -1}", "≥ 0"),
        (
            "--random-mm-limit-mm-per-prompt",
            r#"{"image": -1}"#,
            "whole number",
        ),
        ("--random-mm-num-mm-items-range-ratio", "2", "[0, 1]"),
    ] {
        let out = kneecap()
            .args([
                "run",
                "--backend",
                "openai-chat",
                "--dataset-name",
                "random-mm",
                "--num-prompts",
                "2",
                flag,
                value,
            ])
            .timeout(std::time::Duration::from_secs(60))
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{flag} {value}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        let lines: Vec<&str> = stderr.lines().filter(|l| l.contains(flag)).collect();
        assert_eq!(lines.len(), 1, "{stderr}");
        assert!(lines[0].contains(needle), "{stderr}");
    }
}

#[test]
fn random_mm_flags_on_another_dataset_become_one_note() {
    use clap::Parser;
    use kneecap::cli::{normalize_args, BenchCommand, Cli, Command};
    use kneecap::cmd::args::run::{run_config_for, DefaultTarget};
    let argv = [
        "kneecap",
        "bench",
        "serve",
        "--dataset-name",
        "random",
        "--random-mm-bucket-config",
        "{(224, 224, 1): 1.0}",
    ];
    let cli = Cli::try_parse_from(normalize_args(argv.iter().map(|s| s.to_string()))).unwrap();
    let Command::Bench {
        command: BenchCommand::Serve(args),
    } = cli.command
    else {
        panic!("not bench serve");
    };
    let cfg = run_config_for(&args, DefaultTarget::VllmLocalhost).unwrap();
    let notes: Vec<&String> = cfg
        .ignored_flags
        .iter()
        .filter(|n| n.contains("--random-mm-"))
        .collect();
    assert_eq!(notes.len(), 1, "{:#?}", cfg.ignored_flags);
    assert!(notes[0].starts_with("--random-mm-bucket-config belongs to --dataset-name random-mm"));
}

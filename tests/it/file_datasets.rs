//! `--dataset-name sonnet` and `hf` from a local `--dataset-path` (issue
//! 28) against the simulator: its server log shows each request's prompt
//! tokens (counted by its own toy tokenizer, so checked here against the
//! text kneecap must have sent) and output tokens (`--ignore-eos`: exactly
//! the dataset's output length). A row missing its field stops the run with
//! one line and exit status 2.

use crate::common;

use common::cli::{kneecap, run, strings};
use kneecap::sim::api::count_text_tokens;

const SONNET: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/sonnet-lines.txt");
const BASE: &str = "Pick as many lines as you can from these poem lines:\n";

/// kneecap's token estimate without a tokenizer: 4 characters a token.
fn estimate(s: &str) -> f64 {
    s.chars().count().div_ceil(4) as f64
}

/// Run `args` (a `bench serve` against `sim`, requests named `prefix*`),
/// stop the simulator and return its records in request order.
async fn served(
    sim: common::sim::LoggedSim,
    mut args: Vec<String>,
    prefix: &str,
) -> Vec<serde_json::Value> {
    args.extend(strings(&[
        "--base-url",
        &sim.url,
        "--request-id-prefix",
        prefix,
    ]));
    let out = run(args, vec![]).await;
    sim.handle.shutdown().await.unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let mut records = common::sim::requests(&sim.log, prefix).0;
    records.sort_by_key(|r| common::sim::index(r, prefix));
    records
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sonnet_prompts_hold_the_shared_prefix_and_the_drawn_lines() {
    let dir = tempfile::tempdir().unwrap();
    let sim = common::sim::tiny(dir.path().join("sim.jsonl")).await;
    let args = strings(&[
        "bench",
        "serve",
        "--backend",
        "openai",
        "--model",
        "kneecap-sim",
        "--dataset-name",
        "sonnet",
        "--dataset-path",
        SONNET,
        "--sonnet-input-len",
        "200",
        "--sonnet-prefix-len",
        "80",
        "--sonnet-output-len",
        "9",
        "--num-prompts",
        "12",
        "--ignore-eos",
        "--disable-tqdm",
    ]);
    let records = served(sim, args, "so-").await;
    // vLLM's arithmetic on kneecap's estimates, worked here independently.
    let text = std::fs::read_to_string(SONNET).unwrap();
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let avg = lines.iter().map(|l| estimate(l)).sum::<f64>() / lines.len() as f64;
    let base = estimate(BASE);
    let n_lines = ((200.0 - base) / avg).round_ties_even() as u64;
    let n_prefix = ((80.0 - base) / avg).round_ties_even() as usize;
    assert!(
        n_prefix > 0 && n_lines > n_prefix as u64,
        "{n_lines} {n_prefix}"
    );
    // The simulator's counts: the fixed head, then each drawn line's count
    // (lines end in a newline, so counts add up).
    let head = count_text_tokens(BASE) + count_text_tokens(&lines[..n_prefix].concat());
    let per_line: Vec<u32> = lines.iter().map(|l| count_text_tokens(l)).collect();
    let extra = n_lines as u32 - n_prefix as u32;
    let lo = head + extra * per_line.iter().min().unwrap();
    let hi = head + extra * per_line.iter().max().unwrap();
    assert_eq!(records.len(), 12);
    let prompts: Vec<u64> = records
        .iter()
        .map(|r| r["prompt_tokens"].as_u64().unwrap())
        .collect();
    for r in &records {
        assert_eq!(r["outcome"], "ok", "{r}");
        assert_eq!(r["output_tokens"].as_u64(), Some(9), "{r}");
        let p = r["prompt_tokens"].as_u64().unwrap() as u32;
        assert!((lo..=hi).contains(&p), "{p} not in {lo}..={hi}");
    }
    assert!(
        prompts.iter().any(|p| *p != prompts[0]),
        "lines are drawn at random: {prompts:?}"
    );
}

/// MT-Bench rows as JSONL, in a folder beside a test split.
fn mt_bench_folder(dir: &std::path::Path) -> (std::path::PathBuf, Vec<String>) {
    let root = dir.join("mt-bench");
    std::fs::create_dir_all(root.join("data")).unwrap();
    let questions: Vec<String> = (0..6)
        .map(|i| {
            format!("Question number {i}: explain why the sky looks blue at noon and red at dusk?")
        })
        .collect();
    let rows: String = questions
        .iter()
        .map(|q| format!("{{\"turns\": [\"{q}\", \"A follow-up.\"], \"category\": \"stem\"}}\n"))
        .collect();
    std::fs::write(root.join("data/train.jsonl"), rows).unwrap();
    std::fs::write(
        root.join("data/test.jsonl"),
        "{\"turns\": [\"not read\"]}\n",
    )
    .unwrap();
    (root, questions)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hf_mt_bench_from_a_folder_sends_the_first_turns_with_256_tokens() {
    let dir = tempfile::tempdir().unwrap();
    let (root, questions) = mt_bench_folder(dir.path());
    let sim = common::sim::tiny(dir.path().join("sim.jsonl")).await;
    let args = strings(&[
        "bench",
        "serve",
        "--backend",
        "openai",
        "--model",
        "kneecap-sim",
        "--dataset-name",
        "hf",
        "--dataset-path",
        root.to_str().unwrap(),
        "--hf-name",
        "philschmid/mt-bench",
        "--hf-split",
        "test",
        "--num-prompts",
        "6",
        "--disable-shuffle",
        "--ignore-eos",
        "--disable-tqdm",
    ]);
    let records = served(sim, args, "mt-").await;
    // vLLM reads MT-Bench's train split whatever --hf-split says.
    let want: Vec<u64> = questions
        .iter()
        .map(|q| u64::from(count_text_tokens(q)))
        .collect();
    let got: Vec<u64> = records
        .iter()
        .map(|r| r["prompt_tokens"].as_u64().unwrap())
        .collect();
    assert_eq!(got, want);
    assert!(
        records
            .iter()
            .all(|r| r["output_tokens"].as_u64() == Some(256)),
        "{records:?}"
    );
}

#[test]
fn an_hf_row_missing_its_field_names_file_line_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("ic.jsonl");
    std::fs::write(
        &data,
        "{\"input\": \"x = 1\", \"instruction\": \"Rename x.\"}\n{\"input\": \"y = 2\"}\n",
    )
    .unwrap();
    let out = kneecap()
        .args([
            "run",
            "--dataset-name",
            "hf",
            "--dataset-path",
            data.to_str().unwrap(),
            "--hf-name",
            "likaixin/InstructCoder",
            "--num-prompts",
            "2",
            "--disable-tqdm",
        ])
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = stderr.lines().filter(|l| l.contains("ic.jsonl")).collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(
        lines[0].contains("ic.jsonl:2: field \"instruction\""),
        "{stderr}"
    );
}

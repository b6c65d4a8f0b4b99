//! Unit tests of the dataset and pooling-backend rules (`dataset.rs`, and
//! the pooling defaults `run_config` derives from them).

use crate::cmd::args::run::run_config;
use crate::cmd::args::tests_support::{argv, assert_rows_rejected, run_args};
use crate::config::{Backend, RunConfig};
use crate::metrics::MetricName;
use crate::workload::dataset::DatasetKind;
use crate::workload::hf::HfSet;

fn config(line: &str) -> RunConfig {
    let args = argv(line);
    run_config(&run_args(&args)).unwrap_or_else(|e| panic!("{args:?} should be valid: {e:#}"))
}

/// Each row: `COMMAND LINE => a fragment of the error it must give`.
fn all_rejected(rows: &[&str]) {
    assert_rows_rejected(rows, |args| run_config(&run_args(args)));
}

#[test]
fn pooling_backends_take_their_endpoint_and_e2el_by_default() {
    use Backend::*;
    for (line, backend, endpoint) in [
        (
            "--backend openai-embeddings",
            OpenaiEmbeddings,
            "/v1/embeddings",
        ),
        (
            "--backend vllm-rerank --dataset-name random-rerank",
            VllmRerank,
            "/v1/rerank",
        ),
        ("--backend vllm-pooling", VllmPooling, "/pooling"),
        (
            "--endpoint /v1/embeddings",
            OpenaiEmbeddings,
            "/v1/embeddings",
        ),
        (
            "--endpoint /v2/rerank --dataset-name random-rerank",
            VllmRerank,
            "/v2/rerank",
        ),
    ] {
        let c = config(line);
        assert_eq!(
            (c.backend, c.endpoint.as_str()),
            (backend, endpoint),
            "{line}"
        );
        assert!(c.api.is_pooling(), "{line}");
        // vLLM's default percentile metrics for pooling: e2el; no ignore_eos
        // forced by the random dataset (only generation backends get it).
        assert_eq!(c.output.percentile_metrics, [MetricName::E2el], "{line}");
        assert!(!c.body.ignore_eos, "{line}");
        assert!(c.dataset.chat, "pooling prompts are text: {line}");
    }
    let c = config("--backend openai-embeddings --random-batch-size 4");
    assert_eq!(c.dataset.batch_size, 4);
    let c = config("--backend openai-chat --random-batch-size 4 --no-reranker");
    assert_eq!(c.dataset.batch_size, 1);
    assert_eq!(c.ignored_flags.len(), 2, "{:?}", c.ignored_flags);
    let c = config(
        "--backend vllm-rerank --dataset-name random-rerank --temperature 0.5 --extra-body {}",
    );
    assert_eq!(c.ignored_flags.len(), 2, "{:?}", c.ignored_flags);
    assert!(
        c.ignored_flags[0].starts_with("--temperature"),
        "{:?}",
        c.ignored_flags
    );
}

#[test]
fn datasets_and_pooling_backends_must_fit_each_other() {
    all_rejected(&[
        "--backend openai-embeddings --endpoint /v1/completions => does not match --backend openai-embeddings (use /v1/embeddings)",
        "--backend vllm-rerank --dataset-name random-rerank --endpoint /v1/embeddings => does not match --backend vllm-rerank (use /v1/rerank)",
        "--backend vllm-pooling --endpoint /v1/rerank => does not match --backend vllm-pooling (use /pooling)",
        "--dataset-name random-rerank => add --backend vllm-rerank",
        "--backend vllm-rerank => use --dataset-name random-rerank",
        "--backend openai-embeddings --random-batch-size 0 => --random-batch-size must be at least 1",
        "--backend vllm-rerank --dataset-name random-rerank --dataset-path x => cannot be used with --dataset-name random-rerank",
        "--dataset-name burstgpt => --dataset-name burstgpt needs --dataset-path FILE",
        "--dataset-name sonnet => --dataset-name sonnet needs --dataset-path FILE",
    ]);
    // A batched random dataset gives rerank its query and documents.
    let c = config("--backend vllm-rerank --random-batch-size 3");
    assert_eq!(c.dataset.batch_size, 3);
}

#[test]
fn timed_trace_is_self_timed_with_ignore_eos_unless_told_otherwise() {
    // Cargo.toml exists, so it passes the --dataset-path check; nothing reads it here.
    let base = "--dataset-name timed_trace --dataset-path Cargo.toml";
    let c = config(base);
    assert_eq!(c.load.trace_speed, Some(1.0));
    assert!(c.body.ignore_eos, "vLLM forces ignore_eos for timed_trace");
    assert_eq!(
        config(&format!("{base} --trace-speed 2.5"))
            .load
            .trace_speed,
        Some(2.5)
    );
    assert_eq!(
        config(&format!("{base} --self-timed")).load.trace_speed,
        Some(1.0)
    );
    assert_eq!(
        config(&format!("{base} --no-self-timed --request-rate 5"))
            .load
            .trace_speed,
        None
    );
    assert_eq!(config("--request-rate 5").load.trace_speed, None);
    all_rejected(&[
        "--self-timed => --self-timed is only for --dataset-name timed_trace",
        "--no-self-timed --dataset-name random => --no-self-timed is only for --dataset-name timed_trace",
        "--trace-speed 2 => --trace-speed is only for --dataset-name timed_trace",
        "--dataset-name timed_trace => --dataset-name timed_trace needs --dataset-path FILE",
        "--dataset-name timed_trace --dataset-path Cargo.toml --trace-speed 0 => --trace-speed must be a positive number",
        "--dataset-name timed_trace --dataset-path Cargo.toml --no-self-timed --trace-speed 2 => drop --no-self-timed",
    ]);
}

#[test]
fn sonnet_takes_its_file_and_three_lengths() {
    let lens = |line: &str| match config(line).dataset.kind {
        DatasetKind::Sonnet { path, params } => {
            assert!(path.ends_with("sonnet-lines.txt"), "{path:?}");
            (params.input_len, params.output_len, params.prefix_len)
        }
        other => panic!("{other:?}"),
    };
    let base = "--dataset-name sonnet --dataset-path tests/data/sonnet-lines.txt";
    assert_eq!(lens(base), (550, 150, 200), "vLLM's defaults");
    let set =
        format!("{base} --sonnet-input-len 300 --sonnet-output-len 20 --sonnet-prefix-len 50");
    assert_eq!(lens(&set), (300, 20, 50));
    all_rejected(&[
        "--dataset-name sonnet --dataset-path no/such/poems.txt => 'no/such/poems.txt' does not exist",
    ]);
}

#[test]
fn hf_reads_a_local_path_by_the_rules_of_hf_name() {
    let hf = |line: &str| match config(line).dataset.kind {
        DatasetKind::Hf(h) => h,
        other => panic!("{other:?}"),
    };
    let base = "--dataset-name hf --dataset-path Cargo.toml";
    let mt = hf(&format!(
        "{base} --hf-name philschmid/mt-bench --hf-split test"
    ));
    assert_eq!(
        (mt.set, mt.split.as_str(), mt.output_len),
        (HfSet::MtBench, "train", None)
    );
    let sg = hf(&format!(
        "{base} --hf-name Aeala/ShareGPT_Vicuna_unfiltered --hf-split test --hf-output-len 77 --hf-subset s"
    ));
    assert_eq!(
        (sg.set, sg.split.as_str(), sg.output_len),
        (HfSet::ShareGpt, "test", Some(77))
    );
    assert_eq!(sg.subset.as_deref(), Some("s"));
    let aliased = hf(&format!(
        "{base} --hf-name AI-MO/NuminaMath-CoT --hf-output-len 77 --output-len 5"
    ));
    assert_eq!(
        aliased.output_len,
        Some(5),
        "--output-len is copied into hf's"
    );
    all_rejected(&[
        "--dataset-name hf => needs --dataset-path",
        "--dataset-name hf --dataset-path Cargo.toml => needs --hf-name ID",
        "--dataset-name hf --dataset-path philschmid/mt-bench => kneecap never downloads",
        "--dataset-name hf --dataset-path no/x.jsonl --hf-name philschmid/mt-bench => 'no/x.jsonl' does not exist",
        "--dataset-name hf --dataset-path Cargo.toml --hf-name Lin-Chen/MMStar => text sets only",
        "--dataset-name hf --dataset-path Cargo.toml --hf-name no/such => --hf-name no/such: not a dataset",
    ]);
    let c = config("--hf-split train --hf-output-len 3");
    assert_eq!(c.ignored_flags.len(), 2, "{:?}", c.ignored_flags);
    assert!(c.ignored_flags[0].starts_with("--hf-split belongs to --dataset-name hf"));
}

#[test]
fn blazedit_distances_reach_the_set_and_elsewhere_are_noted_as_ignored() {
    let base = "--dataset-name hf --dataset-path Cargo.toml --hf-name vdaita/edit_5k_char";
    let set = match config(&format!("{base} --blazedit-min-distance 0.25"))
        .dataset
        .kind
    {
        DatasetKind::Hf(h) => h.set,
        other => panic!("{other:?}"),
    };
    assert_eq!(
        set,
        HfSet::Blazedit {
            min_distance: 0.25,
            max_distance: 1.0
        }
    );
    all_rejected(&[&format!(
        "{base} --blazedit-min-distance 0.6 --blazedit-max-distance 0.4 => --blazedit-min-distance 0.6 is above"
    )]);
    let notes = config("--blazedit-max-distance 0.5").ignored_flags;
    assert!(
        notes
            .iter()
            .any(|n| n.starts_with("--blazedit-max-distance belongs to --dataset-name hf")),
        "{notes:?}"
    );
    let quiet = config(&format!("{base} --blazedit-max-distance 0.5")).ignored_flags;
    assert!(!quiet.iter().any(|n| n.contains("blazedit")), "{quiet:?}");
}

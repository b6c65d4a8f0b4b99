//! Tests of dataset loading: seeding, files, errors.

use super::*;
use crate::workload::sample::{estimate_tokens, finish, text_request};
use rand::Rng;

fn random_cfg(seed: u64) -> DatasetConfig {
    DatasetConfig {
        kind: DatasetKind::Random {
            input_len: 32,
            output_len: 16,
            range_ratio_input: 0.5,
            range_ratio_output: 0.5,
            prefix_len: 4,
        },
        num_prompts: 20,
        seed,
        chat: false,
        disable_shuffle: false,
        no_oversample: false,
        batch_size: 1,
    }
}

#[test]
fn load_is_reproducible_with_the_same_seed() {
    let a = load(&random_cfg(7), None).unwrap();
    let b = load(&random_cfg(7), None).unwrap();
    let c = load(&random_cfg(8), None).unwrap();
    assert_eq!(a, b);
    assert_ne!(a, c);
    assert_eq!(a.len(), 20);
}

#[test]
fn dataset_rng_differs_from_a_plain_seeded_rng() {
    let mut plain = StdRng::seed_from_u64(0);
    let mut salted = dataset_rng(0);
    assert_ne!(plain.random::<u64>(), salted.random::<u64>());
}

#[test]
fn estimate_is_chars_over_four_rounded_up() {
    assert_eq!(estimate_tokens(""), 0);
    assert_eq!(estimate_tokens("abc"), 1);
    assert_eq!(estimate_tokens("abcd"), 1);
    assert_eq!(estimate_tokens("abcde"), 2);
    assert_eq!(estimate_tokens("héllo wörld"), 3);
}

#[test]
fn finish_oversamples_unless_told_not_to() {
    let reqs: Vec<_> = (0..3)
        .map(|i| text_request(format!("p{i}"), 5, 5))
        .collect();
    let mut rng = dataset_rng(1);
    let out = finish(reqs.clone(), 10, false, &mut rng);
    assert_eq!(out.len(), 10);
    assert!(out.iter().enumerate().all(|(i, r)| r.index == i));
    assert!(out[3..]
        .iter()
        .all(|r| reqs.iter().any(|o| o.prompt == r.prompt)));
    let out = finish(reqs, 10, true, &mut rng);
    assert_eq!(out.len(), 3);
}

#[test]
fn missing_file_error_names_the_file_and_the_flag() {
    let cfg = DatasetConfig {
        kind: DatasetKind::ShareGpt {
            path: PathBuf::from("/nonexistent/sharegpt-missing.json"),
            output_len: None,
        },
        ..random_cfg(0)
    };
    let msg = format!("{:#}", load(&cfg, None).unwrap_err());
    assert!(msg.contains("/nonexistent/sharegpt-missing.json"), "{msg}");
    assert!(msg.contains("--dataset-path"), "{msg}");
    let cfg = DatasetConfig {
        kind: DatasetKind::Custom {
            path: PathBuf::from("/nonexistent/custom-missing.jsonl"),
            output_len: 256,
        },
        ..random_cfg(0)
    };
    let msg = format!("{:#}", load(&cfg, None).unwrap_err());
    assert!(msg.contains("/nonexistent/custom-missing.jsonl"), "{msg}");
}

#[test]
fn non_utf8_file_error_names_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("latin1.jsonl");
    std::fs::write(&path, b"{\"prompt\": \"caf\xe9\"}\n").unwrap();
    let cfg = DatasetConfig {
        kind: DatasetKind::Custom {
            path,
            output_len: 8,
        },
        ..random_cfg(0)
    };
    let msg = format!("{:#}", load(&cfg, None).unwrap_err());
    assert!(
        msg.contains("latin1.jsonl") && msg.contains("UTF-8"),
        "{msg}"
    );
}

#[test]
fn load_reads_a_burstgpt_csv_and_groups_random_rerank_prompts() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("burst.csv");
    std::fs::write(
        &csv,
        "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n\
         1,GPT-4,10,3,13,API log\n2,ChatGPT,20,4,24,API log\n3,GPT-4,30,5,35,API log\n",
    )
    .unwrap();
    let cfg = DatasetConfig {
        kind: DatasetKind::BurstGpt { path: csv },
        num_prompts: 4,
        ..random_cfg(0)
    };
    assert!(!cfg.groups_prompts());
    let reqs = load(&cfg, None).unwrap();
    // Two GPT-4 rows, 4 drawn with replacement (pandas 3.1.1, seed 0: [0, 1, 1, 0]).
    let lens: Vec<(u32, u32)> = reqs.iter().map(|r| (r.prompt_len, r.output_len)).collect();
    assert_eq!(lens, [(10, 3), (30, 5), (30, 5), (10, 3)]);
    let cfg = DatasetConfig {
        kind: DatasetKind::RandomRerank(rerank::RerankParams {
            input_len: 20,
            range_ratio: 0.0,
            batch_size: 3,
            reranker: true,
        }),
        num_prompts: 7,
        ..random_cfg(0)
    };
    assert!(cfg.groups_prompts());
    assert_eq!(
        load(&cfg, None).unwrap().len(),
        3,
        "7 documents, 3 per request"
    );
}

#[test]
fn load_reads_sharegpt_and_custom_files() {
    let dir = tempfile::tempdir().unwrap();
    let sg = dir.path().join("sg.json");
    std::fs::write(
        &sg,
        r#"[{"id":"a","conversations":[{"from":"human","value":"Tell me a short story about a cat."},{"from":"gpt","value":"Once upon a time a cat sat on a warm windowsill all day."}]}]"#,
    )
    .unwrap();
    let cfg = DatasetConfig {
        kind: DatasetKind::ShareGpt {
            path: sg,
            output_len: None,
        },
        num_prompts: 3,
        ..random_cfg(0)
    };
    let reqs = load(&cfg, None).unwrap();
    assert_eq!(reqs.len(), 3);
    let cj = dir.path().join("c.jsonl");
    std::fs::write(&cj, "{\"prompt\":\"hello there\",\"output_tokens\":12}\n").unwrap();
    let cfg = DatasetConfig {
        kind: DatasetKind::Custom {
            path: cj,
            output_len: -1,
        },
        num_prompts: 0,
        ..random_cfg(0)
    };
    let reqs = load(&cfg, None).unwrap();
    assert_eq!(reqs.len(), 1);
    assert_eq!(reqs[0].output_len, 12);
}

fn hf_cfg(path: PathBuf, subset: Option<&str>, split: &str) -> DatasetConfig {
    DatasetConfig {
        kind: DatasetKind::Hf(HfConfig {
            path,
            id: "philschmid/mt-bench".into(),
            set: hf::HfSet::MtBench,
            subset: subset.map(str::to_owned),
            split: split.into(),
            output_len: None,
        }),
        num_prompts: 4,
        disable_shuffle: true,
        no_oversample: true,
        ..random_cfg(0)
    }
}

fn first_turns(cfg: &DatasetConfig) -> Vec<String> {
    load(cfg, None)
        .unwrap()
        .into_iter()
        .map(|r| match r.prompt {
            super::super::Prompt::Text(t) => t,
            other => panic!("{other:?}"),
        })
        .collect()
}

#[test]
fn hf_folders_give_the_split_and_subset_files_in_name_order() {
    let dir = tempfile::tempdir().unwrap();
    let sub = dir.path().join("en/data");
    std::fs::create_dir_all(&sub).unwrap();
    std::fs::create_dir_all(dir.path().join(".cache")).unwrap();
    let row = |q: &str| format!("{{\"turns\": [\"{q}\"]}}\n");
    std::fs::write(sub.join("train-2.jsonl"), row("b")).unwrap();
    std::fs::write(sub.join("train-1.json"), format!("[{}]", row("a").trim())).unwrap();
    std::fs::write(sub.join("test.jsonl"), row("t")).unwrap();
    std::fs::write(dir.path().join(".cache/train.jsonl"), row("hidden")).unwrap();
    let root = dir.path().to_path_buf();
    assert_eq!(
        first_turns(&hf_cfg(root.clone(), Some("en"), "train")),
        ["a", "b"]
    );
    assert_eq!(first_turns(&hf_cfg(root.clone(), None, "test")), ["t"]);
    let err = load(&hf_cfg(root, Some("fr"), "train"), None).unwrap_err();
    assert!(err.to_string().contains("--hf-subset"), "{err}");
    let file = sub.join("test.jsonl");
    let err = load(&hf_cfg(file, Some("en"), "train"), None).unwrap_err();
    assert!(err.to_string().contains("drop --hf-subset"), "{err}");
}

#[test]
fn an_hf_parquet_file_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("train-00000.parquet");
    std::fs::write(&file, b"PAR1").unwrap();
    let msg = load(&hf_cfg(file.clone(), None, "train"), None)
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains(&file.display().to_string()) && msg.contains("JSONL"),
        "{msg}"
    );
}

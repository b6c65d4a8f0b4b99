//! Dataset generators: random, random-rerank, ShareGPT, BurstGPT, custom JSONL,
//! prefix_repetition → [`RequestSpec`]s (seeded).
//!
//! This file owns the configuration ([`DatasetConfig`]), the one function that
//! touches the filesystem ([`load`]), and the helpers the generators share
//! (seeding, shuffling, oversampling, token estimates). The generators
//! themselves live in [`super::random`], [`super::sharegpt`] and
//! [`super::custom`]; they take file *contents* and a seeded RNG and do no I/O.
use std::path::{Path, PathBuf};

use anyhow::anyhow;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

use super::tokenizer::TokenCounter;
use super::{burstgpt, custom, prefix, random, rerank, sharegpt, Prompt, RequestSpec};

/// Which dataset, with its own options (vLLM flag names in the docs).
#[derive(Debug, Clone, PartialEq)]
pub enum DatasetKind {
    /// `--dataset-name random`.
    Random {
        input_len: u32,
        output_len: u32,
        /// `--random-range-ratio` for input and output (a float or `{"input":..,"output":..}`).
        range_ratio_input: f64,
        range_ratio_output: f64,
        prefix_len: u32,
    },
    /// `--dataset-name sharegpt --dataset-path FILE [--sharegpt-output-len N]`.
    ShareGpt {
        path: PathBuf,
        output_len: Option<u32>,
    },
    /// `--dataset-name custom --dataset-path FILE.jsonl [--custom-output-len N]`;
    /// `output_len` -1 means: take `output_tokens` from each row.
    Custom { path: PathBuf, output_len: i64 },
    /// `--dataset-name prefix_repetition` with its four `--prefix-repetition-*` flags.
    PrefixRepetition(prefix::PrefixParams),
    /// `--dataset-name burstgpt --dataset-path FILE.csv` (see [`burstgpt`]).
    BurstGpt { path: PathBuf },
    /// `--dataset-name random-rerank` (see [`rerank`]).
    RandomRerank(rerank::RerankParams),
}

/// Everything [`load`] needs to build a workload.
#[derive(Debug, Clone, PartialEq)]
pub struct DatasetConfig {
    pub kind: DatasetKind,
    /// `--num-prompts`. For `custom`, 0 means "every row of the file".
    pub num_prompts: usize,
    /// `--seed`; see [`dataset_rng`] for how it is turned into the dataset's RNG.
    pub seed: u64,
    /// Prompts must be text: every API but `/v1/completions` (chat,
    /// Responses and the pooling APIs).
    pub chat: bool,
    /// `--disable-shuffle`.
    pub disable_shuffle: bool,
    /// `--no-oversample`.
    pub no_oversample: bool,
    /// `--random-batch-size` for the `random` dataset on a pooling backend:
    /// inputs per request (1 = one prompt per request).
    pub batch_size: usize,
}

impl DatasetConfig {
    /// Whether one request carries several prompts (random-rerank's
    /// documents, `--random-batch-size`), so the dataset, not
    /// `--num-prompts`, says how many requests there are.
    pub fn groups_prompts(&self) -> bool {
        self.batch_size > 1 || matches!(self.kind, DatasetKind::RandomRerank(_))
    }
}

/// The sampling options shared by the file-based datasets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SampleOptions {
    /// How many requests to produce (`custom`: 0 = all rows).
    pub num_prompts: usize,
    /// Keep file order instead of shuffling with the seed.
    pub disable_shuffle: bool,
    /// Return fewer than `num_prompts` requests rather than duplicating samples.
    pub no_oversample: bool,
}

impl From<&DatasetConfig> for SampleOptions {
    fn from(cfg: &DatasetConfig) -> Self {
        Self {
            num_prompts: cfg.num_prompts,
            disable_shuffle: cfg.disable_shuffle,
            no_oversample: cfg.no_oversample,
        }
    }
}

/// Salt mixed into `--seed` for the dataset RNG.
///
/// The arrival schedule is seeded from the same `--seed`; without a salt both
/// would draw the same stream, so the first prompt lengths would be correlated
/// with the first inter-arrival gaps. The value is arbitrary ("kneecap" in ASCII).
pub const DATASET_SEED_SALT: u64 = 0x006b_6e65_6563_6170;

/// The dataset's own RNG for `seed`: same seed ⇒ same prompts, independent
/// of the RNG that draws the arrival schedule.
pub fn dataset_rng(seed: u64) -> StdRng {
    StdRng::seed_from_u64(seed ^ DATASET_SEED_SALT)
}

/// Build the workload. Reads the dataset file (if any); errors name the file and line.
pub fn load(
    cfg: &DatasetConfig,
    tokenizer: Option<&TokenCounter>,
) -> anyhow::Result<Vec<RequestSpec>> {
    let mut rng = dataset_rng(cfg.seed);
    let opts = SampleOptions::from(cfg);
    match &cfg.kind {
        DatasetKind::Random {
            input_len,
            output_len,
            range_ratio_input,
            range_ratio_output,
            prefix_len,
        } => {
            let params = random::RandomParams {
                input_len: *input_len,
                output_len: *output_len,
                range_ratio_input: *range_ratio_input,
                range_ratio_output: *range_ratio_output,
                prefix_len: *prefix_len,
            };
            let workload =
                random::generate(&params, cfg.num_prompts, tokenizer, cfg.chat, &mut rng)?;
            Ok(rerank::batch_prompts(workload.requests, cfg.batch_size))
        }
        DatasetKind::RandomRerank(params) => {
            rerank::generate(params, cfg.num_prompts, tokenizer, &mut rng)
        }
        DatasetKind::BurstGpt { path } => {
            let contents = read_dataset(
                path,
                "the BurstGPT CSV (Timestamp,Model,Request tokens,Response tokens,...)",
            )?;
            let origin = path.display().to_string();
            let rows = burstgpt::parse(&origin, &contents)?;
            // vLLM samples with pandas seeded by --seed itself (no salt).
            burstgpt::sample(
                &origin,
                &rows,
                cfg.num_prompts,
                cfg.seed,
                tokenizer,
                cfg.chat,
            )
        }
        DatasetKind::ShareGpt { path, output_len } => {
            let contents = read_dataset(path, "a ShareGPT JSON file")?;
            let origin = path.display().to_string();
            let conversations = sharegpt::parse(&origin, &contents)?;
            sharegpt::sample(
                &origin,
                conversations,
                *output_len,
                &opts,
                tokenizer,
                &mut rng,
            )
        }
        DatasetKind::Custom { path, output_len } => {
            let contents = read_dataset(
                path,
                "a JSONL file with one {\"prompt\": ...} object per line",
            )?;
            let origin = path.display().to_string();
            let rows = custom::parse(&origin, &contents)?;
            custom::sample(&origin, rows, *output_len, &opts, tokenizer, &mut rng)
        }
        DatasetKind::PrefixRepetition(params) => {
            prefix::generate(params, &opts, tokenizer, cfg.chat, &mut rng)
        }
    }
}

/// Read a dataset file as UTF-8 text (a leading BOM is dropped).
fn read_dataset(path: &Path, expected: &str) -> anyhow::Result<String> {
    let bytes = std::fs::read(path).map_err(|e| {
        anyhow!(
            "cannot read dataset file '{}': {e}; check --dataset-path (it should be {expected})",
            path.display()
        )
    })?;
    let text = String::from_utf8(bytes).map_err(|e| {
        anyhow!(
            "dataset file '{}' is not UTF-8 text (invalid byte at offset {}); it should be {expected}",
            path.display(),
            e.utf8_error().valid_up_to()
        )
    })?;
    Ok(match text.strip_prefix('\u{feff}') {
        Some(rest) => rest.to_owned(),
        None => text,
    })
}

/// Client-side token estimate used when no tokenizer is given: one token per
/// 4 characters (Unicode scalar values), rounded up — the usual rule of thumb
/// for English text with GPT-style BPE tokenizers.
///
/// It is only an estimate (code, numbers and non-Latin scripts tokenize
/// denser); the server's `usage.prompt_tokens` overrides it in the results.
pub fn estimate_tokens(text: &str) -> u32 {
    let chars = text.chars().count();
    u32::try_from(chars.div_ceil(4)).unwrap_or(u32::MAX)
}

/// Tokens in `text` as vLLM counts a dataset prompt: `len(tokenizer(text).input_ids)`,
/// i.e. including the specials the post-processor adds (BOS, …). Without a
/// tokenizer: [`estimate_tokens`].
pub(crate) fn prompt_tokens(text: &str, tokenizer: Option<&TokenCounter>) -> u32 {
    match tokenizer {
        Some(tok) => tok
            .count(text)
            .saturating_add(tok.num_special_tokens_to_add()),
        None => estimate_tokens(text),
    }
}

/// Shuffle with the dataset RNG unless `--disable-shuffle`.
pub(crate) fn maybe_shuffle<T>(items: &mut [T], opts: &SampleOptions, rng: &mut StdRng) {
    if !opts.disable_shuffle {
        items.shuffle(rng);
    }
}

/// Like vLLM: when fewer than `num_prompts` samples were taken, append copies
/// of randomly chosen ones (seeded) until there are `num_prompts`, unless
/// `--no-oversample`. Then number the requests in order.
pub(crate) fn finish(
    mut requests: Vec<RequestSpec>,
    num_prompts: usize,
    no_oversample: bool,
    rng: &mut StdRng,
) -> Vec<RequestSpec> {
    let n_original = requests.len();
    if !no_oversample && n_original > 0 && n_original < num_prompts {
        for _ in n_original..num_prompts {
            let pick = requests[rng.random_range(0..n_original)].clone();
            requests.push(pick);
        }
    }
    for (index, request) in requests.iter_mut().enumerate() {
        request.index = index;
    }
    requests
}

/// A text request (index assigned later by [`finish`]).
pub(crate) fn text_request(prompt: String, prompt_len: u32, output_len: u32) -> RequestSpec {
    RequestSpec {
        index: 0,
        prompt: Prompt::Text(prompt),
        prompt_len,
        output_len,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}

//! Dataset generators: random, random-mm, random-rerank, ShareGPT, BurstGPT, custom JSONL,
//! prefix_repetition, timed_trace, sonnet, hf → [`RequestSpec`]s (seeded).
//!
//! This file owns the configuration ([`DatasetConfig`]), the one function that
//! touches the filesystem ([`load`]), and the dataset's seeding
//! ([`dataset_rng`]). The generators themselves live in [`super::random`],
//! [`super::sharegpt`], [`super::custom`] and the others; they take file
//! *contents* and a seeded RNG and do no I/O. What they share (shuffling,
//! oversampling, token estimates) is in [`super::sample`], below them all.
use std::path::{Path, PathBuf};

use anyhow::anyhow;
use rand::rngs::StdRng;
use rand::SeedableRng;

use super::sample::SampleOptions;
use super::tokenizer::TokenCounter;
use super::trace::{TraceLabels, TraceRow};
use super::trace_expand::{self, ExpandParams, ShortRows};
use super::{
    burstgpt, custom, custom_images, hf, hf_files, prefix, random, random_mm, rerank, sharegpt,
    sonnet, trace, RequestSpec,
};

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
    /// `--dataset-name random-mm`: random text with images (see [`random_mm`]).
    RandomMm(random_mm::MmParams),
    /// `--dataset-name random-rerank` (see [`rerank`]).
    RandomRerank(rerank::RerankParams),
    /// `--dataset-name timed_trace --dataset-path FILE` (see [`trace`]).
    TimedTrace(TraceConfig),
    /// `--dataset-name sonnet --dataset-path FILE` with the `--sonnet-*`
    /// lengths (see [`sonnet`]).
    Sonnet {
        path: PathBuf,
        params: sonnet::SonnetParams,
    },
    /// `--dataset-name hf --dataset-path FILE|DIR --hf-name ID` (see [`hf`]).
    Hf(HfConfig),
}

/// A local copy of a Hugging Face dataset and how vLLM reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct HfConfig {
    /// A JSON/JSONL file, or a folder of them.
    pub path: PathBuf,
    /// `--hf-name` (or `--dataset-path` when that is the id).
    pub id: String,
    pub set: hf::HfSet,
    /// `--hf-subset`: a subfolder of `path`.
    pub subset: Option<String>,
    /// The split read from a folder (vLLM forces `train` for most sets).
    pub split: String,
    /// `--hf-output-len` (or `--output-len`); `None`: the set's default.
    pub output_len: Option<u32>,
}

/// A trace file and how to read it (vLLM's `--timed-trace-*` flags).
#[derive(Debug, Clone, PartialEq)]
pub struct TraceConfig {
    pub path: PathBuf,
    /// `--timed-trace-chunk-hash-size`: tokens per hash id.
    pub chunk_size: u32,
    /// `--timed-trace-sec-multiplier`: timestamps × this = seconds.
    pub sec_multiplier: f64,
    pub labels: TraceLabels,
}

/// A trace read and expanded: its requests in time order, each one's
/// timestamp, and the rows themselves (a sweep re-expands them per step).
#[derive(Debug, Clone)]
pub struct TraceWorkload {
    pub rows: Vec<TraceRow>,
    pub requests: Vec<RequestSpec>,
    /// Seconds from the start of the run of each request (row order).
    pub timestamps: Vec<f64>,
    pub short: Option<ShortRows>,
    /// Tokens per hash id the rows were expanded with.
    pub chunk_size: u32,
}

impl TraceWorkload {
    /// Requests per second of the trace as recorded: (n − 1) gaps over its
    /// span. `None` for fewer than two rows or a zero span.
    pub fn mean_rate(&self) -> Option<f64> {
        let (first, last) = (self.timestamps.first()?, self.timestamps.last()?);
        let span = last - first;
        (self.timestamps.len() >= 2 && span > 0.0)
            .then(|| (self.timestamps.len() - 1) as f64 / span)
    }
}

/// Read a trace file and expand its first `num_prompts` rows (all when 0),
/// vLLM's `timed_trace`: rows in time order, no shuffling, no oversampling.
pub fn load_trace(
    tc: &TraceConfig,
    cfg: &DatasetConfig,
    tokenizer: Option<&TokenCounter>,
) -> anyhow::Result<TraceWorkload> {
    if tc.chunk_size == 0 {
        return Err(anyhow!("--timed-trace-chunk-hash-size must be at least 1"));
    }
    if !(tc.sec_multiplier.is_finite() && tc.sec_multiplier > 0.0) {
        return Err(anyhow!(
            "--timed-trace-sec-multiplier must be a positive number (0.001 for timestamps in ms)"
        ));
    }
    let contents = read_dataset(
        &tc.path,
        "a timed_trace JSONL file (timestamp, input_length, output_length, hash_ids) or an Azure trace CSV",
    )?;
    let origin = tc.path.display().to_string();
    let mut rows = trace::parse(&origin, &contents, &tc.labels, tc.sec_multiplier)
        .map_err(anyhow::Error::msg)?;
    if cfg.num_prompts > 0 {
        rows.truncate(cfg.num_prompts);
    }
    let params = ExpandParams {
        chunk_size: tc.chunk_size,
        seed: cfg.seed,
        salt: 0,
        chat: cfg.chat,
    };
    let expanded = trace_expand::expand(&rows, &params, tokenizer);
    Ok(TraceWorkload {
        timestamps: rows.iter().map(|r| r.timestamp).collect(),
        rows,
        requests: expanded.requests,
        short: expanded.short,
        chunk_size: tc.chunk_size,
    })
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
    load_at(cfg, 0, tokenizer)
}

/// [`load`] for a draw whose requests count from `first` (a sweep step's
/// own draw): BurstGPT's prompts are walks that start at the request's
/// number, so without the shift step `k`'s request `i` would open with the
/// same tokens as every other step's. The other datasets' prompts come from
/// the seeded RNG alone and ignore `first`.
pub fn load_at(
    cfg: &DatasetConfig,
    first: usize,
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
        DatasetKind::RandomMm(params) => {
            random_mm::generate(params, cfg.num_prompts, tokenizer, &mut rng)
        }
        DatasetKind::BurstGpt { path } => load_burstgpt(path, cfg, first, tokenizer),
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
            let mut rows = custom::parse(&origin, &contents)?;
            custom_images::resolve(&origin, path, &mut rows, |p| std::fs::read(p))?;
            custom::sample(&origin, rows, *output_len, &opts, tokenizer, &mut rng)
        }
        DatasetKind::PrefixRepetition(params) => {
            prefix::generate(params, &opts, tokenizer, cfg.chat, &mut rng)
        }
        DatasetKind::TimedTrace(tc) => Ok(load_trace(tc, cfg, tokenizer)?.requests),
        DatasetKind::Sonnet { path, params } => {
            let contents = read_dataset(path, "a text file of poem lines")?;
            let origin = path.display().to_string();
            let n = cfg.num_prompts;
            sonnet::generate(&origin, &contents, params, n, tokenizer, &mut rng)
        }
        DatasetKind::Hf(hc) => load_hf(hc, &opts, tokenizer, &mut rng),
    }
}

/// `--dataset-name burstgpt`: the CSV's rows, drawn as vLLM's pandas does.
fn load_burstgpt(
    path: &Path,
    cfg: &DatasetConfig,
    first: usize,
    tokenizer: Option<&TokenCounter>,
) -> anyhow::Result<Vec<RequestSpec>> {
    let contents = read_dataset(
        path,
        "the BurstGPT CSV (Timestamp,Model,Request tokens,Response tokens,...)",
    )?;
    let origin = path.display().to_string();
    let rows = burstgpt::parse(&origin, &contents)?;
    // vLLM samples with pandas seeded by --seed itself (no salt).
    let draw = burstgpt::Draw {
        num_prompts: cfg.num_prompts,
        seed: cfg.seed,
        first,
    };
    burstgpt::sample(&origin, &rows, draw, tokenizer, cfg.chat)
}

/// `--dataset-name hf`: every file of the split, parsed by the set's rules.
fn load_hf(
    hc: &HfConfig,
    opts: &SampleOptions,
    tokenizer: Option<&TokenCounter>,
    rng: &mut StdRng,
) -> anyhow::Result<Vec<RequestSpec>> {
    let mut rows = Vec::new();
    for file in hf_paths(hc)? {
        let contents = read_dataset(&file, "a JSON array or JSONL file of the dataset's rows")?;
        rows.extend(hf::parse(hc.set, &file.display().to_string(), &contents)?);
    }
    let origin = hc.path.display().to_string();
    hf::sample(hc.set, &origin, rows, hc.output_len, opts, tokenizer, rng)
}

/// The files of an hf dataset: `path` itself, or the JSON/JSONL files under
/// it (and `--hf-subset`'s subfolder) that hold the split.
fn hf_paths(hc: &HfConfig) -> anyhow::Result<Vec<PathBuf>> {
    let root = match &hc.subset {
        Some(sub) if hc.path.is_dir() => hc.path.join(sub),
        Some(sub) => {
            return Err(anyhow!(
                "--hf-subset {sub} names a subfolder of --dataset-path, but '{}' is a file; drop --hf-subset",
                hc.path.display()
            ))
        }
        None => hc.path.clone(),
    };
    let shown = root.display().to_string();
    if root.is_file() {
        if hf_files::is_columnar(&shown) {
            return Err(anyhow!("{}", hf_files::columnar_refusal(&shown)));
        }
        return Ok(vec![root]);
    }
    if !root.is_dir() {
        return Err(anyhow!(
            "--hf-subset: '{shown}' is not a folder of --dataset-path; check the subset name"
        ));
    }
    let mut names = Vec::new();
    list_files(&root, "", &mut names)?;
    let picked = hf_files::pick(&shown, &names, &hc.split)?;
    Ok(picked.iter().map(|n| root.join(n)).collect())
}

/// Every file under `dir` as a path relative to the root (`prefix`), hidden
/// entries (`.git`, `.cache`) skipped.
fn list_files(dir: &Path, prefix: &str, out: &mut Vec<String>) -> anyhow::Result<()> {
    let entries = std::fs::read_dir(dir)
        .map_err(|e| anyhow!("cannot list '{}': {e}; check --dataset-path", dir.display()))?;
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') {
            continue;
        }
        let rel = format!("{prefix}{name}");
        if entry.path().is_dir() {
            list_files(&entry.path(), &format!("{rel}/"), out)?;
        } else {
            out.push(rel);
        }
    }
    Ok(())
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

#[cfg(test)]
#[path = "dataset_tests.rs"]
mod tests;

//! Dataset arguments to a [`DatasetConfig`]: `--dataset-name` with its
//! options, and the rules that tie a dataset to a backend (random-rerank and
//! `--random-batch-size` are for pooling backends; a rerank request needs a
//! query and documents). Each message names the flag and the fix.

use crate::cli::run::{DatasetName, RunArgs};
use crate::client::openai::Api;
use crate::workload::dataset::{DatasetConfig, DatasetKind, HfConfig, TraceConfig};
use crate::workload::hf;
use crate::workload::prefix::PrefixParams;
use crate::workload::random::RandomParams;
use crate::workload::random_mm::MmParams;
use crate::workload::random_mm_flags as mm_flags;
use crate::workload::rerank::RerankParams;
use crate::workload::sonnet::SonnetParams;
use crate::workload::trace::TraceLabels;
use anyhow::{bail, Context, Result};
use std::path::PathBuf;

/// vLLM's name of `--dataset-name`'s value (for results and messages).
pub fn dataset_name(name: DatasetName) -> &'static str {
    match name {
        DatasetName::Random => "random",
        DatasetName::Sharegpt => "sharegpt",
        DatasetName::Custom => "custom",
        DatasetName::PrefixRepetition => "prefix_repetition",
        DatasetName::Burstgpt => "burstgpt",
        DatasetName::RandomRerank => "random-rerank",
        DatasetName::RandomMm => "random-mm",
        DatasetName::TimedTrace => "timed_trace",
        DatasetName::Sonnet => "sonnet",
        DatasetName::Hf => "hf",
    }
}

/// The validated dataset of a run speaking `api`.
pub fn dataset_config(a: &RunArgs, api: Api) -> Result<DatasetConfig> {
    pooling_rules(a, api)?;
    if a.dataset_name == DatasetName::RandomMm && api != Api::Chat {
        bail!(
            "--dataset-name random-mm sends images in chat messages: add --backend openai-chat \
             (endpoint /v1/chat/completions)"
        );
    }
    trace_speed(a)?;
    let kind = dataset_kind(a)?;
    if let DatasetKind::Random { input_len: 0, .. } = kind {
        bail!("--random-input-len must be at least 1");
    }
    Ok(DatasetConfig {
        kind,
        num_prompts: a.num_prompts,
        seed: a.seed,
        chat: api != Api::Completions,
        disable_shuffle: a.disable_shuffle,
        no_oversample: a.no_oversample,
        batch_size: if api.is_pooling() && a.dataset_name == DatasetName::Random {
            a.random_batch_size
        } else {
            1
        },
    })
}

/// `--dataset-name` with its own options.
fn dataset_kind(a: &RunArgs) -> Result<DatasetKind> {
    Ok(match a.dataset_name {
        DatasetName::Random => random_kind(a)?,
        DatasetName::Sharegpt => DatasetKind::ShareGpt {
            path: dataset_path(a, "sharegpt")?,
            output_len: a.output_len.or(a.sharegpt_output_len),
        },
        DatasetName::Custom => DatasetKind::Custom {
            path: dataset_path(a, "custom")?,
            output_len: a.output_len.map(i64::from).unwrap_or(a.custom_output_len),
        },
        DatasetName::PrefixRepetition => {
            synthetic(a, "prefix_repetition")?;
            DatasetKind::PrefixRepetition(PrefixParams {
                prefix_len: a.prefix_repetition_prefix_len,
                suffix_len: a.prefix_repetition_suffix_len,
                num_prefixes: a.prefix_repetition_num_prefixes,
                output_len: a.output_len.unwrap_or(a.prefix_repetition_output_len),
            })
        }
        DatasetName::Burstgpt => DatasetKind::BurstGpt {
            path: dataset_path(a, "burstgpt")?,
        },
        DatasetName::RandomRerank => rerank_kind(a)?,
        DatasetName::RandomMm => DatasetKind::RandomMm(mm_params(a)?),
        DatasetName::TimedTrace => DatasetKind::TimedTrace(trace_config(a)?),
        DatasetName::Sonnet => DatasetKind::Sonnet {
            path: dataset_path(a, "sonnet")?,
            params: SonnetParams {
                input_len: a.sonnet_input_len,
                output_len: a.sonnet_output_len,
                prefix_len: a.sonnet_prefix_len,
            },
        },
        DatasetName::Hf => DatasetKind::Hf(hf_config(a)?),
    })
}

/// `--dataset-name hf`: a local file or folder read by the rules of the id
/// `--hf-name` (or `--dataset-path`, vLLM's default). kneecap never
/// downloads, so an id given as the path alone says how to get the files.
fn hf_config(a: &RunArgs) -> Result<HfConfig> {
    let v = &a.vllm;
    let path = a
        .dataset_path
        .clone()
        .context("--dataset-name hf needs --dataset-path (a local JSON/JSONL file or folder) and --hf-name ID")?;
    let shown = path.display().to_string();
    let id = v.hf_name.clone().unwrap_or_else(|| shown.clone());
    if !path.exists() {
        if v.hf_name.is_none() && hf::lookup(&id).is_ok() {
            bail!(
                "--dataset-path {id}: kneecap never downloads; fetch it (huggingface-cli download {id} \
                 --repo-type dataset --local-dir DIR) and pass --dataset-path DIR --hf-name {id}"
            );
        }
        bail!("--dataset-path: '{shown}' does not exist");
    }
    if v.hf_name.is_none() {
        bail!(
            "--dataset-name hf with the local --dataset-path '{shown}' needs --hf-name ID, the set whose \
             rules read it (one of {})",
            hf::supported_list()
        );
    }
    let set = hf::lookup(&id)?.with_distances(v.blazedit_min_distance, v.blazedit_max_distance);
    if let hf::HfSet::Blazedit {
        min_distance,
        max_distance,
    } = set
    {
        if min_distance > max_distance {
            bail!(
                "--blazedit-min-distance {min_distance} is above --blazedit-max-distance {max_distance}: no row could pass"
            );
        }
    }
    let split = set.forced_split().map(str::to_owned);
    Ok(HfConfig {
        path,
        id,
        set,
        subset: v.hf_subset.clone(),
        split: split
            .or_else(|| v.hf_split.clone())
            .unwrap_or_else(|| "train".into()),
        output_len: a.output_len.or(v.hf_output_len),
    })
}

/// `--dataset-name random`: lengths, their spread and a shared prefix.
fn random_kind(a: &RunArgs) -> Result<DatasetKind> {
    let p = random_text(a, "random")?;
    Ok(DatasetKind::Random {
        input_len: p.input_len,
        output_len: p.output_len,
        range_ratio_input: p.range_ratio_input,
        range_ratio_output: p.range_ratio_output,
        prefix_len: p.prefix_len,
    })
}

/// The `--random-*` text flags of the synthetic dataset `name`.
fn random_text(a: &RunArgs, name: &str) -> Result<RandomParams> {
    synthetic(a, name)?;
    let (ri, ro) = parse_range_ratio(&a.random_range_ratio)?;
    Ok(RandomParams {
        input_len: a.input_len.unwrap_or(a.random_input_len),
        output_len: a.output_len.unwrap_or(a.random_output_len),
        range_ratio_input: ri,
        range_ratio_output: ro,
        prefix_len: a.random_prefix_len,
    })
}

/// `--dataset-name random-mm`: random's text flags and the four
/// `--random-mm-*` flags (vLLM's defaults where absent), checked now so a bad
/// bucket or limit stops the run before it starts.
fn mm_params(a: &RunArgs) -> Result<MmParams> {
    let text = random_text(a, "random-mm")?;
    if text.input_len == 0 {
        bail!("--random-input-len must be at least 1");
    }
    let v = &a.vllm;
    let params = MmParams {
        text,
        base_items: v
            .random_mm_base_items_per_request
            .as_deref()
            .map_or(Ok(1), mm_flags::parse_base_items)?,
        range_ratio: v
            .random_mm_num_mm_items_range_ratio
            .as_deref()
            .map_or(Ok(0.0), mm_flags::parse_range_ratio)?,
        limits: mm_flags::parse_limits(
            v.random_mm_limit_mm_per_prompt
                .as_deref()
                .unwrap_or(mm_flags::DEFAULT_LIMITS),
        )?,
        buckets: mm_flags::parse_buckets(
            v.random_mm_bucket_config
                .as_deref()
                .unwrap_or(mm_flags::DEFAULT_BUCKETS),
        )?,
    };
    let live = params.live_buckets()?;
    params.item_range(&live)?;
    Ok(params)
}

/// `--dataset-name random-rerank`: a query and documents per request.
fn rerank_kind(a: &RunArgs) -> Result<DatasetKind> {
    synthetic(a, "random-rerank")?;
    let (ri, _) = parse_range_ratio(&a.random_range_ratio)?;
    Ok(DatasetKind::RandomRerank(RerankParams {
        input_len: a.input_len.unwrap_or(a.random_input_len),
        range_ratio: ri,
        batch_size: a.random_batch_size,
        reranker: !a.no_reranker,
    }))
}

/// `--dataset-name timed_trace`: the file and its column labels.
fn trace_config(a: &RunArgs) -> Result<TraceConfig> {
    Ok(TraceConfig {
        path: dataset_path(a, "timed_trace")?,
        chunk_size: a.trace.timed_trace_chunk_hash_size,
        sec_multiplier: a.trace.timed_trace_sec_multiplier,
        labels: TraceLabels {
            timestamp: a.trace.timed_trace_label_timestamp.clone(),
            input_length: a.trace.timed_trace_label_input_length.clone(),
            output_length: a.trace.timed_trace_label_output_length.clone(),
            hash_ids: a.trace.timed_trace_label_hash_ids.clone(),
        },
    })
}

/// `--dataset-path`, which dataset `name` needs and which must exist.
fn dataset_path(a: &RunArgs, name: &str) -> Result<PathBuf> {
    let p = a
        .dataset_path
        .clone()
        .with_context(|| format!("--dataset-name {name} needs --dataset-path FILE"))?;
    if !p.exists() {
        bail!("--dataset-path: '{}' does not exist", p.display());
    }
    Ok(p)
}

/// Refuses `--dataset-path` for the synthetic dataset `name`.
fn synthetic(a: &RunArgs, name: &str) -> Result<()> {
    if a.dataset_path.is_some() {
        bail!("--dataset-path cannot be used with --dataset-name {name} (it is synthetic)");
    }
    Ok(())
}

/// `Some(speed)` when requests go out at their trace timestamps (timed_trace,
/// unless `--no-self-timed`), divided by `--trace-speed`; `None` when the
/// arrival flags set the schedule. vLLM's rule: `--self-timed` and
/// `--no-self-timed` belong to timed_trace alone.
pub fn trace_speed(a: &RunArgs) -> Result<Option<f64>> {
    let t = &a.trace;
    let trace = a.dataset_name == DatasetName::TimedTrace;
    if !trace && (t.self_timed || t.no_self_timed || t.trace_speed.is_some()) {
        let flag = match (t.self_timed, t.no_self_timed) {
            (true, _) => "--self-timed",
            (_, true) => "--no-self-timed",
            _ => "--trace-speed",
        };
        bail!("{flag} is only for --dataset-name timed_trace (a trace with timestamps); drop it or replay a trace");
    }
    let speed = t.trace_speed.unwrap_or(1.0);
    if !(speed.is_finite() && speed > 0.0) {
        bail!("--trace-speed must be a positive number (2 replays the trace twice as fast), not {speed}");
    }
    if trace && t.no_self_timed {
        if t.trace_speed.is_some() {
            bail!("--trace-speed needs the trace's timestamps: drop --no-self-timed");
        }
        return Ok(None);
    }
    Ok(trace.then_some(speed))
}

/// Which datasets a pooling backend can take, and the other way round.
fn pooling_rules(a: &RunArgs, api: Api) -> Result<()> {
    if a.random_batch_size == 0 {
        bail!("--random-batch-size must be at least 1");
    }
    let rerank_dataset = a.dataset_name == DatasetName::RandomRerank;
    if rerank_dataset && !api.is_pooling() {
        bail!(
            "--dataset-name random-rerank makes a query and documents per request, for a pooling \
             backend: add --backend vllm-rerank (or openai-embeddings / vllm-pooling)"
        );
    }
    let batched_random = a.dataset_name == DatasetName::Random && a.random_batch_size >= 2;
    if api == Api::Rerank && !rerank_dataset && !batched_random {
        bail!(
            "--backend vllm-rerank sends a query and documents: use --dataset-name random-rerank \
             (or random with --random-batch-size 2 or more: the first prompt is the query)"
        );
    }
    Ok(())
}

/// Notes for dataset flags given where they do nothing (the run goes on).
pub fn dataset_notes(a: &RunArgs, api: Api) -> Vec<String> {
    let mut notes = Vec::new();
    if a.random_batch_size > 1
        && !(api.is_pooling()
            && matches!(
                a.dataset_name,
                DatasetName::Random | DatasetName::RandomRerank
            ))
    {
        notes.push(format!(
            "--random-batch-size {} batches the inputs of pooling backends (random, random-rerank); \
             ignored here",
            a.random_batch_size
        ));
    }
    if a.no_reranker && a.dataset_name != DatasetName::RandomRerank {
        notes.push("--no-reranker belongs to --dataset-name random-rerank; ignored".into());
    }
    let v = &a.vllm;
    let mm = [
        (
            "--random-mm-base-items-per-request",
            &v.random_mm_base_items_per_request,
        ),
        (
            "--random-mm-num-mm-items-range-ratio",
            &v.random_mm_num_mm_items_range_ratio,
        ),
        (
            "--random-mm-limit-mm-per-prompt",
            &v.random_mm_limit_mm_per_prompt,
        ),
        ("--random-mm-bucket-config", &v.random_mm_bucket_config),
    ];
    if a.dataset_name != DatasetName::RandomMm {
        for (flag, _) in mm.iter().filter(|(_, given)| given.is_some()) {
            notes.push(format!(
                "{flag} belongs to --dataset-name random-mm; ignored"
            ));
        }
    }
    let hf_given = [
        ("--hf-name", v.hf_name.is_some()),
        ("--hf-subset", v.hf_subset.is_some()),
        ("--hf-split", v.hf_split.is_some()),
        ("--hf-output-len", v.hf_output_len.is_some()),
    ];
    if a.dataset_name != DatasetName::Hf {
        for (flag, _) in hf_given.iter().filter(|(_, given)| *given) {
            notes.push(format!("{flag} belongs to --dataset-name hf; ignored"));
        }
    }
    notes.extend(blazedit_notes(a));
    notes
}

/// A `--blazedit-*` flag given without a Blazedit set to apply to.
fn blazedit_notes(a: &RunArgs) -> Vec<String> {
    let v = &a.vllm;
    let blazedit = a.dataset_name == DatasetName::Hf
        && v.hf_name
            .as_deref()
            .and_then(|id| hf::lookup(id).ok())
            .is_some_and(|set| matches!(set, hf::HfSet::Blazedit { .. }));
    [
        ("--blazedit-min-distance", v.blazedit_min_distance),
        ("--blazedit-max-distance", v.blazedit_max_distance),
    ]
    .into_iter()
    .filter(|(_, given)| given.is_some() && !blazedit)
    .map(|(flag, _)| {
        format!(
            "{flag} belongs to --dataset-name hf with --hf-name vdaita/edit_5k_char or vdaita/edit_10k_char; ignored"
        )
    })
    .collect()
}

/// `--random-range-ratio`: a float, or `{"input": r1, "output": r2}`; each in [0, 1).
pub fn parse_range_ratio(s: &str) -> Result<(f64, f64)> {
    let check = |v: f64| -> Result<f64> {
        if !(0.0..1.0).contains(&v) {
            bail!("--random-range-ratio: {v} must be in [0, 1)");
        }
        Ok(v)
    };
    if let Ok(v) = s.trim().parse::<f64>() {
        let v = check(v)?;
        return Ok((v, v));
    }
    let obj: serde_json::Value = serde_json::from_str(s).map_err(|_| {
        anyhow::anyhow!("--random-range-ratio: '{s}' is neither a number nor a JSON object like {{\"input\": 0.1, \"output\": 0.2}}")
    })?;
    let get = |k: &str| obj.get(k).and_then(|v| v.as_f64()).unwrap_or(0.0);
    Ok((check(get("input"))?, check(get("output"))?))
}

#[cfg(test)]
#[path = "dataset_tests.rs"]
mod tests;

//! Run arguments to [`RunConfig`]: the one conversion of `kneecap run`'s
//! syntax into domain types, and every cross-field rule, each with a message
//! that names the flag and the fix. No I/O except checking that named files exist.

use crate::cli::run::{ArrivalKind, Backend as BackendArg, DatasetName, RampUp, RunArgs};
use crate::client::net::proxy::ProxyEnv;
use crate::client::net::tls::TlsOptions;
use crate::client::openai::{Api, BodyOptions, LoraPlan};
use crate::config::{Backend, LoadConfig, OutputConfig, RunConfig, Target};
use crate::metrics::stats::{GoodputSlo, StatsOptions};
use crate::metrics::MetricName;
use crate::schedule::{Arrival, RampStrategy};
use crate::shard::Shard;
use crate::workload::dataset::{DatasetConfig, DatasetKind};
use crate::workload::prefix::PrefixParams;
use anyhow::{bail, Context, Result};
use std::path::PathBuf;
use std::time::Duration;

/// Where a run goes when the command line names no server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DefaultTarget {
    /// `kneecap run` / `kneecap sweep`: start the built-in simulator (announced on stderr).
    Simulator,
    /// `kneecap bench serve`: vLLM's own default, `http://127.0.0.1:8000`.
    VllmLocalhost,
}

/// Validate `kneecap run`'s arguments into a [`RunConfig`] (no target: the simulator).
pub fn run_config(a: &RunArgs) -> Result<RunConfig> {
    run_config_for(a, DefaultTarget::Simulator)
}

/// Validate run arguments into a [`RunConfig`], with `default` deciding the
/// target when no --base-url, --host or --port is given.
pub fn run_config_for(a: &RunArgs, default: DefaultTarget) -> Result<RunConfig> {
    let (backend, api, endpoint) = resolve_api(a)?;
    let load = load_config(a)?;
    let dataset = dataset_config(a, api)?;
    let dataset_name = match a.dataset_name {
        DatasetName::Random => "random",
        DatasetName::Sharegpt => "sharegpt",
        DatasetName::Custom => "custom",
        DatasetName::PrefixRepetition => "prefix_repetition",
    };
    // vLLM forces ignore_eos for the random dataset on OpenAI-compatible backends.
    let ignore_eos = a.ignore_eos || a.dataset_name == DatasetName::Random;
    if let Some(t) = &a.tokenizer {
        if !t.exists() {
            bail!("--tokenizer: '{}' does not exist (give a tokenizer.json file or a directory holding one)", t.display());
        }
    }
    Ok(RunConfig {
        target: resolve_target(a, default)?,
        endpoint,
        backend,
        api,
        headers: parse_pairs(&a.headers, '=', "--header")?,
        api_key: a.api_key.clone().filter(|k| !k.is_empty()),
        request_timeout: nonzero(a.request_timeout, "--request-timeout")?,
        connect_timeout: nonzero(a.connect_timeout, "--connect-timeout")?,
        tls: TlsOptions {
            ca_cert: a.ca_cert.clone(),
            insecure: a.insecure,
        },
        proxies: ProxyEnv::from_lookup(|k| std::env::var(k).ok()),
        kernel_stamps: a.rx_timestamps == crate::cli::run::RxTimestamps::Kernel,
        model: a.model.clone(),
        served_model_name: a.served_model_name.clone(),
        tokenizer: a.tokenizer.clone(),
        dataset,
        dataset_name,
        load,
        body: body_options(a, ignore_eos)?,
        stats: stats_options(a)?,
        output: output_config(a)?,
        request_id_prefix: a.request_id_prefix.clone(),
        shard: shard(a)?,
        start_at: a
            .start_at
            .as_deref()
            .map(str::parse)
            .transpose()
            .map_err(anyhow::Error::msg)?,
        profile: a.vllm.profile,
        ignored_flags: a
            .vllm
            .without_meaning()
            .into_iter()
            .map(|(flag, why)| format!("{flag} has no meaning for kneecap ({why}); ignored"))
            .collect(),
    })
}

/// `--shard i/N`; a closed loop must leave every shard at least one stream.
fn shard(a: &RunArgs) -> Result<Option<Shard>> {
    let Some(text) = &a.shard else {
        return Ok(None);
    };
    let shard: Shard = text.parse().map_err(anyhow::Error::msg)?;
    if let Some(c) = a.max_concurrency {
        shard
            .concurrency(c, "--max-concurrency")
            .map_err(anyhow::Error::msg)?;
    }
    Ok(Some(shard))
}

fn nonzero(d: Duration, flag: &str) -> Result<Duration> {
    if d.is_zero() {
        bail!("{flag} must be greater than 0");
    }
    Ok(d)
}

fn resolve_target(a: &RunArgs, default: DefaultTarget) -> Result<Target> {
    if let Some(url) = &a.base_url {
        let url = url.trim_end_matches('/').to_string();
        if !url.starts_with("http://") && !url.starts_with("https://") {
            bail!(
                "--base-url: '{url}' must start with http:// or https:// (for example http://127.0.0.1:8000)"
            );
        }
        return Ok(Target::Url(url));
    }
    if a.host.is_none() && a.port.is_none() && default == DefaultTarget::Simulator {
        return Ok(Target::Sim {
            preset: a.sim_preset.clone(),
        });
    }
    let host = a.host.clone().unwrap_or_else(|| "127.0.0.1".into());
    let port = a.port.unwrap_or(8000);
    let host = if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]")
    } else {
        host
    };
    Ok(Target::Url(format!("http://{host}:{port}")))
}

/// Backend and endpoint must agree; when only one is given, the other follows.
fn resolve_api(a: &RunArgs) -> Result<(Backend, Api, String)> {
    let suffix = |s: &str| a.endpoint.as_deref().is_some_and(|e| e.ends_with(s));
    let backend = match a.backend {
        Some(BackendArg::Vllm) => Backend::Vllm,
        Some(BackendArg::Openai) => Backend::Openai,
        Some(BackendArg::OpenaiChat) => Backend::OpenaiChat,
        Some(BackendArg::OpenaiResponses) => Backend::OpenaiResponses,
        None if suffix("chat/completions") => Backend::OpenaiChat,
        None if suffix("responses") => Backend::OpenaiResponses,
        None => Backend::Openai,
    };
    let api = backend.api();
    let endpoint = match &a.endpoint {
        Some(e) => e.clone(),
        None if api == Api::Chat => "/v1/chat/completions".into(),
        None if api == Api::Responses => "/v1/responses".into(),
        None => "/v1/completions".into(),
    };
    if !endpoint.starts_with('/') {
        bail!("--endpoint: '{endpoint}' must start with '/' (for example /v1/completions)");
    }
    match api {
        Api::Chat if !endpoint.ends_with("chat/completions") => bail!(
            "--endpoint {endpoint} does not match --backend openai-chat (use /v1/chat/completions)"
        ),
        Api::Completions if !endpoint.ends_with("completions") || endpoint.ends_with("chat/completions") => bail!(
            "--endpoint {endpoint} does not match the completions backend (use /v1/completions, or --backend openai-chat for chat)"
        ),
        Api::Responses if !endpoint.ends_with("responses") => bail!(
            "--endpoint {endpoint} does not match --backend openai-responses (use /v1/responses)"
        ),
        _ => {}
    }
    Ok((backend, api, endpoint))
}

fn load_config(a: &RunArgs) -> Result<LoadConfig> {
    if a.max_concurrency == Some(0) {
        bail!("--max-concurrency must be greater than 0");
    }
    if a.duration.is_some_and(|d| d.is_zero()) {
        bail!("--duration must be greater than 0");
    }
    if a.num_prompts == 0 && a.duration.is_none() && a.dataset_name != DatasetName::Custom {
        bail!("--num-prompts must be greater than 0 (or give --duration)");
    }
    let ramp_up = ramp_up(a)?;
    let burstiness = match a.arrival {
        ArrivalKind::Gamma => a.burstiness,
        ArrivalKind::Poisson => 1.0,
        ArrivalKind::Constant => f64::INFINITY,
    };
    let arrival = match (ramp_up, a.request_rate.is_infinite()) {
        (Some((strategy, start, end)), _) => Arrival::Ramp {
            strategy,
            start: start as f64,
            end: end as f64,
            burstiness,
        },
        (None, true) => Arrival::Infinite,
        (None, false) if burstiness.is_infinite() => Arrival::Constant {
            rate: a.request_rate,
        },
        (None, false) => Arrival::Gamma {
            rate: a.request_rate,
            burstiness,
        },
    };
    crate::schedule::validate(&arrival).map_err(anyhow::Error::msg)?;
    if a.duration.is_some() && matches!(arrival, Arrival::Infinite) && a.max_concurrency.is_none() {
        bail!("--duration with --request-rate inf needs --max-concurrency (otherwise it would send without bound)");
    }
    if a.duration.is_some() && ramp_up.is_some() {
        bail!("--duration cannot be combined with --ramp-up-strategy (ramp-up is defined per request index)");
    }
    Ok(LoadConfig {
        arrival,
        request_rate: a.request_rate,
        burstiness,
        max_concurrency: a.max_concurrency,
        num_prompts: a.num_prompts,
        duration: a.duration,
        num_warmups: a.num_warmups,
        seed: a.seed,
        ramp_up,
        ready_check_timeout: Duration::from_secs(a.ready_check_timeout_sec),
    })
}

fn ramp_up(a: &RunArgs) -> Result<Option<(RampStrategy, u32, u32)>> {
    let Some(strategy) = a.ramp_up_strategy else {
        if a.ramp_up_start_rps.is_some() || a.ramp_up_end_rps.is_some() {
            bail!(
                "--ramp-up-start-rps/--ramp-up-end-rps need --ramp-up-strategy linear|exponential"
            );
        }
        return Ok(None);
    };
    if a.request_rate.is_finite() {
        bail!("--ramp-up-strategy requires --request-rate to stay at inf (the ramp sets the rate)");
    }
    let (Some(start), Some(end)) = (a.ramp_up_start_rps, a.ramp_up_end_rps) else {
        bail!("--ramp-up-strategy needs both --ramp-up-start-rps and --ramp-up-end-rps");
    };
    if start > end {
        bail!("--ramp-up-start-rps ({start}) must not exceed --ramp-up-end-rps ({end})");
    }
    if start == 0 {
        bail!("--ramp-up-start-rps must be greater than 0 (a rate of 0 never sends the first request)");
    }
    let strategy = match strategy {
        RampUp::Linear => RampStrategy::Linear,
        RampUp::Exponential => RampStrategy::Exponential,
    };
    Ok(Some((strategy, start, end)))
}

fn dataset_config(a: &RunArgs, api: Api) -> Result<DatasetConfig> {
    let need_path = |name: &str| -> Result<PathBuf> {
        let p = a
            .dataset_path
            .clone()
            .with_context(|| format!("--dataset-name {name} needs --dataset-path FILE"))?;
        if !p.exists() {
            bail!("--dataset-path: '{}' does not exist", p.display());
        }
        Ok(p)
    };
    let kind = match a.dataset_name {
        DatasetName::Random => {
            if a.dataset_path.is_some() {
                bail!("--dataset-path cannot be used with --dataset-name random (it is synthetic)");
            }
            let (ri, ro) = parse_range_ratio(&a.random_range_ratio)?;
            DatasetKind::Random {
                input_len: a.input_len.unwrap_or(a.random_input_len),
                output_len: a.output_len.unwrap_or(a.random_output_len),
                range_ratio_input: ri,
                range_ratio_output: ro,
                prefix_len: a.random_prefix_len,
            }
        }
        DatasetName::Sharegpt => DatasetKind::ShareGpt {
            path: need_path("sharegpt")?,
            output_len: a.output_len.or(a.sharegpt_output_len),
        },
        DatasetName::Custom => DatasetKind::Custom {
            path: need_path("custom")?,
            output_len: a.output_len.map(i64::from).unwrap_or(a.custom_output_len),
        },
        DatasetName::PrefixRepetition => {
            if a.dataset_path.is_some() {
                bail!("--dataset-path cannot be used with --dataset-name prefix_repetition (it is synthetic)");
            }
            DatasetKind::PrefixRepetition(PrefixParams {
                prefix_len: a.prefix_repetition_prefix_len,
                suffix_len: a.prefix_repetition_suffix_len,
                num_prefixes: a.prefix_repetition_num_prefixes,
                output_len: a.output_len.unwrap_or(a.prefix_repetition_output_len),
            })
        }
    };
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
    })
}

/// `--random-range-ratio`: a float, or `{"input": r1, "output": r2}`; each in [0, 1).
fn parse_range_ratio(s: &str) -> Result<(f64, f64)> {
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

fn body_options(a: &RunArgs, ignore_eos: bool) -> Result<BodyOptions> {
    use serde_json::Value;
    let mut sampling: Vec<(String, Value)> = Vec::new();
    let mut put = |k: &str, v: Option<Value>| {
        if let Some(v) = v {
            sampling.push((k.to_string(), v));
        }
    };
    put("temperature", a.temperature.map(Value::from));
    put("top_p", a.top_p.map(Value::from));
    put("top_k", a.top_k.map(Value::from));
    put("min_p", a.min_p.map(Value::from));
    put("frequency_penalty", a.frequency_penalty.map(Value::from));
    put("presence_penalty", a.presence_penalty.map(Value::from));
    put("repetition_penalty", a.repetition_penalty.map(Value::from));
    let extra_body = match &a.extra_body {
        None => None,
        Some(s) => match serde_json::from_str::<Value>(s) {
            Ok(Value::Object(m)) => Some(m),
            _ => bail!(
                "--extra-body: '{s}' is not a JSON object (example: '{{\"min_tokens\": 16}}')"
            ),
        },
    };
    if a.vllm.lora_assignment.is_some() && a.vllm.lora_modules.is_empty() {
        bail!("--lora-assignment needs --lora-modules NAME [NAME ...]");
    }
    let lora = (!a.vllm.lora_modules.is_empty()).then(|| LoraPlan {
        names: a.vllm.lora_modules.clone(),
        round_robin: a.vllm.lora_assignment.as_deref() == Some("round-robin"),
        seed: a.seed,
    });
    Ok(BodyOptions {
        model: String::new(),
        ignore_eos,
        sampling,
        logprobs: a.logprobs,
        extra_body,
        lora,
    })
}

fn stats_options(a: &RunArgs) -> Result<StatsOptions> {
    let mut percentiles = Vec::new();
    for p in a
        .metric_percentiles
        .split(',')
        .filter(|p| !p.trim().is_empty())
    {
        let v: f64 = p.trim().parse().map_err(|_| {
            anyhow::anyhow!("--metric-percentiles: '{p}' is not a number (example: 50,90,99)")
        })?;
        if !(0.0..=100.0).contains(&v) {
            bail!("--metric-percentiles: {v} must be between 0 and 100");
        }
        percentiles.push(v);
    }
    Ok(StatsOptions {
        percentiles,
        goodput: parse_goodput(&a.goodput)?,
    })
}

/// vLLM's `--goodput ttft:500 tpot:50 e2el:2000` (milliseconds, ≥ 0).
pub fn parse_goodput(items: &[String]) -> Result<Option<GoodputSlo>> {
    if items.is_empty() {
        return Ok(None);
    }
    let mut slo = GoodputSlo::default();
    for item in items.iter().flat_map(|s| s.split_whitespace()) {
        let (k, v) = item
            .split_once(':')
            .with_context(|| format!("--goodput: '{item}' should be KEY:MS, e.g. ttft:500"))?;
        let ms: f64 = v
            .parse()
            .ok()
            .filter(|x: &f64| x.is_finite() && *x >= 0.0)
            .with_context(|| {
                format!("--goodput: '{v}' in '{item}' must be a number of milliseconds ≥ 0")
            })?;
        match k {
            "ttft" => slo.ttft_ms = Some(ms),
            "tpot" => slo.tpot_ms = Some(ms),
            "e2el" => slo.e2el_ms = Some(ms),
            other => bail!("--goodput: unknown key '{other}' (use ttft, tpot or e2el)"),
        }
    }
    Ok(Some(slo))
}

fn output_config(a: &RunArgs) -> Result<OutputConfig> {
    let percentile_metrics = match &a.percentile_metrics {
        None => vec![MetricName::Ttft, MetricName::Tpot, MetricName::Itl],
        Some(s) => s
            .split(',')
            .filter(|m| !m.trim().is_empty())
            .map(|m| MetricName::parse(m).map_err(anyhow::Error::from))
            .collect::<Result<_>>()?,
    };
    Ok(OutputConfig {
        percentile_metrics,
        save_result: a.save_result || a.append_result,
        save_detailed: a.save_detailed,
        append_result: a.append_result,
        result_dir: a.result_dir.clone(),
        result_filename: a.result_filename.clone(),
        label: a.label.clone(),
        metadata: parse_pairs(&a.metadata, '=', "--metadata")?,
        progress: !a.disable_tqdm,
    })
}

/// Split `KEY=VALUE` items (each may hold several space-separated pairs).
fn parse_pairs(items: &[String], sep: char, flag: &str) -> Result<Vec<(String, String)>> {
    items
        .iter()
        .map(|item| {
            let (k, v) = item
                .split_once(sep)
                .with_context(|| format!("{flag}: '{item}' should be KEY{sep}VALUE"))?;
            if k.trim().is_empty() {
                bail!("{flag}: '{item}' has an empty key");
            }
            Ok((k.trim().to_string(), v.to_string()))
        })
        .collect()
}

#[cfg(test)]
#[path = "run_tests.rs"]
mod tests;

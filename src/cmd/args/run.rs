//! Run arguments to [`RunConfig`]: the one conversion of `kneecap run`'s
//! syntax into domain types, and every cross-field rule, each with a message
//! that names the flag and the fix. No I/O except checking that named files exist.

use super::dataset::{dataset_config, dataset_name, dataset_notes};
use crate::cli::run::{ArrivalKind, Backend as BackendArg, DatasetName, RampUp, RunArgs};
use crate::client::net::proxy::ProxyEnv;
use crate::client::net::tls::TlsOptions;
use crate::client::openai::{Api, BodyOptions, LoraPlan};
use crate::config::{Backend, LoadConfig, OutputConfig, RunConfig, Target};
use crate::metrics::stats::{GoodputSlo, StatsOptions};
use crate::metrics::MetricName;
use crate::schedule::{Arrival, RampStrategy};
use crate::shard::Shard;
#[cfg(test)]
use crate::workload::dataset::DatasetKind;
use anyhow::{bail, Context, Result};
#[cfg(test)]
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
    let mut load = load_config(a)?;
    let sessions = super::session::session_config(a, api, &mut load)?;
    let dataset = dataset_config(a, api)?;
    load.requests_from_dataset = dataset.groups_prompts();
    load.trace_speed = super::dataset::trace_speed(a)?;
    let dataset_name = dataset_name(a.dataset_name);
    // vLLM forces ignore_eos for the random dataset on OpenAI-compatible
    // (generation) backends only, and for timed_trace (outputs run to the
    // trace's lengths).
    let ignore_eos = a.ignore_eos
        || (matches!(a.dataset_name, DatasetName::Random | DatasetName::RandomMm)
            && !api.is_pooling())
        || a.dataset_name == DatasetName::TimedTrace;
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
        output: output_config(a, api)?,
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
            .chain(dataset_notes(a, api))
            .chain(pooling_notes(a, api))
            .collect(),
        sessions,
        gpu: super::gpu::gpu_config(&a.gpu)?,
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
        Some(BackendArg::OpenaiEmbeddings) => Backend::OpenaiEmbeddings,
        Some(BackendArg::VllmRerank) => Backend::VllmRerank,
        Some(BackendArg::VllmPooling) => Backend::VllmPooling,
        None if suffix("chat/completions") => Backend::OpenaiChat,
        None if suffix("responses") => Backend::OpenaiResponses,
        None if suffix("embeddings") => Backend::OpenaiEmbeddings,
        None if suffix("rerank") => Backend::VllmRerank,
        None if suffix("pooling") => Backend::VllmPooling,
        None => Backend::Openai,
    };
    let api = backend.api();
    let endpoint = match (&a.endpoint, api) {
        (Some(e), _) => e.clone(),
        (None, Api::Chat) => "/v1/chat/completions".into(),
        (None, Api::Responses) => "/v1/responses".into(),
        (None, Api::Embeddings) => "/v1/embeddings".into(),
        (None, Api::Rerank) => "/v1/rerank".into(),
        (None, Api::Pooling) => "/pooling".into(),
        (None, Api::Completions) => "/v1/completions".into(),
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
        Api::Embeddings if !endpoint.ends_with("embeddings") => bail!(
            "--endpoint {endpoint} does not match --backend openai-embeddings (use /v1/embeddings)"
        ),
        Api::Rerank if !endpoint.ends_with("rerank") => bail!(
            "--endpoint {endpoint} does not match --backend vllm-rerank (use /v1/rerank)"
        ),
        Api::Pooling if !endpoint.ends_with("pooling") => bail!(
            "--endpoint {endpoint} does not match --backend vllm-pooling (use /pooling)"
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
    let self_timed = a.dataset_name == DatasetName::TimedTrace && !a.trace.no_self_timed;
    if a.duration.is_some()
        && matches!(arrival, Arrival::Infinite)
        && a.max_concurrency.or(a.multi_turn_concurrency).is_none()
        && !self_timed
    {
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
        requests_from_dataset: false,
        trace_speed: None,
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

/// Flags vLLM ignores for pooling backends (sampling, `--logprobs`; on
/// rerank also `--extra-body` and `--ignore-eos`): one note each.
fn pooling_notes(a: &RunArgs, api: Api) -> Vec<String> {
    if !api.is_pooling() {
        return Vec::new();
    }
    let sampling = [
        ("--temperature", a.temperature.is_some()),
        ("--top-p", a.top_p.is_some()),
        ("--top-k", a.top_k.is_some()),
        ("--min-p", a.min_p.is_some()),
        ("--frequency-penalty", a.frequency_penalty.is_some()),
        ("--presence-penalty", a.presence_penalty.is_some()),
        ("--repetition-penalty", a.repetition_penalty.is_some()),
        ("--logprobs", a.logprobs.is_some()),
    ];
    let rerank = [
        ("--extra-body", a.extra_body.is_some()),
        ("--ignore-eos", a.ignore_eos),
    ];
    let rerank = rerank.iter().filter(|_| api == Api::Rerank);
    sampling
        .iter()
        .chain(rerank)
        .filter(|(_, given)| *given)
        .map(|(flag, _)| {
            format!("{flag} is not sent by a pooling backend (as in vLLM, whose request has no such key); ignored")
        })
        .collect()
}

fn output_config(a: &RunArgs, api: Api) -> Result<OutputConfig> {
    let percentile_metrics = match &a.percentile_metrics {
        // vLLM's defaults: "ttft,tpot,itl" for generation, "e2el" for pooling.
        None if api.is_pooling() => vec![MetricName::E2el],
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
        live: super::live::live_config(a)?,
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

//! Merging the result JSONs of a sharded `kneecap run` into one [`RunResult`]
//! — the same type a single process produces, so the merged JSON and console
//! summary come from the same renderers. PURE: works on parsed JSON values.

use super::{check_set, combine, ShardFile};
use crate::metrics::stats::{Distribution, Summary};
use crate::metrics::MetricName;
use crate::metrics::KNEECAP_PERCENTILES;
use crate::report::shard::{ShardIdentity, ShardPart};
use crate::report::{GeneratorVerdict, KneecapInfo, RunResult};
use serde_json::{json, Value};

/// One shard's run result, parsed.
#[derive(Debug, Clone)]
pub struct RunShard {
    pub file: ShardFile,
    pub part: ShardPart,
    /// The whole result JSON (header fields are copied from it).
    pub json: Value,
}

/// Parse a shard's run result; the error names the file.
pub fn read(name: &str, v: Value) -> Result<RunShard, String> {
    let block = v.pointer("/kneecap/shard").ok_or_else(|| {
        format!("{name}: no `kneecap.shard` block — it was not written by `kneecap run --shard i/N --save-result`")
    })?;
    let id = ShardIdentity::from_json(block).map_err(|e| format!("{name}: {e}"))?;
    let part = ShardPart::from_json(block).map_err(|e| format!("{name}: {e}"))?;
    Ok(RunShard {
        file: ShardFile {
            name: name.to_string(),
            id,
        },
        part,
        json: v,
    })
}

/// Check the set and merge it into one result.
pub fn merge(mut shards: Vec<RunShard>) -> Result<RunResult, String> {
    let files: Vec<ShardFile> = shards.iter().map(|s| s.file.clone()).collect();
    check_set(&files)?;
    shards.sort_by_key(|s| s.file.id.shard.index);
    let total = combine(shards.iter().map(|s| &s.part))?;
    let first = &shards[0].json;
    let block = &first["kneecap"]["shard"];
    let percentiles: Vec<f64> = block["percentiles"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_f64).collect())
        .unwrap_or_else(|| vec![99.0]);
    let metrics: Vec<MetricName> = block["percentile_metrics"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|m| m.as_str().and_then(|m| MetricName::parse(m).ok()))
                .collect()
        })
        .unwrap_or_default();
    let mut result = header(first, &shards, &total);
    result.summary = summary(&total, &percentiles);
    result.percentiles = percentiles;
    result.percentile_metrics = metrics;
    result.kneecap.merged = Some(merged_block(&shards, &total));
    Ok(result)
}

/// The merged [`Summary`]: counters over the common window, distributions
/// from the merged histograms.
pub fn summary(p: &ShardPart, percentiles: &[f64]) -> Summary {
    let duration_s = (p.window_end_unix_s - p.window_start_unix_s).max(0.0);
    let per_s = |x: f64| {
        if duration_s > 0.0 {
            x / duration_s
        } else {
            0.0
        }
    };
    let c = &p.counters;
    let h = &p.hists;
    let own = |x: &crate::metrics::hist::LatencyHist| x.distribution(&KNEECAP_PERCENTILES);
    let dist =
        |x: &crate::metrics::hist::LatencyHist| -> Distribution { x.distribution(percentiles) };
    Summary {
        duration_s,
        completed: c.completed as usize,
        failed: c.failed as usize,
        total_input_tokens: c.total_input_tokens,
        total_output_tokens: c.total_output_tokens,
        request_throughput: per_s(c.completed as f64),
        request_goodput: c.good.map(|g| per_s(g as f64)),
        output_throughput: per_s(c.total_output_tokens as f64),
        total_token_throughput: per_s((c.total_input_tokens + c.total_output_tokens) as f64),
        max_output_tokens_per_s: c.max_output_tokens_per_s,
        max_concurrent_requests: c.max_concurrent_requests as usize,
        ttft: dist(&h.ttft),
        tpot: dist(&h.tpot),
        itl: dist(&h.itl),
        e2el: dist(&h.e2el),
        client_queue_time: dist(&h.client_queue_time),
        e2el_including_client_queue: dist(&h.e2el_including_client_queue),
        lateness: own(&h.lateness),
        ttft_from_due: own(&h.ttft_from_due),
        e2el_from_due: own(&h.e2el_from_due),
        errors_by_kind: c.errors_by_kind.clone(),
    }
}

/// vLLM header fields and kneecap's block, from the first shard (they are
/// equal on every shard: the fingerprint says so) and the whole set.
fn header(first: &Value, shards: &[RunShard], total: &ShardPart) -> RunResult {
    let s = |k: &str| first[k].as_str().unwrap_or_default().to_string();
    let f = |k: &str| match &first[k] {
        Value::String(x) if x == "inf" => f64::INFINITY,
        v => v.as_f64().unwrap_or(f64::INFINITY),
    };
    let k = &first["kneecap"];
    let ks = |key: &str| k[key].as_str().unwrap_or_default().to_string();
    let started = chrono::DateTime::from_timestamp(
        total.window_start_unix_s.floor() as i64,
        (total.window_start_unix_s.fract() * 1e9) as u32,
    )
    .map(|t| t.with_timezone(&chrono::Local));
    let limited: Vec<String> = shards
        .iter()
        .filter(|s| s.part.generator_limited)
        .map(|s| format!("shard {}: the load generator fell behind", s.file.id.shard))
        .collect();
    RunResult {
        date: started
            .map(|t| t.format("%Y%m%d-%H%M%S").to_string())
            .unwrap_or_else(|| s("date")),
        backend: s("backend"),
        label: first["label"].as_str().map(str::to_string),
        model_id: s("model_id"),
        tokenizer_id: first["tokenizer_id"].as_str().map(str::to_string),
        num_prompts: first["num_prompts"].as_u64().unwrap_or(0) as usize,
        metadata: Vec::new(),
        request_rate: f("request_rate"),
        burstiness: f("burstiness"),
        max_concurrency: first["max_concurrency"].as_u64().map(|c| c as usize),
        ramp_up: None,
        summary: Summary::default(),
        percentile_metrics: Vec::new(),
        percentiles: Vec::new(),
        records: Vec::new(),
        kneecap: KneecapInfo {
            version: env!("CARGO_PKG_VERSION").into(),
            target: ks("target"),
            simulated: k["simulated"].as_bool().unwrap_or(false),
            sim_preset: k["sim_preset"].as_str().map(str::to_string),
            endpoint: ks("endpoint"),
            dataset: ks("dataset"),
            arrival: ks("arrival"),
            seed: k["seed"].as_u64().unwrap_or(0),
            duration_bound_s: k["duration_bound_s"].as_f64(),
            interrupted: total.interrupted,
            started_at: started.map(|t| t.to_rfc3339()).unwrap_or_default(),
            first_errors: shards
                .iter()
                .flat_map(|s| {
                    s.json["kneecap"]["first_errors"]
                        .as_array()
                        .cloned()
                        .unwrap_or_default()
                })
                .filter_map(|e| e.as_str().map(str::to_string))
                .take(10)
                .collect(),
            warmups_ok: None,
            generator: Some(GeneratorVerdict {
                health: crate::metrics::health::GeneratorHealth {
                    limited: total.generator_limited,
                    reasons: limited,
                    ..Default::default()
                },
                lateness_judged: f("request_rate").is_finite(),
                ..Default::default()
            }),
            shard: None,
            merged: None,
        },
    }
}

/// `kneecap.merged`: which shards, over which window, how well they started together.
fn merged_block(shards: &[RunShard], total: &ShardPart) -> Value {
    let id = &shards[0].file.id;
    json!({
        "shards": id.shard.count,
        "fingerprint": id.fingerprint,
        "seed": id.seed,
        "files": shards.iter().map(|s| s.file.name.clone()).collect::<Vec<_>>(),
        "start_at": id.start_at.map(|s| s.rfc3339()),
        "start_lateness_ms": shards.iter().map(|s| s.part.start_lateness_ms).collect::<Vec<_>>(),
        "window_start_unix_s": total.window_start_unix_s,
        "window_end_unix_s": total.window_end_unix_s,
        "planned": total.counters.planned,
        "notes": [
            "percentiles are read from the merged HdrHistograms (µs, 3 significant digits), never averaged across shards",
            "rates divide by the common window: earliest shard start to latest shard end",
            "max_concurrent_requests and max_output_tokens_per_s are sums of the shards' peaks (upper bounds)",
        ],
    })
}

//! Merging the result JSONs of a sharded `kneecap run` into one [`RunResult`]
//! — the same type a single process produces, assembled the same way
//! ([`RunResult::assemble`]), so the merged JSON and console summary come
//! from the same renderers. PURE: works on parsed JSON values.

use super::gpu;
use super::server::{self, Reading, ServerBlock};
use super::{check_set, ShardFile};
use crate::metrics::stats::{Distribution, Summary};
use crate::metrics::KNEECAP_PERCENTILES;
use crate::result::json::kneecap::MergedBlock;
use crate::result::json::RunJson;
use crate::result::shard::ShardPart;
use crate::result::{GeneratorVerdict, GpuStats, PrefixCacheStats, RunResult, SpecDecodeStats};
use crate::result::{RunHeader, RunOutcome};

/// How many failure messages the merged result keeps (over all shards).
const FIRST_ERRORS: usize = 10;

/// One shard's run result, parsed.
#[derive(Debug, Clone)]
pub struct RunShard {
    pub file: ShardFile,
    pub part: ShardPart,
    /// The shard's header (equal on every shard: the fingerprint says so).
    pub header: RunHeader,
    pub first_errors: Vec<String>,
    /// The server's counters over the shard's window (see [`server`]).
    pub prefix_cache: Option<PrefixCacheStats>,
    pub spec_decode: Option<SpecDecodeStats>,
    /// The GPUs at the shard's `--gpu-metrics-url` hosts (see [`gpu`]).
    pub gpu: Option<GpuStats>,
}

/// A shard's run result, read as the one run JSON type; the error names
/// the file.
pub fn read(name: &str, json: RunJson) -> Result<RunShard, String> {
    let header = json.header();
    let k = json.kneecap.unwrap_or_default();
    let shard = k.shard.ok_or_else(|| {
        format!("{name}: no `kneecap.shard` block — it was not written by `kneecap run --shard i/N --save-result`")
    })?;
    Ok(RunShard {
        file: ShardFile {
            name: name.to_string(),
            id: shard.run.id,
        },
        part: shard.run.part,
        header,
        first_errors: k.first_errors,
        prefix_cache: k.prefix_cache,
        spec_decode: k.spec_decode,
        gpu: k.gpu,
    })
}

/// Check the set and merge it into one result.
pub fn merge(mut shards: Vec<RunShard>) -> Result<RunResult, String> {
    let files: Vec<ShardFile> = shards.iter().map(|s| s.file.clone()).collect();
    check_set(&files)?;
    shards.sort_by_key(|s| s.file.id.shard.index);
    let total = ShardPart::sum(shards.iter().map(|s| &s.part))?;
    let header = shards[0].header.clone();
    let summary = summary(&total, &header.percentiles);
    let mut outcome = outcome(&shards, &total, header.request_rate);
    let blocks: Vec<Option<&GpuStats>> = shards.iter().map(|s| s.gpu.as_ref()).collect();
    let work = (summary.total_output_tokens, summary.completed as u64);
    let gpu = match gpu::merged(&blocks, Some(work)) {
        Ok(g) => g,
        Err(why) => {
            note(&mut outcome, why);
            None
        }
    };
    if gpu.is_some() {
        note(&mut outcome, gpu::NOTE.to_string());
    }
    let mut result = RunResult::assemble(header, summary, Vec::new(), outcome);
    result.kneecap.prefix_cache = server_block(&shards, |s| s.prefix_cache.as_ref());
    result.kneecap.spec_decode = server_block(&shards, |s| s.spec_decode.as_ref());
    result.kneecap.gpu = gpu;
    Ok(result)
}

/// One more line in `kneecap.merged.notes`.
fn note(outcome: &mut RunOutcome, line: String) {
    if let Some(m) = outcome.merged.as_mut() {
        m.notes.push(line);
    }
}

/// A block the server counted, merged by [`server::merged`]'s rule.
fn server_block<T: ServerBlock>(
    shards: &[RunShard],
    block: impl Fn(&RunShard) -> Option<&T>,
) -> Option<T> {
    let readings: Vec<Reading<'_, T>> = shards
        .iter()
        .map(|s| Reading {
            target: &s.header.target,
            window_s: s.part.window_end_unix_s - s.part.window_start_unix_s,
            block: block(s),
        })
        .collect();
    server::merged(&readings)
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
        total_input_sequences: c.total_input_sequences,
        request_throughput: per_s(c.completed as f64),
        input_sequence_throughput: per_s(c.total_input_sequences as f64),
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
        // Shard files carry no TTFO or reasoning counts (yet): left empty.
        ..Summary::default()
    }
}

/// How the whole set went: started at the common window's start,
/// interrupted or generator-limited if any shard was.
fn outcome(shards: &[RunShard], total: &ShardPart, request_rate: f64) -> RunOutcome {
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
    RunOutcome {
        started,
        interrupted: total.interrupted,
        first_errors: shards
            .iter()
            .flat_map(|s| s.first_errors.iter().cloned())
            .take(FIRST_ERRORS)
            .collect(),
        warmups_ok: None,
        generator: Some(GeneratorVerdict {
            health: crate::metrics::health::GeneratorHealth {
                limited: total.generator_limited,
                reasons: limited,
                ..Default::default()
            },
            lateness_judged: request_rate.is_finite(),
            ..Default::default()
        }),
        shard: None,
        merged: Some(merged_block(shards, total)),
    }
}

/// `kneecap.merged`: which shards, over which window, how well they started together.
fn merged_block(shards: &[RunShard], total: &ShardPart) -> MergedBlock {
    let id = &shards[0].file.id;
    MergedBlock {
        shards: id.shard.count,
        fingerprint: id.fingerprint.clone(),
        seed: id.seed,
        files: shards.iter().map(|s| s.file.name.clone()).collect(),
        start_at: id.start_at.map(|s| s.rfc3339()),
        start_lateness_ms: shards.iter().map(|s| s.part.start_lateness_ms).collect(),
        window_start_unix_s: total.window_start_unix_s,
        window_end_unix_s: total.window_end_unix_s,
        planned: total.counters.planned,
        notes: [
            "percentiles are read from the merged HdrHistograms (µs, 3 significant digits), never averaged across shards",
            "rates divide by the common window: earliest shard start to latest shard end",
            "max_concurrent_requests and max_output_tokens_per_s are sums of the shards' peaks (upper bounds)",
        ]
        .map(String::from)
        .into_iter()
        .chain([server::NOTE.to_string()])
        .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::result::shard::{ShardIdentity, ShardRun};
    use crate::shard::Shard;

    /// Shard `index` of 2 as `kneecap run --shard` writes it.
    fn shard_file(index: usize, error: &str) -> RunJson {
        let header = RunHeader {
            backend: "openai".into(),
            model_id: "m".into(),
            metadata: vec![("team".into(), "infra".into())],
            request_rate: 10.0,
            percentiles: vec![90.0],
            seed: 3,
            ..Default::default()
        };
        let part = ShardPart {
            window_start_unix_s: 1_700_000_000.0 + index as f64,
            window_end_unix_s: 1_700_000_010.0,
            ..Default::default()
        };
        let id = ShardIdentity {
            shard: Shard { index, count: 2 },
            fingerprint: "f".into(),
            seed: 3,
            start_at: None,
        };
        let outcome = RunOutcome {
            first_errors: vec![error.into()],
            shard: Some(ShardRun { id, part }),
            ..Default::default()
        };
        let r = RunResult::assemble(header, Summary::default(), Vec::new(), outcome);
        let text = serde_json::to_string(&RunJson::of(&r, false).to_value()).unwrap();
        serde_json::from_str(&text).unwrap()
    }

    #[test]
    fn shards_written_by_run_merge_into_one_result_with_their_header() {
        let shards = vec![
            read("b.json", shard_file(1, "second")).unwrap(),
            read("a.json", shard_file(0, "first")).unwrap(),
        ];
        let r = merge(shards).unwrap();
        assert_eq!(
            (r.header.backend.as_str(), r.header.request_rate),
            ("openai", 10.0)
        );
        assert_eq!(
            r.header.metadata,
            [("team".to_string(), "infra".to_string())]
        );
        assert_eq!(r.header.percentiles, [90.0]);
        assert_eq!(r.kneecap.first_errors, ["first", "second"]);
        assert_eq!(r.summary.duration_s, 10.0, "the common window");
        let merged = r.kneecap.merged.unwrap();
        assert_eq!((merged.shards, merged.files.len()), (2, 2));
        assert_eq!(merged.files[0], "a.json");
    }

    #[test]
    fn a_result_without_a_shard_block_is_refused_by_name() {
        let text = r#"{"backend": "vllm", "completed": 3, "request_rate": "inf"}"#;
        let err = read("v.json", serde_json::from_str(text).unwrap()).unwrap_err();
        assert!(err.starts_with("v.json: no `kneecap.shard` block"), "{err}");
    }
}

//! The one way a [`RunResult`] is put together — by `kneecap run` from its
//! config and measurements, and by `kneecap merge` from the shards' files:
//! a [`RunHeader`] (what was asked for), a summary and records (what was
//! measured) and a [`RunOutcome`] (how the load went).

use super::run::{GeneratorVerdict, KneecapInfo, RunHeader, RunResult};
use super::shard::MergedBlock;
use super::shard::ShardRun;
use crate::metrics::stats::Summary;
use crate::metrics::RequestRecord;
use chrono::{DateTime, Local};

/// How the load went, beyond the measurements.
#[derive(Debug, Clone, Default)]
pub struct RunOutcome {
    /// Wall-clock start (vLLM's `date` and kneecap's `started_at`).
    pub started: Option<DateTime<Local>>,
    /// Stopped by a signal: the result is partial.
    pub interrupted: bool,
    /// First few failure messages (secrets redacted).
    pub first_errors: Vec<String>,
    pub warmups_ok: Option<(usize, usize)>,
    pub generator: Option<GeneratorVerdict>,
    /// This run was one shard of a load (`--shard i/N`).
    pub shard: Option<ShardRun>,
    /// This result was merged from shards (`kneecap merge`).
    pub merged: Option<MergedBlock>,
}

impl RunResult {
    /// Put a result together. kneecap's version is this binary's.
    pub fn assemble(
        h: RunHeader,
        summary: Summary,
        records: Vec<RequestRecord>,
        o: RunOutcome,
    ) -> RunResult {
        RunResult {
            date: o
                .started
                .map(|t| t.format("%Y%m%d-%H%M%S").to_string())
                .unwrap_or_default(),
            header: h,
            summary,
            records,
            kneecap: KneecapInfo {
                version: env!("CARGO_PKG_VERSION").into(),
                interrupted: o.interrupted,
                started_at: o.started.map(|t| t.to_rfc3339()).unwrap_or_default(),
                first_errors: o.first_errors,
                warmups_ok: o.warmups_ok,
                generator: o.generator,
                shard: o.shard,
                merged: o.merged,
                prefix_cache: None,
                spec_decode: None,
                gpu: None,
                sessions: None,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::MetricName;
    use crate::result::json::RunJson;
    use crate::result::shard::{ShardIdentity, ShardPart};
    use crate::shard::Shard;

    fn header() -> RunHeader {
        RunHeader {
            backend: "vllm".into(),
            label: Some("L".into()),
            model_id: "org/m".into(),
            num_prompts: 3,
            metadata: vec![("team".into(), "infra".into())],
            request_rate: f64::INFINITY,
            burstiness: 1.0,
            max_concurrency: Some(4),
            ramp_up: Some(("linear".into(), 1, 5)),
            percentile_metrics: vec![MetricName::Ttft, MetricName::E2el],
            percentiles: vec![50.0, 99.9],
            target: "http://127.0.0.1:8000".into(),
            simulated: true,
            sim_preset: Some("tiny".into()),
            endpoint: "/v1/completions".into(),
            dataset: "random".into(),
            arrival: "closed loop (rate inf), max concurrency 4".into(),
            seed: 7,
            duration_bound_s: Some(2.0),
            ..Default::default()
        }
    }

    #[test]
    fn a_written_shard_result_reads_back_to_the_header_it_was_built_from() {
        let shard = ShardRun {
            id: ShardIdentity {
                shard: Shard { index: 1, count: 2 },
                fingerprint: "00ff".into(),
                seed: 7,
                start_at: None,
            },
            part: ShardPart::default(),
        };
        let outcome = RunOutcome {
            started: Some(Local::now()),
            first_errors: vec!["boom".into()],
            shard: Some(shard.clone()),
            ..Default::default()
        };
        let records = vec![RequestRecord::default(); 2];
        let r = RunResult::assemble(header(), Summary::default(), records, outcome);
        assert_eq!(r.date.len(), "YYYYMMDD-HHMMSS".len());
        let text = serde_json::to_string(&RunJson::of(&r, true)).unwrap();
        let back: RunJson = serde_json::from_str(&text).unwrap();
        assert_eq!(back.header(), header());
        let k = back.kneecap.as_ref().unwrap();
        assert_eq!(k.shard.as_ref().map(|s| &s.run), Some(&shard));
        assert_eq!(k.first_errors, ["boom"]);
        let again = serde_json::to_string(&back).unwrap();
        assert_eq!(again, text, "read and written again, the file is unchanged");
    }
}

//! The vLLM-compatible run JSON as one typed contract, [`RunJson`]: vLLM's
//! keys, in vLLM's order and units (seconds in per-request arrays,
//! milliseconds in stats), plus the `kneecap` object for what vLLM lacks.
//! `kneecap run` and `kneecap merge` write it; `kneecap merge`, `report` and
//! `compare` read it back — vLLM's own files too (see [`lenient`]). Pure.

pub mod dist;
pub mod kneecap;
pub mod lenient;
mod pooling;
pub mod sessions;

use super::run::{RunHeader, RunResult};
use crate::client::openai::Backend;
use crate::metrics::stats::percentile_key;
use crate::metrics::{MetricName, RequestRecord};
use kneecap::KneecapJson;
use lenient::Spliced;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A run result file. Field order is key order. Reading: a missing key takes
/// its default (floats: NaN, "not in the file"); optional blocks are `None`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct RunJson {
    /// Local start time `YYYYMMDD-HHMMSS`.
    pub date: String,
    pub endpoint_type: String,
    pub backend: String,
    pub label: Option<String>,
    pub model_id: String,
    pub tokenizer_id: Option<String>,
    pub num_prompts: usize,
    /// `--metadata` pairs (vLLM writes them here); reading, every other
    /// top-level string.
    #[serde(flatten)]
    pub metadata: Spliced<String>,
    #[serde(default = "lenient::nan", with = "lenient::rate")]
    pub request_rate: f64,
    #[serde(default = "lenient::nan", with = "lenient::rate")]
    pub burstiness: f64,
    pub max_concurrency: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ramp_up_strategy: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ramp_up_start_rps: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ramp_up_end_rps: Option<u32>,
    #[serde(default = "lenient::nan", deserialize_with = "lenient::float")]
    pub duration: f64,
    pub completed: usize,
    /// Absent in older vLLM files.
    pub failed: Option<usize>,
    pub total_input_tokens: u64,
    /// Pooling backends only (vLLM's pooling result), else absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total_input_sequences: Option<u64>,
    pub total_output_tokens: u64,
    #[serde(default = "lenient::nan", deserialize_with = "lenient::float")]
    pub request_throughput: f64,
    /// Pooling backends only: input sequences per second.
    #[serde(
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient::opt_float"
    )]
    pub input_sequence_throughput: Option<f64>,
    /// `null` without `--goodput`.
    pub request_goodput: Option<f64>,
    #[serde(default = "lenient::nan", deserialize_with = "lenient::float")]
    pub output_throughput: f64,
    #[serde(default = "lenient::nan", deserialize_with = "lenient::float")]
    pub total_token_throughput: f64,
    #[serde(flatten)]
    pub detailed: Detailed,
    /// Per-request E2E latency, seconds (0 for a failed request).
    #[serde(deserialize_with = "lenient::floats")]
    pub latencies: Option<Vec<f64>>,
    /// Per-request client-side queueing time, seconds.
    #[serde(deserialize_with = "lenient::floats")]
    pub queue_times: Option<Vec<f64>>,
    #[serde(default = "lenient::nan", deserialize_with = "lenient::float")]
    pub max_output_tokens_per_s: f64,
    /// Absent in older vLLM files.
    pub max_concurrent_requests: Option<usize>,
    /// vLLM's real-time factor (audio workloads); kneecap writes 0.
    #[serde(default = "lenient::nan", deserialize_with = "lenient::float")]
    pub rtfx: f64,
    /// vLLM's `spec_decode_*` keys, when the server exported the counters.
    #[serde(flatten)]
    pub spec_decode: crate::result::spec::VllmSpecKeys,
    /// `mean_<m>_ms`, `median_<m>_ms`, `std_<m>_ms`, `p<P>_<m>_ms` for each
    /// shown metric; reading, every other top-level number.
    #[serde(flatten)]
    pub stats: Spliced<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kneecap: Option<KneecapJson>,
}

/// The per-request arrays vLLM writes only with `--save-detailed` (each
/// absent otherwise). Failed requests hold 0 (or partial values).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Detailed {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub input_lens: Option<Vec<u32>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_lens: Option<Vec<u32>>,
    #[serde(
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient::floats"
    )]
    pub ttfts: Option<Vec<f64>>,
    #[serde(
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient::float_lists"
    )]
    pub itls: Option<Vec<Vec<f64>>>,
    #[serde(
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient::floats"
    )]
    pub start_times: Option<Vec<f64>>,
    #[serde(
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient::texts"
    )]
    pub generated_texts: Option<Vec<String>>,
    /// The failure message of each request, `""` for a success.
    #[serde(
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient::texts"
    )]
    pub errors: Option<Vec<String>>,
}

/// The result as a JSON value (`detailed` keeps the per-request arrays).
pub fn render(r: &RunResult, detailed: bool) -> Value {
    RunJson::of(r, detailed).to_value()
}

/// The result file's bytes (see [`RunJson::to_value`]).
pub fn to_vec(r: &RunResult, detailed: bool) -> Vec<u8> {
    serde_json::to_vec(&render(r, detailed)).unwrap_or_default()
}

impl RunJson {
    /// The file form of `r`. vLLM keeps `latencies` and `queue_times` always
    /// and the other per-request arrays only with `--save-detailed`.
    pub fn of(r: &RunResult, detailed: bool) -> Self {
        let s = &r.summary;
        let recs = &r.records;
        let stats = stats(r);
        let pooling = Backend::is_pooling_name(&r.header.backend);
        let (strategy, start, end) = match &r.header.ramp_up {
            Some((s, a, b)) => (Some(s.clone()), Some(*a), Some(*b)),
            None => (None, None, None),
        };
        RunJson {
            date: r.date.clone(),
            endpoint_type: r.header.backend.clone(),
            backend: r.header.backend.clone(),
            label: r.header.label.clone(),
            model_id: r.header.model_id.clone(),
            tokenizer_id: r.header.tokenizer_id.clone(),
            num_prompts: r.header.num_prompts,
            metadata: metadata(r, &stats),
            request_rate: r.header.request_rate,
            burstiness: r.header.burstiness,
            max_concurrency: r.header.max_concurrency,
            ramp_up_strategy: strategy,
            ramp_up_start_rps: start,
            ramp_up_end_rps: end,
            duration: s.duration_s,
            completed: s.completed,
            failed: Some(s.failed),
            total_input_tokens: s.total_input_tokens,
            total_input_sequences: pooling.then_some(s.total_input_sequences),
            total_output_tokens: s.total_output_tokens,
            request_throughput: s.request_throughput,
            input_sequence_throughput: pooling.then_some(s.input_sequence_throughput),
            request_goodput: s.request_goodput,
            output_throughput: s.output_throughput,
            total_token_throughput: s.total_token_throughput,
            detailed: if detailed {
                Detailed::of(recs)
            } else {
                Detailed::default()
            },
            latencies: Some(recs.iter().map(|x| secs(x.latency())).collect()),
            queue_times: Some(recs.iter().map(|x| x.queue_time().as_secs_f64()).collect()),
            max_output_tokens_per_s: s.max_output_tokens_per_s,
            max_concurrent_requests: Some(s.max_concurrent_requests),
            rtfx: 0.0,
            spec_decode: crate::result::spec::VllmSpecKeys::of(r.kneecap.spec_decode.as_ref()),
            stats,
            kneecap: Some(KneecapJson::of(r, detailed)),
        }
    }

    /// The file's JSON: this struct's keys, or for a pooling backend
    /// (`openai-embeddings`, `vllm-rerank`, `vllm-pooling`) the keys vLLM
    /// writes for one (see `pooling`).
    pub fn to_value(&self) -> Value {
        let v = serde_json::to_value(self).unwrap_or_default();
        if Backend::is_pooling_name(&self.backend) {
            pooling::shape(v)
        } else {
            v
        }
    }

    /// The run's header, read back: vLLM's keys and the `kneecap` block's
    /// identity; shown metrics and percentiles from `kneecap.shard` (what a
    /// shard's merged result must show), else p99 of no metric.
    pub fn header(&self) -> RunHeader {
        let none = KneecapJson::default();
        let k = self.kneecap.as_ref().unwrap_or(&none);
        let shard = k.shard.as_ref();
        let ramp_up = match (
            &self.ramp_up_strategy,
            self.ramp_up_start_rps,
            self.ramp_up_end_rps,
        ) {
            (Some(s), Some(a), Some(b)) => Some((s.clone(), a, b)),
            _ => None,
        };
        RunHeader {
            backend: self.backend.clone(),
            label: self.label.clone(),
            model_id: self.model_id.clone(),
            tokenizer_id: self.tokenizer_id.clone(),
            num_prompts: self.num_prompts,
            metadata: self.metadata.0.clone(),
            request_rate: self.request_rate,
            burstiness: self.burstiness,
            max_concurrency: self.max_concurrency,
            ramp_up,
            percentile_metrics: shard
                .map(|s| {
                    s.percentile_metrics
                        .iter()
                        .filter_map(|m| MetricName::parse(m).ok())
                        .collect()
                })
                .unwrap_or_default(),
            percentiles: shard.map_or_else(|| vec![99.0], |s| s.percentiles.clone()),
            target: k.target.clone(),
            simulated: k.simulated,
            sim_preset: k.sim_preset.clone(),
            endpoint: k.endpoint.clone(),
            dataset: k.dataset.clone(),
            arrival: k.arrival.clone(),
            seed: k.seed,
            duration_bound_s: k.duration_bound_s,
            server: k.server.clone(),
        }
    }
}

impl Detailed {
    fn of(recs: &[RequestRecord]) -> Self {
        let ok_out = |x: &RequestRecord| if x.is_ok() { x.output_tokens } else { 0 };
        Detailed {
            input_lens: Some(recs.iter().map(|x| x.prompt_len).collect()),
            output_lens: Some(recs.iter().map(ok_out).collect()),
            ttfts: Some(recs.iter().map(|x| secs(x.ttft())).collect()),
            itls: Some(
                recs.iter()
                    .map(|x| x.itl.iter().map(|d| d.as_secs_f64()).collect())
                    .collect(),
            ),
            start_times: Some(recs.iter().map(|x| x.sent.as_secs_f64()).collect()),
            generated_texts: Some(recs.iter().map(|x| x.generated_text.clone()).collect()),
            errors: Some(
                recs.iter()
                    .map(|x| {
                        x.error
                            .as_ref()
                            .map(|e| e.message.clone())
                            .unwrap_or_default()
                    })
                    .collect(),
            ),
        }
    }
}

/// Seconds, 0 for a value the request never reached.
fn secs(d: Option<std::time::Duration>) -> f64 {
    d.map(|d| d.as_secs_f64()).unwrap_or(0.0)
}

/// `mean_<m>_ms`, `median_<m>_ms`, `std_<m>_ms`, `p<P>_<m>_ms` of each shown metric.
fn stats(r: &RunResult) -> Spliced<f64> {
    let mut out = Vec::new();
    for metric in r.shown_metrics() {
        let (key, d) = (metric.key(), r.distribution(metric));
        out.push((format!("mean_{key}_ms"), d.mean_ms));
        out.push((format!("median_{key}_ms"), d.median_ms));
        out.push((format!("std_{key}_ms"), d.std_ms));
        for (p, v) in &d.percentiles_ms {
            out.push((format!("{}_{key}_ms", percentile_key(*p)), *v));
        }
    }
    Spliced(out)
}

/// The `--metadata` pairs, as vLLM's dict keeps them: a repeated key keeps
/// its first place and its last value; a key the file already has (a vLLM
/// key or a statistic) is left out, as a JSON object holds a key once.
fn metadata(r: &RunResult, stats: &Spliced<f64>) -> Spliced<String> {
    let taken = |k: &str| {
        RESERVED.contains(&k)
            || pooling::KEYS.contains(&k)
            || crate::result::spec::VLLM_KEYS.contains(&k)
            || stats.0.iter().any(|(s, _)| s == k)
    };
    let mut out: Vec<(String, String)> = Vec::new();
    for (k, v) in r.header.metadata.iter().filter(|(k, _)| !taken(k)) {
        match out.iter_mut().find(|(o, _)| o == k) {
            Some(slot) => slot.1 = v.clone(),
            None => out.push((k.clone(), v.clone())),
        }
    }
    Spliced(out)
}

/// The fixed top-level keys of [`RunJson`].
const RESERVED: [&str; 35] = [
    "date",
    "endpoint_type",
    "backend",
    "label",
    "model_id",
    "tokenizer_id",
    "num_prompts",
    "request_rate",
    "burstiness",
    "max_concurrency",
    "ramp_up_strategy",
    "ramp_up_start_rps",
    "ramp_up_end_rps",
    "duration",
    "completed",
    "failed",
    "total_input_tokens",
    "total_output_tokens",
    "request_throughput",
    "request_goodput",
    "output_throughput",
    "total_token_throughput",
    "input_lens",
    "output_lens",
    "ttfts",
    "itls",
    "start_times",
    "generated_texts",
    "errors",
    "latencies",
    "queue_times",
    "max_output_tokens_per_s",
    "max_concurrent_requests",
    "rtfx",
    "kneecap",
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::record::Timings;
    use crate::metrics::RequestRecord;

    fn result(records: Vec<RequestRecord>) -> RunResult {
        RunResult {
            date: "20261201-120000".into(),
            header: RunHeader {
                backend: "openai".into(),
                model_id: "m".into(),
                num_prompts: records.len(),
                request_rate: 1.0,
                burstiness: 1.0,
                ..Default::default()
            },
            summary: Default::default(),
            records,
            kneecap: Default::default(),
        }
    }

    #[test]
    fn detailed_json_keeps_the_servers_own_timings_per_request() {
        let timed = RequestRecord {
            server_timings: Some(Box::new(Timings {
                cache_n: None,
                prompt_n: Some(64),
                prompt_ms: Some(310.5),
                predicted_n: Some(32),
                predicted_ms: Some(340.0),
            })),
            ..Default::default()
        };
        let r = result(vec![timed, RequestRecord::default()]);
        let v = render(&r, true);
        let t = &v["kneecap"]["server_timings"];
        assert_eq!(t[0]["predicted_n"], 32);
        assert_eq!(t[0]["predicted_ms"], 340.0);
        assert_eq!(t[0]["prompt_ms"], 310.5);
        assert!(t[1].is_null(), "a request without timings holds null");
        // Not detailed, or no server timings at all: no key.
        assert!(render(&r, false)["kneecap"].get("server_timings").is_none());
        let plain = result(vec![RequestRecord::default()]);
        assert!(render(&plain, true)["kneecap"]
            .get("server_timings")
            .is_none());
    }
}

#[cfg(test)]
mod key_tests {
    use super::*;
    use serde_json::json;

    fn keys(r: &RunResult) -> Vec<String> {
        match render(r, true) {
            Value::Object(m) => m.keys().cloned().collect(),
            _ => panic!("not an object"),
        }
    }

    fn plain() -> RunResult {
        let header = RunHeader {
            backend: "openai".into(),
            ramp_up: Some(("linear".into(), 1, 5)),
            ..Default::default()
        };
        let records = vec![RequestRecord::default()];
        RunResult::assemble(header, Default::default(), records, Default::default())
    }

    #[test]
    fn the_fixed_keys_are_the_reserved_ones_in_order() {
        assert_eq!(keys(&plain()), RESERVED);
    }

    #[test]
    fn metadata_follows_num_prompts_once_per_key_and_never_shadows_a_key() {
        let mut r = plain();
        r.header.percentile_metrics = vec![MetricName::Ttft];
        r.header.percentiles = vec![99.0];
        r.summary.ttft.percentiles_ms = vec![(99.0, 0.0)];
        r.header.metadata = [("a", "1"), ("b", "2"), ("a", "3"), ("backend", "x")]
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .to_vec();
        r.header.metadata.push(("p99_ttft_ms".into(), "y".into()));
        let k = keys(&r);
        let at = |key: &str| k.iter().position(|x| x == key).unwrap();
        assert_eq!(
            (at("a"), at("b")),
            (at("num_prompts") + 1, at("num_prompts") + 2)
        );
        assert_eq!(at("request_rate"), at("b") + 1);
        let v = render(&r, false);
        assert_eq!((&v["a"], &v["backend"]), (&json!("3"), &json!("openai")));
        assert_eq!(v["p99_ttft_ms"], 0.0);
        assert_eq!(k.len(), RESERVED.len() + 2 + 4, "a, b and four ttft stats");
    }
}

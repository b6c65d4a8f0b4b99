//! vLLM's result keys for a pooling backend (its `EmbedBenchmarkMetrics`
//! branch of `serve.py`): no `failed`, no output tokens or output
//! throughputs, no peaks, no TTFT/TPOT/ITL arrays; `total_input_sequences`
//! and `input_sequence_throughput` instead; with `--save-detailed` the arrays
//! `input_lens`, `latencies`, `queue_times`, `errors`, in that order. Pure.

use serde_json::{Map, Value};

/// The keys only a pooling result has.
pub const KEYS: [&str; 2] = ["total_input_sequences", "input_sequence_throughput"];

/// Keys of the generation result that vLLM does not write for pooling.
const GENERATION_ONLY: [&str; 12] = [
    "failed",
    "total_output_tokens",
    "request_goodput",
    "output_throughput",
    "output_lens",
    "ttfts",
    "itls",
    "start_times",
    "generated_texts",
    "max_output_tokens_per_s",
    "max_concurrent_requests",
    "rtfx",
];

/// A run's JSON (as [`super::RunJson`] writes it) in vLLM's pooling shape:
/// the generation-only keys dropped and `errors` moved after `queue_times`.
pub fn shape(v: Value) -> Value {
    let Value::Object(obj) = v else {
        return v;
    };
    let mut errors = None;
    let mut out = Map::with_capacity(obj.len());
    for (k, val) in obj {
        if GENERATION_ONLY.contains(&k.as_str()) {
            continue;
        }
        if k == "errors" {
            errors = Some(val);
            continue;
        }
        let after_queue = k == "queue_times";
        out.insert(k, val);
        if after_queue {
            if let Some(e) = errors.take() {
                out.insert("errors".into(), e);
            }
        }
    }
    if let Some(e) = errors {
        out.insert("errors".into(), e);
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::super::{render, RunJson};
    use crate::metrics::{MetricName, RequestRecord};
    use crate::result::{RunHeader, RunResult};

    fn keys(r: &RunResult) -> Vec<String> {
        match render(r, true) {
            serde_json::Value::Object(m) => m.keys().cloned().collect(),
            _ => panic!("not an object"),
        }
    }

    #[test]
    fn a_pooling_run_has_vllms_pooling_keys_in_order() {
        let header = RunHeader {
            backend: "vllm-rerank".into(),
            percentile_metrics: vec![MetricName::Ttft, MetricName::E2el],
            percentiles: vec![99.0],
            ..Default::default()
        };
        let mut summary = crate::metrics::stats::Summary::default();
        summary.e2el.percentiles_ms = vec![(99.0, 12.5)];
        summary.total_input_sequences = 8;
        summary.input_sequence_throughput = 4.0;
        let records = vec![RequestRecord::default()];
        let r = RunResult::assemble(header, summary, records, Default::default());
        let k = keys(&r);
        let from = k.iter().position(|x| x == "duration").unwrap();
        let to = k.iter().position(|x| x == "kneecap").unwrap();
        // vLLM's EmbedBenchmarkMetrics result, then the e2el stats (TTFT is
        // never shown for pooling); with --save-detailed only input_lens and
        // errors of the per-request arrays.
        assert_eq!(
            k[from..to],
            [
                "duration",
                "completed",
                "total_input_tokens",
                "total_input_sequences",
                "request_throughput",
                "input_sequence_throughput",
                "total_token_throughput",
                "input_lens",
                "latencies",
                "queue_times",
                "errors",
                "mean_e2el_ms",
                "median_e2el_ms",
                "std_e2el_ms",
                "p99_e2el_ms",
            ]
        );
        let v = render(&r, false);
        assert_eq!(v["total_input_sequences"], 8);
        assert_eq!(v["input_sequence_throughput"], 4.0);
        assert_eq!(v["p99_e2el_ms"], 12.5);
        assert!(v.get("errors").is_none() && v.get("failed").is_none());
        // Read back as a run file, the pooling numbers are kept.
        let back: RunJson = serde_json::from_value(v).unwrap();
        assert_eq!(back.total_input_sequences, Some(8));
        assert_eq!(back.to_value()["input_sequence_throughput"], 4.0);
    }
}

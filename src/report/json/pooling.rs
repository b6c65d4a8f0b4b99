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

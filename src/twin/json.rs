//! The prediction's JSON (`kneecap predict -o FILE`): one serde-derived,
//! versioned object holding the engine, the workload, the SLOs, the method,
//! and the knee or the grid, marked `predicted: true` throughout. Read back
//! through the same type.

use super::grid::GridCell;
use super::knee::TruthConfig;
use super::predict::{Prediction, Replicas};
use serde::{Deserialize, Serialize};

/// `kind` of the prediction JSON.
pub const KIND: &str = "kneecap-predict";
/// Schema version of the prediction JSON.
pub const SCHEMA_VERSION: u32 = 1;
/// What every predicted number is.
pub const NOTE: &str =
    "PREDICTED: a virtual-time simulation of the engine model, not a measurement";
/// [`NOTE`] without its label, for text that already says PREDICTED.
pub const SIMULATED: &str = "a virtual-time simulation of the engine model, not a measurement";

/// The whole prediction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PredictJson {
    /// Always [`KIND`].
    pub kind: String,
    /// [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The kneecap that predicted it.
    pub kneecap_version: String,
    /// Always true: nothing here was measured.
    pub predicted: bool,
    /// [`NOTE`].
    pub note: String,
    /// The engine model's parameters.
    pub engine: EngineJson,
    /// The workload's shape (the grid's cells override the lengths).
    pub workload: WorkloadJson,
    /// Every SLO must hold at the knee.
    pub slos: Vec<String>,
    /// How the knee was searched.
    pub method: MethodJson,
    /// The knee of the workload (without `--grid`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub knee: Option<Prediction>,
    /// Replicas for `--target-rate` (without `--grid`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<Replicas>,
    /// The latency at each `--at-rates` load (without `--grid`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub at_rates: Vec<super::at_load::AtLoad>,
    /// The knee over the grid's shapes (`--grid`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grid: Option<Vec<GridCell>>,
    /// CPU seconds the prediction took (every thread).
    pub cpu_s: f64,
    /// Wall-clock seconds it took.
    pub wall_s: f64,
}

/// The engine model's parameters, in the simulator's flag units.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EngineJson {
    /// Where the parameters came from (`preset tiny`, ...).
    pub source: String,
    pub max_num_seqs: u32,
    pub max_num_batched_tokens: u32,
    pub kv_cache_tokens: u32,
    pub max_model_len: u32,
    pub step_base_ms: f64,
    pub prefill_token_us: f64,
    pub decode_seq_us: f64,
    /// How much an arriving prefill slows the decoding batch, 0..=1.
    #[serde(default = "full_interference")]
    pub prefill_interference: f64,
    /// Cost of each context token of a decoding sequence in a step, µs.
    #[serde(default)]
    pub context_token_us: f64,
    /// Work each request costs the engine once, ms.
    #[serde(default)]
    pub request_ms: f64,
    /// Cost of each attention pair of a prompt token, ns.
    #[serde(default)]
    pub prefill_pair_ns: f64,
    /// What a step computing prompt tokens costs beyond the base, ms.
    #[serde(default)]
    pub prefill_step_ms: f64,
    /// The host's stalls: per second of engine time, and their mean, ms.
    #[serde(default)]
    pub stall_rate_per_s: f64,
    #[serde(default)]
    pub stall_ms: f64,
    pub prefix_caching: bool,
    /// Parameter sets at the ends of the parameters' uncertainty (0: taken as exact).
    pub corners: usize,
}

fn full_interference() -> f64 {
    1.0
}

/// The workload's shape.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkloadJson {
    /// Prompt tokens of each request's own part (after the shared prefix).
    pub input_len: u32,
    /// Output tokens.
    pub output_len: u32,
    /// `--random-range-ratio` of the input and of the output length.
    pub range_ratio_input: f64,
    pub range_ratio_output: f64,
    /// Tokens of one prefix every prompt starts with.
    pub shared_prefix: u32,
    /// `poisson`, `gamma` or `constant`.
    pub arrivals: String,
    /// Gamma shape (absent for evenly spaced arrivals).
    pub burstiness: Option<f64>,
}

/// How the knee was searched.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MethodJson {
    /// Always `virtual-time simulation`.
    pub method: String,
    /// One search per seed.
    pub seeds: Vec<u64>,
    /// Warm-up requests per run, not measured.
    pub warmup_requests: usize,
    /// Measured requests per run.
    pub measured_requests: usize,
    /// Each search stops when its bracket is narrower than this share.
    pub precision: f64,
}

/// The arrival process's name for a burstiness.
pub fn arrivals(burstiness: f64) -> &'static str {
    if burstiness.is_infinite() {
        "constant"
    } else if burstiness == 1.0 {
        "poisson"
    } else {
        "gamma"
    }
}

impl PredictJson {
    /// The header of a prediction of `cfg` (central parameters from
    /// `source`, `corners` of them), without results or timings.
    pub fn new(version: &str, source: &str, cfg: &TruthConfig, corners: usize) -> Self {
        let p = &cfg.params;
        let l = &cfg.load;
        PredictJson {
            kind: KIND.into(),
            schema_version: SCHEMA_VERSION,
            kneecap_version: version.into(),
            predicted: true,
            note: NOTE.into(),
            engine: EngineJson {
                source: source.into(),
                max_num_seqs: p.max_num_seqs,
                max_num_batched_tokens: p.max_num_batched_tokens,
                kv_cache_tokens: p.kv_cache_tokens,
                max_model_len: p.max_model_len,
                step_base_ms: p.step_base.as_secs_f64() * 1e3,
                prefill_token_us: p.per_prefill_token.as_secs_f64() * 1e6,
                decode_seq_us: p.per_decode_seq.as_secs_f64() * 1e6,
                prefill_interference: p.prefill_interference,
                context_token_us: p.per_context_token.as_secs_f64() * 1e6,
                request_ms: p.per_request.as_secs_f64() * 1e3,
                prefill_pair_ns: p.per_prefill_pair.as_secs_f64() * 1e9,
                prefill_step_ms: p.per_prefill_step.as_secs_f64() * 1e3,
                stall_rate_per_s: p.stalls.rate_per_s,
                stall_ms: p.stalls.mean.as_secs_f64() * 1e3,
                prefix_caching: l.prefix_caching,
                corners,
            },
            workload: WorkloadJson {
                input_len: l.input_len,
                output_len: l.output_len,
                range_ratio_input: cfg.range_ratio.0,
                range_ratio_output: cfg.range_ratio.1,
                shared_prefix: l.shared_prefix,
                arrivals: arrivals(cfg.burstiness).into(),
                burstiness: cfg.burstiness.is_finite().then_some(cfg.burstiness),
            },
            slos: cfg.slos.iter().map(ToString::to_string).collect(),
            method: MethodJson {
                method: "virtual-time simulation".into(),
                seeds: cfg.seeds.clone(),
                warmup_requests: l.warmup,
                measured_requests: l.requests,
                precision: cfg.precision,
            },
            knee: None,
            target: None,
            at_rates: Vec::new(),
            grid: None,
            cpu_s: 0.0,
            wall_s: 0.0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::preset;
    use crate::sim::virtual_time::VirtualLoad;

    #[test]
    fn the_header_says_predicted_and_reads_back() {
        let cfg = TruthConfig {
            params: preset::seven_b_24gb(),
            load: VirtualLoad {
                shared_prefix: 512,
                ..VirtualLoad::fixed(1024, 128, 10, 100)
            },
            slos: vec!["p99_ttft_ms<=500".parse().unwrap()],
            range_ratio: (0.1, 0.0),
            burstiness: f64::INFINITY,
            seeds: vec![4, 5],
            precision: 0.01,
            tail: crate::sim::params::HostStalls::NONE,
        };
        let j = PredictJson::new("9.9.9", "preset 7b-24gb", &cfg, 14);
        let text = serde_json::to_string(&j).unwrap();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["kind"], "kneecap-predict");
        assert_eq!(v["predicted"], true);
        assert!(v["note"].as_str().unwrap().starts_with("PREDICTED"));
        assert_eq!(v["engine"]["step_base_ms"], 14.0);
        assert_eq!(v["engine"]["corners"], 14);
        assert_eq!(v["workload"]["arrivals"], "constant");
        assert_eq!(v["workload"]["burstiness"], serde_json::Value::Null);
        assert_eq!(v["slos"][0], "p99_ttft_ms<=500");
        assert!(v.get("knee").is_none() && v.get("grid").is_none());
        let back: PredictJson = serde_json::from_str(&text).unwrap();
        assert_eq!(back, j);
    }
}

//! The `kneecap` object of the run JSON — what kneecap adds beyond vLLM's
//! keys — as typed blocks: identity of the load, its own distributions, the
//! generator's self-check, and the optional `shard`, `merged` and per-request
//! blocks. Built from a [`RunResult`]; read back by `kneecap merge`.

use super::dist::DistJson;
use super::lenient;
use crate::result::run::RunResult;
pub use crate::result::shard::MergedBlock;
use crate::result::shard::ShardRun;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Version of the `kneecap` object's layout.
pub const SCHEMA_VERSION: u32 = 1;

/// The `kneecap` object. Per-request arrays only with `--save-detailed`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct KneecapJson {
    pub schema_version: u32,
    pub version: String,
    pub target: String,
    pub simulated: bool,
    pub sim_preset: Option<String>,
    pub endpoint: String,
    pub dataset: String,
    pub arrival: String,
    pub seed: u64,
    pub duration_bound_s: Option<f64>,
    /// What the server said about itself: the model it loaded, its context
    /// length, its KV cache (vLLM's `vllm:cache_config_info`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<crate::result::ServerInfo>,
    pub interrupted: bool,
    pub started_at: String,
    pub warmups_ok: Option<Warmups>,
    pub dispatch_lateness: DistJson,
    pub ttft_from_due: DistJson,
    pub e2el_from_due: DistJson,
    pub e2el: DistJson,
    #[serde(default = "lenient::nan", deserialize_with = "lenient::float")]
    pub error_rate: f64,
    pub errors_by_kind: BTreeMap<String, u64>,
    pub first_errors: Vec<String>,
    pub generator: Option<GeneratorJson>,
    /// Which clock stamped the arrivals, and the client scheduling delay.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rx_timestamps: Option<RxStampsJson>,
    /// Reasoning models: present when some successful request reasoned.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<ReasoningJson>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shard: Option<ShardJson>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub merged: Option<MergedBlock>,
    /// Per-request due offsets, seconds.
    #[serde(
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient::floats"
    )]
    pub due_times: Option<Vec<f64>>,
    /// Per-request failure kind, `null` for a success.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_kinds: Option<Vec<Option<String>>>,
    /// Per-request client scheduling delay at the first token, seconds
    /// (`null` where the first token was task-stamped); only when some
    /// request was kernel-stamped.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_token_delays: Option<Vec<Option<f64>>>,
    /// Per-request TTFO, seconds (`null` without answer text); only when
    /// some request reasoned.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ttfos: Option<Vec<Option<f64>>>,
    /// Per-request reasoning tokens; only when some request reasoned.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning_tokens: Option<Vec<u32>>,
    /// The server's prefix-cache hit rate over the run, when it reports one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prefix_cache: Option<crate::result::PrefixCacheStats>,
    /// The server's speculative decoding over the run, when it reports it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spec_decode: Option<crate::result::SpecDecodeStats>,
    /// `--gpu-metrics-url`: the GPUs' power and energy over the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<crate::result::GpuStats>,
    /// `--multi-turn`: sessions by outcome, duration, TTFT by turn.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sessions: Option<super::sessions::SessionsJson>,
    /// Per-request `[session, turn]` (turn 1-based) of a multi-turn run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_turns: Option<Vec<[u64; 2]>>,
    /// The server's own per-request timings (llama.cpp), `null` where absent;
    /// only when some request has them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_timings: Option<Vec<Option<ServerTimings>>>,
}

/// kneecap's numbers for reasoning models: TTFO (time to the first answer
/// token; vLLM's TTFT counts reasoning), the answer's own TPOT, and the
/// reasoning tokens (usage's `completion_tokens_details.reasoning_tokens`,
/// else reasoning messages counted).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ReasoningJson {
    pub ttfo: DistJson,
    pub answer_tpot: DistJson,
    pub total_reasoning_tokens: u64,
    pub reasoning_requests: u64,
}

/// `kneecap.rx_timestamps`: where the latencies' arrival times came from.
/// `source` is `kernel` (every successful request's reads carried the
/// kernel's receive time, `SO_TIMESTAMPNS`), `task` (stamped when the read
/// returned on the request's task: no kernel stamps on this platform or
/// socket), or `mixed`. The client scheduling delay is the task's read minus
/// the kernel's receive time at the first token; `ttft_task_stamped` is TTFT
/// as a task-stamping client would have measured it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RxStampsJson {
    pub source: String,
    pub kernel_stamped: usize,
    pub task_stamped: usize,
    pub client_scheduling_delay: DistJson,
    pub ttft_task_stamped: DistJson,
}

/// Warm-up requests: how many succeeded of how many sent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Warmups {
    pub ok: usize,
    pub sent: usize,
}

/// The load generator's self-check (see [`crate::result::run::GeneratorVerdict`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct GeneratorJson {
    pub limited: bool,
    pub reasons: Vec<String>,
    pub warnings: Vec<String>,
    pub lateness_judged: bool,
    #[serde(default = "lenient::nan", deserialize_with = "lenient::float")]
    pub lateness_p99_ms: f64,
    #[serde(default = "lenient::nan", deserialize_with = "lenient::float")]
    pub lateness_bound_ms: f64,
    pub cpu_busy_fraction: Option<f64>,
    pub runtime_lag_p99_ms: Option<f64>,
    /// Client scheduling delay p99 (ms), with kernel receive stamps.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_scheduling_delay_p99_ms: Option<f64>,
}

/// llama.cpp's own timings of one request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ServerTimings {
    /// Prompt tokens served from llama.cpp's prompt cache.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache_n: Option<u32>,
    pub prompt_n: Option<u32>,
    pub prompt_ms: Option<f64>,
    pub predicted_n: Option<u32>,
    pub predicted_ms: Option<f64>,
}

/// `kneecap.shard`: one shard's identity and measurements (the fields of
/// [`crate::result::shard`]), plus what the merged result must show.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShardJson {
    #[serde(flatten)]
    pub run: ShardRun,
    /// `--metric-percentiles` of the shard's run.
    #[serde(default = "p99_only")]
    pub percentiles: Vec<f64>,
    /// `--percentile-metrics` of the shard's run (metric keys).
    #[serde(default)]
    pub percentile_metrics: Vec<String>,
}

fn p99_only() -> Vec<f64> {
    vec![99.0]
}

impl KneecapJson {
    /// The `kneecap` object of `r` (`detailed` adds the per-request arrays).
    pub fn of(r: &RunResult, detailed: bool) -> Self {
        let (k, h) = (&r.kneecap, &r.header);
        let s = &r.summary;
        let sent = s.completed + s.failed;
        let mut v = KneecapJson {
            schema_version: SCHEMA_VERSION,
            version: k.version.clone(),
            target: h.target.clone(),
            simulated: h.simulated,
            sim_preset: h.sim_preset.clone(),
            endpoint: h.endpoint.clone(),
            dataset: h.dataset.clone(),
            arrival: h.arrival.clone(),
            seed: h.seed,
            duration_bound_s: h.duration_bound_s,
            server: h.server.clone(),
            interrupted: k.interrupted,
            started_at: k.started_at.clone(),
            warmups_ok: k.warmups_ok.map(|(ok, sent)| Warmups { ok, sent }),
            dispatch_lateness: DistJson::of(&s.lateness),
            ttft_from_due: DistJson::of(&s.ttft_from_due),
            e2el_from_due: DistJson::of(&s.e2el_from_due),
            e2el: DistJson::of(&s.e2el),
            error_rate: if sent == 0 {
                0.0
            } else {
                s.failed as f64 / sent as f64
            },
            errors_by_kind: s.errors_by_kind.clone(),
            first_errors: k.first_errors.clone(),
            generator: k.generator.as_ref().map(GeneratorJson::of),
            rx_timestamps: (s.stamps.kernel + s.stamps.task > 0).then(|| RxStampsJson {
                source: s.stamps.source().into(),
                kernel_stamped: s.stamps.kernel,
                task_stamped: s.stamps.task,
                client_scheduling_delay: DistJson::of(&s.stamps.scheduling_delay),
                ttft_task_stamped: DistJson::of(&s.stamps.ttft_task_stamped),
            }),
            shard: k.shard.as_ref().map(|run| ShardJson {
                run: run.clone(),
                percentiles: r.header.percentiles.clone(),
                percentile_metrics: r
                    .header
                    .percentile_metrics
                    .iter()
                    .map(|m| m.key().into())
                    .collect(),
            }),
            merged: k.merged.clone(),
            reasoning: (s.reasoning.reasoning_requests > 0).then(|| ReasoningJson {
                ttfo: DistJson::of(&s.ttfo),
                answer_tpot: DistJson::of(&s.answer_tpot),
                total_reasoning_tokens: s.reasoning.reasoning_tokens,
                reasoning_requests: s.reasoning.reasoning_requests,
            }),
            prefix_cache: k.prefix_cache.clone(),
            spec_decode: k.spec_decode.clone(),
            gpu: k.gpu.clone(),
            sessions: k.sessions.as_ref().map(super::sessions::SessionsJson::of),
            ..Default::default()
        };
        if detailed {
            v.add_per_request(r);
        }
        v
    }

    /// `due_times`, `error_kinds` and (when the server sent any) `server_timings`.
    fn add_per_request(&mut self, r: &RunResult) {
        let recs = &r.records;
        self.due_times = Some(recs.iter().map(|x| x.due.as_secs_f64()).collect());
        self.error_kinds = Some(
            recs.iter()
                .map(|x| x.error.as_ref().map(|e| e.kind.as_str().to_string()))
                .collect(),
        );
        if recs.iter().any(|x| x.first_token_delay.is_some()) {
            let delays = recs
                .iter()
                .map(|x| x.first_token_delay.map(|d| d.as_secs_f64()));
            self.first_token_delays = Some(delays.collect());
        }
        if recs.iter().any(|x| x.reasoning_tokens() > 0) {
            self.ttfos = Some(
                recs.iter()
                    .map(|x| x.ttfo().map(|d| d.as_secs_f64()))
                    .collect(),
            );
            self.reasoning_tokens = Some(recs.iter().map(|x| x.reasoning_tokens()).collect());
        }
        if recs.iter().any(|x| x.turn.is_some()) {
            let turns = recs.iter().map(|x| {
                x.turn
                    .map_or([0, 0], |t| [t.session as u64, u64::from(t.turn)])
            });
            self.session_turns = Some(turns.collect());
        }
        if recs.iter().any(|x| x.server_timings.is_some()) {
            let timings = recs.iter().map(|x| {
                x.server_timings.as_deref().map(|t| ServerTimings {
                    cache_n: t.cache_n,
                    prompt_n: t.prompt_n,
                    prompt_ms: t.prompt_ms,
                    predicted_n: t.predicted_n,
                    predicted_ms: t.predicted_ms,
                })
            });
            self.server_timings = Some(timings.collect());
        }
    }
}

impl GeneratorJson {
    pub fn of(g: &crate::result::run::GeneratorVerdict) -> Self {
        GeneratorJson {
            limited: g.health.limited,
            reasons: g.health.reasons.clone(),
            warnings: g.health.warnings.clone(),
            lateness_judged: g.lateness_judged,
            lateness_p99_ms: g.health.lateness_p99_ms,
            lateness_bound_ms: g.health.lateness_bound_ms,
            cpu_busy_fraction: g.cpu_busy_fraction,
            runtime_lag_p99_ms: g.runtime_lag_p99_ms,
            client_scheduling_delay_p99_ms: g.health.scheduling_delay_p99_ms,
        }
    }
}

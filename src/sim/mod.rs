//! sim: a simulated continuous-batching LLM server (OpenAI API + vLLM `/metrics`).
//!
//! `kneecap sim` serves `POST /v1/completions`, `/v1/chat/completions` and `/v1/responses`
//! (streamed as vLLM streams them, or not), the pooling APIs `/v1/embeddings`,
//! `/pooling` and `/v1/rerank` (one JSON answer), `GET /v1/models`, `/health` and
//! `/metrics`, backed by a model of vLLM's scheduler instead of a GPU. It is
//! also the target kneecap embeds when no `--base-url` is given.
//!
//! Words: a *batch step* is one pass of the engine over its running batch
//! (never a sweep's step); the *server log* is the `--trace FILE` it writes,
//! one line per request (never a replayed trace, which is `workload::trace`).
//!
//! # Layout
//! - [`model`]: the engine model (running batch, FIFO queue, KV budget,
//!   chunked prefill, recompute preemption). Pure.
//! - [`params`]: the engine's parameters and the batch-step time formula, with
//!   the prefill interference (how much an arriving prefill slows the
//!   decoding batch: 1 one shared batch step, 0 disaggregated). Pure.
//! - [`stalls`]: the host's stalls (the engine paused by what shares its
//!   cores), seeded, lengthening the steps they fall in. Pure.
//! - [`spec`]: speculative decoding: the seeded acceptance of each step's
//!   drafts, its cost on top of the step time, vLLM's counters. Pure.
//! - [`capacity`]: the sustainable rate μ for a workload shape. Pure.
//! - [`virtual_time`]: the engine model run in virtual time on an open,
//!   seeded load (a discrete-event simulation), for the true knee. Pure.
//! - [`preset`]: named parameter sets (`tiny`, `7b-24gb`).
//! - [`api`]: request parsing, the toy tokenizer, response/chunk JSON. Pure.
//! - [`responses`]: the Responses API's events (`/v1/responses`). Pure.
//! - [`pooling`]: the pooling APIs' requests, cost model and answers. Pure.
//! - [`fault`]: seeded fault injection plans. Pure.
//! - [`driver`]: the engine thread that runs the model on the wall clock.
//! - [`server`], `conn`, `pool_serve`, `reply`, [`stream`], [`shared`], [`tls`],
//!   [`server_log`], [`metrics`]: the I/O edge; none imports one listed before it.
//!
//! # Entry points for the CLI and the embedding code
//! - [`SimConfig::from_preset`], then adjust fields; [`SimConfig::validate`].
//! - [`start`]`(cfg, listener) -> SimHandle` runs in-process;
//!   [`SimHandle::addr`], [`SimHandle::shutdown`] (graceful, flushes the server log),
//!   [`SimHandle::max_batch_step_lag`].
//! - [`service_rate`] (μ in req/s) and [`explain`] (the derivation as text).
//! - `SimOptions` is what `kneecap sim` validated; the command layer serves it.
//!
//! # Timing and capacity (measured on the 2-core dev VM, release build)
//! The engine thread releases each step at its model time: sleep with 1 ns
//! timer slack, then spin the last 100 µs (a plain millisecond timer would be
//! off by up to a whole 5 ms step). The lag behind the step clock is on
//! `/metrics` (`kneecap_sim_step_lag_seconds`, `..._max_seconds`), in the
//! server log's summary line and in the shutdown message. With 2,000 concurrent
//! streams at ~55k tokens/s (client in the same process, both cores busy):
//! p50 ≤ 10 µs, p99 ≤ 50 µs, max 0.3–0.6 ms with the engine thread on
//! `SCHED_FIFO` (granted to root / `CAP_SYS_NICE`); without it, p99 2.5–25 ms
//! and max up to ~100 ms, because a normal thread's wake-up waits for busy
//! connection threads. `tests/it/sim_load.rs` / `bench/sim_load.sh` reproduce this.

pub mod api;
pub mod api_error;
pub mod blocks;
mod budget;
pub mod capacity;
mod conn;
pub mod driver;
pub mod events;
pub mod fault;
pub mod gpu;
pub mod images;
pub mod metrics;
pub mod model;
pub mod params;
mod pool_serve;
pub mod pooling;
pub mod prefix;
pub mod preset;
mod reply;
pub mod responses;
pub mod server;
pub mod server_log;
pub mod shared;
pub mod spec;
pub mod stalls;
pub mod stream;
pub mod tls;
pub mod usage;
pub mod virtual_time;

use std::fmt::Write as _;
use std::path::PathBuf;

use anyhow::Context as _;

pub use fault::Faults;
pub use model::ModelParams;
pub use server::{start, SimHandle};

/// Everything the simulator needs (clap-free).
#[derive(Debug, Clone)]
pub struct SimConfig {
    /// Name of the preset the parameters came from (for messages).
    pub preset: String,
    /// Engine parameters.
    pub params: ModelParams,
    /// Model name in responses and `/v1/models`.
    pub served_model_name: String,
    /// Seed for sampled output lengths and faults.
    pub seed: u64,
    /// `--trace FILE`: the server log, one JSON line per request.
    pub server_log: Option<PathBuf>,
    /// Fault injection fractions.
    pub faults: Faults,
    /// Try to run the engine thread with `SCHED_FIFO` priority (best effort;
    /// see [`driver::try_realtime`]). Default true.
    pub realtime_engine: bool,
    /// Time a client has to send a request's headers, and then again its
    /// body; a client slower than that (slowloris) is cut. Default 30 s.
    pub read_timeout: std::time::Duration,
    /// `--tls-cert`/`--tls-key`: serve https instead of http.
    pub tls: Option<tls::SimTls>,
    /// `--reasoning-tokens N`: the first N output tokens of every request are
    /// reasoning, streamed (on chat) in `reasoning_field` before the answer.
    pub reasoning_tokens: u32,
    /// Which chat delta field carries reasoning (`reasoning`, as vLLM).
    pub reasoning_field: api::ReasoningField,
    /// Automatic prefix caching (vLLM V1's default, on): see [`model`].
    pub prefix_caching: bool,
    /// `--spec-draft-tokens`/`--spec-acceptance`: speculative decoding
    /// ([`spec`]), off by default.
    pub spec: Option<spec::SpecDecode>,
    /// `--gpu-watts-idle`/`--gpu-watts-busy`: serve DCGM GPU gauges on
    /// `/metrics` ([`gpu`]), off by default.
    pub gpu_watts: Option<gpu::GpuWatts>,
}

/// Default `--served-model-name`.
pub const DEFAULT_MODEL_NAME: &str = "kneecap-sim";

impl SimConfig {
    /// The configuration of preset `name` (see [`preset::NAMES`]) with
    /// defaults for everything else.
    pub fn from_preset(name: &str) -> anyhow::Result<Self> {
        let params = preset::by_name(name).with_context(|| {
            format!(
                "unknown sim preset {name:?}; choose one of: {}",
                preset::NAMES.join(", ")
            )
        })?;
        Ok(Self {
            preset: name.to_owned(),
            params,
            served_model_name: DEFAULT_MODEL_NAME.to_owned(),
            seed: 0,
            server_log: None,
            faults: Faults::default(),
            realtime_engine: true,
            read_timeout: server::READ_TIMEOUT,
            tls: None,
            reasoning_tokens: 0,
            reasoning_field: api::ReasoningField::default(),
            prefix_caching: true,
            spec: None,
            gpu_watts: None,
        })
    }

    /// Checks parameters and fault fractions.
    pub fn validate(&self) -> anyhow::Result<()> {
        self.params
            .validate()
            .map_err(|e| anyhow::anyhow!("invalid sim parameters: {e}"))?;
        self.faults.validate().map_err(anyhow::Error::msg)?;
        if let Some(spec) = &self.spec {
            spec.validate().map_err(anyhow::Error::msg)?;
        }
        if let Some(w) = &self.gpu_watts {
            w.validate().map_err(anyhow::Error::msg)?;
        }
        if self.read_timeout.is_zero() {
            anyhow::bail!("the read timeout must be positive");
        }
        if self.served_model_name.is_empty() {
            anyhow::bail!("--served-model-name must not be empty");
        }
        Ok(())
    }
}

/// The `kneecap sim` command, validated.
#[derive(Debug, Clone)]
pub struct SimOptions {
    /// The simulator's configuration.
    pub config: SimConfig,
    /// Address to bind.
    pub host: String,
    /// Port to bind (0 = any free port).
    pub port: u16,
    /// `--explain`: print the capacity of this (input, output) shape and exit.
    pub explain: Option<(u32, u32)>,
    /// `--cache-hit-fraction`: the share of each prompt `--explain` assumes
    /// the prefix cache serves (0 by default).
    pub explain_cache_hit: f64,
}

/// Sustainable request rate μ (requests/s) for prompts of `input_len` and
/// outputs of `output_len` tokens (see [`capacity`] for the derivation).
pub fn service_rate(cfg: &SimConfig, input_len: u32, output_len: u32) -> f64 {
    capacity::capacity(&cfg.params, input_len, output_len).mu
}

/// Human-readable capacity of the sim for a workload shape: the parameters,
/// the lone-request latencies, the binding limit and μ.
pub fn explain(cfg: &SimConfig, input_len: u32, output_len: u32) -> String {
    explain_cached(cfg, input_len, output_len, 0.0)
}

/// μ (requests/s) when the prefix cache serves `hit_fraction` of every prompt.
pub fn service_rate_cached(
    cfg: &SimConfig,
    input_len: u32,
    output_len: u32,
    hit_fraction: f64,
) -> f64 {
    capacity::capacity_cached(&cfg.params, input_len, output_len, hit_fraction).mu
}

/// [`explain`] when the prefix cache serves `hit_fraction` of every prompt.
pub fn explain_cached(
    cfg: &SimConfig,
    input_len: u32,
    output_len: u32,
    hit_fraction: f64,
) -> String {
    let p = &cfg.params;
    let c = capacity::capacity_cached(p, input_len, output_len, hit_fraction);
    let us = |d: std::time::Duration| d.as_secs_f64() * 1e6;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "kneecap sim, preset {} (simulated, not measured)",
        cfg.preset
    );
    let _ = writeln!(
        s,
        "  max_num_seqs {}, max_num_batched_tokens {}, KV cache {} tokens, max_model_len {}",
        p.max_num_seqs, p.max_num_batched_tokens, p.kv_cache_tokens, p.max_model_len
    );
    let _ = writeln!(
        s,
        "  step time = {:.0} us + {:.1} us x prefill tokens + {:.1} us x decoding seqs",
        us(p.step_base),
        us(p.per_prefill_token),
        us(p.per_decode_seq)
    );
    if p.prefill_interference != 1.0 {
        let _ = writeln!(
            s,
            "  prefill interference {:.2}: a prefill lengthens the decode steps beside it by that times its lone cost (0 = disaggregated)",
            p.prefill_interference
        );
    }
    let _ = writeln!(
        s,
        "workload: {input_len} input tokens, {output_len} output tokens (ignore_eos)"
    );
    if hit_fraction > 0.0 {
        let _ = writeln!(
            s,
            "  prefix cache serves {:.0}% of each prompt: {:.0} tokens computed per request",
            hit_fraction * 100.0,
            (f64::from(input_len) * (1.0 - hit_fraction)).max(1.0)
        );
    }
    let _ = writeln!(
        s,
        "  lone request: TTFT {:.2} ms, TPOT {:.2} ms",
        c.lone_ttft_s * 1e3,
        c.lone_tpot_s * 1e3
    );
    let limit = match c.bottleneck {
        capacity::Bottleneck::MaxNumSeqs => "max_num_seqs",
        capacity::Bottleneck::KvCache => "KV cache (an upper estimate: preemptions add recompute)",
        capacity::Bottleneck::TokenBudget => "per-step token budget",
        capacity::Bottleneck::PrefillLane => "prefill compute (beside the decode steps)",
    };
    let _ = writeln!(
        s,
        "  at saturation: batch {:.1} seqs, {:.1} steps per request, step {:.2} ms; limited by {limit}",
        c.batch,
        c.lifetime_batch_steps,
        c.batch_step_s * 1e3
    );
    let _ = writeln!(
        s,
        "service rate mu = {:.2} req/s ({:.0} output tok/s)",
        c.mu, c.output_tokens_per_s
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn explain_states_mu_and_labels_it_simulated() {
        let cfg = SimConfig::from_preset("tiny").unwrap();
        let text = explain(&cfg, 128, 64);
        assert!(text.contains("simulated"));
        assert!(text.contains(&format!("{:.2} req/s", service_rate(&cfg, 128, 64))));
        let cached = explain_cached(&cfg, 1024, 16, 0.9);
        assert!(cached.contains("serves 90% of each prompt"), "{cached}");
        let mu = service_rate_cached(&cfg, 1024, 16, 0.9);
        assert!(cached.contains(&format!("{mu:.2} req/s")));
        assert!(mu > service_rate(&cfg, 1024, 16));
    }

    #[test]
    fn unknown_preset_lists_the_known_ones() {
        let err = SimConfig::from_preset("70b").unwrap_err().to_string();
        assert!(err.contains("tiny") && err.contains("7b-24gb"), "{err}");
    }
}

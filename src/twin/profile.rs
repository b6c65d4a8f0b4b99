//! `ServerProfile`: the simulator's parameters as `kneecap profile` measured
//! them on a server, each with its uncertainty and how it was measured; the
//! versioned JSON file `profile -o` writes and `sim --profile` / `predict`
//! read (through [`ServerProfile::from_json`], which `super::bounds` holds:
//! a file is read only through its checks). Pure data and conversions.
//!
//! Every parameter is an [`Estimate`]: a central `value`, a standard
//! uncertainty (1σ, already widened when the model did not explain the
//! data), and the plausible range `low ..= high` (about ±2σ, clipped to what
//! is physical; `high` is `None` when nothing bounds it from above, as for a
//! batch limit the probes never reached). [`ServerProfile::params`] gives
//! the simulator's parameters at the central values, [`ServerProfile::corners`]
//! the parameter sets at the ends of the ranges, for an interval on any
//! prediction.

pub use super::estimate::{Estimate, Status, SYSTEMATIC_SHARE};
use super::predict::Misfit;
use super::ranges;
use crate::sim::blocks::BLOCK_TOKENS;
use crate::sim::params::{HostStalls, MAX_INTERFERENCE};
use crate::sim::{ModelParams, SimConfig};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// The JSON layout's version. 2 added [`Status::NotIdentifiable`], 3 the
/// costs of context and of each request (read from older files as 0; so
/// are the later prefill pair and step costs and the host's stalls);
/// [`ServerProfile::from_json`] reads it and every earlier one back to
/// [`FIRST_SCHEMA_VERSION`], and refuses others.
pub const SCHEMA_VERSION: u32 = 3;
/// The oldest layout still read (version 1 has no `not_identifiable`).
pub const FIRST_SCHEMA_VERSION: u32 = 1;

/// Whether the server reuses the KV of a prompt prefix it has seen.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PrefixCaching {
    /// On, off, or `None` when the probes could not tell.
    pub enabled: Option<bool>,
    /// The share of a repeated prompt's prefill time saved, mean over pairs
    /// (about 1 when on, 0 when off).
    pub saved_fraction: Option<f64>,
    /// Its standard uncertainty.
    pub uncertainty: Option<f64>,
    pub how: String,
}

/// The fitted parameters (the simulator's, plus the fixed prefill cost).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProfileParams {
    /// Fixed cost of every engine step, milliseconds.
    pub step_base_ms: Estimate,
    /// Cost of each prompt token, microseconds.
    pub prefill_token_us: Estimate,
    /// The intercept of time to first token against prompt length,
    /// milliseconds: the step base plus the server's own overhead per
    /// request (not a simulator parameter; compared with the step base).
    pub prefill_fixed_ms: Estimate,
    /// Cost of each decoding sequence in a step, microseconds.
    pub decode_seq_us: Estimate,
    /// Most sequences in the running batch.
    pub max_num_seqs: Estimate,
    /// KV-cache capacity, tokens.
    pub kv_cache_tokens: Estimate,
    /// Token budget of one step (chunked prefill).
    pub max_num_batched_tokens: Estimate,
    /// Longest prompt + output a request may ask for, tokens.
    pub max_model_len: Estimate,
    /// How much an arriving prefill slows the decoding batch, 0..=1.
    pub prefill_interference: Estimate,
    pub prefix_caching: PrefixCaching,
    /// Tokens per KV block, as the server reports it (vLLM's `block_size`
    /// in `vllm:cache_config_info`); absent when it reports none, and
    /// [`BLOCK_TOKENS`] is taken.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block_tokens: Option<u32>,
    /// Cost, in each step, of each token of context a decoding sequence
    /// attends over, microseconds.
    #[serde(default = "Estimate::not_profiled")]
    pub context_token_us: Estimate,
    /// Work each request costs the engine once, milliseconds.
    #[serde(default = "Estimate::not_profiled")]
    pub request_ms: Estimate,
    /// Cost of each attention pair of a prompt token (with each token
    /// before it in its sequence), nanoseconds.
    #[serde(default = "Estimate::not_profiled")]
    pub prefill_pair_ns: Estimate,
    /// What a step that computes prompt tokens costs beyond the step base,
    /// milliseconds.
    #[serde(default = "Estimate::not_profiled")]
    pub prefill_step_ms: Estimate,
    /// The host's stalls ([`crate::sim::stalls`]): how many per second of
    /// engine time.
    #[serde(default = "Estimate::not_profiled")]
    pub stall_rate_per_s: Estimate,
    /// Their mean length, milliseconds.
    #[serde(default = "Estimate::not_profiled")]
    pub stall_ms: Estimate,
}

/// What one probe did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbeSummary {
    /// `prefill`, `interference`, `decode`.
    pub name: String,
    pub requests: usize,
    pub failed: usize,
    pub duration_s: f64,
    /// What it sent (lengths, concurrencies).
    pub detail: String,
}

/// A server's profile: `kneecap profile`'s output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServerProfile {
    /// [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The kneecap that measured it.
    pub kneecap_version: String,
    /// The server's root URL (the built-in simulator's loopback address
    /// when `simulated`).
    pub base_url: String,
    pub simulated: bool,
    /// The model the probes asked for.
    pub model: String,
    /// Which `/metrics` names the server exposed (`vllm`, `llama_cpp`), if any.
    pub gauges: Option<String>,
    /// The time budget, and the time the probes took, seconds.
    pub budget_s: f64,
    pub elapsed_s: f64,
    pub params: ProfileParams,
    /// What the model could not explain, and what that leaves uncertain.
    pub warnings: Vec<String>,
    pub probes: Vec<ProbeSummary>,
}

/// A parameter set at one end of the profile's ranges.
#[derive(Debug, Clone, PartialEq)]
pub struct Corner {
    /// `slow` (every parameter at the end that costs capacity), `fast` (the
    /// other end), or `<parameter> low|high` (that one at an end, the rest
    /// central).
    pub name: String,
    pub params: ModelParams,
}

/// The least a flagged misfit widens a prediction's interval, each side.
pub const MISFIT_MIN_WIDEN: f64 = 0.10;
/// The most (a wider departure says the model does not describe the server).
pub const MISFIT_MAX_WIDEN: f64 = 0.50;

/// The stand-in for "no upper end" of a count in [`ServerProfile::corners`]:
/// the limit does not bind.
pub const UNBOUNDED_COUNT: f64 = 1.0e9;

/// Which way each parameter moves capacity: `true` when a larger value
/// means more capacity.
pub(crate) const NAMES: [(&str, bool); 13] = [
    ("step_base_ms", false),
    ("prefill_token_us", false),
    ("decode_seq_us", false),
    ("max_num_seqs", true),
    ("kv_cache_tokens", true),
    ("max_num_batched_tokens", true),
    ("prefill_interference", false),
    ("context_token_us", false),
    ("request_ms", false),
    ("prefill_pair_ns", false),
    ("prefill_step_ms", false),
    ("stall_rate_per_s", false),
    ("stall_ms", false),
];

impl ServerProfile {
    /// The simulator's parameters at the central values (a lower bound
    /// stands at its bound; the KV cache is raised to `max_model_len` if
    /// needed, so the set is always valid).
    pub fn params(&self) -> ModelParams {
        self.at(|_, e| e.value)
    }

    /// Parameter sets at the ends of the ranges: first `slow` and `fast`
    /// (every parameter at its capacity-lowering or capacity-raising end),
    /// then each parameter alone at its low and high end. A prediction's
    /// interval is the lowest and highest result over all of them (the knee
    /// need not move monotonically in every parameter).
    pub fn corners(&self) -> Vec<Corner> {
        let mut out = vec![
            Corner {
                name: "slow".into(),
                params: self.at(|i, e| e.end(!NAMES[i].1, UNBOUNDED_COUNT)),
            },
            Corner {
                name: "fast".into(),
                params: self.at(|i, e| e.end(NAMES[i].1, UNBOUNDED_COUNT)),
            },
        ];
        for (k, (name, _)) in NAMES.iter().enumerate() {
            for up in [false, true] {
                out.push(Corner {
                    name: format!("{name} {}", if up { "high" } else { "low" }),
                    params: self.at(|i, e| {
                        if i == k {
                            e.end(up, UNBOUNDED_COUNT)
                        } else {
                            e.value
                        }
                    }),
                });
            }
        }
        out
    }

    /// Sets `cfg`'s engine parameters (central values, the host's stalls
    /// drawn: [`Self::drawn`]) and prefix caching (kept as it is when the
    /// profile could not tell).
    pub fn apply(&self, cfg: &mut SimConfig) {
        cfg.params = self.drawn(self.params());
        if let Some(on) = self.params.prefix_caching.enabled {
            cfg.prefix_caching = on;
        }
    }

    /// The departure from the model the fits flagged, if any: each
    /// [`Status::Misfit`] or [`Status::NotIdentifiable`] parameter the
    /// simulator uses (not the TTFT intercept, which it never reads) with
    /// its reason (the costs of context and of a request only when misfit:
    /// an extra cost the probes cannot tell from 0 is an honest range from
    /// 0 up, which the corners already span), and how far a prediction's
    /// interval must widen beyond
    /// the corners: the largest relative half
    /// range (2σ / value) of a flagged parameter, at least
    /// [`MISFIT_MIN_WIDEN`] and at most [`MISFIT_MAX_WIDEN`]. A bad fit never
    /// leaves a tight interval.
    pub fn misfit(&self) -> Option<Misfit> {
        let p = &self.params;
        let named = [
            ("step base", &p.step_base_ms, true),
            ("prefill per token", &p.prefill_token_us, true),
            ("decode per sequence", &p.decode_seq_us, true),
            ("max num seqs", &p.max_num_seqs, true),
            ("KV cache", &p.kv_cache_tokens, true),
            ("token budget", &p.max_num_batched_tokens, true),
            ("prefill interference", &p.prefill_interference, true),
            ("context per token", &p.context_token_us, false),
            ("per request", &p.request_ms, false),
            ("prefill per attention pair", &p.prefill_pair_ns, false),
            ("prefill step", &p.prefill_step_ms, false),
            ("stall rate", &p.stall_rate_per_s, false),
            ("stall length", &p.stall_ms, false),
        ];
        let flagged: Vec<_> = named
            .iter()
            .filter(|(_, e, unpinned)| {
                e.status == Status::Misfit || (*unpinned && e.status == Status::NotIdentifiable)
            })
            .map(|(name, e, _)| (name, e))
            .collect();
        if flagged.is_empty() {
            return None;
        }
        let widest = flagged
            .iter()
            .map(|(_, e)| 2.0 * e.uncertainty / e.value.abs().max(f64::MIN_POSITIVE))
            .fold(0.0, |a: f64, b| if b.is_nan() { a } else { a.max(b) });
        Some(Misfit {
            widen: widest.clamp(MISFIT_MIN_WIDEN, MISFIT_MAX_WIDEN),
            reasons: flagged
                .iter()
                .map(|(name, e)| format!("{name}: {}", e.note.as_deref().unwrap_or("misfit")))
                .collect(),
        })
    }

    /// The profile as pretty JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default()
    }

    /// The estimates in [`NAMES`] order.
    pub(crate) fn estimates(&self) -> [&Estimate; 13] {
        let p = &self.params;
        [
            &p.step_base_ms,
            &p.prefill_token_us,
            &p.decode_seq_us,
            &p.max_num_seqs,
            &p.kv_cache_tokens,
            &p.max_num_batched_tokens,
            &p.prefill_interference,
            &p.context_token_us,
            &p.request_ms,
            &p.prefill_pair_ns,
            &p.prefill_step_ms,
            &p.stall_rate_per_s,
            &p.stall_ms,
        ]
    }

    /// `twin` (a set from [`Self::params`] or [`Self::corners`]) as the
    /// simulator serving the profile runs it: the host's stalls drawn at
    /// their central values, and the decode step without their share (the
    /// profile's decode line is fitted less it, [`super::decode::fit`]).
    pub fn drawn(&self, twin: ModelParams) -> ModelParams {
        let stalls = self.host_stalls();
        let plain = 1.0 / (1.0 + stalls.share());
        ModelParams {
            step_base: twin.step_base.mul_f64(plain).max(Duration::from_micros(1)),
            per_decode_seq: twin.per_decode_seq.mul_f64(plain),
            stalls,
            ..twin
        }
    }

    /// The host's stalls at their central values, held in their ranges
    /// (the twin redraws them over each TTFT: [`super::tail`]).
    pub fn host_stalls(&self) -> HostStalls {
        let e = self.estimates();
        HostStalls {
            rate_per_s: ranges::clamp(11, e[11].value),
            mean: micros(ranges::clamp(12, e[12].value) * 1e3),
        }
    }

    /// A parameter set with each of the values chosen by `pick`, held
    /// inside its physical range ([`ranges::clamp`]): whatever the file
    /// says, the set is valid and the simulator's arithmetic stays finite.
    /// The twin takes the host's stalls at their mean: the decode step
    /// longer by their share (as the decode levels' mean gaps had it), none
    /// drawn. Drawn as independent events in
    /// engine time they made queues vLLM's CPU engine did not have (its
    /// TTFT p99 came out 2–8× the measured one on 8 sequences and 256
    /// tokens a step: docs/benchmarks/2026-12-07.md); the simulator serving
    /// a profile draws them ([`Self::drawn`]).
    fn at(&self, pick: impl Fn(usize, &Estimate) -> f64) -> ModelParams {
        let e = self.estimates();
        let v: Vec<f64> = (0..NAMES.len())
            .map(|i| ranges::clamp(i, pick(i, e[i])))
            .collect();
        let max_model_len = count(ranges::clamp_model_len(self.params.max_model_len.value)).max(2);
        let params = ModelParams {
            step_base: micros(v[0] * 1e3).max(Duration::from_micros(1)),
            per_prefill_token: micros(v[1]),
            per_decode_seq: micros(v[2]),
            max_num_seqs: count(v[3]),
            kv_cache_tokens: count(v[4]).max(max_model_len),
            max_num_batched_tokens: count(v[5]),
            max_model_len,
            prefill_interference: if v[6].is_finite() {
                v[6].clamp(0.0, MAX_INTERFERENCE)
            } else {
                1.0
            },
            block_tokens: whole_blocks(self.params.block_tokens),
            per_context_token: micros(v[7]),
            per_request: micros(v[8] * 1e3),
            per_prefill_pair: micros(v[9] * 1e-3),
            per_prefill_step: micros(v[10] * 1e3),
            stalls: HostStalls::NONE,
        };
        let mean = HostStalls {
            rate_per_s: v[11],
            mean: micros(v[12] * 1e3),
        };
        let stretch = 1.0 + mean.share();
        ModelParams {
            step_base: params.step_base.mul_f64(stretch),
            per_decode_seq: params.per_decode_seq.mul_f64(stretch),
            ..params
        }
    }
}

/// A reported block size as the simulator holds it: the nearest positive
/// multiple of [`BLOCK_TOKENS`] (its prompt hashes' unit), at most 64 Ki.
fn whole_blocks(reported: Option<u32>) -> u32 {
    let b = reported.unwrap_or(BLOCK_TOKENS).min(1 << 16);
    ((b + BLOCK_TOKENS / 2) / BLOCK_TOKENS).max(1) * BLOCK_TOKENS
}

fn micros(us: f64) -> Duration {
    Duration::try_from_secs_f64(us.max(0.0) / 1e6).unwrap_or(Duration::ZERO)
}

fn count(x: f64) -> u32 {
    if x.is_finite() {
        x.round().clamp(1.0, f64::from(u32::MAX)) as u32
    } else {
        u32::MAX
    }
}

#[cfg(test)]
#[path = "profile_tests.rs"]
mod tests;

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

use super::predict::Misfit;
use super::ranges;
use crate::sim::blocks::BLOCK_TOKENS;
use crate::sim::{ModelParams, SimConfig};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// The JSON layout's version. 2 added [`Status::NotIdentifiable`], 3 the
/// costs of context and of each request (read from older files as 0);
/// [`ServerProfile::from_json`] reads it and every earlier one back to
/// [`FIRST_SCHEMA_VERSION`], and refuses others.
pub const SCHEMA_VERSION: u32 = 3;
/// The oldest layout still read (version 1 has no `not_identifiable`).
pub const FIRST_SCHEMA_VERSION: u32 = 1;

/// How an [`Estimate`] was obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Fitted from the probes; the model explained the data.
    Measured,
    /// Fitted, but the data departed from the model more than its noise
    /// allows; the uncertainty is widened to cover the departure.
    Misfit,
    /// The probes only showed the value is at least `value` (`high` is None).
    LowerBound,
    /// The server said so (`/v1/models`, `/metrics`).
    Reported,
    /// Not measurable here; `value` is an assumption (`how` says which).
    Assumed,
    /// Fitted, but the probes do not pin it down: its standard error is not
    /// smaller than its value (or not finite). `note` says why; the range
    /// runs from the physical floor up, and `uncertainty` is at least the
    /// value.
    NotIdentifiable,
}

/// The least standard uncertainty a measured parameter's range allows, as a
/// share of its value. A fit's σ is the scatter of its probes; what every
/// probe shares (the HTTP path's timing, the client's clock) does not
/// scatter and goes unseen. Measured by `bench/twin_recovery.sh`: on the
/// simulator, where the truth is known, the median fitted prefill cost is
/// 0.1–0.5% off while its σ says 0.15%, and a range of ±2σ alone missed the
/// true value; ±1% (2 × 0.5%) holds it.
pub const SYSTEMATIC_SHARE: f64 = 0.005;

/// One measured parameter.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Estimate {
    /// Central value, in the unit the field's name says.
    pub value: f64,
    /// Standard uncertainty (1σ), widened by any misfit; 0 when reported.
    pub uncertainty: f64,
    /// Lowest plausible value.
    pub low: f64,
    /// Highest plausible value; `None` when nothing bounds it from above.
    pub high: Option<f64>,
    pub status: Status,
    /// How it was measured (which probe, which fit, how many samples).
    pub how: String,
    /// What the model did not explain, when it did not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl Estimate {
    /// A fitted value with standard uncertainty `sigma`; the range is ±2σ,
    /// and at least ±2 × [`SYSTEMATIC_SHARE`] of the value, floored at
    /// `floor`.
    pub fn fitted(value: f64, sigma: f64, floor: f64, how: impl Into<String>) -> Self {
        let sigma = sigma.abs();
        let reach = 2.0 * sigma.max(SYSTEMATIC_SHARE * value.abs());
        Self {
            value,
            uncertainty: sigma,
            low: (value - reach).max(floor),
            high: Some(value + reach),
            status: Status::Measured,
            how: how.into(),
            note: None,
        }
    }

    /// The same estimate flagged as a misfit: `why` is recorded and the
    /// uncertainty (and range) grow to at least `sigma`.
    pub fn misfit(mut self, sigma: f64, floor: f64, why: impl Into<String>) -> Self {
        let sigma = sigma.abs().max(self.uncertainty);
        self.uncertainty = sigma;
        let reach = 2.0 * sigma.max(SYSTEMATIC_SHARE * self.value.abs());
        self.low = (self.value - reach).max(floor);
        self.high = self.high.map(|_| self.value + reach);
        self.status = Status::Misfit;
        self.note = Some(why.into());
        self
    }

    /// The same estimate marked [`Status::NotIdentifiable`]: `why` is
    /// recorded, the range opens down to `floor`, and a standard error that
    /// is not finite is stored as the value (a file holds only numbers).
    pub fn not_identifiable(mut self, floor: f64, why: impl Into<String>) -> Self {
        if !self.value.is_finite() {
            self.value = floor;
        }
        let sigma = self.uncertainty.abs();
        self.uncertainty = if sigma.is_finite() {
            sigma.max(self.value.abs())
        } else {
            self.value.abs()
        };
        self.low = floor.min(self.value);
        let high = self.value + 2.0 * sigma;
        self.high = self.high.and(high.is_finite().then_some(high));
        self.status = Status::NotIdentifiable;
        self.note = Some(why.into());
        self
    }

    /// At least `value`, nothing above it measured.
    pub fn lower_bound(value: f64, how: impl Into<String>) -> Self {
        Self {
            value,
            uncertainty: 0.0,
            low: value,
            high: None,
            status: Status::LowerBound,
            how: how.into(),
            note: None,
        }
    }

    /// A value the server reported.
    pub fn reported(value: f64, how: impl Into<String>) -> Self {
        Self {
            status: Status::Reported,
            high: Some(value),
            ..Self::lower_bound(value, how)
        }
    }

    /// A cost an older profile did not measure: 0, as kneecap modelled it
    /// then.
    pub fn not_profiled() -> Self {
        Self::assumed(
            0.0,
            0.0,
            Some(0.0),
            "not in this profile (written before kneecap measured it): assumed 0",
        )
    }

    /// An assumption within `low ..= high`.
    pub fn assumed(value: f64, low: f64, high: Option<f64>, how: impl Into<String>) -> Self {
        Self {
            value,
            uncertainty: 0.0,
            low,
            high,
            status: Status::Assumed,
            how: how.into(),
            note: None,
        }
    }

    /// The value at one end of the range: `high` (or `unbounded` when there
    /// is none) if `up`, else `low`.
    pub fn end(&self, up: bool, unbounded: f64) -> f64 {
        if up {
            self.high.unwrap_or(unbounded)
        } else {
            self.low
        }
    }
}

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
pub(crate) const NAMES: [(&str, bool); 11] = [
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

    /// Sets `cfg`'s engine parameters (central values) and prefix caching
    /// (kept as it is when the profile could not tell).
    pub fn apply(&self, cfg: &mut SimConfig) {
        cfg.params = self.params();
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
    pub(crate) fn estimates(&self) -> [&Estimate; 11] {
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
        ]
    }

    /// A parameter set with each of the values chosen by `pick`, held
    /// inside its physical range ([`ranges::clamp`]): whatever the file
    /// says, the set is valid and the simulator's arithmetic stays finite.
    fn at(&self, pick: impl Fn(usize, &Estimate) -> f64) -> ModelParams {
        let e = self.estimates();
        let v: Vec<f64> = (0..NAMES.len())
            .map(|i| ranges::clamp(i, pick(i, e[i])))
            .collect();
        let max_model_len = count(ranges::clamp_model_len(self.params.max_model_len.value)).max(2);
        ModelParams {
            step_base: micros(v[0] * 1e3).max(Duration::from_micros(1)),
            per_prefill_token: micros(v[1]),
            per_decode_seq: micros(v[2]),
            max_num_seqs: count(v[3]),
            kv_cache_tokens: count(v[4]).max(max_model_len),
            max_num_batched_tokens: count(v[5]),
            max_model_len,
            prefill_interference: if v[6].is_finite() {
                v[6].clamp(0.0, 1.0)
            } else {
                1.0
            },
            block_tokens: whole_blocks(self.params.block_tokens),
            per_context_token: micros(v[7]),
            per_request: micros(v[8] * 1e3),
            per_prefill_pair: micros(v[9] * 1e-3),
            per_prefill_step: micros(v[10] * 1e3),
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

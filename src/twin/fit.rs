//! From the probes' observations to a [`ServerProfile`]: each fit in turn,
//! in the order their dependencies need (prefill first, then interference,
//! which needs the prefill cost, then decode, which needs both), plus what
//! no single fit sees: a fixed cost the step base does not explain, and
//! what could not be measured. Pure.

use super::bounds;
use super::decode::{self, DecodeFit};
use super::interference::{self, InterferenceObs};
use super::kv;
use super::mixed::{self, MixedObs};
use super::observe::{DecodeLevel, KvPoint};
use super::prefill::{self, PrefillFit, TtftSample};
use super::prefill_batch::BatchSample;
use super::profile::{
    Estimate, PrefixCaching, ProbeSummary, ProfileParams, ServerProfile, SCHEMA_VERSION,
};
use super::prompt_step;
use super::reported;
use super::stalls;
use serde::{Deserialize, Serialize};

/// vLLM's default `--max-num-batched-tokens`, assumed when no probe showed it.
pub const ASSUMED_BUDGET: f64 = 2048.0;

/// Everything the probes saw.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Observations {
    /// Lone requests (concurrency 1), in the order sent.
    pub prefill: Vec<TtftSample>,
    /// Steps of prompts sent together behind a blocker.
    pub prefill_batch: Vec<BatchSample>,
    /// Decoders streaming while prompts arrived.
    pub interference: Option<InterferenceObs>,
    /// Closed-loop levels at rising concurrency.
    pub decode: Vec<DecodeLevel>,
    /// A full batch with prompts arriving ([`super::mixed`]).
    pub mixed: Option<MixedObs>,
    /// Tokens in flight against KV usage, one mean point per decode level.
    pub kv_points: Vec<KvPoint>,
    /// The most tokens the probes held in flight at once.
    pub most_held_tokens: f64,
    /// Relative error the server's KV counting may add (block rounding).
    pub kv_systematic: f64,
    /// `max_model_len` from `GET /v1/models`, when listed.
    pub max_model_len: Option<u32>,
    /// The context of each slot, when the server reports one (llama.cpp).
    pub slot_context: Option<u32>,
    /// The longest prompt + output a probe request asked for and got.
    pub longest_request: u32,
    /// The KV cache the server reports (vLLM's `kv_cache_size_tokens`).
    pub reported_kv_tokens: Option<u64>,
    /// Whether the server reports prefix caching on.
    pub reported_prefix_caching: Option<bool>,
    /// The batch limit the server reports (a dev-mode vLLM's `max_num_seqs`).
    pub reported_max_num_seqs: Option<u64>,
    /// The token budget it reports (`max_num_batched_tokens`).
    pub reported_token_budget: Option<u64>,
    /// Tokens per KV block it reports (vLLM's `block_size`).
    pub reported_block_tokens: Option<u32>,
}

/// What the profile says about where it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Header {
    pub kneecap_version: String,
    pub base_url: String,
    pub simulated: bool,
    pub model: String,
    pub gauges: Option<String>,
    pub budget_s: f64,
    pub elapsed_s: f64,
    pub probes: Vec<ProbeSummary>,
}

/// A profile with what its probes saw, as `kneecap profile` writes it: the
/// profile's keys, and `observations`, which `kneecap profile --refit`
/// fits again (a newer fit of the same probes, no server needed). Readers
/// of the profile alone ignore the extra key.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Saved {
    #[serde(flatten)]
    pub profile: ServerProfile,
    pub observations: Option<Observations>,
}

impl Saved {
    /// The saved profile, pretty JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default()
    }

    /// The profile fitted again from its observations, with the saved
    /// profile's header; `None` when it holds none.
    pub fn refit(&self) -> Option<ServerProfile> {
        Some(fit(self.observations.as_ref()?, Header::of(&self.profile)))
    }
}

impl Header {
    /// The header a profile was written with.
    fn of(p: &ServerProfile) -> Self {
        Self {
            kneecap_version: p.kneecap_version.clone(),
            base_url: p.base_url.clone(),
            simulated: p.simulated,
            model: p.model.clone(),
            gauges: p.gauges.clone(),
            budget_s: p.budget_s,
            elapsed_s: p.elapsed_s,
            probes: p.probes.clone(),
        }
    }

    /// The profile of `params` and `warnings` under this header.
    fn profile(self, params: ProfileParams, warnings: Vec<String>) -> ServerProfile {
        ServerProfile {
            schema_version: SCHEMA_VERSION,
            kneecap_version: self.kneecap_version,
            base_url: self.base_url,
            simulated: self.simulated,
            model: self.model,
            gauges: self.gauges,
            budget_s: self.budget_s,
            elapsed_s: self.elapsed_s,
            params,
            warnings,
            probes: self.probes,
        }
    }
}

/// Fits every parameter; what could not be measured is assumed, bounded
/// and said so in the profile's warnings. When the server reports a token
/// budget shorter than the longest lone prompt, the prompt ran as several
/// prefill steps, each with the step's fixed cost: the prefill line is
/// fitted again on the TTFTs less those extra steps' base.
pub fn fit(obs: &Observations, header: Header) -> ServerProfile {
    let first = fit_once(obs, header.clone());
    let Some((adjusted, budget)) = unchunked(obs, &first) else {
        return first;
    };
    let mut p = fit_once(&adjusted, header);
    let base = p.params.step_base_ms.value;
    p.params.prefill_token_us.how += &format!(
        ", each TTFT less {base:.1} ms (the step base) for every prefill step past the first of a prompt longer than the token budget ({budget})"
    );
    p
}

/// The observations with each lone prompt's TTFT less the base of the
/// extra prefill steps a reported token budget `B` split it into
/// (`ceil(n / B) - 1` of them), and `B`; `None` when no prompt was longer,
/// the budget is only probed, or the step base is not measured. Against
/// vLLM with `--max-num-batched-tokens 256` the plain line read 658 µs a
/// prompt token, 256 tokens a step each paying a 50 ms base.
fn unchunked(obs: &Observations, first: &ServerProfile) -> Option<(Observations, u32)> {
    let budget = u32::try_from(obs.reported_token_budget?).ok()?.max(1);
    let base = &first.params.step_base_ms;
    let base_s = base.value / 1e3;
    let measured = matches!(base.status, super::Status::Measured) && base_s > 0.0;
    if !measured || obs.prefill.iter().all(|s| s.prompt_tokens <= budget) {
        return None;
    }
    let mut o = obs.clone();
    for s in &mut o.prefill {
        let extra = s.prompt_tokens.div_ceil(budget).saturating_sub(1);
        s.ttft_s -= f64::from(extra) * base_s;
    }
    Some((o, budget))
}

fn fit_once(obs: &Observations, header: Header) -> ServerProfile {
    let mut warnings = Vec::new();
    let pre = prefill::fit(&obs.prefill, &obs.prefill_batch);
    let (c_p, c_p_sigma) = pre.as_ref().map_or((0.0, 0.0), |p| {
        (
            p.per_token_us.value * 1e-6,
            p.per_token_us.uncertainty * 1e-6,
        )
    });
    let c_inj = injected_cost(obs, pre.as_ref(), c_p);
    let c_inj_sigma = c_p_sigma * c_inj / c_p.max(f64::MIN_POSITIVE);
    let alpha = alpha(obs, c_inj, c_inj_sigma, &mut warnings);
    let ac = (
        alpha.value * c_p,
        (alpha.uncertainty * c_p).hypot(alpha.value * c_p_sigma),
    );
    let stall = stalls::fit(&obs.decode);
    let dec = decode::fit(&obs.decode, ac, (stall.share, stall.visible_below_s))
        .map(|d| mixed::sustained(obs.mixed.as_ref(), d));
    let loaded = (obs.mixed.as_ref(), dec.clone(), pre.as_ref());
    let (step_base_ms, decode_seq_us, max_num_seqs, [context_token_us, request_ms]) =
        decode_parts(dec, &mut warnings);
    let (max_num_seqs, seqs_off) = reported::figure(
        reported::MAX_NUM_SEQS,
        max_num_seqs,
        obs.reported_max_num_seqs,
    );
    warnings.extend(seqs_off);
    let (prefill_token_us, prefill_fixed_ms, prefill_pair_ns) =
        prefill_parts(pre.as_ref(), &mut warnings);
    let prefill_step_ms = beside_decoders(obs, pre.as_ref(), alpha.value, c_p)
        .unwrap_or_else(|| prefill_step(pre.as_ref(), &step_base_ms));
    let quiet_decoders = obs.interference.as_ref().map_or(0, |o| o.decoders);
    let alpha = mixed::under_load(
        loaded,
        (stall.share, quiet_decoders),
        &prefill_step_ms,
        alpha,
        &mut warnings,
    );
    if let Some(w) = fixed_cost_gap(&prefill_fixed_ms, &step_base_ms, &prefill_step_ms) {
        warnings.push(w);
    }
    let budget = budget(obs, pre.as_ref(), &alpha, c_inj, c_inj_sigma);
    let (budget, budget_off) =
        reported::figure(reported::TOKEN_BUDGET, budget, obs.reported_token_budget);
    warnings.extend(budget_off);
    let (kv_cache_tokens, prefix_caching) = cache(obs, pre.as_ref(), &max_num_seqs, &mut warnings);
    if prefix_caching.enabled.is_none() {
        warnings.push(format!(
            "prefix caching undecided ({}); the simulator keeps its default (on)",
            prefix_caching.how
        ));
    }
    let mut params = ProfileParams {
        step_base_ms,
        prefill_token_us,
        prefill_fixed_ms,
        decode_seq_us,
        max_num_seqs,
        kv_cache_tokens,
        max_num_batched_tokens: budget,
        max_model_len: model_len(obs),
        prefill_interference: alpha,
        prefix_caching,
        block_tokens: obs.reported_block_tokens,
        context_token_us,
        request_ms,
        prefill_pair_ns,
        prefill_step_ms,
        stall_rate_per_s: stall.rate_per_s,
        stall_ms: stall.mean_ms,
    };
    warnings.extend(bounds::pin_down(&mut params, obs.most_held_tokens));
    header.profile(params, warnings)
}

/// The interference probe's prompts' cost per token, seconds: the
/// prefill's at their length (their attention pairs included); `c_p`
/// without them or without a prefill fit.
fn injected_cost(obs: &Observations, pre: Option<&PrefillFit>, c_p: f64) -> f64 {
    let n = obs
        .interference
        .as_ref()
        .and_then(|o| o.injections.iter().map(|i| i.prompt_tokens).max())
        .unwrap_or(0);
    pre.filter(|_| n > 0)
        .map_or(c_p, |p| p.cost_s(n) / f64::from(n))
}

/// The prefill interference from the probe, or 1 assumed (and said so).
fn alpha(obs: &Observations, c: f64, sigma: f64, warnings: &mut Vec<String>) -> Estimate {
    obs.interference
        .as_ref()
        .and_then(|o| interference::fit_alpha(o, c, sigma))
        .unwrap_or_else(|| {
            warnings.push("prefill interference not measured: assumed 1 (one shared batch step), anywhere in 0..3".into());
            Estimate::assumed(1.0, 0.0, Some(1.0), "not measured; 1 assumed (vLLM, SGLang, llama.cpp)")
        })
}

/// The KV cache and prefix caching: what the probes measured, or what the
/// server reports beside it ([`reported`]), with their warnings.
fn cache(
    obs: &Observations,
    pre: Option<&PrefillFit>,
    max_num_seqs: &Estimate,
    warnings: &mut Vec<String>,
) -> (Estimate, PrefixCaching) {
    let kv_probed = match obs.slot_context {
        Some(ctx) if obs.kv_points.is_empty() => kv::per_slot(ctx, max_num_seqs),
        _ => kv::fit(&obs.kv_points, obs.most_held_tokens, obs.kv_systematic),
    };
    let kv_probed = bounds::identifiable(kv_probed, obs.most_held_tokens.max(1.0));
    let (kv_cache_tokens, kv_off) = reported::kv(kv_probed, obs.reported_kv_tokens);
    let kv_note = kv_cache_tokens
        .note
        .as_ref()
        .map(|n| match kv_cache_tokens.status {
            super::Status::NotIdentifiable => format!("KV cache: {n}"),
            _ => n.clone(),
        });
    warnings.extend(kv_off.or(kv_note));
    let prefix_probed = match pre {
        Some(p) => prefill::prefix_caching(&obs.prefill, |n| p.cost_s(n)),
        None => prefill::prefix_caching(&[], |_| 0.0),
    };
    let (prefix_caching, prefix_off) = reported::prefix(prefix_probed, obs.reported_prefix_caching);
    warnings.extend(prefix_off);
    (kv_cache_tokens, prefix_caching)
}

/// The decode fit's parts: step base, cost per sequence, batch limit, and
/// the costs of context and of a request.
type DecodeParts = (Estimate, Estimate, Estimate, [Estimate; 2]);

fn decode_parts(dec: Option<DecodeFit>, warnings: &mut Vec<String>) -> DecodeParts {
    match dec {
        Some(d) => {
            warnings.extend(d.warnings);
            (
                d.step_base_ms,
                d.decode_seq_us,
                d.max_num_seqs,
                [d.context_token_us, d.request_ms],
            )
        }
        None => {
            warnings.push("the decode probe gave fewer than 3 usable levels: step base, decode cost and batch limit are not measured".into());
            let none = |v: f64, what: &str| {
                Estimate::assumed(v, 0.0, None, format!("not measured; {what}"))
            };
            let zero = || Estimate::assumed(0.0, 0.0, Some(0.0), "not measured; 0 assumed");
            (
                none(10.0, "10 ms assumed"),
                none(0.0, "0 assumed"),
                Estimate::lower_bound(1.0, "not measured"),
                [zero(), zero()],
            )
        }
    }
}

fn prefill_parts(
    pre: Option<&PrefillFit>,
    warnings: &mut Vec<String>,
) -> (Estimate, Estimate, Estimate) {
    match pre {
        Some(p) => {
            if let Some(n) = &p.per_token_us.note {
                warnings.push(n.clone());
            }
            (
                p.per_token_us.clone(),
                p.fixed_ms.clone(),
                p.pair_ns.clone(),
            )
        }
        None => {
            warnings.push(
                "the prefill probe gave too few answers: the prefill cost is not measured".into(),
            );
            (
                Estimate::assumed(0.0, 0.0, None, "not measured; 0 assumed"),
                Estimate::assumed(0.0, 0.0, None, "not measured"),
                Estimate::assumed(0.0, 0.0, Some(0.0), "not measured; 0 assumed"),
            )
        }
    }
}

/// What a step computing a short prompt beside decoders costs beyond the
/// prompt's tokens ([`prompt_step`]), when the interference probe sent
/// short prompts.
fn beside_decoders(
    obs: &Observations,
    pre: Option<&PrefillFit>,
    alpha: f64,
    c_p: f64,
) -> Option<Estimate> {
    let probe = obs.interference.as_ref()?;
    let cost = |n: u32| pre.map_or(c_p * f64::from(n), |p| p.cost_s(n));
    let reading = prompt_step::fixed_cost_ms(probe, alpha, cost)?;
    Some(prompt_step::estimate(reading, probe.decoders))
}

/// What a step of prompts sent together costs beyond the decode step's
/// base when the short prompts beside decoders do not say
/// ([`beside_decoders`]): the
/// batched steps' fixed cost less the base (held at 0 below it;
/// not identifiable when its σ is not below it); not profiled without
/// batched steps or a measured base.
fn prefill_step(pre: Option<&PrefillFit>, base: &Estimate) -> Estimate {
    let Some((s, se)) = pre.and_then(|p| p.batch_step) else {
        return Estimate::assumed(
            0.0,
            0.0,
            Some(0.0),
            "no steps of prompts sent together: 0 assumed",
        );
    };
    if base.status != super::Status::Measured {
        return Estimate::assumed(
            0.0,
            0.0,
            Some(0.0),
            "the step base is not measured: 0 assumed",
        );
    }
    Estimate::fitted_cost(
        s - base.value,
        se.hypot(base.uncertainty),
        format!("the fixed cost of a step of prompts sent together ({s:.1} ± {se:.1} ms, from the prefill curve) less the step base"),
    )
}

/// A fixed TTFT cost beyond the step base (and the prefill step's own):
/// work the simulator does not model.
fn fixed_cost_gap(fixed: &Estimate, base: &Estimate, step: &Estimate) -> Option<String> {
    let gap = fixed.value - base.value - step.value;
    let noise = 2.0 * fixed.uncertainty.hypot(base.uncertainty);
    (gap.abs() > noise.max(1.0).max(0.1 * base.value)).then(|| {
        if gap > 0.0 {
            format!("a lone request's TTFT has {gap:.1} ms of fixed cost beyond the step base (the server's own per-request work: tokenizing, scheduling, the network); the simulator has no such cost, so its TTFTs are about {gap:.1} ms low")
        } else {
            format!("a lone request's TTFT is {:.1} ms below the step base: the server's prefill steps are cheaper than its decode steps, which the simulator does not model", -gap)
        }
    })
}

/// The token budget: measured from chunking when seen, else assumed at
/// [`ASSUMED_BUDGET`] (never below what the probes showed it holds).
fn budget(
    obs: &Observations,
    pre: Option<&PrefillFit>,
    alpha: &Estimate,
    c_p: f64,
    c_p_sigma: f64,
) -> Estimate {
    let rel = if c_p > 0.0 { c_p_sigma / c_p } else { 0.0 };
    let seen = obs
        .interference
        .as_ref()
        .and_then(|o| interference::fit_budget(o, alpha, c_p, rel));
    if let Some(e) = seen
        .as_ref()
        .filter(|e| e.status != super::Status::LowerBound)
    {
        return e.clone();
    }
    let lone = pre
        .filter(|p| p.linear)
        .map_or(1.0, |p| f64::from(p.longest));
    let lb = seen.map_or(lone, |e| e.value.max(lone));
    Estimate::assumed(
        lb.max(ASSUMED_BUDGET),
        lb,
        None,
        format!("not seen: no prompt was split into chunks (it holds at least {lb:.0} tokens); vLLM's default {ASSUMED_BUDGET:.0} assumed"),
    )
}

fn model_len(obs: &Observations) -> Estimate {
    match (obs.max_model_len, obs.slot_context) {
        (Some(n), _) => Estimate::reported(f64::from(n), "max_model_len in GET /v1/models"),
        (None, Some(n)) => Estimate::reported(
            f64::from(n),
            "the context of one slot (meta.n_ctx in GET /v1/models)",
        ),
        (None, None) => Estimate::lower_bound(
            f64::from(obs.longest_request.max(2)),
            "not listed by GET /v1/models; at least the longest probe request",
        ),
    }
}

#[cfg(test)]
#[path = "fit_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "fit_more_tests.rs"]
mod more_tests;

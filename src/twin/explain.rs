//! Explains a predicted knee from the model: which resource binds it, read
//! off the engine's utilisation at the knee ([`Usage`]) and the SLOs that
//! fail just above it, and which parameter to move to test it ([`Knob`]).
//!
//! The rules, in order:
//! 1. **KV cache** when sequences are preempted (at least
//!    [`KV_PREEMPTIONS_PER_REQUEST`]) or requests wait with a slot free but no
//!    KV room for at least [`KV_BLOCKED_SHARE`] of the time.
//! 2. **Batch slots** when the SLO that fails is not a token-time one (TPOT,
//!    ITL: a full batch caps those rather than breaks them), the slots are
//!    pressed (all taken at least [`SLOTS_FULL_SHARE`] of the time, or a mean
//!    batch of [`SLOTS_MEAN_FILL`] of them), and the step's fixed cost is the
//!    largest share of the step time. At saturation that share is the
//!    elasticity of the service rate to the batch size (μ = B / (L·base +
//!    B·work)), so more slots would move the knee more than cheaper tokens.
//! 3. Otherwise **compute**: prefill when prompt tokens take more of the
//!    engine's work than the fixed cost and the decoding sequences together
//!    (their whole compute: below full prefill interference part of it runs
//!    beside the step, and a full prefill lane shows this way), decode
//!    (the step's fixed cost and the per-sequence cost) when not. Where the
//!    search can afford it (`twin::predict` with "what moves it"), the knee's
//!    sensitivity decides instead: the compute parameter whose ±25% moves the
//!    knee most names the compute that binds ([`explain_as`]). Time shares
//!    say what fills a step, not what the knee answers to: on the `7b-24gb`
//!    preset at 1024/128 the fixed step cost is 64% of the step time at the
//!    knee, yet ±25% of it moves the knee ±6% while ±25% of the prefill cost
//!    moves it −42%/+79%.
//!
//! Pure: numbers in, an explanation out.

use crate::result::explain::{Binding, Evidence, ExplainSource, KneeExplain};
use crate::sim::usage::Usage;
use crate::sim::ModelParams;
use crate::sweep::slo::{SloMetric, SloOutcome};

/// Preemptions per request that make the KV cache the binding resource.
pub const KV_PREEMPTIONS_PER_REQUEST: f64 = 0.01;
/// Share of the time with admission blocked for KV that makes it bind.
pub const KV_BLOCKED_SHARE: f64 = 0.05;
/// Share of the time with every slot taken that counts as pressed slots.
pub const SLOTS_FULL_SHARE: f64 = 0.05;
/// Mean batch, as a share of `max_num_seqs`, that counts as pressed slots.
pub const SLOTS_MEAN_FILL: f64 = 0.75;

/// What the search saw at a predicted knee.
#[derive(Debug, Clone, Copy)]
pub struct AtKnee<'a> {
    /// The engine's utilisation at the knee rate.
    pub usage: &'a Usage,
    /// The engine's batch limit.
    pub max_num_seqs: u32,
    /// The knee rate (req/s).
    pub rate: f64,
    /// The SLOs at the failing rate just above the knee.
    pub at_fail: &'a [SloOutcome],
    /// Whether the server kept up at the failing rate.
    pub fail_kept_up: bool,
}

impl AtKnee<'_> {
    fn preemptions_per_request(&self) -> f64 {
        let requests = self.rate * self.usage.window_s;
        if requests > 0.0 {
            self.usage.preemptions as f64 / requests
        } else {
            0.0
        }
    }

    fn failed(&self) -> impl Iterator<Item = &SloOutcome> {
        self.at_fail.iter().filter(|o| !o.pass)
    }

    /// Only token-time SLOs (TPOT, ITL) failed, and the server kept up.
    fn token_time_only(&self) -> bool {
        let token = |o: &&SloOutcome| matches!(o.slo.metric, SloMetric::Tpot | SloMetric::Itl);
        self.fail_kept_up && self.failed().count() > 0 && self.failed().all(|o| token(&o))
    }
}

/// The resource that binds the knee (see the module docs for the rules).
pub fn binding(a: &AtKnee) -> Binding {
    let u = a.usage;
    if a.preemptions_per_request() >= KV_PREEMPTIONS_PER_REQUEST
        || u.kv_blocked_share >= KV_BLOCKED_SHARE
    {
        return Binding::KvCache;
    }
    let pressed = u.full_slots_share >= SLOTS_FULL_SHARE
        || u.mean_running >= SLOTS_MEAN_FILL * f64::from(a.max_num_seqs);
    if !a.token_time_only() && pressed && u.base_share >= u.prefill_share.max(u.decode_share) {
        return Binding::BatchSlots;
    }
    if u.prefill_share > u.base_share + u.decode_share {
        Binding::PrefillCompute
    } else {
        Binding::DecodeCompute
    }
}

/// The explanation of a predicted knee, without what moves it (that takes
/// more searches: see `twin::predict`).
pub fn explain(a: &AtKnee) -> KneeExplain {
    explain_as(a, binding(a))
}

/// The explanation of a predicted knee bound by `binds` (found by
/// [`binding`], or by the knee's sensitivity to each parameter).
pub fn explain_as(a: &AtKnee, binds: Binding) -> KneeExplain {
    let u = a.usage;
    let evidence = Evidence {
        mean_running: Some(u.mean_running),
        max_num_seqs: Some(a.max_num_seqs),
        full_slots_share: Some(u.full_slots_share),
        mean_waiting: Some(u.mean_waiting),
        kv_usage: Some(u.mean_kv_usage),
        kv_blocked_share: Some(u.kv_blocked_share),
        preemptions_per_request: Some(a.preemptions_per_request()),
        base_share: Some(u.base_share),
        prefill_share: Some(u.prefill_share),
        decode_share: Some(u.decode_share),
    };
    let failed_slos: Vec<String> = a.failed().map(|o| o.slo.to_string()).collect();
    let above = if failed_slos.is_empty() {
        "above it the server falls behind".to_string()
    } else {
        format!("above it {} fails", failed_slos.join(" and "))
    };
    KneeExplain {
        binds,
        source: ExplainSource::Model,
        line: format!("{}: {}; {above}", binds.label(), reason(binds, a)),
        failed_slos,
        evidence,
        moves: None,
    }
}

fn pct(share: f64) -> String {
    format!("{:.0}%", share * 100.0)
}

/// The evidence behind `binds`, in words.
fn reason(binds: Binding, a: &AtKnee) -> String {
    let u = a.usage;
    let running = format!("{:.1} of {} running", u.mean_running, a.max_num_seqs);
    match binds {
        Binding::BatchSlots => format!(
            "{running} on average at the knee, all taken {} of the time, {} of the step time fixed cost",
            pct(u.full_slots_share),
            pct(u.base_share)
        ),
        Binding::KvCache => format!(
            "{} used on average, {:.2} preemptions per request, admission held back for KV {} of the time ({running})",
            pct(u.mean_kv_usage),
            a.preemptions_per_request(),
            pct(u.kv_blocked_share)
        ),
        Binding::PrefillCompute => format!(
            "prompt tokens are {} of the engine's work at the knee ({running})",
            pct(u.prefill_share)
        ),
        _ => format!(
            "the fixed step cost ({}) and decoding sequences ({}) take the step time at the knee ({running})",
            pct(u.base_share),
            pct(u.decode_share)
        ),
    }
}

/// A model parameter that moves a knee.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Knob {
    /// `max_num_seqs`.
    MaxNumSeqs,
    /// `kv_cache_tokens`.
    KvCacheTokens,
    /// `per_prefill_token`, in µs.
    PrefillTokenUs,
    /// `per_decode_seq`, in µs.
    DecodeSeqUs,
    /// `step_base`, in ms.
    StepBaseMs,
}

impl Knob {
    /// The parameters of the engine's compute: which of them moves the knee
    /// most says whether prefill or decode compute binds it.
    pub const COMPUTE: [Knob; 3] = [Knob::PrefillTokenUs, Knob::StepBaseMs, Knob::DecodeSeqUs];

    /// The resource this parameter sizes.
    pub fn binding(self) -> Binding {
        match self {
            Knob::MaxNumSeqs => Binding::BatchSlots,
            Knob::KvCacheTokens => Binding::KvCache,
            Knob::PrefillTokenUs => Binding::PrefillCompute,
            Knob::DecodeSeqUs | Knob::StepBaseMs => Binding::DecodeCompute,
        }
    }

    /// The parameter that binds as `binds`: for decode compute, the larger of
    /// the fixed step cost and the per-sequence cost at the knee.
    pub fn for_binding(binds: Binding, usage: &Usage) -> Option<Knob> {
        match binds {
            Binding::BatchSlots => Some(Knob::MaxNumSeqs),
            Binding::KvCache => Some(Knob::KvCacheTokens),
            Binding::PrefillCompute => Some(Knob::PrefillTokenUs),
            Binding::DecodeCompute if usage.decode_share > usage.base_share => {
                Some(Knob::DecodeSeqUs)
            }
            Binding::DecodeCompute => Some(Knob::StepBaseMs),
            Binding::Client | Binding::Unknown => None,
        }
    }

    /// The simulator flag's name, with underscores.
    pub fn name(self) -> &'static str {
        match self {
            Knob::MaxNumSeqs => "max_num_seqs",
            Knob::KvCacheTokens => "kv_cache_tokens",
            Knob::PrefillTokenUs => "prefill_token_us",
            Knob::DecodeSeqUs => "decode_seq_us",
            Knob::StepBaseMs => "step_base_ms",
        }
    }

    /// Its value in `p`, in the flag's unit.
    pub fn value(self, p: &ModelParams) -> f64 {
        match self {
            Knob::MaxNumSeqs => f64::from(p.max_num_seqs),
            Knob::KvCacheTokens => f64::from(p.kv_cache_tokens),
            Knob::PrefillTokenUs => p.per_prefill_token.as_secs_f64() * 1e6,
            Knob::DecodeSeqUs => p.per_decode_seq.as_secs_f64() * 1e6,
            Knob::StepBaseMs => p.step_base.as_secs_f64() * 1e3,
        }
    }

    /// `p` with this parameter scaled by `factor` (counts rounded, at least
    /// 1; a smaller KV cache also caps `max_model_len`, which must fit in it).
    pub fn scaled(self, p: &ModelParams, factor: f64) -> ModelParams {
        let count = |v: u32| ((f64::from(v) * factor).round() as u32).max(1);
        let base = p.clone();
        match self {
            Knob::MaxNumSeqs => ModelParams {
                max_num_seqs: count(p.max_num_seqs),
                ..base
            },
            Knob::KvCacheTokens => {
                let kv = count(p.kv_cache_tokens);
                ModelParams {
                    kv_cache_tokens: kv,
                    max_model_len: p.max_model_len.min(kv),
                    ..base
                }
            }
            Knob::PrefillTokenUs => ModelParams {
                per_prefill_token: p.per_prefill_token.mul_f64(factor),
                per_prefill_pair: p.per_prefill_pair.mul_f64(factor),
                per_prefill_step: p.per_prefill_step.mul_f64(factor),
                ..base
            },
            Knob::DecodeSeqUs => ModelParams {
                per_decode_seq: p.per_decode_seq.mul_f64(factor),
                ..base
            },
            Knob::StepBaseMs => ModelParams {
                step_base: p.step_base.mul_f64(factor),
                ..base
            },
        }
    }
}

#[cfg(test)]
#[path = "explain_tests.rs"]
mod tests;

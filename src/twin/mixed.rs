//! The mixed level: a full batch of decoders with prompts arriving all the
//! while, the regime a knee sits in, and the prefill interference `α` it
//! shows. Pure: the plan from the batch limit and the prefill curve, the
//! fit from the level's counts and the other fits' costs.
//!
//! **Why.** The interference probe measures `α` beside three decoders with
//! the server otherwise idle. On vLLM on a 2-core CPU the steps of a full
//! batch with prompts arriving take far longer than that model says (most
//! likely its front end, streaming a hundred outputs, takes the cores the
//! engine computes on). Seven profiles of one engine (dev mode, 2026-12-07)
//! read `α` 0.46–1.95 beside three decoders and predicted the 128/32 knee
//! at 10.5–17.3 req/s, five of them above 14, where four sweeps measured
//! 11–12.5 (throughput flat at 9.9–10.9 req/s); nine with this level
//! predicted 10.6–13.7 (docs/benchmarks/2026-12-07.md, "The mixed level").
//!
//! **The level.** `streams` = the batch limit (at most [`MAX_STREAMS`])
//! closed-loop streams of [`PROMPT`]-token prompts whose outputs spread over
//! 16..=48 tokens (mean 32), so that they finish at different steps and new
//! prompts arrive all the while; released over a ramp so that no wave of
//! prefills comes at once.
//!
//! **The fit.** Over the level's steady window of `W` seconds the engine is
//! never idle (a finished stream's next request is sent at once), so its
//! steps tile the window: with `τ` decode tokens a second over `B` streams
//! (`τ / B` steps a second), `R` prompt tokens a second of `P` each, the
//! model's step ([`crate::sim::ModelParams::step_time`]) gives
//!
//! `1 = τ (base · s / B + dec · s + ctx · C) + α (R c(P) / P + τ / B · F)`
//!
//! with `s` the host's stall stretch, `C` the decoders' mean context, `c(P)`
//! a lone prompt's prefill cost and `F` the prefill step's fixed cost: `α`
//! is what is left over the prefill's share. Counts, not gap medians: a
//! stall lengthens the window and the model adds stalls on its own.

use super::decode::{kv_bound, DecodeFit};
use super::observe::DecodeLevel;
use super::prefill::PrefillFit;
use super::profile::{Estimate, Status};
use crate::sim::params::MAX_INTERFERENCE;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Prompt tokens of the level's requests (not a shape the accuracy table or
/// the end-to-end tests predict).
pub const PROMPT: u32 = 256;
/// The outputs: `OUTPUT_LOW + (i × 7 mod OUTPUT_SPREAD)`, 16..=48, mean 32.
const OUTPUT_LOW: u32 = 16;
const OUTPUT_SPREAD: u32 = 33;
/// Most streams (vLLM's default batch limit is 128).
pub const MAX_STREAMS: usize = 128;
/// Steps the window lasts at most (about five turnovers of each stream);
/// a slow engine's level is cut to its room first (vLLM on CPU: 30-45
/// steps in 15% of 90 s), a fast one's is not cut short (the simulator's
/// README engine: 40 steps made a 0.5-s window that read `α` 0.84 of 1).
pub const WINDOW_STEPS: f64 = 160.0;
/// Most requests a stream is given after its first.
const MAX_EACH: f64 = 64.0;
/// Fewest usable gaps and prompts in the window.
const MIN_GAPS: usize = 100;
const MIN_PROMPTS: f64 = 8.0;

/// What the probe sends.
#[derive(Debug, Clone, PartialEq)]
pub struct MixedPlan {
    pub streams: usize,
    pub prompt: u32,
    /// One output length per request, in the order they are sent.
    pub outputs: Vec<u32>,
    /// When each of the first `streams` requests is released (a ramp);
    /// the rest follow as streams finish.
    pub ramp: Vec<Duration>,
    pub length: Duration,
}

/// What the level saw, and the prompt length it sent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MixedObs {
    pub prompt_tokens: u32,
    pub level: DecodeLevel,
}

/// The level for a batch limit of `limit` (`usize::MAX` when none showed)
/// within `room`: `prompt_s` a lone prompt's prefill (seconds), `gap` the
/// token gap the decode levels saw at `streams`. The ramp releases a stream
/// every eighth of a lone prefill (faster than the engine computes them:
/// it is busy from the ramp's end, the window's start); the level then
/// runs [`WINDOW_STEPS`] more steps at the full batch's gap (twice the
/// decode levels', for the prompts), and is cut to `room`. `None` when
/// `room` leaves under 20 such steps.
pub fn plan(
    limit: usize,
    max_len: u32,
    room: Duration,
    (prompt_s, gap): (f64, impl Fn(usize) -> f64),
) -> Option<MixedPlan> {
    let prompt = PROMPT.min(max_len.saturating_sub(OUTPUT_LOW + OUTPUT_SPREAD + 1));
    let streams = limit.clamp(1, MAX_STREAMS);
    if prompt < 16 {
        return None;
    }
    let plain = gap(streams);
    let step = 2.0 * plain;
    let spacing = (prompt_s / 8.0).max(0.001);
    let ramp_s = spacing * streams as f64;
    let length = (ramp_s + WINDOW_STEPS * step).min(room.as_secs_f64());
    if length < ramp_s + 20.0 * step {
        return None;
    }
    // Enough that no stream runs out, at the decode levels' gap and the
    // shortest output (at most [`MAX_EACH`] a stream: a long ramp over
    // short steps would otherwise ask for a hundred thousand prompts).
    let each = (length / (plain.max(1e-4) * f64::from(OUTPUT_LOW))).ceil();
    let count = streams * (1 + each.min(MAX_EACH) as usize);
    let outputs = (0..count)
        .map(|i| OUTPUT_LOW + (i as u32 * 7) % OUTPUT_SPREAD)
        .collect();
    Some(MixedPlan {
        streams,
        prompt,
        outputs,
        ramp: (0..streams)
            .map(|i| Duration::from_secs_f64(spacing * i as f64))
            .collect(),
        length: Duration::from_secs_f64(length),
    })
}

/// `α` from the mixed level, given the decode fit, the host's stall share
/// and the prefill curve; `None` when the level is too thin, filled the KV
/// cache, or a cost it needs was not measured.
pub fn fit_alpha(
    obs: &MixedObs,
    dec: &DecodeFit,
    stall_share: f64,
    pre: &PrefillFit,
    prefill_step_ms: f64,
) -> Option<Estimate> {
    let l = &obs.level;
    let w = l.window_s;
    let prompts = l.prefill_tokens_per_s * w / f64::from(obs.prompt_tokens.max(1));
    let thin = l.gaps < MIN_GAPS || w <= 0.0 || prompts < MIN_PROMPTS || l.streaming < 1.0;
    // A level that filled the KV cache recomputed what it preempted.
    if thin || kv_bound(l) {
        return None;
    }
    let costs = Costs::central(dec, pre, prefill_step_ms, stall_share);
    let raw = costs.alpha(l, obs.prompt_tokens);
    if !raw.is_finite() {
        return None;
    }
    let sigma = costs.sigma(l, obs.prompt_tokens, dec, raw);
    let how = format!(
        "a closed loop of {} streams, {}-token prompts and 16-48-token outputs ({prompts:.0} prompts in its {w:.1}-s window, {:.0} streaming): the time its steps left over the decode line, the context and the stalls, over the prompts' prefill cost",
        l.concurrency, obs.prompt_tokens, l.streaming
    );
    let held = raw.clamp(0.0, MAX_INTERFERENCE);
    let mut e = Estimate::fitted(held, sigma, 0.0, how);
    e.high = e.high.map(|h| h.min(MAX_INTERFERENCE));
    Some(e)
}

/// The interference the mixed level shows, when it pins it down (with the
/// interference probe's `quiet` one when the two agree); else the quiet
/// one (and said so).
pub fn under_load(
    (level, dec, pre): (Option<&MixedObs>, Option<DecodeFit>, Option<&PrefillFit>),
    (stall_share, quiet_decoders): (f64, usize),
    prefill_step_ms: &Estimate,
    quiet: Estimate,
    warnings: &mut Vec<String>,
) -> Estimate {
    let (Some(level), Some(dec), Some(pre)) = (level, dec, pre) else {
        return quiet;
    };
    match fit_alpha(level, &dec, stall_share, pre, prefill_step_ms.value) {
        Some(e) if e.uncertainty < e.value => combine(e, &quiet, quiet_decoders),
        Some(e) => {
            warnings.push(format!(
                "the mixed level's interference ({:.2} ± {:.2}) is not pinned down: the interference probe's {:.2} is kept",
                e.value, e.uncertainty, quiet.value
            ));
            quiet
        }
        None => quiet,
    }
}

/// Fewest clean gaps (no prompt beside them) the level needs to hold the
/// decode line to its full batch's step ([`sustained`]).
pub const MIN_CLEAN: usize = 50;

/// The decode line held to the mixed level's clean steps: the level's gaps
/// during which no prompt waited (decode-only steps of the full batch,
/// over a sustained window of many seconds) against the line's step at
/// their batch and context. When the two disagree by more than twice the
/// line's standard error there, the base and the cost per sequence are
/// scaled by their ratio, so that the line passes through the full batch's
/// step where the knee sits. On vLLM's CPU engine with 8 slots the decode
/// levels (windows of 0.3-2 s) read a full batch's step at 24-30 ms
/// early in the profile while the mixed level's 281 clean gaps had a
/// median of 40 ms, and the sweeps' steps at that batch measured 32-41 ms
/// a token (docs/benchmarks/2026-12-08.md): the engine runs slower
/// sustained than in short bursts.
pub fn sustained(level: Option<&MixedObs>, dec: DecodeFit) -> DecodeFit {
    let Some(clean) = level
        .and_then(|m| m.level.clean)
        .filter(|c| c.gaps >= MIN_CLEAN && c.batch >= 1.0 && c.median_gap_s > 0.0)
    else {
        return dec;
    };
    let (base, seq, ctx) = (&dec.step_base_ms, &dec.decode_seq_us, &dec.context_token_us);
    let b = clean.batch;
    let line = base.value * 1e-3 + seq.value * 1e-6 * b;
    let context = ctx.value.max(0.0) * 1e-6 * b * clean.context;
    let sigma = (base.uncertainty * 1e-3).hypot(seq.uncertainty * 1e-6 * b);
    let plain = clean.median_gap_s - context;
    if line <= 0.0 || plain <= 0.0 || (plain - line).abs() <= 2.0 * sigma {
        return dec;
    }
    let k = plain / line;
    let note = format!(
        "; scaled by {k:.2} to the mixed level's full batch: its {} clean gaps' median, {:.1} ms at {b:.1} decoding over {:.0} tokens of context, against the line's {:.1} ms (± {:.1}) there",
        clean.gaps,
        clean.median_gap_s * 1e3,
        clean.context,
        (line + context) * 1e3,
        sigma * 1e3
    );
    DecodeFit {
        step_base_ms: scaled(base, k, &note),
        decode_seq_us: scaled(seq, k, &note),
        ..dec
    }
}

/// `e` times `k` (its range and uncertainty with it), `note` added to how.
fn scaled(e: &Estimate, k: f64, note: &str) -> Estimate {
    let mut e = e.clone();
    e.value *= k;
    e.uncertainty *= k;
    e.low *= k;
    e.high = e.high.map(|h| h * k);
    e.how += note;
    e
}

/// The mixed level's `loaded` interference beside the interference probe's
/// `quiet` one: when the two agree (within twice their combined σ) they
/// read one `α`, and their inverse-variance mean is the estimate; when
/// they do not, the full batch's is the one a knee sees. On the simulator
/// (no front end sharing the engine's cores) a 0.5-s level read 0.84 ±
/// 0.10 where the probe read 0.98 ± 0.002 of a true 1.
pub fn combine(loaded: Estimate, quiet: &Estimate, quiet_decoders: usize) -> Estimate {
    let (a, sa) = (loaded.value, loaded.uncertainty);
    let (b, sb) = (quiet.value, quiet.uncertainty);
    let measured = quiet.status == Status::Measured && sb > 0.0 && sb.is_finite();
    let apart = (a - b).abs() / sa.hypot(sb);
    let quiet_read = format!(
        "beside {quiet_decoders} decoders of an otherwise idle server it read {b:.2} ± {sb:.2}"
    );
    if !measured || apart > 2.0 {
        let mut e = loaded;
        e.how += &format!("; {quiet_read}, {apart:.1}σ apart: the full batch's is taken");
        return e;
    }
    let (wa, wb) = (sa.powi(-2), sb.powi(-2));
    let value = (a * wa + b * wb) / (wa + wb);
    let how = format!(
        "{}; {quiet_read}: the two agree ({apart:.1}σ apart), their inverse-variance mean",
        loaded.how
    );
    let mut e = Estimate::fitted(value, (wa + wb).sqrt().recip(), 0.0, how);
    e.high = e.high.map(|h| h.min(MAX_INTERFERENCE));
    e
}

/// The costs the window's time is split by, seconds.
#[derive(Debug, Clone, Copy)]
struct Costs {
    base: f64,
    dec: f64,
    ctx: f64,
    /// A lone prompt's prefill cost per token at the level's length comes
    /// from the curve; `per_token` and `pair` are its coefficients.
    per_token: f64,
    pair: f64,
    fixed: f64,
    stretch: f64,
}

impl Costs {
    fn central(dec: &DecodeFit, pre: &PrefillFit, prefill_step_ms: f64, share: f64) -> Self {
        Self {
            base: dec.step_base_ms.value * 1e-3,
            dec: dec.decode_seq_us.value * 1e-6,
            ctx: dec.context_token_us.value.max(0.0) * 1e-6,
            per_token: pre.per_token_us.value * 1e-6,
            pair: pre.pair_ns.value.max(0.0) * 1e-9,
            fixed: prefill_step_ms.max(0.0) * 1e-3,
            stretch: 1.0 + share.max(0.0),
        }
    }

    fn alpha(&self, l: &DecodeLevel, prompt: u32) -> f64 {
        let tau = l.gaps as f64 / l.window_s;
        let b = l.streaming.max(1.0);
        let decode = tau
            * (self.base * self.stretch / b + self.dec * self.stretch + self.ctx * l.mean_context);
        let prefill = l.prefill_tokens_per_s * self.per_prompt_token(prompt) + tau / b * self.fixed;
        (1.0 - decode) / prefill
    }

    /// A lone prompt of `n` tokens' prefill cost per token, seconds.
    fn per_prompt_token(&self, n: u32) -> f64 {
        self.per_token + self.pair * (f64::from(n) + 1.0) / 2.0
    }

    /// `α`'s standard uncertainty given the prefill curve: each decode
    /// cost at its 1σ end in turn, and the window's own noise (its stalls'
    /// count). The curve's own uncertainty is the curve's: the model
    /// multiplies the two, and the level pins their product down at `P`
    /// (a lone prompt's cost read 20-30% high makes `α` as much lower).
    fn sigma(&self, l: &DecodeLevel, prompt: u32, dec: &DecodeFit, raw: f64) -> f64 {
        let shifted = [
            Self {
                base: self.base + dec.step_base_ms.uncertainty * 1e-3,
                ..*self
            },
            Self {
                dec: self.dec + dec.decode_seq_us.uncertainty * 1e-6,
                ..*self
            },
            Self {
                ctx: self.ctx + dec.context_token_us.uncertainty * 1e-6,
                ..*self
            },
        ];
        let costs = shifted
            .iter()
            .map(|c| c.alpha(l, prompt) - raw)
            .filter(|d| d.is_finite())
            .fold(0.0, |acc: f64, d| acc.hypot(d));
        // Each stall is seen by every stream: gaps / B of them, each of
        // excess / gaps.
        let b = l.streaming.max(1.0);
        let count = l.stalls.gaps as f64 / b;
        let each = l.stalls.excess_s / l.stalls.gaps.max(1) as f64;
        let window = count.sqrt() * each / l.window_s;
        let prefill = l.prefill_tokens_per_s * self.per_prompt_token(prompt);
        costs.hypot(window / prefill.max(f64::MIN_POSITIVE))
    }
}

#[cfg(test)]
#[path = "mixed_tests.rs"]
mod tests;

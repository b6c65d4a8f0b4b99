//! Speculative decoding in the simulator: the draft-and-verify parameters
//! (`--spec-draft-tokens K --spec-acceptance P`), the seeded acceptance draw
//! of each draft, what a batch step pays for it, and the counters vLLM
//! exports for it. Pure: no clock, no I/O; randomness is a hash of the seed.
//!
//! # The acceptance model
//! Each batch step, every decoding sequence proposes `K` draft tokens. They
//! are verified in order; each is accepted independently with probability
//! `P` until the first rejection, so a step accepts `a ∈ 0..=K` drafts and
//! emits `1 + a` tokens (the accepted drafts and the target model's own
//! next token). `E[a] = P + P² + … + P^K`. The draw for position `i` of the
//! draft a sequence makes after its `n`-th output token is a SplitMix64 hash
//! of `(seed, request id, n, i)`: the same run replays exactly, whatever the
//! batching around it. A request needing fewer tokens than `1 + a` stops at
//! its target; the counters count the drafts as drawn (vLLM counts what the
//! rejection sampler accepted, before the stop check).
//!
//! # The cost rule
//! A batch step with `D` decoding sequences and `S` draft tokens in all
//! (`S = K × D` unless the token budget cut some) costs, on top of
//! [`super::params::ModelParams::batch_step_time`],
//!
//! `K × draft_cost × (step_base + per_decode_seq × D) + verify_cost × per_decode_seq × S`
//!
//! - the draft model runs `K` passes over the batch, each `draft_cost` (a
//!   fraction, default 0.1: a draft model a tenth the size) of a target
//!   decode step;
//! - the target verifies `1 + K` tokens per sequence instead of 1: each
//!   draft token adds `verify_cost` (default 0.35) of a sequence's decode
//!   cost. The weights are read once per step whatever K is, so verifying
//!   is cheap while `step_base` dominates (light load) and costs its full
//!   share once the per-sequence term does (a full batch): the gain of
//!   speculation shrinks as the batch fills.

use std::time::Duration;

use super::blocks::splitmix64;
use super::params::ModelParams;

/// Most draft tokens per step the simulator models (`--spec-draft-tokens`).
pub const MAX_DRAFT_TOKENS: u32 = 16;

/// Default [`SpecDecode::draft_cost`].
pub const DEFAULT_DRAFT_COST: f64 = 0.1;
/// Default [`SpecDecode::verify_cost`].
pub const DEFAULT_VERIFY_COST: f64 = 0.35;

/// Speculative decoding's parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SpecDecode {
    /// Draft tokens each decoding sequence proposes per step (K, 1..=16).
    pub draft_tokens: u32,
    /// Probability that a draft token is accepted, given the ones before it were (P).
    pub acceptance: f64,
    /// One draft-model pass, as a fraction of a target decode step.
    pub draft_cost: f64,
    /// One verified draft token, as a fraction of a sequence's decode cost.
    pub verify_cost: f64,
}

impl SpecDecode {
    /// `K` drafts accepted with probability `P`, at the default costs.
    pub fn new(draft_tokens: u32, acceptance: f64) -> Self {
        Self {
            draft_tokens,
            acceptance,
            draft_cost: DEFAULT_DRAFT_COST,
            verify_cost: DEFAULT_VERIFY_COST,
        }
    }

    /// Checks the parameters; the message names the flag.
    pub fn validate(&self) -> Result<(), String> {
        if !(1..=MAX_DRAFT_TOKENS).contains(&self.draft_tokens) {
            return Err(format!(
                "--spec-draft-tokens must be between 1 and {MAX_DRAFT_TOKENS}, got {}",
                self.draft_tokens
            ));
        }
        if !(0.0..=1.0).contains(&self.acceptance) {
            return Err(format!(
                "--spec-acceptance must be between 0 and 1, got {}",
                self.acceptance
            ));
        }
        for (flag, v) in [
            ("--spec-draft-cost", self.draft_cost),
            ("--spec-verify-cost", self.verify_cost),
        ] {
            if !(v.is_finite() && v >= 0.0) {
                return Err(format!("{flag} must be a non-negative number, got {v}"));
            }
        }
        Ok(())
    }

    /// Drafts accepted (`0..=K`) for the draft request `id` makes after its
    /// `generated`-th output token, under `seed`.
    pub fn accepted(&self, seed: u64, id: u64, generated: u32, drafts: u32) -> u32 {
        let base = splitmix64(seed ^ splitmix64(id ^ (u64::from(generated) << 32)));
        (0..drafts.min(self.draft_tokens))
            .take_while(|&i| unit(splitmix64(base ^ u64::from(i + 1))) < self.acceptance)
            .count() as u32
    }

    /// The expected drafts accepted per step, `P + P² + … + P^K`.
    pub fn expected_accepted(&self) -> f64 {
        (1..=self.draft_tokens)
            .map(|i| self.acceptance.powi(i as i32))
            .sum()
    }

    /// What speculation adds to a batch step with `decode_seqs` decoding
    /// sequences and `draft_tokens` drafts in all (the module's cost rule);
    /// nothing when no draft was made.
    pub fn step_overhead(&self, p: &ModelParams, decode_seqs: u64, draft_tokens: u64) -> Duration {
        if draft_tokens == 0 {
            return Duration::ZERO;
        }
        let decode_step =
            p.step_base.as_secs_f64() + p.per_decode_seq.as_secs_f64() * decode_seqs as f64;
        let drafting = f64::from(self.draft_tokens) * self.draft_cost * decode_step;
        let verifying = self.verify_cost * p.per_decode_seq.as_secs_f64() * draft_tokens as f64;
        Duration::from_secs_f64(drafting + verifying)
    }
}

/// A hash as a uniform number in `[0, 1)` (its top 53 bits).
fn unit(h: u64) -> f64 {
    (h >> 11) as f64 / (1u64 << 53) as f64
}

/// vLLM's speculative-decoding counters (`vllm:spec_decode_*`), summed over
/// the engine's life.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SpecCounters {
    /// Drafts proposed (one per decoding sequence per step).
    pub drafts: u64,
    /// Draft tokens proposed.
    pub draft_tokens: u64,
    /// Draft tokens accepted.
    pub accepted_tokens: u64,
    /// Accepted drafts by position (0-based; index `i` counts drafts that
    /// accepted more than `i` tokens).
    pub accepted_per_pos: [u64; MAX_DRAFT_TOKENS as usize],
}

impl SpecCounters {
    /// Counts one draft of `draft_tokens` tokens of which `accepted` were accepted.
    pub fn observe(&mut self, draft_tokens: u32, accepted: u32) {
        self.drafts += 1;
        self.draft_tokens += u64::from(draft_tokens);
        self.accepted_tokens += u64::from(accepted);
        for slot in self.accepted_per_pos.iter_mut().take(accepted as usize) {
            *slot += 1;
        }
    }
}

#[cfg(test)]
#[path = "spec_tests.rs"]
mod tests;

//! One batch step's token budget (`max_num_batched_tokens`) and its
//! prefill lane ([`ModelParams::prefill_lane_cap`]), as the scheduler in
//! [`super::model`] spends it. Pure.

use super::params::ModelParams;

/// What is left of one step's token budget, and of its prefill lane
/// ([`ModelParams::prefill_lane_cap`]).
pub(super) struct BatchBudget {
    tokens: u32,
    prefill: u32,
}

impl BatchBudget {
    /// The full budget of a step with `decoders` sequences decoding (the
    /// lane cap counts them before any preemption).
    pub(super) fn new(params: &ModelParams, decoders: u64) -> Self {
        let tokens = params.max_num_batched_tokens;
        Self {
            tokens,
            prefill: params.prefill_lane_cap(decoders.min(u64::from(tokens))),
        }
    }

    /// Tokens a sequence wanting `want` gets (a decode needs only the budget).
    pub(super) fn grant(&self, want: u32, decodes: bool) -> u32 {
        let room = if decodes {
            self.tokens
        } else {
            self.tokens.min(self.prefill)
        };
        want.min(room)
    }

    pub(super) fn take(&mut self, tokens: u32, decodes: bool) {
        self.tokens -= tokens;
        if !decodes {
            self.prefill = self.prefill.saturating_sub(tokens);
        }
    }

    /// Whether a prompt token still fits.
    pub(super) fn prefill_room(&self) -> bool {
        self.tokens > 0 && self.prefill > 0
    }
}

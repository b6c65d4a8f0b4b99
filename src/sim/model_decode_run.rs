//! A run of identical decode steps taken at once: the engine's fast path
//! in virtual time (issue 39). Pure.
//!
//! While every running sequence decodes (none in prefill), nothing can be
//! admitted (the queue is empty or the batch full), the KV cache has room
//! for every token and no request arrives, each step is the one before
//! again: the same sequences decode one token each, in the same time. Up to
//! the step in which the first of them finishes, `k` such steps change the
//! engine exactly as `k` calls of [`Engine::step`] do, so they are taken in
//! one: every sequence advances `k` tokens, the KV grows by `k` tokens a
//! sequence, the cache evicts what the last step would have made it evict,
//! and one [`BatchStep`] (the last) reports each sequence's last token.
//! Speculative decoding draws per step, so it never takes this path.

use super::{BatchStep, Engine};
use std::time::Duration;

/// `k` identical decode steps taken at once.
#[derive(Debug, Clone, PartialEq)]
pub struct DecodeRun {
    /// Steps taken (at least 2).
    pub steps: u32,
    /// The last of them: its start, its duration (every step's), its
    /// decoders, and each sequence's token at its end.
    pub last: BatchStep,
}

impl Engine {
    /// Takes the identical decode steps from `now` on, when at least two
    /// would run before `next_arrival` (the next request's arrival, `None`
    /// when none will come) and before anything else changes; `None` (and
    /// nothing changed) otherwise.
    pub fn decode_run(
        &mut self,
        now: Duration,
        next_arrival: Option<Duration>,
    ) -> Option<DecodeRun> {
        let d = self.running.len() as u64;
        let steady = self.spec.is_none()
            && d > 0
            && d <= u64::from(self.params.max_num_batched_tokens)
            && (self.waiting.is_empty() || self.running.len() >= self.params.max_num_seqs as usize)
            && self
                .running
                .iter()
                .all(|s| !s.in_prefill() && s.generated >= 1);
        if !steady {
            return None;
        }
        let step = self.params.batch_step_time(0, d);
        let mut k = self
            .running
            .iter()
            .map(|s| s.target_tokens - s.generated)
            .min()
            .unwrap_or(0);
        k = k.min(u32::try_from(self.kv_free() / d).unwrap_or(u32::MAX));
        if let Some(next) = next_arrival {
            // Steps that start before the arrival; one starting at it would
            // admit it first.
            let before = next.saturating_sub(now).as_nanos().saturating_sub(1);
            let starts = before / step.as_nanos().max(1) + 1;
            k = k.min(u32::try_from(starts).unwrap_or(u32::MAX));
        }
        if k < 2 || step.is_zero() {
            return None;
        }
        let last_start = now + step * (k - 1);
        Some(DecodeRun {
            steps: k,
            last: self.advance(k, last_start, step),
        })
    }

    /// Every running sequence decodes `k` tokens; the last step's report.
    fn advance(&mut self, k: u32, start: Duration, duration: Duration) -> BatchStep {
        let d = self.running.len() as u32;
        self.counters.n_batch_steps += u64::from(k);
        self.counters.generation_tokens += u64::from(k) * u64::from(d);
        self.kv_private += u64::from(k) * u64::from(d);
        // The last step's scheduling would have evicted this much.
        self.evict_to_fit();
        let mut events = Vec::with_capacity(d as usize);
        let mut finished = Vec::new();
        let mut i = 0;
        while i < self.running.len() {
            let seq = &mut self.running[i];
            seq.generated += k;
            seq.computed += k;
            seq.batch_tokens = 1;
            seq.batch_decodes = true;
            i = self.report_token(i, &mut events, &mut finished);
        }
        for seq in finished {
            self.free_seq(&seq);
        }
        self.evict_to_fit();
        BatchStep {
            start,
            duration,
            prefill_tokens: 0,
            decode_seqs: d,
            events,
        }
    }
}

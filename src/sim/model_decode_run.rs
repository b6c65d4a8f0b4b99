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
//! The steps are identical but for their context: with a cost per context
//! token `c`, each is `c × D` longer than the one before (every one of the
//! `D` decoders attends over one more token), an arithmetic series.
//! Speculative decoding draws per step, so it never takes this path; the
//! host's stalls ([`crate::sim::stalls`]) cut a run before the step a stall
//! falls in, which the slow path takes, so the stall clock consumes the same
//! engine time either way.

use super::{BatchStep, Engine, StepLoad};
use std::time::Duration;

/// `k` identical decode steps taken at once.
#[derive(Debug, Clone, PartialEq)]
pub struct DecodeRun {
    /// Steps taken (at least 2).
    pub steps: u32,
    /// The last of them: its start, its duration, its decoders, and each
    /// sequence's token at its end.
    pub last: BatchStep,
    /// The time all `steps` took, from the first one's start.
    pub span: Duration,
    /// The first step's duration (each later one is longer by the same
    /// amount, up to `last.duration`).
    pub first: Duration,
}

/// Steps of `first` duration, each `grow` longer than the one before.
#[derive(Debug, Clone, Copy)]
struct Series {
    first: Duration,
    grow: Duration,
}

impl Series {
    /// The time the first `j` steps take.
    fn span(&self, j: u32) -> Duration {
        let pairs = u128::from(j) * u128::from(j.saturating_sub(1)) / 2;
        let nanos = self.first.as_nanos() * u128::from(j) + self.grow.as_nanos() * pairs;
        Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
    }

    /// Step `j`'s (from 0) duration.
    fn step(&self, j: u32) -> Duration {
        let grown = self.grow.checked_mul(j).unwrap_or(Duration::MAX);
        self.first.saturating_add(grown)
    }

    /// How many steps end before `t` (from the first one's start): the
    /// largest `j` with `span(j) < t`, at most `most`.
    fn ending_before(&self, t: Duration, most: u32) -> u32 {
        let (mut lo, mut hi) = (0, most);
        while lo < hi {
            let mid = lo + (hi - lo).div_ceil(2);
            if self.span(mid) < t {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        lo
    }

    /// How many steps start before `t` (from the first one's start): the
    /// largest `j` with `span(j − 1) < t`, at most `most`.
    fn starting_before(&self, t: Duration, most: u32) -> u32 {
        let (mut lo, mut hi) = (0, most);
        while lo < hi {
            let mid = lo + (hi - lo).div_ceil(2);
            if self.span(mid - 1) < t {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        lo
    }
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
        let context: u64 = self.running.iter().map(|s| u64::from(s.computed) + 1).sum();
        let series = Series {
            first: self.params.step_time(StepLoad {
                decode_seqs: d,
                context_tokens: context,
                ..StepLoad::default()
            }),
            grow: self
                .params
                .per_context_token
                .checked_mul(d as u32)
                .unwrap_or(Duration::MAX),
        };
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
            k = series.starting_before(next.saturating_sub(now), k);
        }
        // Steps that end before the host's next stall.
        k = series.ending_before(self.until_stall(), k);
        if k < 2 || series.first.is_zero() {
            return None;
        }
        let last_start = now + series.span(k - 1);
        // No stall falls in the run (it ends before the next): this only
        // counts its engine time.
        let stalled = self.stall(series.span(k));
        debug_assert!(stalled.is_zero());
        let mut last = self.advance(k, last_start, series.step(k - 1));
        last.context_tokens = context + u64::from(k - 1) * d;
        Some(DecodeRun {
            steps: k,
            last,
            span: series.span(k),
            first: series.first,
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
            prefill_pairs: 0,
            decode_seqs: d,
            context_tokens: 0,
            admitted: 0,
            events,
        }
    }
}

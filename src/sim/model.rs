//! The continuous-batching engine model: pure, deterministic, no clock, no I/O.
//!
//! Owns the scheduler state (running batch, FIFO waiting queue, KV-cache token
//! budget) and the step-time formula. It follows vLLM's V1 scheduler closely
//! enough to reproduce its queueing behaviour:
//!
//! 1. Running sequences are scheduled first, oldest first: a decoding sequence
//!    takes 1 token of the step's token budget (`max_num_batched_tokens`), a
//!    sequence still in (chunked) prefill takes as many prompt tokens as the
//!    budget has left.
//! 2. Every scheduled token needs a KV-cache slot. When the cache is full, the
//!    *newest* running sequence is preempted (its KV freed, its progress
//!    dropped) and put back at the front of the waiting queue; on
//!    re-admission it recomputes prompt + already generated tokens as a
//!    prefill ("recompute" preemption). No admission happens in a step that
//!    preempted.
//! 3. Waiting requests are admitted FIFO while fewer than `max_num_seqs` run,
//!    the token budget has room and the KV cache can hold their first chunk.
//!
//! The step time is
//! `step_base + α × per_prefill_token × prefill_tokens + per_decode_seq × decode_seqs`
//! (plus the prompt tokens' attention pairs, the decoders' context and the step's new requests at their costs,
//! [`super::params`]), where `prefill_tokens` are the prompt (or recompute) tokens computed in the
//! step and `decode_seqs` the sequences that decode one token in it, and `α`
//! the prefill interference ([`super::params`]: 1 by default, prefill and
//! decode in one batch step). Below 1, a step also computes no more prompt
//! tokens than its overlapping share can hide
//! ([`ModelParams::prefill_lane_cap`], from the decoders counted before
//! preemptions), so a long prompt spreads over several steps. A step's
//! tokens leave at its end: a request's first token at the end of the step that
//! completes its prefill, then one token per step until it has produced its
//! target length. With speculative decoding ([`super::spec`]) a decoding
//! sequence schedules `1 + K` tokens and emits `1 + accepted` of them; the
//! step pays [`super::spec::SpecDecode::step_overhead`] on top.
//!
//! With prefix caching on (the default, as in vLLM V1), a request admitted
//! from the waiting queue first looks up the longest cached prefix of its
//! prompt's KV blocks ([`super::prefix`]); those tokens count as already
//! computed, so its prefill charges only the rest (at least one token is
//! always computed, as in vLLM). A sequence's full prompt blocks enter the
//! cache when its prefill completes; blocks no running sequence holds stay
//! cached in free KV and are evicted least recently used first when the
//! budget needs the room. The KV in use is the sequences' own tokens plus
//! every block some sequence holds, counted once.
//!
//! Time is passed in ([`Duration`] since the simulation started); the caller
//! (the real-time driver, or a test) decides when the next step begins.

use std::collections::VecDeque;
use std::time::Duration;

use super::blocks::coarser_blocks;
pub use super::blocks::sampled_output_len;
use super::budget::BatchBudget;
pub use super::events::{BatchStep, Counters, Event, EventKind};
pub use super::params::{ModelParams, StepLoad};
use super::prefix::PrefixCache;
use super::spec::SpecDecode;
use super::stalls::StallClock;
#[path = "model_decode_run.rs"]
mod decode_run;
#[path = "model_speculate.rs"]
mod speculate;
#[path = "model_tokens.rs"]
mod tokens;
pub use decode_run::DecodeRun;

/// One request inside the engine.
#[derive(Debug, Clone)]
struct Seq {
    id: u64,
    prompt_tokens: u32,
    target_tokens: u32,
    generated: u32,
    /// Tokens whose KV is in the cache.
    computed: u32,
    /// Tokens to compute before the next token can be sampled
    /// (the prompt, or prompt + generated after a preemption).
    prefill_target: u32,
    ever_scheduled: bool,
    /// Hashes of the prompt's full KV blocks (empty without prefix caching).
    blocks: Vec<u64>,
    /// Leading prompt blocks this sequence holds in the prefix cache; their
    /// tokens are part of `computed` but counted once, in the cache.
    held: u32,
    /// Tokens scheduled in the current batch step (0 = not scheduled).
    batch_tokens: u32,
    /// Whether the current batch step decodes it (else a prefill chunk).
    batch_decodes: bool,
    /// A pooling request (submitted with 0 output tokens): prefill only; its
    /// one event marks the end of its prefill and counts no generation token.
    pooling: bool,
}

impl Seq {
    fn in_prefill(&self) -> bool {
        self.computed < self.prefill_target
    }

    /// Computed tokens this sequence holds outside the prefix cache, with
    /// `block` tokens per cached block.
    fn private_tokens(&self, block: u32) -> u64 {
        u64::from(self.computed).saturating_sub(u64::from(self.held * block))
    }
}

/// The engine: a running batch, a waiting queue and a KV-cache budget.
#[derive(Debug, Clone)]
pub struct Engine {
    params: ModelParams,
    waiting: VecDeque<Seq>,
    running: Vec<Seq>,
    /// KV tokens of running sequences outside the prefix cache.
    kv_private: u64,
    cache: PrefixCache,
    prefix_caching: bool,
    counters: Counters,
    /// Speculative decoding and the seed of its acceptance draws.
    spec: Option<(SpecDecode, u64)>,
    /// The host's stalls, when the parameters have any.
    stalls: Option<StallClock>,
}

impl Engine {
    /// An idle engine. The parameters should have passed [`ModelParams::validate`].
    pub fn new(params: ModelParams) -> Self {
        Self {
            stalls: StallClock::new(params.stalls, 0),
            params,
            waiting: VecDeque::new(),
            running: Vec::new(),
            kv_private: 0,
            cache: PrefixCache::new(),
            prefix_caching: true,
            counters: Counters::default(),
            spec: None,
        }
    }

    /// The same engine with speculative decoding ([`super::spec`]; `None`
    /// off, the default), its acceptance draws seeded by `seed`.
    pub fn with_speculation(mut self, spec: Option<SpecDecode>, seed: u64) -> Self {
        self.spec = spec.map(|s| (s, seed));
        self
    }

    /// The same engine with its stalls (if its parameters have any) drawn
    /// from `seed` (0 otherwise).
    pub fn with_stall_seed(mut self, seed: u64) -> Self {
        self.stalls = StallClock::new(self.params.stalls, seed);
        self
    }

    /// The same engine with prefix caching on or off (vLLM's
    /// `--enable-prefix-caching`; on by default).
    pub fn with_prefix_caching(mut self, on: bool) -> Self {
        self.prefix_caching = on;
        self
    }

    /// The engine's parameters.
    pub fn params(&self) -> &ModelParams {
        &self.params
    }

    /// Queues request `id` that will produce exactly `output_tokens` tokens.
    /// 0 makes it a pooling request (embeddings, rerank): prefill only; its
    /// single `Token { index: 1, last: true }` event comes at the end of the
    /// step that completes its prefill, and no generation token is counted.
    /// `now` is only recorded by callers; admission happens at the next
    /// [`Engine::step`].
    pub fn submit(&mut self, id: u64, prompt_tokens: u32, output_tokens: u32, now: Duration) {
        self.submit_blocks(id, prompt_tokens, Vec::new(), output_tokens, now);
    }

    /// [`Engine::submit`] with the hashes of the prompt's full
    /// [`BLOCK_TOKENS`](super::blocks::BLOCK_TOKENS)-token blocks ([`super::blocks`]), which the prefix
    /// cache matches (in blocks of `block_tokens`).
    pub fn submit_blocks(
        &mut self,
        id: u64,
        prompt_tokens: u32,
        mut blocks: Vec<u64>,
        output_tokens: u32,
        _now: Duration,
    ) {
        self.counters.n_submitted += 1;
        if !self.prefix_caching {
            blocks.clear();
        }
        let blocks = coarser_blocks(blocks, self.params.block_tokens);
        let prompt_tokens = prompt_tokens.max(1);
        self.waiting.push_back(Seq {
            id,
            prompt_tokens,
            target_tokens: output_tokens.max(1),
            pooling: output_tokens == 0,
            generated: 0,
            computed: 0,
            prefill_target: prompt_tokens,
            ever_scheduled: false,
            blocks,
            held: 0,
            batch_tokens: 0,
            batch_decodes: false,
        });
    }

    /// Removes request `id` wherever it is, freeing its KV. Returns whether it was found.
    pub fn abort(&mut self, id: u64) -> bool {
        if let Some(pos) = self.waiting.iter().position(|s| s.id == id) {
            self.waiting.remove(pos);
        } else if let Some(pos) = self.running.iter().position(|s| s.id == id) {
            let seq = self.running.remove(pos);
            self.free_seq(&seq);
        } else {
            return false;
        }
        self.counters.n_aborted += 1;
        true
    }

    /// vLLM's `POST /reset_prefix_cache`: forget every cached block no
    /// running sequence holds.
    pub fn reset_prefix_cache(&mut self) {
        self.cache.drop_evictable();
    }

    /// Whether nothing is running or waiting.
    pub fn is_idle(&self) -> bool {
        self.running.is_empty() && self.waiting.is_empty()
    }

    /// Sequences in the running batch.
    pub fn n_running(&self) -> usize {
        self.running.len()
    }

    /// Requests in the waiting queue.
    pub fn n_waiting(&self) -> usize {
        self.waiting.len()
    }

    /// KV-cache tokens in use.
    pub fn kv_used(&self) -> u64 {
        self.kv_private + self.cache.referenced() * u64::from(self.params.block_tokens)
    }

    /// Fraction (0..=1) of the KV cache in use.
    pub fn kv_usage(&self) -> f64 {
        self.kv_used() as f64 / f64::from(self.params.kv_cache_tokens.max(1))
    }

    /// Counters since creation.
    pub fn counters(&self) -> Counters {
        self.counters
    }

    /// Runs one batch step beginning at `now`. Returns `None` (and changes nothing)
    /// when there is no work to schedule.
    pub fn step(&mut self, now: Duration) -> Option<BatchStep> {
        let mut events = Vec::new();
        let decoders = self.running.iter().filter(|s| !s.in_prefill()).count();
        let mut budget = BatchBudget::new(&self.params, decoders as u64);
        let preempted = self.schedule_running(&mut budget, &mut events);
        self.evict_to_fit();
        if !preempted {
            self.admit_waiting(&mut budget, &mut events);
        }
        let admitted = events
            .iter()
            .filter(|e| matches!(e.kind, EventKind::Scheduled { .. }))
            .count() as u64;
        let (load, draft_tokens) = self.batch_size(admitted);
        let (prefill_tokens, decode_seqs) = (load.prefill_tokens as u32, load.decode_seqs as u32);
        if prefill_tokens == 0 && decode_seqs == 0 {
            // Nothing ran; preemption events (if any) still matter to the caller.
            return (!events.is_empty()).then_some(BatchStep {
                start: now,
                duration: Duration::ZERO,
                prefill_tokens: 0,
                prefill_pairs: 0,
                decode_seqs: 0,
                context_tokens: 0,
                admitted: 0,
                events,
            });
        }
        self.counters.n_batch_steps += 1;
        self.complete_batch_step(&mut events);
        self.evict_to_fit();
        let (d, s) = (load.decode_seqs, u64::from(draft_tokens));
        let spec = self
            .spec
            .map(|(spec, _)| spec.step_overhead(&self.params, d, s));
        let cost = self.params.step_time(load) + spec.unwrap_or_default();
        Some(BatchStep {
            start: now,
            duration: cost.saturating_add(self.stall(cost)),
            prefill_tokens,
            prefill_pairs: load.prefill_pairs,
            decode_seqs,
            context_tokens: load.context_tokens,
            admitted: admitted as u32,
            events,
        })
    }

    /// What the host's stalls add to a step (or run of steps) costing
    /// `busy`.
    fn stall(&mut self, busy: Duration) -> Duration {
        self.stalls.as_mut().map_or(Duration::ZERO, |c| c.run(busy))
    }

    /// Engine time before the next stall (`Duration::MAX` with none).
    fn until_stall(&self) -> Duration {
        self.stalls
            .as_ref()
            .map_or(Duration::MAX, StallClock::until_next)
    }

    /// The scheduled step's load (with the `admitted` requests) and draft
    /// tokens; a decoder's context is every token it has in the KV cache.
    fn batch_size(&self, admitted: u64) -> (StepLoad, u32) {
        let mut load = StepLoad {
            admitted,
            ..StepLoad::default()
        };
        let mut drafts = 0;
        for seq in self.running.iter().filter(|s| s.batch_tokens > 0) {
            if seq.batch_decodes {
                load.decode_seqs += 1;
                load.context_tokens += u64::from(seq.computed);
                drafts += seq.batch_tokens - 1;
            } else {
                // `computed` already counts the chunk (scheduling added it).
                let t = u64::from(seq.batch_tokens);
                let c = u64::from(seq.computed).saturating_sub(t);
                load.prefill_tokens += t;
                load.prefill_pairs += t * c + t * (t + 1) / 2;
            }
        }
        (load, drafts)
    }

    /// Tokens a decoding sequence schedules: 1, and with speculation its
    /// drafts, as many as fit below `max_model_len` (as vLLM clamps them).
    fn decode_want(&self, seq: &Seq) -> u32 {
        let room = self.params.max_model_len.saturating_sub(seq.computed + 1);
        1 + self.spec.map_or(0, |(s, _)| s.draft_tokens.min(room))
    }

    fn kv_free(&self) -> u64 {
        u64::from(self.params.kv_cache_tokens).saturating_sub(self.kv_used())
    }

    /// Evicts cached blocks nobody holds until they fit in the free KV.
    fn evict_to_fit(&mut self) {
        let block = u64::from(self.params.block_tokens);
        while self.cache.evictable() * block > self.kv_free() && self.cache.evict_lru() {}
    }

    /// Lets go of a sequence's KV: its own tokens and its cached blocks.
    fn free_seq(&mut self, seq: &Seq) {
        self.kv_private -= seq.private_tokens(self.params.block_tokens);
        self.cache.release(&seq.blocks[..seq.held as usize]);
    }

    /// Schedules running sequences oldest first, preempting the newest when
    /// the KV cache is full. Returns whether anything was preempted.
    fn schedule_running(&mut self, budget: &mut BatchBudget, events: &mut Vec<Event>) -> bool {
        let mut preempted = false;
        let mut i = 0;
        while i < self.running.len() {
            self.running[i].batch_tokens = 0;
            let seq = &self.running[i];
            let decodes = !seq.in_prefill();
            let want = if decodes {
                self.decode_want(seq)
            } else {
                seq.prefill_target - seq.computed
            };
            let tokens = budget.grant(want, decodes);
            if tokens == 0 {
                i += 1;
                continue;
            }
            while self.kv_free() < u64::from(tokens) && i < self.running.len() {
                self.preempt_newest(events);
                preempted = true;
            }
            if i >= self.running.len() {
                break;
            }
            let seq = &mut self.running[i];
            seq.batch_tokens = tokens;
            seq.batch_decodes = decodes;
            seq.computed += tokens;
            self.kv_private += u64::from(tokens);
            budget.take(tokens, decodes);
            i += 1;
        }
        preempted
    }

    fn preempt_newest(&mut self, events: &mut Vec<Event>) {
        if let Some(mut seq) = self.running.pop() {
            self.free_seq(&seq);
            seq.held = 0;
            seq.computed = 0;
            seq.prefill_target = seq.prompt_tokens + seq.generated;
            seq.batch_tokens = 0;
            self.counters.n_preemptions += 1;
            events.push(Event {
                id: seq.id,
                kind: EventKind::Preempted,
            });
            self.waiting.push_front(seq);
        }
    }

    /// Admits waiting requests FIFO while the batch, budget and KV cache allow.
    fn admit_waiting(&mut self, budget: &mut BatchBudget, events: &mut Vec<Event>) {
        while self.running.len() < self.params.max_num_seqs as usize && budget.prefill_room() {
            let Some(head) = self.waiting.front() else {
                break;
            };
            // At least one token is computed, so the lookup stops a block short
            // of a fully cached prompt.
            let block = self.params.block_tokens;
            let max_hit = ((head.prefill_target - 1) / block) as usize;
            let hit = self.cache.lookup(&head.blocks, max_hit);
            let cached = hit.blocks as u32 * block;
            let tokens = budget.grant(head.prefill_target - cached, false);
            let need = u64::from(tokens) + hit.revived as u64 * u64::from(block);
            if self.kv_free() < need {
                break;
            }
            let Some(mut seq) = self.waiting.pop_front() else {
                break;
            };
            if self.prefix_caching {
                self.counters.prefix_cache_queries += u64::from(seq.prefill_target);
                self.counters.prefix_cache_hits += u64::from(cached);
            }
            self.cache.acquire(&seq.blocks[..hit.blocks]);
            seq.held = hit.blocks as u32;
            seq.computed = cached;
            if !seq.ever_scheduled {
                seq.ever_scheduled = true;
                events.push(Event {
                    id: seq.id,
                    kind: EventKind::Scheduled { cached },
                });
            }
            seq.batch_tokens = tokens;
            seq.batch_decodes = false;
            seq.computed += tokens;
            self.kv_private += u64::from(tokens);
            budget.take(tokens, false);
            self.running.push(seq);
            self.evict_to_fit();
        }
    }
}

#[cfg(test)]
#[path = "model_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "model_prefix_tests.rs"]
mod prefix_tests;

#[cfg(test)]
#[path = "model_interference_tests.rs"]
mod interference_tests;

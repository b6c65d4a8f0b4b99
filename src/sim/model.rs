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
//! `step_base + per_prefill_token × prefill_tokens + per_decode_seq × decode_seqs`,
//! where `prefill_tokens` are the prompt (or recompute) tokens computed in the
//! step and `decode_seqs` the sequences that decode one token in it. A step's
//! tokens leave at its end: a request's first token at the end of the step that
//! completes its prefill, then one token per step until it has produced its
//! target length.
//!
//! Time is passed in ([`Duration`] since the simulation started); the caller
//! (the real-time driver, or a test) decides when the next step begins.

use std::collections::VecDeque;
use std::time::Duration;

/// Engine parameters: the batch limits and the step-time cost model.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelParams {
    /// Most sequences in the running batch (vLLM `--max-num-seqs`).
    pub max_num_seqs: u32,
    /// Token budget of one step, prefill and decode tokens together
    /// (vLLM `--max-num-batched-tokens`).
    pub max_num_batched_tokens: u32,
    /// KV-cache capacity in tokens (prompt + generated of every running sequence).
    pub kv_cache_tokens: u32,
    /// Longest prompt + `max_tokens` a request may ask for (vLLM `--max-model-len`).
    pub max_model_len: u32,
    /// Fixed cost of every step (weights read, launch overhead).
    pub step_base: Duration,
    /// Cost of each prompt token computed in a step.
    pub per_prefill_token: Duration,
    /// Cost of each sequence decoding one token in a step.
    pub per_decode_seq: Duration,
}

impl ModelParams {
    /// Checks the parameters are usable; the message names the offending field.
    pub fn validate(&self) -> Result<(), String> {
        if self.max_num_seqs == 0 {
            return Err("max_num_seqs must be at least 1".into());
        }
        if self.max_num_batched_tokens == 0 {
            return Err("max_num_batched_tokens must be at least 1".into());
        }
        if self.max_model_len < 2 {
            return Err("max_model_len must be at least 2".into());
        }
        if self.kv_cache_tokens < self.max_model_len {
            return Err(format!(
                "kv_cache_tokens ({}) must be at least max_model_len ({}) so one request always fits",
                self.kv_cache_tokens, self.max_model_len
            ));
        }
        if self.step_base.is_zero() {
            return Err("step_base must be positive".into());
        }
        Ok(())
    }

    /// Duration of a step that computes `prefill_tokens` prompt tokens and
    /// decodes one token for each of `decode_seqs` sequences.
    pub fn step_time(&self, prefill_tokens: u64, decode_seqs: u64) -> Duration {
        let nanos = self.step_base.as_nanos()
            + self.per_prefill_token.as_nanos() * u128::from(prefill_tokens)
            + self.per_decode_seq.as_nanos() * u128::from(decode_seqs);
        Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
    }
}

/// What happened to one request in a step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    /// First admitted to the running batch (at the step's start).
    Scheduled,
    /// Preempted back to the waiting queue (at the step's start).
    Preempted,
    /// Token number `index` (1-based; 1 is the first token) left at the
    /// step's end; `last` means the request is finished.
    Token { index: u32, last: bool },
}

/// One per-request event of a step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Event {
    /// The id given to [`Engine::submit`].
    pub id: u64,
    /// What happened.
    pub kind: EventKind,
}

/// The result of one engine step.
#[derive(Debug, Clone, PartialEq)]
pub struct StepOutcome {
    /// When the step began (the `now` passed to [`Engine::step`]).
    pub start: Duration,
    /// How long the step takes; its tokens leave at `start + duration`.
    pub duration: Duration,
    /// Prompt (or recompute) tokens computed in the step.
    pub prefill_tokens: u32,
    /// Sequences that decoded one token in the step.
    pub decode_seqs: u32,
    /// Per-request events, in scheduling order.
    pub events: Vec<Event>,
}

impl StepOutcome {
    /// When the step's tokens leave.
    pub fn end(&self) -> Duration {
        self.start + self.duration
    }
}

/// Monotonic counters since the engine was created.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    /// Steps run.
    pub n_steps: u64,
    /// Requests submitted.
    pub n_submitted: u64,
    /// Requests that produced all their tokens.
    pub n_finished: u64,
    /// Requests aborted by the caller.
    pub n_aborted: u64,
    /// Preemptions (a request preempted twice counts twice).
    pub n_preemptions: u64,
    /// Prompt tokens of requests whose first prefill completed.
    pub prompt_tokens: u64,
    /// Output tokens produced.
    pub generation_tokens: u64,
}

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
    /// Tokens scheduled in the current step (0 = not scheduled).
    step_tokens: u32,
    /// Whether the current step is a decode (else a prefill chunk).
    step_decodes: bool,
}

impl Seq {
    fn in_prefill(&self) -> bool {
        self.computed < self.prefill_target
    }
}

/// The engine: a running batch, a waiting queue and a KV-cache budget.
#[derive(Debug, Clone)]
pub struct Engine {
    params: ModelParams,
    waiting: VecDeque<Seq>,
    running: Vec<Seq>,
    kv_used: u64,
    counters: Counters,
}

impl Engine {
    /// An idle engine. The parameters should have passed [`ModelParams::validate`].
    pub fn new(params: ModelParams) -> Self {
        Self {
            params,
            waiting: VecDeque::new(),
            running: Vec::new(),
            kv_used: 0,
            counters: Counters::default(),
        }
    }

    /// The engine's parameters.
    pub fn params(&self) -> &ModelParams {
        &self.params
    }

    /// Queues request `id` that will produce exactly `output_tokens` tokens
    /// (at least 1). `now` is only recorded by callers; admission happens at
    /// the next [`Engine::step`].
    pub fn submit(&mut self, id: u64, prompt_tokens: u32, output_tokens: u32, _now: Duration) {
        self.counters.n_submitted += 1;
        let prompt_tokens = prompt_tokens.max(1);
        self.waiting.push_back(Seq {
            id,
            prompt_tokens,
            target_tokens: output_tokens.max(1),
            generated: 0,
            computed: 0,
            prefill_target: prompt_tokens,
            ever_scheduled: false,
            step_tokens: 0,
            step_decodes: false,
        });
    }

    /// Removes request `id` wherever it is, freeing its KV. Returns whether it was found.
    pub fn abort(&mut self, id: u64) -> bool {
        if let Some(pos) = self.waiting.iter().position(|s| s.id == id) {
            self.waiting.remove(pos);
        } else if let Some(pos) = self.running.iter().position(|s| s.id == id) {
            let seq = self.running.remove(pos);
            self.kv_used -= u64::from(seq.computed);
        } else {
            return false;
        }
        self.counters.n_aborted += 1;
        true
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
        self.kv_used
    }

    /// Fraction (0..=1) of the KV cache in use.
    pub fn kv_usage(&self) -> f64 {
        self.kv_used as f64 / f64::from(self.params.kv_cache_tokens.max(1))
    }

    /// Counters since creation.
    pub fn counters(&self) -> Counters {
        self.counters
    }

    /// Runs one step beginning at `now`. Returns `None` (and changes nothing)
    /// when there is no work to schedule.
    pub fn step(&mut self, now: Duration) -> Option<StepOutcome> {
        let mut events = Vec::new();
        let mut budget = self.params.max_num_batched_tokens;
        let preempted = self.schedule_running(&mut budget, &mut events);
        if !preempted {
            self.admit_waiting(&mut budget, &mut events);
        }
        let (prefill_tokens, decode_seqs) =
            self.running
                .iter()
                .filter(|s| s.step_tokens > 0)
                .fold((0u32, 0u32), |(p, d), s| {
                    if s.step_decodes {
                        (p, d + 1)
                    } else {
                        (p + s.step_tokens, d)
                    }
                });
        if prefill_tokens == 0 && decode_seqs == 0 {
            // Nothing ran; preemption events (if any) still matter to the caller.
            return (!events.is_empty()).then_some(StepOutcome {
                start: now,
                duration: Duration::ZERO,
                prefill_tokens: 0,
                decode_seqs: 0,
                events,
            });
        }
        self.counters.n_steps += 1;
        self.complete_step(&mut events);
        Some(StepOutcome {
            start: now,
            duration: self
                .params
                .step_time(u64::from(prefill_tokens), u64::from(decode_seqs)),
            prefill_tokens,
            decode_seqs,
            events,
        })
    }

    fn kv_free(&self) -> u64 {
        u64::from(self.params.kv_cache_tokens).saturating_sub(self.kv_used)
    }

    /// Schedules running sequences oldest first, preempting the newest when
    /// the KV cache is full. Returns whether anything was preempted.
    fn schedule_running(&mut self, budget: &mut u32, events: &mut Vec<Event>) -> bool {
        let mut preempted = false;
        let mut i = 0;
        while i < self.running.len() {
            let seq = &mut self.running[i];
            seq.step_tokens = 0;
            if *budget == 0 {
                i += 1;
                continue;
            }
            let decodes = !seq.in_prefill();
            let want = if decodes {
                1
            } else {
                seq.prefill_target - seq.computed
            };
            let tokens = want.min(*budget);
            while self.kv_free() < u64::from(tokens) && i < self.running.len() {
                self.preempt_newest(events);
                preempted = true;
            }
            if i >= self.running.len() {
                break;
            }
            let seq = &mut self.running[i];
            seq.step_tokens = tokens;
            seq.step_decodes = decodes;
            seq.computed += tokens;
            self.kv_used += u64::from(tokens);
            *budget -= tokens;
            i += 1;
        }
        preempted
    }

    fn preempt_newest(&mut self, events: &mut Vec<Event>) {
        if let Some(mut seq) = self.running.pop() {
            self.kv_used -= u64::from(seq.computed);
            seq.computed = 0;
            seq.prefill_target = seq.prompt_tokens + seq.generated;
            seq.step_tokens = 0;
            self.counters.n_preemptions += 1;
            events.push(Event {
                id: seq.id,
                kind: EventKind::Preempted,
            });
            self.waiting.push_front(seq);
        }
    }

    /// Admits waiting requests FIFO while the batch, budget and KV cache allow.
    fn admit_waiting(&mut self, budget: &mut u32, events: &mut Vec<Event>) {
        while self.running.len() < self.params.max_num_seqs as usize && *budget > 0 {
            let Some(head) = self.waiting.front() else {
                break;
            };
            let tokens = (head.prefill_target - head.computed).min(*budget);
            if self.kv_free() < u64::from(tokens) {
                break;
            }
            let Some(mut seq) = self.waiting.pop_front() else {
                break;
            };
            if !seq.ever_scheduled {
                seq.ever_scheduled = true;
                events.push(Event {
                    id: seq.id,
                    kind: EventKind::Scheduled,
                });
            }
            seq.step_tokens = tokens;
            seq.step_decodes = false;
            seq.computed += tokens;
            self.kv_used += u64::from(tokens);
            *budget -= tokens;
            self.running.push(seq);
        }
    }

    /// Emits the step's tokens and retires finished sequences.
    fn complete_step(&mut self, events: &mut Vec<Event>) {
        let counters = &mut self.counters;
        let mut freed = 0u64;
        self.running.retain_mut(|seq| {
            if seq.step_tokens == 0 || seq.in_prefill() {
                return true;
            }
            if !seq.step_decodes && seq.generated == 0 {
                counters.prompt_tokens += u64::from(seq.prompt_tokens);
            }
            seq.generated += 1;
            counters.generation_tokens += 1;
            let last = seq.generated >= seq.target_tokens;
            events.push(Event {
                id: seq.id,
                kind: EventKind::Token {
                    index: seq.generated,
                    last,
                },
            });
            if last {
                counters.n_finished += 1;
                freed += u64::from(seq.computed);
            }
            !last
        });
        self.kv_used -= freed;
    }
}

/// Output length of a request sent without `ignore_eos`: uniform on
/// `1..=max_tokens`, drawn from a SplitMix64 hash of `(seed, request_index)` so
/// the same request gets the same length whatever the arrival order.
pub fn sampled_output_len(seed: u64, request_index: u64, max_tokens: u32) -> u32 {
    if max_tokens <= 1 {
        return 1;
    }
    let h = splitmix64(seed ^ splitmix64(request_index));
    1 + (h % u64::from(max_tokens)) as u32
}

/// SplitMix64 finaliser: a fast, well-mixed 64-bit hash.
pub(crate) fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
#[path = "model_tests.rs"]
mod tests;

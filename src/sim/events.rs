//! What one batch step of the engine reports (a *batch step*: one pass of
//! continuous batching over the running sequences; not a sweep's step): per-request events, the step's size and
//! timing ([`BatchStep`]), and the engine's monotonic [`Counters`]. Plain
//! data shared by the model and its driver.

use std::time::Duration;

/// What happened to one request in a step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    /// First admitted to the running batch (at the step's start), with
    /// `cached` prompt tokens served by the prefix cache.
    Scheduled { cached: u32 },
    /// Preempted back to the waiting queue (at the step's start).
    Preempted,
    /// Token number `index` (1-based; 1 is the first token) left at the
    /// step's end; `last` means the request is finished.
    Token { index: u32, last: bool },
    /// Speculative decoding ([`super::spec`]): in this step the request
    /// proposed `drafts` draft tokens and `accepted` of them were accepted;
    /// comes just before the step's `Token` event for the request, whose
    /// `index` then advances by up to `1 + accepted`.
    Drafted { drafts: u32, accepted: u32 },
}

/// One per-request event of a step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Event {
    /// The id given to [`super::model::Engine::submit`].
    pub id: u64,
    /// What happened.
    pub kind: EventKind,
}

/// The result of one batch step.
#[derive(Debug, Clone, PartialEq)]
pub struct BatchStep {
    /// When the step began (the `now` passed to [`super::model::Engine::step`]).
    pub start: Duration,
    /// How long the step takes; its tokens leave at `start + duration`.
    pub duration: Duration,
    /// Prompt (or recompute) tokens computed in the step.
    pub prefill_tokens: u32,
    /// Their attention pairs ([`super::params`]).
    pub prefill_pairs: u64,
    /// Sequences that decoded one token in the step.
    pub decode_seqs: u32,
    /// The decoders' context, summed (tokens they attended over).
    pub context_tokens: u64,
    /// Requests the step scheduled for the first time.
    pub admitted: u32,
    /// Per-request events, in scheduling order.
    pub events: Vec<Event>,
}

impl BatchStep {
    /// When the step's tokens leave.
    pub fn end(&self) -> Duration {
        self.start + self.duration
    }
}

/// Monotonic counters since the engine was created.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    /// Batch steps run.
    pub n_batch_steps: u64,
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
    /// Tokens looked up in the prefix cache (vLLM's `prefix_cache_queries`):
    /// the tokens to compute of every admission from the waiting queue.
    pub prefix_cache_queries: u64,
    /// Of those, tokens found cached (vLLM's `prefix_cache_hits`).
    pub prefix_cache_hits: u64,
    /// Speculative decoding's drafts and acceptances (zero without it).
    pub spec: super::spec::SpecCounters,
}

//! What the engine's resources did over a virtual-time run's measured window
//! ([`Usage`]): the running batch against `max_num_seqs`, the KV cache, the
//! token budget, and where the step time went (fixed cost, prefill tokens,
//! decoding sequences). [`UsageMeter`] folds it in batch step by batch step, weighting
//! every state by how long it lasted. Pure: durations in, averages out.

use std::time::Duration;

use serde::Serialize;

use super::events::BatchStep;
use super::model::ModelParams;

/// Time-weighted utilisation of each engine resource over a window.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
pub struct Usage {
    /// Virtual seconds observed.
    pub window_s: f64,
    /// Share of the window the engine was running a step.
    pub busy_share: f64,
    /// Time-averaged running batch (idle time counts as 0).
    pub mean_running: f64,
    /// Share of the window with `max_num_seqs` sequences running.
    pub full_slots_share: f64,
    /// Time-averaged waiting queue.
    pub mean_waiting: f64,
    /// Time-averaged KV-cache usage, 0..=1.
    pub mean_kv_usage: f64,
    /// Share of the window with requests waiting, a free slot and token
    /// budget left, but no KV-cache room to admit them (or a preemption).
    pub kv_blocked_share: f64,
    /// Share of the window whose step used the whole token budget (or,
    /// below full prefill interference, every prompt token its prefill lane
    /// holds).
    pub budget_full_share: f64,
    /// Of the work, the share of the steps' fixed cost.
    pub base_share: f64,
    /// Of the work (fixed cost, prompt tokens and decodes, each at its whole
    /// compute time), the share of the prompt tokens. Below full prefill
    /// interference part of it runs beside the decode step (a prefill lane),
    /// so a full lane shows as more than the fixed cost and decodes together.
    pub prefill_share: f64,
    /// Of the work, the share of decoding sequences.
    pub decode_share: f64,
    /// Preemptions in the window.
    pub preemptions: u64,
}

/// Accumulates [`Usage`] from a window's start; states before it are ignored.
#[derive(Debug, Clone)]
pub struct UsageMeter {
    from: Duration,
    max_num_seqs: u64,
    budget: u64,
    window: f64,
    busy: f64,
    running: f64,
    full: f64,
    waiting: f64,
    kv: f64,
    kv_blocked: f64,
    budget_full: f64,
    base: f64,
    prefill: f64,
    decode: f64,
    preemptions: u64,
}

/// The engine state while a batch step runs, as its caller sees it.
#[derive(Debug, Clone, Copy)]
pub struct BatchState {
    /// Sequences in the batch during the step (finished ones included).
    pub running: u64,
    /// Requests left waiting after the step's admissions.
    pub waiting: u64,
    /// KV-cache usage at the step's end, 0..=1.
    pub kv_usage: f64,
    /// Preemptions the step made.
    pub preemptions: u64,
}

impl UsageMeter {
    /// A meter for an engine with `params`, counting from `from` on.
    pub fn new(params: &ModelParams, from: Duration) -> Self {
        Self {
            from,
            max_num_seqs: u64::from(params.max_num_seqs),
            budget: u64::from(params.max_num_batched_tokens),
            window: 0.0,
            busy: 0.0,
            running: 0.0,
            full: 0.0,
            waiting: 0.0,
            kv: 0.0,
            kv_blocked: 0.0,
            budget_full: 0.0,
            base: 0.0,
            prefill: 0.0,
            decode: 0.0,
            preemptions: 0,
        }
    }

    /// The engine sat idle from `start` to `end`.
    pub fn idle(&mut self, start: Duration, end: Duration) {
        let start = start.max(self.from);
        if end > start {
            self.window += (end - start).as_secs_f64();
        }
    }

    /// One batch step ran (`out`) with the engine in `state`.
    pub fn batch_step(&mut self, params: &ModelParams, out: &BatchStep, state: BatchState) {
        self.batch_steps(params, out, state, 1, out.duration);
    }

    /// `repeat` decode steps ran in `span`, `out` the last of them (a decode
    /// run, [`super::model::DecodeRun`]: the same decoders, each step one
    /// context token a decoder longer), `state.kv_usage` their mean.
    pub fn batch_steps(
        &mut self,
        params: &ModelParams,
        out: &BatchStep,
        state: BatchState,
        repeat: u32,
        span: Duration,
    ) {
        let first_start = out.end().saturating_sub(span);
        if first_start < self.from {
            return;
        }
        let n = f64::from(repeat);
        let dt = span.as_secs_f64();
        self.window += dt;
        self.busy += dt;
        self.running += dt * state.running as f64;
        self.waiting += dt * state.waiting as f64;
        self.kv += dt * state.kv_usage;
        self.preemptions += state.preemptions;
        let used = u64::from(out.prefill_tokens) + u64::from(out.decode_seqs);
        let (prompt, decodes) = (u64::from(out.prefill_tokens), u64::from(out.decode_seqs));
        // Below full interference a step beside decoders computes no more
        // prompt tokens than its prefill lane holds: a full lane, like a
        // full budget, is what holds the queue back, not the KV cache.
        let full = used >= self.budget || prompt >= u64::from(params.prefill_lane_cap(decodes));
        if state.running >= self.max_num_seqs {
            self.full += dt;
        } else if state.waiting > 0 && (!full || state.preemptions > 0) {
            self.kv_blocked += dt;
        }
        if full {
            self.budget_full += dt;
        }
        let secs = |d: Duration| d.as_secs_f64() * n;
        self.base += secs(params.step_base);
        // The prompt tokens' whole compute, also the part a step below full
        // interference runs beside its decoders (the prefill lane's work).
        // and the requests' own work (counted with their prompts).
        self.prefill += secs(params.per_prefill_token) * prompt as f64
            + secs(params.per_prefill_pair) * out.prefill_pairs as f64
            + if prompt > 0 {
                secs(params.per_prefill_step)
            } else {
                0.0
            }
            + secs(params.per_request) * f64::from(out.admitted);
        // The decoders' context: the steps' mean is the last one's less
        // half the growth over the run.
        let context = out.context_tokens as f64 - decodes as f64 * (n - 1.0) / 2.0;
        self.decode += secs(params.per_decode_seq) * decodes as f64
            + secs(params.per_context_token) * context.max(0.0);
    }

    /// The averages so far.
    pub fn usage(&self) -> Usage {
        let per_time = |x: f64| {
            if self.window > 0.0 {
                x / self.window
            } else {
                0.0
            }
        };
        let cost = self.base + self.prefill + self.decode;
        let per_cost = |x: f64| if cost > 0.0 { x / cost } else { 0.0 };
        Usage {
            window_s: self.window,
            busy_share: per_time(self.busy),
            mean_running: per_time(self.running),
            full_slots_share: per_time(self.full),
            mean_waiting: per_time(self.waiting),
            mean_kv_usage: per_time(self.kv),
            kv_blocked_share: per_time(self.kv_blocked),
            budget_full_share: per_time(self.budget_full),
            base_share: per_cost(self.base),
            prefill_share: per_cost(self.prefill),
            decode_share: per_cost(self.decode),
            preemptions: self.preemptions,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::preset;

    fn batch_step(start_ms: u64, prefill: u32, decodes: u32, p: &ModelParams) -> BatchStep {
        BatchStep {
            start: Duration::from_millis(start_ms),
            duration: p.batch_step_time(u64::from(prefill), u64::from(decodes)),
            prefill_tokens: prefill,
            prefill_pairs: 0,
            decode_seqs: decodes,
            context_tokens: 0,
            admitted: 0,
            events: Vec::new(),
        }
    }

    fn state(running: u64, waiting: u64, kv_usage: f64) -> BatchState {
        BatchState {
            running,
            waiting,
            kv_usage,
            preemptions: 0,
        }
    }

    #[test]
    fn states_are_weighted_by_how_long_they_last() {
        // tiny: 5 ms base, 5 µs per prefill token, 50 µs per decode.
        let p = preset::tiny();
        let mut m = UsageMeter::new(&p, Duration::from_millis(100));
        // Before the window: ignored.
        m.batch_step(&p, &batch_step(0, 1000, 0, &p), state(32, 9, 1.0));
        // 10 ms step (5 ms base + 1000 prefill tokens × 5 µs), 2 running.
        m.batch_step(&p, &batch_step(100, 1000, 0, &p), state(2, 0, 0.5));
        // 10 ms idle.
        m.idle(Duration::from_millis(110), Duration::from_millis(120));
        // 10 ms step of 100 decodes (5 + 5 ms) with all 32 slots full.
        m.batch_step(&p, &batch_step(120, 0, 100, &p), state(32, 4, 0.25));
        let u = m.usage();
        assert!((u.window_s - 0.030).abs() < 1e-12, "{u:?}");
        assert!((u.busy_share - 2.0 / 3.0).abs() < 1e-9);
        assert!((u.mean_running - (2.0 * 10.0 + 32.0 * 10.0) / 30.0).abs() < 1e-9);
        assert!((u.full_slots_share - 1.0 / 3.0).abs() < 1e-9);
        assert!((u.mean_kv_usage - (5.0 + 2.5) / 30.0).abs() < 1e-9);
        assert!((u.mean_waiting - 40.0 / 30.0).abs() < 1e-9);
        // 20 ms busy: 10 ms base, 5 ms prefill, 5 ms decode.
        assert!((u.base_share - 0.5).abs() < 1e-9);
        assert!((u.prefill_share - 0.25).abs() < 1e-9);
        assert!((u.decode_share - 0.25).abs() < 1e-9);
        assert_eq!(u.kv_blocked_share, 0.0);
    }

    #[test]
    fn a_queue_behind_a_free_slot_with_budget_left_is_blocked_by_kv() {
        let p = preset::tiny();
        let mut m = UsageMeter::new(&p, Duration::ZERO);
        m.batch_step(&p, &batch_step(0, 0, 10, &p), state(10, 3, 0.99));
        // The whole budget used: the queue waits for the budget, not for KV.
        m.batch_step(&p, &batch_step(10, 2038, 10, &p), state(11, 3, 0.9));
        let u = m.usage();
        let first = p.batch_step_time(0, 10).as_secs_f64();
        assert!(
            (u.kv_blocked_share - first / u.window_s).abs() < 1e-9,
            "{u:?}"
        );
        assert!((u.budget_full_share - (1.0 - first / u.window_s)).abs() < 1e-9);
    }

    #[test]
    fn a_full_prefill_lane_holds_the_queue_back_not_the_kv_cache() {
        // α = 0.1: beside 10 decoders (5 ms base + 10 × 50 µs = 5.5 ms of
        // room) a step hides at most 5.5 ms / (0.9 × 5 µs) = 1222 prompt
        // tokens, well under the 4096-token budget.
        let p = ModelParams {
            max_num_batched_tokens: 4096,
            prefill_interference: 0.1,
            block_tokens: crate::sim::blocks::BLOCK_TOKENS,
            ..preset::tiny()
        };
        let lane = p.prefill_lane_cap(10);
        assert_eq!(lane, 1222);
        let mut m = UsageMeter::new(&p, Duration::ZERO);
        m.batch_step(&p, &batch_step(0, lane, 10, &p), state(11, 3, 0.2));
        let u = m.usage();
        assert_eq!(u.kv_blocked_share, 0.0, "{u:?}");
        assert_eq!(u.budget_full_share, 1.0, "{u:?}");
        // The lane is busy the whole step: the prompt tokens' whole compute
        // (not the α of it the step is charged) is as long as the step, more
        // than the fixed cost and the decodes beside it.
        let prefill_s = 5e-6 * f64::from(lane);
        let busy = p.batch_step_time(u64::from(lane), 10).as_secs_f64();
        assert!((prefill_s - busy).abs() < 1e-5, "{prefill_s} vs {busy}");
        let work = 5e-3 + prefill_s + 10.0 * 50e-6;
        assert!((u.prefill_share - prefill_s / work).abs() < 1e-9, "{u:?}");
        assert!(u.prefill_share > u.base_share + u.decode_share, "{u:?}");
    }

    #[test]
    fn an_empty_window_is_all_zeros() {
        let m = UsageMeter::new(&preset::tiny(), Duration::ZERO);
        assert_eq!(m.usage(), Usage::default());
    }
}

//! Prompts computed together: the prefill probe that separates the cost per
//! prompt token from prefill attention. Pure: the plan from a pilot, the
//! step each level shows from its records.
//!
//! Lone requests alone cannot tell a cost per token from attention over the
//! prompt (each token against the ones before it, `n(n+1)/2` pairs for a
//! prompt of `n`) on a noisy server: the curvature drowns in the TTFT's
//! spread (vLLM on CPU: 40 ± 74 ns a pair from 54 lone requests). Here each
//! level first sends a *blocker*, one prompt of `N` tokens, then, while the
//! server computes it, a burst of prompts the scheduler takes together in
//! the next step: either one prompt of `N` tokens or `k` of `N/k`. The burst's
//! first tokens come out at the end of that one step, so the step lasts the
//! time from the blocker's first token to theirs (the server's overhead per
//! request is in both and cancels): `s + per_token × N + per_pair × pairs`,
//! the same `N` tokens in either split, `k` times fewer pairs in the
//! second; a third burst, half the split's prompts, gives `s`, the fixed
//! cost of a step that computes prompt tokens. On vLLM on CPU: 655 ms for
//! sixteen 128-token prompts, 857 ms for one of 2,040 tokens (100 ns a
//! pair), 230-240 ms for 512 tokens however split: `s` about 95 ms where a
//! decode step's base is 42. The profile's `F` comes from this `s` only
//! when the interference probe sent no short prompt
//! ([`super::prompt_step`]): beside decoders, what served traffic meets,
//! a prompt's step on that engine costs a few ms beyond its tokens.

pub use super::prefill::BatchSample;
use super::prefill::TtftSample;
use crate::metrics::RequestRecord;
use std::time::Duration;

/// Prompts of the split burst, fewer on a smaller batch limit.
pub const SPLIT: u32 = 16;
/// When the burst is sent, as a share of the blocker's expected prefill.
pub const SEND_AT: f64 = 0.35;
/// The most levels the probe runs (4 of each burst): on a fast server
/// the budget's rest would hold hundreds.
pub const MAX_LEVELS: usize = 12;
/// The widest spread of a burst's first tokens, as a share of the step, for
/// them to count as one step.
pub const ONE_STEP_SPREAD: f64 = 0.2;

/// The probe: each level is a blocker of `tokens`, then at `send_at` one
/// burst, in turn whole (`1 × tokens`), split (`split × tokens / split`)
/// and half of the split (the same prompts, half the tokens: the step's
/// fixed cost apart from its cost per token).
#[derive(Debug, Clone, PartialEq)]
pub struct BatchPlan {
    pub tokens: u32,
    pub split: u32,
    pub send_at: Duration,
    /// How long a level may run.
    pub length: Duration,
}

impl BatchPlan {
    /// Level `i`'s burst: `(prompts, tokens each)`.
    pub fn burst(&self, i: usize) -> (u32, u32) {
        match i % 3 {
            0 => (1, self.tokens),
            1 => (self.split, self.tokens / self.split),
            _ => (self.split / 2, self.tokens / self.split),
        }
    }
}

/// The plan: `N` the longest lone prompt (`lone`, the lone requests) within
/// the token budget (when the server reports one), the split at most the
/// batch limit less the blocker; the burst is sent at [`SEND_AT`] of the
/// blocker's time to its first token, the longest lone prompts' median
/// scaled to `N`. `None` without lone answers or when no split of at least
/// 2 fits.
pub fn plan(lone: &[TtftSample], budget: Option<u64>, batch_limit: usize) -> Option<BatchPlan> {
    let longest = lone.iter().map(|s| s.prompt_tokens).max()?;
    let mut ttfts: Vec<f64> = lone
        .iter()
        .filter(|s| s.prompt_tokens == longest && !s.repeat)
        .map(|s| s.ttft_s)
        .collect();
    ttfts.sort_by(f64::total_cmp);
    let tokens = budget.map_or(longest, |b| {
        longest.min(u32::try_from(b).unwrap_or(u32::MAX))
    });
    let lone_s = ttfts.get(ttfts.len() / 2)? * f64::from(tokens) / f64::from(longest.max(1));
    let split = SPLIT.min(u32::try_from(batch_limit.saturating_sub(1)).unwrap_or(SPLIT));
    if split < 2 || tokens < 2 * split || !lone_s.is_finite() || lone_s <= 0.0 {
        return None;
    }
    Some(BatchPlan {
        tokens: tokens / split * split,
        split,
        send_at: Duration::from_secs_f64(SEND_AT * lone_s),
        length: Duration::from_secs_f64(4.0 * lone_s + 1.0),
    })
}

/// The step a level shows, from its records (the blocker first): `None`
/// when a request failed, the burst was not sent before the blocker's
/// first token (it could not join the next step), or its first tokens are
/// spread over more than [`ONE_STEP_SPREAD`] of the step (more than one).
pub fn observe(records: &[RequestRecord]) -> Option<BatchSample> {
    let (blocker, burst) = records.split_first()?;
    let done = blocker.first_token?;
    if burst.is_empty() || burst.iter().any(|r| r.sent >= done) {
        return None;
    }
    let mut firsts: Vec<Duration> = burst.iter().map(|r| r.first_token).collect::<Option<_>>()?;
    firsts.sort_unstable();
    let (first, last) = (firsts[0], firsts[firsts.len() - 1]);
    let step = firsts[firsts.len() / 2].checked_sub(done)?.as_secs_f64();
    if step <= 0.0 || (last - first).as_secs_f64() > ONE_STEP_SPREAD * step {
        return None;
    }
    Some(BatchSample {
        prompts: burst.len() as u32,
        tokens: burst[0].prompt_len,
        step_s: step,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(prompt: u32, sent_ms: u64, first_ms: Option<u64>) -> RequestRecord {
        RequestRecord {
            prompt_len: prompt,
            sent: Duration::from_millis(sent_ms),
            first_token: first_ms.map(Duration::from_millis),
            ..RequestRecord::default()
        }
    }

    fn lone(n: u32, ttft_s: f64, repeat: bool) -> TtftSample {
        TtftSample {
            prompt_tokens: n,
            ttft_s,
            repeat,
        }
    }

    #[test]
    fn the_plan_keeps_within_the_budget_and_the_batch_limit() {
        // The longest lone prompts took 0.8, 0.9 and 1.0 s (a cached repeat 0.05).
        let l = [
            lone(16, 0.06, false),
            lone(2045, 0.8, false),
            lone(2045, 0.05, true),
            lone(2045, 1.0, false),
            lone(2045, 0.9, false),
        ];
        let p = plan(&l, Some(2048), 128).unwrap();
        assert_eq!((p.tokens, p.split), (2032, 16));
        assert_eq!(p.burst(0), (1, 2032));
        assert_eq!(p.burst(1), (16, 127));
        assert_eq!(p.burst(2), (8, 127));
        assert_eq!(p.burst(3), (1, 2032));
        let expect = SEND_AT * 0.9 * 2045.0_f64.min(2048.0) / 2045.0;
        assert!((p.send_at.as_secs_f64() - expect).abs() < 1e-6, "{p:?}");
        // A 256-token budget: the blocker too is cut to it, and sent sooner.
        let small = plan(&l, Some(256), 128).unwrap();
        assert_eq!(small.tokens, 256);
        assert!(small.send_at < p.send_at / 7);
        // Five slots leave a split of 4; llama.cpp's 2 leave 1: none.
        assert_eq!(plan(&l, None, 5).unwrap().split, 4);
        assert_eq!(plan(&l, None, 2), None);
        assert_eq!(plan(&[], None, 64), None);
    }

    #[test]
    fn a_burst_in_one_step_gives_that_step() {
        // The blocker's first token at 900 ms; four prompts sent at 300 ms
        // come out at 1,500-1,510 ms: a 600-ms step.
        let mut r = vec![rec(2048, 0, Some(900))];
        r.extend((0..4).map(|i| rec(512, 300, Some(1500 + 3 * i))));
        let s = observe(&r).unwrap();
        assert_eq!((s.prompts, s.tokens), (4, 512));
        assert!((s.step_s - 0.606).abs() < 1e-9, "{s:?}");
        assert_eq!(s.load(), (2048.0, 4.0 * 512.0 * 513.0 / 2.0));
    }

    #[test]
    fn a_burst_late_spread_or_failed_gives_nothing() {
        let blocker = rec(2048, 0, Some(900));
        let late = vec![blocker.clone(), rec(512, 950, Some(1500))];
        assert_eq!(observe(&late), None);
        // Two steps: 600 and 1,200 ms after the blocker.
        let spread = vec![
            blocker.clone(),
            rec(512, 300, Some(1500)),
            rec(512, 300, Some(2100)),
        ];
        assert_eq!(observe(&spread), None);
        let failed = vec![blocker, rec(512, 300, None)];
        assert_eq!(observe(&failed), None);
        assert_eq!(observe(&[rec(2048, 0, Some(900))]), None);
    }
}

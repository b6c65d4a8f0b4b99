//! The prefill interference on simulated time: what an arriving prompt costs
//! the sequences decoding beside it, and its own time to first token.

use super::*;
use crate::sim::capacity::{capacity, Bottleneck};

/// 10 ms steps, 100 µs per prompt token, 500 µs per decoder; room for long
/// prompts in one budget.
fn params(alpha: f64) -> ModelParams {
    ModelParams {
        max_num_seqs: 8,
        max_num_batched_tokens: 4096,
        kv_cache_tokens: 100_000,
        max_model_len: 8192,
        step_base: Duration::from_millis(10),
        per_prefill_token: Duration::from_micros(100),
        per_decode_seq: Duration::from_micros(500),
        prefill_interference: alpha,
        block_tokens: crate::sim::blocks::BLOCK_TOKENS,
        per_context_token: std::time::Duration::ZERO,
        per_request: std::time::Duration::ZERO,
        per_prefill_pair: std::time::Duration::ZERO,
        per_prefill_step: std::time::Duration::ZERO,
        stalls: crate::sim::params::HostStalls::NONE,
    }
}

/// Steps the engine from 0: `decoders` long requests at 0, one prompt of
/// `prompt` tokens (1 output token, id 100) at the first step end from `at`.
/// Returns the token times of decoder 0 and the prompt's time to first token.
fn run(alpha: f64, decoders: u32, prompt: u32, at: Duration) -> (Vec<Duration>, Duration) {
    let mut engine = Engine::new(params(alpha)).with_prefix_caching(false);
    for id in 0..decoders {
        engine.submit(u64::from(id), 4, 400, Duration::ZERO);
    }
    let (mut now, mut submitted) = (Duration::ZERO, None);
    let (mut times, mut first) = (Vec::new(), None);
    loop {
        if submitted.is_none() && now >= at {
            engine.submit(100, prompt, 1, now);
            submitted = Some(now);
        }
        let Some(out) = engine.step(now) else {
            break;
        };
        for ev in &out.events {
            match (ev.id, ev.kind) {
                (0, EventKind::Token { .. }) => times.push(out.end()),
                (100, EventKind::Token { index: 1, .. }) => first = Some(out.end()),
                _ => {}
            }
        }
        now = out.end();
    }
    let first = first.expect("the prompt was answered");
    (times, first - submitted.unwrap_or_default())
}

/// Decoder time beyond `gap` per token: what the prompt added in all.
fn extra(times: &[Duration], gap: Duration) -> Duration {
    times
        .windows(2)
        .map(|w| (w[1] - w[0]).saturating_sub(gap))
        .sum()
}

#[test]
fn a_prompt_adds_alpha_times_its_prefill_to_the_decoders() {
    // 3 decoders: 10 + 1.5 = 11.5 ms a step. A 600-token prompt is 60 ms of
    // prefill compute.
    let gap = params(1.0).batch_step_time(0, 3);
    assert_eq!(gap, Duration::from_micros(11_500));
    for (alpha, want_us) in [(1.0, 60_000), (0.5, 30_000), (0.25, 15_000), (0.0, 0)] {
        let (times, _) = run(alpha, 3, 600, Duration::from_millis(200));
        let got = extra(&times, gap);
        // One nanosecond of rounding per lengthened step at most.
        let diff = got.as_nanos().abs_diff(want_us * 1000);
        assert!(
            diff < 100,
            "α {alpha}: decoders lost {got:?}, want {want_us} µs"
        );
    }
}

#[test]
fn below_one_the_prompt_is_spread_over_steps_the_lane_can_hide() {
    // α = 0.5 with 3 decoders: a step hides 11.5 ms / 50 µs = 230 tokens,
    // so 600 tokens take 3 steps (230, 230, 140).
    let gap = params(0.5).batch_step_time(0, 3);
    let (times, ttft) = run(0.5, 3, 600, Duration::from_millis(200));
    let long: Vec<Duration> = times
        .windows(2)
        .map(|w| w[1] - w[0])
        .filter(|g| *g > gap)
        .collect();
    let us = |n: u64| params(0.5).batch_step_time(n, 3);
    assert_eq!(long, [us(230), us(230), us(140)]);
    // The prompt's own time: its three steps, never faster than its compute.
    assert_eq!(ttft, us(230) * 2 + us(140));
    assert!(ttft >= params(0.5).per_prefill_token * 600);
}

#[test]
fn disaggregated_decode_steps_never_change() {
    let gap = params(0.0).batch_step_time(0, 3);
    let (times, ttft) = run(0.0, 3, 2000, Duration::from_millis(100));
    assert!(times.windows(2).all(|w| w[1] - w[0] == gap));
    // 2000 tokens at 11.5 ms / 100 µs = 115 a step: 18 steps, about the
    // prompt's 200 ms of compute.
    assert_eq!(ttft, gap * 18);
}

#[test]
fn a_lone_prompt_is_a_plain_prefill_step_whatever_alpha() {
    for alpha in [0.0, 0.3, 0.7, 1.0] {
        let (_, ttft) = run(alpha, 0, 1000, Duration::ZERO);
        // 10 ms + 1000 × 100 µs.
        assert_eq!(ttft, Duration::from_millis(110), "α {alpha}");
        let c = capacity(&params(alpha), 1000, 1);
        assert!((c.lone_ttft_s - 0.110).abs() < 1e-12, "α {alpha}");
    }
}

#[test]
fn the_prefill_lane_can_bind_the_capacity() {
    // Long prompts, short outputs, no interference: the lane computes 10k
    // prompt tokens a second at most, so μ ≤ 10 req/s for 1000-token prompts.
    let c = capacity(&params(0.0), 1000, 2);
    assert_eq!(c.bottleneck, Bottleneck::PrefillLane);
    assert!(c.mu <= 10.0 + 1e-9, "{}", c.mu);
    assert!(c.mu > 9.0, "{}", c.mu);
    // The same shape in one shared step is slot-bound and slower.
    let shared = capacity(&params(1.0), 1000, 2);
    assert_eq!(shared.bottleneck, Bottleneck::MaxNumSeqs);
    assert!(shared.mu < c.mu);
}

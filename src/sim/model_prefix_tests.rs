//! Unit tests of the engine's prefix cache, on simulated time.

use super::*;
use crate::sim::blocks::BLOCK_TOKENS;
use crate::sim::capacity::capacity_cached;
use crate::sim::preset;

const B: u32 = BLOCK_TOKENS;

/// Block hashes for a prompt made of `shared` blocks common to every prompt
/// of this test, then `own` blocks unique to `tag`.
fn blocks(shared: u32, own: u32, tag: u64) -> Vec<u64> {
    (0..shared)
        .map(|i| 1_000 + u64::from(i))
        .chain((0..own).map(|i| (tag << 32) + u64::from(i)))
        .collect()
}

/// Steps the engine from `now` until it is idle; returns the end time.
fn drain(engine: &mut Engine, mut now: Duration, batch_steps: &mut Vec<BatchStep>) -> Duration {
    while let Some(out) = engine.step(now) {
        now = out.end();
        batch_steps.push(out);
    }
    now
}

fn cached_of(batch_steps: &[BatchStep], id: u64) -> Option<u32> {
    batch_steps
        .iter()
        .flat_map(|s| &s.events)
        .find_map(|e| match e.kind {
            EventKind::Scheduled { cached } if e.id == id => Some(cached),
            _ => None,
        })
}

#[test]
fn long_blocks_serve_a_shared_prefix_only_up_to_its_last_full_block() {
    // vLLM's CPU backend keeps 128-token blocks: of a 10-block (160-token)
    // shared prefix only the first 128 tokens are one full long block.
    let p = ModelParams {
        block_tokens: 8 * B,
        ..preset::tiny()
    };
    let mut engine = Engine::new(p);
    let mut batch_steps = Vec::new();
    engine.submit_blocks(0, 12 * B + 5, blocks(10, 2, 1), 2, Duration::ZERO);
    let t = drain(&mut engine, Duration::ZERO, &mut batch_steps);
    engine.submit_blocks(1, 12 * B + 5, blocks(10, 2, 2), 2, t);
    let first = batch_steps.len();
    drain(&mut engine, t, &mut batch_steps);
    assert_eq!(cached_of(&batch_steps, 1), Some(8 * B));
    assert_eq!(batch_steps[first].prefill_tokens, 4 * B + 5);
}

#[test]
fn a_block_size_not_a_multiple_of_the_hash_unit_is_refused() {
    let p = ModelParams {
        block_tokens: B + 1,
        ..preset::tiny()
    };
    let err = p.validate().unwrap_err();
    assert!(err.contains("block_tokens"), "{err}");
}

#[test]
fn a_repeated_prefix_is_prefilled_once_and_counted_as_hits() {
    let p = preset::tiny();
    let mut engine = Engine::new(p.clone());
    let mut batch_steps = Vec::new();
    // 10 shared blocks + 2 own blocks + 5 loose tokens = 197 tokens.
    engine.submit_blocks(0, 12 * B + 5, blocks(10, 2, 1), 2, Duration::ZERO);
    let t = drain(&mut engine, Duration::ZERO, &mut batch_steps);
    assert_eq!(batch_steps[0].prefill_tokens, 12 * B + 5);
    engine.submit_blocks(1, 12 * B + 5, blocks(10, 2, 2), 2, t);
    let first = batch_steps.len();
    drain(&mut engine, t, &mut batch_steps);
    // Only the second prompt's own 2 blocks and 5 loose tokens are computed.
    assert_eq!(batch_steps[first].prefill_tokens, 2 * B + 5);
    assert_eq!(
        batch_steps[first].duration,
        p.batch_step_time(u64::from(2 * B + 5), 0)
    );
    assert_eq!(cached_of(&batch_steps, 0), Some(0));
    assert_eq!(cached_of(&batch_steps, 1), Some(10 * B));
    let c = engine.counters();
    assert_eq!(c.prefix_cache_queries, 2 * u64::from(12 * B + 5));
    assert_eq!(c.prefix_cache_hits, u64::from(10 * B));
    // Idle: nothing is in use, the blocks stay cached in free KV.
    assert_eq!(engine.kv_used(), 0);
}

#[test]
fn a_fully_cached_prompt_still_computes_its_last_block() {
    let mut engine = Engine::new(preset::tiny());
    let mut batch_steps = Vec::new();
    engine.submit_blocks(0, 4 * B, blocks(4, 0, 0), 1, Duration::ZERO);
    let t = drain(&mut engine, Duration::ZERO, &mut batch_steps);
    engine.submit_blocks(1, 4 * B, blocks(4, 0, 0), 1, t);
    let first = batch_steps.len();
    drain(&mut engine, t, &mut batch_steps);
    assert_eq!(batch_steps[first].prefill_tokens, B);
    assert_eq!(cached_of(&batch_steps, 1), Some(3 * B));
}

#[test]
fn concurrent_sharers_hold_the_prefix_once_in_the_kv_budget() {
    let mut engine = Engine::new(preset::tiny());
    let mut batch_steps = Vec::new();
    engine.submit_blocks(0, 10 * B, blocks(8, 2, 1), 50, Duration::ZERO);
    // The first step prefills request 0 and caches its 10 blocks.
    let out = engine.step(Duration::ZERO).unwrap();
    assert_eq!(engine.kv_used(), u64::from(10 * B));
    engine.submit_blocks(1, 10 * B, blocks(8, 2, 2), 50, out.end());
    drain(&mut engine, out.end(), &mut batch_steps);
    assert_eq!(cached_of(&batch_steps, 1), Some(8 * B));
    // Peak use was 8 shared + 2 + 2 own blocks (+ decoded tokens), not 20 blocks.
    assert_eq!(engine.kv_used(), 0);
}

#[test]
fn lru_blocks_are_evicted_when_the_budget_needs_room() {
    let p = ModelParams {
        kv_cache_tokens: 4096,
        max_model_len: 4096,
        ..preset::tiny()
    };
    let mut engine = Engine::new(p);
    let mut batch_steps = Vec::new();
    // 100 blocks (1600 tokens) cached, then evicted by a prompt that needs
    // 3000 of the 4096 tokens.
    engine.submit_blocks(0, 100 * B, blocks(100, 0, 0), 1, Duration::ZERO);
    let t = drain(&mut engine, Duration::ZERO, &mut batch_steps);
    engine.submit_blocks(1, 3000, blocks(0, 187, 9), 1, t);
    let t = drain(&mut engine, t, &mut batch_steps);
    engine.submit_blocks(2, 100 * B, blocks(100, 0, 0), 1, t);
    drain(&mut engine, t, &mut batch_steps);
    let cached = cached_of(&batch_steps, 2).unwrap();
    assert!(cached < 100 * B && cached > 0, "cached {cached}");
    // What survived is the head of the prefix, so the hit is a prefix.
    assert_eq!(cached % B, 0);
}

#[test]
fn with_prefix_caching_off_nothing_is_reused_or_counted() {
    let mut engine = Engine::new(preset::tiny()).with_prefix_caching(false);
    let mut batch_steps = Vec::new();
    engine.submit_blocks(0, 8 * B, blocks(8, 0, 0), 1, Duration::ZERO);
    let t = drain(&mut engine, Duration::ZERO, &mut batch_steps);
    engine.submit_blocks(1, 8 * B, blocks(8, 0, 0), 1, t);
    drain(&mut engine, t, &mut batch_steps);
    assert_eq!(cached_of(&batch_steps, 1), Some(0));
    assert_eq!(engine.counters().prefix_cache_queries, 0);
}

#[test]
fn overload_rate_with_a_shared_prefix_converges_to_the_cached_mu() {
    // 1008-token prompts, the first 896 (56 blocks) shared: h = 896/1008.
    let p = ModelParams {
        kv_cache_tokens: 200_000,
        per_prefill_token: Duration::from_micros(20),
        ..preset::tiny()
    };
    let (n_in, n_out) = (63 * B, 8);
    let h = f64::from(56 * B) / f64::from(n_in);
    let c = capacity_cached(&p, n_in, n_out, h);
    let mut engine = Engine::new(p);
    let mut now = Duration::ZERO;
    let gap = Duration::from_secs_f64(1.0 / (2.0 * c.mu));
    let (mut next_arrival, mut id, mut finished) = (Duration::ZERO, 0u64, Vec::new());
    while now < Duration::from_secs(20) {
        while next_arrival <= now {
            engine.submit_blocks(id, n_in, blocks(56, 7, id), n_out, next_arrival);
            id += 1;
            next_arrival += gap;
        }
        let out = engine.step(now).unwrap();
        for e in &out.events {
            if let EventKind::Token { last: true, .. } = e.kind {
                finished.push(out.end());
            }
        }
        now = out.end().max(now + Duration::from_micros(1));
    }
    let measured = finished
        .iter()
        .filter(|t| **t >= Duration::from_secs(5) && **t < Duration::from_secs(15))
        .count() as f64
        / 10.0;
    let err = (measured - c.mu).abs() / c.mu;
    assert!(err < 0.05, "measured {measured:.1} req/s vs μ {:.1}", c.mu);
    let hits = engine.counters().prefix_cache_hits as f64;
    let queries = engine.counters().prefix_cache_queries as f64;
    assert!(
        (hits / queries - h).abs() < 0.01,
        "hit rate {}",
        hits / queries
    );
}

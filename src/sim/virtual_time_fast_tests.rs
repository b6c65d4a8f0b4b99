//! The decode-run fast path ([`Engine::decode_run`]) against the engine's
//! own step by step: a run with every token's time kept never takes it, so
//! the two runs of one load must agree on every request's timings, the
//! steps, the preemptions and the usage, over engines that preempt, cache
//! prefixes, chunk prompts and stream at low and high load, with and
//! without a cost per context token (each step of a run then longer than
//! the one before) and per request.

use super::*;
use proptest::prelude::*;

fn engine(
    seqs: u32,
    kv: u32,
    budget: u32,
    base_us: u64,
    prefill_ns: u64,
    seq_us: u64,
    alpha: f64,
) -> ModelParams {
    ModelParams {
        max_num_seqs: seqs,
        max_num_batched_tokens: budget,
        kv_cache_tokens: kv,
        max_model_len: 1000,
        step_base: Duration::from_micros(base_us),
        per_prefill_token: Duration::from_nanos(prefill_ns),
        per_decode_seq: Duration::from_micros(seq_us),
        prefill_interference: alpha,
        block_tokens: crate::sim::blocks::BLOCK_TOKENS,
        per_context_token: std::time::Duration::ZERO,
        per_request: std::time::Duration::ZERO,
        per_prefill_pair: std::time::Duration::ZERO,
        per_prefill_step: std::time::Duration::ZERO,
        stalls: crate::sim::params::HostStalls::NONE,
    }
}

fn both(
    params: &ModelParams,
    load: &VirtualLoad,
    seed: u64,
    rate: f64,
) -> (VirtualRun, VirtualRun) {
    let gaps = unit_gaps(seed, 1.0, load.gaps_needed()).unwrap();
    let fast = simulate(params, load, &gaps, rate).unwrap();
    let slow_load = VirtualLoad {
        token_times: true,
        ..load.clone()
    };
    let mut slow = simulate(params, &slow_load, &gaps, rate).unwrap();
    for r in &mut slow.requests {
        r.token_times.clear();
    }
    (fast, slow)
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

fn same_usage(a: &Usage, b: &Usage) -> bool {
    let pairs = [
        (a.window_s, b.window_s),
        (a.busy_share, b.busy_share),
        (a.mean_running, b.mean_running),
        (a.full_slots_share, b.full_slots_share),
        (a.mean_waiting, b.mean_waiting),
        (a.mean_kv_usage, b.mean_kv_usage),
        (a.kv_blocked_share, b.kv_blocked_share),
        (a.budget_full_share, b.budget_full_share),
        (a.base_share, b.base_share),
        (a.prefill_share, b.prefill_share),
        (a.decode_share, b.decode_share),
    ];
    pairs.iter().all(|&(x, y)| close(x, y)) && a.preemptions == b.preemptions
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    #[test]
    fn a_decode_run_changes_nothing_a_step_by_step_run_would_not(
        seqs in 1u32..24,
        kv in 1000u32..20_000,
        budget in prop_oneof![Just(2048u32), 64u32..512],
        base_us in 500u64..20_000,
        prefill_ns in 0u64..200_000,
        seq_us in 0u64..2_000,
        alpha in prop_oneof![Just(1.0), 0.0f64..1.0],
        context_ns in prop_oneof![Just(0u64), 1u64..20_000],
        request_us in prop_oneof![Just(0u64), 1u64..50_000],
        pair_ns in prop_oneof![Just(0u64), 1u64..500],
        prefill_step_us in prop_oneof![Just(0u64), 1u64..50_000],
        stall_rate in prop_oneof![Just(0.0f64), 0.1f64..50.0],
        stall_us in 1u64..200_000,
        input in 1u32..400,
        output in 1u32..200,
        prefix in prop_oneof![Just(0u32), 16u32..200],
        caching in any::<bool>(),
        rate_share in 0.05f64..3.0,
        seed in 0u64..1000,
    ) {
        let params = ModelParams {
            per_context_token: Duration::from_nanos(context_ns),
            per_request: Duration::from_micros(request_us),
            per_prefill_pair: Duration::from_nanos(pair_ns),
            per_prefill_step: Duration::from_micros(prefill_step_us),
            stalls: crate::sim::params::HostStalls {
                rate_per_s: stall_rate,
                mean: Duration::from_micros(stall_us),
            },
            ..engine(seqs, kv, budget, base_us, prefill_ns, seq_us, alpha)
        };
        let load = VirtualLoad {
            shared_prefix: prefix,
            prefix_caching: caching,
            ..VirtualLoad::fixed(input, output, 20, 150)
        };
        // Rates around the engine's own scale: a lone request's time.
        let lone = params.batch_step_time(u64::from(input + prefix), 0).as_secs_f64()
            + params.batch_step_time(0, 1).as_secs_f64() * f64::from(output);
        let rate = rate_share * f64::from(seqs) / lone;
        let (fast, slow) = both(&params, &load, seed, rate);
        prop_assert_eq!(&fast.requests, &slow.requests);
        prop_assert_eq!(fast.arrived, slow.arrived);
        prop_assert_eq!(fast.steps, slow.steps);
        prop_assert_eq!(fast.preemptions, slow.preemptions);
        prop_assert!(same_usage(&fast.usage, &slow.usage), "{:?}\n{:?}", fast.usage, slow.usage);
    }
}

#[test]
fn a_lone_stream_takes_its_decode_steps_in_one() {
    let params = engine(4, 10_000, 2048, 5_000, 5_000, 50, 1.0);
    let mut e = Engine::new(params.clone());
    e.submit(1, 100, 64, Duration::ZERO);
    let first = e.step(Duration::ZERO).unwrap();
    // Not before the first token, nor when an arrival comes within 2 steps.
    let step = params.batch_step_time(0, 1);
    assert_eq!(e.decode_run(first.end(), Some(first.end() + step)), None);
    let run = e.decode_run(first.end(), None).unwrap();
    assert_eq!(run.steps, 63);
    assert_eq!(run.last.start, first.end() + step * 62);
    assert_eq!(run.last.duration, step);
    let last = EventKind::Token {
        index: 64,
        last: true,
    };
    assert_eq!(
        run.last.events,
        [crate::sim::model::Event { id: 1, kind: last }]
    );
    assert!(e.is_idle());
    assert_eq!(e.counters().n_batch_steps, 64);
    assert_eq!(e.counters().generation_tokens, 64);
    // An arrival 10 steps on lets 10 steps start before it.
    let mut e = Engine::new(params);
    e.submit(1, 100, 64, Duration::ZERO);
    let first = e.step(Duration::ZERO).unwrap();
    let run = e
        .decode_run(first.end(), Some(first.end() + step * 10))
        .unwrap();
    assert_eq!(run.steps, 10);
}

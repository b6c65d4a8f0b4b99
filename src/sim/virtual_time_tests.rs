//! Tests of the virtual-time simulation against closed forms of the model.

use super::*;
use crate::sim::capacity::capacity;
use crate::sim::preset;

fn load(input_len: u32, output_len: u32, warmup: usize, requests: usize) -> VirtualLoad {
    VirtualLoad::fixed(input_len, output_len, warmup, requests)
}

/// The slot server of issue 14: 4 slots, 5 ms steps, no per-token cost.
fn slot_server() -> ModelParams {
    ModelParams {
        max_num_seqs: 4,
        per_prefill_token: Duration::ZERO,
        per_decode_seq: Duration::ZERO,
        ..preset::tiny()
    }
}

fn sorted_ttfts_s(run: &VirtualRun) -> Vec<f64> {
    let mut v: Vec<f64> = run
        .requests
        .iter()
        .map(|r| r.ttft().as_secs_f64())
        .collect();
    v.sort_by(f64::total_cmp);
    v
}

fn p99(sorted: &[f64]) -> f64 {
    sorted[(sorted.len() - 1) * 99 / 100]
}

#[test]
fn a_lone_request_sees_the_lone_ttft_and_tpot_of_the_capacity_model() {
    for (p, input, output) in [
        (preset::tiny(), 128, 64),
        (preset::tiny(), 3000, 16), // two prefill chunks of 2048
        (preset::seven_b_24gb(), 1024, 128),
    ] {
        let c = capacity(&p, input, output);
        let lone = VirtualLoad {
            token_times: true,
            ..load(input, output, 0, 1)
        };
        let run = simulate(&p, &lone, &[2.0], 1.0).unwrap();
        let r = &run.requests[0];
        assert_eq!(r.arrival, Duration::from_secs(2));
        assert!(
            (r.ttft().as_secs_f64() - c.lone_ttft_s).abs() < 1e-9,
            "{input}/{output}"
        );
        let tpot = (r.e2el() - r.ttft()).as_secs_f64() / f64::from(output - 1);
        assert!(
            (tpot - c.lone_tpot_s).abs() < 1e-9,
            "{tpot} vs {}",
            c.lone_tpot_s
        );
        assert_eq!(r.output_tokens, output);
        assert_eq!(r.token_times.len(), output as usize);
        assert_eq!(r.token_times.first(), Some(&r.first_token));
        assert_eq!(r.token_times.last(), Some(&r.finish));
    }
}

#[test]
fn an_arrival_during_a_step_joins_at_the_next_step() {
    let p = slot_server();
    // Request 0 at 1 s starts a 5 ms step at once; request 1 arrives 2 ms
    // into it and is admitted when that step ends, at 1.005 s.
    let run = simulate(&p, &load(16, 3, 0, 2), &[1.0, 0.002], 1.0).unwrap();
    let [a, b] = &run.requests[..] else {
        panic!("two requests")
    };
    assert_eq!(a.first_token, Duration::from_millis(1005));
    assert_eq!(b.first_token, Duration::from_millis(1010));
    assert_eq!(b.ttft(), Duration::from_millis(8));
    assert_eq!(b.finish, Duration::from_millis(1020));
}

#[test]
fn at_a_very_low_rate_the_median_ttft_is_the_lone_ttft() {
    let p = preset::tiny();
    let c = capacity(&p, 128, 64);
    let l = load(128, 64, 100, 2_000);
    let gaps = unit_gaps(7, 1.0, l.gaps_needed()).unwrap();
    // λ = 0.2/s against a 0.33 s lone request: most requests arrive to an idle engine.
    let run = simulate(&p, &l, &gaps, 0.2).unwrap();
    let ttfts = sorted_ttfts_s(&run);
    assert!((ttfts[ttfts.len() / 2] - c.lone_ttft_s).abs() < 1e-9);
    assert!(ttfts[0] >= c.lone_ttft_s - 1e-9);
}

#[test]
fn far_above_capacity_the_throughput_is_the_capacity_mu() {
    for (p, input, output) in [
        (preset::tiny(), 128, 64),
        (slot_server(), 16, 19),
        (preset::seven_b_24gb(), 128, 64),
    ] {
        let mu = capacity(&p, input, output).mu;
        let l = load(input, output, 500, 3_000);
        let gaps = unit_gaps(1, 1.0, l.gaps_needed()).unwrap();
        let run = simulate(&p, &l, &gaps, 3.0 * mu).unwrap();
        let got = run.throughput();
        assert!(
            (got / mu - 1.0).abs() < 0.03,
            "{input}/{output}: {got} vs mu {mu}"
        );
    }
}

#[test]
fn below_capacity_the_throughput_is_the_arrival_rate() {
    let p = slot_server();
    let l = load(16, 19, 500, 5_000);
    let gaps = unit_gaps(3, 1.0, l.gaps_needed()).unwrap();
    let run = simulate(&p, &l, &gaps, 30.0).unwrap();
    assert!(
        (run.throughput() / 30.0 - 1.0).abs() < 0.05,
        "{}",
        run.throughput()
    );
}

#[test]
fn with_common_random_numbers_the_p99_ttft_rises_with_the_rate() {
    let p = slot_server();
    let l = load(16, 19, 500, 5_000);
    let gaps = unit_gaps(11, 1.0, l.gaps_needed()).unwrap();
    let p99s: Vec<f64> = [10.0, 20.0, 30.0, 35.0, 38.0, 41.0]
        .iter()
        .map(|&rate| p99(&sorted_ttfts_s(&simulate(&p, &l, &gaps, rate).unwrap())))
        .collect();
    assert!(p99s.windows(2).all(|w| w[0] <= w[1]), "{p99s:?}");
    // Light load: about one step; near μ = 42/s: a long queue.
    assert!(p99s[0] < 0.02 && p99s[5] > 0.3, "{p99s:?}");
}

#[test]
fn the_same_seed_gives_the_same_run_and_another_seed_another() {
    let p = preset::tiny();
    let l = load(128, 64, 10, 200);
    let gaps = |seed| unit_gaps(seed, 1.0, l.gaps_needed()).unwrap();
    let a = simulate(&p, &l, &gaps(1), 50.0).unwrap();
    assert_eq!(a, simulate(&p, &l, &gaps(1), 50.0).unwrap());
    assert_ne!(a, simulate(&p, &l, &gaps(2), 50.0).unwrap());
    assert_eq!(a.requests.len(), 200);
    assert!(a.arrived >= 210);
}

#[test]
fn unit_gaps_have_mean_one_and_the_burstiness_sets_their_spread() {
    assert_eq!(unit_gaps(0, f64::INFINITY, 3).unwrap(), vec![1.0; 3]);
    for (b, var) in [(1.0, 1.0), (0.5, 2.0), (4.0, 0.25)] {
        let g = unit_gaps(5, b, 100_000).unwrap();
        let mean = g.iter().sum::<f64>() / g.len() as f64;
        let v = g.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / g.len() as f64;
        assert!((mean - 1.0).abs() < 0.02, "b {b}: mean {mean}");
        assert!((v / var - 1.0).abs() < 0.05, "b {b}: variance {v}");
    }
    for bad in [0.0, -1.0, f64::NAN, f64::NEG_INFINITY] {
        assert!(unit_gaps(0, bad, 3).unwrap_err().contains("burstiness"));
    }
}

#[test]
fn bad_inputs_are_refused_with_a_reason() {
    let p = preset::tiny();
    let gaps = [1.0; 4];
    let cases = [
        (load(4000, 200, 0, 1), 1.0, "max_model_len"),
        (load(0, 10, 0, 1), 1.0, "at least 1"),
        (load(10, 10, 0, 0), 1.0, "at least one request"),
        (load(10, 10, 2, 3), 1.0, "unit gaps"),
        (load(10, 10, 0, 1), 0.0, "rate"),
        (load(10, 10, 0, 1), f64::INFINITY, "rate"),
    ];
    for (l, rate, want) in cases {
        let err = simulate(&p, &l, &gaps, rate).unwrap_err();
        assert!(err.contains(want), "{l:?} at {rate}: {err}");
    }
}

#[test]
fn per_request_lengths_cycle_and_the_shared_prefix_is_part_of_the_prompt() {
    let p = preset::tiny();
    let l = VirtualLoad {
        lengths: vec![(10, 3), (20, 5), (30, 7)],
        shared_prefix: 100,
        ..load(999, 999, 2, 6)
    };
    assert_eq!((l.shape(0), l.shape(4)), ((110, 3), (120, 5)));
    let gaps = unit_gaps(2, 1.0, l.gaps_needed()).unwrap();
    let run = simulate(&p, &l, &gaps, 1.0).unwrap();
    let outputs: Vec<u32> = run.requests.iter().map(|r| r.output_tokens).collect();
    // Measured requests are 2..8: lengths 2, 0, 1, 2, 0, 1 of the cycle.
    assert_eq!(outputs, vec![7, 3, 5, 7, 3, 5]);
}

#[test]
fn a_cached_shared_prefix_is_computed_once() {
    let p = preset::tiny();
    let ttft_of_second = |caching: bool| {
        let l = VirtualLoad {
            shared_prefix: 1024,
            prefix_caching: caching,
            ..load(64, 2, 1, 1)
        };
        // Ten seconds apart: the second request finds an idle engine.
        let run = simulate(&p, &l, &[1.0, 10.0], 1.0).unwrap();
        run.requests[0].ttft()
    };
    // 1024 prefix tokens are 64 full blocks: only the 64 own tokens compute.
    assert_eq!(ttft_of_second(true), p.batch_step_time(64, 0));
    assert_eq!(ttft_of_second(false), p.batch_step_time(1088, 0));
}

#[test]
fn usage_shows_full_slots_at_overload_and_idle_time_at_light_load() {
    let p = slot_server();
    let l = load(16, 19, 300, 3_000);
    let gaps = unit_gaps(4, 1.0, l.gaps_needed()).unwrap();
    let mu = capacity(&p, 16, 19).mu;
    let over = simulate(&p, &l, &gaps, 2.0 * mu).unwrap().usage;
    assert!(over.full_slots_share > 0.95, "{over:?}");
    assert!((over.mean_running - 4.0).abs() < 0.2, "{over:?}");
    // No per-token cost: every step is its fixed cost.
    assert!((over.base_share - 1.0).abs() < 1e-12 && over.prefill_share == 0.0);
    assert!(
        over.busy_share > 0.99 && over.mean_waiting > 10.0,
        "{over:?}"
    );
    let light = simulate(&p, &l, &gaps, 0.2 * mu).unwrap().usage;
    // Little's law: 0.2 μ × 95 ms of service ≈ 0.8 sequences running.
    assert!((light.mean_running - 0.8).abs() < 0.1, "{light:?}");
    assert!(
        light.busy_share < 0.7 && light.full_slots_share < 0.05,
        "{light:?}"
    );
}

#[test]
fn a_kv_cache_too_small_for_the_batch_preempts_and_blocks_admission() {
    let p = ModelParams {
        max_num_seqs: 64,
        kv_cache_tokens: 4_096,
        max_model_len: 4_096,
        ..preset::tiny()
    };
    // 64 sequences of 256 + 256 tokens would need 32k tokens of KV.
    let l = load(256, 256, 100, 1_000);
    let gaps = unit_gaps(5, 1.0, l.gaps_needed()).unwrap();
    let run = simulate(&p, &l, &gaps, 2.0 * capacity(&p, 256, 256).mu).unwrap();
    let u = run.usage;
    assert!(
        u.preemptions > 0 && run.preemptions >= u.preemptions,
        "{u:?}"
    );
    assert!(u.kv_blocked_share > 0.3 && u.mean_kv_usage > 0.8, "{u:?}");
    assert!(u.full_slots_share < 0.01 && u.mean_running < 20.0, "{u:?}");
}

#[test]
fn shaped_loads_are_checked_against_max_model_len_and_empty_requests() {
    let p = preset::tiny();
    let gaps = [1.0; 4];
    let long = VirtualLoad {
        lengths: vec![(10, 10), (4_000, 100)],
        ..load(10, 10, 0, 1)
    };
    assert!(simulate(&p, &long, &gaps, 1.0)
        .unwrap_err()
        .contains("4100"));
    let prefixed = VirtualLoad {
        shared_prefix: 4_000,
        ..load(10, 100, 0, 1)
    };
    assert!(simulate(&p, &prefixed, &gaps, 1.0)
        .unwrap_err()
        .contains("max_model_len"));
    let empty = VirtualLoad {
        lengths: vec![(10, 0)],
        ..load(10, 10, 0, 1)
    };
    assert!(simulate(&p, &empty, &gaps, 1.0)
        .unwrap_err()
        .contains("at least 1"));
}

//! Tests of the virtual-time simulation against closed forms of the model.

use super::*;
use crate::sim::capacity::capacity;
use crate::sim::preset;

fn load(input_len: u32, output_len: u32, warmup: usize, requests: usize) -> VirtualLoad {
    VirtualLoad {
        input_len,
        output_len,
        warmup,
        requests,
        token_times: false,
    }
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

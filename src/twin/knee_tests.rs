//! Tests of the true-knee search on small virtual-time loads.

use super::*;
use crate::metrics::stats::request::{tpot_seconds, ttft_seconds};
use crate::sim::preset;
use crate::sim::virtual_time::VirtualRequest;
use std::time::Duration;

/// The slot server of issue 14: 4 slots, 5 ms steps, no per-token cost;
/// 16 in / 19 out is a 95 ms service, μ = 4 / 95 ms ≈ 42.1 req/s.
fn slot_server(slos: &[&str], seeds: Vec<u64>) -> TruthConfig {
    TruthConfig {
        params: ModelParams {
            max_num_seqs: 4,
            per_prefill_token: std::time::Duration::ZERO,
            per_decode_seq: std::time::Duration::ZERO,
            ..preset::tiny()
        },
        load: VirtualLoad::fixed(16, 19, 300, 3_000),
        slos: slos.iter().map(|s| s.parse().unwrap()).collect(),
        range_ratio: (0.0, 0.0),
        burstiness: 1.0,
        seeds,
        precision: 0.005,
        tail: crate::sim::params::HostStalls::NONE,
    }
}

#[test]
fn the_knee_passes_its_slo_and_the_rate_just_above_fails_it() {
    let cfg = slot_server(&["p99_ttft_ms<=300"], vec![0]);
    let t = true_knee(&cfg).unwrap();
    let k = &t.seeds[0];
    assert_eq!(k.kind, KneeKind::Knee);
    let fails_at = k.fails_at.unwrap();
    assert!(fails_at > k.knee && fails_at - k.knee <= 0.005 * k.knee * 1.0001);
    let gaps = unit_gaps(0, 1.0, cfg.load.gaps_needed()).unwrap();
    let p99_at = |rate| {
        let run = simulate(&cfg.params, &cfg.load, &gaps, rate).unwrap();
        evaluate(&cfg.slos[0], &records(&run)).observed_ms.unwrap()
    };
    assert!(p99_at(k.knee) <= 300.0);
    assert!(p99_at(fails_at) > 300.0);
    // An M/D/4-like queue at 42 req/s capacity: the knee is well inside it.
    assert!(k.knee > 25.0 && k.knee < t.mu, "{k:?}, mu {}", t.mu);
}

#[test]
fn a_tighter_bound_gives_a_lower_knee() {
    let knee = |slo| true_knee(&slot_server(&[slo], vec![3])).unwrap().median;
    let (tight, loose) = (knee("p99_ttft_ms<=50"), knee("p99_ttft_ms<=300"));
    assert!(tight < loose, "{tight} vs {loose}");
}

#[test]
fn every_slo_must_hold_so_two_slos_give_the_lower_knee() {
    let knee = |slos: &[&str]| true_knee(&slot_server(slos, vec![4])).unwrap().median;
    let ttft = knee(&["p99_ttft_ms<=300"]);
    let e2el = knee(&["p50_e2el_ms<=110"]);
    let both = knee(&["p99_ttft_ms<=300", "p50_e2el_ms<=110"]);
    assert!(
        (both - ttft.min(e2el)).abs() < 1e-9,
        "{both} vs {ttft}, {e2el}"
    );
}

#[test]
fn a_bound_no_queue_can_break_stops_at_the_service_rate() {
    // 1000 s of TTFT: only instability (throughput short of the rate) fails.
    let t = true_knee(&slot_server(&["p99_ttft_ms<=1000000"], vec![0])).unwrap();
    assert_eq!(t.seeds[0].kind, KneeKind::Knee);
    // Above μ only by the backlog allowance (2%) and the sampling noise of
    // 3000 arrivals (1.8% is one standard deviation).
    assert!(t.median > 0.93 * t.mu && t.median < 1.05 * t.mu, "{t:?}");
}

#[test]
fn a_bound_below_the_lone_ttft_has_no_knee() {
    // The lone TTFT is one 5 ms step.
    let t = true_knee(&slot_server(&["p50_ttft_ms<4"], vec![0, 1])).unwrap();
    assert!(t.seeds.iter().all(|k| k.kind == KneeKind::BelowLowest));
    assert_eq!((t.min, t.median, t.max), (0.0, 0.0, 0.0));
    assert_eq!(t.seeds[0].at_knee[0].observed_ms, Some(5.0));
}

#[test]
fn seeds_give_a_spread_whose_median_lies_between_min_and_max() {
    let t = true_knee(&slot_server(&["p99_ttft_ms<=300"], vec![0, 1, 2])).unwrap();
    let seeds: Vec<u64> = t.seeds.iter().map(|k| k.seed).collect();
    assert_eq!(seeds, vec![0, 1, 2]);
    assert!(t.min <= t.median && t.median <= t.max);
    assert!(t.max - t.min > 0.0, "three seeds gave the same knee: {t:?}");
    assert!(t.max / t.min < 1.3, "{t:?}");
}

#[test]
fn records_carry_vllms_ttft_tpot_and_itl() {
    let ms = Duration::from_millis;
    let run = VirtualRun {
        requests: vec![VirtualRequest {
            arrival: ms(100),
            first_token: ms(130),
            finish: ms(160),
            output_tokens: 4,
            token_times: vec![ms(130), ms(140), ms(150), ms(160)],
        }],
        arrived: 1,
        steps: 4,
        preemptions: 0,
        usage: Default::default(),
    };
    let r = &records(&run)[0];
    assert!((ttft_seconds(r).unwrap() - 0.030).abs() < 1e-12);
    // vLLM: (e2el − ttft) / (n − 1) = 30 ms / 3.
    assert!((tpot_seconds(r).unwrap() - 0.010).abs() < 1e-12);
    assert_eq!(r.itl, vec![ms(10); 3]);
    assert!(needs_token_times(&["p99_itl_ms<=20".parse().unwrap()]));
    assert!(!needs_token_times(&["p99_tpot_ms<=20".parse().unwrap()]));
}

#[test]
fn missing_slos_seeds_or_a_bad_precision_are_refused() {
    let mut cfg = slot_server(&[], vec![0]);
    assert!(true_knee(&cfg).unwrap_err().contains("SLO"));
    cfg = slot_server(&["p99_ttft_ms<=300"], vec![]);
    assert!(true_knee(&cfg).unwrap_err().contains("seed"));
    cfg = slot_server(&["p99_ttft_ms<=300"], vec![0]);
    cfg.precision = 0.0;
    assert!(true_knee(&cfg).unwrap_err().contains("precision"));
}

#[test]
fn a_server_keeps_up_below_its_service_rate_and_not_above() {
    let cfg = slot_server(&["p99_ttft_ms<=300"], vec![0]);
    let gaps = unit_gaps(9, 1.0, cfg.load.gaps_needed()).unwrap();
    let at = |rate| keeps_up(&simulate(&cfg.params, &cfg.load, &gaps, rate).unwrap());
    // μ ≈ 42.1 req/s: 5% over it grows the backlog by ~5% of the span.
    assert!(at(30.0) && at(40.0));
    assert!(!at(44.5) && !at(60.0));
}

#[test]
fn a_range_ratio_draws_each_seeds_lengths_from_the_random_datasets_ranges() {
    let mut cfg = slot_server(&["p99_ttft_ms<=300"], vec![0]);
    cfg.range_ratio = (0.5, 0.25);
    let a = load_for_seed(&cfg, 1).unwrap();
    assert_eq!(a.lengths.len(), cfg.load.gaps_needed());
    // 16 ± 50% and 19 ± 25%, as `kneecap run --random-range-ratio` draws them.
    assert!(a
        .lengths
        .iter()
        .all(|&(i, o)| (8..=24).contains(&i) && (14..=24).contains(&o)));
    let inputs: std::collections::BTreeSet<u32> = a.lengths.iter().map(|l| l.0).collect();
    assert_eq!(inputs.len(), 17, "every length of 8..=24 drawn");
    assert_eq!(a, load_for_seed(&cfg, 1).unwrap());
    assert_ne!(a, load_for_seed(&cfg, 2).unwrap());
    cfg.range_ratio = (1.0, 0.0);
    assert!(load_for_seed(&cfg, 1).unwrap_err().contains("range ratio"));
}

#[test]
fn a_cached_shared_prefix_raises_the_knee_of_a_prefill_bound_server() {
    let server = |caching: bool| TruthConfig {
        params: ModelParams {
            per_prefill_token: Duration::from_micros(50),
            ..preset::tiny()
        },
        load: VirtualLoad {
            shared_prefix: 1024,
            prefix_caching: caching,
            ..VirtualLoad::fixed(128, 16, 200, 2_000)
        },
        ..slot_server(&["p99_ttft_ms<=200"], vec![0])
    };
    let cold = true_knee(&server(false)).unwrap();
    let warm = true_knee(&server(true)).unwrap();
    // The cache leaves 128 of 1152 prompt tokens to compute.
    assert!(warm.mu > 2.0 * cold.mu, "{} vs {}", warm.mu, cold.mu);
    assert!(warm.median > 2.0 * cold.median, "{warm:?} vs {cold:?}");
}

#[test]
fn the_search_keeps_the_usage_at_the_knee_and_the_slos_where_it_fails() {
    let t = true_knee(&slot_server(&["p99_ttft_ms<=300"], vec![0])).unwrap();
    let k = &t.seeds[0];
    assert!(!k.at_fail.is_empty() && !k.at_fail[0].pass, "{k:?}");
    assert!(k.at_knee[0].pass);
    // 4 slots near their capacity: most of the time all four are taken.
    assert!(
        k.usage.mean_running > 3.0 && k.usage.full_slots_share > 0.5,
        "{:?}",
        k.usage
    );
}

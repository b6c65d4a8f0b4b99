//! Predictions on small virtual-time loads: four engines, each built to be
//! bound by one resource, are named correctly; corners widen the interval;
//! what moves the knee moves it the right way.

use super::*;
use crate::result::explain::Binding;
use crate::sim::preset;
use crate::sim::virtual_time::VirtualLoad;
use std::time::Duration;

fn search(params: ModelParams, (input, output): (u32, u32), slo: &str) -> TruthConfig {
    TruthConfig {
        params,
        load: VirtualLoad::fixed(input, output, 200, 2_000),
        slos: vec![slo.parse().unwrap()],
        range_ratio: (0.0, 0.0),
        burstiness: 1.0,
        seeds: vec![0],
        precision: 0.01,
        tail: crate::sim::params::HostStalls::NONE,
    }
}

fn predicted(truth: TruthConfig, moves: bool) -> Prediction {
    predict(&PredictConfig {
        truth,
        corners: Vec::new(),
        moves,
        misfit: None,
    })
    .unwrap()
}

/// 4 slots, 5 ms steps, no per-token cost: only the slots can bind.
fn slots() -> TruthConfig {
    let p = ModelParams {
        max_num_seqs: 4,
        per_prefill_token: Duration::ZERO,
        per_decode_seq: Duration::ZERO,
        ..preset::tiny()
    };
    search(p, (16, 19), "p99_ttft_ms<=300")
}

/// 64 slots but KV for about 21 sequences of 256 + 256 tokens.
fn kv() -> TruthConfig {
    let p = ModelParams {
        max_num_seqs: 64,
        kv_cache_tokens: 8_192,
        max_model_len: 4_096,
        ..preset::tiny()
    };
    search(p, (256, 256), "p99_ttft_ms<=2000")
}

/// 2048-token prompts at 100 µs a token, a roomy batch and KV cache.
fn prefill() -> TruthConfig {
    let p = ModelParams {
        max_num_seqs: 256,
        kv_cache_tokens: 1_000_000,
        max_model_len: 8_192,
        per_prefill_token: Duration::from_micros(100),
        ..preset::tiny()
    };
    search(p, (2048, 16), "p99_ttft_ms<=2000")
}

/// 500 µs per decoding sequence against a 20 ms TPOT bound: the batch may
/// grow to about 30 before TPOT breaks, far from its 256 slots.
fn tpot() -> TruthConfig {
    let p = ModelParams {
        max_num_seqs: 256,
        kv_cache_tokens: 1_000_000,
        per_decode_seq: Duration::from_micros(500),
        ..preset::tiny()
    };
    search(p, (64, 256), "p99_tpot_ms<=20")
}

#[test]
fn four_engines_each_bound_by_one_resource_are_named_correctly() {
    for (name, cfg, want) in [
        ("slots", slots(), Binding::BatchSlots),
        ("kv", kv(), Binding::KvCache),
        ("prefill", prefill(), Binding::PrefillCompute),
        ("tpot", tpot(), Binding::DecodeCompute),
    ] {
        let p = predicted(cfg, false);
        let e = p.explain.as_ref().unwrap();
        assert_eq!(e.binds, want, "{name}: {}", e.line);
        assert!(e.line.starts_with(want.label()), "{name}: {}", e.line);
        assert!(
            p.knee_req_s > 0.0 && p.kind == KneeKind::Knee,
            "{name}: {p:?}"
        );
    }
}

/// Half interference: prompts run in a prefill lane beside the decode
/// steps, so the step time holds only half their cost, but the lane (one
/// prompt token per 150 µs) is what the 1024-token prompts queue for. The
/// slots and the KV cache are roomy, the step's fixed cost large.
#[test]
fn a_full_prefill_lane_is_named_prefill_compute_and_the_prefill_cost_moves_it() {
    let p = ModelParams {
        max_num_seqs: 48,
        kv_cache_tokens: 60_000,
        step_base: Duration::from_millis(12),
        per_prefill_token: Duration::from_micros(150),
        per_decode_seq: Duration::from_micros(300),
        prefill_interference: 0.5,
        block_tokens: crate::sim::blocks::BLOCK_TOKENS,
        ..preset::tiny()
    };
    let p = predicted(search(p, (1024, 128), "p99_ttft_ms<=1000"), true);
    let e = p.explain.unwrap();
    assert_eq!(e.binds, Binding::PrefillCompute, "{}", e.line);
    let m = e.moves.unwrap();
    assert_eq!(m.parameter, "prefill_token_us");
    assert!(m.minus_25.knee.unwrap() > 1.15 * p.knee_req_s, "{m:?}");
    assert!(m.plus_25.knee.unwrap() < 0.85 * p.knee_req_s, "{m:?}");
}

#[test]
fn the_tpot_engine_names_the_failing_tpot_slo_and_the_per_sequence_cost() {
    let p = predicted(tpot(), true);
    let e = p.explain.unwrap();
    assert_eq!(e.failed_slos, vec!["p99_tpot_ms<=20".to_string()]);
    let m = e.moves.unwrap();
    assert_eq!(m.parameter, "decode_seq_us");
    // A cheaper sequence lets the batch grow further before TPOT breaks.
    let (cheaper, dearer) = (m.minus_25.knee.unwrap(), m.plus_25.knee.unwrap());
    assert!(
        cheaper > 1.1 * p.knee_req_s,
        "{cheaper} vs {}",
        p.knee_req_s
    );
    assert!(dearer < 0.9 * p.knee_req_s, "{dearer} vs {}", p.knee_req_s);
}

#[test]
fn more_slots_raise_a_slot_bound_knee_and_fewer_lower_it() {
    let p = predicted(slots(), true);
    let m = p.explain.unwrap().moves.unwrap();
    assert_eq!((m.parameter.as_str(), m.value), ("max_num_seqs", 4.0));
    assert_eq!((m.minus_25.value, m.plus_25.value), (3.0, 5.0));
    assert!(m.minus_25.knee.unwrap() < 0.85 * p.knee_req_s, "{m:?}");
    assert!(m.plus_25.knee.unwrap() > 1.15 * p.knee_req_s, "{m:?}");
    assert!(
        p.runs >= 3 * 2,
        "three searches (the central one and ±25%), each at least a pass and a fail: {}",
        p.runs
    );
}

#[test]
fn corners_widen_the_interval_around_the_central_knee() {
    let cfg = slots();
    let exact = predicted(cfg.clone(), false);
    let corner = |step_ms| ModelParams {
        step_base: Duration::from_millis(step_ms),
        ..cfg.params.clone()
    };
    let corners = vec![corner(4), corner(6)];
    let wide = predict(&PredictConfig {
        truth: cfg,
        corners,
        moves: false,
        misfit: None,
    })
    .unwrap();
    assert_eq!(wide.knee_req_s, exact.knee_req_s);
    assert_eq!(wide.corner_knees_req_s.len(), 2);
    // Faster steps serve more: the 4 ms corner is the interval's high end
    // (up to the rate its search found to fail, within the precision).
    let fast = wide.corner_knees_req_s[0];
    assert!(
        wide.high_req_s > fast && wide.high_req_s <= fast * (1.0 + 0.01),
        "{wide:?}"
    );
    assert_eq!(wide.low_req_s, wide.corner_knees_req_s[1]);
    assert!(wide.high_req_s > 1.15 * exact.knee_req_s, "{wide:?}");
    assert!(wide.low_req_s < 0.9 * exact.knee_req_s, "{wide:?}");
    // One seed and no corners: the interval is the knee's own bracket.
    assert_eq!(exact.low_req_s, exact.knee_req_s);
    let bracket = exact.high_req_s / exact.knee_req_s - 1.0;
    assert!(bracket > 0.0 && bracket <= 0.01, "{exact:?}");
}

#[test]
fn a_corners_knee_carries_the_seeds_chance_into_the_interval() {
    // Three seeds: their knees spread; each corner's knee is one seed's, so
    // the interval reaches half that spread beyond the corners.
    let cfg = TruthConfig {
        seeds: vec![0, 1, 2],
        ..slots()
    };
    let corner = |step_ms| ModelParams {
        step_base: Duration::from_millis(step_ms),
        ..cfg.params.clone()
    };
    let p = predict(&PredictConfig {
        truth: cfg.clone(),
        corners: vec![corner(4), corner(6)],
        moves: false,
        misfit: None,
    })
    .unwrap();
    let (lo, hi) = p.seed_spread_req_s;
    assert!(hi > lo, "the seeds must spread for this test: {p:?}");
    let half = (hi - lo) / 2.0;
    let slow = p.corner_knees_req_s[1];
    assert!(slow < lo, "{p:?}");
    assert!((p.low_req_s - (slow - half)).abs() < 1e-9, "{p:?}");
    let fast = p.corner_knees_req_s[0];
    assert!(
        p.high_req_s > fast + half && p.high_req_s <= fast * 1.01 + half,
        "{p:?}"
    );
}

#[test]
fn a_flagged_misfit_widens_the_interval_beyond_the_corners() {
    let cfg = slots();
    let exact = predicted(cfg.clone(), false);
    let misfit = Misfit {
        widen: 0.2,
        reasons: vec!["decode per sequence: curved".into()],
    };
    let wide = predict(&PredictConfig {
        truth: cfg,
        corners: Vec::new(),
        moves: false,
        misfit: Some(misfit.clone()),
    })
    .unwrap();
    assert_eq!(wide.knee_req_s, exact.knee_req_s);
    assert!(
        (wide.low_req_s - 0.8 * exact.low_req_s).abs() < 1e-9,
        "{wide:?}"
    );
    assert!(
        (wide.high_req_s - 1.2 * exact.high_req_s).abs() < 1e-9,
        "{wide:?}"
    );
    assert_eq!(wide.misfit, Some(misfit));
}

#[test]
fn replicas_round_up_and_the_interval_ends_swap() {
    let p = Prediction {
        knee_req_s: 10.0,
        low_req_s: 8.0,
        high_req_s: 12.5,
        kind: KneeKind::Knee,
        mu_req_s: 14.0,
        seed_spread_req_s: (9.0, 11.0),
        corner_knees_req_s: vec![8.0, 12.5],
        runs: 1,
        explain: None,
        misfit: None,
    };
    let r = replicas(100.0, &p);
    assert_eq!((r.replicas, r.low, r.high), (Some(10), Some(8), Some(13)));
    assert_eq!(replicas(101.0, &p).replicas, Some(11));
    assert_eq!(replicas(0.5, &p).replicas, Some(1));
    let none = Prediction {
        knee_req_s: 0.0,
        low_req_s: 0.0,
        ..p
    };
    let r = replicas(100.0, &none);
    assert_eq!((r.replicas, r.low, r.high), (None, Some(8), None));
}

#[test]
fn a_bad_corner_is_named() {
    let mut bad = slots().params;
    bad.max_num_seqs = 0;
    let err = predict(&PredictConfig {
        truth: slots(),
        corners: vec![slots().params, bad],
        moves: false,
        misfit: None,
    })
    .unwrap_err();
    assert!(
        err.contains("corner 2") && err.contains("max_num_seqs"),
        "{err}"
    );
}

/// The `7b-24gb` preset at 1024/128: the fixed step cost fills most of the
/// step time at the knee, yet the prefill cost is what the knee answers to,
/// so the sensitivity names prefill compute (the time shares alone said
/// decode compute).
#[test]
fn the_parameter_that_moves_the_knee_most_names_the_compute_that_binds() {
    let truth = search(preset::seven_b_24gb(), (1024, 128), "p99_ttft_ms<=500");
    let p = predicted(truth, true);
    let e = p.explain.expect("an explanation");
    let (base, prefill) = (
        e.evidence.base_share.unwrap(),
        e.evidence.prefill_share.unwrap(),
    );
    assert!(
        base > prefill,
        "the premise: base {base} vs prefill {prefill}"
    );
    assert_eq!(e.binds, Binding::PrefillCompute, "{}", e.line);
    let m = e.moves.expect("what moves it");
    assert_eq!(m.parameter, "prefill_token_us");
    assert!(m.minus_25.knee.unwrap() > 1.3 * p.knee_req_s, "{m:?}");
}

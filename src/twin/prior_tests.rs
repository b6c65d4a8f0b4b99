//! Tests of the twin's step prior on the slot server of issue 14 (4 slots,
//! 5 ms steps, 16 in / 19 out: μ ≈ 42.1 req/s; its p99 TTFT ≤ 300 ms knee
//! is about 35 req/s in virtual time).

use super::*;
use crate::sim::preset;
use crate::sim::virtual_time::VirtualLoad;
use std::time::Duration;

fn slot_server(slos: &[&str]) -> TruthConfig {
    TruthConfig {
        params: ModelParams {
            max_num_seqs: 4,
            per_prefill_token: Duration::ZERO,
            per_decode_seq: Duration::ZERO,
            ..preset::tiny()
        },
        load: VirtualLoad::fixed(16, 19, 300, 3_000),
        slos: slos.iter().map(|s| s.parse().unwrap()).collect(),
        range_ratio: (0.0, 0.0),
        burstiness: 1.0,
        seeds: vec![1, 2],
        precision: 0.005,
        tail: crate::sim::params::HostStalls::NONE,
    }
}

#[test]
fn the_prior_leans_pass_well_below_the_knee_and_fail_well_above() {
    let cfg = slot_server(&["p99_ttft_ms<=300"]);
    let q = 0.99;
    let below = step_prior(&cfg, &[], 25.0, 600).unwrap();
    let above = step_prior(&cfg, &[], 45.0, 600).unwrap();
    let (b, a) = (below.slos[0].unwrap(), above.slos[0].unwrap());
    assert_eq!(b.lean(q), Some(true), "{b:?}");
    assert_eq!(a.lean(q), Some(false), "{a:?}");
    assert!(b.share_over_low <= b.share_over_high);
    assert_eq!(below.weight, 600);
    // Past μ the queue grows without end: every request counts as over.
    assert_eq!(a.share_over_low, 1.0);
}

#[test]
fn a_less_favourable_corner_raises_the_high_share_only() {
    let cfg = slot_server(&["p99_ttft_ms<=300"]);
    let alone = step_prior(&cfg, &[], 33.0, 600).unwrap().slos[0].unwrap();
    let three_slots = ModelParams {
        max_num_seqs: 3,
        ..cfg.params
    };
    let with = step_prior(&cfg, &[three_slots], 33.0, 600).unwrap().slos[0].unwrap();
    assert!(
        with.share_over_high > alone.share_over_high,
        "{with:?} {alone:?}"
    );
    assert_eq!(with.share_over_low, alone.share_over_low);
}

#[test]
fn shares_rise_with_the_load_and_a_mean_slo_has_none() {
    let cfg = slot_server(&["p99_ttft_ms<=300", "mean_ttft_ms<=100"]);
    let share = |load| {
        step_prior(&cfg, &[], load, 1).unwrap().slos[0]
            .unwrap()
            .share_over_high
    };
    let (a, b, c) = (share(20.0), share(33.0), share(38.0));
    assert!(a <= b && b <= c && a < c, "{a} {b} {c}");
    assert_eq!(step_prior(&cfg, &[], 30.0, 1).unwrap().slos[1], None);
    assert!(step_prior(&cfg, &[], 0.0, 1).is_err());
}

#[test]
fn the_clear_loads_are_the_nearest_where_every_set_is_clear() {
    let cfg = slot_server(&["p99_ttft_ms<=300"]);
    let three_slots = ModelParams {
        max_num_seqs: 3,
        ..cfg.params
    };
    let corners = [three_slots];
    // An interval around the knee (about 35 req/s; 3 slots: about 26).
    let (pass, fail) = clear_loads(&cfg, &corners, (30.0, 36.0)).unwrap();
    let (pass, fail) = (pass.unwrap(), fail.unwrap());
    let at = |load| step_prior(&cfg, &corners, load, 1).unwrap().slos[0].unwrap();
    // Every set within half the allowed 1% at the pass end, and not yet one
    // step of 6% higher (the search stops at the first clear load).
    assert!(pass < 30.0 && at(pass).share_over_high <= 0.005, "{pass}");
    assert!(at(pass * CLEAR_STEP).share_over_high > 0.005, "{pass}");
    // Every set over twice the allowed 1% at the fail end, not one step lower.
    assert!(fail >= 36.0 && at(fail).share_over_low >= 0.02, "{fail}");
    if fail > 36.0 {
        assert!(at(fail / CLEAR_STEP).share_over_low < 0.02, "{fail}");
    }
}

//! Hostile profiles (issue 38): whatever numbers a profile JSON holds, it is
//! either refused at load with one line naming a field, or gives parameter
//! sets the simulator accepts, and a prediction from them ends in a knee or
//! an error line, never a panic. Small virtual-time loads: each case runs in
//! milliseconds.

use super::json::PredictJson;
use super::knee::TruthConfig;
use super::predict::{distinct_corners, predict, PredictConfig, Prediction};
use super::profile::{Estimate, ServerProfile, Status};
use super::testing::sample;
use super::{html, render};
use crate::sim::virtual_time::VirtualLoad;
use proptest::prelude::*;

/// The profile issue 38 measured on vLLM 0.32 at 5e5ceb1 (decode 1,504 µs
/// ± 3.5e18, step base 28 ± 48.6 ms, KV 17,516 ± 28,269 tokens, budget
/// 99.9 ± 15; the figures the issue does not give are plausible fillers).
const VLLM_5E5CEB1: &str = include_str!("../../tests/data/profile-5e5ceb1.json");

/// A prediction from `p` as `kneecap predict` makes one (central values,
/// distinct corners, misfit, what moves the knee when `moves`), on `n`
/// requests of `input`/`output` tokens, rendered as the command prints it.
fn predict_from(
    p: &ServerProfile,
    (input, output): (u32, u32),
    n: usize,
    moves: bool,
) -> Result<Prediction, String> {
    let params = p.params();
    let corners = distinct_corners(&params, p.corners().into_iter().map(|c| c.params));
    for c in std::iter::once(&params).chain(&corners) {
        assert_eq!(c.validate(), Ok(()), "{c:?}");
    }
    let cfg = PredictConfig {
        truth: TruthConfig {
            params,
            load: VirtualLoad::fixed(input, output, n / 4, n),
            slos: vec!["p99_ttft_ms<=2000".parse().unwrap()],
            range_ratio: (0.0, 0.0),
            burstiness: 1.0,
            seeds: vec![0],
            precision: 0.2,
            tail: crate::sim::params::HostStalls::NONE,
        },
        corners,
        moves,
        misfit: p.misfit(),
    };
    let knee = predict(&cfg)?;
    let mut out = PredictJson::new("test", "hostile", &cfg.truth, cfg.corners.len());
    out.knee = Some(knee.clone());
    assert!(render::knee_text(&out).starts_with("PREDICTED knee: "));
    assert!(!html::render(&out).is_empty());
    Ok(knee)
}

/// An error a user reads: one line, and no panic behind it (a search
/// thread's panic comes back as an error).
fn one_clear_line(e: &str) {
    assert!(!e.contains('\n') && !e.is_empty(), "{e:?}");
    assert!(!e.contains("panicked"), "{e}");
}

#[test]
fn the_5e5ceb1_vllm_profile_predicts_a_wide_interval_without_panicking() {
    let p = ServerProfile::from_json(VLLM_5E5CEB1).unwrap();
    // Read back, the three whose ± was not below the value are named.
    let q = &p.params;
    for e in [&q.decode_seq_us, &q.step_base_ms, &q.kv_cache_tokens] {
        assert_eq!(e.status, Status::NotIdentifiable, "{e:?}");
    }
    assert_eq!(q.max_num_batched_tokens.status, Status::Measured);
    // 1,000 requests: enough arrivals that, at the slow corner's rate, they
    // ran past what a Duration holds before the ranges were clamped.
    let knee = predict_from(&p, (128, 32), 1_000, false).unwrap_or_else(|e| panic!("{e}"));
    assert!(knee.low_req_s <= knee.knee_req_s && knee.knee_req_s <= knee.high_req_s);
    assert!(knee.high_req_s.is_finite(), "{knee:?}");
    // The flagged parameters widen it, the misfit naming each.
    let misfit = knee.misfit.unwrap();
    assert!(misfit
        .reasons
        .iter()
        .any(|r| r.starts_with("decode per sequence")));
}

#[test]
fn the_older_layout_still_loads() {
    let old = include_str!("../../tests/data/profile.json");
    let p = ServerProfile::from_json(old).unwrap();
    assert_eq!(p.schema_version, 1);
    assert_eq!(p.params().validate(), Ok(()));
}

fn hostile_number() -> impl Strategy<Value = f64> {
    prop_oneof![
        Just(0.0),
        Just(-1.0),
        Just(1e-300),
        Just(f64::MIN_POSITIVE),
        Just(1e300),
        Just(f64::MAX),
        Just(-f64::MAX),
        Just(3.5e18),
        Just(1e22),
        Just(1.0),
        0.0..2.0f64,
        0.0..1e5f64,
    ]
}

fn hostile_status() -> impl Strategy<Value = Status> {
    prop_oneof![
        Just(Status::Measured),
        Just(Status::Misfit),
        Just(Status::LowerBound),
        Just(Status::Reported),
        Just(Status::Assumed),
        Just(Status::NotIdentifiable),
    ]
}

/// Mostly a plausible central value (so most profiles load and reach the
/// simulator), now and then a hostile one.
fn central_value() -> impl Strategy<Value = f64> {
    prop_oneof![3 => 0.0..2.0f64, 3 => 1.0..1e5f64, 1 => hostile_number()]
}

prop_compose! {
    fn hostile_estimate()(
        value in central_value(),
        uncertainty in hostile_number(),
        low in hostile_number(),
        high in proptest::option::of(hostile_number()),
        status in hostile_status(),
    ) -> Estimate {
        Estimate { value, uncertainty, low, high, status, how: "hostile".into(), note: None }
    }
}

/// The sample profile with up to every estimate replaced.
fn hostile_profile() -> impl Strategy<Value = ServerProfile> {
    proptest::collection::vec(proptest::option::of(hostile_estimate()), 9).prop_map(|es| {
        let mut p = sample();
        let q = &mut p.params;
        let slots = [
            &mut q.step_base_ms,
            &mut q.prefill_token_us,
            &mut q.prefill_fixed_ms,
            &mut q.decode_seq_us,
            &mut q.max_num_seqs,
            &mut q.kv_cache_tokens,
            &mut q.max_num_batched_tokens,
            &mut q.max_model_len,
            &mut q.prefill_interference,
        ];
        for (slot, e) in slots.into_iter().zip(es) {
            if let Some(e) = e {
                *slot = e;
            }
        }
        p
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn no_profile_however_wrong_makes_predict_panic(p in hostile_profile(), moves in any::<bool>()) {
        match ServerProfile::from_json(&p.to_json()) {
            Err(e) => {
                one_clear_line(&e);
                prop_assert!(e.contains("params.") || e.contains("invalid"), "{}", e);
            }
            Ok(read) => {
                if let Err(e) = predict_from(&read, (16, 8), 400, moves) {
                    one_clear_line(&e);
                }
            }
        }
    }
}

/// The last guard (issue 38's panic site): a rate so small that the
/// arrivals leave the simulator's clock is an error, not a panic in
/// `arrival_times`.
#[test]
fn a_rate_too_small_for_the_virtual_clock_is_an_error() {
    use crate::sim::virtual_time::{simulate, unit_gaps};
    let params = sample().params();
    let load = VirtualLoad::fixed(16, 8, 10, 40);
    let gaps = unit_gaps(0, 1.0, load.gaps_needed()).unwrap();
    let err = simulate(&params, &load, &gaps, 1e-300).unwrap_err();
    one_clear_line(&err);
    assert!(err.contains("too slow to simulate"), "{err}");
    assert!(simulate(&params, &load, &gaps, 1.0).is_ok());
}

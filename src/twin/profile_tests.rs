//! Tests of the profile type: JSON round trip, versions, and the parameter
//! sets it gives the simulator.

use super::*;
use crate::twin::testing::sample;

#[test]
fn the_json_round_trips_and_names_its_version() {
    let p = sample();
    let text = p.to_json();
    assert!(text.contains("\"schema_version\": 3"), "{text}");
    assert_eq!(ServerProfile::from_json(&text).unwrap(), p);
}

#[test]
fn a_version_2_profile_reads_with_no_cost_of_context_or_requests() {
    let mut v: serde_json::Value = serde_json::from_str(&sample().to_json()).unwrap();
    v["schema_version"] = 2.into();
    let params = v["params"].as_object_mut().unwrap();
    params.remove("context_token_us");
    params.remove("request_ms");
    let p = ServerProfile::from_json(&v.to_string()).unwrap();
    assert_eq!(p.params.context_token_us.status, Status::Assumed);
    let m = p.params();
    assert_eq!(
        (m.per_context_token, m.per_request),
        (Duration::ZERO, Duration::ZERO)
    );
}

#[test]
fn the_costs_of_context_and_requests_reach_the_simulator_in_its_units() {
    let mut p = sample();
    p.params.context_token_us = Estimate::fitted(5.0, 0.5, 0.0, "synthetic");
    p.params.request_ms =
        Estimate::fitted(30.0, 20.0, 0.0, "synthetic").not_identifiable(0.0, "synthetic");
    let m = p.params();
    assert_eq!(m.per_context_token, Duration::from_micros(5));
    assert_eq!(m.per_request, Duration::from_millis(30));
    let corners = p.corners();
    let slow = &corners[0].params;
    assert_eq!(slow.per_context_token, Duration::from_micros(6));
    assert_eq!(slow.per_request, Duration::from_millis(70));
    let low = corners.iter().find(|c| c.name == "request_ms low").unwrap();
    assert_eq!(low.params.per_request, Duration::ZERO);
    // A request cost the probes cannot tell from 0 is a range, not a misfit.
    assert_eq!(p.misfit(), None);
}

#[test]
fn other_versions_and_other_files_are_refused_with_a_reason() {
    let text = sample()
        .to_json()
        .replace("\"schema_version\": 3", "\"schema_version\": 9");
    let err = ServerProfile::from_json(&text).unwrap_err();
    assert!(
        err.contains("schema_version 9") && err.contains("again"),
        "{err}"
    );
    let err = ServerProfile::from_json("{\"date\": 1}").unwrap_err();
    assert!(err.contains("no schema_version"), "{err}");
    let err = ServerProfile::from_json("not json").unwrap_err();
    assert!(err.contains("not a kneecap profile JSON"), "{err}");
    let cut = r#"{"schema_version": 1, "model": "m"}"#;
    assert!(ServerProfile::from_json(cut)
        .unwrap_err()
        .contains("invalid"));
}

#[test]
fn central_params_are_the_values_in_simulator_units() {
    let p = sample().params();
    assert_eq!(p.step_base, Duration::from_millis(5));
    assert_eq!(p.per_prefill_token, Duration::from_micros(5));
    assert_eq!(p.per_decode_seq, Duration::from_micros(50));
    assert_eq!(
        (p.max_num_seqs, p.kv_cache_tokens, p.max_num_batched_tokens),
        (32, 16_384, 1024)
    );
    assert_eq!((p.max_model_len, p.prefill_interference), (4096, 1.0));
    assert_eq!(p.validate(), Ok(()));
}

#[test]
fn corners_move_each_parameter_to_the_ends_of_its_range() {
    let profile = sample();
    let corners = profile.corners();
    assert_eq!(corners.len(), 2 + 2 * NAMES.len());
    let (slow, fast) = (&corners[0].params, &corners[1].params);
    // ±2σ = ±5% on the costs; the slow corner is the costly end.
    assert_eq!(slow.step_base, Duration::from_micros(5250));
    assert_eq!(fast.step_base, Duration::from_micros(4750));
    assert!(slow.per_decode_seq > fast.per_decode_seq);
    assert_eq!((slow.max_num_seqs, fast.max_num_seqs), (31, 33));
    // A lower bound has no upper end: the fast corner lifts the limit.
    assert_eq!(slow.max_num_batched_tokens, 1024);
    assert_eq!(fast.max_num_batched_tokens, UNBOUNDED_COUNT as u32);
    // A reported value has no spread; interference moves ±2σ too (a
    // mixed step may compute prompts slower than alone).
    assert_eq!(slow.kv_cache_tokens, fast.kv_cache_tokens);
    assert_eq!(fast.prefill_interference, 0.96);
    assert_eq!(slow.prefill_interference, 1.04);
    let one = corners
        .iter()
        .find(|c| c.name == "decode_seq_us high")
        .unwrap();
    let central = profile.params();
    assert_eq!(one.params.per_decode_seq, Duration::from_nanos(52_500));
    assert_eq!(one.params.step_base, central.step_base);
    for c in &corners {
        assert_eq!(c.params.validate(), Ok(()), "{}", c.name);
    }
}

#[test]
fn a_misfit_widens_the_range_and_says_why() {
    let e = Estimate::fitted(10.0, 0.1, 0.0, "line").misfit(2.0, 0.0, "curved");
    assert_eq!(e.status, Status::Misfit);
    assert_eq!((e.low, e.high), (6.0, Some(14.0)));
    assert_eq!(e.note.as_deref(), Some("curved"));
    // Never narrower than the fit's own uncertainty.
    let e = Estimate::fitted(10.0, 3.0, 0.0, "line").misfit(1.0, 0.0, "x");
    assert_eq!(e.uncertainty, 3.0);
    assert_eq!(e.low, 4.0);
}

#[test]
fn apply_sets_the_engine_and_prefix_caching() {
    let mut cfg = SimConfig::from_preset("7b-24gb").unwrap();
    let mut profile = sample();
    profile.params.prefix_caching.enabled = Some(false);
    profile.apply(&mut cfg);
    assert_eq!(cfg.params, profile.params());
    assert!(!cfg.prefix_caching);
    profile.params.prefix_caching.enabled = None;
    cfg.prefix_caching = true;
    profile.apply(&mut cfg);
    assert!(cfg.prefix_caching, "unknown leaves it as it was");
}

#[test]
fn a_profile_without_misfits_asks_for_no_widening() {
    assert_eq!(sample().misfit(), None);
}

#[test]
fn a_misfit_widens_predictions_by_its_relative_range_within_bounds() {
    let mut p = sample();
    // 2σ = 3 on 10: ±30%.
    p.params.decode_seq_us = Estimate::fitted(10.0, 0.1, 0.0, "line").misfit(1.5, 0.0, "curved");
    let m = p.misfit().unwrap();
    assert!((m.widen - 0.3).abs() < 1e-12, "{m:?}");
    assert_eq!(m.reasons, vec!["decode per sequence: curved".to_string()]);
    // A slight misfit still widens by the floor; a wild one is capped.
    p.params.decode_seq_us = Estimate::fitted(10.0, 0.1, 0.0, "line").misfit(0.1, 0.0, "x");
    assert_eq!(p.misfit().unwrap().widen, MISFIT_MIN_WIDEN);
    p.params.prefill_token_us = Estimate::fitted(1.0, 0.1, 0.0, "line").misfit(5.0, 0.0, "y");
    let m = p.misfit().unwrap();
    assert_eq!(m.widen, MISFIT_MAX_WIDEN);
    assert_eq!(m.reasons.len(), 2);
}

#[test]
fn a_loose_ttft_intercept_does_not_widen_predictions() {
    // The simulator never reads the TTFT intercept (vLLM on CPU: 47 ± 50 ms,
    // not identifiable), so it flags nothing a prediction depends on.
    let mut p = sample();
    p.params.prefill_fixed_ms =
        Estimate::fitted(47.0, 50.0, 0.0, "intercept").not_identifiable(0.0, "loose");
    assert_eq!(p.misfit(), None);
    p.params.prefill_interference =
        Estimate::fitted(1.0, 3.5, 0.0, "interference").not_identifiable(0.0, "two prompts");
    let m = p.misfit().unwrap();
    assert_eq!(
        m.reasons,
        vec!["prefill interference: two prompts".to_string()]
    );
}

#[test]
fn the_servers_block_size_reaches_the_simulator_in_whole_hash_units() {
    let mut p = sample();
    assert_eq!(p.params().block_tokens, BLOCK_TOKENS);
    for (reported, held) in [(128, 128), (100, 96), (1, 16), (u32::MAX, 1 << 16)] {
        p.params.block_tokens = Some(reported);
        assert_eq!(p.params().block_tokens, held, "{reported}");
        assert!(p.params().validate().is_ok());
        assert!(p.corners().iter().all(|c| c.params.block_tokens == held));
    }
    // An older profile (no block size) still reads.
    let text = sample().to_json();
    assert!(!text.contains("block_tokens"));
    p.params.block_tokens = Some(128);
    let back = ServerProfile::from_json(&p.to_json()).unwrap();
    assert_eq!(back.params.block_tokens, Some(128));
}

#[test]
fn a_small_fitted_sigma_still_leaves_the_range_one_percent_each_side() {
    let e = Estimate::fitted(100.0, 0.01, 0.0, "tight");
    assert!((e.low - 99.0).abs() < 1e-9 && (e.high.unwrap() - 101.0).abs() < 1e-9);
    let e = Estimate::fitted(100.0, 5.0, 0.0, "loose");
    assert!((e.low - 90.0).abs() < 1e-9 && (e.high.unwrap() - 110.0).abs() < 1e-9);
    assert_eq!(e.uncertainty, 5.0);
}

/// The twin takes the host's stalls at their mean; the simulator serving
/// the profile draws them over the decode step without their share.
#[test]
fn stalls_are_a_mean_for_the_twin_and_drawn_by_the_simulator() {
    let mut prof = sample();
    prof.params.stall_rate_per_s = Estimate::fitted(3.0, 0.3, 0.0, "synthetic");
    prof.params.stall_ms = Estimate::fitted(100.0, 10.0, 0.0, "synthetic");
    // 3 a second of 100 ms: 30% more on the decode step (5 ms, 50 µs).
    let twin = prof.params();
    assert_eq!(twin.stalls, crate::sim::params::HostStalls::NONE);
    assert!(
        (twin.step_base.as_secs_f64() - 0.0065).abs() < 1e-9,
        "{twin:?}"
    );
    assert!((twin.per_decode_seq.as_secs_f64() - 65e-6).abs() < 1e-12);
    let drawn = prof.drawn(twin.clone());
    assert_eq!(drawn.stalls.rate_per_s, 3.0);
    assert_eq!(drawn.stalls.mean, std::time::Duration::from_millis(100));
    assert!((drawn.step_base.as_secs_f64() - 0.005).abs() < 1e-9);
    assert!((drawn.per_decode_seq.as_secs_f64() - 50e-6).abs() < 1e-12);
    // Prefill is not the stalls' to stretch.
    assert_eq!(drawn.per_prefill_token, twin.per_prefill_token);
    let mut cfg = crate::sim::SimConfig::from_preset("tiny").unwrap();
    prof.apply(&mut cfg);
    assert_eq!(cfg.params, drawn);
}

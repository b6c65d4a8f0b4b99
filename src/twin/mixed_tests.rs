//! The mixed level's plan and its `α`, against a level whose counts are
//! worked by hand from the model's step.

use super::*;
use crate::twin::observe::{DecodeLevel, StallGaps};

fn est(value: f64, sigma: f64) -> Estimate {
    Estimate::fitted(value, sigma, 0.0, "test")
}

/// Base 30 ms, 600 µs a sequence, 2 µs a context token.
fn decode() -> DecodeFit {
    DecodeFit {
        step_base_ms: est(30.0, 1.0),
        decode_seq_us: est(600.0, 20.0),
        max_num_seqs: est(128.0, 0.0),
        context_token_us: est(2.0, 0.5),
        request_ms: est(0.0, 0.0),
        warnings: Vec::new(),
    }
}

/// 200 µs a prompt token, 100 ns a pair.
fn prefill() -> PrefillFit {
    PrefillFit {
        per_token_us: est(200.0, 10.0),
        fixed_ms: est(30.0, 5.0),
        pair_ns: est(100.0, 10.0),
        batch_step: None,
        longest: 2048,
        linear: false,
    }
}

/// A 10-s window of 100 streams at 270 context tokens, 2 prompts of 256
/// tokens a step. The model's step: (30 + 0.6 × 100) ms × 1.2 (stalls) +
/// 2 µs × 100 × 270 = 108 + 54 = 162 ms of decode, plus α × 2 × (51.2 +
/// 3.2896) = α × 108.98 ms of prefill.
fn level(alpha: f64) -> DecodeLevel {
    let step = 0.162 + alpha * 2.0 * (0.0512 + 100e-9 * 256.0 * 257.0 / 2.0);
    let steps = 10.0 / step;
    DecodeLevel {
        concurrency: 128,
        output_tokens: 32,
        start_s: 1.0,
        window_s: 10.0,
        streaming: 100.0,
        gaps: (steps * 100.0).round() as usize,
        mean_gap_s: step,
        median_gap_s: step,
        prefill_tokens_per_s: steps * 2.0 * 256.0 / 10.0,
        mean_context: 270.0,
        clean: None,
        running_mean: Some(100.0),
        running_max: Some(100.0),
        preemptions: Some(0.0),
        kv_usage_max: Some(0.3),
        stalls: StallGaps::default(),
        failed: 0,
    }
}

fn obs(alpha: f64) -> MixedObs {
    MixedObs {
        prompt_tokens: 256,
        level: level(alpha),
    }
}

#[test]
fn the_time_left_over_the_decode_steps_gives_alpha() {
    for alpha in [0.5, 1.0, 2.4] {
        let e = fit_alpha(&obs(alpha), &decode(), 0.2, &prefill(), 0.0).unwrap();
        // The gap count is rounded to whole tokens: within 0.5%.
        assert!((e.value - alpha).abs() < 0.005 * alpha, "{alpha}: {e:?}");
        assert!(e.uncertainty > 0.0 && e.uncertainty < e.value, "{e:?}");
    }
}

#[test]
fn the_stalls_and_the_context_are_not_read_as_prefill() {
    // Without the stalls' stretch and the context's cost, the same level
    // would read 1.0 as 1.0 + (18 + 54) / 108.98 = 1.66.
    let e = fit_alpha(&obs(1.0), &decode(), 0.0, &prefill(), 0.0).unwrap();
    assert!(e.value > 1.15, "no stretch: {e:?}");
    let mut flat = decode();
    flat.context_token_us = est(0.0, 0.0);
    let e = fit_alpha(&obs(1.0), &flat, 0.2, &prefill(), 0.0).unwrap();
    assert!(e.value > 1.4, "no context: {e:?}");
}

#[test]
fn a_thin_level_gives_nothing() {
    let mut thin = obs(1.0);
    thin.level.prefill_tokens_per_s = 5.0 * 256.0 / 10.0;
    assert_eq!(fit_alpha(&thin, &decode(), 0.2, &prefill(), 0.0), None);
    let mut few = obs(1.0);
    few.level.gaps = 50;
    assert_eq!(fit_alpha(&few, &decode(), 0.2, &prefill(), 0.0), None);
    let mut full = obs(1.0);
    full.level.preemptions = Some(3.0);
    assert_eq!(fit_alpha(&full, &decode(), 0.2, &prefill(), 0.0), None);
}

#[test]
fn the_plan_fills_the_batch_on_a_ramp_and_keeps_to_its_room() {
    let gap = |k: usize| 0.03 + 0.0007 * k as f64;
    let p = plan(128, 2048, Duration::from_secs(14), (0.08, gap)).unwrap();
    assert_eq!((p.streams, p.prompt), (128, 256));
    assert_eq!(p.ramp.len(), 128);
    // A stream every 10 ms: the ramp ends at 1.27 s.
    assert_eq!(p.ramp[127], Duration::from_secs_f64(0.01 * 127.0));
    assert!(p.length <= Duration::from_secs(14));
    let mean = p.outputs.iter().map(|&o| f64::from(o)).sum::<f64>() / p.outputs.len() as f64;
    assert!((mean - 32.0).abs() < 0.5, "{mean}");
    assert!(p.outputs.iter().all(|o| (16..=48).contains(o)));
    // More requests than the level can finish at the decode levels' gap,
    // every one of the shortest: a stream never runs out.
    let steps = p.length.as_secs_f64() / gap(128);
    assert!(
        p.outputs.len() as f64 >= 128.0 * (1.0 + steps / 16.0),
        "{}",
        p.outputs.len()
    );
    // Under 20 full-batch steps of room: no level.
    assert_eq!(plan(128, 2048, Duration::from_secs(3), (0.08, gap)), None);
    // A small batch limit, a short model.
    let small = plan(8, 300, Duration::from_secs(14), (0.08, gap)).unwrap();
    assert_eq!((small.streams, small.prompt), (8, 300 - 50));
}

#[test]
fn two_readings_that_agree_are_averaged_and_two_that_do_not_leave_the_full_batchs() {
    let loaded = |v: f64| Estimate::fitted(v, 0.1, 0.0, "mixed");
    // The simulator's README engine: 0.84 ± 0.1 beside 0.98 ± 0.002.
    let quiet = est(0.98, 0.002);
    let e = combine(loaded(0.84), &quiet, 3);
    assert!((e.value - 0.98).abs() < 0.001, "{e:?}");
    assert!(e.uncertainty < 0.002 && e.how.contains("agree"), "{e:?}");
    // vLLM on CPU: 1.31 ± 0.1 beside 0.70 ± 0.2 (2.7σ apart).
    let e = combine(loaded(1.31), &est(0.70, 0.2), 3);
    assert_eq!(e.value, 1.31);
    assert!(e.how.contains("full batch"), "{e:?}");
    // Equal weights: the plain mean, its σ shrunk by √2.
    let e = combine(loaded(1.0), &est(1.1, 0.1), 3);
    assert!((e.value - 1.05).abs() < 1e-12 && (e.uncertainty - 0.1 / 2f64.sqrt()).abs() < 1e-12);
    // An assumed quiet reading (no probe) leaves the level's.
    let assumed = Estimate::assumed(1.0, 0.0, Some(1.0), "assumed");
    assert_eq!(combine(loaded(0.9), &assumed, 0).value, 0.9);
}

#[test]
fn a_level_that_does_not_pin_alpha_down_leaves_the_quiet_one_and_says_so() {
    let quiet = est(0.9, 0.1);
    let mut loose = decode();
    loose.decode_seq_us = est(600.0, 5000.0);
    let level = obs(1.5);
    let mut warnings = Vec::new();
    let step = est(0.0, 0.0);
    let e = under_load(
        (Some(&level), Some(loose), Some(&prefill())),
        (0.2, 3),
        &step,
        quiet.clone(),
        &mut warnings,
    );
    assert_eq!(e, quiet);
    assert!(warnings[0].contains("not pinned down"), "{warnings:?}");
    // Pinned down and 6σ from the quiet one: the level's alone, no warning.
    let mut warnings = Vec::new();
    let e = under_load(
        (Some(&level), Some(decode()), Some(&prefill())),
        (0.2, 3),
        &step,
        quiet,
        &mut warnings,
    );
    assert!(
        (e.value - 1.5).abs() < 0.01 && warnings.is_empty(),
        "{e:?} {warnings:?}"
    );
}

/// `obs(1.0)` with `gaps` clean gaps of median `median_s` at 100 decoding
/// over 270 tokens of context.
fn with_clean(gaps: usize, median_s: f64) -> MixedObs {
    let mut o = obs(1.0);
    o.level.clean = Some(crate::twin::observe::CleanGaps {
        gaps,
        median_gap_s: median_s,
        batch: 100.0,
        context: 270.0,
    });
    o
}

#[test]
fn a_sustained_full_batch_slower_than_the_line_scales_it() {
    // The line at 100: 30 + 60 = 90 ms (± 2.2 ms), the context 54 ms. The
    // clean steps' median 171 ms: 117 ms of plain step, 1.3 times the line.
    let d = sustained(Some(&with_clean(400, 0.171)), decode());
    assert!((d.step_base_ms.value - 39.0).abs() < 1e-9, "{d:?}");
    assert!((d.decode_seq_us.value - 780.0).abs() < 1e-9, "{d:?}");
    assert!((d.decode_seq_us.uncertainty - 26.0).abs() < 1e-9);
    assert!(
        d.step_base_ms.how.contains("scaled by 1.30"),
        "{}",
        d.step_base_ms.how
    );
    // The context's cost is the long levels': kept.
    assert_eq!(d.context_token_us, decode().context_token_us);
    // Faster sustained scales it down the same way.
    let d = sustained(Some(&with_clean(400, 0.054 + 0.072)), decode());
    assert!((d.decode_seq_us.value - 480.0).abs() < 1e-9, "{d:?}");
}

#[test]
fn a_line_that_agrees_or_too_few_clean_gaps_leave_it_alone() {
    // 3 ms over the line at 100, within twice its 2.2 ms.
    assert_eq!(sustained(Some(&with_clean(400, 0.147)), decode()), decode());
    // 1.3 times, but on fewer clean gaps than MIN_CLEAN, or none, or no level.
    assert_eq!(
        sustained(Some(&with_clean(MIN_CLEAN - 1, 0.171)), decode()),
        decode()
    );
    assert_eq!(sustained(Some(&obs(1.0)), decode()), decode());
    assert_eq!(sustained(None, decode()), decode());
}

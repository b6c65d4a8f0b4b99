//! The decode fit on synthetic levels of a known server: 10 ms steps,
//! 200 µs per sequence, 16 slots, prompts of 32 tokens, outputs of 64.

use super::*;
use crate::twin::Status;

/// α × c_p of the synthetic server: 100 µs per prompt token.
const AC: f64 = 100e-6;

fn level(k: usize, gauge: bool) -> DecodeLevel {
    let d = k.min(16) as f64;
    let step = 0.010 + 200e-6 * d;
    // Each stream restarts every 64 steps with a 32-token prompt.
    let prompts_per_s = d / (64.0 * step) * 32.0;
    DecodeLevel {
        concurrency: k,
        output_tokens: 64,
        start_s: 0.1,
        window_s: 2.0,
        streaming: d * 63.0 / 64.0,
        gaps: 500,
        mean_gap_s: step / (1.0 - AC * prompts_per_s),
        median_gap_s: step,
        prefill_tokens_per_s: prompts_per_s,
        mean_context: 40.0,
        clean: None,
        running_mean: gauge.then_some(d),
        running_max: gauge.then_some(d),
        preemptions: Some(0.0),
        kv_usage_max: Some(0.2),
        stalls: Default::default(),
        failed: 0,
    }
}

fn levels(ks: &[usize], gauge: bool) -> Vec<DecodeLevel> {
    ks.iter().map(|&k| level(k, gauge)).collect()
}

#[test]
fn the_step_base_and_cost_per_sequence_come_back() {
    let f = fit(&levels(&[1, 2, 4, 8, 16, 32], true), (AC, 0.0), (0.0, 0.0)).unwrap();
    // The streaming count is 63/64 of the batch: the line is in those units.
    let slope_us = 200.0 * 64.0 / 63.0;
    assert!((f.step_base_ms.value - 10.0).abs() < 1e-6, "{f:?}");
    assert!((f.decode_seq_us.value - slope_us).abs() < 1e-6, "{f:?}");
    assert!(f.warnings.is_empty(), "{:?}", f.warnings);
    assert_eq!(f.step_base_ms.status, Status::Measured);
}

#[test]
fn ignoring_the_prompts_share_would_overstate_the_cost() {
    let ls = levels(&[1, 2, 4, 8, 16], true);
    let right = fit(&ls, (AC, 0.0), (0.0, 0.0)).unwrap();
    let naive = fit(&ls, (0.0, 0.0), (0.0, 0.0)).unwrap();
    assert!(naive.decode_seq_us.value > 1.1 * right.decode_seq_us.value);
    // An uncertain share widens both coefficients.
    let unsure = fit(&ls, (AC, 0.5 * AC), (0.0, 0.0)).unwrap();
    assert!(unsure.decode_seq_us.uncertainty > 10.0 * right.decode_seq_us.uncertainty.max(1e-9));
    assert!(unsure.step_base_ms.uncertainty > right.step_base_ms.uncertainty);
}

#[test]
fn the_batch_limit_is_where_the_batch_stops_rising() {
    let gauge = fit(&levels(&[1, 4, 16, 64], true), (AC, 0.0), (0.0, 0.0)).unwrap();
    assert_eq!(gauge.max_num_seqs.value, 16.0);
    assert_eq!(gauge.max_num_seqs.status, Status::Measured);
    // Without a gauge, the client's streaming count corrected for the
    // prefill step gives the same.
    let client = fit(&levels(&[1, 4, 16, 64], false), (AC, 0.0), (0.0, 0.0)).unwrap();
    assert_eq!(client.max_num_seqs.value, 16.0);
    assert!(client.max_num_seqs.uncertainty < 1.0);
    // Never saturated: at least what ran.
    let low = fit(&levels(&[1, 2, 4, 8], true), (AC, 0.0), (0.0, 0.0)).unwrap();
    assert_eq!(low.max_num_seqs.status, Status::LowerBound);
    assert_eq!((low.max_num_seqs.value, low.max_num_seqs.high), (8.0, None));
}

#[test]
fn a_kv_bound_level_is_left_out_and_only_bounds_the_limit() {
    let mut ls = levels(&[1, 2, 4, 8, 64], true);
    ls[4].running_max = Some(12.0);
    ls[4].preemptions = Some(30.0);
    let f = fit(&ls, (AC, 0.0), (0.0, 0.0)).unwrap();
    assert!((f.step_base_ms.value - 10.0).abs() < 1e-6);
    assert_eq!(f.max_num_seqs.status, Status::LowerBound);
    assert_eq!(f.max_num_seqs.value, 12.0);
    assert!(f.warnings[0].contains("KV cache"));
}

#[test]
fn a_curved_step_is_flagged() {
    // The step grows with the square of the batch past 4 sequences.
    let mut ls = levels(&[1, 2, 4, 8, 16], true);
    for l in &mut ls {
        let d = l.streaming;
        l.mean_gap_s += 1e-4 * (d - 4.0).max(0.0).powi(2);
    }
    let f = fit(&ls, (AC, 0.0), (0.0, 0.0)).unwrap();
    assert_eq!(f.decode_seq_us.status, Status::Misfit);
    assert!(!f.warnings.is_empty());
    assert!(f.decode_seq_us.uncertainty > 100.0, "{:?}", f.decode_seq_us);
}

/// A level of `d` streams whose steps last `gap` seconds, nothing arriving.
fn plain(k: usize, d: f64, gap: f64) -> DecodeLevel {
    DecodeLevel {
        concurrency: k,
        streaming: d,
        mean_gap_s: gap,
        median_gap_s: gap,
        prefill_tokens_per_s: 0.0,
        mean_context: 40.0,
        clean: None,
        ..level(1, true)
    }
}

#[test]
fn a_line_below_the_origin_is_fitted_through_it() {
    // A 2-slot CPU server on a busy machine: 17.5 ms at one stream, 42 ms
    // at two (free line: −7 ms + 24.5 ms per sequence).
    let ls = [
        plain(1, 1.0, 0.0175),
        plain(2, 2.0, 0.0420),
        plain(4, 2.0, 0.0420),
    ];
    let f = fit(&ls, (0.0, 0.0), (0.0, 0.0)).unwrap();
    // Σxy / Σx² = (17.5 + 84 + 84) / 9 ms.
    assert!(
        (f.decode_seq_us.value - 185.5e3 / 9.0).abs() < 1e-6,
        "{f:?}"
    );
    assert_eq!(f.step_base_ms.value, 0.0);
    assert_eq!(f.step_base_ms.status, Status::Misfit);
    assert_eq!(f.decode_seq_us.status, Status::Misfit);
    // The range reaches the free line's slope.
    assert!(
        f.decode_seq_us.high.unwrap() >= 24_500.0,
        "{:?}",
        f.decode_seq_us
    );
    assert!(
        f.warnings[0].contains("below the origin"),
        "{:?}",
        f.warnings
    );
    // Within noise of the origin it is held at 0 without a flag.
    let noisy = [
        plain(1, 1.0, 0.0100),
        plain(2, 2.0, 0.0215),
        plain(2, 2.0, 0.0185),
        plain(4, 2.0, 0.0201),
    ];
    let g = fit(&noisy, (0.0, 0.0), (0.0, 0.0)).unwrap();
    assert_eq!(
        (g.step_base_ms.value, g.step_base_ms.status),
        (0.0, Status::Measured)
    );
    assert!(
        g.step_base_ms.uncertainty > 0.0 && g.warnings.is_empty(),
        "{g:?}"
    );
}

#[test]
fn exact_levels_are_precise_and_three_noisy_ones_are_not() {
    assert!(precise(&levels(&[1, 2, 4, 8, 16, 32], true)));
    let noisy = [
        plain(1, 1.0, 0.0175),
        plain(2, 2.0, 0.0330),
        plain(4, 2.0, 0.0420),
    ];
    assert!(!precise(&noisy));
    assert!(!precise(&noisy[..2]));
}

#[test]
fn a_saturated_level_at_the_top_batch_is_a_repeat_not_a_zero_gap() {
    let f = fit(&crate::twin::testing::vllm_levels(), (0.0, 0.0), (0.0, 0.0)).unwrap();
    let seq = &f.decode_seq_us;
    assert!(
        seq.uncertainty.is_finite() && seq.uncertainty < seq.value,
        "{seq:?}"
    );
    assert!(seq.high.unwrap() < 5_000.0, "{seq:?}");
    // The level that offered 256 and ran 128 gives the batch limit.
    assert_eq!(
        (f.max_num_seqs.value, f.max_num_seqs.status),
        (128.0, Status::Measured)
    );
}

#[test]
fn stalls_that_fell_in_one_level_are_taken_out_of_it_not_spread_over_all() {
    // 8 slots of a 40-ms base and 500 µs a sequence, twice over; the host
    // stalled 16 gaps of one batch-8 level by 250 ms (2 stalls seen by its
    // 8 streams) and none of the rest: a share of about 0.1 over them all.
    let mut ls: Vec<DecodeLevel> = [1, 2, 4, 8, 1, 2, 4, 8]
        .iter()
        .map(|&k| {
            let step = 0.040 + 500e-6 * k as f64;
            DecodeLevel {
                streaming: k as f64,
                mean_gap_s: step,
                median_gap_s: step,
                prefill_tokens_per_s: 0.0,
                ..level(k, true)
            }
        })
        .collect();
    let stalled = &mut ls[3];
    stalled.stalls = crate::twin::observe::StallGaps {
        gaps: 16,
        excess_s: 16.0 * 0.25,
    };
    stalled.mean_gap_s += 16.0 * 0.25 / stalled.gaps as f64;
    // Shown (steps under half a stall): the line is the server's.
    let f = fit(&ls, (0.0, 0.0), (0.1, 0.125)).unwrap();
    assert!((f.decode_seq_us.value - 500.0).abs() < 1.0, "{f:?}");
    assert!((f.step_base_ms.value - 40.0).abs() < 0.01, "{f:?}");
    // Read at the one share, the stalled level tilts the line.
    let g = fit(&ls, (0.0, 0.0), (0.1, 0.0)).unwrap();
    assert!(g.decode_seq_us.value > 700.0, "{g:?}");
}

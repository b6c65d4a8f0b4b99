//! The probe plan's arithmetic on made-up pilots and levels.

use super::*;

/// A decode level of `k` streams offered, `running` of them ran.
fn level(k: usize, running: f64) -> DecodeLevel {
    DecodeLevel {
        concurrency: k,
        output_tokens: DECODE_OUTPUT,
        start_s: 0.1,
        window_s: 1.0,
        streaming: running,
        gaps: 100,
        mean_gap_s: 0.01,
        median_gap_s: 0.01,
        prefill_tokens_per_s: 0.0,
        mean_context: 40.0,
        clean: None,
        running_mean: Some(running),
        running_max: Some(running),
        preemptions: None,
        kv_usage_max: None,
        stalls: Default::default(),
        failed: 0,
    }
}

fn pilot(ttft: f64, per_token: f64, gap: f64) -> Pilot {
    Pilot {
        short_ttft_s: ttft,
        per_token_s: per_token,
        lone_gap_s: gap,
    }
}

#[test]
fn the_pilot_gives_the_slope_of_its_two_requests() {
    let p = Pilot::new((16, 0.0116), (1040, 0.1140), 0.010);
    assert!((p.per_token_s - 100e-6).abs() < 1e-12);
    assert_eq!(Pilot::new((16, 0.02), (1040, 0.01), 0.0).per_token_s, 1e-6);
}

#[test]
fn a_fast_server_gets_the_longest_prompts_and_more_rounds() {
    let plan = prefill(&pilot(0.005, 5e-6, 0.005), Duration::from_secs(120), 4096);
    assert_eq!(plan.lengths, [16, 512, 1024, 1536, 2048]);
    assert_eq!(plan.rounds, 8);
    assert_eq!(plan.twice, [2048, 1536]);
    let reqs = plan.requests();
    assert_eq!(reqs.len(), 8 * 5 + 2);
    assert_eq!(
        &reqs[3..7],
        [(1536, false), (1536, true), (2048, false), (2048, true)]
    );
}

#[test]
fn more_rounds_repeat_the_lengths_and_send_nothing_twice() {
    let plan = prefill(&pilot(0.005, 5e-6, 0.005), Duration::from_secs(120), 4096);
    let more = plan.more();
    assert_eq!(more.lengths, plan.lengths);
    assert!(more.requests().iter().all(|r| !r.1));
    assert_eq!(
        more.requests().len(),
        MAX_PREFILL_ROUNDS * plan.lengths.len()
    );
}

#[test]
fn a_slow_server_or_a_short_budget_shrinks_the_prompts_to_fit() {
    // 2 ms per token: a 2048-token prompt alone takes 4 s.
    let p = pilot(0.04, 2e-3, 0.04);
    let plan = prefill(&p, Duration::from_secs(30), 8192);
    let time: f64 = plan
        .requests()
        .iter()
        .map(|r| p.lone(r.0, PREFILL_OUTPUT))
        .sum();
    assert!(time <= 30.0 * PREFILL_SHARE * 1.5, "{time} s: {plan:?}");
    assert!(plan.rounds >= 3 && plan.lengths.len() >= 3, "{plan:?}");
    // A short max_model_len caps the prompts.
    let capped = prefill(&pilot(0.005, 5e-6, 0.005), Duration::from_secs(120), 600);
    assert_eq!(*capped.lengths.last().unwrap(), 597);
}

#[test]
fn interference_prompts_cost_several_steps_and_fit_their_share() {
    let p = pilot(0.012, 100e-6, 0.010);
    let plan = interference(&p, Duration::from_secs(120), 4096);
    // 50 ms of prefill at 100 µs a token.
    assert_eq!(plan.prompt_tokens, 500);
    assert_eq!(plan.sends.len(), LONG_PROMPTS);
    assert!(plan.length.as_secs_f64() <= 120.0 * INTERFERENCE_SHARE);
    assert!(plan
        .sends
        .windows(2)
        .all(|w| w[1] - w[0] > Duration::from_millis(100)));
    assert!(f64::from(plan.decoder_output) * 0.010 > plan.length.as_secs_f64());
    let tight = interference(&pilot(0.04, 2e-3, 0.04), Duration::from_secs(20), 4096);
    assert!(
        tight.length.as_secs_f64() <= 20.0 * INTERFERENCE_SHARE + 1e-9,
        "{tight:?}"
    );
    assert!(tight.sends.len() >= 3);
}

#[test]
fn interference_decoders_leave_a_slot_free_for_the_prompts() {
    // No level saturated: the batch holds at least 8.
    assert_eq!(decoders(&[level(4, 4.0), level(8, 8.0)]), DECODERS);
    assert_eq!(decoders(&[level(2, 2.0), level(4, 2.0)]), 1);
    assert_eq!(decoders(&[level(4, 3.0)]), 2);
    assert_eq!(decoders(&[level(1, 1.0), level(2, 1.0)]), 0);
}

#[test]
fn the_long_context_level_fits_the_model_length_and_the_batch_limit() {
    let p = pilot(0.05, 300e-6, 0.05);
    let line = |n: u32| 300e-6 * f64::from(n);
    let room = Duration::from_secs(4);
    let levels = shape_levels(&p, 2048, 128, room, (|_| 0.06, line));
    assert_eq!(levels.len(), 1);
    let ctx = levels[0];
    // 16 streams would take 8.4 s, 8 streams 5.3 s: 4 fit.
    assert_eq!((ctx.streams, ctx.prompt, ctx.output), (4, 1024, 64));
    // The long prompts' first wave (4 × 1024 × 300 µs, a quarter more)
    // and 36 gaps.
    assert!((ctx.length.as_secs_f64() - (0.05 + 1.25 * 1.2288 + 2.16)).abs() < 1e-6);
    let roomy = shape_levels(&p, 2048, 128, Duration::from_secs(9), (|_| 0.06, line));
    assert_eq!(roomy[0].streams, 16);
    let tight = shape_levels(&p, 2048, 128, Duration::from_secs(1), (|_| 0.06, line));
    assert_eq!(tight[0].streams, 4, "never fewer than 4");
    // A short context leaves none; a batch limit of 2 caps the streams.
    assert!(shape_levels(&p, 100, 128, room, (|_| 0.06, line)).is_empty());
    let small = shape_levels(&p, 2048, 2, room, (|_| 0.06, line));
    assert!(small.iter().all(|l| l.streams == 2), "{small:?}");
    let short = shape_levels(&p, 600, 128, room, (|_| 0.06, line));
    assert_eq!((short[0].prompt, short[0].output), (535, 64));
}

#[test]
fn the_long_level_lasts_its_first_wave_by_the_prefill_curve_not_the_pilots_line() {
    // The pilot's line says 300 µs a token; the prefill probe's curve (its
    // attention pairs) says a 1,024-token prompt takes 0.45 s: ten of them
    // take 4.5 s, a quarter more 5.7 s, and the level lasts past that.
    let p = pilot(0.05, 300e-6, 0.05);
    let curve = |n: u32| 300e-6 * f64::from(n) + 280e-9 * f64::from(n) * f64::from(n + 1) / 2.0;
    let room = Duration::from_secs(30);
    let by_line = shape_levels(&p, 2048, 10, room, (|_| 0.06, |n| 300e-6 * f64::from(n)));
    let by_curve = shape_levels(&p, 2048, 10, room, (|_| 0.06, curve));
    assert_eq!((by_line[0].streams, by_curve[0].streams), (10, 10));
    let wave = 10.0 * curve(1024);
    assert!(wave > 4.4 && wave < 4.6, "{wave}");
    let length = by_curve[0].length.as_secs_f64();
    assert!(
        (length - (0.05 + 1.25 * wave + 36.0 * 0.06)).abs() < 1e-6,
        "{length}"
    );
    assert!(by_line[0].length.as_secs_f64() < length - 1.0);
    // A curve below the pilot's line does not shorten it.
    let low = shape_levels(&p, 2048, 10, room, (|_| 0.06, |_| 0.0));
    assert_eq!(low[0].length, by_line[0].length);
}

#[test]
fn the_long_level_keeps_within_the_batch_limit_and_the_kv_cache() {
    let kv = |tokens: f64, usage: f64| KvPoint {
        tokens,
        scheduled: tokens,
        usage,
    };
    // Nothing saturated, no KV reading: no limit.
    assert_eq!(context_stream_limit(&[level(4, 4.0)], &[]), usize::MAX);
    // A saturated level's slots.
    assert_eq!(context_stream_limit(&[level(64, 32.0)], &[]), 32);
    // 2,000 tokens at 12.2% usage: 16,393 tokens, 80% of which hold 12
    // requests of 1,024 + 64 tokens; the fullest reading counts.
    let points = [kv(100.0, 0.005), kv(2000.0, 0.122), kv(1000.0, 0.0605)];
    assert_eq!(context_stream_limit(&[level(64, 32.0)], &points), 12);
}

#[test]
fn a_level_lasts_long_enough_for_the_gaps_the_fit_needs() {
    let p = pilot(0.005, 5e-6, 0.010);
    let (_, one) = next_decode_level(&[], &p, Duration::from_secs(60)).unwrap();
    // 40 steps of 10 ms at one stream: 40 gaps, twice the fit's minimum.
    assert!(one.as_secs_f64() >= 0.4 + 0.005, "{one:?}");
    let done = [(1, false, 0.010)];
    let (_, two) = next_decode_level(&done, &p, Duration::from_secs(60)).unwrap();
    assert!(two.as_secs_f64() >= 24.0 * 0.015, "{two:?}");
}

#[test]
fn after_a_saturated_level_the_levels_up_to_it_run_again() {
    let p = pilot(0.005, 5e-6, 0.005);
    let left = Duration::from_secs(60);
    let mut done = vec![(1, false, 0.010), (2, false, 0.020), (4, true, 0.021)];
    let mut next = Vec::new();
    while let Some((k, len)) = next_decode_level(&done, &p, left) {
        // Each repeat lasts as its level did the first time.
        let first = done.iter().find(|d| d.0 == k).unwrap().2;
        assert!(len.as_secs_f64() >= 24.0 * first, "{k}: {len:?}");
        next.push(k);
        done.push((k, k == 4, first));
    }
    assert_eq!(next, [1, 2, 4, 1, 2, 4, 1, 2, 4]);
    assert_eq!(done.len(), 3 * MAX_DECODE_ROUNDS);
    // Rounds stop when the time does.
    let short = Duration::from_millis(300);
    assert_eq!(next_decode_level(&done[..3], &p, short), None);
}

#[test]
fn decode_levels_double_until_saturated_or_out_of_time() {
    let p = pilot(0.005, 5e-6, 0.005);
    let left = Duration::from_secs(60);
    assert_eq!(next_decode_level(&[], &p, left).map(|l| l.0), Some(1));
    let done = [(1, false, 0.005), (2, false, 0.0051)];
    let (k, len) = next_decode_level(&done, &p, left).unwrap();
    assert_eq!(k, 4);
    assert!(len >= Duration::from_millis(400));
    // A saturated level: the round (here that level alone) repeats, up
    // to MAX_DECODE_ROUNDS rounds in all.
    assert_eq!(
        next_decode_level(&[(64, true, 0.01)], &p, left).map(|l| l.0),
        Some(64)
    );
    let four = vec![(64, true, 0.01); MAX_DECODE_ROUNDS];
    assert_eq!(next_decode_level(&four, &p, left), None);
    assert_eq!(next_decode_level(&[(1024, false, 0.01)], &p, left), None);
    // A level that would not fit what is left is not started.
    let slow = [(128, false, 0.2), (256, false, 0.4)];
    assert_eq!(next_decode_level(&slow, &p, Duration::from_secs(5)), None);
}

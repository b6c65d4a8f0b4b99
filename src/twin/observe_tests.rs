//! The reductions on synthetic records.

use super::*;
use crate::metrics::RequestError;

fn ms(x: f64) -> Duration {
    Duration::from_secs_f64(x / 1e3)
}

/// A request sent at `sent` whose tokens arrive at `times` (ms).
fn rec(sent: f64, times: &[f64], prompt: u32, cut_off: bool) -> RequestRecord {
    RequestRecord {
        sent: ms(sent),
        first_token: Some(ms(times[0])),
        last_token: times.last().map(|&t| ms(t)),
        itl: times.windows(2).map(|w| ms(w[1] - w[0])).collect(),
        prompt_len: prompt,
        error: cut_off.then(|| RequestError {
            kind: ErrorKind::Cancelled,
            status: None,
            message: "cut".into(),
        }),
        ..Default::default()
    }
}

fn steps(from: f64, every: f64, n: usize) -> Vec<f64> {
    (0..n).map(|k| from + every * k as f64).collect()
}

#[test]
fn token_times_add_the_gaps_to_the_first_token() {
    let r = rec(0.0, &[5.0, 15.0, 30.0], 8, false);
    assert_eq!(token_times(&r), [ms(5.0), ms(15.0), ms(30.0)]);
    assert!(token_times(&RequestRecord::default()).is_empty());
}

#[test]
fn a_level_gives_the_batch_its_gaps_and_its_prefill_work() {
    // Two streams decode from 10 ms every 10 ms to the 1 s end (cut); a
    // third finishes at 500 ms and a fourth (16-token prompt) starts at 600.
    let records = vec![
        rec(0.0, &steps(10.0, 10.0, 100), 8, true),
        rec(0.0, &steps(10.0, 10.0, 100), 8, true),
        rec(0.0, &steps(10.0, 10.0, 50), 8, false),
        rec(590.0, &steps(600.0, 10.0, 40), 16, true),
    ];
    let gauges = [
        GaugeSample {
            t_s: 0.2,
            running: Some(3.0),
            kv_usage: Some(0.1),
            preemptions: Some(2.0),
        },
        GaugeSample {
            t_s: 0.8,
            running: Some(3.0),
            kv_usage: Some(0.3),
            preemptions: Some(2.0),
        },
    ];
    let l = decode_level(4, 100, &records, &gauges, ms(1000.0)).unwrap();
    assert!(
        (l.window_s - 0.99).abs() < 1e-9,
        "from the first tokens: {l:?}"
    );
    // 2 × 0.99 + 0.49 + 0.4 (cut at the end: still streaming) over 0.99.
    assert!(
        (l.streaming - (1.98 + 0.49 + 0.40) / 0.99).abs() < 1e-9,
        "{}",
        l.streaming
    );
    assert_eq!(l.gaps, 99 + 99 + 49 + 39);
    assert!((l.mean_gap_s - 0.010).abs() < 1e-9 && (l.median_gap_s - 0.010).abs() < 1e-9);
    assert!((l.prefill_tokens_per_s - 16.0 / 0.99).abs() < 1e-9);
    assert_eq!((l.running_mean, l.running_max), (Some(3.0), Some(3.0)));
    assert_eq!((l.preemptions, l.kv_usage_max), (Some(0.0), Some(0.3)));
    assert_eq!(l.failed, 0);
    // The fourth waited for its first token over 590..600 ms: the first two
    // streams' gaps there are not clean; every other gap is.
    let c = l.clean.unwrap();
    assert_eq!(c.gaps, l.gaps - 2);
    assert!((c.median_gap_s - 0.010).abs() < 1e-9);
}

#[test]
fn a_gap_beside_a_prompt_waiting_for_its_first_token_is_not_clean() {
    // Nine streams every 10 ms; a tenth sent at 300 ms gets its first token
    // at 350 ms, and the steps meanwhile take 25 ms (its prefill beside).
    let slow = |from: f64| {
        let mut t = steps(from, 10.0, 30);
        let last = *t.last().unwrap();
        t.extend((1..=2).map(|k| last + 25.0 * f64::from(k)));
        let last = *t.last().unwrap();
        t.extend((1..=40).map(|k| last + 10.0 * f64::from(k)));
        t
    };
    let mut records: Vec<RequestRecord> =
        (0..9).map(|_| rec(0.0, &slow(10.0), 1000, true)).collect();
    records.push(rec(300.0, &steps(350.0, 10.0, 40), 1000, true));
    let l = decode_level(10, 100, &records, &[], ms(700.0)).unwrap();
    assert!(l.start_s < 0.1, "the window holds the wait: {l:?}");
    let c = l.clean.unwrap();
    // Each early stream's two 25 ms gaps (300..350) are out, the rest are
    // 10 ms, with nine or ten streams decoding.
    assert_eq!(c.gaps, l.gaps - 18);
    assert!((c.median_gap_s - 0.010).abs() < 1e-9);
    assert!(
        c.context > 1000.0 && c.batch >= 9.0 && c.batch <= 10.0,
        "{c:?}"
    );
}

#[test]
fn the_window_starts_when_the_batch_is_nearly_full() {
    // 10 streams: one at 10 ms, the other nine from 200 ms.
    let mut records = vec![rec(0.0, &steps(10.0, 10.0, 100), 4, true)];
    records.extend((0..9).map(|_| rec(190.0, &steps(200.0, 10.0, 81), 4, true)));
    let l = decode_level(10, 100, &records, &[], ms(1000.0)).unwrap();
    assert!((l.window_s - 0.8).abs() < 1e-9, "{l:?}");
    assert!((l.streaming - 10.0).abs() < 0.02, "{}", l.streaming);
}

#[test]
fn tokens_in_flight_count_prompt_and_received_tokens_of_streaming_requests() {
    let records = vec![
        rec(0.0, &steps(10.0, 10.0, 5), 100, false), // done at 50 ms
        rec(0.0, &steps(20.0, 10.0, 50), 8, true),
    ];
    // At 35 ms: the first holds 100 + 3, the second 8 + 2.
    assert_eq!(tokens_in_flight(&records, ms(35.0)), (113.0, 2));
    assert_eq!(tokens_in_flight(&records, ms(60.0)), (8.0 + 5.0, 1));
    assert_eq!(tokens_in_flight(&records, ms(5.0)), (0.0, 0));
    let gauges = [
        GaugeSample {
            t_s: 0.035,
            kv_usage: Some(0.0111),
            ..Default::default()
        },
        GaugeSample {
            t_s: 0.036,
            running: Some(2.0),
            ..Default::default()
        },
    ];
    let p = kv_points(&records, &gauges, ms(0.0), ms(100.0));
    // The last received token of each stream is not computed yet.
    assert_eq!(
        p,
        [KvPoint {
            tokens: 111.0,
            scheduled: 113.0,
            usage: 0.0111
        }]
    );
    let more = [
        gauges[0],
        GaugeSample {
            t_s: 0.060,
            kv_usage: Some(0.0012),
            ..Default::default()
        },
    ];
    let m = kv_level_point(&records, &more, ms(0.0), ms(100.0)).unwrap();
    assert!(
        (m.tokens - 61.5).abs() < 1e-9 && (m.usage - 0.00615).abs() < 1e-12,
        "{m:?}"
    );
    assert!((m.scheduled - 63.0).abs() < 1e-9, "{m:?}");
    assert_eq!(kv_level_point(&records, &more, ms(70.0), ms(100.0)), None);
}

//! The live state model driven with fake records and fake time.

use super::*;
use crate::metrics::{ErrorKind, RequestError};

pub(crate) fn ok_record(
    index: usize,
    sent_ms: u64,
    ttft_ms: u64,
    gaps_ms: &[u64],
) -> RequestRecord {
    let sent = Duration::from_millis(sent_ms);
    let first = sent + Duration::from_millis(ttft_ms);
    let itl: Vec<Duration> = gaps_ms.iter().map(|&g| Duration::from_millis(g)).collect();
    let last = first + itl.iter().sum::<Duration>();
    RequestRecord {
        index,
        due: sent,
        released: sent,
        sent,
        first_token: Some(first),
        last_token: Some(last),
        output_tokens: gaps_ms.len() as u32 + 1,
        itl,
        ..RequestRecord::default()
    }
}

pub(crate) fn failed_record(index: usize, sent_ms: u64, kind: ErrorKind) -> RequestRecord {
    RequestRecord {
        index,
        sent: Duration::from_millis(sent_ms),
        error: Some(RequestError {
            kind,
            status: None,
            message: "boom".into(),
        }),
        ..RequestRecord::default()
    }
}

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

#[test]
fn rates_cover_the_window_and_in_flight_is_released_minus_finished() {
    let mut s = LiveState::new("kneecap run", vec![]);
    for i in 0..40 {
        s.released(Duration::from_millis(i * 500)); // 2 req/s for 20 s
    }
    for i in 0..30 {
        s.finished(&ok_record(i, i as u64 * 500, 100, &[20, 20]));
    }
    let v = s.view(secs(20));
    assert_eq!(v.in_flight, 10);
    // Window [10 s, 20 s): releases at 10.0..19.5 s (20 of them) over 10 s.
    assert!((v.offered_rate - 2.0).abs() < 1e-9, "{}", v.offered_rate);
    // Successes end at sent + 140 ms: those sent from 9.86 s on, up to 14.5 s.
    assert!((v.achieved_rate - 1.0).abs() < 1e-9, "{}", v.achieved_rate);
    assert_eq!((v.released, v.succeeded, v.failed), (40, 30, 0));
}

#[test]
fn percentiles_and_slo_lines_use_the_window_only() {
    let slo = SloLine {
        metric: Latency::Ttft,
        percentile: Some(99.0),
        threshold_ms: 150.0,
        text: "p99_ttft_ms<=150".into(),
    };
    let mut s = LiveState::new("kneecap sweep", vec![slo]);
    // Early slow requests, then fast ones after the window moved past them.
    for i in 0..10 {
        s.finished(&ok_record(i, 0, 900, &[10]));
    }
    for i in 10..110 {
        s.finished(&ok_record(i, 15_000 + i as u64, 100, &[10]));
    }
    let v = s.view(secs(20));
    let ttft = &v.latency[0];
    assert_eq!(ttft.metric, Latency::Ttft);
    assert_eq!(ttft.samples, 100);
    assert_eq!(ttft.p99_ms, Some(100.0));
    assert!(!ttft.slos[0].over);
    let early = s.view(secs(5));
    assert!(early.latency[0].slos[0].over, "{:?}", early.latency[0]);
}

#[test]
fn tpot_excludes_the_first_token_and_itl_keeps_every_gap() {
    let mut s = LiveState::new("kneecap run", vec![]);
    s.finished(&ok_record(0, 0, 100, &[10, 30]));
    let v = s.view(secs(1));
    let row = |m: Latency| v.latency.iter().find(|r| r.metric == m).unwrap().clone();
    assert_eq!(row(Latency::Tpot).p50_ms, Some(20.0));
    assert_eq!(row(Latency::Itl).samples, 2);
    assert_eq!(row(Latency::E2el).p50_ms, Some(140.0));
    assert_eq!(s.totals.itl.count(), 2);
    assert_eq!(s.totals.output_tokens, 3);
}

#[test]
fn errors_are_counted_by_class_and_a_new_step_resets_the_window_not_the_totals() {
    let mut s = LiveState::new("kneecap sweep", vec![]);
    s.released(Duration::ZERO);
    s.released(Duration::ZERO);
    s.finished(&failed_record(0, 0, ErrorKind::Timeout));
    s.finished(&failed_record(1, 0, ErrorKind::RateLimited));
    s.begin(Phase {
        step: Some(1),
        load: Some(4.0),
        unit: "req/s".into(),
        started_at: secs(30),
        planned: Some(secs(10)),
    });
    s.released(Duration::ZERO);
    let v = s.view(secs(34));
    assert_eq!(
        v.errors,
        vec![("http_429".into(), 1), ("timeout".into(), 1)]
    );
    assert_eq!((v.released, v.failed, v.in_flight), (3, 2, 1));
    assert_eq!(v.left, Some(secs(6)));
    assert_eq!(v.elapsed, secs(4));
}

#[test]
fn the_window_and_the_gauges_stay_bounded() {
    let mut s = LiveState::new("kneecap run", vec![]);
    for i in 0..1000u64 {
        s.finished(&ok_record(i as usize, i * 100, 5, &[1]));
        s.gauge(QueueSample {
            waiting: Some(i as f64),
            ..QueueSample::default()
        });
    }
    s.prune(secs(100));
    let kept = s.recent.latency[&Latency::Ttft].0.len();
    assert!(kept <= 101, "{kept} TTFT samples kept after pruning");
    let v = s.view(secs(100));
    assert_eq!(v.waiting.len(), GAUGE_POINTS);
    assert_eq!(v.waiting.last(), Some(&Some(999.0)));
}

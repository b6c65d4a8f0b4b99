//! Tests for `steady.rs` (kept apart to keep the module short).
use super::*;
use crate::sweep::testing::{failed, ms, served};

fn secs(a: u64, b: u64) -> (Duration, Duration) {
    (Duration::from_secs(a), Duration::from_secs(b))
}

fn close(got: f64, want: f64, tol: f64) -> bool {
    (got - want).abs() <= tol
}

/// Arrivals every `gap_ms` for `n` requests, served one at a time FIFO, each
/// taking `service_ms` (a single server, D/D/1).
fn fifo(n: u64, gap_ms: u64, service_ms: u64) -> Vec<RequestRecord> {
    let mut free_at = 0;
    (0..n)
        .map(|i| {
            let arrival = i * gap_ms;
            free_at = free_at.max(arrival) + service_ms;
            served(arrival, free_at)
        })
        .collect()
}

#[test]
fn a_stable_single_server_is_steady_with_littles_law_holding() {
    // Every 100 ms, served in 50 ms: L = λ·W = 10/s · 0.05 s = 0.5.
    let records = fifo(120, 100, 50);
    let s = assess(&records, secs(1, 11), &SteadyThresholds::default());
    assert!(s.steady, "{:?}", s.reasons);
    assert!(close(s.offered_rate, 10.0, 1e-9), "{}", s.offered_rate);
    assert!(close(s.achieved_rate, 10.0, 1e-9), "{}", s.achieved_rate);
    assert!(close(s.throughput_ratio, 1.0, 1e-9));
    assert!(close(s.mean_in_flight, 0.5, 1e-9), "{}", s.mean_in_flight);
    assert!(close(s.mean_time_in_system_s, 0.05, 1e-9));
    assert!(
        s.littles_gap.is_some_and(|g| g < 1e-6),
        "{:?}",
        s.littles_gap
    );
    assert!(
        s.in_flight_slope_per_s.abs() < 0.1,
        "{}",
        s.in_flight_slope_per_s
    );
    assert_eq!(s.backlog_at_end, 0);
}

#[test]
fn an_overloaded_single_server_is_not_steady_and_the_reasons_say_why() {
    // Every 10 ms, served in 20 ms FIFO: completions run at half the offered
    // rate and the in-flight count grows by 50 per second.
    let records = fifo(600, 10, 20);
    let s = assess(&records, secs(1, 5), &SteadyThresholds::default());
    assert!(!s.steady);
    assert!(close(s.offered_rate, 100.0, 1e-9));
    assert!(close(s.achieved_rate, 50.0, 1e-9));
    assert!(close(s.throughput_ratio, 0.5, 1e-9));
    assert!(
        close(s.in_flight_slope_per_s, 50.0, 1.0),
        "{}",
        s.in_flight_slope_per_s
    );
    assert!(close(s.mean_in_flight, 150.0, 1.0), "{}", s.mean_in_flight);
    // W = mean over i in 100..500 of (20(i+1) − 10i) ms = 3.015 s; λW = 301.5.
    assert!(close(s.mean_time_in_system_s, 3.015, 1e-9));
    assert!(
        s.littles_gap.is_some_and(|g| g > 0.9),
        "{:?}",
        s.littles_gap
    );
    // Due before 5 s: 500; finished before 5 s: 20(i+1) < 5000 ⇒ 249.
    assert_eq!(s.backlog_at_end, 251);
    let all = s.reasons.join("; ");
    assert!(
        all.contains("throughput 50.00/s is 50% of offered 100.00/s"),
        "{all}"
    );
    assert!(all.contains("in flight grew"), "{all}");
    // W (3 s) is close to the window (4 s) here, so Little's gap is within
    // what edge effects alone produce: the trend checks carry the verdict.
}

/// Poisson arrivals at `rate`/s, each served for `service_ms` with no queue
/// (M/D/∞): stationary, so only chance makes the in-flight count move.
fn poisson_infinite_servers(
    seed: u64,
    rate: f64,
    service_ms: u64,
    horizon_s: f64,
) -> Vec<RequestRecord> {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut t = 0.0;
    let mut out = Vec::new();
    while t < horizon_s {
        t += -(1.0 - rng.random::<f64>()).ln() / rate;
        let start = Duration::from_secs_f64(t);
        let mut r = served(0, 0);
        r.due = start;
        r.released = start;
        r.sent = start;
        r.first_token = Some(start + ms(service_ms / 10));
        r.last_token = Some(start + ms(service_ms));
        out.push(r);
    }
    out
}

#[test]
fn chance_fluctuations_of_a_stationary_system_are_not_called_a_trend() {
    // L = 30/s × 0.35 s ≈ 10.5: in flight wanders by ±3 in a short window.
    let unsteady: Vec<String> = (0..40)
        .map(|seed| {
            assess(
                &poisson_infinite_servers(seed, 30.0, 350, 6.0),
                secs(1, 5),
                &SteadyThresholds::default(),
            )
        })
        .filter(|s| !s.steady)
        .map(|s| s.reasons.join("; "))
        .collect();
    assert!(
        unsteady.len() <= 1,
        "{} of 40 stationary windows judged unsteady: {unsteady:?}",
        unsteady.len()
    );
}

#[test]
fn a_modest_overload_is_caught_by_the_trend() {
    // 25% over a single server's capacity: 100/s offered, served in 12.5 ms FIFO.
    let records: Vec<RequestRecord> = fifo(700, 10, 12);
    let s = assess(&records, secs(1, 5), &SteadyThresholds::default());
    assert!(!s.steady, "{s:?}");
}

#[test]
fn visits_are_clipped_to_the_window_when_averaging_in_flight() {
    // [0.5 s, 1.5 s) overlaps the window [1 s, 2 s) for half of it.
    let records = vec![served(500, 1500)];
    let s = assess(&records, secs(1, 2), &SteadyThresholds::default());
    assert!(close(s.mean_in_flight, 0.5, 1e-12));
}

#[test]
fn a_sent_cancelled_request_stays_in_flight_until_the_window_ends() {
    let mut stuck = failed(500, ErrorKind::Cancelled);
    stuck.first_token = Some(ms(600)); // it was sent and streaming when cut
    let records = vec![stuck];
    let s = assess(&records, secs(0, 1), &SteadyThresholds::default());
    assert!(close(s.mean_in_flight, 0.5, 1e-12), "{}", s.mean_in_flight);
    assert!(close(s.mean_time_in_system_s, 0.5, 1e-12));
    assert_eq!(s.backlog_at_end, 1);
    assert_eq!(s.achieved_rate, 0.0);
}

#[test]
fn a_never_sent_request_is_offered_and_backlogged_but_never_in_flight() {
    let unsent = failed(200, ErrorKind::Cancelled);
    let s = assess(&[unsent], secs(0, 1), &SteadyThresholds::default());
    assert_eq!(s.offered_rate, 1.0);
    assert_eq!(s.mean_in_flight, 0.0);
    assert_eq!(s.littles_gap, None);
    assert_eq!(s.backlog_at_end, 1);
}

#[test]
fn a_failure_without_token_times_departs_when_it_was_sent() {
    let records = vec![failed(200, ErrorKind::Connect), served(300, 400)];
    assert_eq!(end_of(&records[0]), Some(ms(200)));
    let s = assess(&records, secs(0, 1), &SteadyThresholds::default());
    assert_eq!(s.achieved_rate, 2.0);
    assert!(close(s.mean_in_flight, 0.1, 1e-12));
    assert!(close(s.mean_time_in_system_s, 0.05, 1e-12));
}

#[test]
fn an_empty_window_or_one_without_arrivals_is_not_steady() {
    let records = fifo(10, 100, 50);
    let empty = assess(&records, secs(3, 3), &SteadyThresholds::default());
    assert!(!empty.steady && empty.reasons[0].contains("empty"));
    let idle = assess(&records, secs(5, 6), &SteadyThresholds::default());
    assert!(!idle.steady && idle.reasons[0].contains("no requests"));
}

#[test]
fn a_small_in_flight_growth_is_tolerated_up_to_two_requests() {
    // Arrivals every 100 ms served in 50 ms, plus one request stuck from 2 s:
    // in flight steps from ~0.5 to ~1.5 — growth ≈ 1 < 2.
    let mut records = fifo(100, 100, 50);
    let mut stuck = served(2000, 60_000);
    stuck.due = ms(2000);
    records.push(stuck);
    let s = assess(&records, secs(1, 9), &SteadyThresholds::default());
    let growth = s.in_flight_end - s.in_flight_start;
    assert!(growth > 0.5 && growth < 2.0, "{growth}");
    assert!(
        !s.reasons.iter().any(|r| r.contains("grew")),
        "{:?}",
        s.reasons
    );
}

fn ramp(values: &[f64]) -> Vec<(f64, f64)> {
    values
        .iter()
        .enumerate()
        .map(|(i, v)| (1.0 + i as f64 * 0.25, *v))
        .collect()
}

#[test]
fn a_server_queue_that_keeps_growing_is_a_trend_but_blips_are_not() {
    let window = secs(1, 5);
    let growing = ramp(&[
        0.0, 1.0, 2.0, 3.0, 5.0, 6.0, 7.0, 8.0, 10.0, 11.0, 12.0, 14.0, 15.0, 16.0, 17.0, 19.0,
    ]);
    let t = queue_trend(&growing, window).unwrap();
    assert!(t.growing(), "{t:?}");
    assert!(t.reason().contains("server queue grew"));
    let blips = ramp(&[
        0.0, 0.0, 2.0, 0.0, 0.0, 1.0, 0.0, 0.0, 3.0, 0.0, 0.0, 0.0, 1.0, 0.0, 2.0, 0.0,
    ]);
    assert!(!queue_trend(&blips, window).unwrap().growing());
    assert!(
        queue_trend(&growing[..3], window).is_none(),
        "too few samples to judge"
    );
}

#[test]
fn combined_shards_get_the_single_process_verdict_on_their_union() {
    // One load split over 3 shards by a hash of the request number: the
    // combined steadiness equals `assess` of all the records together.
    for (gap, service, want_steady) in [(100, 50, true), (40, 50, false)] {
        let all = fifo(400, gap, service);
        let window = secs(2, 14);
        let th = SteadyThresholds::default();
        let parts: Vec<Steadiness> = (0..3)
            .map(|i| {
                let mine: Vec<RequestRecord> = all
                    .iter()
                    .enumerate()
                    .filter(|(j, _)| crate::shard::owner(7, *j, 3) == i)
                    .map(|(_, r)| r.clone())
                    .collect();
                assess(&mine, window, &th)
            })
            .collect();
        let whole = assess(&all, window, &th);
        let merged = combine(&parts, 12.0, &th);
        assert_eq!(merged.steady, want_steady, "{:?}", merged.reasons);
        assert_eq!(merged.steady, whole.steady);
        assert_eq!(merged.reasons, whole.reasons);
        assert_eq!(merged.backlog_at_end, whole.backlog_at_end);
        for (name, a, b) in [
            ("offered", merged.offered_rate, whole.offered_rate),
            ("achieved", merged.achieved_rate, whole.achieved_rate),
            ("ratio", merged.throughput_ratio, whole.throughput_ratio),
            ("L", merged.mean_in_flight, whole.mean_in_flight),
            (
                "W",
                merged.mean_time_in_system_s,
                whole.mean_time_in_system_s,
            ),
            (
                "slope",
                merged.in_flight_slope_per_s,
                whole.in_flight_slope_per_s,
            ),
            ("end", merged.in_flight_end, whole.in_flight_end),
            (
                "gap",
                merged.littles_gap.unwrap(),
                whole.littles_gap.unwrap(),
            ),
        ] {
            assert!(close(a, b, 1e-9 * b.abs().max(1.0)), "{name}: {a} vs {b}");
        }
    }
}

/// Every `gap_ms` for `n` requests, each in the system `visit_ms` with no
/// queue (a server with room for all of them).
fn judge_whole(records: &[RequestRecord], window: (f64, f64)) -> Steadiness {
    let visits: Vec<(f64, f64)> = records.iter().filter_map(visit).collect();
    judge(records, &visits, window, &SteadyThresholds::default())
}

fn no_queue(n: u64, gap_ms: u64, visit_ms: u64) -> Vec<RequestRecord> {
    (0..n)
        .map(|i| served(i * gap_ms, i * gap_ms + visit_ms))
        .collect()
}

#[test]
fn a_warm_up_shorter_than_the_time_in_system_is_judged_once_the_load_filled() {
    // 10 req/s, 10 s each, window 3..43 s: until 10 s nothing has finished,
    // so over the whole window finishes are 33 s worth of arrivals for 40 s
    // of offered load (82%), and the in-flight count climbs 30 → 100.
    let records = no_queue(600, 100, 10_000);
    let whole = SteadyThresholds::default();
    let s = assess(&records, secs(3, 43), &whole);
    assert!(s.steady, "{:?}", s.reasons);
    assert!(!judge_whole(&records, (3.0, 43.0)).steady);
    let from = s.judged_from_s.expect("judged from where the load filled");
    assert!(close(from, 10.0, 0.01), "{from}");
    assert!(close(s.throughput_ratio, 1.0, 0.02), "{s:?}");
    assert!(close(s.mean_in_flight, 100.0, 0.5), "{s:?}");
    // With a warm-up that covers the visit, the whole window is judged.
    let s = assess(&records, secs(12, 52), &whole);
    assert!(s.steady && s.judged_from_s.is_none(), "{s:?}");
    // A window too short to leave half of it after the fill: judged whole,
    // and the fill shows (the verdict the warm-up leaves to the user).
    let s = assess(&records, secs(3, 15), &whole);
    assert!(s.judged_from_s.is_none() && !s.steady, "{s:?}");
}

#[test]
fn an_overload_judged_after_the_fill_is_still_not_steady() {
    // Every 100 ms, served one at a time in 120 ms: the queue grows without
    // bound; W over the window is long, so the judged window opens late,
    // and the shortfall and the growth still show there.
    let records = fifo(600, 100, 120);
    let s = assess(&records, secs(3, 43), &SteadyThresholds::default());
    assert!(!s.steady, "{s:?}");
    assert!(s.throughput_ratio < 0.9, "{s:?}");
}

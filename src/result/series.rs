//! A sweep step's client latencies over time: the requests that finished in
//! each time bucket and their TTFT / TPOT / E2EL percentiles, on the same
//! axis as the server's gauges (seconds from the step's start). At most
//! [`MAX_POINTS`] buckets per step, so memory and the JSON stay bounded.
//! Pure: built from the step's records.

use crate::metrics::stats::percentile;
use crate::metrics::RequestRecord;
use serde::{Deserialize, Serialize};

/// Buckets per step at most.
pub const MAX_POINTS: usize = 60;
/// The shortest bucket, seconds.
const MIN_BUCKET_S: f64 = 1.0;

/// The requests that finished in one bucket of a step.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct LatencyPoint {
    /// The bucket's middle, seconds from the step's start.
    pub t_s: f64,
    /// Successful requests that finished in the bucket.
    pub requests: usize,
    pub ttft_p50_ms: Option<f64>,
    pub ttft_p99_ms: Option<f64>,
    pub tpot_p50_ms: Option<f64>,
    pub tpot_p99_ms: Option<f64>,
    pub e2el_p50_ms: Option<f64>,
    pub e2el_p99_ms: Option<f64>,
}

/// The step's successful requests bucketed by when they finished.
pub fn latency_series(records: &[RequestRecord]) -> Vec<LatencyPoint> {
    let done: Vec<(f64, &RequestRecord)> = records
        .iter()
        .filter(|r| r.is_ok())
        .filter_map(|r| Some((r.last_token?.as_secs_f64(), r)))
        .collect();
    let Some(end) = done.iter().map(|(t, _)| *t).reduce(f64::max) else {
        return Vec::new();
    };
    let width = (end / MAX_POINTS as f64).max(MIN_BUCKET_S);
    let n = ((end / width).floor() as usize + 1).min(MAX_POINTS);
    let mut buckets: Vec<Vec<&RequestRecord>> = vec![Vec::new(); n];
    for (t, r) in done {
        buckets[((t / width) as usize).min(n - 1)].push(r);
    }
    buckets
        .iter()
        .enumerate()
        .filter(|(_, b)| !b.is_empty())
        .map(|(i, b)| point((i as f64 + 0.5) * width, b))
        .collect()
}

fn point(t_s: f64, rs: &[&RequestRecord]) -> LatencyPoint {
    let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
    let ttft: Vec<f64> = rs.iter().filter_map(|r| r.ttft()).map(ms).collect();
    let e2el: Vec<f64> = rs.iter().filter_map(|r| r.latency()).map(ms).collect();
    let tpot: Vec<f64> = rs
        .iter()
        .filter(|r| r.output_tokens > 1)
        .filter_map(|r| Some(ms(r.latency()? - r.ttft()?) / f64::from(r.output_tokens - 1)))
        .collect();
    let (ttft_p50_ms, ttft_p99_ms) = p50_p99(ttft);
    let (tpot_p50_ms, tpot_p99_ms) = p50_p99(tpot);
    let (e2el_p50_ms, e2el_p99_ms) = p50_p99(e2el);
    LatencyPoint {
        t_s,
        requests: rs.len(),
        ttft_p50_ms,
        ttft_p99_ms,
        tpot_p50_ms,
        tpot_p99_ms,
        e2el_p50_ms,
        e2el_p99_ms,
    }
}

fn p50_p99(mut v: Vec<f64>) -> (Option<f64>, Option<f64>) {
    if v.is_empty() {
        return (None, None);
    }
    v.sort_by(f64::total_cmp);
    (Some(percentile(&v, 50.0)), Some(percentile(&v, 99.0)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn rec(sent_s: f64, ttft_ms: u64, tokens: u32) -> RequestRecord {
        let sent = Duration::from_secs_f64(sent_s);
        let first = sent + Duration::from_millis(ttft_ms);
        RequestRecord {
            sent,
            first_token: Some(first),
            last_token: Some(first + Duration::from_millis(10 * u64::from(tokens - 1))),
            output_tokens: tokens,
            ..RequestRecord::default()
        }
    }

    #[test]
    fn requests_land_in_the_bucket_they_finished_in() {
        let mut records: Vec<RequestRecord> = (0..10).map(|i| rec(i as f64 * 0.1, 50, 5)).collect();
        records.push(rec(3.2, 400, 5));
        records.push(RequestRecord {
            error: Some(crate::metrics::RequestError {
                kind: crate::metrics::ErrorKind::Timeout,
                status: None,
                message: String::new(),
            }),
            ..rec(3.2, 9000, 5)
        });
        let s = latency_series(&records);
        assert_eq!(s.len(), 2, "{s:?}");
        assert_eq!((s[0].t_s, s[0].requests), (0.5, 10));
        assert_eq!(s[0].ttft_p99_ms, Some(50.0));
        assert_eq!(s[0].tpot_p50_ms, Some(10.0));
        assert_eq!((s[1].t_s, s[1].requests), (3.5, 1));
        assert_eq!(s[1].ttft_p50_ms, Some(400.0));
    }

    #[test]
    fn a_long_step_keeps_at_most_max_points_buckets() {
        let records: Vec<RequestRecord> = (0..5000).map(|i| rec(i as f64 * 0.1, 50, 2)).collect();
        let s = latency_series(&records);
        assert_eq!(s.len(), MAX_POINTS);
        assert_eq!(s.iter().map(|p| p.requests).sum::<usize>(), 5000);
    }
}

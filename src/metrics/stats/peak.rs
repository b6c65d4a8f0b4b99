//! Peak: vLLM's two peak metrics over the successful requests — maximum
//! concurrent requests and maximum output "tokens" per one-second bucket.
//! PURE: exact `Duration` arithmetic on the records, no clock.
use super::request::successful;
use crate::metrics::RequestRecord;
use std::collections::HashMap;
use std::time::Duration;

/// vLLM's `max_concurrent_requests`: the maximum overlap of the half-open
/// intervals [sent, sent + latency) of the successful requests, by an exact
/// sweep line in which ends are processed before starts at equal times (so
/// back-to-back requests never overlap). 0 without successful requests.
pub fn max_concurrent_requests(records: &[RequestRecord]) -> usize {
    let mut events: Vec<(Duration, i64)> = successful(records)
        .filter_map(|r| r.latency().map(|latency| (r.sent, r.sent + latency)))
        .flat_map(|(start, end)| [(start, 1), (end, -1)])
        .collect();
    // -1 sorts before +1: an end at time t is applied before a start at t.
    events.sort_unstable();
    let mut current: i64 = 0;
    let mut peak: i64 = 0;
    for (_, delta) in events {
        current += delta;
        peak = peak.max(current);
    }
    usize::try_from(peak).unwrap_or(0)
}

/// vLLM's `max_output_tokens_per_s`: the largest count of output events in a
/// one-second bucket, buckets starting at the earliest `sent` of the successful
/// requests. Each request contributes an event at its first token and one at
/// every cumulative ITL step.
///
/// This counts SSE *messages*, not tokens: with multi-token chunks (speculative
/// decoding, routers that batch chunks) the peak can sit below the average
/// output throughput. That is vLLM's known quirk (vllm#37666), kept on purpose
/// so our numbers stay comparable with `vllm bench serve`.
pub fn max_output_tokens_per_s(records: &[RequestRecord]) -> f64 {
    let Some(origin) = successful(records).map(|r| r.sent).min() else {
        return 0.0;
    };
    let n_buckets = bucket_count(records, origin);
    let mut buckets: HashMap<u64, u64> = HashMap::new();
    for t in successful(records).flat_map(output_event_times) {
        let bucket = t.saturating_sub(origin).as_secs();
        // vLLM drops events outside its bucket array; with consistent records
        // none fall outside.
        if bucket < n_buckets {
            *buckets.entry(bucket).or_insert(0) += 1;
        }
    }
    buckets.into_values().max().unwrap_or(0) as f64
}

/// vLLM's bucket array length: ⌈latest end − origin⌉ + 1 seconds.
fn bucket_count(records: &[RequestRecord], origin: Duration) -> u64 {
    let latest_end = successful(records)
        .filter_map(|r| r.latency().map(|latency| r.sent + latency))
        .max()
        .unwrap_or(origin);
    let span = latest_end.saturating_sub(origin);
    let whole_seconds = span.as_secs() + u64::from(span.subsec_nanos() > 0);
    whole_seconds.saturating_add(1)
}

/// sent + ttft, then one more instant per ITL gap.
pub(in crate::metrics) fn output_event_times(record: &RequestRecord) -> Vec<Duration> {
    let Some(ttft) = record.ttft() else {
        return Vec::new();
    };
    let first = record.sent + ttft;
    std::iter::once(first)
        .chain(record.itl.iter().scan(first, |t, gap| {
            *t = t.saturating_add(*gap);
            Some(*t)
        }))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::testing::{failed, ok};
    use super::*;
    use crate::metrics::ErrorKind;

    #[test]
    fn touching_intervals_do_not_overlap() {
        // [0, 1 s) and [1 s, 2 s): the second starts when the first ends.
        let records = vec![ok(0, 400, &[600], 2), ok(1000, 400, &[600], 2)];
        assert_eq!(max_concurrent_requests(&records), 1);
    }

    #[test]
    fn overlapping_intervals_are_counted_at_their_peak() {
        let records = vec![
            ok(0, 100, &[1900], 2),   // [0, 2000)
            ok(500, 100, &[400], 2),  // [500, 1000)
            ok(1000, 100, &[400], 2), // [1000, 1500): touches the previous one
            ok(1200, 100, &[100], 2), // [1200, 1400)
            ok(3000, 100, &[], 1),    // [3000, 3100)
        ];
        assert_eq!(max_concurrent_requests(&records), 3);
    }

    #[test]
    fn failed_requests_do_not_count_towards_concurrency() {
        let mut overlapping = failed(100, ErrorKind::Reset);
        overlapping.first_token = Some(std::time::Duration::from_millis(200));
        overlapping.last_token = Some(std::time::Duration::from_millis(900));
        let records = vec![ok(0, 100, &[900], 2), overlapping];
        assert_eq!(max_concurrent_requests(&records), 1);
    }

    #[test]
    fn peak_output_counts_sse_messages_per_second_bucket() {
        let records = vec![
            // events at 0.5, 0.8, 1.1, 1.4 s
            ok(0, 500, &[300, 300, 300], 400),
            // events at 1.0, 1.1, 1.2 s
            ok(200, 800, &[100, 100], 400),
            failed(0, ErrorKind::Timeout),
        ];
        // bucket [0, 1): 2 events; bucket [1, 2): 2 + 3 = 5 — messages, not the 800 tokens.
        assert_eq!(max_output_tokens_per_s(&records), 5.0);
    }

    #[test]
    fn peak_output_buckets_start_at_the_earliest_send() {
        // Sent at 10.6 s: events at 10.7 and 11.5 s share the bucket [10.6, 11.6).
        let records = vec![ok(10_600, 100, &[800], 2)];
        assert_eq!(max_output_tokens_per_s(&records), 2.0);
    }

    #[test]
    fn peaks_of_no_successful_requests_are_zero() {
        assert_eq!(max_output_tokens_per_s(&[]), 0.0);
        assert_eq!(max_concurrent_requests(&[]), 0);
        let records = vec![failed(0, ErrorKind::Connect)];
        assert_eq!(max_output_tokens_per_s(&records), 0.0);
        assert_eq!(max_concurrent_requests(&records), 0);
    }
}

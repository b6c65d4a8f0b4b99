//! Request: the per-request values behind every latency statistic (vLLM §2.1,
//! §2.4) and goodput (§2.5), in seconds. PURE: reads records, never a clock.
//!
//! Timestamps are `Duration` offsets, so differences are exact; conversion to
//! `f64` seconds happens once, here. A successful record missing a timestamp it
//! should have is left out of that metric rather than guessed.
use super::GoodputSlo;
use crate::metrics::{ErrorKind, RequestRecord};
use std::time::Duration;

/// The successful records (vLLM's S): the only ones latency stats look at.
pub fn successful(records: &[RequestRecord]) -> impl Iterator<Item = &RequestRecord> {
    records.iter().filter(|r| r.is_ok())
}

/// Whether a record's `sent` is meaningful: every record except a cancelled
/// one that never got a token, which may have been cancelled before its POST
/// (its `sent` would then be a placeholder). Failed requests that were sent
/// (refused, reset, HTTP errors…) count.
pub fn was_sent(record: &RequestRecord) -> bool {
    let cancelled = matches!(&record.error, Some(e) if e.kind == ErrorKind::Cancelled);
    !(cancelled && record.first_token.is_none())
}

/// TTFT (`first_token − sent`) in seconds.
pub fn ttft_seconds(record: &RequestRecord) -> Option<f64> {
    record.ttft().map(secs)
}

/// E2EL (vLLM's `latency`: `last_token − sent`) in seconds.
pub fn e2el_seconds(record: &RequestRecord) -> Option<f64> {
    record.latency().map(secs)
}

/// vLLM's TPOT: (latency − ttft)/(output_tokens − 1), only when more than one
/// output token was produced.
pub fn tpot_seconds(record: &RequestRecord) -> Option<f64> {
    if record.output_tokens <= 1 {
        return None;
    }
    let decode = record.latency()?.saturating_sub(record.ttft()?);
    Some(secs(decode) / f64::from(record.output_tokens - 1))
}

/// TPOT as goodput checks it: 0 for requests with ≤ 1 output token (vLLM).
pub fn goodput_tpot_seconds(record: &RequestRecord) -> Option<f64> {
    if record.output_tokens <= 1 {
        return Some(0.0);
    }
    tpot_seconds(record)
}

/// Inter-token latencies (one per later SSE message) in seconds.
pub fn itl_seconds(record: &RequestRecord) -> impl Iterator<Item = f64> + '_ {
    record.itl.iter().copied().map(secs)
}

/// Client queue time (`sent − released`) in seconds.
pub fn client_queue_seconds(record: &RequestRecord) -> f64 {
    secs(record.queue_time())
}

/// E2EL plus client queue time in seconds.
pub fn e2el_including_client_queue_seconds(record: &RequestRecord) -> Option<f64> {
    record.latency().map(|l| secs(l + record.queue_time()))
}

/// Dispatch lateness (`sent − due`) in seconds.
pub fn lateness_seconds(record: &RequestRecord) -> f64 {
    secs(record.lateness())
}

/// TTFT measured from the due time (`first_token − due`) in seconds.
pub fn ttft_from_due_seconds(record: &RequestRecord) -> Option<f64> {
    record
        .first_token
        .map(|t| secs(t.saturating_sub(record.due)))
}

/// E2EL measured from the due time (`last_token − due`) in seconds.
pub fn e2el_from_due_seconds(record: &RequestRecord) -> Option<f64> {
    record
        .last_token
        .map(|t| secs(t.saturating_sub(record.due)))
}

/// Per-metric samples in seconds, gathered in one pass over a run's records.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Samples {
    /// TTFT of each successful request.
    pub ttft: Vec<f64>,
    /// TPOT of each successful request with more than one output token.
    pub tpot: Vec<f64>,
    /// Every ITL gap of every successful request, flattened (chunk-weighted).
    pub itl: Vec<f64>,
    /// E2EL of each successful request.
    pub e2el: Vec<f64>,
    /// Client queue time of each successful request.
    pub client_queue_time: Vec<f64>,
    /// E2EL plus client queue time of each successful request.
    pub e2el_including_client_queue: Vec<f64>,
    /// Lateness of every record that was sent ([`was_sent`]), failed ones too.
    pub lateness: Vec<f64>,
    /// TTFT from the due time of each successful request.
    pub ttft_from_due: Vec<f64>,
    /// E2EL from the due time of each successful request.
    pub e2el_from_due: Vec<f64>,
    /// kneecap: TTFO of each successful request that sent answer text.
    pub ttfo: Vec<f64>,
    /// kneecap: the answer's TPOT of each successful request with > 1 answer token.
    pub answer_tpot: Vec<f64>,
}

impl Samples {
    /// Collect every metric's samples from `records`.
    pub fn from_records(records: &[RequestRecord]) -> Self {
        let ok = || successful(records);
        Samples {
            ttft: ok().filter_map(ttft_seconds).collect(),
            tpot: ok().filter_map(tpot_seconds).collect(),
            itl: ok().flat_map(itl_seconds).collect(),
            e2el: ok().filter_map(e2el_seconds).collect(),
            client_queue_time: ok().map(client_queue_seconds).collect(),
            e2el_including_client_queue: ok()
                .filter_map(e2el_including_client_queue_seconds)
                .collect(),
            lateness: records
                .iter()
                .filter(|r| was_sent(r))
                .map(lateness_seconds)
                .collect(),
            ttft_from_due: ok().filter_map(ttft_from_due_seconds).collect(),
            e2el_from_due: ok().filter_map(e2el_from_due_seconds).collect(),
            ttfo: ok().filter_map(super::reasoning::ttfo_seconds).collect(),
            answer_tpot: ok()
                .filter_map(super::reasoning::answer_tpot_seconds)
                .collect(),
        }
    }
}

/// Whether a request meets every SLO given (inclusive bounds). Like vLLM, the
/// value in seconds is compared with the SLO in ms divided by 1000, so a TTFT
/// of exactly 100 ms meets `ttft:100`. A missing value fails its SLO.
pub fn meets_slo(record: &RequestRecord, slo: &GoodputSlo) -> bool {
    let within = |value: Option<f64>, bound_ms: Option<f64>| match bound_ms {
        None => true,
        Some(ms) => value.is_some_and(|v| v <= ms / 1000.0),
    };
    within(ttft_seconds(record), slo.ttft_ms)
        && within(goodput_tpot_seconds(record), slo.tpot_ms)
        && within(e2el_seconds(record), slo.e2el_ms)
}

/// vLLM's `request_goodput`: successful requests meeting every SLO, per second
/// of `duration`. `None` when no SLO is given (vLLM writes `null`); 0 when
/// `duration` is 0.
pub fn request_goodput(
    records: &[RequestRecord],
    slo: &GoodputSlo,
    duration: Duration,
) -> Option<f64> {
    if slo.ttft_ms.is_none() && slo.tpot_ms.is_none() && slo.e2el_ms.is_none() {
        return None;
    }
    let good = successful(records).filter(|r| meets_slo(r, slo)).count();
    Some(per_second(good as f64, duration))
}

/// `amount / duration`, or 0 for a zero duration (vLLM would divide by zero).
pub fn per_second(amount: f64, duration: Duration) -> f64 {
    if duration.is_zero() {
        0.0
    } else {
        amount / secs(duration)
    }
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

#[cfg(test)]
mod tests {
    use super::super::testing::{failed, ms, ok};
    use super::*;

    fn slo(ttft_ms: Option<f64>, tpot_ms: Option<f64>, e2el_ms: Option<f64>) -> GoodputSlo {
        GoodputSlo {
            ttft_ms,
            tpot_ms,
            e2el_ms,
        }
    }

    #[test]
    fn tpot_follows_the_vllm_docs_worked_example() {
        // First output at 100 ms, two later outputs 40 ms apart, 5 tokens, E2EL 180 ms.
        let r = ok(0, 100, &[40, 40], 5);
        assert_eq!(r.latency(), Some(ms(180)));
        let tpot = tpot_seconds(&r).unwrap();
        assert!((tpot - 0.020).abs() < 1e-15, "tpot {tpot}");
        let itl: Vec<f64> = itl_seconds(&r).collect();
        assert_eq!(itl, vec![0.040, 0.040]);
    }

    #[test]
    fn single_token_requests_have_no_tpot_but_a_goodput_tpot_of_zero() {
        let r = ok(0, 300, &[], 1);
        assert_eq!(tpot_seconds(&r), None);
        assert_eq!(goodput_tpot_seconds(&r), Some(0.0));
        assert!(meets_slo(&r, &slo(None, Some(0.0), None)));
        let zero_tokens = ok(0, 300, &[], 0);
        assert_eq!(tpot_seconds(&zero_tokens), None);
        assert_eq!(goodput_tpot_seconds(&zero_tokens), Some(0.0));
    }

    #[test]
    fn goodput_bounds_are_inclusive() {
        let r = ok(0, 100, &[40, 40], 5); // TTFT 100 ms, TPOT 20 ms, E2EL 180 ms
        assert!(meets_slo(&r, &slo(Some(100.0), Some(20.0), Some(180.0))));
        assert!(!meets_slo(&r, &slo(Some(99.999), None, None)));
        assert!(!meets_slo(&r, &slo(None, Some(19.999), None)));
        assert!(!meets_slo(&r, &slo(None, None, Some(179.999))));
        let just_late = RequestRecord {
            first_token: Some(ms(100) + Duration::from_nanos(1)),
            ..r
        };
        assert!(!meets_slo(&just_late, &slo(Some(100.0), None, None)));
    }

    #[test]
    fn goodput_counts_only_successful_requests_meeting_every_slo_per_second() {
        let records = vec![
            ok(0, 100, &[40, 40], 5), // good
            ok(0, 300, &[], 1),       // TTFT too slow
            ok(0, 50, &[500], 2),     // TPOT 500 ms too slow
            ok(0, 90, &[], 1),        // good (1 token: TPOT 0)
            failed(0, ErrorKind::Timeout),
        ];
        let limits = slo(Some(200.0), Some(50.0), None);
        assert_eq!(
            request_goodput(&records, &limits, Duration::from_secs(4)),
            Some(0.5)
        );
        assert_eq!(
            request_goodput(&records, &limits, Duration::ZERO),
            Some(0.0)
        );
    }

    #[test]
    fn goodput_is_none_without_any_slo() {
        let records = vec![ok(0, 100, &[40, 40], 5)];
        assert_eq!(
            request_goodput(&records, &GoodputSlo::default(), Duration::from_secs(1)),
            None
        );
    }

    #[test]
    fn cancelled_requests_without_a_token_are_not_counted_as_sent() {
        let mut unsent = failed(0, ErrorKind::Cancelled);
        assert!(!was_sent(&unsent));
        unsent.first_token = Some(ms(10));
        assert!(was_sent(&unsent));
        assert!(was_sent(&failed(0, ErrorKind::Connect)));
        assert!(was_sent(&ok(0, 1, &[], 1)));
    }

    #[test]
    fn samples_exclude_failed_requests_from_latency_but_keep_their_lateness() {
        let mut late = ok(0, 100, &[40, 40], 5);
        late.due = ms(0);
        late.released = ms(5);
        late.sent = ms(20);
        late.first_token = Some(ms(120));
        late.last_token = Some(ms(200));
        let mut broken = failed(30, ErrorKind::Status);
        broken.due = ms(10);
        broken.first_token = Some(ms(40));
        broken.last_token = Some(ms(90));
        broken.itl = vec![ms(50)];
        let s = Samples::from_records(&[late, broken]);
        assert_eq!(s.ttft, vec![0.100]);
        assert_eq!(s.e2el, vec![0.180]);
        assert_eq!(s.itl, vec![0.040, 0.040]);
        assert_eq!(s.tpot.len(), 1);
        assert_eq!(s.client_queue_time, vec![0.015]);
        assert_eq!(s.e2el_including_client_queue, vec![0.195]);
        assert_eq!(s.ttft_from_due, vec![0.120]);
        assert_eq!(s.e2el_from_due, vec![0.200]);
        assert_eq!(s.lateness, vec![0.020, 0.020]);
    }
}

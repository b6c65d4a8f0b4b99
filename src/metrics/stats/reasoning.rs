//! Reasoning: kneecap's per-request values for reasoning models, beside vLLM's.
//! vLLM's TTFT counts any message with non-empty `choices`, reasoning included;
//! TTFO (time to first *output*) waits for the first answer text, and the
//! answer's own TPOT spreads the answer's time over the answer's tokens only.
//! PURE: reads records, never a clock.
use crate::metrics::RequestRecord;

/// TTFO (`first_answer − sent`) in seconds; `None` when no answer text came.
pub fn ttfo_seconds(record: &RequestRecord) -> Option<f64> {
    record.ttfo().map(|d| d.as_secs_f64())
}

/// The answer's TPOT: (latency − TTFO)/(answer tokens − 1), only when the
/// answer had more than one token (answer tokens = output − reasoning tokens).
pub fn answer_tpot_seconds(record: &RequestRecord) -> Option<f64> {
    let answer = record.answer_tokens();
    if answer <= 1 {
        return None;
    }
    let decode = record.latency()?.saturating_sub(record.ttfo()?);
    Some(decode.as_secs_f64() / f64::from(answer - 1))
}

/// Reasoning totals over the successful requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ReasoningTotals {
    /// Σ reasoning tokens (usage's count, else reasoning messages counted).
    pub reasoning_tokens: u64,
    /// Successful requests that reasoned at all (reasoning tokens > 0).
    pub reasoning_requests: u64,
}

impl ReasoningTotals {
    /// Sum over the successful records among `records`.
    pub fn of(records: &[RequestRecord]) -> Self {
        super::successful(records).fold(Self::default(), |acc, r| {
            let n = r.reasoning_tokens();
            Self {
                reasoning_tokens: acc.reasoning_tokens + u64::from(n),
                reasoning_requests: acc.reasoning_requests + u64::from(n > 0),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{failed, ms, ok};
    use super::*;
    use crate::metrics::ErrorKind;

    /// 100 ms to the first (reasoning) message, answer from 300 ms, 10 tokens
    /// of which 4 reasoning, last message at 480 ms.
    fn reasoned() -> RequestRecord {
        let mut r = ok(0, 100, &[380], 10);
        r.first_answer = Some(ms(300));
        r.reasoning_events = 4;
        r
    }

    #[test]
    fn ttfo_is_the_first_answer_and_ttft_stays_the_first_message() {
        let r = reasoned();
        assert_eq!(r.ttft(), Some(ms(100)));
        assert_eq!(ttfo_seconds(&r), Some(0.300));
        assert_eq!(ttfo_seconds(&ok(0, 100, &[], 1)), None, "no answer text");
    }

    #[test]
    fn answer_tpot_spreads_the_answer_time_over_the_answer_tokens() {
        // Answer: 10 − 4 = 6 tokens, from 300 ms to 480 ms: 180 ms / 5 = 36 ms.
        let tpot = answer_tpot_seconds(&reasoned()).unwrap();
        assert!((tpot - 0.036).abs() < 1e-12, "{tpot}");
        // The server's usage count wins over the counted messages.
        let mut r = reasoned();
        r.usage_reasoning_tokens = Some(8);
        assert_eq!(r.reasoning_tokens(), 8);
        // A 2-token answer: one gap of 180 ms.
        let two = answer_tpot_seconds(&r).unwrap();
        assert!((two - 0.180).abs() < 1e-12, "{two}");
        r.usage_reasoning_tokens = Some(9);
        assert_eq!(
            answer_tpot_seconds(&r),
            None,
            "a 1-token answer has no TPOT"
        );
    }

    #[test]
    fn totals_count_successful_requests_only() {
        let mut plain = ok(0, 10, &[], 3);
        plain.first_answer = plain.first_token;
        let mut broken = failed(0, ErrorKind::Timeout);
        broken.reasoning_events = 7;
        let t = ReasoningTotals::of(&[reasoned(), plain, broken]);
        assert_eq!(t.reasoning_tokens, 4);
        assert_eq!(t.reasoning_requests, 1);
    }
}

//! Test fixtures for the sweep module: compact record constructors and an
//! adaptive step run in fake time.
use crate::metrics::{ErrorKind, RequestError, RequestRecord};
use crate::sweep::adaptive::{AdaptiveRule, Look, LOOK_EVERY};
use crate::sweep::slo::Slo;
use std::time::Duration;

/// `x` milliseconds.
pub fn ms(x: u64) -> Duration {
    Duration::from_millis(x)
}

/// A successful request due and sent at `sent_ms`, first token `ttft_ms`
/// later, then one message per `itl_ms` gap.
pub fn ok(sent_ms: u64, ttft_ms: u64, itl_ms: &[u64], output_tokens: u32) -> RequestRecord {
    let first = ms(sent_ms + ttft_ms);
    RequestRecord {
        due: ms(sent_ms),
        released: ms(sent_ms),
        sent: ms(sent_ms),
        first_token: Some(first),
        last_token: Some(first + ms(itl_ms.iter().sum())),
        itl: itl_ms.iter().copied().map(ms).collect(),
        prompt_len: 10,
        output_tokens,
        ..RequestRecord::default()
    }
}

/// A successful request sent at `sent_ms` and finished at `end_ms` (one token
/// burst: first and last token at the end).
pub fn served(sent_ms: u64, end_ms: u64) -> RequestRecord {
    RequestRecord {
        first_token: Some(ms(end_ms)),
        last_token: Some(ms(end_ms)),
        itl: vec![],
        output_tokens: 1,
        ..ok(sent_ms, 0, &[], 1)
    }
}

/// A failed request due and sent at `sent_ms`, with no token times.
pub fn failed(sent_ms: u64, kind: ErrorKind) -> RequestRecord {
    RequestRecord {
        due: ms(sent_ms),
        released: ms(sent_ms),
        sent: ms(sent_ms),
        error: Some(RequestError {
            kind,
            status: None,
            message: kind.as_str().to_string(),
        }),
        ..RequestRecord::default()
    }
}

/// Run an adaptive step in fake time over `records` (each finished at its
/// `last_token`): look every [`LOOK_EVERY`] as the live sweep does, until
/// the rule ends the step. Returns when it ended and the last look.
pub fn look_until_end(
    rule: &AdaptiveRule,
    slos: &[Slo],
    records: &[RequestRecord],
) -> (Duration, Look) {
    let mut t = Duration::ZERO;
    loop {
        t += LOOK_EVERY;
        let finished: Vec<_> = records
            .iter()
            .filter(|r| r.due <= t && r.last_token.unwrap() <= t)
            .cloned()
            .collect();
        let in_flight: Vec<Duration> = records
            .iter()
            .filter(|r| r.due <= t && r.last_token.unwrap() > t)
            .map(|r| r.due)
            .collect();
        let look = rule.look(t, slos, &finished, &in_flight);
        if look.end {
            return (t, look);
        }
    }
}

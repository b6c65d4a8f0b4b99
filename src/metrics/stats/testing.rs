//! Test fixtures: compact constructors for records (test builds only).
use crate::metrics::{ErrorKind, RequestError, RequestRecord};
use std::time::Duration;

/// `x` milliseconds.
pub fn ms(x: u64) -> Duration {
    Duration::from_millis(x)
}

/// A successful request sent (and due, and released) at `sent_ms`, first token
/// `ttft_ms` later, then one message per `itl_ms` gap; prompt of 10 tokens.
pub fn ok(sent_ms: u64, ttft_ms: u64, itl_ms: &[u64], output_tokens: u32) -> RequestRecord {
    let first = ms(sent_ms + ttft_ms);
    let last = first + ms(itl_ms.iter().sum());
    RequestRecord {
        due: ms(sent_ms),
        released: ms(sent_ms),
        sent: ms(sent_ms),
        first_token: Some(first),
        last_token: Some(last),
        itl: itl_ms.iter().copied().map(ms).collect(),
        prompt_len: 10,
        output_tokens,
        ..RequestRecord::default()
    }
}

/// A failed request sent (and due, and released) at `sent_ms`.
pub fn failed(sent_ms: u64, kind: ErrorKind) -> RequestRecord {
    RequestRecord {
        due: ms(sent_ms),
        released: ms(sent_ms),
        sent: ms(sent_ms),
        prompt_len: 1000,
        output_tokens: 77,
        error: Some(RequestError {
            kind,
            status: None,
            message: kind.as_str().to_string(),
        }),
        ..RequestRecord::default()
    }
}

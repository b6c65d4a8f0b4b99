//! Refusals: requests the server turned down for their own shape (an HTTP
//! 4xx other than 408 and 429, which mean "try again later"), the server's
//! own message inside such an answer, and the rule that stops a load level
//! whose first requests are all refused the same way. PURE: fed finished
//! records; no clock, no I/O.
//!
//! The rule looks at the first [`SAME_REFUSALS_TO_STOP`] requests of a level
//! in release order (their indices), not at the first to finish: a refusal
//! comes back at once while a success takes its whole answer, so the first
//! records to finish over-represent refusals. It trips when every one of
//! those requests was refused with the same status and the same kind of
//! message (digits aside: "4100 tokens" and "4096 tokens" are one kind),
//! and never after any request of the level succeeded.

use super::{ErrorKind, RequestError, RequestRecord};

/// How many requests, the first of a level, must all be refused the same way
/// to stop it. If a share `p` of a workload's requests is refused (some of
/// its prompts are too long), the first N are all refused with probability
/// `p^N`: with 10, under 0.1% even when half the requests are refused
/// (0.5^10 ≈ 0.001) and 1e-20 for a rare 1%. A level whose every request is
/// refused stops after 10 requests: 2.5 s at 4 req/s, 10 s at 1 req/s.
pub const SAME_REFUSALS_TO_STOP: usize = 10;

/// The server's refusal of a request: its status and its own message.
#[derive(Debug, Clone, PartialEq)]
pub struct Refusal {
    pub status: u16,
    /// The server's message (its JSON `message` / `detail` / `error`, else the body).
    pub message: String,
    /// How many requests were refused this way.
    pub count: usize,
}

/// Whether an HTTP status refuses the request itself: a 4xx other than 408
/// (request timeout) and 429 (rate limited), which ask to try again.
pub fn refuses(status: u16) -> bool {
    (400..500).contains(&status) && status != 408 && status != 429
}

/// The refusal in `error`, if it is one: the status and the server's message.
pub fn refusal(error: &RequestError) -> Option<(u16, String)> {
    let status = error.status.filter(|s| refuses(*s))?;
    Some((status, server_message(&error.message)))
}

/// Whether a failed request put no work on the server: turned away with a
/// 4xx (429 included) or its connection refused, before any token. The
/// generator's self-check does not weigh these (a request that measured
/// nothing cannot have been measured late).
pub fn failed_at_once(r: &RequestRecord) -> bool {
    let Some(e) = &r.error else { return false };
    let turned_away = match e.kind {
        ErrorKind::Connect | ErrorKind::RateLimited => true,
        ErrorKind::Status => e.status.is_some_and(|s| (400..500).contains(&s)),
        _ => false,
    };
    turned_away && r.first_token.is_none()
}

/// The server's own message in a client error line (`HTTP 400 Bad Request:
/// {body}`): the JSON string under `message` (OpenAI, vLLM, llama.cpp),
/// `detail` or `msg` (FastAPI) or `error` (TGI), read even from a body cut
/// short (then ending in `…`); else the body as it is.
pub fn server_message(line: &str) -> String {
    let body = match line.strip_prefix("HTTP ") {
        Some(rest) => rest.split_once(": ").map_or(rest, |(_, b)| b),
        None => line,
    };
    ["message", "detail", "msg", "error"]
        .iter()
        .find_map(|key| json_string_after(body, key))
        .unwrap_or_else(|| body.trim().to_string())
}

/// The string value of the first `"key": "..."` in `text` (not necessarily
/// valid JSON); `None` when no such key has a string value.
fn json_string_after(text: &str, key: &str) -> Option<String> {
    let quoted = format!("\"{key}\"");
    let mut from = 0;
    while let Some(at) = text[from..].find(&quoted) {
        let rest = text[from + at + quoted.len()..].trim_start();
        from += at + quoted.len();
        let Some(value) = rest.strip_prefix(':').map(str::trim_start) else {
            continue;
        };
        if let Some(s) = value.strip_prefix('"') {
            return Some(unescape(s));
        }
    }
    None
}

/// A JSON string body up to its closing quote (escapes decoded); a string
/// cut short ends in `…`.
fn unescape(s: &str) -> String {
    let mut out = String::new();
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => return out,
            '\\' => match chars.next() {
                Some('n') => out.push('\n'),
                Some('t') => out.push('\t'),
                Some('u') => {
                    let hex: String = chars.by_ref().take(4).collect();
                    let decoded = u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32);
                    out.extend(decoded);
                }
                Some(other) => out.push(other),
                None => break,
            },
            c => out.push(c),
        }
    }
    out.push('…');
    out
}

/// The kind of a message: digit runs read as `#`, so refusals that differ
/// only in their numbers are one kind.
pub fn message_kind(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    let mut in_digits = false;
    for c in message.chars() {
        if c.is_ascii_digit() {
            if !in_digits {
                out.push('#');
            }
            in_digits = true;
        } else {
            out.push(c);
            in_digits = false;
        }
    }
    out
}

/// Watches a level's finished records for the first
/// [`SAME_REFUSALS_TO_STOP`] all refused the same way.
#[derive(Debug, Clone, Default)]
pub struct RefusalWatch {
    /// A success, or a first request that failed otherwise: never trips.
    disarmed: bool,
    /// The first refusal seen among the first requests, and its kind.
    first: Option<(Refusal, String)>,
    tripped: bool,
}

impl RefusalWatch {
    /// Take one finished record; the refusal once the rule has tripped.
    pub fn see(&mut self, r: &RequestRecord) -> Option<&Refusal> {
        if !self.tripped && !self.disarmed {
            self.take(r);
        }
        self.tripped()
    }

    fn take(&mut self, r: &RequestRecord) {
        let Some(error) = &r.error else {
            self.disarmed = true;
            return;
        };
        if r.index >= SAME_REFUSALS_TO_STOP {
            return;
        }
        let Some((status, message)) = refusal(error) else {
            self.disarmed = true;
            return;
        };
        let kind = message_kind(&message);
        let first = self.first.get_or_insert_with(|| {
            let r = Refusal {
                status,
                message,
                count: 0,
            };
            (r, kind.clone())
        });
        if first.0.status != status || first.1 != kind {
            self.disarmed = true;
            return;
        }
        first.0.count += 1;
        self.tripped = first.0.count == SAME_REFUSALS_TO_STOP;
    }

    /// The refusal that stopped the level, once the rule has tripped.
    pub fn tripped(&self) -> Option<&Refusal> {
        self.first.as_ref().map(|(r, _)| r).filter(|_| self.tripped)
    }
}

#[cfg(test)]
#[path = "refusal_tests.rs"]
mod tests;

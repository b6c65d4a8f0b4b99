//! Sans-IO Server-Sent Events decoder: bytes in, events out.
//!
//! Owns the framing of a `text/event-stream` response body and nothing else: it
//! does no I/O, reads no clock and knows nothing about JSON beyond a cheap
//! "is this payload complete?" check. The HTTP client feeds it body frames as
//! they arrive ([`SseDecoder::feed`]), pulls events ([`SseDecoder::next_event`])
//! and timestamps them; [`SseDecoder::finish`] flushes at end of stream.
//!
//! # Rules
//! The WHATWG "event stream interpretation", restricted to what a streaming
//! OpenAI client needs, plus the tolerance of vLLM's client:
//!
//! - lines end in `\n`, `\r\n` or `\r`; a `\r\n` split across two feeds is one
//!   line ending;
//! - a blank line ends an event; an event without data (or with only empty
//!   data) is skipped;
//! - lines starting with `:` are comments (keep-alive pings) and are skipped;
//! - `data:` values lose exactly one leading space; several `data:` lines in
//!   one event are joined with `\n`; `id:`, `retry:` and unknown fields are
//!   ignored; `event:` is kept aside and available from
//!   [`SseDecoder::event_type`] (some servers name error events `error`);
//! - a UTF-8 byte order mark at the very start of the stream is skipped;
//! - a payload of `[DONE]` (surrounding whitespace allowed) is [`SseEvent::Done`].
//!
//! **Early dispatch.** vLLM's client emits an event whose `data: ` payload is
//! already `[DONE]` or complete JSON without waiting for the blank line. We do
//! the same, but only once the `data:` line itself has ended, so the result
//! never depends on how the bytes were split: when the *first* `data:` line of
//! an event ends and its payload is `[DONE]` or a balanced JSON object, the
//! event is dispatched at once. This also accepts servers that separate events
//! with a single newline. A later `data:` line then starts a new event (a
//! multi-line event whose first line is a whole JSON object is not something
//! an OpenAI-compatible server sends). [`SseDecoder::strict`] turns this off.
//!
//! # Performance
//! This runs for every streamed token. An event with a single `data:` line is
//! returned as a slice of the internal buffer (no allocation); only events with
//! several `data:` lines are joined, into a reused buffer. Consumed bytes are
//! dropped lazily in [`SseDecoder::feed`], and only when they are at least half
//! of the buffer (so each byte is moved at most a constant number of times on
//! average), or all of it (then it is a cheap `clear`).

/// One decoded event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SseEvent<'a> {
    /// The (joined) `data:` payload of an event, without the `data:` prefix.
    Data(&'a [u8]),
    /// `data: [DONE]`.
    Done,
}

/// The UTF-8 byte order mark.
const BOM: &[u8] = b"\xEF\xBB\xBF";

/// Incremental decoder. Feed bytes as they arrive; pull complete events.
///
/// Typical use: after every body frame call [`feed`](Self::feed), then
/// [`next_event`](Self::next_event) until it returns `None`; at end of stream
/// call [`finish`](Self::finish) until it returns `None`. [`reset`](Self::reset)
/// makes the decoder ready for a new stream and keeps its allocations.
#[derive(Debug, Default)]
pub struct SseDecoder {
    /// Received bytes; everything before `consumed` is no longer needed.
    buf: Vec<u8>,
    /// Bytes before this offset may be dropped (no pending event points there).
    consumed: usize,
    /// Start of the first line not yet processed.
    line: usize,
    /// How far the current (unterminated) line has been searched for an end.
    scanned: usize,
    /// The previous line ended in `\r`: a `\n` right after it belongs to it.
    skip_lf: bool,
    /// The start of the stream has been checked for a BOM.
    bom_checked: bool,
    /// `data:` lines seen in the pending event.
    n_data: usize,
    /// Value range (in `buf`) of the pending event's first `data:` line.
    first: (usize, usize),
    /// Joined value when the pending event has two or more `data:` lines.
    joined: Vec<u8>,
    /// `event:` value of the pending event (empty: the default type).
    pending_type: Vec<u8>,
    /// `event:` value of the last dispatched event.
    last_type: Vec<u8>,
    /// [`finish`](Self::finish) has been called.
    finished: bool,
    /// Disable early dispatch (see the module docs).
    strict: bool,
}

/// Where the payload of a dispatched event lives.
enum Payload {
    /// `buf[start..end]`.
    Single(usize, usize),
    /// `joined`.
    Joined,
}

impl SseDecoder {
    /// A decoder with early dispatch of complete `data:` lines (the default).
    pub fn new() -> Self {
        Self::default()
    }

    /// A decoder that dispatches only on blank lines, exactly as the SSE spec says.
    pub fn strict() -> Self {
        Self {
            strict: true,
            ..Self::default()
        }
    }

    /// Forget all state so the decoder can read a new stream; keeps allocations.
    pub fn reset(&mut self) {
        let mut buf = std::mem::take(&mut self.buf);
        let mut joined = std::mem::take(&mut self.joined);
        buf.clear();
        joined.clear();
        *self = Self {
            buf,
            joined,
            strict: self.strict,
            ..Self::default()
        };
    }

    /// The `event:` field of the event last returned, if it had a non-empty one
    /// (`None` means the default type, `message`). Only `event:` lines before
    /// the first `data:` line count when that line was dispatched early.
    pub fn event_type(&self) -> Option<&[u8]> {
        (!self.last_type.is_empty()).then_some(&self.last_type[..])
    }

    /// Bytes held that have not been consumed as complete events yet. Callers
    /// can cap this to defend against a server that never ends a line.
    pub fn buffered(&self) -> usize {
        self.buf.len() - self.consumed
    }

    /// Append bytes read from the wire.
    pub fn feed(&mut self, bytes: &[u8]) {
        let n = self.consumed;
        if n > 0 && n * 2 >= self.buf.len() {
            // Move the (smaller) unconsumed tail to the front; a full clear
            // when everything was consumed, the common case.
            self.buf.drain(..n);
            self.consumed = 0;
            self.line -= n;
            self.scanned = self.scanned.saturating_sub(n);
            // `first` is stale (and may lie before `n`) when no event is pending.
            self.first = (
                self.first.0.saturating_sub(n),
                self.first.1.saturating_sub(n),
            );
        }
        self.buf.extend_from_slice(bytes);
    }

    /// Next complete event, if any. Comments, `event:`/`id:`/`retry:` lines and
    /// events without data are skipped.
    pub fn next_event(&mut self) -> Option<SseEvent<'_>> {
        // Indices first, borrow afterwards: returning a borrow from inside the
        // scanning loop would keep `self` mutably borrowed for the whole loop.
        let payload = self.advance()?;
        let bytes = match payload {
            Payload::Single(start, end) => &self.buf[start..end],
            Payload::Joined => &self.joined[..],
        };
        Some(classify(bytes))
    }

    /// Call at end of stream: yields a final event that lacked its blank line
    /// (and any complete events not pulled yet). Call until it returns `None`;
    /// call [`reset`](Self::reset) before feeding another stream.
    pub fn finish(&mut self) -> Option<SseEvent<'_>> {
        if !self.finished {
            self.finished = true;
            // Ending the last line and then the event is exactly what a
            // well-behaved server would have sent.
            self.buf.extend_from_slice(b"\n\n");
        }
        self.next_event()
    }

    /// Process lines until an event is complete or the buffer runs out.
    fn advance(&mut self) -> Option<Payload> {
        if !self.bom_checked && !self.skip_bom() {
            return None;
        }
        loop {
            if self.skip_lf {
                let &byte = self.buf.get(self.line)?;
                self.skip_lf = false;
                if byte == b'\n' {
                    self.line += 1;
                    if self.n_data == 0 {
                        self.consumed = self.line;
                    }
                }
            }
            let from = self.scanned.max(self.line);
            let Some(offset) = self.buf[from..]
                .iter()
                .position(|&b| b == b'\n' || b == b'\r')
            else {
                self.scanned = self.buf.len();
                return None;
            };
            let (start, end) = (self.line, from + offset);
            // A `\r` may be followed by a `\n` that is part of the same ending;
            // it is skipped at the top of the loop, possibly after the next feed.
            self.skip_lf = self.buf[end] == b'\r';
            self.line = end + 1;
            let dispatched = self.process_line(start, end);
            if self.n_data == 0 {
                self.consumed = self.line;
            }
            if dispatched.is_some() {
                return dispatched;
            }
        }
    }

    /// Skip a BOM at stream start. `false` while the first bytes could still be one.
    fn skip_bom(&mut self) -> bool {
        let head = &self.buf[self.line..];
        if head.len() < BOM.len() && BOM.starts_with(head) {
            return false;
        }
        if head.starts_with(BOM) {
            self.line += BOM.len();
            self.consumed = self.line;
        }
        self.bom_checked = true;
        true
    }

    /// Interpret the line `buf[start..end]` (without its ending).
    fn process_line(&mut self, start: usize, end: usize) -> Option<Payload> {
        let line = &self.buf[start..end];
        let Some(&first_byte) = line.first() else {
            return self.dispatch();
        };
        if first_byte == b':' {
            return None;
        }
        let (field, mut value) = match line.iter().position(|&b| b == b':') {
            Some(colon) => (Field::of(&line[..colon]), start + colon + 1),
            None => (Field::of(line), end),
        };
        if value < end && self.buf[value] == b' ' {
            value += 1;
        }
        match field {
            Field::Data => {}
            Field::Event => {
                self.pending_type.clear();
                self.pending_type.extend_from_slice(&self.buf[value..end]);
                return None;
            }
            Field::Other => return None,
        }
        match self.n_data {
            0 => {
                self.first = (value, end);
                self.n_data = 1;
                if !self.strict && is_complete_payload(&self.buf[value..end]) {
                    return self.dispatch();
                }
            }
            1 => {
                self.joined.clear();
                self.joined
                    .extend_from_slice(&self.buf[self.first.0..self.first.1]);
                self.joined.push(b'\n');
                self.joined.extend_from_slice(&self.buf[value..end]);
                self.n_data = 2;
            }
            _ => {
                self.joined.push(b'\n');
                self.joined.extend_from_slice(&self.buf[value..end]);
                self.n_data += 1;
            }
        }
        None
    }

    /// End the pending event; `None` when it had no (or only empty) data.
    fn dispatch(&mut self) -> Option<Payload> {
        let payload = match std::mem::take(&mut self.n_data) {
            0 => None,
            1 if self.first.0 == self.first.1 => None,
            1 => Some(Payload::Single(self.first.0, self.first.1)),
            _ => Some(Payload::Joined),
        };
        if payload.is_some() {
            std::mem::swap(&mut self.last_type, &mut self.pending_type);
        }
        self.pending_type.clear();
        payload
    }
}

/// The field names we act on.
enum Field {
    Data,
    Event,
    Other,
}

impl Field {
    fn of(name: &[u8]) -> Self {
        match name {
            b"data" => Field::Data,
            b"event" => Field::Event,
            _ => Field::Other,
        }
    }
}

/// `[DONE]` or data.
fn classify(payload: &[u8]) -> SseEvent<'_> {
    if payload.trim_ascii() == b"[DONE]" {
        SseEvent::Done
    } else {
        SseEvent::Data(payload)
    }
}

/// Whether a single `data:` value can be dispatched without its blank line:
/// `[DONE]`, or a JSON object whose braces balance exactly at its last byte.
/// Not a validator: `parse_chunk` judges the JSON itself.
fn is_complete_payload(value: &[u8]) -> bool {
    let value = value.trim_ascii();
    if value == b"[DONE]" {
        return true;
    }
    if value.first() != Some(&b'{') {
        return false;
    }
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    for (i, &b) in value.iter().enumerate() {
        if in_string {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'{' | b'[' => depth += 1,
            b'}' | b']' => {
                depth -= 1;
                if depth == 0 {
                    return i + 1 == value.len();
                }
            }
            _ => {}
        }
    }
    false
}

#[cfg(test)]
#[path = "sse_tests.rs"]
mod tests;

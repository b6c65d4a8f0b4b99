//! Reading a response into a [`RequestRecord`]: an SSE stream event by
//! event (token / usage / in-stream error, vLLM §2.1), or a pooling API's one
//! JSON answer (embeddings, rerank, pooling: E2EL only, vLLM §2.6). Each
//! frame's arrival time was taken by the caller before any parsing. No I/O.

use super::openai::{self, Api};
use super::sse::{SseDecoder, SseEvent};
use crate::metrics::{ErrorKind, RequestRecord};
use std::time::Duration;

/// Largest pooling answer read (embeddings of a big batch are a few MB).
const MAX_POOLING_BODY: usize = 256 * 1024 * 1024;

/// Turns body bytes into record updates: SSE events → token / usage / error;
/// for a pooling API, the one JSON answer → end time / usage / error.
pub(super) struct StreamReader {
    decoder: SseDecoder,
    /// Pooling APIs: the answer's bytes so far (parsed once it is whole).
    body: Vec<u8>,
    keep_text: bool,
    /// Which wire format the events are in.
    api: Api,
    /// Responses API: a terminal event (`response.completed`) was seen.
    terminal: bool,
    /// Arrival of the latest body frame (stamps an unterminated final event).
    last_at: Duration,
}

pub(super) type StreamError = (ErrorKind, String);

impl StreamReader {
    pub(super) fn new(keep_text: bool, api: Api) -> Self {
        StreamReader {
            decoder: SseDecoder::new(),
            body: Vec::new(),
            keep_text,
            api,
            terminal: false,
            last_at: Duration::ZERO,
        }
    }

    pub(super) fn feed(
        &mut self,
        data: &[u8],
        at: Duration,
        rec: &mut RequestRecord,
    ) -> Result<(), StreamError> {
        self.last_at = at;
        if self.api.is_pooling() {
            if self.body.len() + data.len() > MAX_POOLING_BODY {
                return Err((
                    ErrorKind::Protocol,
                    format!("response body larger than {MAX_POOLING_BODY} bytes"),
                ));
            }
            self.body.extend_from_slice(data);
            return Ok(());
        }
        self.decoder.feed(data);
        while let Some(ev) = self.decoder.next_event() {
            if let SseEvent::Data(payload) = ev {
                self.terminal |= apply_chunk(payload, at, self.keep_text, self.api, rec)?;
            }
        }
        Ok(())
    }

    pub(super) fn finish(&mut self, rec: &mut RequestRecord) -> Result<(), StreamError> {
        let at = self.last_at;
        if self.api.is_pooling() {
            return finish_pooling(&self.body, self.api, at, rec);
        }
        if let Some(SseEvent::Data(payload)) = self.decoder.finish() {
            self.terminal |= apply_chunk(payload, at, self.keep_text, self.api, rec)?;
        }
        if rec.first_token.is_none() {
            return Err((
                ErrorKind::Truncated,
                "stream ended without any chunk with non-empty choices (no first token)".into(),
            ));
        }
        if self.api == Api::Responses && !self.terminal {
            return Err((
                ErrorKind::Truncated,
                "stream ended without response.completed (usage missing)".into(),
            ));
        }
        Ok(())
    }
}

/// Apply one SSE data payload, received at `at`, to the record (vLLM §2.1);
/// true when it was a Responses API terminal event.
fn apply_chunk(
    payload: &[u8],
    at: Duration,
    keep_text: bool,
    api: Api,
    rec: &mut RequestRecord,
) -> Result<bool, StreamError> {
    let parsed = match api {
        Api::Responses => openai::parse_response_event(payload),
        _ => openai::parse_chunk_ref(payload),
    };
    let chunk = parsed.map_err(|e| (ErrorKind::Protocol, format!("malformed chunk: {e}")))?;
    if let Some(msg) = chunk.error {
        return Err((
            ErrorKind::ServerError,
            format!("server error in stream: {msg}"),
        ));
    }
    if chunk.has_choices {
        match rec.last_token {
            None => rec.first_token = Some(at),
            Some(prev) => rec.itl.push(at.saturating_sub(prev)),
        }
        rec.last_token = Some(at);
        if chunk.reasoning {
            rec.reasoning_events += 1;
        }
        if rec.first_answer.is_none() && chunk.text.as_deref().is_some_and(|t| !t.is_empty()) {
            rec.first_answer = Some(at);
        }
        if keep_text {
            if let Some(t) = chunk.text {
                rec.generated_text.push_str(&t);
            }
        }
    }
    if chunk.timings.is_some() {
        rec.server_timings = chunk.timings.map(Box::new);
    }
    if let Some(u) = chunk.usage {
        if let Some(c) = u.completion_tokens {
            rec.output_tokens = c;
        }
        if let Some(p) = u.prompt_tokens {
            rec.prompt_len = p;
        }
        if u.reasoning_tokens.is_some() {
            rec.usage_reasoning_tokens = u.reasoning_tokens;
        }
    }
    Ok(chunk.terminal)
}

/// A pooling API's whole answer, whose last byte arrived at `at`: the
/// request's E2EL ends there (vLLM: `ttft = latency` = time to read the full
/// response). The prompt length becomes `usage.prompt_tokens`, 0 when the
/// server sent none (as vLLM does); nothing is generated. A body that is not
/// the endpoint's JSON answer is a `protocol` failure, an error object a
/// `server_error`.
fn finish_pooling(
    body: &[u8],
    api: Api,
    at: Duration,
    rec: &mut RequestRecord,
) -> Result<(), StreamError> {
    let reply = openai::parse_pooling_response(api, body).map_err(|e| match e {
        openai::PoolingError::Malformed(m) => {
            (ErrorKind::Protocol, format!("malformed response: {m}"))
        }
        openai::PoolingError::Server(m) => (ErrorKind::ServerError, format!("server error: {m}")),
    })?;
    rec.first_token = Some(at);
    rec.last_token = Some(at);
    rec.prompt_len = reply.prompt_tokens.unwrap_or(0);
    rec.output_tokens = 0;
    Ok(())
}

//! The Responses API's streamed events (`POST /v1/responses`), read into the
//! same [`ChunkRef`] as a completions chunk so one record-filling path serves
//! both. Token events are vLLM's (`response.output_text.delta`,
//! `response.reasoning_text.delta`) plus, as kneecap counts them, reasoning
//! summaries and tool-call argument deltas; `response.completed` /
//! `response.incomplete` end the stream and carry usage; `error` and
//! `response.failed` are failures. Other events are ignored. Sans-IO, no clock.

use super::chunk::{preview, ErrorMessage, LooseNum, LooseStr, NO_MESSAGE};
use super::{ChunkRef, Usage};
use serde::Deserialize;
use std::borrow::Cow;

/// Parse one Responses API SSE data payload. A payload that is not a JSON
/// object, or whose `type` is missing, is an `Err` (a `protocol` failure).
pub fn parse_response_event(data: &[u8]) -> Result<ChunkRef<'_>, String> {
    if data.trim_ascii_start().first() != Some(&b'{') {
        return Err(format!("event is not a JSON object: {}", preview(data)));
    }
    let raw: RawEvent<'_> =
        serde_json::from_slice(data).map_err(|e| format!("invalid event JSON: {e}"))?;
    let kind = raw
        .kind
        .and_then(|k| k.0)
        .ok_or_else(|| format!("event without a `type`: {}", preview(data)))?;
    let mut out = ChunkRef::default();
    match kind.as_ref() {
        "response.output_text.delta" => {
            out.has_choices = true;
            out.text = Some(raw.delta.and_then(|d| d.0).unwrap_or(Cow::Borrowed("")));
        }
        "response.reasoning_text.delta" | "response.reasoning_summary_text.delta" => {
            out.has_choices = true;
            out.reasoning = raw.delta.and_then(|d| d.0).is_some_and(|d| !d.is_empty());
        }
        "response.function_call_arguments.delta" => out.has_choices = true,
        "response.completed" | "response.incomplete" => {
            out.terminal = true;
            out.usage = raw.response.and_then(|r| r.usage).map(|u| Usage {
                prompt_tokens: u.input_tokens.as_u32(),
                completion_tokens: u.output_tokens.as_u32(),
                reasoning_tokens: u
                    .output_tokens_details
                    .and_then(|d| d.reasoning_tokens.as_u32()),
            });
        }
        "error" | "response.failed" => {
            let nested = raw.response.and_then(|r| r.error).map(|e| e.0);
            let message = raw
                .error
                .map(|e| e.0)
                .or(nested)
                .or(raw.message.and_then(|m| m.0));
            out.error = Some(message.unwrap_or(Cow::Borrowed(NO_MESSAGE)));
        }
        _ => {}
    }
    Ok(out)
}

#[derive(Deserialize)]
struct RawEvent<'a> {
    #[serde(default, borrow, rename = "type")]
    kind: Option<LooseStr<'a>>,
    #[serde(default, borrow)]
    delta: Option<LooseStr<'a>>,
    #[serde(default, borrow)]
    response: Option<RawResponse<'a>>,
    #[serde(default, borrow)]
    error: Option<ErrorMessage<'a>>,
    #[serde(default, borrow)]
    message: Option<LooseStr<'a>>,
}

#[derive(Deserialize)]
struct RawResponse<'a> {
    #[serde(default)]
    usage: Option<RawUsage>,
    #[serde(default, borrow)]
    error: Option<ErrorMessage<'a>>,
}

#[derive(Deserialize)]
struct RawUsage {
    #[serde(default)]
    input_tokens: LooseNum,
    #[serde(default)]
    output_tokens: LooseNum,
    #[serde(default)]
    output_tokens_details: Option<RawDetails>,
}

#[derive(Deserialize)]
struct RawDetails {
    #[serde(default)]
    reasoning_tokens: LooseNum,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(data: &str) -> ChunkRef<'_> {
        parse_response_event(data.as_bytes()).unwrap_or_else(|e| panic!("{data}: {e}"))
    }

    #[test]
    fn token_events_are_text_reasoning_and_tool_call_deltas() {
        let t = ok(
            r#"{"type":"response.output_text.delta","item_id":"m","output_index":0,"content_index":0,"delta":"Hi","sequence_number":4}"#,
        );
        assert!(t.has_choices && !t.reasoning && !t.terminal);
        assert_eq!(t.text.as_deref(), Some("Hi"));
        let r = ok(r#"{"type":"response.reasoning_text.delta","delta":"hmm"}"#);
        assert!(r.has_choices && r.reasoning);
        assert_eq!(r.text, None);
        let s = ok(r#"{"type":"response.reasoning_summary_text.delta","delta":"so"}"#);
        assert!(s.has_choices && s.reasoning);
        let f = ok(r#"{"type":"response.function_call_arguments.delta","delta":"{\"a\""}"#);
        assert!(f.has_choices && !f.reasoning && f.text.is_none());
    }

    #[test]
    fn lifecycle_events_are_not_token_events_and_completed_carries_usage() {
        for kind in [
            "response.created",
            "response.in_progress",
            "response.output_item.added",
            "response.output_text.done",
        ] {
            let e = ok(&format!(r#"{{"type":"{kind}","response":{{"id":"r"}}}}"#)).has_choices;
            assert!(!e, "{kind}");
        }
        let done = ok(
            r#"{"type":"response.completed","response":{"id":"r","status":"completed","usage":{"input_tokens":12,"output_tokens":60,"output_tokens_details":{"reasoning_tokens":50},"total_tokens":72}}}"#,
        );
        assert!(done.terminal && !done.has_choices);
        assert_eq!(
            done.usage,
            Some(Usage {
                prompt_tokens: Some(12),
                completion_tokens: Some(60),
                reasoning_tokens: Some(50),
            })
        );
        assert!(ok(r#"{"type":"response.incomplete","response":{}}"#).terminal);
    }

    #[test]
    fn failures_and_malformed_events() {
        let e = ok(r#"{"type":"error","code":"x","message":"overloaded"}"#);
        assert_eq!(e.error.as_deref(), Some("overloaded"));
        let f = ok(
            r#"{"type":"response.failed","response":{"error":{"code":"server_error","message":"boom"}}}"#,
        );
        assert_eq!(f.error.as_deref(), Some("boom"));
        for bad in ["[1]", "{\"delta\":\"x\"}", "{\"type\":", "null", ""] {
            assert!(parse_response_event(bad.as_bytes()).is_err(), "{bad}");
        }
    }
}

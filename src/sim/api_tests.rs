//! Unit tests of request parsing and chunk rendering.

use super::*;

fn parse(endpoint: Endpoint, body: &str) -> Result<GenRequest, ApiError> {
    parse_request(endpoint, body.as_bytes(), 4096)
}

#[test]
fn toy_tokenizer_counts_words_punctuation_and_long_words() {
    assert_eq!(count_text_tokens(""), 0);
    assert_eq!(count_text_tokens("hello world"), 2);
    assert_eq!(count_text_tokens("Hello, world!"), 4);
    assert_eq!(count_text_tokens("abcdefghijklm"), 3);
    assert_eq!(count_text_tokens("  a  b\n"), 2);
}

#[test]
fn completion_prompt_may_be_text_or_token_ids() {
    let r = parse(
        Endpoint::Completions,
        r#"{"prompt":"a b c","max_tokens":5}"#,
    )
    .unwrap();
    assert_eq!((r.prompt_tokens, r.max_tokens), (3, 5));
    let r = parse(
        Endpoint::Completions,
        r#"{"prompt":[1,2,3,4],"max_tokens":5}"#,
    )
    .unwrap();
    assert_eq!(r.prompt_tokens, 4);
    let r = parse(Endpoint::Completions, r#"{"prompt":[[1,2]]}"#).unwrap();
    assert_eq!((r.prompt_tokens, r.max_tokens), (2, 16));
}

#[test]
fn chat_content_may_be_a_string_or_parts_and_images_are_charged() {
    let body = r#"{"messages":[{"role":"system","content":"be brief"},
        {"role":"user","content":[{"type":"text","text":"hi there"},{"type":"image_url","image_url":{"url":"x"}}]}],
        "max_completion_tokens":7,"stream":true,"stream_options":{"include_usage":true},
        "ignore_eos":true,"temperature":0.5,"repetition_penalty":1.0,"logprobs":null}"#;
    let r = parse(Endpoint::Chat, body).unwrap();
    // 4 text tokens and an image whose size cannot be read (sim::images).
    let unknown = crate::sim::images::UNKNOWN_IMAGE_TOKENS;
    assert_eq!(r.prompt_tokens, 4 + unknown);
    assert_eq!((r.images.images, r.images.tokens), (1, unknown));
    assert_eq!(r.max_tokens, 7);
    assert!(r.stream && r.include_usage && r.ignore_eos);
    let r = parse(
        Endpoint::Chat,
        r#"{"messages":[{"role":"user","content":"x"}],"max_tokens":3}"#,
    )
    .unwrap();
    assert_eq!(r.max_tokens, 3);
}

#[test]
fn bad_requests_are_rejected_with_400() {
    for body in [
        "{not json",
        "[]",
        r#"{"max_tokens":5}"#,
        r#"{"prompt":"","max_tokens":5}"#,
        r#"{"prompt":"x","max_tokens":0}"#,
        r#"{"prompt":"x","max_tokens":-3}"#,
        r#"{"prompt":"x","max_tokens":"ten"}"#,
        r#"{"prompt":"x","max_tokens":1000000000000}"#,
        r#"{"prompt":"x","max_tokens":4096}"#,
        r#"{"prompt":{"a":1}}"#,
    ] {
        let err = parse(Endpoint::Completions, body).unwrap_err();
        assert_eq!(err.status, 400, "{body}");
        let v: Value = serde_json::from_str(&err.body()).unwrap();
        assert!(v["error"]["message"].is_string(), "{body}");
    }
    assert!(parse(Endpoint::Chat, r#"{"messages":[]}"#).is_err());
    assert!(parse(Endpoint::Chat, r#"{"prompt":"x"}"#).is_err());
}

#[test]
fn chunks_are_valid_json_in_sse_frames() {
    for endpoint in [Endpoint::Completions, Endpoint::Chat] {
        let ids = ResponseIds::new(endpoint, 1, 1_700_000_000, "m\"x");
        for ev in [
            ids.chunk_event(token_text(1), None, true),
            ids.chunk_event(token_text(2), Some("length"), false),
            ids.role_event(true),
            ids.usage_event(3, 4),
        ] {
            let payload = ev
                .strip_prefix("data: ")
                .unwrap()
                .strip_suffix("\n\n")
                .unwrap();
            let v: Value = serde_json::from_str(payload).unwrap();
            assert_eq!(v["model"], "m\"x");
        }
        let usage = ids.usage_event(3, 4);
        let v: Value = serde_json::from_str(&usage[6..usage.len() - 2]).unwrap();
        assert_eq!(v["choices"].as_array().unwrap().len(), 0);
        assert_eq!(v["usage"]["total_tokens"], 7);
        let full: Value = serde_json::from_str(&ids.full_response(" a b", "length", 3, 2)).unwrap();
        assert_eq!(full["usage"]["completion_tokens"], 2);
    }
}

#[test]
fn non_boolean_stream_or_ignore_eos_is_a_400_not_silently_false() {
    for body in [
        r#"{"prompt":"hi","stream":"yes"}"#,
        r#"{"prompt":"hi","ignore_eos":1}"#,
    ] {
        let err = parse(Endpoint::Completions, body).unwrap_err();
        assert_eq!(err.status, 400, "{body}");
        assert!(err.message.contains("must be a boolean"), "{}", err.message);
    }
    let r = parse(Endpoint::Completions, r#"{"prompt":"hi","stream":null}"#).unwrap();
    assert!(!r.stream);
}

#[test]
fn reasoning_events_put_text_in_the_reasoning_field_on_chat_only() {
    let json = |event: &str| -> Value {
        let data = event.strip_prefix("data: ").unwrap().trim_end();
        serde_json::from_str(data).unwrap()
    };
    let chat = ResponseIds::new(Endpoint::Chat, 1, 0, "m");
    for field in [ReasoningField::Reasoning, ReasoningField::ReasoningContent] {
        let v = json(&chat.reasoning_event(field, " hmm", None, true));
        let delta = &v["choices"][0]["delta"];
        assert_eq!(delta[field.key()], " hmm");
        assert!(delta.get("content").is_none(), "{delta}");
    }
    // Completions carry reasoning as plain text, as vLLM does.
    let cmpl = ResponseIds::new(Endpoint::Completions, 1, 0, "m");
    let v = json(&cmpl.reasoning_event(ReasoningField::Reasoning, " hmm", None, false));
    assert_eq!(v["choices"][0]["text"], " hmm");
    // Usage: reasoning tokens in completion_tokens_details.
    let v = json(&chat.usage_event_reasoning(3, 60, 50));
    assert_eq!(v["usage"]["completion_tokens"], 60);
    assert_eq!(
        v["usage"]["completion_tokens_details"]["reasoning_tokens"],
        50
    );
    assert_eq!(v["choices"].as_array().map(Vec::len), Some(0));
    assert_eq!(chat.usage_event_reasoning(3, 6, 0), chat.usage_event(3, 6));
}

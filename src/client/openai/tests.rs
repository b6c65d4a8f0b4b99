//! Tests for `openai.rs` (kept apart to keep the module short).
use super::*;
use crate::metrics::record::Timings;
use crate::workload::Prompt;
use serde_json::Value;
use std::borrow::Cow;

fn opts() -> BodyOptions {
    BodyOptions {
        model: "m".into(),
        ..BodyOptions::default()
    }
}

fn body(api: Api, opts: &BodyOptions, prompt: &Prompt, max: u32) -> String {
    String::from_utf8(request_body(api, opts, prompt, max)).unwrap_or_default()
}

fn text(s: &str) -> Prompt {
    Prompt::Text(s.to_owned())
}

fn extra(json: &str) -> Option<serde_json::Map<String, Value>> {
    match serde_json::from_str(json) {
        Ok(Value::Object(map)) => Some(map),
        other => panic!("bad test input: {other:?}"),
    }
}

/// Every body option set, extra body overriding some of them.
fn full_options() -> BodyOptions {
    BodyOptions {
        model: "served".into(),
        ignore_eos: true,
        sampling: vec![
            ("temperature".into(), Value::from(0.5)),
            ("top_k".into(), Value::from(20)),
            ("repetition_penalty".into(), Value::from(1.1)),
        ],
        logprobs: Some(3),
        extra_body: extra(r#"{"top_k": 5, "min_tokens": 10, "stream": false}"#),
        lora: None,
    }
}

#[test]
fn completion_request_bodies_match_vllm_key_order() {
    let cases: Vec<(&str, Api, BodyOptions, Prompt, u32, &str)> = vec![
        (
            "completions, defaults",
            Api::Completions,
            opts(),
            text("hi \"there\"\n"),
            16,
            r#"{"model":"m","prompt":"hi \"there\"\n","repetition_penalty":1.0,"max_tokens":16,"logprobs":null,"stream":true,"stream_options":{"include_usage":true}}"#,
        ),
        (
            "completions, token ids",
            Api::Completions,
            opts(),
            Prompt::Tokens(vec![1, 22, 333]),
            4,
            r#"{"model":"m","prompt":[1,22,333],"repetition_penalty":1.0,"max_tokens":4,"logprobs":null,"stream":true,"stream_options":{"include_usage":true}}"#,
        ),
        (
            "completions, everything set",
            Api::Completions,
            full_options(),
            text("p"),
            8,
            r#"{"model":"served","prompt":"p","repetition_penalty":1.1,"max_tokens":8,"logprobs":3,"stream":false,"stream_options":{"include_usage":true},"ignore_eos":true,"temperature":0.5,"top_k":5,"min_tokens":10}"#,
        ),
        (
            "extra body overrides model, max_tokens and stream_options",
            Api::Completions,
            BodyOptions {
                extra_body: extra(
                    r#"{"model":"x","max_tokens":1,"stream_options":{"include_usage":false,"continuous_usage_stats":true}}"#,
                ),
                ..opts()
            },
            text(""),
            9,
            r#"{"model":"x","prompt":"","repetition_penalty":1.0,"max_tokens":1,"logprobs":null,"stream":true,"stream_options":{"include_usage":false,"continuous_usage_stats":true}}"#,
        ),
    ];
    for (name, api, opts, prompt, max, want) in cases {
        assert_eq!(body(api, &opts, &prompt, max), want, "{name}");
    }
}

#[test]
fn chat_request_bodies_match_vllm_key_order() {
    let cases: Vec<(&str, Api, BodyOptions, Prompt, u32, &str)> = vec![
        (
            "chat, defaults",
            Api::Chat,
            opts(),
            text("héllo"),
            32,
            r#"{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"héllo"}]}],"max_completion_tokens":32,"stream":true,"stream_options":{"include_usage":true}}"#,
        ),
        (
            "chat, everything set",
            Api::Chat,
            full_options(),
            text("p"),
            8,
            r#"{"model":"served","messages":[{"role":"user","content":[{"type":"text","text":"p"}]}],"max_completion_tokens":8,"stream":false,"stream_options":{"include_usage":true},"ignore_eos":true,"temperature":0.5,"top_k":5,"repetition_penalty":1.1,"min_tokens":10}"#,
        ),
        (
            "chat, token ids become text",
            Api::Chat,
            opts(),
            Prompt::Tokens(vec![7, 8, 9]),
            1,
            r#"{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"7 8 9"}]}],"max_completion_tokens":1,"stream":true,"stream_options":{"include_usage":true}}"#,
        ),
        (
            "null in extra body removes the key",
            Api::Chat,
            BodyOptions {
                extra_body: extra(r#"{"stream_options":null,"absent":null,"n":1}"#),
                ..opts()
            },
            text("q"),
            2,
            r#"{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"q"}]}],"max_completion_tokens":2,"stream":true,"n":1}"#,
        ),
    ];
    for (name, api, opts, prompt, max, want) in cases {
        assert_eq!(body(api, &opts, &prompt, max), want, "{name}");
    }
}

fn ok(data: &str) -> ChunkInfo {
    match parse_chunk(data.as_bytes()) {
        Ok(info) => info,
        Err(e) => panic!("{data}: {e}"),
    }
}

fn usage(prompt: u32, completion: u32) -> Option<Usage> {
    Some(Usage {
        prompt_tokens: Some(prompt),
        completion_tokens: Some(completion),
        reasoning_tokens: None,
    })
}

fn token(text: Option<&str>) -> ChunkInfo {
    ChunkInfo {
        has_choices: true,
        text: text.map(str::to_owned),
        ..ChunkInfo::default()
    }
}

#[test]
fn parses_token_and_usage_chunks_from_known_servers() {
    let cases: Vec<(&str, &str, ChunkInfo)> = vec![
        (
            "vllm completions token",
            r#"{"id":"cmpl-1","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":" Hello","logprobs":null,"finish_reason":null,"stop_reason":null}],"usage":null}"#,
            token(Some(" Hello")),
        ),
        (
            "vllm completions usage-only final chunk",
            r#"{"id":"cmpl-1","object":"text_completion","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":5,"total_tokens":7,"completion_tokens":2}}"#,
            ChunkInfo {
                usage: usage(5, 2),
                ..ChunkInfo::default()
            },
        ),
        (
            "chat role chunk with null content",
            r#"{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":null},"logprobs":null,"finish_reason":null}]}"#,
            token(None),
        ),
        (
            "chat role chunk with empty content",
            r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}"#,
            token(Some("")),
        ),
        (
            "chat content with escapes",
            r#"{"choices":[{"index":0,"delta":{"content":"a\n\"b\" \u00e9"}}],"usage":null}"#,
            token(Some("a\n\"b\" é")),
        ),
        (
            "chat delta without content (reasoning)",
            r#"{"choices":[{"index":0,"delta":{"reasoning_content":"hm"}}]}"#,
            ChunkInfo {
                reasoning: true,
                ..token(None)
            },
        ),
        (
            "chat usage-only final chunk",
            r#"{"id":"c","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}"#,
            ChunkInfo {
                usage: usage(3, 1),
                ..ChunkInfo::default()
            },
        ),
        (
            "only the first choice is read",
            r#"{"choices":[{"text":"a"},{"text":"b"},7,null]}"#,
            token(Some("a")),
        ),
        (
            "llama.cpp final chunk: token event and usage and timings",
            r#"{"choices":[{"text":"","index":0,"logprobs":null,"finish_reason":"length"}],"created":1,"model":"m","system_fingerprint":"b1","object":"text_completion","id":"x","usage":{"completion_tokens":16,"prompt_tokens":4,"total_tokens":20},"timings":{"cache_n":0,"prompt_n":4,"prompt_ms":1.5,"prompt_per_token_ms":0.375,"prompt_per_second":2666.6,"predicted_n":16,"predicted_ms":120.25,"predicted_per_token_ms":7.5,"predicted_per_second":133.0}}"#,
            ChunkInfo {
                has_choices: true,
                text: Some(String::new()),
                usage: usage(4, 16),
                timings: Some(Timings {
                    cache_n: Some(0),
                    prompt_n: Some(4),
                    prompt_ms: Some(1.5),
                    predicted_n: Some(16),
                    predicted_ms: Some(120.25),
                }),
                ..ChunkInfo::default()
            },
        ),
    ];
    for (name, data, want) in cases {
        assert_eq!(ok(data), want, "{name}");
    }
}

#[test]
fn parses_odd_and_error_chunks_from_known_servers() {
    let cases: Vec<(&str, &str, ChunkInfo)> = vec![
        (
            "usage with missing and odd fields",
            r#"{"usage":{"completion_tokens":"3","prompt_tokens":-1}}"#,
            ChunkInfo {
                usage: Some(Usage::default()),
                ..ChunkInfo::default()
            },
        ),
        ("empty object", "{}", ChunkInfo::default()),
        (
            "null choices",
            r#"{"choices":null,"usage":null}"#,
            ChunkInfo::default(),
        ),
        (
            "openai error object",
            r#"{"error":{"message":"Rate limit","type":"rate_limit_error","param":null,"code":429}}"#,
            ChunkInfo {
                error: Some("Rate limit".into()),
                ..ChunkInfo::default()
            },
        ),
        (
            "error object without message uses its type",
            r#"{"error":{"type":"server_error","code":500}}"#,
            ChunkInfo {
                error: Some("server_error".into()),
                ..ChunkInfo::default()
            },
        ),
        (
            "error string",
            r#"{"error":"boom"}"#,
            ChunkInfo {
                error: Some("boom".into()),
                ..ChunkInfo::default()
            },
        ),
        (
            "null error is no error",
            r#"{"error":null,"choices":[]}"#,
            ChunkInfo::default(),
        ),
        (
            "vllm error response",
            r#"{"object":"error","message":"max_tokens is too large","type":"BadRequestError","param":null,"code":400}"#,
            ChunkInfo {
                error: Some("max_tokens is too large".into()),
                ..ChunkInfo::default()
            },
        ),
        (
            "a top-level message alone is not an error",
            r#"{"object":"text_completion","message":"hi"}"#,
            ChunkInfo::default(),
        ),
    ];
    for (name, data, want) in cases {
        assert_eq!(ok(data), want, "{name}");
    }
}

#[test]
fn reasoning_deltas_are_told_apart_from_answer_text() {
    let reasoning = |text: Option<&str>| ChunkInfo {
        reasoning: true,
        ..token(text)
    };
    let cases: Vec<(&str, &str, ChunkInfo)> = vec![
        (
            "vLLM: delta.reasoning",
            r#"{"choices":[{"index":0,"delta":{"reasoning":" hmm"},"finish_reason":null}]}"#,
            reasoning(None),
        ),
        (
            "DeepSeek / llama.cpp: delta.reasoning_content, content null",
            r#"{"choices":[{"index":0,"delta":{"content":null,"reasoning_content":"Okay"}}]}"#,
            reasoning(None),
        ),
        (
            "an empty reasoning string is not reasoning",
            r#"{"choices":[{"delta":{"content":"Hi","reasoning_content":""}}]}"#,
            token(Some("Hi")),
        ),
        (
            "a reasoning field of another type is ignored",
            r#"{"choices":[{"delta":{"reasoning":{"x":1},"content":"a"}}]}"#,
            token(Some("a")),
        ),
        (
            "usage with completion_tokens_details",
            r#"{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":60,"completion_tokens_details":{"reasoning_tokens":50}}}"#,
            ChunkInfo {
                usage: Some(Usage {
                    reasoning_tokens: Some(50),
                    ..usage(3, 60).unwrap()
                }),
                ..ChunkInfo::default()
            },
        ),
        (
            "usage with null details",
            r#"{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":60,"completion_tokens_details":null}}"#,
            ChunkInfo {
                usage: usage(3, 60),
                ..ChunkInfo::default()
            },
        ),
    ];
    for (name, data, want) in cases {
        assert_eq!(ok(data), want, "{name}");
    }
}

#[test]
fn unescaped_text_is_borrowed() {
    let data = br#"{"choices":[{"text":"plain"}]}"#;
    let chunk = parse_chunk_ref(data).unwrap_or_default();
    assert!(matches!(chunk.text, Some(Cow::Borrowed("plain"))));
    let data = br#"{"choices":[{"delta":{"content":"a\tb"}}]}"#;
    let chunk = parse_chunk_ref(data).unwrap_or_default();
    assert_eq!(chunk.text.as_deref(), Some("a\tb"));
}

#[test]
fn rejects_garbage() {
    let cases: &[&[u8]] = &[
        b"",
        b"   ",
        b"[DONE]",
        b"[]",
        b"null",
        b"42",
        b"\"text\"",
        b"{",
        b"{\"choices\":[{\"text\":\"a\"}]",
        b"{\"choices\":[]} x",
        b"{\"choices\":{\"text\":\"a\"}}",
        b"{\"choices\":[1]}",
        b"{\"choices\":[{\"text\":\"\xff\"}]}",
        b"\xEF\xBB\xBF{}",
    ];
    for data in cases {
        let got = parse_chunk(data);
        assert!(
            got.is_err(),
            "{:?} parsed as {got:?}",
            String::from_utf8_lossy(data)
        );
    }
    let err = parse_chunk(b"<html>502 Bad Gateway</html>").unwrap_err();
    assert!(err.starts_with("chunk is not a JSON object"), "{err}");
}

#[test]
fn lora_modules_replace_the_model_round_robin_or_seeded_random() {
    let model_of = |opts: &BodyOptions, index: usize| -> String {
        let b = request_body_for(Api::Completions, opts, &text("q"), 1, index);
        let v: Value = serde_json::from_slice(&b).unwrap();
        v["model"].as_str().unwrap_or_default().to_owned()
    };
    let mut plan = LoraPlan {
        names: vec!["a".into(), "b".into(), "c".into()],
        round_robin: true,
        seed: 0,
    };
    let with = |plan: &LoraPlan| BodyOptions {
        lora: Some(plan.clone()),
        ..opts()
    };
    let rr: Vec<String> = (0..6).map(|i| model_of(&with(&plan), i)).collect();
    assert_eq!(rr, ["a", "b", "c", "a", "b", "c"]);
    plan.round_robin = false;
    let random: Vec<String> = (0..300).map(|i| model_of(&with(&plan), i)).collect();
    for name in ["a", "b", "c"] {
        let n = random.iter().filter(|m| *m == name).count();
        assert!((60..=140).contains(&n), "{name} chosen {n} of 300 times");
    }
    let again: Vec<String> = (0..300).map(|i| model_of(&with(&plan), i)).collect();
    assert_eq!(random, again, "the same seed gives the same choices");
    plan.seed = 1;
    let other: Vec<String> = (0..300).map(|i| model_of(&with(&plan), i)).collect();
    assert_ne!(random, other, "another seed, other choices");
    assert_eq!(model_of(&opts(), 7), "m", "no LoRA: the served model");
}

/// The pooling bodies, byte for byte as vLLM 0.33's request functions build
/// them (`endpoint_request_func.py`): no sampling keys, no `stream`;
/// `truncate_prompt_tokens: -1`; rerank takes neither `ignore_eos` nor
/// `--extra-body`.
#[test]
fn pooling_request_bodies_match_vllm() {
    let batch = |v: &[&str]| Prompt::Batch(v.iter().map(|s| s.to_string()).collect());
    let opts = full_options();
    let plain = self::opts();
    let cases: Vec<(Api, &BodyOptions, Prompt, &str)> = vec![
        (
            Api::Embeddings,
            &plain,
            text("hi"),
            r#"{"model":"m","input":"hi","truncate_prompt_tokens":-1}"#,
        ),
        (
            Api::Embeddings,
            &opts,
            batch(&["a", "b"]),
            r#"{"model":"served","input":["a","b"],"truncate_prompt_tokens":-1,"ignore_eos":true,"top_k":5,"min_tokens":10,"stream":false}"#,
        ),
        (
            Api::Pooling,
            &plain,
            text("hi"),
            r#"{"model":"m","truncate_prompt_tokens":-1,"input":"hi"}"#,
        ),
        (
            Api::Rerank,
            &opts,
            batch(&["q", "d1", "d2"]),
            r#"{"model":"served","query":"q","documents":["d1","d2"],"truncate_prompt_tokens":-1}"#,
        ),
    ];
    for (api, o, prompt, want) in cases {
        assert_eq!(body(api, o, &prompt, 16), want, "{api:?}");
    }
    assert_eq!(input_sequences(Api::Rerank, &batch(&["q", "d1", "d2"])), 2);
    assert_eq!(
        input_sequences(Api::Embeddings, &batch(&["a", "b", "c"])),
        3
    );
    assert_eq!(input_sequences(Api::Embeddings, &text("a")), 1);
}

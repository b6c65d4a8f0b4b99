//! Property tests for the sans-IO protocol layer: the SSE decoder and the
//! OpenAI chunk / body code never panic, and decoding does not depend on how
//! the byte stream was cut into reads.

use kneecap::client::openai::{parse_chunk, parse_models, request_body, Api, BodyOptions};
use kneecap::client::sse::{SseDecoder, SseEvent};
use kneecap::workload::Prompt;
use proptest::prelude::*;
use serde_json::{json, Value};

/// An owned event, comparable across decoders.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Ev {
    Data(Vec<u8>),
    Done,
}

fn own(e: SseEvent<'_>) -> Ev {
    match e {
        SseEvent::Data(d) => Ev::Data(d.to_vec()),
        SseEvent::Done => Ev::Done,
    }
}

/// Decode `input` cut at the given offsets (any order, any values).
fn decode_cut(strict: bool, input: &[u8], cuts: &[usize]) -> Vec<Ev> {
    let mut dec = if strict {
        SseDecoder::strict()
    } else {
        SseDecoder::new()
    };
    let mut cuts: Vec<usize> = cuts.iter().map(|c| c % (input.len() + 1)).collect();
    cuts.sort_unstable();
    let mut out = Vec::new();
    let mut from = 0;
    for cut in cuts.into_iter().chain([input.len()]) {
        dec.feed(&input[from..cut]);
        from = cut;
        while let Some(e) = dec.next_event() {
            out.push(own(e));
        }
    }
    while let Some(e) = dec.finish() {
        out.push(own(e));
    }
    out
}

/// Byte strings made of SSE-significant pieces, so that line endings, field
/// names, braces and escapes meet each other far more often than in random bytes.
fn sse_like() -> impl Strategy<Value = Vec<u8>> {
    let piece = prop_oneof![
        Just(&b"data:"[..]),
        Just(&b"data: "[..]),
        Just(&b"event: error"[..]),
        Just(&b": ping"[..]),
        Just(&b":"[..]),
        Just(&b"\n"[..]),
        Just(&b"\r"[..]),
        Just(&b"\r\n"[..]),
        Just(&b"\n\n"[..]),
        Just(&b"{"[..]),
        Just(&b"}"[..]),
        Just(&b"["[..]),
        Just(&b"]"[..]),
        Just(&b"\""[..]),
        Just(&b"\\"[..]),
        Just(&b"[DONE]"[..]),
        Just(&b"\xEF\xBB\xBF"[..]),
        Just(&b"\xEF"[..]),
        Just(&b" "[..]),
        Just(&b"a"[..]),
        Just(&b"{\"choices\":[{\"text\":\"x\"}]}"[..]),
    ];
    prop::collection::vec(piece, 0..40).prop_map(|pieces| pieces.concat())
}

proptest! {
    // 512 cases in every test run; scripts/fuzz.sh sets KNEECAP_FUZZ_CASES
    // for a long run.
    #![proptest_config(ProptestConfig::with_cases(fuzz_cases()))]

    #[test]
    fn decoder_is_split_invariant_on_arbitrary_bytes(
        input in prop::collection::vec(any::<u8>(), 0..300),
        cuts in prop::collection::vec(any::<usize>(), 0..8),
        strict in any::<bool>(),
    ) {
        let whole = decode_cut(strict, &input, &[]);
        prop_assert_eq!(decode_cut(strict, &input, &cuts), whole);
    }

    #[test]
    fn decoder_is_split_invariant_on_sse_like_bytes(
        input in sse_like(),
        cuts in prop::collection::vec(any::<usize>(), 0..8),
        strict in any::<bool>(),
    ) {
        let whole = decode_cut(strict, &input, &[]);
        prop_assert_eq!(&decode_cut(strict, &input, &cuts), &whole);
        let all: Vec<usize> = (0..input.len()).collect();
        prop_assert_eq!(&decode_cut(strict, &input, &all), &whole);
    }

    #[test]
    fn encoded_payloads_round_trip(
        payloads in prop::collection::vec(
            prop::collection::vec("[a-z {}\"\\\\:]{0,12}", 1..4), 0..6),
        endings in prop::collection::vec(0usize..3, 64),
        comments in prop::collection::vec(any::<bool>(), 64),
        cuts in prop::collection::vec(any::<usize>(), 0..6),
    ) {
        let mut input = Vec::new();
        let mut want = Vec::new();
        let mut k = 0;
        let end = |input: &mut Vec<u8>, k: &mut usize| {
            // A lone `\n` right after a lone `\r` would be one CRLF ending.
            let mut ending = endings[*k % 64];
            if ending == 0 && input.last() == Some(&b'\r') {
                ending = 2;
            }
            input.extend_from_slice([&b"\n"[..], b"\r\n", b"\r"][ending]);
            *k += 1;
        };
        for lines in &payloads {
            if comments[k % 64] {
                input.extend_from_slice(b": keep-alive");
                end(&mut input, &mut k);
            }
            for line in lines {
                input.extend_from_slice(b"data: ");
                input.extend_from_slice(line.as_bytes());
                end(&mut input, &mut k);
            }
            end(&mut input, &mut k);
            let joined = lines.join("\n");
            if !joined.is_empty() {
                want.push(Ev::Data(joined.into_bytes()));
            }
        }
        prop_assert_eq!(decode_cut(true, &input, &cuts), want);
    }

    #[test]
    fn json_events_round_trip_with_early_dispatch(
        texts in prop::collection::vec(any::<String>(), 0..6),
        single_newline in any::<bool>(),
        cuts in prop::collection::vec(any::<usize>(), 0..6),
    ) {
        let mut input = Vec::new();
        let mut want = Vec::new();
        for text in &texts {
            let chunk = json!({"choices": [{"index": 0, "text": text}], "usage": null});
            let payload = serde_json::to_vec(&chunk).unwrap_or_default();
            input.extend_from_slice(b"data: ");
            input.extend_from_slice(&payload);
            // Servers that end events with one newline still decode.
            input.extend_from_slice(if single_newline { b"\n" } else { b"\n\n" });
            want.push(Ev::Data(payload));
        }
        input.extend_from_slice(b"data: [DONE]");
        want.push(Ev::Done);
        prop_assert_eq!(decode_cut(false, &input, &cuts), want);
    }

    #[test]
    fn parse_chunk_never_panics(data in prop::collection::vec(any::<u8>(), 0..200)) {
        let _ = parse_chunk(&data);
        let _ = parse_models(&data);
    }

    #[test]
    fn parse_chunk_never_panics_on_json_like_input(input in sse_like()) {
        let _ = parse_chunk(&input);
    }

    #[test]
    fn chunk_text_round_trips(text in any::<String>(), chat in any::<bool>(), n in any::<u32>()) {
        let chunk = if chat {
            json!({"choices": [{"delta": {"content": text}}], "usage": {"completion_tokens": n}})
        } else {
            json!({"choices": [{"text": text}], "usage": {"completion_tokens": n}})
        };
        let info = parse_chunk(&serde_json::to_vec(&chunk).unwrap_or_default());
        let info = info.map_err(TestCaseError::fail)?;
        prop_assert!(info.has_choices);
        prop_assert_eq!(info.text, Some(text));
        prop_assert_eq!(info.usage.and_then(|u| u.completion_tokens), Some(n));
    }

    #[test]
    fn request_body_is_valid_json_with_the_prompt(
        text in any::<String>(),
        chat in any::<bool>(),
        max in any::<u32>(),
    ) {
        let opts = BodyOptions { model: "m".into(), ..BodyOptions::default() };
        let api = if chat { Api::Chat } else { Api::Completions };
        let body = request_body(api, &opts, &Prompt::Text(text.clone()), max);
        let value: Value = serde_json::from_slice(&body).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let (prompt, max_key) = if chat {
            (&value["messages"][0]["content"][0]["text"], "max_completion_tokens")
        } else {
            (&value["prompt"], "max_tokens")
        };
        prop_assert_eq!(prompt, &Value::String(text));
        prop_assert_eq!(&value[max_key], &json!(max));
        prop_assert_eq!(&value["stream"], &json!(true));
    }
}

/// Cases per property: 512, or `KNEECAP_FUZZ_CASES` for a long fuzz run.
fn fuzz_cases() -> u32 {
    std::env::var("KNEECAP_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(512)
}

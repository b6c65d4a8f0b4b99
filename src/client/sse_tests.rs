//! Tests for `sse.rs` (kept apart to keep the module short).
use super::*;

/// An owned copy of an event, for comparing across decoders.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Ev {
    Data(String),
    Done,
}

fn own(e: SseEvent<'_>) -> Ev {
    match e {
        SseEvent::Data(d) => Ev::Data(String::from_utf8_lossy(d).into_owned()),
        SseEvent::Done => Ev::Done,
    }
}

fn d(s: &str) -> Ev {
    Ev::Data(s.to_owned())
}

fn drain(dec: &mut SseDecoder, out: &mut Vec<Ev>) {
    while let Some(e) = dec.next_event() {
        out.push(own(e));
    }
}

fn finish(dec: &mut SseDecoder, out: &mut Vec<Ev>) {
    while let Some(e) = dec.finish() {
        out.push(own(e));
    }
}

/// Decode `input` fed in the given pieces.
fn decode_pieces(mut dec: SseDecoder, pieces: &[&[u8]]) -> Vec<Ev> {
    let mut out = Vec::new();
    for p in pieces {
        dec.feed(p);
        drain(&mut dec, &mut out);
    }
    finish(&mut dec, &mut out);
    out
}

fn decode(input: &[u8]) -> Vec<Ev> {
    decode_pieces(SseDecoder::new(), &[input])
}

fn decode_strict(input: &[u8]) -> Vec<Ev> {
    decode_pieces(SseDecoder::strict(), &[input])
}

#[test]
fn decodes_table_of_streams() {
    let cases: &[(&str, &[u8], Vec<Ev>)] = &[
        ("single event", b"data: {\"a\":1}\n\n", vec![d("{\"a\":1}")]),
        ("no space after colon", b"data:{}\n\n", vec![d("{}")]),
        ("only one space stripped", b"data:  x\n\n", vec![d(" x")]),
        ("done", b"data: [DONE]\n\n", vec![Ev::Done]),
        ("done with spaces", b"data: [DONE]  \n\n", vec![Ev::Done]),
        (
            "crlf",
            b"data: a\r\n\r\ndata: b\r\n\r\n",
            vec![d("a"), d("b")],
        ),
        ("cr only", b"data: a\r\rdata: b\r\r", vec![d("a"), d("b")]),
        (
            "mixed endings",
            b"data: a\r\n\ndata: b\n\r\n",
            vec![d("a"), d("b")],
        ),
        ("comment skipped", b": ping\n\ndata: a\n\n", vec![d("a")]),
        ("comment inside event", b"data: a\n: ping\n\n", vec![d("a")]),
        (
            "multi-line data",
            b"data: a\ndata: b\ndata:\n\n",
            vec![d("a\nb\n")],
        ),
        (
            "other fields ignored",
            b"event: message\nid: 7\nretry: 10\nfoo: bar\ndata: a\n\n",
            vec![d("a")],
        ),
        ("field without colon", b"data\ndata: a\n\n", vec![d("\na")]),
        (
            "event without data skipped",
            b"event: x\nid: 1\n\n\n\n",
            vec![],
        ),
        ("empty data skipped", b"data:\n\ndata: \n\n", vec![]),
        ("unknown field named like data", b"datax: a\n\n", vec![]),
        ("bom skipped", b"\xEF\xBB\xBFdata: a\n\n", vec![d("a")]),
        (
            "bom only at start",
            b"data: a\n\n\xEF\xBB\xBFdata: b\n\n",
            vec![d("a")],
        ),
        (
            "missing final blank line",
            b"data: a\n\ndata: b",
            vec![d("a"), d("b")],
        ),
        (
            "missing final blank line after lf",
            b"data: b\n",
            vec![d("b")],
        ),
        ("trailing cr at eof", b"data: b\r", vec![d("b")]),
        ("empty stream", b"", vec![]),
        ("only keepalives", b": a\n\n: b\r\n\r\n", vec![]),
        (
            "json dispatched without blank line",
            b"data: {\"a\":1}\ndata: {\"b\":2}\n\n",
            vec![d("{\"a\":1}"), d("{\"b\":2}")],
        ),
        (
            "incomplete json waits for more lines",
            b"data: {\"a\":\ndata: 1}\n\n",
            vec![d("{\"a\":\n1}")],
        ),
        (
            "braces in strings do not count",
            b"data: {\"a\":\"}\"\ndata: }\n\n",
            vec![d("{\"a\":\"}\"\n}")],
        ),
    ];
    for (name, input, want) in cases {
        assert_eq!(&decode(input), want, "case {name}");
    }
}

#[test]
fn strict_mode_joins_complete_json_lines() {
    let input = b"data: {\"a\":1}\ndata: {\"b\":2}\n\n";
    assert_eq!(decode_strict(input), vec![d("{\"a\":1}\n{\"b\":2}")]);
}

#[test]
fn complete_payload_check() {
    let cases: &[(&[u8], bool)] = &[
        (b"[DONE]", true),
        (b" [DONE] ", true),
        (b"{}", true),
        (b"{\"a\":[1,{\"b\":\"}\\\"\"}]}", true),
        (b"{\"a\":1", false),
        (b"{\"a\":1}}", false),
        (b"{} x", false),
        (b"[1]", false),
        (b"", false),
        (b"{\"a\":\"\\\\\"}", true),
    ];
    for (input, want) in cases {
        assert_eq!(
            is_complete_payload(input),
            *want,
            "{}",
            String::from_utf8_lossy(input)
        );
    }
}

const VLLM_COMPLETIONS: &[u8] = b"data: {\"id\":\"cmpl-1\",\"object\":\"text_completion\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"text\":\" Hello\",\"logprobs\":null,\"finish_reason\":null}],\"usage\":null}\n\n\
data: {\"id\":\"cmpl-1\",\"object\":\"text_completion\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"text\":\" world\",\"logprobs\":null,\"finish_reason\":\"length\"}],\"usage\":null}\n\n\
data: {\"id\":\"cmpl-1\",\"object\":\"text_completion\",\"created\":1,\"model\":\"m\",\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"total_tokens\":7,\"completion_tokens\":2}}\n\n\
data: [DONE]\n\n";

const VLLM_CHAT: &[u8] = b"data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"finish_reason\":null}]}\n\n\
data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\\n\\\"there\\\"\"},\"finish_reason\":null}]}\n\n\
data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":1}}\n\n\
data: [DONE]\n\n";

const LLAMA_CPP: &[u8] = b"data: {\"choices\":[{\"text\":\"a\",\"index\":0,\"logprobs\":null,\"finish_reason\":null}],\"object\":\"text_completion\"}\n\n\
data: {\"choices\":[{\"text\":\"\",\"index\":0,\"logprobs\":null,\"finish_reason\":\"length\"}],\"object\":\"text_completion\",\"usage\":{\"completion_tokens\":1,\"prompt_tokens\":4,\"total_tokens\":5},\"timings\":{\"prompt_n\":4,\"prompt_ms\":1.5,\"predicted_n\":1,\"predicted_ms\":2.25}}\n\n\
data: [DONE]\n\n";

const KEEPALIVES_CRLF: &[u8] = b"\xEF\xBB\xBF: keep-alive\r\n\r\nevent: message\r\ndata: {\"x\":1}\r\n\r\n:\r\n\r\ndata: line1\r\ndata: line2\r\n\r\nid: 3\r\n\r\ndata: [DONE]\r\n\r\n";

const MULTILINE_UNTERMINATED: &[u8] =
    b"data: {\"a\":\ndata: [1,\rdata: 2]}\n\ndata: tail\r\ndata: more";

fn representative_streams() -> Vec<(&'static str, &'static [u8], Vec<Ev>)> {
    vec![
        (
            "vllm completions",
            VLLM_COMPLETIONS,
            vec![
                d("{\"id\":\"cmpl-1\",\"object\":\"text_completion\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"text\":\" Hello\",\"logprobs\":null,\"finish_reason\":null}],\"usage\":null}"),
                d("{\"id\":\"cmpl-1\",\"object\":\"text_completion\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"text\":\" world\",\"logprobs\":null,\"finish_reason\":\"length\"}],\"usage\":null}"),
                d("{\"id\":\"cmpl-1\",\"object\":\"text_completion\",\"created\":1,\"model\":\"m\",\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"total_tokens\":7,\"completion_tokens\":2}}"),
                Ev::Done,
            ],
        ),
        ("vllm chat", VLLM_CHAT, {
            let mut v: Vec<Ev> = Vec::new();
            for line in std::str::from_utf8(VLLM_CHAT).unwrap_or("").split("\n\n") {
                if let Some(p) = line.strip_prefix("data: ") {
                    v.push(if p == "[DONE]" { Ev::Done } else { d(p) });
                }
            }
            assert_eq!(v.len(), 4);
            v
        }),
        ("llama.cpp", LLAMA_CPP, {
            let mut v: Vec<Ev> = Vec::new();
            for line in std::str::from_utf8(LLAMA_CPP).unwrap_or("").split("\n\n") {
                if let Some(p) = line.strip_prefix("data: ") {
                    v.push(if p == "[DONE]" { Ev::Done } else { d(p) });
                }
            }
            assert_eq!(v.len(), 3);
            v
        }),
        (
            "keep-alives, bom and crlf",
            KEEPALIVES_CRLF,
            vec![d("{\"x\":1}"), d("line1\nline2"), Ev::Done],
        ),
        (
            "multi-line data, missing final blank line",
            MULTILINE_UNTERMINATED,
            vec![d("{\"a\":\n[1,\n2]}"), d("tail\nmore")],
        ),
    ]
}

#[test]
fn representative_streams_decode_whole() {
    for (name, input, want) in representative_streams() {
        assert_eq!(decode(input), want, "{name}");
        assert_eq!(decode_strict(input), want, "{name} (strict)");
    }
}

#[test]
fn split_at_every_offset_gives_same_events() {
    for (name, input, want) in representative_streams() {
        for strict in [false, true] {
            let new = || {
                if strict {
                    SseDecoder::strict()
                } else {
                    SseDecoder::new()
                }
            };
            for cut in 0..=input.len() {
                let got = decode_pieces(new(), &[&input[..cut], &input[cut..]]);
                assert_eq!(got, want, "{name}: split at {cut}, strict {strict}");
            }
            for cut1 in (0..=input.len()).step_by(7) {
                for cut2 in cut1..=input.len() {
                    let pieces = [&input[..cut1], &input[cut1..cut2], &input[cut2..]];
                    let got = decode_pieces(new(), &pieces);
                    assert_eq!(got, want, "{name}: split at {cut1},{cut2}");
                }
            }
            let bytes: Vec<&[u8]> = input.chunks(1).collect();
            assert_eq!(decode_pieces(new(), &bytes), want, "{name}: byte by byte");
        }
    }
}

#[test]
fn single_line_events_are_borrowed_from_the_buffer() {
    let mut dec = SseDecoder::new();
    dec.feed(b"data: abc\n\n");
    let buf_range = dec.buf.as_ptr_range();
    match dec.next_event() {
        Some(SseEvent::Data(d)) => {
            assert!(buf_range.contains(&d.as_ptr()));
            assert_eq!(d, b"abc");
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn consumed_bytes_are_dropped_lazily() {
    let mut dec = SseDecoder::new();
    let mut n = 0;
    for _ in 0..1000 {
        dec.feed(b"data: {\"a\":1}\n\ndata: {\"b\"");
        while dec.next_event().is_some() {
            n += 1;
        }
        dec.feed(b":2}\n\n");
        while dec.next_event().is_some() {
            n += 1;
        }
        assert!(dec.buf.len() < 64, "buffer grew to {}", dec.buf.len());
    }
    assert_eq!(n, 2000);
    assert_eq!(dec.buffered(), 0);
}

#[test]
fn reset_allows_reuse() {
    let mut dec = SseDecoder::strict();
    dec.feed(b"data: a");
    assert_eq!(dec.finish().map(own), Some(d("a")));
    assert_eq!(dec.finish(), None);
    dec.reset();
    assert!(dec.strict);
    dec.feed(b"data: b\n\n");
    assert_eq!(dec.next_event().map(own), Some(d("b")));
    assert_eq!(dec.next_event(), None);
}

#[test]
fn event_type_is_reported_per_event() {
    let mut dec = SseDecoder::new();
    dec.feed(b"event: error\ndata: {\"error\":\"x\"}\n\ndata: a\n\nevent:ping\n\ndata: b\n\n");
    assert!(matches!(dec.next_event(), Some(SseEvent::Data(_))));
    assert_eq!(dec.event_type(), Some(&b"error"[..]));
    assert!(matches!(dec.next_event(), Some(SseEvent::Data(b"a"))));
    assert_eq!(dec.event_type(), None);
    assert!(matches!(dec.next_event(), Some(SseEvent::Data(b"b"))));
    assert_eq!(
        dec.event_type(),
        None,
        "type of an event without data is dropped"
    );
    assert_eq!(dec.next_event(), None);
}

#[test]
fn partial_bom_waits_for_more_bytes() {
    let mut dec = SseDecoder::new();
    dec.feed(b"\xEF\xBB");
    assert_eq!(dec.next_event(), None);
    dec.feed(b"\xBFdata: a\n\n");
    assert_eq!(dec.next_event().map(own), Some(d("a")));
}

#[test]
fn crlf_split_across_feeds_is_one_line_ending() {
    let mut dec = SseDecoder::strict();
    dec.feed(b"data: a\r");
    assert_eq!(dec.next_event(), None);
    dec.feed(b"\n");
    assert_eq!(dec.next_event(), None);
    dec.feed(b"\r");
    assert_eq!(dec.next_event().map(own), Some(d("a")));
    dec.feed(b"\ndata: b\r\n\r\n");
    assert_eq!(dec.next_event().map(own), Some(d("b")));
    assert_eq!(dec.next_event(), None);
}

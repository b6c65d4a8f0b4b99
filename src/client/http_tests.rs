//! Unit tests of [`super`] (http.rs).

use super::*;
use crate::client::reader::StreamError;

/// llama.cpp's final chunk carries `usage` and its own `timings`: both
/// land in the record (the timings let a test check TPOT against the server).
#[test]
fn llama_cpp_final_chunk_keeps_usage_and_server_timings() {
    let stream = concat!(
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":null}}],\"object\":\"chat.completion.chunk\"}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}],\"object\":\"chat.completion.chunk\"}\n\n",
        "data: {\"choices\":[{\"finish_reason\":\"length\",\"index\":0,\"delta\":{}}],\"object\":\"chat.completion.chunk\",",
        "\"usage\":{\"completion_tokens\":2,\"prompt_tokens\":9,\"total_tokens\":11},",
        "\"timings\":{\"cache_n\":0,\"prompt_n\":9,\"prompt_ms\":40.5,\"predicted_n\":2,\"predicted_ms\":21.0,\"predicted_per_second\":95.2}}\n\n",
        "data: [DONE]\n\n",
    );
    let mut reader = StreamReader::new(true, Api::Chat);
    let mut rec = RequestRecord::default();
    for (i, b) in stream.as_bytes().chunks(7).enumerate() {
        reader
            .feed(b, Duration::from_millis(i as u64), &mut rec)
            .unwrap();
    }
    reader.finish(&mut rec).unwrap();
    assert_eq!(rec.output_tokens, 2);
    assert_eq!(rec.prompt_len, 9);
    assert_eq!(rec.generated_text, "Hi");
    assert_eq!(rec.itl.len(), 2, "role chunk, token, final chunk");
    let t = rec.server_timings.expect("timings kept");
    assert_eq!(t.prompt_n, Some(9));
    assert_eq!(t.predicted_n, Some(2));
    assert_eq!(t.predicted_ms, Some(21.0));
    assert_eq!(t.prompt_ms, Some(40.5));
}

/// Feed `stream` in 5-byte pieces, piece i arriving at i ms.
fn read(stream: &str, api: Api) -> (RequestRecord, Result<(), StreamError>) {
    let mut reader = StreamReader::new(true, api);
    let mut rec = RequestRecord::default();
    for (i, b) in stream.as_bytes().chunks(5).enumerate() {
        if let Err(e) = reader.feed(b, Duration::from_millis(i as u64), &mut rec) {
            return (rec, Err(e));
        }
    }
    let end = reader.finish(&mut rec);
    (rec, end)
}

/// A reasoning chat stream (vLLM's field names): TTFT at the role chunk,
/// TTFO at the first content, reasoning messages counted, usage's count kept.
#[test]
fn reasoning_deltas_set_ttft_but_not_ttfo() {
    let stream = concat!(
        "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n",
        "data: {\"choices\":[{\"delta\":{\"reasoning\":\"a\"}}]}\n\n",
        "data: {\"choices\":[{\"delta\":{\"reasoning_content\":\"b\"}}]}\n\n",
        "data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\n\n",
        "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":3}}\n\n",
        "data: [DONE]\n\n",
    );
    let (rec, end) = read(stream, Api::Chat);
    end.unwrap();
    assert_eq!(rec.reasoning_events, 2);
    assert_eq!(rec.usage_reasoning_tokens, None, "no details: counted");
    assert_eq!(rec.reasoning_tokens(), 2);
    assert!(rec.first_token < rec.first_answer, "{rec:?}");
    assert_eq!(
        rec.generated_text, "Hi",
        "reasoning text is not answer text"
    );
}

/// The Responses API: typed events, usage in `response.completed`.
#[test]
fn responses_events_fill_the_record_and_need_a_terminal_event() {
    let events = [
        r#"{"type":"response.created","response":{"id":"r"}}"#,
        r#"{"type":"response.reasoning_text.delta","delta":"hm"}"#,
        r#"{"type":"response.output_text.delta","delta":"Hi"}"#,
        r#"{"type":"response.function_call_arguments.delta","delta":"{}"}"#,
        r#"{"type":"response.completed","response":{"usage":{"input_tokens":7,"output_tokens":5,"output_tokens_details":{"reasoning_tokens":1}}}}"#,
    ];
    let sse: String = events
        .iter()
        .map(|e| format!("event: x\ndata: {e}\n\n"))
        .collect();
    let (rec, end) = read(&sse, Api::Responses);
    end.unwrap();
    assert_eq!((rec.prompt_len, rec.output_tokens), (7, 5));
    assert_eq!(rec.itl.len(), 2, "three token events");
    assert_eq!(rec.reasoning_tokens(), 1);
    assert_eq!(rec.generated_text, "Hi");
    assert!(rec.first_answer.is_some() && rec.first_answer > rec.first_token);
    // Without the terminal event the stream was cut.
    let cut: String = sse
        .rsplitn(3, "event:")
        .last()
        .unwrap_or_default()
        .to_owned();
    let (_, end) = read(&cut, Api::Responses);
    assert_eq!(end.unwrap_err().0, ErrorKind::Truncated);
    // A malformed event is a protocol failure, never a panic.
    for bad in [
        "data: {\"type\":\n\n",
        "data: [1,2]\n\n",
        "data: {\"delta\":\"x\"}\n\n",
    ] {
        let (_, end) = read(bad, Api::Responses);
        assert_eq!(end.unwrap_err().0, ErrorKind::Protocol, "{bad}");
    }
    let (_, end) = read(
        "data: {\"type\":\"error\",\"message\":\"no\"}\n\n",
        Api::Responses,
    );
    assert_eq!(end.unwrap_err().0, ErrorKind::ServerError);
}

/// Like llama.cpp's llama-server: each connection answers one request
/// with a streamed response advertising keep-alive, then reads the next
/// request and closes without answering. Both requests must still succeed.
#[tokio::test]
async fn a_keep_alive_connection_closed_after_a_stream_is_retried_fresh() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        loop {
            let (mut sock, _) = listener.accept().await.unwrap();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 8192];
                for answered in [true, false] {
                    let mut seen = Vec::new();
                    while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
                        let n = sock.read(&mut buf).await.unwrap_or(0);
                        if n == 0 {
                            return;
                        }
                        seen.extend_from_slice(&buf[..n]);
                    }
                    if !answered {
                        return; // close with no response
                    }
                    let event = "data: {\"choices\":[{\"text\":\"a\"}]}\n\ndata: [DONE]\n\n";
                    let resp = format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\
                         Keep-Alive: timeout=5, max=100\r\nTransfer-Encoding: chunked\r\n\r\n\
                         {:x}\r\n{event}\r\n0\r\n\r\n",
                        event.len()
                    );
                    sock.write_all(resp.as_bytes()).await.unwrap();
                }
            });
        }
    });
    let client = HttpClient::new(ClientConfig {
        base_url: format!("http://127.0.0.1:{port}"),
        endpoint: "/v1/completions".into(),
        api: Api::Completions,
        body: BodyOptions::default(),
        headers: vec![],
        api_key: None,
        request_timeout: Duration::from_secs(5),
        connect_timeout: Duration::from_secs(5),
        keep_text: false,
        tls: Default::default(),
        kernel_stamps: true,
        proxies: Default::default(),
    })
    .unwrap();
    let spec = RequestSpec {
        index: 0,
        prompt: crate::workload::Prompt::Text("hi".into()),
        prompt_len: 1,
        output_len: 1,
    };
    let t0 = Instant::now();
    for i in 0..3 {
        let mut rec = RequestRecord::default();
        client.stream(&spec, &format!("r-{i}"), t0, &mut rec).await;
        assert_eq!(rec.error, None, "request {i}");
        assert!(rec.first_token.is_some(), "request {i}");
    }
}

/// A pooling answer: E2EL ends at its last byte, usage's prompt count is kept,
/// nothing is generated.
#[test]
fn a_pooling_answer_ends_at_its_last_byte() {
    let body = r#"{"object":"list","data":[{"index":0,"object":"embedding","embedding":[0.5,-0.25]}],"usage":{"prompt_tokens":11,"total_tokens":11}}"#;
    let (rec, end) = read(body, Api::Embeddings);
    end.unwrap();
    let pieces = body.len().div_ceil(5) as u64;
    let last = Duration::from_millis(pieces - 1);
    assert_eq!((rec.first_token, rec.last_token), (Some(last), Some(last)));
    assert_eq!((rec.prompt_len, rec.output_tokens), (11, 0));
    assert!(rec.itl.is_empty());
}

/// Malformed pooling answers are `protocol` failures, error objects
/// `server_error`, and neither panics nor stamps a latency.
#[test]
fn malformed_pooling_answers_are_protocol_failures() {
    for body in [
        "",
        "<html>oops</html>",
        r#"{"data": [0.1,"#,
        r#"{"results": []}"#,
    ] {
        let (rec, end) = read(body, Api::Embeddings);
        let (kind, message) = end.expect_err(body);
        assert_eq!(kind, ErrorKind::Protocol, "{body}: {message}");
        assert!(rec.last_token.is_none());
    }
    let (_, end) = read(r#"{"data": []}"#, Api::Rerank);
    assert_eq!(end.unwrap_err().0, ErrorKind::Protocol);
    let (_, end) = read(r#"{"error": {"message": "too long"}}"#, Api::Pooling);
    let (kind, message) = end.unwrap_err();
    assert_eq!(kind, ErrorKind::ServerError);
    assert!(message.contains("too long"), "{message}");
}

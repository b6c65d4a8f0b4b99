//! Unit tests of [`super`] (http.rs).

use super::*;

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
    let mut reader = StreamReader::new(true);
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

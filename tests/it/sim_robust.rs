//! Robustness of `kneecap sim` against garbage clients: malformed and
//! ill-typed bodies, unknown routes and methods, oversized bodies, slowloris
//! headers and bodies, and thousands of connections dropped at every stage.
//! Every test ends by proving the sim still streams a normal completion.
//!
//! Each test starts its own sim on 127.0.0.1:0, uses raw loopback TCP (so it
//! can send what no HTTP library would), and is bounded in connections and
//! time (a few seconds each).

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use kneecap::sim::{self, SimConfig, SimHandle};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;

/// Read timeout the slowloris tests run the sim with.
const SHORT_READ_TIMEOUT: Duration = Duration::from_millis(800);

const STREAM_BODY: &str = r#"{"model":"kneecap-sim","prompt":"hello world","max_tokens":4,"stream":true,"ignore_eos":true}"#;

async fn start_sim(read_timeout: Option<Duration>) -> SimHandle {
    let mut cfg = SimConfig::from_preset("tiny").expect("tiny preset");
    if let Some(t) = read_timeout {
        cfg.read_timeout = t;
    }
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    sim::start(cfg, listener).await.expect("sim starts")
}

/// A complete HTTP/1.1 request with `Connection: close`.
fn request(method: &str, path: &str, body: &[u8]) -> Vec<u8> {
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    req.extend_from_slice(body);
    req
}

/// Sends `raw` on a fresh connection and reads until the server closes it.
async fn exchange(addr: SocketAddr, raw: &[u8]) -> (u16, String) {
    let mut s = TcpStream::connect(addr).await.expect("connect");
    s.write_all(raw).await.expect("write request");
    let mut buf = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut buf))
        .await
        .expect("response and close within 5 s")
        .expect("read response");
    parse_response(&buf)
}

/// Status code and (dechunked) body text of a raw response.
fn parse_response(raw: &[u8]) -> (u16, String) {
    let text = String::from_utf8_lossy(raw).into_owned();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status line in {text:?}"));
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let chunked = head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked");
    let body = if chunked {
        dechunk(body)
    } else {
        body.to_owned()
    };
    (status, body)
}

fn dechunk(mut rest: &str) -> String {
    let mut out = String::new();
    while let Some((size, tail)) = rest.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).expect("chunk size");
        if n == 0 || tail.len() < n {
            break;
        }
        out.push_str(&tail[..n]);
        rest = tail[n..].trim_start_matches("\r\n");
    }
    out
}

/// The error message of an OpenAI-style (`{"error":{"message"}}`) or
/// vLLM-style (`{"object":"error","message"}`) error body.
fn error_message(body: &str) -> String {
    let v: Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body:?}"));
    let msg = v
        .pointer("/error/message")
        .or_else(|| v.get("message").filter(|_| v["object"] == "error"));
    msg.and_then(Value::as_str)
        .unwrap_or_else(|| panic!("no error message in {body}"))
        .to_owned()
}

/// Streams one normal completion and checks its events end with `[DONE]`.
async fn assert_still_streams(addr: SocketAddr) {
    let raw = request("POST", "/v1/completions", STREAM_BODY.as_bytes());
    let (status, body) = exchange(addr, &raw).await;
    assert_eq!(status, 200, "{body}");
    let events: Vec<&str> = body.split("\n\n").filter(|e| !e.is_empty()).collect();
    assert_eq!(events.last(), Some(&"data: [DONE]"), "{body}");
    let tokens = events.iter().filter(|e| e.contains("\"text\":\" ")).count();
    assert_eq!(tokens, 4, "{body}");
}

async fn running_requests(addr: SocketAddr) -> f64 {
    let (status, body) = exchange(addr, &request("GET", "/metrics", b"")).await;
    assert_eq!(status, 200);
    body.lines()
        .find(|l| l.starts_with("vllm:num_requests_running"))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no num_requests_running in {body}"))
}

/// Waits until the server closes `s` (EOF or reset); returns how long it took.
async fn time_until_closed(mut s: TcpStream, limit: Duration) -> Duration {
    let t0 = Instant::now();
    let mut buf = [0u8; 1024];
    loop {
        match tokio::time::timeout(limit, s.read(&mut buf)).await {
            Ok(Ok(0) | Err(_)) => return t0.elapsed(),
            Ok(Ok(_)) => {}
            Err(_) => panic!("connection still open after {limit:?}"),
        }
    }
}

#[tokio::test]
async fn malformed_and_ill_typed_bodies_get_400_json_errors() {
    let h = start_sim(None).await;
    let bodies: &[&[u8]] = &[
        b"",
        b"{",
        b"not json at all",
        b"[1,2,3]",
        b"\xff\xfe\x00garbage\x80",
        br#"{"prompt":"hi","max_tokens":"ten"}"#,
        br#"{"prompt":5,"max_tokens":4}"#,
        br#"{"prompt":"hi","stream":"yes"}"#,
        br#"{"prompt":"hi","ignore_eos":1}"#,
        br#"{"prompt":"hi","max_tokens":-3}"#,
        br#"{"prompt":"hi","max_tokens":0}"#,
        br#"{"prompt":"hi","max_tokens":1e9}"#,
        br#"{"prompt":"hi","max_tokens":99999999999999999999999}"#,
        br#"{"model":"kneecap-sim","max_tokens":4}"#,
        br#"{"prompt":""}"#,
        br#"{"prompt":[[1,2],[3]]}"#,
    ];
    for body in bodies {
        let (status, text) = exchange(h.addr(), &request("POST", "/v1/completions", body)).await;
        let shown = String::from_utf8_lossy(body);
        assert_eq!(status, 400, "{shown} -> {text}");
        assert!(!error_message(&text).is_empty(), "{shown}");
    }
    let chat: &[&[u8]] = &[
        br#"{"messages":"hi"}"#,
        br#"{"messages":[]}"#,
        br#"{"messages":[{"role":"user","content":7}]}"#,
        br#"{"messages":[{"role":"user","content":"hi"}],"stream":"yes"}"#,
    ];
    for body in chat {
        let (status, text) =
            exchange(h.addr(), &request("POST", "/v1/chat/completions", body)).await;
        assert_eq!(status, 400, "{} -> {text}", String::from_utf8_lossy(body));
        error_message(&text);
    }
    assert_still_streams(h.addr()).await;
    h.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn unknown_paths_are_404_and_wrong_methods_405_with_json_errors() {
    let h = start_sim(None).await;
    let cases = [
        ("GET", "/nope", 404),
        ("POST", "/v1/completion", 404),
        ("GET", "/v1/completions/../../etc/passwd", 404),
        ("GET", "/v1/completions", 405),
        ("PUT", "/v1/chat/completions", 405),
        ("DELETE", "/metrics", 405),
        ("POST", "/v1/models", 405),
    ];
    for (method, path, want) in cases {
        let (status, text) = exchange(h.addr(), &request(method, path, b"{}")).await;
        assert_eq!(status, want, "{method} {path} -> {text}");
        assert!(error_message(&text).contains(path) || want == 404, "{text}");
    }
    // Not HTTP at all: the server answers 400 or hangs up, and nothing else breaks.
    let mut s = TcpStream::connect(h.addr()).await.expect("connect");
    s.write_all(b"\x16\x03\x01\x02\x00garbage\r\n\r\n")
        .await
        .expect("write");
    time_until_closed(s, Duration::from_secs(5)).await;
    assert_still_streams(h.addr()).await;
    h.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn a_20_mib_body_gets_413_before_it_is_all_sent() {
    let h = start_sim(None).await;
    let huge = vec![b'a'; 20 << 20];
    let mut s = TcpStream::connect(h.addr()).await.expect("connect");
    let head = request("POST", "/v1/completions", b"");
    let head = String::from_utf8(head).expect("ascii").replace(
        "content-length: 0",
        &format!("content-length: {}", huge.len()),
    );
    s.write_all(head.as_bytes()).await.expect("write head");
    let (mut rd, mut wr) = s.into_split();
    // Write and read concurrently: the answer must come while the upload is
    // still going (the sim stops reading at its 8 MiB cap, so the writer blocks).
    let writer = tokio::spawn(async move {
        let r = wr.write_all(&huge).await;
        (r.is_ok(), wr)
    });
    let mut buf = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(5), rd.read_to_end(&mut buf)).await;
    assert!(read.is_ok(), "no answer to the huge body within 5 s");
    let (status, text) = parse_response(&buf);
    assert_eq!(status, 413, "{text}");
    error_message(&text);
    writer.abort();
    assert_still_streams(h.addr()).await;
    h.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn slowloris_headers_are_cut_after_the_read_timeout_while_others_are_served() {
    let h = start_sim(Some(SHORT_READ_TIMEOUT)).await;
    let addr = h.addr();
    let mut lorises = JoinSet::new();
    for i in 0..9 {
        lorises.spawn(async move {
            let mut s = TcpStream::connect(addr).await.expect("connect");
            let partial = b"POST /v1/completions HTTP/1.1\r\nhost: localhost\r\nx-slow: ";
            let t0 = Instant::now();
            // A third trickle a byte every 100 ms, a third stop dead
            // mid-request-line, a third never send a byte.
            let n = [partial.len(), 10, 0][i % 3];
            for b in &partial[..n] {
                if s.write_all(&[*b]).await.is_err() {
                    return t0.elapsed();
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            t0.elapsed() + time_until_closed(s, Duration::from_secs(8)).await
        });
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_still_streams(addr).await;
    while let Some(took) = lorises.join_next().await {
        let took = took.expect("loris task");
        let limit = SHORT_READ_TIMEOUT + Duration::from_millis(1500);
        assert!(
            took < limit,
            "cut after {took:?}, read timeout {SHORT_READ_TIMEOUT:?}"
        );
    }
    assert_still_streams(addr).await;
    h.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn a_body_shorter_than_its_content_length_blocks_nobody_and_times_out() {
    let h = start_sim(Some(SHORT_READ_TIMEOUT)).await;
    let mut s = TcpStream::connect(h.addr()).await.expect("connect");
    let head = "POST /v1/completions HTTP/1.1\r\nhost: localhost\r\n\
                content-type: application/json\r\ncontent-length: 100\r\n\r\n";
    s.write_all(head.as_bytes()).await.expect("write head");
    s.write_all(br#"{"prompt":"#).await.expect("write 10 bytes");
    let t0 = Instant::now();
    assert_still_streams(h.addr()).await;
    assert!(
        t0.elapsed() < SHORT_READ_TIMEOUT,
        "served only after the stall"
    );
    let mut buf = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut buf))
        .await
        .expect("stalled upload cut within 5 s")
        .expect("read");
    let (status, text) = parse_response(&buf);
    assert_eq!(status, 408, "{text}");
    error_message(&text);
    assert_still_streams(h.addr()).await;
    h.shutdown().await.expect("shutdown");
}

/// One churned connection: `kind` 0 idle, 1 half a body, 2 read the first
/// SSE chunk, then drop it.
async fn churn_one(addr: SocketAddr, kind: usize) {
    let Ok(mut s) = TcpStream::connect(addr).await else {
        return;
    };
    match kind {
        0 => {}
        1 => {
            let req = request("POST", "/v1/completions", STREAM_BODY.as_bytes());
            let _ = s.write_all(&req[..req.len() - STREAM_BODY.len() / 2]).await;
        }
        _ => drop(open_stream(addr, 200).await),
    }
}

/// A connection streaming a `max_tokens` completion, read up to its first
/// SSE chunk.
async fn open_stream(addr: SocketAddr, max_tokens: u32) -> TcpStream {
    let mut s = TcpStream::connect(addr).await.expect("connect");
    let body = STREAM_BODY.replace("\"max_tokens\":4", &format!("\"max_tokens\":{max_tokens}"));
    let req = request("POST", "/v1/completions", body.as_bytes());
    s.write_all(&req).await.expect("write request");
    let mut buf = [0u8; 4096];
    let mut seen = Vec::new();
    while !String::from_utf8_lossy(&seen).contains("data: ") {
        let read = tokio::time::timeout(Duration::from_secs(5), s.read(&mut buf)).await;
        match read {
            Ok(Ok(n)) if n > 0 => seen.extend_from_slice(&buf[..n]),
            _ => panic!("no first SSE chunk"),
        }
    }
    s
}

#[tokio::test]
async fn two_thousand_dropped_connections_leave_no_running_requests() {
    let h = start_sim(None).await;
    let addr = h.addr();
    let mut set = JoinSet::new();
    for i in 0..2000 {
        if set.len() >= 200 {
            if let Some(r) = set.join_next().await {
                r.expect("churn task");
            }
        }
        set.spawn(churn_one(addr, i % 3));
    }
    while let Some(r) = set.join_next().await {
        r.expect("churn task");
    }
    // Proof the gauge can see abandoned streams: hold a few, then drop them.
    let mut held = Vec::new();
    for _ in 0..10 {
        held.push(open_stream(addr, 2000).await);
    }
    assert!(
        running_requests(addr).await >= 1.0,
        "held streams not running"
    );
    drop(held);
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut running = running_requests(addr).await;
    while running > 0.0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
        running = running_requests(addr).await;
    }
    assert_eq!(running, 0.0, "aborted requests still running after 5 s");
    assert_still_streams(addr).await;
    h.shutdown().await.expect("shutdown");
}

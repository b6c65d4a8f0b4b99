//! Integration tests of `kneecap sim` over loopback HTTP: SSE framing, usage,
//! the chat role chunk, `/metrics`, `/v1/models`, bad requests, every fault
//! kind, and the server log file. Each test starts its own sim on 127.0.0.1:0 and
//! sends a handful of small requests.

use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;
use kneecap::sim::{self, Faults, SimConfig, SimHandle};
use serde_json::Value;
use tokio::net::{TcpListener, TcpStream};

/// What a response looked like on the wire.
struct Reply {
    status: StatusCode,
    headers: http::HeaderMap,
    /// Body frames with their arrival times since the request was sent.
    frames: Vec<(Duration, Bytes)>,
    /// Whether the body ended with an error (connection cut).
    body_error: bool,
}

impl Reply {
    fn text(&self) -> String {
        self.frames
            .iter()
            .map(|(_, b)| String::from_utf8_lossy(b).into_owned())
            .collect()
    }

    /// SSE `data:` payloads in order.
    fn events(&self) -> Vec<String> {
        self.text()
            .split("\n\n")
            .filter(|e| !e.is_empty())
            .map(|e| e.strip_prefix("data: ").expect("data: prefix").to_owned())
            .collect()
    }

    fn json(&self) -> Value {
        serde_json::from_str(&self.text()).expect("JSON body")
    }
}

async fn start_sim(cfg: SimConfig) -> SimHandle {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    sim::start(cfg, listener).await.unwrap()
}

fn tiny() -> SimConfig {
    SimConfig::from_preset("tiny").unwrap()
}

async fn send(handle: &SimHandle, method: &str, path: &str, body: &str) -> Reply {
    let stream = TcpStream::connect(handle.addr()).await.unwrap();
    let (mut sender, conn) = http1::handshake(TokioIo::new(stream)).await.unwrap();
    tokio::spawn(conn);
    send_on(&mut sender, method, path, body).await
}

async fn send_on(
    sender: &mut http1::SendRequest<Full<Bytes>>,
    method: &str,
    path: &str,
    body: &str,
) -> Reply {
    let req = Request::builder()
        .method(method)
        .uri(path)
        .header("host", "localhost")
        .header("content-type", "application/json")
        .header("x-request-id", "test-req-1")
        .body(Full::new(Bytes::from(body.to_owned())))
        .unwrap();
    let t0 = Instant::now();
    let resp = tokio::time::timeout(Duration::from_secs(10), sender.send_request(req))
        .await
        .expect("response within 10 s")
        .unwrap();
    let (parts, mut body) = resp.into_parts();
    let mut frames = Vec::new();
    let mut body_error = false;
    loop {
        match tokio::time::timeout(Duration::from_secs(10), body.frame()).await {
            Ok(Some(Ok(frame))) => {
                if let Ok(data) = frame.into_data() {
                    frames.push((t0.elapsed(), data));
                }
            }
            Ok(Some(Err(_))) => {
                body_error = true;
                break;
            }
            Ok(None) => break,
            Err(_) => panic!("body stalled for 10 s"),
        }
    }
    Reply {
        status: parts.status,
        headers: parts.headers,
        frames,
        body_error,
    }
}

const COMPLETION: &str = r#"{"model":"kneecap-sim","prompt":"hello world, again","max_tokens":5,
    "stream":true,"stream_options":{"include_usage":true},"ignore_eos":true,
    "repetition_penalty":1.0,"logprobs":null,"temperature":0}"#;

const CHAT: &str = r#"{"model":"kneecap-sim","messages":[{"role":"user",
    "content":[{"type":"text","text":"hello world"}]}],"max_completion_tokens":4,
    "stream":true,"stream_options":{"include_usage":true},"ignore_eos":true}"#;

#[tokio::test]
async fn streamed_completion_has_vllm_sse_framing_and_usage() {
    let h = start_sim(tiny()).await;
    let r = send(&h, "POST", "/v1/completions", COMPLETION).await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.headers["x-request-id"], "test-req-1");
    assert!(r.headers["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/event-stream"));
    let events = r.events();
    assert_eq!(events.len(), 5 + 1 + 1, "{events:?}");
    assert_eq!(events.last().unwrap(), "[DONE]");
    for (i, e) in events[..5].iter().enumerate() {
        let v: Value = serde_json::from_str(e).unwrap();
        assert_eq!(v["object"], "text_completion");
        assert!(v["choices"][0]["text"].as_str().unwrap().starts_with(' '));
        assert!(v["usage"].is_null());
        let want = if i == 4 {
            Value::from("length")
        } else {
            Value::Null
        };
        assert_eq!(v["choices"][0]["finish_reason"], want);
    }
    let usage: Value = serde_json::from_str(&events[5]).unwrap();
    assert_eq!(usage["choices"], serde_json::json!([]));
    // "hello world, again": 3 words + 1 comma.
    assert_eq!(usage["usage"]["prompt_tokens"], 4);
    assert_eq!(usage["usage"]["completion_tokens"], 5);
    assert_eq!(usage["usage"]["total_tokens"], 9);
    h.shutdown().await.unwrap();
}

#[tokio::test]
async fn streamed_chat_starts_with_the_role_chunk() {
    let h = start_sim(tiny()).await;
    let r = send(&h, "POST", "/v1/chat/completions", CHAT).await;
    assert_eq!(r.status, StatusCode::OK);
    let events = r.events();
    assert_eq!(events.len(), 1 + 4 + 1 + 1, "{events:?}");
    let role: Value = serde_json::from_str(&events[0]).unwrap();
    assert_eq!(role["object"], "chat.completion.chunk");
    assert_eq!(
        role["choices"][0]["delta"],
        serde_json::json!({"role":"assistant","content":""})
    );
    for e in &events[1..5] {
        let v: Value = serde_json::from_str(e).unwrap();
        assert!(!v["choices"][0]["delta"]["content"]
            .as_str()
            .unwrap()
            .is_empty());
    }
    let usage: Value = serde_json::from_str(&events[5]).unwrap();
    assert_eq!(usage["usage"]["prompt_tokens"], 2);
    assert_eq!(usage["usage"]["completion_tokens"], 4);
    assert_eq!(events[6], "[DONE]");
    h.shutdown().await.unwrap();
}

#[tokio::test]
async fn non_streamed_replies_carry_the_whole_text_and_usage() {
    let h = start_sim(tiny()).await;
    let r = send(
        &h,
        "POST",
        "/v1/completions",
        r#"{"prompt":[1,2,3],"max_tokens":6,"ignore_eos":true}"#,
    )
    .await;
    let v = r.json();
    assert_eq!(v["usage"]["prompt_tokens"], 3);
    assert_eq!(v["usage"]["completion_tokens"], 6);
    assert_eq!(v["choices"][0]["finish_reason"], "length");
    let r = send(
        &h,
        "POST",
        "/v1/chat/completions",
        r#"{"messages":[{"role":"user","content":"hi"}],"max_tokens":50}"#,
    )
    .await;
    let v = r.json();
    let n = v["usage"]["completion_tokens"].as_u64().unwrap();
    assert!((1..=50).contains(&n), "sampled length {n}");
    assert_eq!(v["choices"][0]["message"]["role"], "assistant");
    h.shutdown().await.unwrap();
}

#[tokio::test]
async fn lone_stream_timing_follows_the_step_formula() {
    let h = start_sim(tiny()).await;
    let body = r#"{"prompt":"a b c","max_tokens":40,"stream":true,"ignore_eos":true}"#;
    let r = send(&h, "POST", "/v1/completions", body).await;
    let first = r.frames[0].0;
    let last = r.frames.last().unwrap().0;
    // Model: TTFT 5.015 ms, then 39 steps of 5.05 ms = 197 ms.
    let decode = last - first;
    assert!(decode > Duration::from_millis(190), "{decode:?}");
    assert!(decode < Duration::from_millis(400), "{decode:?}");
    assert!(
        h.max_batch_step_lag() < 0.05,
        "lag {}",
        h.max_batch_step_lag()
    );
    h.shutdown().await.unwrap();
}

#[tokio::test]
async fn models_health_and_metrics_endpoints_answer() {
    let mut cfg = tiny();
    cfg.served_model_name = "my-model".into();
    let h = start_sim(cfg).await;
    let v = send(&h, "GET", "/v1/models", "").await.json();
    assert_eq!(v["object"], "list");
    assert_eq!(v["data"][0]["id"], "my-model");
    assert_eq!(v["data"][0]["root"], "my-model");
    assert_eq!(v["data"][0]["owned_by"], "kneecap");
    assert_eq!(send(&h, "GET", "/health", "").await.status, StatusCode::OK);
    send(&h, "POST", "/v1/completions", COMPLETION).await;
    let m = send(&h, "GET", "/metrics", "").await.text();
    for name in [
        "vllm:num_requests_running{",
        "vllm:num_requests_waiting{",
        "vllm:kv_cache_usage_perc{",
        "vllm:num_preemptions_total{",
        "vllm:prompt_tokens_total{model_name=\"my-model\",engine=\"0\"} 4",
        "vllm:generation_tokens_total{model_name=\"my-model\",engine=\"0\"} 5",
        "vllm:time_to_first_token_seconds_count{model_name=\"my-model\",engine=\"0\"} 1",
        "kneecap_sim_step_lag_seconds_bucket{",
    ] {
        assert!(m.contains(name), "{name} missing from:\n{m}");
    }
    assert_eq!(
        send(&h, "GET", "/nope", "").await.status,
        StatusCode::NOT_FOUND
    );
    h.shutdown().await.unwrap();
}

#[tokio::test]
async fn bad_requests_get_400_and_the_connection_keeps_serving() {
    let h = start_sim(tiny()).await;
    let stream = TcpStream::connect(h.addr()).await.unwrap();
    let (mut sender, conn) = http1::handshake(TokioIo::new(stream)).await.unwrap();
    tokio::spawn(conn);
    for body in [
        "{oops",
        r#"{"max_tokens":3}"#,
        r#"{"prompt":"x","max_tokens":100000000}"#,
    ] {
        let r = send_on(&mut sender, "POST", "/v1/completions", body).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{body}");
        assert!(r.json()["error"]["message"].is_string());
    }
    let r = send_on(&mut sender, "POST", "/v1/completions", COMPLETION).await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.events().last().unwrap(), "[DONE]");
    h.shutdown().await.unwrap();
}

async fn with_fault(faults: Faults) -> (SimHandle, Reply) {
    let mut cfg = tiny();
    cfg.faults = faults;
    let h = start_sim(cfg).await;
    let body = r#"{"prompt":"x","max_tokens":10,"stream":true,"ignore_eos":true}"#;
    let r = send(&h, "POST", "/v1/completions", body).await;
    (h, r)
}

#[tokio::test]
async fn refusal_faults_answer_500_and_429() {
    let (h, r) = with_fault(Faults {
        http_500: 1.0,
        ..Faults::default()
    })
    .await;
    assert_eq!(r.status, StatusCode::INTERNAL_SERVER_ERROR);
    assert!(r.json()["error"]["message"].is_string());
    h.shutdown().await.unwrap();
    let (h, r) = with_fault(Faults {
        http_429: 1.0,
        ..Faults::default()
    })
    .await;
    assert_eq!(r.status, StatusCode::TOO_MANY_REQUESTS);
    h.shutdown().await.unwrap();
}

#[tokio::test]
async fn cut_stream_fault_ends_the_body_without_done() {
    let (h, r) = with_fault(Faults {
        cut_stream: 1.0,
        ..Faults::default()
    })
    .await;
    assert_eq!(r.status, StatusCode::OK);
    assert!(r.body_error, "body should end with an error");
    assert!(!r.text().contains("[DONE]"));
    assert_eq!(r.text().matches("data: ").count(), 4, "cut before token 5");
    h.shutdown().await.unwrap();
}

#[tokio::test]
async fn malformed_fault_sends_one_non_json_event_and_finishes() {
    let (h, r) = with_fault(Faults {
        malformed: 1.0,
        ..Faults::default()
    })
    .await;
    let events = r.events();
    let bad = events
        .iter()
        .filter(|e| *e != "[DONE]" && serde_json::from_str::<Value>(e).is_err())
        .count();
    assert_eq!(bad, 1, "{events:?}");
    assert_eq!(events.last().unwrap(), "[DONE]");
    h.shutdown().await.unwrap();
}

#[tokio::test]
async fn stall_fault_pauses_the_stream_mid_way() {
    let faults = Faults {
        stall: Duration::from_millis(400),
        stall_rate: 1.0,
        ..Faults::default()
    };
    let (h, r) = with_fault(faults).await;
    let gap = r.frames.windows(2).map(|w| w[1].0 - w[0].0).max().unwrap();
    assert!(gap >= Duration::from_millis(400), "largest gap {gap:?}");
    assert_eq!(r.events().last().unwrap(), "[DONE]");
    h.shutdown().await.unwrap();
}

#[tokio::test]
async fn error_event_fault_sends_an_error_object_then_done() {
    let (h, r) = with_fault(Faults {
        error_event: 1.0,
        ..Faults::default()
    })
    .await;
    let events = r.events();
    assert_eq!(events.len(), 4 + 2, "{events:?}");
    let err: Value = serde_json::from_str(&events[4]).unwrap();
    assert!(err["error"]["message"].is_string());
    assert_eq!(events[5], "[DONE]");
    h.shutdown().await.unwrap();
}

#[tokio::test]
async fn server_log_has_an_anchor_and_one_line_per_request() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("server_log.jsonl");
    let mut cfg = tiny();
    cfg.server_log = Some(path.clone());
    let h = start_sim(cfg).await;
    send(&h, "POST", "/v1/completions", COMPLETION).await;
    send(&h, "POST", "/v1/completions", "{bad").await;
    h.shutdown().await.unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 4, "{text}");
    assert_eq!(lines[3]["summary"]["finished"], 1);
    assert!(lines[3]["summary"]["step_lag_max_s"].as_f64().unwrap() < 1.0);
    assert!(lines[0]["anchor"]["unix_s"].as_f64().unwrap() > 1.6e9);
    let ok = &lines[1];
    assert_eq!(ok["request_id"], "test-req-1");
    assert_eq!(ok["outcome"], "ok");
    assert_eq!(ok["output_tokens"], 5);
    let t = |k: &str| ok[k].as_f64().unwrap();
    assert!(t("arrival_s") <= t("scheduled_s"));
    assert!(t("scheduled_s") < t("first_token_engine_s"));
    assert!(t("first_token_engine_s") <= t("first_token_s"));
    assert!(t("first_token_s") <= t("finish_s"));
    assert_eq!(lines[2]["status"], 400);
}

/// Reads `/metrics` and returns the value of the unlabelled-prefix line `name{`.
async fn gauge(h: &SimHandle, name: &str) -> f64 {
    let text = send(h, "GET", "/metrics", "").await.text();
    let line = text
        .lines()
        .find(|l| l.starts_with(&format!("{name}{{")))
        .unwrap_or_else(|| panic!("{name} missing"));
    line.rsplit(' ').next().unwrap().parse().unwrap()
}

#[tokio::test]
async fn client_disconnect_aborts_the_request_in_the_engine() {
    let h = start_sim(tiny()).await;
    let stream = TcpStream::connect(h.addr()).await.unwrap();
    let (mut sender, conn) = http1::handshake(TokioIo::new(stream)).await.unwrap();
    let conn_task = tokio::spawn(conn);
    let body = r#"{"prompt":"x","max_tokens":2000,"stream":true,"ignore_eos":true}"#;
    let req = Request::post("/v1/completions")
        .header("host", "localhost")
        .body(Full::new(Bytes::from(body)))
        .unwrap();
    let mut resp = sender.send_request(req).await.unwrap().into_body();
    resp.frame().await.unwrap().unwrap();
    assert_eq!(gauge(&h, "vllm:num_requests_running").await, 1.0);
    drop(resp);
    drop(sender);
    conn_task.abort();
    let deadline = Instant::now() + Duration::from_secs(5);
    while gauge(&h, "vllm:num_requests_running").await != 0.0 {
        assert!(
            Instant::now() < deadline,
            "request still running after disconnect"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(gauge(&h, "vllm:kv_cache_usage_perc").await, 0.0);
    h.shutdown().await.unwrap();
}

#[tokio::test]
async fn oversized_bodies_are_refused_with_413() {
    let h = start_sim(tiny()).await;
    let big = format!(r#"{{"prompt":"{}"}}"#, "a ".repeat(5 * 1024 * 1024));
    let r = send(&h, "POST", "/v1/completions", &big).await;
    assert_eq!(r.status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(send(&h, "GET", "/health", "").await.status, StatusCode::OK);
    h.shutdown().await.unwrap();
}

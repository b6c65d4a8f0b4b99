//! A small streaming test server of our own: answers OpenAI-style streaming
//! completions (or, with `pooling_body`, one JSON answer per request) with
//! known delays, and records when it actually received each request and
//! wrote each event (ground truth for client-side numbers).
#![allow(dead_code)]

pub mod cli;
pub mod server_log;
pub mod sim;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Frame;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How the test server behaves.
#[derive(Clone, Debug)]
pub struct Behaviour {
    pub ttft: Duration,
    pub per_token: Duration,
    /// Tokens streamed when the body has no max_tokens.
    pub default_tokens: u32,
    pub model: String,
    /// Answer every POST with this HTTP status (and no stream) when set.
    pub status: Option<u16>,
    /// Serve at most this many requests at once (others queue FIFO), like a
    /// server with fixed slots: capacity μ = slots / service time.
    pub slots: Option<usize>,
    /// POSTs after the first `n` answer HTTP 500 (a server that starts failing).
    pub fail_after: Option<usize>,
    /// POSTs after the first `n` never answer (a server that stalls).
    pub stall_after: Option<usize>,
    /// A pooling server: every POST waits for a slot, holds it for `ttft`,
    /// then gets this body at once (HTTP 200, JSON, not streamed).
    pub pooling_body: Option<String>,
}

impl Default for Behaviour {
    fn default() -> Self {
        Behaviour {
            ttft: Duration::from_millis(20),
            per_token: Duration::from_millis(5),
            default_tokens: 8,
            model: "test-model".into(),
            status: None,
            slots: None,
            fail_after: None,
            stall_after: None,
            pooling_body: None,
        }
    }
}

/// Ground truth for one request, in seconds since the server started.
#[derive(Clone, Debug, Default)]
pub struct Truth {
    pub request_id: String,
    pub received: f64,
    pub event_times: Vec<f64>,
    pub headers: Vec<(String, String)>,
    pub body: serde_json::Value,
}

pub struct TestServer {
    pub addr: SocketAddr,
    pub truths: Arc<Mutex<Vec<Truth>>>,
}

impl TestServer {
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

/// Start the server on 127.0.0.1:0 in the current tokio runtime.
pub async fn start(b: Behaviour) -> TestServer {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    start_on(listener, b)
}

/// Start the server on a listener the test bound itself.
pub fn start_on(listener: tokio::net::TcpListener, b: Behaviour) -> TestServer {
    let addr = listener.local_addr().unwrap();
    let truths = Arc::new(Mutex::new(Vec::new()));
    let t0 = Instant::now();
    let slots = b.slots.map(|n| Arc::new(tokio::sync::Semaphore::new(n)));
    let (b, tr) = (Arc::new((b, slots)), truths.clone());
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let _ = stream.set_nodelay(true);
            let (b, tr) = (b.clone(), tr.clone());
            tokio::spawn(async move {
                let svc = service_fn(move |req| handle(req, b.clone(), tr.clone(), t0));
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    TestServer { addr, truths }
}

type Body = http_body_util::combinators::BoxBody<Bytes, Infallible>;

fn full(s: impl Into<Bytes>) -> Body {
    Full::new(s.into()).map_err(|e| match e {}).boxed()
}

async fn handle(
    req: Request<hyper::body::Incoming>,
    bs: Arc<(Behaviour, Option<Arc<tokio::sync::Semaphore>>)>,
    truths: Arc<Mutex<Vec<Truth>>>,
    t0: Instant,
) -> Result<Response<Body>, Infallible> {
    let b = &bs.0;
    // No prefix-cache reset (like llama.cpp): `--reset-prefix-cache` must say so.
    let reset = matches!(req.uri().path(), "/reset_prefix_cache" | "/flush_cache");
    if req.method() == hyper::Method::GET || reset {
        let body = match req.uri().path() {
            "/v1/models" => format!(
                r#"{{"object":"list","data":[{{"id":"{}","object":"model","root":"org/{}"}}]}}"#,
                b.model, b.model
            ),
            "/health" => "{}".into(),
            _ => {
                return Ok(Response::builder()
                    .status(404)
                    .body(full("not found"))
                    .unwrap())
            }
        };
        return Ok(Response::new(full(body)));
    }
    let headers: Vec<(String, String)> = req
        .headers()
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_str().unwrap_or("").to_string()))
        .collect();
    let request_id = req
        .headers()
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let bytes = req
        .into_body()
        .collect()
        .await
        .map(|c| c.to_bytes())
        .unwrap_or_default();
    let received = t0.elapsed().as_secs_f64();
    let body: serde_json::Value = serde_json::from_slice(&bytes).unwrap_or_default();
    let seen = truths.lock().unwrap().len();
    if b.stall_after.is_some_and(|n| seen >= n) {
        tokio::time::sleep(Duration::from_secs(3600)).await;
    }
    let failing = b.fail_after.is_some_and(|n| seen >= n).then_some(500);
    if let Some(status) = b.status.or(failing) {
        truths.lock().unwrap().push(Truth {
            request_id,
            received,
            headers,
            body,
            ..Default::default()
        });
        // Like a careless gateway, echo the credentials in the error message:
        // kneecap must redact them from everything it prints or saves.
        let auth: Vec<String> = truths.lock().unwrap().last().map_or(vec![], |t| {
            t.headers
                .iter()
                .filter(|(k, _)| k == "authorization" || k == "x-api-key")
                .map(|(_, v)| v.clone())
                .collect()
        });
        let body = format!(
            r#"{{"error":{{"message":"test failure (got {})"}}}}"#,
            auth.join(" ")
        );
        return Ok(Response::builder().status(status).body(full(body)).unwrap());
    }
    if let Some(answer) = b.pooling_body.clone() {
        let index = {
            let mut t = truths.lock().unwrap();
            t.push(Truth {
                request_id,
                received,
                headers,
                body,
                ..Default::default()
            });
            t.len() - 1
        };
        let _permit = match bs.1.clone() {
            Some(s) => s.acquire_owned().await.ok(),
            None => None,
        };
        tokio::time::sleep(b.ttft).await;
        truths.lock().unwrap()[index]
            .event_times
            .push(t0.elapsed().as_secs_f64());
        let resp = Response::builder()
            .header("content-type", "application/json")
            .body(full(answer))
            .unwrap();
        return Ok(resp);
    }
    let chat = body.get("messages").is_some();
    let n = body
        .get("max_tokens")
        .or_else(|| body.get("max_completion_tokens"))
        .and_then(|v| v.as_u64())
        .map(|v| v as u32)
        .unwrap_or(b.default_tokens);
    let index = {
        let mut t = truths.lock().unwrap();
        t.push(Truth {
            request_id,
            received,
            headers,
            body,
            ..Default::default()
        });
        t.len() - 1
    };
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Frame<Bytes>, Infallible>>(16);
    let slot = bs.1.clone();
    let b2 = b.clone();
    tokio::spawn(async move {
        let _permit = match slot {
            Some(s) => s.acquire_owned().await.ok(),
            None => None,
        };
        stream_tokens(tx, b2, n, chat, truths, index, t0).await;
    });
    let resp = Response::builder()
        .header("content-type", "text/event-stream")
        .body(ChanBody(rx).boxed())
        .unwrap();
    Ok(resp)
}

/// A response body fed from a channel (each message is one frame).
struct ChanBody(tokio::sync::mpsc::Receiver<Result<Frame<Bytes>, Infallible>>);

impl hyper::body::Body for ChanBody {
    type Data = Bytes;
    type Error = Infallible;
    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.0.poll_recv(cx)
    }
}

async fn stream_tokens(
    tx: tokio::sync::mpsc::Sender<Result<Frame<Bytes>, Infallible>>,
    b: Behaviour,
    n: u32,
    chat: bool,
    truths: Arc<Mutex<Vec<Truth>>>,
    index: usize,
    t0: Instant,
) {
    let start = Instant::now();
    for i in 0..n {
        let due = start + b.ttft + b.per_token * i;
        sleep_precise(due).await;
        let chunk = if chat {
            format!(
                r#"data: {{"id":"x","object":"chat.completion.chunk","choices":[{{"index":0,"delta":{{"content":" t{i}"}},"finish_reason":null}}],"usage":null}}"#
            )
        } else {
            format!(
                r#"data: {{"id":"x","object":"text_completion","choices":[{{"index":0,"text":" t{i}","finish_reason":null}}],"usage":null}}"#
            )
        };
        truths.lock().unwrap()[index]
            .event_times
            .push(t0.elapsed().as_secs_f64());
        if tx
            .send(Ok(Frame::data(Bytes::from(format!("{chunk}\n\n")))))
            .await
            .is_err()
        {
            return;
        }
    }
    let usage = format!(
        "data: {{\"id\":\"x\",\"choices\":[],\"usage\":{{\"prompt_tokens\":7,\"completion_tokens\":{n},\"total_tokens\":{}}}}}\n\ndata: [DONE]\n\n",
        n + 7
    );
    let _ = tx.send(Ok(Frame::data(Bytes::from(usage)))).await;
}

/// Sleep until `due` on the tokio timer (millisecond resolution, no drift:
/// deadlines are absolute). No busy-waiting: the test server must not steal
/// CPU from the client under test.
async fn sleep_precise(due: Instant) {
    tokio::time::sleep_until(tokio::time::Instant::from_std(due)).await;
}

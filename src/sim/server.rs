//! The HTTP server around the engine: hyper 1 (HTTP/1.1, keep-alive), routing,
//! request admission, and graceful shutdown.
//!
//! Starts the engine thread, the dispatcher and the accept loop
//! (`super::conn`), and routes each request. It does no scheduling itself:
//! generation requests are parsed ([`super::api`]), checked for injected
//! refusals ([`super::fault`]), submitted to the engine thread
//! ([`super::driver`]) and answered by a body from [`super::stream`];
//! pooling requests (embeddings, rerank, pooling) are served by
//! `super::pool_serve`. The state the connection tasks share is
//! [`super::shared::Shared`]; answers are built from `super::reply`.
//! Robustness: headers, and then the body, must each arrive within
//! [`SimConfig::read_timeout`] (default [`READ_TIMEOUT`]), bodies are capped
//! at `reply::MAX_BODY`, and a bad request only ever costs that request a 4xx.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use http::{header, HeaderValue, Method, Request, Response, StatusCode};
use hyper::body::Incoming;
use tokio::net::TcpListener;
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::sync::watch;

use super::api::{parse_request, Endpoint, GenRequest, ResponseIds};
use super::api_error::ApiError;
use super::driver::{dispatch, Command, Delivery, DispatchMsg, EngineThread, Submission};
use super::fault::StreamFault;
use super::metrics::SimMetrics;
use super::model::{sampled_output_len, Engine};
use super::pool_serve::pool;
use super::pooling::PoolEndpoint;
use super::reply::{error, json, plain, read_body, refusal_error, refuse, shutting_down, unix_now};
use super::server_log::{LogRecord, ServerLog};
use super::shared::Shared;
use super::stream::{collect_tokens, finish_reason, SimBody, SseBody, Tracker};
use super::SimConfig;
use crate::rxstamp::RxCell;

/// Default time a client has to send a request's headers, and then its body.
pub const READ_TIMEOUT: Duration = Duration::from_secs(30);

/// A running simulator; dropping it without [`SimHandle::shutdown`] leaves
/// the threads to die with the process.
#[derive(Debug)]
pub struct SimHandle {
    addr: SocketAddr,
    stop: watch::Sender<bool>,
    accept: tokio::task::JoinHandle<()>,
    dispatcher: tokio::task::JoinHandle<()>,
    shared: Arc<Shared>,
    engine: EngineThread,
    server_log: Option<ServerLog>,
}

impl SimHandle {
    /// The address the server listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Largest step-clock lag so far, seconds.
    pub fn max_batch_step_lag(&self) -> f64 {
        self.shared
            .metrics
            .lock()
            .map(|m| m.batch_step_lag_max)
            .unwrap_or(0.0)
    }

    /// A snapshot of the metrics (gauges, counters, lag histogram).
    pub fn metrics(&self) -> SimMetrics {
        self.shared
            .metrics
            .lock()
            .map(|m| m.clone())
            .unwrap_or_default()
    }

    /// Stops accepting, lets in-flight responses finish (up to 2 s), stops the
    /// engine and flushes the server log.
    pub async fn shutdown(self) -> anyhow::Result<()> {
        let _ = self.stop.send(true);
        let _ = self.accept.await;
        let engine = self.engine;
        tokio::task::spawn_blocking(move || engine.stop()).await?;
        // Drops every per-request sender: streams still open end now.
        self.dispatcher.abort();
        let _ = self.dispatcher.await;
        let m = self
            .shared
            .metrics
            .lock()
            .map(|m| m.clone())
            .unwrap_or_default();
        drop(self.shared);
        let summary = serde_json::json!({
            "steps": m.counters.n_batch_steps,
            "finished": m.counters.n_finished,
            "preemptions": m.counters.n_preemptions,
            "generation_tokens": m.counters.generation_tokens,
            "prefix_cache_queries": m.counters.prefix_cache_queries,
            "prefix_cache_hits": m.counters.prefix_cache_hits,
            "step_lag_max_s": m.batch_step_lag_max,
            "step_lag_mean_s": m.batch_step_lag.sum() / m.batch_step_lag.count().max(1) as f64,
        });
        match self.server_log {
            Some(log) => tokio::task::spawn_blocking(move || log.finish(summary)).await?,
            None => Ok(()),
        }
    }
}

/// Starts the simulator on `listener`: the engine thread, the server log's
/// writer (with `cfg.server_log`) and the accept loop. Must be called inside a tokio runtime.
pub async fn start(cfg: SimConfig, listener: TcpListener) -> anyhow::Result<SimHandle> {
    cfg.validate()?;
    let acceptor = cfg.tls.as_ref().map(super::tls::acceptor).transpose()?;
    let addr = listener.local_addr()?;
    let epoch = Instant::now();
    let server_log = match &cfg.server_log {
        Some(path) => Some(ServerLog::create(path, epoch.elapsed())?),
        None => None,
    };
    let metrics = Arc::new(Mutex::new(SimMetrics {
        spec_draft_tokens: cfg.spec.map(|s| s.draft_tokens),
        gpu: cfg.gpu_watts.map(super::gpu::GpuMeter::new),
        ..SimMetrics::default()
    }));
    let (dispatch_tx, dispatch_rx) = tokio::sync::mpsc::unbounded_channel();
    let engine = EngineThread::spawn(
        Engine::new(cfg.params.clone())
            .with_prefix_caching(cfg.prefix_caching)
            .with_speculation(cfg.spec, cfg.seed)
            .with_stall_seed(cfg.seed),
        epoch,
        metrics.clone(),
        dispatch_tx.clone(),
        cfg.realtime_engine,
    )?;
    let dispatcher = tokio::spawn(dispatch(dispatch_rx, engine.tx.clone()));
    let shared = Arc::new(Shared {
        cfg,
        epoch,
        engine_tx: engine.tx.clone(),
        dispatch_tx,
        next_id: AtomicU64::new(0),
        metrics,
        server_log: server_log.as_ref().map(ServerLog::sink),
    });
    let (stop, stop_rx) = watch::channel(false);
    let accept = tokio::spawn(super::conn::accept_loop(
        listener,
        acceptor,
        shared.clone(),
        stop_rx,
        handle,
    ));
    Ok(SimHandle {
        addr,
        stop,
        accept,
        dispatcher,
        shared,
        engine,
        server_log,
    })
}

/// Answers one request, echoing its `x-request-id`.
async fn handle(
    req: Request<Incoming>,
    shared: Arc<Shared>,
) -> Result<Response<SimBody>, Infallible> {
    let request_id = req.headers().get("x-request-id").cloned();
    let mut resp = route(req, &shared).await;
    if let Some(id) = request_id {
        resp.headers_mut().insert("x-request-id", id);
    }
    Ok(resp)
}

async fn route(req: Request<Incoming>, shared: &Arc<Shared>) -> Response<SimBody> {
    let path = req.uri().path().to_owned();
    match (req.method(), path.as_str()) {
        (&Method::POST, "/v1/completions") => generate(req, shared, Endpoint::Completions).await,
        (&Method::POST, "/v1/chat/completions") => generate(req, shared, Endpoint::Chat).await,
        (&Method::POST, "/v1/responses") => generate(req, shared, Endpoint::Responses).await,
        (&Method::POST, "/v1/embeddings") => pool(req, shared, PoolEndpoint::Embeddings).await,
        (&Method::POST, "/pooling") => pool(req, shared, PoolEndpoint::Pooling).await,
        (&Method::POST, "/v1/rerank" | "/rerank" | "/v2/rerank") => {
            pool(req, shared, PoolEndpoint::Rerank).await
        }
        (&Method::POST, "/reset_prefix_cache") => {
            // Applied before any request sent after this answer (one queue).
            let _ = shared.engine_tx.send(Command::ResetPrefixCache);
            plain(StatusCode::OK, "text/plain", String::new())
        }
        (&Method::GET, "/v1/models") => json(StatusCode::OK, models_body(&shared.cfg)),
        (&Method::GET, "/health") => plain(StatusCode::OK, "text/plain", String::new()),
        (&Method::GET, "/metrics") => {
            let text = match shared.metrics.lock() {
                Ok(m) => {
                    let mut text = m.render(&shared.cfg.served_model_name);
                    if let Some(g) = &m.gpu {
                        g.render(&mut text, shared.epoch.elapsed());
                    }
                    text
                }
                Err(_) => String::new(),
            };
            plain(
                StatusCode::OK,
                "text/plain; version=0.0.4; charset=utf-8",
                text,
            )
        }
        (
            _,
            "/v1/completions"
            | "/v1/chat/completions"
            | "/v1/responses"
            | "/v1/embeddings"
            | "/pooling"
            | "/v1/rerank"
            | "/rerank"
            | "/v2/rerank"
            | "/reset_prefix_cache"
            | "/v1/models"
            | "/health"
            | "/metrics",
        ) => error(&ApiError {
            status: 405,
            kind: "MethodNotAllowed",
            message: format!("method {} not allowed on {path}", req.method()),
        }),
        _ => error(&ApiError {
            status: 404,
            kind: "NotFoundError",
            message: format!("no route for {path}"),
        }),
    }
}

fn models_body(cfg: &SimConfig) -> String {
    let name = &cfg.served_model_name;
    serde_json::json!({
        "object": "list",
        "data": [{
            "id": name, "object": "model", "created": unix_now(), "owned_by": "kneecap",
            "root": name, "parent": null, "max_model_len": cfg.params.max_model_len,
        }]
    })
    .to_string()
}

/// Handles a completions or chat request from body to response.
async fn generate(
    req: Request<Incoming>,
    shared: &Arc<Shared>,
    endpoint: Endpoint,
) -> Response<SimBody> {
    let id = shared.next_id.fetch_add(1, Ordering::Relaxed);
    let mut rec = new_record(&req, id, endpoint);
    let rx = req.extensions().get::<RxCell>().cloned();
    let body = match read_body(req, shared.cfg.read_timeout).await {
        Ok(b) => b,
        Err(err) => return refuse(shared, rec, &err, "bad_request"),
    };
    rec.arrival = shared.now();
    rec.arrival_rx = shared.rx_time(rx.as_ref());
    let cfg = &shared.cfg;
    let greq = match parse_request(endpoint, &body, cfg.params.max_model_len) {
        Ok(r) => r,
        Err(err) => return refuse(shared, rec, &err, "bad_request"),
    };
    rec.stream = greq.stream;
    rec.prompt_tokens = greq.prompt_tokens;
    rec.images = greq.images.images;
    rec.image_tokens = greq.images.tokens;
    let n_out = if greq.ignore_eos {
        greq.max_tokens
    } else {
        sampled_output_len(cfg.seed, id, greq.max_tokens)
    };
    let plan = cfg.faults.plan(cfg.seed, id, n_out);
    rec.fault = plan.name();
    if let Some(refusal) = plan.refusal {
        let (err, outcome) = refusal_error(refusal);
        return refuse(shared, rec, &err, outcome);
    }
    let Some((mut rx, mut tracker)) = submit(shared, id, &greq, n_out, rec) else {
        return error(&shutting_down());
    };
    let ids = ResponseIds::new(endpoint, id, unix_now(), &cfg.served_model_name);
    if greq.stream {
        let body = SseBody::new(rx, ids, greq, plan.stream, tracker);
        let mut resp = Response::new(SimBody::Sse(Box::new(body)));
        let h = resp.headers_mut();
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/event-stream; charset=utf-8"),
        );
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        return resp;
    }
    let Some((text, n)) = collect_tokens(&mut rx, &mut tracker).await else {
        tracker.finish("engine_stopped", 503);
        return error(&shutting_down());
    };
    if let Some((_, StreamFault::Stall(pause))) = plan.stream {
        tokio::time::sleep(pause).await;
    }
    tracker.finish("ok", 200);
    let finish = finish_reason(n, greq.max_tokens);
    json(
        StatusCode::OK,
        ids.full_response(&text, finish, greq.prompt_tokens, n),
    )
}

/// A server log record for a request that just came in.
fn new_record(req: &Request<Incoming>, id: u64, endpoint: Endpoint) -> LogRecord {
    LogRecord {
        request_id: req
            .headers()
            .get("x-request-id")
            .and_then(|v| v.to_str().ok())
            .map_or_else(|| format!("sim-{id}"), str::to_owned),
        endpoint: match endpoint {
            Endpoint::Completions => "completions",
            Endpoint::Chat => "chat",
            Endpoint::Responses => "responses",
        },
        ..LogRecord::default()
    }
}

/// Registers the request's channel with the dispatcher and queues it in the
/// engine; `None` when the simulator is shutting down.
fn submit(
    shared: &Arc<Shared>,
    id: u64,
    greq: &GenRequest,
    n_out: u32,
    rec: LogRecord,
) -> Option<(UnboundedReceiver<Delivery>, Tracker)> {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let submission = Submission {
        id,
        prompt_tokens: greq.prompt_tokens,
        prompt_blocks: greq.prompt_blocks.clone(),
        output_tokens: n_out,
        arrival: rec.arrival,
    };
    let mut tracker = Tracker::new(shared.clone(), id, rec);
    let registered = shared
        .dispatch_tx
        .send(DispatchMsg::Register(id, tx))
        .is_ok();
    if !registered || shared.engine_tx.send(Command::Submit(submission)).is_err() {
        tracker.finish("engine_stopped", 503);
        return None;
    }
    Some((rx, tracker))
}

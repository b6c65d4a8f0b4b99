//! Serving one pooling request (`/v1/embeddings`, `/pooling`, `/v1/rerank`):
//! parse it ([`super::pooling`]), submit each of its inputs to the engine as
//! a prefill-only sequence, wait for the last to finish, answer with one JSON
//! body, and log it (arrival, first admission, the engine's finish, the
//! answer handed to the connection, prompt tokens, inputs). A client that
//! goes away aborts every sequence of its request.

use std::ops::Range;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use http::{Request, Response, StatusCode};
use hyper::body::Incoming;
use tokio::sync::mpsc::UnboundedReceiver;

use super::driver::{Command, Delivery, DispatchMsg, Submission};
use super::pooling::{parse_pool_request, pool_response, PoolEndpoint};
use super::reply::{error, json, read_body, refusal_error, refuse, shutting_down, unix_now};
use super::server_log::LogRecord;
use super::shared::Shared;
use super::stream::SimBody;
use crate::rxstamp::RxCell;

/// Handles one pooling request from body to answer.
pub(super) async fn pool(
    req: Request<Incoming>,
    shared: &Arc<Shared>,
    endpoint: PoolEndpoint,
) -> Response<SimBody> {
    let mut rec = LogRecord {
        request_id: req
            .headers()
            .get("x-request-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
            .unwrap_or_default(),
        endpoint: endpoint.name(),
        ..LogRecord::default()
    };
    let rx = req.extensions().get::<RxCell>().cloned();
    let body = match read_body(req, shared.cfg.read_timeout).await {
        Ok(b) => b,
        Err(err) => return refuse(shared, rec, &err, "bad_request"),
    };
    rec.arrival = shared.now();
    rec.arrival_rx = shared.rx_time(rx.as_ref());
    let cfg = &shared.cfg;
    let preq = match parse_pool_request(endpoint, &body, cfg.params.max_model_len) {
        Ok(r) => r,
        Err(err) => return refuse(shared, rec, &err, "bad_request"),
    };
    let n = preq.inputs.len() as u64;
    let first = shared.next_id.fetch_add(n.max(1), Ordering::Relaxed);
    if rec.request_id.is_empty() {
        rec.request_id = format!("sim-{first}");
    }
    rec.prompt_tokens = preq.prompt_tokens();
    rec.inputs = preq.inputs.len() as u32;
    let plan = cfg.faults.plan(cfg.seed, first, 1);
    rec.fault = plan.refusal.and(plan.name());
    if let Some(refusal) = plan.refusal {
        let (err, outcome) = refusal_error(refusal);
        return refuse(shared, rec, &err, outcome);
    }
    let mut guard = Guard {
        shared: shared.clone(),
        ids: first..first + n,
        rec,
        done: false,
    };
    let Some(rx) = submit_inputs(shared, &preq.inputs, first, &mut guard) else {
        return error(&shutting_down());
    };
    if !await_inputs(rx, n, &mut guard).await {
        return error(&shutting_down());
    }
    let answer = pool_response(
        &preq,
        first,
        unix_now(),
        &model_json(&cfg.served_model_name),
    );
    guard.rec.first_token = Some(shared.now());
    guard.finish("ok", 200);
    json(StatusCode::OK, answer)
}

/// Submits each input as a prefill-only sequence (ids from `first`), all
/// answering on one channel; `None` (logged) when the engine has stopped.
fn submit_inputs(
    shared: &Shared,
    inputs: &[u32],
    first: u64,
    guard: &mut Guard,
) -> Option<UnboundedReceiver<Delivery>> {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    for (k, &tokens) in inputs.iter().enumerate() {
        let id = first + k as u64;
        let submission = Submission {
            id,
            prompt_tokens: tokens,
            prompt_blocks: Vec::new(),
            output_tokens: 0,
            arrival: guard.rec.arrival,
        };
        let registered = shared
            .dispatch_tx
            .send(DispatchMsg::Register(id, tx.clone()))
            .is_ok();
        if !registered || shared.engine_tx.send(Command::Submit(submission)).is_err() {
            guard.finish("engine_stopped", 503);
            return None;
        }
    }
    Some(rx)
}

/// Waits until all `n` inputs are done, tracing the first admission and the
/// preemptions; false (logged) when the engine stopped first.
async fn await_inputs(mut rx: UnboundedReceiver<Delivery>, n: u64, guard: &mut Guard) -> bool {
    let mut left = n;
    while left > 0 {
        match rx.recv().await {
            Some(Delivery::Scheduled { at, cached }) if guard.rec.scheduled.is_none() => {
                guard.rec.scheduled = Some(at);
                guard.rec.cached_tokens = cached;
            }
            Some(Delivery::Preempted) => guard.rec.preemptions += 1,
            Some(Delivery::Token { last: true, at, .. }) => {
                left -= 1;
                guard.rec.first_token_engine = Some(at);
            }
            Some(_) => {}
            None => {
                guard.finish("engine_stopped", 503);
                return false;
            }
        }
    }
    true
}

fn model_json(name: &str) -> String {
    serde_json::Value::String(name.to_owned()).to_string()
}

/// Logs the request once, and aborts its sequences if it never finished
/// (the client went away, or the server is shutting down).
struct Guard {
    shared: Arc<Shared>,
    ids: Range<u64>,
    rec: LogRecord,
    done: bool,
}

impl Guard {
    fn finish(&mut self, outcome: &'static str, status: u16) {
        if self.done {
            return;
        }
        self.done = true;
        self.rec.outcome = outcome;
        self.rec.status = status;
        self.rec.finish = self.shared.now();
        if let Some(sink) = &self.shared.server_log {
            sink.record(&self.rec);
        }
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        if !self.done {
            for id in self.ids.clone() {
                let _ = self.shared.engine_tx.send(Command::Abort(id));
            }
            self.finish("client_closed", self.rec.status);
        }
    }
}

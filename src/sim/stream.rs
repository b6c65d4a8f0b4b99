//! Response bodies: the SSE stream of one request (with its injected faults),
//! the non-streamed reply, and the per-request tracker that writes its server
//! log line and aborts the engine request if the client goes away.
//!
//! The SSE body turns engine [`Delivery`]s into vLLM-shaped chunks as hyper
//! polls it; deliveries that queued up while the socket was busy are
//! coalesced into one write (each still its own `data:` event).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::time::Sleep;

use super::api::{token_text, Endpoint, GenRequest, ResponseIds, DONE_EVENT};
use super::driver::{Command, Delivery};
use super::fault::StreamFault;
use super::server_log::LogRecord;
use super::shared::Shared;

/// Largest write a stream coalesces before yielding a frame.
const MAX_FRAME: usize = 64 * 1024;

/// Keeps a request's server log record; writes it once, on finish or on drop.
pub struct Tracker {
    /// The server's shared state (its configuration included).
    pub shared: Arc<Shared>,
    engine_id: u64,
    /// The record being filled in.
    pub rec: LogRecord,
    done: bool,
}

impl Tracker {
    /// A tracker for engine request `engine_id`.
    pub fn new(shared: Arc<Shared>, engine_id: u64, rec: LogRecord) -> Self {
        Self {
            shared,
            engine_id,
            rec,
            done: false,
        }
    }

    /// Notes a scheduling event.
    pub fn on_event(&mut self, d: &Delivery) {
        match *d {
            Delivery::Scheduled { at, cached } => {
                self.rec.scheduled = Some(at);
                self.rec.cached_tokens = cached;
            }
            Delivery::Preempted => self.rec.preemptions += 1,
            Delivery::Drafted { drafts, accepted } => {
                self.rec.spec.drafts += 1;
                self.rec.spec.draft_tokens += drafts;
                self.rec.spec.accepted_tokens += accepted;
            }
            Delivery::Token { index, at, .. } => {
                // With speculative decoding one delivery may carry several
                // tokens: those after the previous index.
                let (first, reasoning) = (self.rec.output_tokens + 1, self.reasoning_tokens());
                let answer_starts = (first..=index).contains(&(reasoning + 1));
                let now = (first == 1 || answer_starts).then(|| self.shared.now());
                if first == 1 {
                    self.rec.first_token_engine = Some(at);
                    self.rec.first_token = now;
                }
                if first <= reasoning {
                    if first == 1 {
                        self.rec.first_reasoning = now;
                    }
                    self.rec.reasoning_tokens = index.min(reasoning);
                }
                if answer_starts {
                    self.rec.first_answer = now;
                }
                self.rec.output_tokens = index;
            }
        }
    }

    /// `--reasoning-tokens`: how many leading tokens are reasoning.
    pub fn reasoning_tokens(&self) -> u32 {
        self.shared.cfg.reasoning_tokens
    }

    /// Writes the server log line with `outcome` (once).
    pub fn finish(&mut self, outcome: &'static str, status: u16) {
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

impl Drop for Tracker {
    fn drop(&mut self) {
        if !self.done {
            // The client went away (or the server is shutting down).
            let _ = self.shared.engine_tx.send(Command::Abort(self.engine_id));
            self.finish("client_closed", self.rec.status);
        }
    }
}

/// The SSE body of one streamed request.
pub struct SseBody {
    rx: UnboundedReceiver<Delivery>,
    ids: ResponseIds,
    req: GenRequest,
    fault: Option<(u32, StreamFault)>,
    stall: Option<Pin<Box<Sleep>>>,
    held: Option<Delivery>,
    cut: bool,
    ended: bool,
    tracker: Tracker,
}

impl SseBody {
    /// A stream of `rx`'s tokens, misbehaving as `fault` says.
    pub fn new(
        rx: UnboundedReceiver<Delivery>,
        ids: ResponseIds,
        req: GenRequest,
        fault: Option<(u32, StreamFault)>,
        tracker: Tracker,
    ) -> Self {
        Self {
            rx,
            ids,
            req,
            fault,
            stall: None,
            held: None,
            cut: false,
            ended: false,
            tracker,
        }
    }

    /// Appends the SSE text for one delivery (or arms a fault).
    fn handle(&mut self, d: Delivery, buf: &mut String) {
        let Delivery::Token { index, last, .. } = d else {
            self.tracker.on_event(&d);
            return;
        };
        // The tokens this delivery carries (several with speculative decoding).
        let first = self.tracker.rec.output_tokens + 1;
        if let Some((at, fault)) = self.fault {
            if (first..=index).contains(&at) {
                self.fault = None;
                match fault {
                    StreamFault::Cut => {
                        self.cut = true;
                        return;
                    }
                    StreamFault::Stall(pause) => {
                        self.stall = Some(Box::pin(tokio::time::sleep(pause)));
                        self.held = Some(d);
                        return;
                    }
                    StreamFault::Malformed => {
                        buf.push_str("data: {\"choices\": [{\"text\": \"mal\n\n")
                    }
                    StreamFault::ErrorEvent => {
                        buf.push_str("data: {\"error\":{\"message\":\"simulated engine error\",\"type\":\"InternalServerError\",\"param\":null,\"code\":500}}\n\n");
                        buf.push_str(DONE_EVENT);
                        self.ended = true;
                        self.tracker.finish("fault_error_event", 200);
                        return;
                    }
                }
            }
        }
        self.tracker.on_event(&d);
        let usage = self.req.include_usage;
        if first == 1 {
            match self.req.endpoint {
                Endpoint::Chat => buf.push_str(&self.ids.role_event(usage)),
                Endpoint::Responses => buf.push_str(&self.ids.responses_created_event()),
                Endpoint::Completions => {}
            }
        }
        let finish = last.then(|| finish_reason(index, self.req.max_tokens));
        let reasoning = self.tracker.reasoning_tokens();
        if first <= reasoning {
            let field = self.tracker.shared.cfg.reasoning_field;
            let upto = index.min(reasoning);
            let done = if upto == index { finish } else { None };
            let text = tokens_text(first, upto);
            buf.push_str(&self.ids.reasoning_event(field, &text, done, usage));
        }
        if index > reasoning {
            let text = tokens_text(first.max(reasoning + 1), index);
            buf.push_str(&self.ids.chunk_event(&text, finish, usage));
        }
        if last {
            if usage {
                let prompt = self.req.prompt_tokens;
                let reasoned = match self.req.endpoint {
                    Endpoint::Chat | Endpoint::Responses => index.min(reasoning),
                    Endpoint::Completions => 0,
                };
                buf.push_str(&self.ids.usage_event_reasoning(prompt, index, reasoned));
            }
            if self.req.endpoint != Endpoint::Responses {
                buf.push_str(DONE_EVENT);
            }
            self.ended = true;
            self.tracker.finish("ok", 200);
        }
    }
}

/// The text of output tokens `first..=last`.
fn tokens_text(first: u32, last: u32) -> String {
    (first..=last).map(token_text).collect()
}

/// `length` when the request used all of `max_tokens`, else `stop` (EOS).
pub fn finish_reason(n_out: u32, max_tokens: u32) -> &'static str {
    if n_out >= max_tokens {
        "length"
    } else {
        "stop"
    }
}

impl Body for SseBody {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        let this = self.get_mut();
        loop {
            if this.cut {
                this.cut = false;
                this.ended = true;
                this.tracker.finish("fault_cut_stream", 200);
                return Poll::Ready(Some(Err(std::io::Error::other("simulated cut stream"))));
            }
            if this.ended {
                return Poll::Ready(None);
            }
            if let Some(stall) = this.stall.as_mut() {
                ready!(stall.as_mut().poll(cx));
                this.stall = None;
            }
            let mut buf = String::new();
            if let Some(d) = this.held.take() {
                this.handle(d, &mut buf);
            }
            while !this.ended && !this.cut && this.stall.is_none() && buf.len() < MAX_FRAME {
                match this.rx.poll_recv(cx) {
                    Poll::Pending => break,
                    Poll::Ready(None) => {
                        this.ended = true;
                        this.tracker.finish("engine_stopped", 200);
                    }
                    Poll::Ready(Some(d)) => this.handle(d, &mut buf),
                }
            }
            if !buf.is_empty() {
                return Poll::Ready(Some(Ok(Frame::data(Bytes::from(buf)))));
            }
            if !this.cut && !this.ended && this.stall.is_none() {
                return Poll::Pending;
            }
        }
    }
}

/// Any response body the simulator sends.
pub enum SimBody {
    /// A complete body (sent once).
    Full(Option<Bytes>),
    /// A server-sent-events stream.
    Sse(Box<SseBody>),
}

impl SimBody {
    /// A complete body from `s`.
    pub fn full(s: impl Into<Bytes>) -> Self {
        Self::Full(Some(s.into()))
    }
}

impl Body for SimBody {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        match self.get_mut() {
            Self::Full(b) => Poll::Ready(b.take().map(|b| Ok(Frame::data(b)))),
            Self::Sse(s) => Pin::new(s.as_mut()).poll_frame(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        matches!(self, Self::Full(None))
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            Self::Full(Some(b)) => SizeHint::with_exact(b.len() as u64),
            Self::Full(None) => SizeHint::with_exact(0),
            Self::Sse(_) => SizeHint::default(),
        }
    }
}

/// Waits for every token of a non-streamed request; returns the text and
/// token count, or `None` if the engine stopped first.
pub async fn collect_tokens(
    rx: &mut UnboundedReceiver<Delivery>,
    tracker: &mut Tracker,
) -> Option<(String, u32)> {
    let mut text = String::new();
    while let Some(d) = rx.recv().await {
        let first = tracker.rec.output_tokens + 1;
        tracker.on_event(&d);
        if let Delivery::Token { index, last, .. } = d {
            text.push_str(&tokens_text(first, index));
            if last {
                return Some((text, index));
            }
        }
    }
    None
}

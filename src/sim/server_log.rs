//! The server log (`--trace FILE`): one JSON line per finished or failed
//! request, written by a background thread so connection tasks never block
//! on the file. (Not a replay trace: that is `workload::trace`.)
//!
//! The first line is an anchor relating the monotonic sim clock to wall time:
//! `{"anchor":{"unix_s":…,"sim_s":0.0}}`. Every later line is a [`LogRecord`]
//! with times in seconds since the sim started (monotonic). The last line,
//! written at shutdown, is `{"summary":{…}}` with the engine's counters and
//! the batch-step clock's lag.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::mpsc::{channel, Sender};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::Context as _;

/// What the server knows about one request when it ends.
#[derive(Debug, Clone, Default)]
pub struct LogRecord {
    /// `x-request-id` header, or a generated `sim-N`.
    pub request_id: String,
    /// `completions`, `chat`, `responses`, or a pooling API's `embeddings`,
    /// `pooling`, `rerank`.
    pub endpoint: &'static str,
    /// Whether the response was streamed.
    pub stream: bool,
    /// HTTP status sent.
    pub status: u16,
    /// `ok`, or why it did not complete (`bad_request`, `fault_http_500`, …).
    pub outcome: &'static str,
    /// The fault injected into this request, if any (`http_500`, `http_429`,
    /// `cut_stream`, `malformed`, `stall`, `error_event`): ground truth for
    /// a client's failure classification.
    pub fault: Option<&'static str>,
    /// Body fully received, as the handler saw it.
    pub arrival: Duration,
    /// When the kernel received the request's last byte (`SO_TIMESTAMPNS`
    /// on the connection), where the socket gave a stamp: the arrival
    /// without the simulator's own wait to be scheduled.
    pub arrival_rx: Option<Duration>,
    /// First admitted to the running batch.
    pub scheduled: Option<Duration>,
    /// First token released by the engine (end of its prefill step).
    pub first_token_engine: Option<Duration>,
    /// First token handed to the connection for writing.
    pub first_token: Option<Duration>,
    /// Last byte handed to the connection, or failure time.
    pub finish: Duration,
    /// Prompt tokens (image tokens included).
    pub prompt_tokens: u32,
    /// Images in the request's messages.
    pub images: u32,
    /// Prompt tokens the images were charged (see `sim::images`).
    pub image_tokens: u32,
    /// Prompt tokens the prefix cache served at first admission.
    pub cached_tokens: u32,
    /// Output tokens sent.
    pub output_tokens: u32,
    /// Times the request was preempted.
    pub preemptions: u32,
    /// `--reasoning-tokens`: first reasoning token handed to the connection.
    pub first_reasoning: Option<Duration>,
    /// `--reasoning-tokens`: first answer token handed to the connection.
    pub first_answer: Option<Duration>,
    /// Reasoning tokens sent.
    pub reasoning_tokens: u32,
    /// Pooling APIs: the sequences the request held (inputs, or rerank
    /// documents); 0 for generation. For them `first_token_engine` is when
    /// the last sequence finished its prefill and `first_token` when the
    /// answer was handed to the connection.
    pub inputs: u32,
    /// Speculative decoding: drafts, draft tokens and accepted draft tokens
    /// of this request (its share of vLLM's `spec_decode_*` counters;
    /// written only when it drafted).
    pub spec: SpecCounts,
}

/// One request's share of the speculative-decoding counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SpecCounts {
    /// Drafts proposed (one per decode step).
    pub drafts: u32,
    /// Draft tokens proposed.
    pub draft_tokens: u32,
    /// Draft tokens accepted.
    pub accepted_tokens: u32,
}

impl LogRecord {
    /// The JSON line (without newline).
    pub fn to_json(&self) -> String {
        let s = |d: Option<Duration>| d.map(|d| d.as_secs_f64());
        let mut line = serde_json::json!({
            "request_id": self.request_id,
            "endpoint": self.endpoint,
            "stream": self.stream,
            "status": self.status,
            "outcome": self.outcome,
            "fault": self.fault,
            "arrival_s": self.arrival.as_secs_f64(),
            "arrival_rx_s": s(self.arrival_rx),
            "scheduled_s": s(self.scheduled),
            "first_token_engine_s": s(self.first_token_engine),
            "first_token_s": s(self.first_token),
            "finish_s": self.finish.as_secs_f64(),
            "prompt_tokens": self.prompt_tokens,
            "images": self.images,
            "image_tokens": self.image_tokens,
            "cached_tokens": self.cached_tokens,
            "output_tokens": self.output_tokens,
            "preemptions": self.preemptions,
            "first_reasoning_s": s(self.first_reasoning),
            "first_answer_s": s(self.first_answer),
            "reasoning_tokens": self.reasoning_tokens,
            "inputs": self.inputs,
        });
        if self.spec.drafts > 0 {
            line["spec_drafts"] = self.spec.drafts.into();
            line["spec_draft_tokens"] = self.spec.draft_tokens.into();
            line["spec_accepted_tokens"] = self.spec.accepted_tokens.into();
        }
        line.to_string()
    }
}

#[derive(Debug)]
enum Msg {
    Line(String),
    Stop,
}

/// Cheap, cloneable handle that queues records for the writer thread.
#[derive(Debug, Clone)]
pub struct LogSink {
    tx: Sender<Msg>,
}

impl LogSink {
    /// Queues one record (dropped silently if the writer has stopped).
    pub fn record(&self, rec: &LogRecord) {
        let _ = self.tx.send(Msg::Line(rec.to_json()));
    }
}

/// The writer thread.
#[derive(Debug)]
pub struct ServerLog {
    sink: LogSink,
    thread: JoinHandle<std::io::Result<()>>,
}

impl ServerLog {
    /// Creates `path` and writes the anchor line; `sim_now` is the sim clock now.
    pub fn create(path: &Path, sim_now: Duration) -> anyhow::Result<Self> {
        let file = File::create(path)
            .with_context(|| format!("--trace: cannot create {}", path.display()))?;
        let mut out = BufWriter::new(file);
        let unix = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs_f64();
        let anchor =
            serde_json::json!({"anchor": {"unix_s": unix, "sim_s": sim_now.as_secs_f64()}});
        writeln!(out, "{anchor}")?;
        let (tx, rx) = channel::<Msg>();
        let thread = std::thread::Builder::new()
            .name("kneecap-sim-log".into())
            .spawn(move || {
                while let Ok(Msg::Line(line)) = rx.recv() {
                    writeln!(out, "{line}")?;
                }
                out.flush()
            })?;
        Ok(Self {
            sink: LogSink { tx },
            thread,
        })
    }

    /// A handle for connection tasks.
    pub fn sink(&self) -> LogSink {
        self.sink.clone()
    }

    /// Writes what was queued, then a last `{"summary":…}` line, flushes and
    /// closes the file.
    pub fn finish(self, summary: serde_json::Value) -> anyhow::Result<()> {
        let line = serde_json::json!({ "summary": summary }).to_string();
        let _ = self.sink.tx.send(Msg::Line(line));
        let _ = self.sink.tx.send(Msg::Stop);
        match self.thread.join() {
            Ok(res) => res.context("writing the --trace file"),
            Err(_) => anyhow::bail!("the server log's writer thread panicked"),
        }
    }
}

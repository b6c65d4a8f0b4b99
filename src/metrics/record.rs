//! RequestRecord: everything the engine observed about one request, as
//! offsets from the run's start instant. No statistics here.

use std::time::Duration;

/// llama.cpp's own per-request `timings` (sent with its final chunk), for
/// checking our TTFT/TPOT against the server's numbers.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Timings {
    /// Prompt tokens served from the prompt cache (not processed).
    pub cache_n: Option<u32>,
    /// Prompt tokens processed (not counting cached ones).
    pub prompt_n: Option<u32>,
    /// Prompt processing time, milliseconds.
    pub prompt_ms: Option<f64>,
    /// Tokens generated.
    pub predicted_n: Option<u32>,
    /// Generation time, milliseconds.
    pub predicted_ms: Option<f64>,
}

/// Failure classes. These are counted in reports, so keep them stable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ErrorKind {
    /// Could not open a connection (refused, unreachable, DNS).
    Connect,
    /// The connection was reset or closed mid-request.
    Reset,
    /// HTTP status other than 200 (429 is counted apart, see `RateLimited`).
    Status,
    /// HTTP 429 Too Many Requests.
    RateLimited,
    /// The request exceeded its timeout.
    Timeout,
    /// The stream ended before any token event, or was cut before `[DONE]`/end.
    Truncated,
    /// Malformed SSE or JSON in the stream.
    Protocol,
    /// The server sent an error object inside the stream.
    ServerError,
    /// The run was interrupted before this request finished.
    Cancelled,
}

impl ErrorKind {
    /// Stable snake_case name used in JSON and console output.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::Connect => "connect",
            ErrorKind::Reset => "reset",
            ErrorKind::Status => "http_status",
            ErrorKind::RateLimited => "http_429",
            ErrorKind::Timeout => "timeout",
            ErrorKind::Truncated => "truncated",
            ErrorKind::Protocol => "protocol",
            ErrorKind::ServerError => "server_error",
            ErrorKind::Cancelled => "cancelled",
        }
    }
}

/// Which clock a request's arrival times came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub enum StampSource {
    /// When the read returned on the request's task (includes the task's
    /// wait to be scheduled).
    #[default]
    Task,
    /// When the kernel received the data (`SO_TIMESTAMPNS`).
    Kernel,
}

impl StampSource {
    /// Stable name used in JSON and console output.
    pub fn as_str(self) -> &'static str {
        match self {
            StampSource::Task => "task",
            StampSource::Kernel => "kernel",
        }
    }
}

/// A classified failure with its message (never containing secrets).
#[derive(Debug, Clone, PartialEq)]
pub struct RequestError {
    pub kind: ErrorKind,
    /// HTTP status, when there was one.
    pub status: Option<u16>,
    pub message: String,
}

/// One request as observed by the client. All instants are offsets from the
/// run's start (the dispatcher's t0), so records are plain data.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RequestRecord {
    /// Position in the dataset order (also the `x-request-id` suffix).
    pub index: usize,
    /// When the schedule said this request was due.
    pub due: Duration,
    /// When the dispatcher released it (before any concurrency wait).
    pub released: Duration,
    /// vLLM's `start_time`: just before the POST, after the concurrency cap admitted it.
    pub sent: Duration,
    /// Arrival of the first SSE message with non-empty `choices`.
    pub first_token: Option<Duration>,
    /// Arrival of the last SSE message with non-empty `choices`.
    pub last_token: Option<Duration>,
    /// kneecap: arrival of the first message carrying answer text (non-empty
    /// `text` / `delta.content`, never `reasoning_content` / `reasoning`): TTFO.
    pub first_answer: Option<Duration>,
    /// kneecap: messages that carried a non-empty reasoning delta.
    pub reasoning_events: u32,
    /// kneecap: `usage.completion_tokens_details.reasoning_tokens`, when sent.
    pub usage_reasoning_tokens: Option<u32>,
    /// One gap per later message with non-empty `choices` (vLLM's ITL).
    pub itl: Vec<Duration>,
    /// Prompt tokens: the dataset's count, overwritten by `usage.prompt_tokens`.
    pub prompt_len: u32,
    /// Pooling requests: the inputs it carried (vLLM's `num_input_sequences`):
    /// a rerank request's documents, a batched input's length, else 1.
    /// 0 for generation requests.
    pub input_sequences: u32,
    /// `usage.completion_tokens` (0 when the server sent no usage).
    pub output_tokens: u32,
    /// Concatenated `text` / `delta.content` (used when usage is missing).
    pub generated_text: String,
    /// `None` on success.
    pub error: Option<RequestError>,
    /// The server's own account of this request (llama.cpp's `timings`, sent
    /// with its final chunk), to check client TTFT/TPOT against.
    pub server_timings: Option<Box<Timings>>,
    /// Where the first token's arrival time came from (the rest of the
    /// stream's reads use the same source).
    pub stamp: StampSource,
    /// kneecap: client scheduling delay at the first token, the task's read
    /// minus the kernel's receive time (`None` with task stamps).
    pub first_token_delay: Option<Duration>,
    /// The ITL gaps moved into the run's [`crate::metrics::fold::ItlFold`]
    /// (a long run without per-request detail); `itl` is then empty.
    pub itl_folded: bool,
    /// A session's turn: which session and which turn (`None` outside sessions).
    pub turn: Option<SessionTurn>,
}

/// Where a request sits in a multi-turn session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SessionTurn {
    /// The session's number (in start order).
    pub session: usize,
    /// 1-based turn number within the session.
    pub turn: u32,
}

impl RequestRecord {
    /// True when the request succeeded (vLLM's `success`).
    pub fn is_ok(&self) -> bool {
        self.error.is_none()
    }

    /// TTFT measured from `sent` (vLLM's definition).
    pub fn ttft(&self) -> Option<Duration> {
        self.first_token.map(|t| t.saturating_sub(self.sent))
    }

    /// TTFT as the request's task saw it: the kernel-stamped TTFT plus the
    /// scheduling delay (the same as [`Self::ttft`] with task stamps).
    pub fn ttft_task_stamped(&self) -> Option<Duration> {
        self.ttft()
            .map(|t| t + self.first_token_delay.unwrap_or_default())
    }

    /// E2EL measured from `sent` to the last token event (vLLM's `latency`).
    pub fn latency(&self) -> Option<Duration> {
        self.last_token.map(|t| t.saturating_sub(self.sent))
    }

    /// TTFO, time to the first answer token, measured from `sent` (kneecap).
    pub fn ttfo(&self) -> Option<Duration> {
        self.first_answer.map(|t| t.saturating_sub(self.sent))
    }

    /// Reasoning tokens: the server's `usage.completion_tokens_details.reasoning_tokens`,
    /// else the reasoning messages counted (one per SSE message).
    pub fn reasoning_tokens(&self) -> u32 {
        self.usage_reasoning_tokens.unwrap_or(self.reasoning_events)
    }

    /// Answer tokens: output tokens minus reasoning tokens.
    pub fn answer_tokens(&self) -> u32 {
        self.output_tokens.saturating_sub(self.reasoning_tokens())
    }

    /// Dispatch lateness: sent minus due.
    pub fn lateness(&self) -> Duration {
        self.sent.saturating_sub(self.due)
    }

    /// Client queue time: sent minus released (time waiting for the concurrency cap).
    pub fn queue_time(&self) -> Duration {
        self.sent.saturating_sub(self.released)
    }
}

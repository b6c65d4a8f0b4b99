//! `kneecap run` / `kneecap bench serve` arguments: vLLM `bench serve` flag
//! names and defaults, plus kneecap's own (timeouts, duration, arrival).

use super::duration::parse_duration;
use clap::{Args, ValueEnum};
use std::path::PathBuf;

/// `--ui`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Ui {
    Dashboard,
    Plain,
    None,
}

/// Request protocol (vLLM's `--backend`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Backend {
    /// Streaming `/v1/completions`.
    Vllm,
    /// Streaming `/v1/completions`.
    Openai,
    /// Streaming `/v1/chat/completions`.
    #[value(name = "openai-chat")]
    OpenaiChat,
    /// Streaming `/v1/responses` (OpenAI Responses API).
    #[value(name = "openai-responses")]
    OpenaiResponses,
    /// `/v1/embeddings`, not streamed: end-to-end latency only.
    #[value(name = "openai-embeddings")]
    OpenaiEmbeddings,
    /// vLLM's `/v1/rerank` (a query and documents), not streamed.
    #[value(name = "vllm-rerank")]
    VllmRerank,
    /// vLLM's `/pooling`, not streamed.
    #[value(name = "vllm-pooling")]
    VllmPooling,
}

/// Dataset (vLLM's `--dataset-name`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DatasetName {
    /// Synthetic prompts of --random-input-len tokens.
    Random,
    /// A ShareGPT JSON file (--dataset-path).
    Sharegpt,
    /// A JSONL file of {"prompt": ...} rows (--dataset-path).
    Custom,
    /// Prompts sharing one of a few long prefixes (vLLM's `prefix_repetition`).
    #[value(name = "prefix_repetition", alias = "prefix-repetition")]
    PrefixRepetition,
    /// Lengths from the BurstGPT trace CSV (--dataset-path).
    Burstgpt,
    /// Random text with synthetic JPEG images (chat backends; --random-mm-*).
    #[value(name = "random-mm")]
    RandomMm,
    /// A query and documents for rerank / embeddings backends.
    #[value(name = "random-rerank")]
    RandomRerank,
    /// A trace to replay: vLLM's timed_trace JSONL or an Azure trace CSV (--dataset-path).
    #[value(name = "timed_trace", alias = "timed-trace")]
    TimedTrace,
    /// Poem-line prompts from a text file (--dataset-path; --sonnet-*).
    Sonnet,
    /// A local copy of a Hugging Face text set (--dataset-path, --hf-name).
    Hf,
}

/// vLLM's `--ramp-up-strategy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RampUp {
    Linear,
    Exponential,
}

/// `--multi-turn-delay-dist`: how think times are drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DelayDist {
    /// Exactly --multi-turn-delay-ms.
    Fixed,
    /// Exponential with mean --multi-turn-delay-ms.
    Exponential,
}

/// Arrival process for a finite `--request-rate` (kneecap extension).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ArrivalKind {
    /// Gamma gaps with shape `--burstiness` (1 = Poisson), as vLLM.
    Gamma,
    /// Poisson arrivals (same as gamma with burstiness 1).
    Poisson,
    /// Evenly spaced arrivals, exactly 1/rate apart.
    Constant,
}

#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    // ---- target -------------------------------------------------------
    /// Request protocol: vllm / openai (completions), openai-chat,
    /// openai-responses; pooling (not streamed, E2EL only): openai-embeddings,
    /// vllm-rerank, vllm-pooling.
    #[arg(long, value_enum, help_heading = "Target")]
    pub backend: Option<Backend>,
    /// Server root, e.g. http://127.0.0.1:8000 (overrides --host/--port).
    /// Without it and without --host/--port, `kneecap run` starts the built-in
    /// simulator; `kneecap bench serve` uses vLLM's default, http://127.0.0.1:8000.
    #[arg(long, help_heading = "Target")]
    pub base_url: Option<String>,
    /// Host when --base-url is absent [default: 127.0.0.1].
    #[arg(long, help_heading = "Target")]
    pub host: Option<String>,
    /// Port when --base-url is absent [default: 8000].
    #[arg(long, help_heading = "Target")]
    pub port: Option<u16>,
    /// API path [default: /v1/completions; /v1/chat/completions for
    /// openai-chat; /v1/responses for openai-responses; /v1/embeddings,
    /// /v1/rerank, /pooling for the pooling backends].
    #[arg(long, help_heading = "Target")]
    pub endpoint: Option<String>,
    /// Extra HTTP header(s) KEY=VALUE on every request (repeatable).
    #[arg(long = "header", value_name = "KEY=VALUE", num_args = 1.., action = clap::ArgAction::Append, help_heading = "Target")]
    pub headers: Vec<String>,
    /// https: accept any server certificate (verification off; for test
    /// servers with self-signed certificates).
    #[arg(long, help_heading = "Target")]
    pub insecure: bool,
    /// https: also trust the CA certificate(s) in this PEM file (besides the
    /// system's and Mozilla's roots); a server certificate that is one of
    /// them exactly (e.g. made by `openssl req -x509`) is accepted as is.
    /// Proxies come from HTTPS_PROXY / HTTP_PROXY / NO_PROXY.
    #[arg(long, value_name = "FILE", help_heading = "Target")]
    pub ca_cert: Option<PathBuf>,
    /// Where arrival times come from: `kernel`, the kernel's receive time
    /// of each read (SO_TIMESTAMPNS; Linux, falling back to `task` where a
    /// socket gives none), or `task`, when the read returns on the request's
    /// task (includes the client's scheduling delay, as vLLM's clients do).
    #[arg(
        long,
        value_enum,
        default_value = "kernel",
        env = "KNEECAP_RX_TIMESTAMPS",
        help_heading = "Target"
    )]
    pub rx_timestamps: RxTimestamps,
    /// Bearer token (also read from OPENAI_API_KEY); never written anywhere.
    #[arg(long, env = "OPENAI_API_KEY", hide_env_values = true, hide = true)]
    pub api_key: Option<String>,
    /// Per-request timeout covering the whole stream, e.g. 600s, 10m.
    #[arg(long, default_value = "10m", value_parser = parse_duration, help_heading = "Target")]
    pub request_timeout: std::time::Duration,
    /// TCP connect timeout.
    #[arg(long, default_value = "10s", value_parser = parse_duration, help_heading = "Target")]
    pub connect_timeout: std::time::Duration,
    /// Simulator preset used when `kneecap run` is given no server (see `kneecap sim --help`).
    #[arg(long, default_value = "tiny", help_heading = "Target")]
    pub sim_preset: String,

    // ---- model / tokenizer ---------------------------------------------
    /// Model name; if absent, the first id from GET /v1/models.
    #[arg(long, help_heading = "Model")]
    pub model: Option<String>,
    /// Name put in request bodies (defaults to --model).
    #[arg(long, help_heading = "Model")]
    pub served_model_name: Option<String>,
    /// Path to a Hugging Face tokenizer.json (or a directory holding one). Read
    /// locally; nothing is downloaded. Without it, token counts come from the server's usage.
    #[arg(long, help_heading = "Model")]
    pub tokenizer: Option<PathBuf>,
    /// Accepted for compatibility; ignored.
    #[arg(long, hide = true)]
    pub tokenizer_mode: Option<String>,
    /// Accepted for compatibility; ignored.
    #[arg(long, hide = true)]
    pub trust_remote_code: bool,

    // ---- dataset -------------------------------------------------------
    /// Dataset, by vLLM's name.
    #[arg(long, value_enum, default_value = "random", help_heading = "Dataset")]
    pub dataset_name: DatasetName,
    /// Dataset file (sharegpt JSON, burstgpt CSV, custom JSONL, timed_trace
    /// JSONL, sonnet text; hf: a JSON/JSONL file or folder).
    #[arg(long, help_heading = "Dataset")]
    pub dataset_path: Option<PathBuf>,
    /// Number of requests to send.
    #[arg(long, default_value_t = 1000, help_heading = "Dataset")]
    pub num_prompts: usize,
    /// Seed for prompts and the arrival schedule.
    #[arg(long, default_value_t = 0, help_heading = "Dataset")]
    pub seed: u64,
    /// Alias of --random-input-len.
    #[arg(long, help_heading = "Dataset")]
    pub input_len: Option<u32>,
    /// Alias of the dataset's output length flag.
    #[arg(long, help_heading = "Dataset")]
    pub output_len: Option<u32>,
    #[arg(long, help_heading = "Dataset")]
    pub no_oversample: bool,
    #[arg(long, help_heading = "Dataset")]
    pub disable_shuffle: bool,
    /// Accepted for compatibility (kneecap never applies a chat template).
    #[arg(long, hide = true)]
    pub skip_chat_template: bool,
    /// Accepted for compatibility: in vLLM a dataset-loading option, not response streaming.
    #[arg(long, hide = true)]
    pub no_stream: bool,
    /// Accepted for compatibility; no effect on the serving path (as in vLLM).
    #[arg(long, hide = true)]
    pub use_beam_search: bool,
    /// Accepted for compatibility: kneecap needs no tokenizer (counts come from usage).
    #[arg(long, hide = true)]
    pub skip_tokenizer_init: bool,
    #[arg(long, default_value_t = 1024, help_heading = "Dataset")]
    pub random_input_len: u32,
    #[arg(long, default_value_t = 128, help_heading = "Dataset")]
    pub random_output_len: u32,
    /// A float in [0,1), or {"input": r1, "output": r2}.
    #[arg(long, default_value = "0.0", help_heading = "Dataset")]
    pub random_range_ratio: String,
    #[arg(long, default_value_t = 0, help_heading = "Dataset")]
    pub random_prefix_len: u32,
    #[arg(long, help_heading = "Dataset")]
    pub sharegpt_output_len: Option<u32>,
    /// Pooling backends: inputs per request (random: prompts sent as one
    /// `input` list; random-rerank: documents per query).
    #[arg(long, default_value_t = 1, help_heading = "Dataset")]
    pub random_batch_size: usize,
    /// random-rerank for an embedding model rather than a reranker: no
    /// separator token; the query is each request's first input.
    #[arg(long, help_heading = "Dataset")]
    pub no_reranker: bool,
    /// prefix_repetition: tokens of each shared prefix.
    #[arg(long, default_value_t = 256, help_heading = "Dataset")]
    pub prefix_repetition_prefix_len: u32,
    /// prefix_repetition: tokens of each request's own suffix.
    #[arg(long, default_value_t = 256, help_heading = "Dataset")]
    pub prefix_repetition_suffix_len: u32,
    /// prefix_repetition: how many distinct prefixes.
    #[arg(long, default_value_t = 10, help_heading = "Dataset")]
    pub prefix_repetition_num_prefixes: u32,
    /// prefix_repetition: output tokens per request.
    #[arg(long, default_value_t = 128, help_heading = "Dataset")]
    pub prefix_repetition_output_len: u32,
    /// -1 takes each row's output_tokens.
    #[arg(
        long,
        default_value_t = 256,
        allow_negative_numbers = true,
        help_heading = "Dataset"
    )]
    pub custom_output_len: i64,
    /// sonnet: most prompt tokens (prompts drawn longer are drawn again).
    #[arg(long, default_value_t = 550, help_heading = "Dataset")]
    pub sonnet_input_len: u32,
    /// sonnet: output tokens per request.
    #[arg(long, default_value_t = 150, help_heading = "Dataset")]
    pub sonnet_output_len: u32,
    /// sonnet: tokens of the poem's first lines every prompt shares.
    #[arg(long, default_value_t = 200, help_heading = "Dataset")]
    pub sonnet_prefix_len: u32,

    // ---- load ----------------------------------------------------------
    /// Mean arrivals per second, or inf (all at once).
    #[arg(long, default_value = "inf", value_parser = parse_rate, help_heading = "Load")]
    pub request_rate: f64,
    /// Gamma shape of inter-arrival gaps (1 = Poisson, <1 burstier, inf = evenly spaced).
    #[arg(long, default_value = "1.0", value_parser = parse_rate, help_heading = "Load")]
    pub burstiness: f64,
    /// Arrival process for a finite rate.
    #[arg(long, value_enum, default_value = "gamma", help_heading = "Load")]
    pub arrival: ArrivalKind,
    /// Cap on requests in flight (closed loop with --request-rate inf).
    #[arg(long, help_heading = "Load")]
    pub max_concurrency: Option<usize>,
    /// Run for this long instead of a fixed --num-prompts (e.g. 60s, 5m).
    #[arg(long, value_parser = parse_duration, help_heading = "Load")]
    pub duration: Option<std::time::Duration>,
    #[arg(long, value_enum, help_heading = "Load")]
    pub ramp_up_strategy: Option<RampUp>,
    #[arg(long, help_heading = "Load")]
    pub ramp_up_start_rps: Option<u32>,
    #[arg(long, help_heading = "Load")]
    pub ramp_up_end_rps: Option<u32>,
    /// Warm-up requests (copies of the first prompt) before the timed run.
    #[arg(long, default_value_t = 0, help_heading = "Load")]
    pub num_warmups: usize,
    /// Poll the server with the first request until it succeeds (seconds; 0 = skip).
    #[arg(long, default_value_t = 0, help_heading = "Load")]
    pub ready_check_timeout_sec: u64,
    /// Send ignore_eos: true (forced on for random and random-mm, as vLLM does).
    #[arg(long, help_heading = "Load")]
    pub ignore_eos: bool,

    // ---- scale-out -----------------------------------------------------
    /// Send shard INDEX of COUNT of the load (e.g. 0/4). Every shard builds the
    /// same seeded schedule and keeps its share; combine the shards' result
    /// files with `kneecap merge`.
    #[arg(long, value_name = "INDEX/COUNT", help_heading = "Scale-out")]
    pub shard: Option<String>,
    /// Common start of all shards: RFC 3339 (2026-05-01T12:00:00Z) or Unix
    /// seconds; at most 1 h ahead, at most 5 s past.
    #[arg(long, value_name = "TIME", help_heading = "Scale-out")]
    pub start_at: Option<String>,

    // ---- sampling ------------------------------------------------------
    #[arg(long, help_heading = "Sampling")]
    pub temperature: Option<f64>,
    #[arg(long, help_heading = "Sampling")]
    pub top_p: Option<f64>,
    #[arg(long, allow_negative_numbers = true, help_heading = "Sampling")]
    pub top_k: Option<i64>,
    #[arg(long, help_heading = "Sampling")]
    pub min_p: Option<f64>,
    #[arg(long, allow_negative_numbers = true, help_heading = "Sampling")]
    pub frequency_penalty: Option<f64>,
    #[arg(long, allow_negative_numbers = true, help_heading = "Sampling")]
    pub presence_penalty: Option<f64>,
    #[arg(long, help_heading = "Sampling")]
    pub repetition_penalty: Option<f64>,
    #[arg(long, help_heading = "Sampling")]
    pub logprobs: Option<u32>,
    /// JSON object merged into every request body (wins over every other key).
    #[arg(long, help_heading = "Sampling")]
    pub extra_body: Option<String>,

    // ---- output --------------------------------------------------------
    /// Metrics with a stats block: ttft,tpot,itl,e2el (+ client_queue_time,
    /// e2el_including_client_queue) [default: ttft,tpot,itl].
    #[arg(long, help_heading = "Output")]
    pub percentile_metrics: Option<String>,
    /// Percentiles to report, comma separated, e.g. 50,90,99.
    #[arg(long, default_value = "99", help_heading = "Output")]
    pub metric_percentiles: String,
    /// SLOs in ms for goodput: ttft:MS tpot:MS e2el:MS.
    #[arg(long, num_args = 1.., value_name = "KEY:MS", help_heading = "Output")]
    pub goodput: Vec<String>,
    #[arg(long, help_heading = "Output")]
    pub save_result: bool,
    /// Keep per-request arrays in the JSON.
    #[arg(long, help_heading = "Output")]
    pub save_detailed: bool,
    /// Append the JSON object as a new line to an existing file.
    #[arg(long, help_heading = "Output")]
    pub append_result: bool,
    #[arg(long, help_heading = "Output")]
    pub result_dir: Option<PathBuf>,
    #[arg(long, help_heading = "Output")]
    pub result_filename: Option<String>,
    #[arg(long, help_heading = "Output")]
    pub label: Option<String>,
    /// KEY=VALUE pairs copied into the result JSON.
    #[arg(long, num_args = 1.., value_name = "KEY=VALUE", help_heading = "Output")]
    pub metadata: Vec<String>,
    /// Request id prefix [default: bench-<8 random hex>-].
    #[arg(long, help_heading = "Output")]
    pub request_id_prefix: Option<String>,
    /// No progress bar.
    #[arg(long, help_heading = "Output")]
    pub disable_tqdm: bool,
    /// Live view: `dashboard` (a terminal dashboard), `plain` (line-per-update
    /// output and a progress bar on stderr) or `none` [default: dashboard when
    /// stdout is a terminal, else plain].
    #[arg(long, value_enum, help_heading = "Live")]
    pub ui: Option<Ui>,
    /// Serve kneecap's own Prometheus metrics at http://ADDR/metrics (e.g.
    /// 127.0.0.1:9464; port 0 picks a free port, printed on stderr).
    #[arg(long, value_name = "ADDR", help_heading = "Live")]
    pub metrics_listen: Option<String>,
    /// Keep serving --metrics-listen this long after the run ends, so a last
    /// scrape sees the final counts.
    #[arg(long, default_value = "0s", value_parser = parse_duration, help_heading = "Live")]
    pub metrics_linger: std::time::Duration,
    /// `--gpu-metrics-url`, `--gpu-sample-interval`: GPU power and energy.
    #[command(flatten)]
    pub gpu: super::gpu::GpuArgs,

    // ---- trace replay --------------------------------------------------
    #[command(flatten)]
    pub trace: super::trace::TraceArgs,

    // ---- multi-turn sessions (vllm-bench's flag names) -----------------
    /// Multi-turn sessions over the chat API: each turn sends the whole
    /// conversation so far, the server's answers included. --num-prompts
    /// counts sessions and --request-rate is sessions per second.
    #[arg(long, help_heading = "Multi-turn")]
    pub multi_turn: bool,
    /// Turns per session.
    #[arg(long, default_value_t = 3, help_heading = "Multi-turn")]
    pub multi_turn_num_turns: u32,
    /// With --multi-turn-max-turns: turns drawn uniformly in [min, max]
    /// (sharegpt/custom: sessions with fewer user turns are skipped). 0 = unset.
    #[arg(long, default_value_t = 0, help_heading = "Multi-turn")]
    pub multi_turn_min_turns: u32,
    /// Most turns per session (sharegpt/custom: later turns dropped; 0 = all). 0 = unset.
    #[arg(long, default_value_t = 0, help_heading = "Multi-turn")]
    pub multi_turn_max_turns: u32,
    /// Closed loop over this many users: each runs sessions back to back and
    /// holds its slot through think time (unlike vllm-bench, where the slot
    /// is a request's).
    #[arg(long, help_heading = "Multi-turn")]
    pub multi_turn_concurrency: Option<usize>,
    /// Think time between an answer and the next turn, milliseconds (the
    /// mean with --multi-turn-delay-dist exponential).
    #[arg(long, default_value_t = 0.0, help_heading = "Multi-turn")]
    pub multi_turn_delay_ms: f64,
    /// Think time distribution (kneecap extension).
    #[arg(long, value_enum, default_value = "fixed", help_heading = "Multi-turn")]
    pub multi_turn_delay_dist: DelayDist,
    /// Input tokens each turn after the first adds (random dataset; 0 = --random-input-len).
    #[arg(long, default_value_t = 0, help_heading = "Multi-turn")]
    pub per_turn_input_len: u32,

    // ---- the rest of vLLM's command line -------------------------------
    #[command(flatten)]
    pub vllm: super::vllm::VllmArgs,
}

/// Parse a rate or burstiness: a positive float, or `inf`.
pub fn parse_rate(s: &str) -> Result<f64, String> {
    let t = s.trim().to_ascii_lowercase();
    if matches!(t.as_str(), "inf" | "infinity" | "+inf") {
        return Ok(f64::INFINITY);
    }
    let v: f64 = t
        .parse()
        .map_err(|_| format!("'{s}' is not a number or 'inf'"))?;
    if !v.is_finite() || v <= 0.0 {
        return Err(format!("'{s}' must be greater than 0 (or 'inf')"));
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_accept_inf_and_reject_zero() {
        assert!(parse_rate("inf").unwrap().is_infinite());
        assert_eq!(parse_rate("2.5").unwrap(), 2.5);
        assert!(parse_rate("0").is_err());
        assert!(parse_rate("-1").is_err());
        assert!(parse_rate("fast").is_err());
    }
}

/// `--rx-timestamps`: which clock stamps the arrival of response bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum RxTimestamps {
    Kernel,
    Task,
}

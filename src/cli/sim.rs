//! `kneecap sim` arguments: clap syntax only; the command layer turns them
//! into a validated, clap-free `SimOptions`.

use std::path::PathBuf;

/// Run a simulated continuous-batching LLM server: /v1/completions,
/// /v1/chat/completions, /v1/responses, and the pooling APIs /v1/embeddings,
/// /pooling and /v1/rerank (prefill-only sequences), plus vLLM /metrics.
#[derive(Debug, Clone, clap::Args)]
pub struct SimArgs {
    /// Address to bind.
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    /// Port to bind (0 picks a free port; the address is printed to stderr).
    #[arg(long, default_value_t = 8000)]
    pub port: u16,
    /// Engine preset: `tiny` (fast, for tests) or `7b-24gb` (a 7B model on one
    /// 24 GB GPU, simulated).
    #[arg(long, default_value = "tiny")]
    pub preset: String,
    /// Serve a simulator with the parameters of a `kneecap profile` JSON
    /// (the engine overrides below still apply on top).
    #[arg(long, value_name = "FILE")]
    pub profile: Option<PathBuf>,
    #[command(flatten)]
    pub engine: SimEngineArgs,
    #[command(flatten)]
    pub spec: SimSpecArgs,
    #[command(flatten)]
    pub gpu: super::gpu::SimGpuArgs,
    /// Model name in responses and /v1/models.
    #[arg(long, default_value = crate::sim::DEFAULT_MODEL_NAME)]
    pub served_model_name: String,
    /// Seed for sampled output lengths (without ignore_eos) and faults.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Write one JSON line per request (server-side times) to FILE. Each
    /// line has two arrivals: the handler's read (`arrival_s`) and the
    /// kernel's receive time of the request's last byte (`arrival_rx_s`).
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// Fraction of requests answered with HTTP 500.
    #[arg(long, default_value_t = 0.0, value_name = "FRACTION")]
    pub fault_http_500: f64,
    /// Fraction of requests answered with HTTP 429.
    #[arg(long, default_value_t = 0.0, value_name = "FRACTION")]
    pub fault_http_429: f64,
    /// Fraction of streams closed mid-way, without the DONE terminator.
    #[arg(long, default_value_t = 0.0, value_name = "FRACTION")]
    pub fault_cut_stream: f64,
    /// Fraction of streams with a malformed (non-JSON) data line mid-way.
    #[arg(long, default_value_t = 0.0, value_name = "FRACTION")]
    pub fault_malformed: f64,
    /// How long a stalled stream pauses, seconds.
    #[arg(long, default_value_t = 0.0, value_name = "SECONDS")]
    pub fault_stall: f64,
    /// Fraction of streams that stall mid-way for --fault-stall seconds.
    #[arg(long, default_value_t = 0.0, value_name = "FRACTION")]
    pub fault_stall_rate: f64,
    /// Fraction of streams that send an in-stream error object and end.
    #[arg(long, default_value_t = 0.0, value_name = "FRACTION")]
    pub fault_error_event: f64,
    /// Serve https with this PEM certificate chain (needs --tls-key).
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// PEM private key for --tls-cert.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Reasoning model: the first N output tokens of every request are
    /// reasoning, streamed before the answer (chat: in the delta field named by
    /// --reasoning-field; completions: as plain text, as vLLM does). The --trace
    /// file records the first reasoning and first answer times.
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub reasoning_tokens: u32,
    /// Chat delta field of reasoning text: `reasoning` (vLLM) or
    /// `reasoning_content` (DeepSeek, llama.cpp).
    #[arg(long, default_value = "reasoning", value_parser = ["reasoning", "reasoning_content"])]
    pub reasoning_field: String,
    /// Do not ask for real-time (SCHED_FIFO) scheduling of the engine thread.
    #[arg(long)]
    pub no_realtime: bool,
    /// Print the simulated capacity (μ) for --input-len/--output-len and exit.
    #[arg(long)]
    pub explain: bool,
    /// Prompt length for --explain.
    #[arg(long, default_value_t = 1024, requires = "explain")]
    pub input_len: u32,
    /// Output length for --explain.
    #[arg(long, default_value_t = 128, requires = "explain")]
    pub output_len: u32,
    /// With --explain: also compute the simulator's true knee for this SLO
    /// (e.g. 'p99_ttft_ms<=500'; repeatable, all must hold) by a virtual-time
    /// simulation of an open Poisson load. Takes CPU seconds, not wall time.
    #[arg(long = "slo", value_name = "SLO", action = clap::ArgAction::Append, requires = "explain", help_heading = "True knee")]
    pub slos: Vec<String>,
    /// Measured requests per simulated run, after the warm-up.
    #[arg(
        long,
        default_value_t = 20_000,
        value_name = "N",
        requires = "slos",
        help_heading = "True knee"
    )]
    pub truth_requests: usize,
    /// Warm-up requests per simulated run, left out of the statistics.
    #[arg(
        long,
        default_value_t = 2_000,
        value_name = "N",
        requires = "slos",
        help_heading = "True knee"
    )]
    pub truth_warmup: usize,
    /// Independent seeds (--seed, --seed + 1, ...): the knee's own spread.
    #[arg(
        long,
        default_value_t = 3,
        value_name = "N",
        requires = "slos",
        help_heading = "True knee"
    )]
    pub truth_seeds: u32,
    /// Arrival burstiness (Gamma shape): 1 is Poisson, inf evenly spaced.
    #[arg(
        long,
        default_value_t = 1.0,
        requires = "slos",
        help_heading = "True knee"
    )]
    pub burstiness: f64,
    /// Print --explain (and the true knee) as one JSON object.
    #[arg(long, requires = "explain")]
    pub json: bool,
    /// Share (0..=1) of each prompt --explain assumes the prefix cache serves.
    #[arg(
        long,
        default_value_t = 0.0,
        requires = "explain",
        value_name = "FRACTION"
    )]
    pub cache_hit_fraction: f64,
}

/// The simulator's engine overrides, shared by `kneecap sim` and by
/// `kneecap profile` (which starts the built-in simulator without
/// --base-url).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct SimEngineArgs {
    /// Override: most sequences in the running batch.
    #[arg(long)]
    pub max_num_seqs: Option<u32>,
    /// Override: token budget of one engine step.
    #[arg(long)]
    pub max_num_batched_tokens: Option<u32>,
    /// Override: KV-cache capacity in tokens.
    #[arg(long)]
    pub kv_cache_tokens: Option<u32>,
    /// Override: longest prompt + max_tokens accepted.
    #[arg(long)]
    pub max_model_len: Option<u32>,
    /// Override: fixed cost of each step, milliseconds.
    #[arg(long, value_name = "MS")]
    pub step_base_ms: Option<f64>,
    /// Override: cost per prefill token, microseconds.
    #[arg(long, value_name = "US")]
    pub prefill_token_us: Option<f64>,
    /// Override: cost per decoding sequence, microseconds.
    #[arg(long, value_name = "US")]
    pub decode_seq_us: Option<f64>,
    /// Override: how much an arriving prefill slows the sequences already
    /// decoding, 0..=3: 1 (default) prefill and decode share one batch step
    /// (vLLM, SGLang, llama.cpp); 0 prefill runs on other workers
    /// (disaggregated prefill/decode); above 1 a prompt computed beside
    /// decoders costs that many times its lone prefill (vLLM on CPU).
    #[arg(long, value_name = "FACTOR")]
    pub prefill_interference: Option<f64>,
    /// Turn the simulated prefix cache off (vLLM's --no-enable-prefix-caching).
    #[arg(long)]
    pub no_enable_prefix_caching: bool,
}

/// The help heading of the speculative-decoding flags.
const SPEC: &str = "Speculative decoding";

/// Speculative decoding in the simulator (`kneecap sim` only).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct SimSpecArgs {
    /// Turn speculative decoding on: each decode step of a sequence proposes
    /// K draft tokens (1..=16). /metrics then exports vLLM's
    /// vllm:spec_decode_* counters.
    #[arg(long, value_name = "K", requires = "spec_acceptance", help_heading = SPEC)]
    pub spec_draft_tokens: Option<u32>,
    /// Probability that a draft token is accepted, given the ones before it
    /// were (0..=1): a step accepts drafts in order until the first
    /// rejection and emits 1 + accepted tokens. Seeded by --seed.
    #[arg(long, value_name = "P", requires = "spec_draft_tokens", help_heading = SPEC)]
    pub spec_acceptance: Option<f64>,
    /// Cost of one draft-model pass over the batch, as a fraction of a
    /// decode step (K passes per step).
    #[arg(long, value_name = "FRACTION", default_value_t = crate::sim::spec::DEFAULT_DRAFT_COST, requires = "spec_draft_tokens", help_heading = SPEC)]
    pub spec_draft_cost: f64,
    /// Cost of verifying one draft token, as a fraction of a sequence's
    /// decode cost (--decode-seq-us).
    #[arg(long, value_name = "FRACTION", default_value_t = crate::sim::spec::DEFAULT_VERIFY_COST, requires = "spec_draft_tokens", help_heading = SPEC)]
    pub spec_verify_cost: f64,
}

//! Trace replay flags: vLLM's `timed_trace` options (`--timed-trace-*`,
//! `--self-timed`) and kneecap's `--trace-speed`. Syntax only.

use clap::Args;

/// How a trace file is read and replayed.
#[derive(Debug, Clone, Args)]
pub struct TraceArgs {
    /// timed_trace: tokens each hash id stands for (Mooncake traces: 512).
    #[arg(long, default_value_t = 16, help_heading = "Trace replay")]
    pub timed_trace_chunk_hash_size: u32,
    /// timed_trace: multiply timestamps by this to get seconds (0.001 for ms).
    #[arg(long, default_value_t = 1.0, help_heading = "Trace replay")]
    pub timed_trace_sec_multiplier: f64,
    /// timed_trace: the JSON field holding each row's timestamp.
    #[arg(long, default_value = "timestamp", help_heading = "Trace replay")]
    pub timed_trace_label_timestamp: String,
    /// timed_trace: the JSON field holding each row's input length.
    #[arg(long, default_value = "input_length", help_heading = "Trace replay")]
    pub timed_trace_label_input_length: String,
    /// timed_trace: the JSON field holding each row's output length.
    #[arg(long, default_value = "output_length", help_heading = "Trace replay")]
    pub timed_trace_label_output_length: String,
    /// timed_trace: the JSON field holding each row's block hash ids.
    #[arg(long, default_value = "hash_ids", help_heading = "Trace replay")]
    pub timed_trace_label_hash_ids: String,
    /// Send each request at its row's timestamp (the default for timed_trace).
    #[arg(long, overrides_with = "no_self_timed", help_heading = "Trace replay")]
    pub self_timed: bool,
    /// Ignore the trace's timestamps: --request-rate sets the arrivals.
    #[arg(long, overrides_with = "self_timed", help_heading = "Trace replay")]
    pub no_self_timed: bool,
    /// Replay the trace this many times faster (2 = twice the load). In
    /// `kneecap sweep`: the first speed of the search.
    #[arg(long, help_heading = "Trace replay")]
    pub trace_speed: Option<f64>,
}

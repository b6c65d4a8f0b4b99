//! Config: the validated, clap-free settings of a run and a sweep, made of
//! domain types ([`Api`], [`RampStrategy`], [`crate::sweep::LoadUnit`], ...).
//! The command layer builds them once from the parsed arguments (see
//! `cmd::args`, where every cross-field rule is checked); everything below
//! reads only these types. No I/O, no clap.

mod fingerprint;
pub mod sweep;

pub use crate::client::openai::Backend;
pub use fingerprint::run_fingerprint;

use crate::client::net::proxy::ProxyEnv;
use crate::client::net::tls::TlsOptions;
use crate::client::openai::{Api, BodyOptions};
use crate::metrics::stats::StatsOptions;
use crate::metrics::MetricName;
use crate::schedule::{Arrival, RampStrategy};
use crate::shard::{Shard, StartAt};
use crate::workload::dataset::DatasetConfig;
use crate::workload::session::SessionParams;
use std::path::PathBuf;
use std::time::Duration;

/// Where requests go.
#[derive(Debug, Clone, PartialEq)]
pub enum Target {
    /// A server root such as `http://127.0.0.1:8000` (no trailing slash).
    Url(String),
    /// Start the built-in simulator with this preset on a free loopback port.
    Sim { preset: String },
}

/// How load is offered.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadConfig {
    pub arrival: Arrival,
    /// The configured `--request-rate` (may be infinite).
    pub request_rate: f64,
    pub burstiness: f64,
    pub max_concurrency: Option<usize>,
    pub num_prompts: usize,
    /// Duration-bounded run instead of a prompt count.
    pub duration: Option<Duration>,
    pub num_warmups: usize,
    pub seed: u64,
    pub ramp_up: Option<(RampStrategy, u32, u32)>,
    pub ready_check_timeout: Duration,
    /// The dataset groups prompts into requests (random-rerank,
    /// `--random-batch-size`): a run sends one request per group, as vLLM
    /// does, not `num_prompts`.
    pub requests_from_dataset: bool,
    /// Trace replay (timed_trace, self-timed): each request is due at its
    /// row's timestamp divided by this speed-up; the arrival flags are unused.
    pub trace_speed: Option<f64>,
}

/// `--multi-turn`: sessions of several turns instead of single requests.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionConfig {
    /// Turn count (synthetic sessions) and think time.
    pub params: SessionParams,
    /// `--per-turn-input-len`: tokens each later turn adds (random dataset).
    pub per_turn_input_len: u32,
    /// `--multi-turn-min-turns` for file sources (0: unset).
    pub min_turns: u32,
    /// `--multi-turn-max-turns` for file sources (`None`: all turns).
    pub max_turns: Option<u32>,
}

/// What to write where.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct OutputConfig {
    pub percentile_metrics: Vec<MetricName>,
    pub save_result: bool,
    pub save_detailed: bool,
    pub append_result: bool,
    pub result_dir: Option<PathBuf>,
    pub result_filename: Option<String>,
    pub label: Option<String>,
    pub metadata: Vec<(String, String)>,
    pub progress: bool,
    /// The live view and kneecap's own `/metrics`.
    pub live: LiveConfig,
}

/// How a run is shown while it runs (`--ui`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UiMode {
    /// The terminal dashboard (needs stdout to be a terminal).
    Dashboard,
    /// Line-per-update output and the progress bar on stderr (as in CI logs).
    Plain,
    /// Neither the dashboard nor the progress bar.
    None,
}

/// `--ui`, `--metrics-listen`, `--metrics-linger`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct LiveConfig {
    /// `None`: the dashboard when stdout is a terminal, else plain.
    pub ui: Option<UiMode>,
    /// Serve kneecap's own Prometheus metrics here (port 0: any free port).
    pub metrics_listen: Option<std::net::SocketAddr>,
    /// Keep serving them this long after the run ended.
    pub metrics_linger: Duration,
}

/// A fully validated `kneecap run`.
#[derive(Debug, Clone)]
pub struct RunConfig {
    pub target: Target,
    pub endpoint: String,
    pub backend: Backend,
    pub api: Api,
    /// Extra headers (user's `--header`), in order.
    pub headers: Vec<(String, String)>,
    pub api_key: Option<String>,
    pub request_timeout: Duration,
    pub connect_timeout: Duration,
    /// `--ca-cert`, `--insecure`.
    pub tls: TlsOptions,
    /// HTTPS_PROXY / HTTP_PROXY / NO_PROXY as read at start-up.
    pub proxies: ProxyEnv,
    /// `--rx-timestamps kernel` (the default): ask for kernel receive stamps.
    pub kernel_stamps: bool,
    pub model: Option<String>,
    pub served_model_name: Option<String>,
    pub tokenizer: Option<PathBuf>,
    pub dataset: DatasetConfig,
    pub dataset_name: &'static str,
    pub load: LoadConfig,
    /// Body settings; `model` is filled in once the model is known.
    pub body: BodyOptions,
    pub stats: StatsOptions,
    pub output: OutputConfig,
    /// `None` ⇒ `bench-<8 random hex>-` chosen at run time.
    pub request_id_prefix: Option<String>,
    /// `--shard i/N`: this process sends only its share of the load.
    pub shard: Option<Shard>,
    /// `--start-at`: wait for this common instant before the load starts.
    pub start_at: Option<StartAt>,
    /// `--profile`: POST `/start_profile` before the load, `/stop_profile` after.
    pub profile: bool,
    /// vLLM flags given that have no meaning for kneecap: one line each, printed
    /// once the run starts (the run goes on).
    pub ignored_flags: Vec<String>,
    /// `--multi-turn`: `load.num_prompts` counts sessions, the arrival
    /// process starts sessions and `load.max_concurrency` counts users.
    pub sessions: Option<SessionConfig>,
    /// `--gpu-metrics-url`: the DCGM endpoints sampled through the run and
    /// each sweep step (`None`: no GPU telemetry).
    pub gpu: Option<GpuMetricsConfig>,
}

/// `--gpu-metrics-url` (one per host) and `--gpu-sample-interval`.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuMetricsConfig {
    /// Full URLs of the DCGM endpoints, in flag order.
    pub urls: Vec<String>,
    /// Time between samples.
    pub every: Duration,
}

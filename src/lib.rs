//! kneecap: load-test an OpenAI-compatible LLM inference server and find its knee.
//!
//! # Layout
//! One floor per concern; imports point down, never up (`docs/ARCHITECTURE.md`
//! has the picture and a walk of one `kneecap run`):
//!
//! - [`cmd`]: the command layer, one file per subcommand. The only place that
//!   sequences I/O: start the target, prepare the client, drive the engine,
//!   save results. `main` calls it; nothing imports it back.
//! - [`cli`]: clap definitions only (syntax); imported by `main` and [`cmd`] alone.
//! - [`config`]: validated, clap-free configuration made of domain types.
//! - [`merge`]: recombining the results of a sharded load (pure).
//! - [`compare`]: `kneecap report` / `kneecap compare` over saved results (pure).
//! - [`live`]: watching a run as it goes: the engine observer that
//!   aggregates snapshots, the terminal dashboard and kneecap's own
//!   Prometheus text, all drawn from one pure state model.
//! - [`twin`]: the server's twin: the profile (the simulator's parameters
//!   measured on a server, with uncertainties), the pure fits that build it,
//!   and the model run in virtual time to predict a knee for any workload
//!   and say what binds it (pure).
//! - [`sweep`]: SLOs, the steady-state check, the one step judge and the knee
//!   search (pure).
//! - [`report`]: the renderings of the results (console, table, charts,
//!   HTML) and writing them to files.
//! - [`result`]: every result written and read back, as serde types: the run
//!   ([`result::RunResult`], [`result::json::RunJson`]), the sweep
//!   ([`result::sweep::SweepResult`]), the one [`result::Verdict`], the shard
//!   blocks (typed, adding up for the merge).
//! - [`shard`]: splitting one load over N processes (`--shard i/N`) and the
//!   common start (`--start-at`) (pure).
//! - [`engine`]: the dispatcher that releases requests on time and collects
//!   [`metrics::RequestRecord`]s.
//! - [`client`]: the sans-IO SSE decoder, OpenAI chunk parsing, and the one
//!   HTTP client that talks to the server.
//! - [`metrics`]: the records, the one stats module (vLLM's definitions), and
//!   the shared vocabulary (metric names, percentile set, generator health).
//! - [`workload`], [`schedule`]: datasets turned into [`workload::RequestSpec`]s
//!   and arrival offsets (pure, seeded).
//! - [`sim`]: the built-in continuous-batching server model and its HTTP server.
//!
//! Pure modules (schedule, shard, merge, compare, sweep, metrics, client::sse,
//! client::openai, sim::model) never read a clock or touch a socket: time and
//! seeded randomness are passed in.

pub mod cli;
pub mod client;
pub mod cmd;
pub mod compare;
pub mod config;
pub mod engine;
pub mod live;
pub mod merge;
pub mod metrics;
pub mod report;
pub mod result;
pub mod rxstamp;
pub mod schedule;
pub mod shard;
pub mod sim;
pub mod sweep;
pub mod twin;
pub mod workload;

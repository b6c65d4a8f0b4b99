//! kneecap: load-test an OpenAI-compatible LLM inference server and find its knee.
//!
//! # Layout
//! The folders follow the pipeline a run takes:
//!
//! - [`cli`]: clap definitions only (syntax), no validation beyond parsing.
//! - [`config`]: validated, clap-free configuration built from the CLI.
//! - [`workload`]: datasets turned into [`workload::RequestSpec`]s (pure, seeded).
//! - [`schedule`]: arrival offsets for open-loop load (pure, seeded).
//! - [`shard`]: splitting one load over N processes (`--shard i/N`) and the
//!   common start (`--start-at`) (pure); [`merge`] recombines their results.
//! - [`client`]: the sans-IO SSE decoder, OpenAI chunk parsing, and the one
//!   HTTP client that talks to the server.
//! - [`engine`]: the dispatcher that releases requests on time and collects
//!   [`metrics::RequestRecord`]s.
//! - [`metrics`]: the records and the one stats module (vLLM's definitions).
//! - [`report`]: the result types ([`report::RunResult`], [`report::sweep::SweepResult`])
//!   and their renderings (console, JSON, table, charts, HTML).
//! - [`sweep`]: SLOs, the steady-state check, generator health and the knee
//!   search (pure); [`sweep::drive`] runs a sweep step by step.
//! - [`compare`]: `kneecap report` / `kneecap compare` over saved results.
//! - [`sim`]: the built-in continuous-batching server model and its HTTP server.
//! - [`run`], [`target`], [`app`]: orchestration of `kneecap run`, the server a
//!   run talks to (a URL or the embedded simulator), and command dispatch.
//!
//! Pure modules (schedule, shard, metrics::hist, client::sse, client::openai, metrics::stats,
//! sweep's slo/steady/health/knee, sim::model) never read a clock or touch a socket: time and seeded
//! randomness are passed in.

pub mod cli;
pub mod client;
pub mod cmd;
pub mod compare;
pub mod config;
pub mod engine;
pub mod merge;
pub mod metrics;
pub mod report;
pub mod schedule;
pub mod shard;
pub mod sim;
pub mod sweep;
pub mod workload;

//! twin: a model of a server measured from the outside, and what it predicts.
//! Owns the server profile ([`profile::ServerProfile`]: the simulator's
//! parameters with their uncertainties, as a versioned JSON file), the pure
//! fits that turn `kneecap profile`'s probe observations into it, and the
//! simulator's engine model run in virtual time as a stand-in for the server:
//! the knee a workload would have, with an interval from the parameters'
//! uncertainty, what binds it and what moves it. Pure: the command layer runs
//! the probes and passes what it saw; nothing here reads a clock, a socket or
//! a file; randomness is seeded.
//!
//! # Layout
//! - [`profile`]: `ServerProfile`, the simulator parameters at the central
//!   values and at the ends of the ranges (`params`, `corners`); its
//!   parameters are [`estimate`]s.
//! - [`plan`]: the probe design, sized to the budget from a pilot.
//! - [`observe`]: records reduced to what the fits need (a decode level's
//!   window and batch, tokens in flight against the KV gauge).
//! - [`mod@line`]: least squares with standard errors and a lack-of-fit check.
//! - [`prefill`], [`interference`], [`decode`], [`kv`], [`stalls`]: one fit each
//!   ([`prefill_batch`]: the steps of prompts sent together, beside the
//!   lone ones).
//! - [`fit`]: the fits in order, into a `ServerProfile`; [`reported`] what
//!   the server says of its KV cache and prefix caching beside what the
//!   probes measured.
//! - [`bounds`]: the parameters' physical ranges: a profile refused at load,
//!   its ranges clamped into parameter sets, a fit not pinned down marked
//!   not identifiable.
//! - [`table`]: the profile's console table.
//! - [`knee`]: the virtual-time knee search (bisection on λ per seed);
//!   [`tail`] the host's stalls redrawn over each request's TTFT.
//! - [`predict`]: the knee with its interval over the parameter corners, and
//!   replicas for a target rate; [`grid`] the knee over a grid of shapes.
//! - [`explain`]: the binding resource at a predicted knee and what moves
//!   it; [`measured`] the same for a measured knee, from the step gauges.
//! - [`json`], [`render`], [`html`]: the prediction's JSON, console text and
//!   heat map.
//!
//! Floor 5 (docs/ARCHITECTURE.md): it may use `sweep`, `report`, `sim`,
//! `workload` and `metrics`; only `cmd` uses it.

pub mod at_load;
pub mod bounds;
pub mod decode;
pub mod estimate;
pub mod explain;
pub mod extra_costs;
pub mod fit;
pub mod grid;
pub mod html;
pub mod interference;
pub mod json;
pub mod knee;
pub mod kv;
pub mod line;
pub mod measured;
pub mod mixed;
pub mod observe;
pub mod plan;
pub mod predict;
pub mod prefill;
pub mod prefill_batch;
pub mod prior;
pub mod profile;
pub mod prompt_step;
pub mod ranges;
pub mod render;
pub mod reported;
pub mod stalls;
pub mod table;
pub mod tail;

#[cfg(test)]
mod hostile_tests;
#[cfg(test)]
pub(crate) mod testing;

pub use profile::{Estimate, ServerProfile, Status};

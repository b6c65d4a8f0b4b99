//! twin: a model of a server measured from the outside. Owns the server
//! profile ([`profile::ServerProfile`]: the simulator's parameters with their
//! uncertainties, as a versioned JSON file) and the pure fits that turn probe
//! observations into it. Pure: the command layer (`cmd/profile`) runs the
//! probes and passes what it saw; nothing here reads a clock, a socket or a
//! file.
//!
//! # Layout
//! - [`profile`]: `ServerProfile`, its `Estimate`s, the simulator parameters
//!   at the central values and at the ends of the ranges (`params`,
//!   `corners`).
//! - [`plan`]: the probe design, sized to the budget from a pilot.
//! - [`observe`]: records reduced to what the fits need (a decode level's
//!   window and batch, tokens in flight against the KV gauge).
//! - [`line`]: least squares with standard errors and a lack-of-fit check.
//! - [`prefill`], [`interference`], [`decode`], [`kv`]: one fit each.
//! - [`fit`]: the fits in order, into a `ServerProfile`.
//! - [`table`]: the console table.
//!
//! Floor 5 (docs/ARCHITECTURE.md): it may use `sweep`, `sim` and `metrics`;
//! only `cmd` uses it.

pub mod decode;
pub mod fit;
pub mod interference;
pub mod kv;
pub mod line;
pub mod observe;
pub mod plan;
pub mod prefill;
pub mod profile;
pub mod table;

#[cfg(test)]
pub(crate) mod testing;

pub use profile::{Estimate, ServerProfile, Status};

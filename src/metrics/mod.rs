//! Metrics: per-request records (what the engine observed), the one stats
//! module that turns them into vLLM-defined numbers, and the mergeable
//! histograms of [`hist`]. Nothing here does I/O.

pub mod hist;
pub mod record;
pub mod stats;

pub use record::{ErrorKind, RequestError, RequestRecord};

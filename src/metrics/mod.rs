//! Metrics: per-request records (what the engine observed) and the one stats
//! module that turns them into vLLM-defined numbers. Nothing here does I/O.

pub mod record;
pub mod stats;

pub use record::{ErrorKind, RequestError, RequestRecord};

//! Metrics: per-request records (what the engine observed), the one stats
//! module that turns them into vLLM-defined numbers, the mergeable
//! histograms of [`hist`], [`fold`], which bounds a long run's memory, and
//! the shared vocabulary every layer above uses: metric names and the
//! percentile set ([`name`]), the generator's health verdict ([`health`]),
//! the multi-turn session summary ([`session`]) and which failures are the
//! server refusing a request's shape ([`refusal`]).
//! Nothing here does I/O.

pub mod fold;
pub mod health;
pub mod hist;
pub mod name;
pub mod record;
pub mod refusal;
pub mod session;
pub mod stats;

pub use name::{MetricName, KNEECAP_PERCENTILES};
pub use record::{ErrorKind, RequestError, RequestRecord, SessionTurn, StampSource};

//! Result: every result kneecap writes and reads back, as serde-derived
//! types, below the floors that compute them (`sweep`, `merge`, `cmd`) and
//! the one that renders them (`report`). A sweep ([`sweep::SweepResult`]:
//! its steps, knee, calibration, cost and a twin's
//! prediction, [`twin`]), the one verdict type
//! ([`Verdict`], with the confidence test's [`Decision`]), the blocks of a
//! sharded run or sweep ([`shard`], [`shard_sweep`]: typed, with `add` for
//! the merge), and the step evidence written beside them ([`evidence`]).
//! Plain data with accessors and additions; no clock, no I/O, nothing
//! imported from the floors above.

pub mod assemble;
pub mod cache;
pub mod cost;
pub mod evidence;
pub mod explain;
#[cfg(test)]
pub(crate) mod fixture;
pub mod gpu;
pub mod json;
pub mod run;
pub mod series;
pub mod server;
pub mod shard;
pub mod shard_sweep;
pub mod spec;
pub mod sweep;
pub mod twin;
pub mod verdict;

pub use assemble::RunOutcome;
pub use cache::PrefixCacheStats;
pub use gpu::GpuStats;
pub use run::{GeneratorVerdict, KneecapInfo, RunHeader, RunResult};
pub use server::ServerInfo;
pub use spec::SpecDecodeStats;
pub use verdict::{Decision, LoadUnit, Verdict};

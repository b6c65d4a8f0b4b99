//! The state every connection task of the simulator shares ([`Shared`]): the
//! configuration, the sim clock's time zero, the channels to the engine
//! thread and its dispatcher, the `/metrics` counters and the server log's sink.
//! Below every request handler; it imports none of them.

use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::driver::{Command, DispatchMsg};
use super::metrics::SimMetrics;
use super::server_log::LogSink;
use super::SimConfig;
use crate::rxstamp::RxCell;

/// State every connection task shares.
#[derive(Debug)]
pub struct Shared {
    /// The configuration the sim was started with.
    pub cfg: SimConfig,
    /// Time zero of the sim clock (model time and server log times count from it).
    pub epoch: Instant,
    /// Commands to the engine thread.
    pub engine_tx: std::sync::mpsc::Sender<Command>,
    /// Registrations of per-request channels with the dispatcher.
    pub dispatch_tx: tokio::sync::mpsc::UnboundedSender<DispatchMsg>,
    /// Source of engine request ids (also the fault and output-length index).
    pub next_id: AtomicU64,
    /// What `/metrics` shows.
    pub metrics: Arc<Mutex<SimMetrics>>,
    /// Where server log lines go, with `--trace`.
    pub server_log: Option<LogSink>,
}

impl Shared {
    /// Sim-clock time now.
    pub fn now(&self) -> Duration {
        self.epoch.elapsed()
    }

    /// Sim-clock time of the kernel's receive stamp in `rx`, if any.
    pub fn rx_time(&self, rx: Option<&RxCell>) -> Option<Duration> {
        Some(rx?.instant()?.saturating_duration_since(self.epoch))
    }
}

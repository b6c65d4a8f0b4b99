//! The evidence of a step that is written beside its row and read back by
//! `kneecap merge`: the steady-state inputs ([`Steadiness`], computed by
//! `sweep::steady`) and the exact counts of a goodput-form SLO
//! ([`Attainment`], computed by `sweep::slo_hist`). Plain serde data; both
//! add up across shards (the steadiness by `sweep::steady::combine`).

use serde::{Deserialize, Serialize};

/// The steady-state evidence for one step.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Steadiness {
    /// λ, requests due in the window per second.
    pub offered_rate: f64,
    /// X, requests finished in the window per second.
    pub achieved_rate: f64,
    /// X/λ (0 when nothing was due).
    pub throughput_ratio: f64,
    /// L, time-average number in flight.
    pub mean_in_flight: f64,
    /// W, mean time in system (s) of requests sent in the window.
    pub mean_time_in_system_s: f64,
    /// λ_s, requests sent in the window per second (the arrivals W is over).
    #[serde(default)]
    pub sent_rate: f64,
    /// |L − λ_s·W| / L; `None` when L is 0.
    pub littles_gap: Option<f64>,
    /// Least-squares slope of the in-flight count, requests per second.
    pub in_flight_slope_per_s: f64,
    /// The fitted in-flight count at the start and at the end of the window.
    pub in_flight_start: f64,
    /// See `in_flight_start`.
    pub in_flight_end: f64,
    /// Records due before w1 and not finished by w1.
    pub backlog_at_end: usize,
    /// Where the judged window opened (s from t0) when the warm-up was
    /// shorter than the time in the system; absent when it is the window's
    /// start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judged_from_s: Option<f64>,
    /// True when no threshold was crossed.
    pub steady: bool,
    /// Why the step is not steady (empty when steady).
    pub reasons: Vec<String>,
}

/// Additive evidence for a goodput-form SLO: how many samples, how many met it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Attainment {
    pub samples: u64,
    pub met: u64,
}

impl Attainment {
    /// Add another shard's counts.
    pub fn add(&mut self, other: &Attainment) {
        self.samples += other.samples;
        self.met += other.met;
    }
}

//! The search's view of one measured step ([`StepPoint`]): its load, its
//! [`Verdict`], its flows and how sure its SLO verdict is. Built by the one
//! step judge (`super::step::judge_step`) beside the step's row, or by
//! `super::adaptive::window_point` for searches in fake time; read by the
//! knee search, the pooled pass end and the plateau estimates. PURE.

use super::confidence::Evidence;
use crate::result::Verdict;
use serde::{Deserialize, Serialize};

/// What the search needs to know about one measured step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepPoint {
    /// Offered load (rate or concurrency).
    pub load: f64,
    /// The step's verdict from [`crate::sweep::judge`] (never `interrupted`:
    /// a step cut short is not given to the search).
    pub verdict: Verdict,
    /// Achieved throughput, requests per second.
    pub achieved_rate: f64,
    /// Realized arrival rate of the step's window (requests due per second).
    pub offered_rate: f64,
    /// The step passed the steady-state check (see [`crate::sweep::steady`]).
    pub steady: bool,
    /// Requests per second meeting every per-request SLO.
    pub goodput: f64,
    /// Mean of the server's `num_requests_waiting` gauge, if scraped.
    pub mean_waiting: Option<f64>,
    /// How sure the step's SLO verdict is (adaptive steps), 0–1.
    #[serde(default)]
    pub confidence: Option<f64>,
    /// An adaptive step that reached its cap with its SLO verdict still
    /// within noise: inside the knee interval, never one of its ends.
    #[serde(default)]
    pub undecided: bool,
    /// The step's evidence per SLO (`None` for means), for pooling across
    /// steps ([`super::pooled`]); empty without adaptive steps.
    #[serde(default)]
    pub evidence: Vec<Option<Evidence>>,
    /// The confidence the sweep asked for (adaptive steps).
    #[serde(default)]
    pub level: Option<f64>,
}

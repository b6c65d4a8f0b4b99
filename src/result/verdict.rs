//! The words a sweep step is judged in, with their serde names: a step's
//! [`Verdict`] (the one verdict type: the search, the rows and every
//! renderer use it), the [`Decision`] of an adaptive step's confidence test,
//! and what a load number means ([`LoadUnit`]).

use serde::{Deserialize, Serialize};

/// A step's verdict: what the judge found (`pass`, `fail`,
/// `generator_limited`) or that a signal cut the step short
/// (`interrupted`). The knee search only ever sees the first three.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Every SLO held, errors within bound, steady, generator healthy.
    Pass,
    /// Something the server is responsible for did not hold (the default:
    /// a step is not a pass until it is shown to be one).
    #[default]
    Fail,
    /// The load generator fell behind: never the server's knee.
    GeneratorLimited,
    /// Cut short by a signal: its data is kept, its verdict is not used.
    Interrupted,
}

impl Verdict {
    /// The JSON name: `pass`, `fail`, `generator_limited`, `interrupted`.
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Pass => "pass",
            Verdict::Fail => "fail",
            Verdict::GeneratorLimited => "generator_limited",
            Verdict::Interrupted => "interrupted",
        }
    }

    /// The console label: `PASS`, `FAIL`, `GEN-LIMITED`, `INTERRUPTED`.
    pub fn label(self) -> &'static str {
        match self {
            Verdict::Pass => "PASS",
            Verdict::Fail => "FAIL",
            Verdict::GeneratorLimited => "GEN-LIMITED",
            Verdict::Interrupted => "INTERRUPTED",
        }
    }
}

/// Where an adaptive step's SLO test stands (`sweep::confidence::decide`):
/// the binomial test's own answer over the SLOs alone, not the step's
/// [`Verdict`] (a step whose SLOs pass may still fail on errors or
/// steadiness), and it may be `undecided`, which no verdict is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// Every SLO with an interval holds with the confidence asked.
    Pass,
    /// Some SLO is missed with the confidence asked.
    Fail,
    /// Neither yet: the step should run longer.
    Undecided,
}

/// What a load number means (the sweep JSON's `mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum LoadUnit {
    /// Open loop: requests per second (real numbers).
    #[default]
    Rate,
    /// Closed loop: concurrent requests (integers ≥ 1).
    Concurrency,
    /// A trace replayed this many times faster than recorded (real numbers).
    TraceSpeed,
}

impl LoadUnit {
    /// The JSON name: `rate`, `concurrency` or `trace_speed`.
    pub fn name(self) -> &'static str {
        match self {
            LoadUnit::Rate => "rate",
            LoadUnit::Concurrency => "concurrency",
            LoadUnit::TraceSpeed => "trace_speed",
        }
    }

    /// Unit of the load axis: `req/s`, `streams` or `× trace speed`.
    pub fn axis(self) -> &'static str {
        match self {
            LoadUnit::Rate => "req/s",
            LoadUnit::Concurrency => "streams",
            LoadUnit::TraceSpeed => "× trace speed",
        }
    }
}

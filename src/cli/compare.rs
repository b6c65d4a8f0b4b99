//! `kneecap compare` arguments: two sweeps or two runs, A = baseline, B = candidate.

use clap::{Args, ValueEnum};
use std::path::PathBuf;

/// Output format of `kneecap compare`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CompareFormat {
    /// Aligned tables for a terminal.
    Text,
    /// GitHub Markdown tables (e.g. a CI job summary).
    Markdown,
    /// The comparison and the --fail-if outcomes as JSON.
    Json,
}

#[derive(Debug, Clone, Args)]
pub struct CompareArgs {
    /// Baseline: a sweep JSON or a run JSON.
    #[arg(value_name = "A.json")]
    pub baseline: PathBuf,
    /// Candidate, of the same kind as the baseline.
    #[arg(value_name = "B.json")]
    pub candidate: PathBuf,
    /// Exit 1 when B is worse than A by more than a bound (repeatable):
    /// knee_drop>10%, goodput_drop>5%, throughput_drop>5%,
    /// <median|mean|pNN>_<ttft|tpot|itl|e2el>_increase>20% (or >50ms).
    #[arg(long = "fail-if", value_name = "COND", action = clap::ArgAction::Append)]
    pub fail_if: Vec<String>,
    /// Output format.
    #[arg(long, value_enum, default_value = "text")]
    pub format: CompareFormat,
}

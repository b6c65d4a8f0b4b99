//! `kneecap report` arguments: re-render a saved sweep or run JSON.

use clap::{Args, ValueEnum};
use std::path::PathBuf;

/// Output format of `kneecap report`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ReportFormat {
    /// The console table and charts (sweep) or vLLM's summary (run).
    Text,
    /// A Markdown table: one row per step (sweep) or key/value (run).
    Markdown,
    /// CSV: one row per step (sweep) or key,value (run).
    Csv,
    /// Normalized JSON.
    Json,
}

#[derive(Debug, Clone, Args)]
pub struct ReportArgs {
    /// A sweep JSON (`kneecap sweep -o`) or a run JSON (kneecap's or vLLM's).
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// Also write the self-contained HTML report of a sweep (atomically).
    #[arg(long, value_name = "OUT.html")]
    pub html: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value = "text")]
    pub format: ReportFormat,
}

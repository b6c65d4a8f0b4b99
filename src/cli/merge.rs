//! `kneecap merge` arguments: the shard result files of one sharded run or
//! sweep, and where to write the merged result.

use clap::Args;
use std::path::PathBuf;

#[derive(Debug, Clone, Args)]
pub struct MergeArgs {
    /// Every shard's result file (`kneecap run --shard i/N --save-result`, or
    /// the sweep JSON of `kneecap sweep --shard i/N`), each exactly once.
    #[arg(required = true, value_name = "SHARD.json")]
    pub files: Vec<PathBuf>,
    /// Write the merged result here (same format as a single-process result).
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
}

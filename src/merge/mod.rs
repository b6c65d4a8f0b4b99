//! Merge: recombine the results of a sharded load (`--shard i/N`) into one
//! exact result. This module owns the merge conditions (same workload
//! fingerprint, seed, shard count and start; every index present exactly
//! once); the blocks add themselves up ([`crate::result::shard::ShardPart::add`],
//! [`crate::result::shard_sweep::StepShard::add`]). PURE: the command layer reads
//! and writes the files; [`run`] rebuilds a [`crate::result::RunResult`] and
//! [`sweep`] a [`crate::result::sweep::SweepResult`].
//!
//! Counters add; histograms add bucket by bucket (exact: one configuration);
//! percentiles are read from the merged histograms and never averaged across
//! shards. Rates divide by the *common* window — the earliest start to the
//! latest end over all shards.
pub mod gpu;
pub mod run;
pub mod server;
pub mod sweep;

use crate::result::shard::ShardIdentity;

/// One shard's file: where it came from and who it says it is.
#[derive(Debug, Clone)]
pub struct ShardFile {
    /// The path as given (for messages).
    pub name: String,
    pub id: ShardIdentity,
}

/// Check that `files` are all the shards of one load, each exactly once.
/// The message names the offending files and indices.
pub fn check_set(files: &[ShardFile]) -> Result<(), String> {
    let Some(first) = files.first() else {
        return Err("no shard files given".into());
    };
    let n = first.id.shard.count;
    for f in files {
        let id = &f.id;
        if id.shard.count != n {
            return Err(format!(
                "{} is shard {} but {} is shard {}: shard counts differ, these are not shards of one load",
                f.name, id.shard, first.name, first.id.shard
            ));
        }
        if id.fingerprint != first.id.fingerprint {
            return Err(format!(
                "{} has workload fingerprint {} but {} has {}: the shards ran different workloads (dataset, rate, concurrency, seed, model, SLOs or steps differ)",
                f.name, id.fingerprint, first.name, first.id.fingerprint
            ));
        }
        if id.seed != first.id.seed {
            return Err(format!(
                "{} has --seed {} but {} has --seed {}",
                f.name, id.seed, first.name, first.id.seed
            ));
        }
        if id.start_at != first.id.start_at {
            return Err(format!(
                "{} and {} were given different --start-at times: the shards did not run together",
                f.name, first.name
            ));
        }
    }
    for i in 0..n {
        let with_i: Vec<&str> = files
            .iter()
            .filter(|f| f.id.shard.index == i)
            .map(|f| f.name.as_str())
            .collect();
        match with_i.as_slice() {
            [] => {
                return Err(format!(
                    "MERGE INVALID: shard {i}/{n} is missing (got {} of {n} shard files); without it the merged result would under-report the offered load — find that shard's file or rerun",
                    files.len()
                ))
            }
            [_] => {}
            several => {
                return Err(format!(
                    "shard {i}/{n} appears more than once ({}): give each shard's file exactly once",
                    several.join(", ")
                ))
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shard::Shard;

    fn file(name: &str, index: usize, count: usize, fp: &str) -> ShardFile {
        ShardFile {
            name: name.into(),
            id: ShardIdentity {
                shard: Shard { index, count },
                fingerprint: fp.into(),
                seed: 1,
                start_at: None,
            },
        }
    }

    #[test]
    fn a_complete_set_passes() {
        let set = [file("a", 1, 2, "f"), file("b", 0, 2, "f")];
        assert_eq!(check_set(&set), Ok(()));
    }

    #[test]
    fn a_missing_shard_is_named_loudly() {
        let err = check_set(&[file("a", 0, 3, "f"), file("c", 2, 3, "f")]).unwrap_err();
        assert!(
            err.starts_with("MERGE INVALID: shard 1/3 is missing"),
            "{err}"
        );
    }

    #[test]
    fn duplicates_and_mismatches_name_the_files() {
        let err = check_set(&[file("a", 0, 2, "f"), file("b", 0, 2, "f")]).unwrap_err();
        assert!(
            err.contains("shard 0/2 appears more than once (a, b)"),
            "{err}"
        );
        let err = check_set(&[file("a", 0, 2, "f"), file("b", 1, 2, "g")]).unwrap_err();
        assert!(
            err.contains("b has workload fingerprint g but a has f"),
            "{err}"
        );
        let err = check_set(&[file("a", 0, 2, "f"), file("b", 1, 3, "f")]).unwrap_err();
        assert!(err.contains("shard counts differ"), "{err}");
    }
}

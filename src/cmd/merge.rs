//! `kneecap merge`: read the shard files, merge them (the pure
//! [`crate::merge`]), write the merged result and print its summary.

use crate::cli::merge::MergeArgs;
use crate::report::{console, save};
use crate::result::json::{self, RunJson};
use crate::result::sweep::is_sweep;
use crate::twin::measured::explain_measured;
use anyhow::{bail, Context, Result};
use serde_json::Value;
use std::process::ExitCode;

/// Run `kneecap merge`. Exit 0 ok; 2 when the set is invalid (missing,
/// duplicated or mismatched shards) or a shard was interrupted; for sweeps,
/// 1 when no step passed, as a single-process sweep.
pub fn execute(args: &MergeArgs) -> Result<ExitCode> {
    let mut docs = Vec::new();
    for path in &args.files {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read shard file '{}'", path.display()))?;
        let v: Value = serde_json::from_str(&text)
            .with_context(|| format!("'{}' is not a JSON result", path.display()))?;
        docs.push((path.display().to_string(), v));
    }
    if let Some(o) = &args.output {
        save::check_writable(
            o.parent().filter(|p| !p.as_os_str().is_empty()),
            "-o/--output",
        )?;
    }
    let sweeps = docs
        .iter()
        .filter(|(_, v)| v.as_object().is_some_and(is_sweep))
        .count();
    match sweeps {
        0 => merge_runs(docs, args),
        _ if sweeps == docs.len() => merge_sweeps(docs, args),
        _ => bail!("merge: some files are sweep results and some are run results; give the shards of one run or of one sweep"),
    }
}

fn merge_runs(docs: Vec<(String, Value)>, args: &MergeArgs) -> Result<ExitCode> {
    let shards = docs
        .into_iter()
        .map(|(name, v)| {
            let json: RunJson = serde_json::from_value(v).map_err(|e| format!("{name}: {e}"))?;
            crate::merge::run::read(&name, json)
        })
        .collect::<Result<Vec<_>, String>>()
        .map_err(anyhow::Error::msg)?;
    let n = shards.len();
    let result = crate::merge::run::merge(shards).map_err(anyhow::Error::msg)?;
    print!("{}", console::render(&result));
    if let Some(m) = &result.kneecap.merged {
        warn_gpu(&m.notes);
    }
    if let Some(o) = &args.output {
        let text = json::to_vec(&result, false);
        save::write_atomic(o, &text)?;
        eprintln!("kneecap: merged {n} shards into {}", o.display());
    }
    Ok(if result.kneecap.interrupted {
        ExitCode::from(2)
    } else {
        ExitCode::SUCCESS
    })
}

fn merge_sweeps(docs: Vec<(String, Value)>, args: &MergeArgs) -> Result<ExitCode> {
    let mut shards = Vec::new();
    for (name, v) in docs {
        let text = serde_json::to_string(&v)?;
        let result = match crate::compare::input::parse(&text) {
            Ok(crate::compare::input::Input::Sweep(s)) => *s,
            Ok(_) => bail!("{name}: not a kneecap sweep"),
            Err(e) => bail!("{name}: {e}"),
        };
        shards.push(crate::merge::sweep::read(&name, result).map_err(anyhow::Error::msg)?);
    }
    let n = shards.len();
    // The shards' results carry no engine settings; a batch limit one of
    // them knew (the built-in simulator's) explains the merged knee too.
    let max_num_seqs = shards
        .iter()
        .find_map(|s| s.result.knee.explain.as_ref()?.evidence.max_num_seqs);
    let mut result = crate::merge::sweep::merge(shards).map_err(anyhow::Error::msg)?;
    result.knee.explain = explain_measured(&result.steps, &result.knee, max_num_seqs);
    print!("{}", crate::report::table::render(&result));
    println!("{}", crate::report::chart::render(&result, 100));
    if let Some(m) = &result.merged {
        warn_gpu(&m.notes);
    }
    if let Some(o) = &args.output {
        save::write_atomic(o, &serde_json::to_vec_pretty(&result)?)?;
        eprintln!("kneecap: merged {n} sweep shards into {}", o.display());
    }
    Ok(crate::sweep::rows::exit_code(&result))
}

/// Each merged note saying a GPU block was left out, on stderr.
fn warn_gpu(notes: &[String]) {
    for line in crate::merge::gpu::refusals(notes) {
        eprintln!("kneecap: warning: {line}");
    }
}

//! Test support for the argument-to-config tests: parse a command line the way
//! `main` does (`normalize_args`, then clap) and check errors with their context.

use crate::cli::{normalize_args, Cli, Command, RunArgs, SweepArgs};
use clap::Parser;

/// A dataset file that exists in the repository.
pub const SHAREGPT_SAMPLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/data/sharegpt-sample.json");

/// A command line split on whitespace (for values without spaces).
pub fn argv(line: &str) -> Vec<&str> {
    line.split_whitespace().collect()
}

/// Parse `kneecap <command> <args...>` exactly as `main` does.
fn parse(command: &str, args: &[&str]) -> Command {
    let argv = ["kneecap", command]
        .into_iter()
        .chain(args.iter().copied())
        .map(String::from);
    match Cli::try_parse_from(normalize_args(argv)) {
        Ok(cli) => cli.command,
        Err(e) => panic!("clap rejected {command} {args:?}: {e}"),
    }
}

/// `kneecap run <args...>`, parsed.
pub fn run_args(args: &[&str]) -> RunArgs {
    match parse("run", args) {
        Command::Run(a) => *a,
        other => panic!("expected run, got {other:?}"),
    }
}

/// `kneecap sweep <args...>`, parsed.
pub fn sweep_args(args: &[&str]) -> SweepArgs {
    match parse("sweep", args) {
        Command::Sweep(a) => *a,
        other => panic!("expected sweep, got {other:?}"),
    }
}

/// Assert that `result` is an error whose text (with its context chain)
/// contains every one of `needles`.
#[track_caller]
pub fn assert_err_mentions<T: std::fmt::Debug>(result: anyhow::Result<T>, needles: &[&str]) {
    let text = format!("{:#}", result.expect_err("expected an error"));
    for needle in needles {
        assert!(
            text.contains(needle),
            "error {text:?} should mention {needle:?}"
        );
    }
}

/// Each row is `COMMAND LINE => a fragment of the error it must give`;
/// `convert` turns the command line's words into a config.
pub fn assert_rows_rejected<T: std::fmt::Debug>(
    rows: &[&str],
    convert: impl Fn(&[&str]) -> anyhow::Result<T>,
) {
    for row in rows {
        let (line, needle) = row.split_once(" => ").expect("a row is `LINE => NEEDLE`");
        let text = match convert(&argv(line)) {
            Ok(v) => panic!("`{line}` should be rejected, got {v:?}"),
            Err(e) => format!("{e:#}"),
        };
        assert!(
            text.contains(needle),
            "`{line}`: error {text:?} should mention {needle:?}"
        );
    }
}

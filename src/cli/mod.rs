//! CLI: clap definitions only (syntax). The command layer turns the parsed
//! arguments into validated configs (`cmd::args`); nothing else imports clap.

pub mod compare;
pub mod duration;
pub mod gpu;
pub mod merge;
pub mod predict;
pub mod profile;
pub mod report;
pub mod run;
pub mod sim;
pub mod sweep;
pub mod trace;
pub mod vllm;

use clap::{Parser, Subcommand};

pub use compare::CompareArgs;
pub use merge::MergeArgs;
pub use predict::PredictArgs;
pub use profile::ProfileArgs;
pub use report::ReportArgs;
pub use run::RunArgs;
pub use sim::SimArgs;
pub use sweep::SweepArgs;

/// kneecap: load-test an OpenAI-compatible LLM server and find its knee.
#[derive(Debug, Parser)]
#[command(name = "kneecap", version, about, long_about = None, propagate_version = true)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Benchmark one load level (vLLM `bench serve` compatible). Without
    /// --base-url/--host/--port, runs against the built-in simulator.
    Run(Box<RunArgs>),
    /// vLLM's command with vLLM's defaults: `kneecap bench serve ...` is
    /// `kneecap run ...`, except that without --base-url/--host/--port it talks
    /// to http://127.0.0.1:8000 (as vLLM does), never to the simulator.
    Bench {
        #[command(subcommand)]
        command: BenchCommand,
    },
    /// Find the knee: step the offered load up, judge each step against the
    /// SLO, bracket and refine the highest load that still meets it.
    Sweep(Box<SweepArgs>),
    /// Measure a server once: fit the simulator's parameters (with their
    /// uncertainties) from short probes within --budget seconds, print them
    /// and write the profile JSON (`kneecap sim --profile FILE` serves it).
    Profile(Box<ProfileArgs>),
    /// Serve the built-in simulated continuous-batching LLM server
    /// (completions, chat, responses; embeddings, rerank and pooling).
    Sim(Box<SimArgs>),
    /// Predict the knee of the simulator's engine model for a workload and
    /// SLO in virtual time (CPU seconds, no server), say what binds it and
    /// what moves it; over a grid of shapes with --grid. PREDICTED, not measured.
    Predict(Box<PredictArgs>),
    /// Re-render a saved sweep JSON (table, charts, --html) or summarize a run JSON.
    Report(Box<ReportArgs>),
    /// Compare two sweeps or two runs (A = baseline, B = candidate); --fail-if for CI.
    Compare(Box<CompareArgs>),
    /// Merge the result files of a sharded run or sweep (`--shard i/N`) into
    /// one exact result: counters and histograms add, SLOs are judged on the whole.
    Merge(Box<MergeArgs>),
}

#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// `kneecap run` with vLLM's default target, http://127.0.0.1:8000.
    Serve(Box<RunArgs>),
}

/// vLLM's parser accepts `--flag_name` for `--flag-name`; so do we. Only the
/// flag name is rewritten (never the value after `=`, never positional values).
pub fn normalize_args<I: IntoIterator<Item = String>>(args: I) -> Vec<String> {
    args.into_iter()
        .map(|arg| {
            if !arg.starts_with("--") {
                return arg;
            }
            match arg.split_once('=') {
                Some((name, value)) => format!("{}={value}", name.replace('_', "-")),
                None => arg.replace('_', "-"),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn underscore_flags_become_dashes_but_values_do_not() {
        let out = normalize_args(
            [
                "kneecap",
                "--num_prompts",
                "5",
                "--label=my_label",
                "my_file",
            ]
            .into_iter()
            .map(String::from),
        );
        assert_eq!(
            out,
            [
                "kneecap",
                "--num-prompts",
                "5",
                "--label=my_label",
                "my_file"
            ]
        );
    }
}

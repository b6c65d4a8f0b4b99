//! Profile arguments to [`ProfileConfig`]: the target and client as `run`
//! validates them, the budget, the output file and, without --base-url, the
//! built-in simulator's engine; each rule names its flag.

use super::run::run_config;
use super::sim::{any_engine_flag, apply_engine};
use crate::cli::ProfileArgs;
use crate::config::{RunConfig, Target};
use crate::sim::SimConfig;
use anyhow::{bail, Result};
use std::path::PathBuf;
use std::time::Duration;

/// The shortest and longest budgets a profile accepts, seconds.
pub const MIN_BUDGET_S: f64 = 10.0;
pub const MAX_BUDGET_S: f64 = 3600.0;

/// `kneecap profile`, validated.
#[derive(Debug, Clone)]
pub struct ProfileConfig {
    /// Target, client and body settings (`ignore_eos` forced on: the probes
    /// need exact output lengths).
    pub run: RunConfig,
    pub budget: Duration,
    pub output: PathBuf,
    pub metrics_url: Option<String>,
    /// The built-in simulator to start (no --base-url).
    pub sim: Option<SimConfig>,
}

/// Validates `kneecap profile`'s flags.
pub fn profile_config(a: &ProfileArgs) -> Result<ProfileConfig> {
    if !(MIN_BUDGET_S..=MAX_BUDGET_S).contains(&a.budget) {
        bail!(
            "--budget must be between {MIN_BUDGET_S} and {MAX_BUDGET_S} seconds, got {} (the probes need about 10 s at least)",
            a.budget
        );
    }
    let mut run = run_config(&a.run)?;
    if run.api.is_pooling() {
        bail!("--backend: profile needs a generation API (completions, chat or responses), not a pooling one");
    }
    if run.sessions.is_some() || run.shard.is_some() {
        bail!("--multi-turn and --shard do not apply to profile: it sends its own probes from one process");
    }
    run.body.ignore_eos = true;
    let sim = match &run.target {
        Target::Sim { preset } => {
            let mut cfg = SimConfig::from_preset(preset)
                .map_err(|e| anyhow::anyhow!("--sim-preset: {e:#}"))?;
            apply_engine(&a.sim, &mut cfg)?;
            cfg.validate()?;
            Some(cfg)
        }
        Target::Url(_) => {
            if let Some(flag) = any_engine_flag(&a.sim) {
                bail!("{flag} sets the built-in simulator's engine; drop it when profiling a server given by --base-url/--host/--port");
            }
            None
        }
    };
    let output = a.output.clone().unwrap_or_else(|| {
        let date = chrono::Local::now().format("%Y%m%d-%H%M%S");
        PathBuf::from(format!("kneecap-profile-{date}.json"))
    });
    Ok(ProfileConfig {
        run,
        budget: Duration::from_secs_f64(a.budget),
        output,
        metrics_url: a.metrics_url.clone(),
        sim,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Cli, Command};
    use crate::cmd::args::tests_support::argv;
    use clap::Parser;

    fn parse(line: &str) -> Result<ProfileConfig> {
        let mut args = vec!["kneecap", "profile"];
        args.extend(argv(line));
        match Cli::try_parse_from(args)?.command {
            Command::Profile(a) => profile_config(&a),
            _ => unreachable!(),
        }
    }

    #[test]
    fn the_built_in_simulator_takes_the_engine_overrides() {
        let c =
            parse("--budget 30 -o p.json --max-num-seqs 12 --prefill-interference 0.5").unwrap();
        let sim = c.sim.unwrap();
        assert_eq!(sim.params.max_num_seqs, 12);
        assert_eq!(sim.params.prefill_interference, 0.5);
        assert_eq!(c.budget, Duration::from_secs(30));
        assert_eq!(c.output, PathBuf::from("p.json"));
        assert!(c.run.body.ignore_eos);
        let d = parse("").unwrap();
        assert_eq!(d.budget, Duration::from_secs(120));
        assert_eq!(d.sim.unwrap().params, crate::sim::preset::tiny());
    }

    #[test]
    fn a_url_target_has_no_simulator() {
        let c = parse("--base-url http://127.0.0.1:9").unwrap();
        assert!(c.sim.is_none());
    }

    #[test]
    fn bad_values_name_their_flag() {
        for (line, want) in [
            (
                "--budget 5",
                "--budget must be between 10 and 3600 seconds, got 5",
            ),
            ("--budget nan", "--budget must be between"),
            (
                "--base-url http://x:1 --max-num-seqs 4",
                "--max-num-seqs sets the built-in simulator",
            ),
            (
                "--backend openai-embeddings",
                "--backend: profile needs a generation API",
            ),
            (
                "--prefill-interference 2",
                "--prefill-interference must be between 0 and 1",
            ),
            ("--sim-preset nope", "--sim-preset"),
        ] {
            let err = format!("{:#}", parse(line).unwrap_err());
            assert!(err.contains(want), "{line}: {err}");
        }
    }
}

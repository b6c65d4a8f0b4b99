//! `--multi-turn` arguments to a [`SessionConfig`]: turn counts, think time,
//! users, and the rules that tie them to the backend, the dataset and the load.

use crate::cli::run::{DatasetName, DelayDist, RunArgs};
use crate::client::openai::Api;
use crate::config::{LoadConfig, SessionConfig};
use crate::workload::session::{SessionParams, ThinkTime, TurnCount};
use anyhow::{bail, Result};
use std::time::Duration;

/// The session settings of a run (`None` without `--multi-turn`); sets the
/// load's concurrency to `--multi-turn-concurrency` (users).
pub fn session_config(
    a: &RunArgs,
    api: Api,
    load: &mut LoadConfig,
) -> Result<Option<SessionConfig>> {
    if !a.multi_turn {
        return no_session_flags(a).map(|_| None);
    }
    if api != Api::Chat {
        bail!("--multi-turn needs --backend openai-chat (each turn sends the conversation as chat messages)");
    }
    if !matches!(
        a.dataset_name,
        DatasetName::Random | DatasetName::Sharegpt | DatasetName::Custom
    ) {
        bail!("--multi-turn takes --dataset-name random, sharegpt or custom (a JSONL of {{\"messages\": [..]}} lines)");
    }
    if a.shard.is_some() {
        bail!("--multi-turn cannot be combined with --shard yet; run one process");
    }
    load.max_concurrency = users(a)?;
    Ok(Some(SessionConfig {
        params: SessionParams {
            turns: turn_count(a)?,
            think: think_time(a)?,
        },
        per_turn_input_len: a.per_turn_input_len,
        min_turns: a.multi_turn_min_turns,
        max_turns: (a.multi_turn_max_turns > 0).then_some(a.multi_turn_max_turns),
    }))
}

/// Session flags given without `--multi-turn` would silently do nothing.
fn no_session_flags(a: &RunArgs) -> Result<()> {
    let given = [
        (
            "--multi-turn-concurrency",
            a.multi_turn_concurrency.is_some(),
        ),
        ("--multi-turn-delay-ms", a.multi_turn_delay_ms != 0.0),
        ("--per-turn-input-len", a.per_turn_input_len != 0),
        ("--multi-turn-min-turns", a.multi_turn_min_turns != 0),
        ("--multi-turn-max-turns", a.multi_turn_max_turns != 0),
    ];
    match given.iter().find(|(_, set)| *set) {
        Some((flag, _)) => bail!("{flag} needs --multi-turn"),
        None => Ok(()),
    }
}

/// `--multi-turn-concurrency` (users), or `--max-concurrency` as its alias.
fn users(a: &RunArgs) -> Result<Option<usize>> {
    match (a.multi_turn_concurrency, a.max_concurrency) {
        (Some(0), _) => bail!("--multi-turn-concurrency must be greater than 0"),
        (Some(u), Some(c)) if u != c => bail!(
            "--multi-turn-concurrency {u} and --max-concurrency {c} disagree; with --multi-turn both count users, give one"
        ),
        (u, c) => Ok(u.or(c)),
    }
}

/// Fixed (`--multi-turn-num-turns`) or uniform in `[min, max]`.
fn turn_count(a: &RunArgs) -> Result<TurnCount> {
    if a.multi_turn_num_turns == 0 {
        bail!("--multi-turn-num-turns must be at least 1");
    }
    let or_n = |v: u32| if v == 0 { a.multi_turn_num_turns } else { v };
    let (min, max) = (or_n(a.multi_turn_min_turns), or_n(a.multi_turn_max_turns));
    if min > max {
        bail!("--multi-turn-min-turns {min} is above --multi-turn-max-turns {max}; swap them");
    }
    Ok(TurnCount { min, max })
}

fn think_time(a: &RunArgs) -> Result<ThinkTime> {
    let ms = a.multi_turn_delay_ms;
    if !ms.is_finite() || ms < 0.0 {
        bail!("--multi-turn-delay-ms must be 0 or more milliseconds, got {ms}");
    }
    let d = Duration::from_secs_f64(ms / 1e3);
    Ok(match a.multi_turn_delay_dist {
        DelayDist::Fixed => ThinkTime::Fixed(d),
        DelayDist::Exponential => ThinkTime::Exponential(d),
    })
}

#[cfg(test)]
mod tests {
    use crate::cmd::args::run::run_config;
    use crate::cmd::args::tests_support::{argv, run_args};
    use crate::workload::session::{ThinkTime, TurnCount};
    use std::time::Duration;

    fn config(line: &str) -> anyhow::Result<crate::config::RunConfig> {
        run_config(&run_args(&argv(line)))
    }

    fn error(line: &str) -> String {
        match config(line) {
            Ok(_) => panic!("accepted: {line}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn session_flags_become_turns_think_time_and_users() {
        let c = config("--backend openai-chat --multi-turn --multi-turn-min-turns 2 --multi-turn-max-turns 5 --multi-turn-delay-ms 250 --multi-turn-delay-dist exponential --multi-turn-concurrency 8 --per-turn-input-len 64").unwrap();
        let s = c.sessions.expect("sessions");
        assert_eq!(s.params.turns, TurnCount { min: 2, max: 5 });
        assert_eq!(
            s.params.think,
            ThinkTime::Exponential(Duration::from_millis(250))
        );
        assert_eq!(s.per_turn_input_len, 64);
        assert_eq!(c.load.max_concurrency, Some(8), "users");
        let fixed = config("--backend openai-chat --multi-turn --multi-turn-num-turns 4")
            .unwrap()
            .sessions
            .unwrap();
        assert_eq!(fixed.params.turns, TurnCount { min: 4, max: 4 });
        assert_eq!(fixed.params.think, ThinkTime::Fixed(Duration::ZERO));
        assert!(config("--backend openai-chat").unwrap().sessions.is_none());
    }

    #[test]
    fn bad_session_lines_name_the_flag() {
        for (line, want) in [
            ("--multi-turn", "--backend openai-chat"),
            ("--backend openai-chat --multi-turn --dataset-name burstgpt --dataset-path x.csv", "--dataset-name random, sharegpt or custom"),
            ("--backend openai-chat --multi-turn --multi-turn-min-turns 6 --multi-turn-max-turns 3", "--multi-turn-min-turns 6"),
            ("--backend openai-chat --multi-turn --multi-turn-concurrency 0", "--multi-turn-concurrency must be"),
            ("--backend openai-chat --multi-turn --multi-turn-concurrency 4 --max-concurrency 2", "disagree"),
            ("--backend openai-chat --multi-turn --multi-turn-delay-ms=-5", "--multi-turn-delay-ms"),
            ("--backend openai-chat --multi-turn-delay-ms 100", "--multi-turn-delay-ms needs --multi-turn"),
            ("--backend openai-chat --multi-turn --multi-turn-num-turns 0", "--multi-turn-num-turns must"),
        ] {
            let e = error(line);
            assert!(e.contains(want), "{line}: {e}");
        }
    }

    #[test]
    fn a_timed_session_run_needs_users() {
        let c =
            config("--backend openai-chat --multi-turn --duration 5s --multi-turn-concurrency 3")
                .unwrap();
        assert_eq!(c.load.max_concurrency, Some(3));
        let e = error("--backend openai-chat --multi-turn --duration 5s");
        assert!(e.contains("--max-concurrency"), "{e}");
    }
}

//! Every `kneecap` command shown in the README, BENCHMARKS.md and docs/
//! still parses and converts to a valid config; the quick ones (against the
//! built-in simulator, a few seconds each) also run and exit 0. Every other
//! command the README and BENCHMARKS.md show (a benchmark script, a sweep,
//! a server) is named in [`NOT_RUN_IN_CI`] with why. The dated pages of
//! docs/benchmarks/ are history, the commands as they were run: not checked.

use clap::Parser;
use kneecap::cli::{normalize_args, BenchCommand, Cli, Command};
use std::path::{Path, PathBuf};
use std::process::Command as Process;
use std::time::{Duration, Instant};

/// Subcommands a documented command may start with.
const SUBCOMMANDS: [&str; 9] = [
    "run", "bench", "sweep", "sim", "profile", "predict", "report", "compare", "merge",
];

/// A command found in a doc: where it was, and its words after `kneecap`.
#[derive(Debug)]
struct DocCommand {
    at: String,
    words: Vec<String>,
}

fn doc_files() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = vec![root.join("README.md"), root.join("BENCHMARKS.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .expect("docs/ is readable")
        .map(|e| e.expect("a docs entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    files.extend(docs);
    files
}

/// The command lines in a Markdown file's shell code blocks (```sh, ```bash,
/// ```console or an untyped fence; ```text blocks are output), with `\`
/// continuations joined, blank and `#` comment lines left out: where each
/// starts (`FILE:LINE`), and the line.
fn shell_lines(path: &Path) -> Vec<(String, String)> {
    let text = std::fs::read_to_string(path).expect("doc is readable");
    let name = path.file_name().unwrap().to_string_lossy().to_string();
    let mut out = Vec::new();
    let mut shell = None::<bool>;
    let mut pending: Option<(usize, String)> = None;
    for (i, line) in text.lines().enumerate() {
        if let Some(info) = line.trim_start().strip_prefix("```") {
            shell = match shell {
                Some(_) => None,
                None => Some(matches!(
                    info.trim(),
                    "" | "sh" | "bash" | "console" | "shell"
                )),
            };
            continue;
        }
        if shell != Some(true) {
            continue;
        }
        let s = line.trim();
        let (start, joined) = match pending.take() {
            Some((start, before)) => (start, format!("{before} {s}")),
            None => (i + 1, s.to_string()),
        };
        if let Some(head) = joined.strip_suffix('\\') {
            pending = Some((start, head.trim_end().to_string()));
            continue;
        }
        if !joined.is_empty() && !joined.starts_with('#') {
            out.push((format!("{name}:{start}"), joined));
        }
    }
    out
}

/// A documented line as a `kneecap` command (`kneecap …` or `cargo run
/// --release -- …` with a subcommand), trailing `# comments` dropped.
fn as_command(at: &str, line: &str) -> Option<DocCommand> {
    let cmd = line
        .strip_prefix("cargo run --release -- ")
        .or_else(|| line.strip_prefix("kneecap "))?;
    let words = shell_words(cmd);
    words
        .first()
        .is_some_and(|w| SUBCOMMANDS.contains(&w.as_str()))
        .then(|| DocCommand {
            at: at.to_string(),
            words,
        })
}

/// The `kneecap` commands in a Markdown file's shell code blocks.
fn commands_in(path: &Path) -> Vec<DocCommand> {
    shell_lines(path)
        .iter()
        .filter_map(|(at, line)| as_command(at, line))
        .collect()
}

/// Split a command line as a POSIX shell would for these docs: single and
/// double quotes, backslash escapes, a `#` comment; `...` (elided flags) dropped.
fn shell_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                word.extend(chars.by_ref().take_while(|&q| q != '\''));
            }
            '"' => {
                in_word = true;
                word.extend(chars.by_ref().take_while(|&q| q != '"'));
            }
            '\\' => {
                in_word = true;
                word.extend(chars.next());
            }
            '#' if !in_word => break,
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    if in_word {
        words.push(word);
    }
    words.retain(|w| w != "...");
    words
}

fn all_commands() -> Vec<DocCommand> {
    let cmds: Vec<DocCommand> = doc_files().iter().flat_map(|f| commands_in(f)).collect();
    assert!(
        cmds.len() >= 10,
        "found only {} documented commands; is the extraction broken?",
        cmds.len()
    );
    cmds
}

/// A profile `kneecap profile` wrote (of the simulator), standing in for
/// the file a documented `sim --profile` or `predict --profile` names.
const PROFILE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/profile.json");

/// The command's words, a `--profile FILE` of `sim` or `predict` (or a
/// `--twin FILE` of `sweep`) pointing at [`PROFILE`] (`run --profile` is
/// vLLM's flag, without a value).
fn with_profile(cmd: &DocCommand) -> Vec<String> {
    let mut words = cmd.words.clone();
    let flag = match words[0].as_str() {
        "sim" | "predict" => "--profile",
        "sweep" => "--twin",
        _ => return words,
    };
    if let Some(i) = words.iter().position(|w| w == flag) {
        if let Some(file) = words.get_mut(i + 1) {
            *file = PROFILE.to_string();
        }
    }
    words
}

/// [`with_profile`], with a relative `--dataset-path` naming a file of the
/// repository (the docs' samples under tests/data) made absolute: the quick
/// commands run in a directory of their own.
fn with_repo_files(cmd: &DocCommand) -> Vec<String> {
    let mut words = with_profile(cmd);
    if let Some(i) = words.iter().position(|w| w == "--dataset-path") {
        if let Some(path) = words.get_mut(i + 1) {
            let in_repo = Path::new(env!("CARGO_MANIFEST_DIR")).join(&*path);
            if Path::new(path.as_str()).is_relative() && in_repo.exists() {
                *path = in_repo.display().to_string();
            }
        }
    }
    words
}

/// Parse as `main` does, then convert to the command's validated config.
fn check(cmd: &DocCommand) -> Result<(), String> {
    let argv = std::iter::once("kneecap".to_string()).chain(with_profile(cmd));
    let cli = Cli::try_parse_from(normalize_args(argv)).map_err(|e| e.to_string())?;
    let err = |e: anyhow::Error| format!("{e:#}");
    match cli.command {
        Command::Run(a) => kneecap::cmd::args::run::run_config(&a)
            .map(drop)
            .map_err(err),
        Command::Bench {
            command: BenchCommand::Serve(a),
        } => kneecap::cmd::args::run::run_config(&a)
            .map(drop)
            .map_err(err),
        Command::Sweep(a) => kneecap::cmd::args::sweep::sweep_config(&a)
            .map(drop)
            .map_err(err),
        Command::Profile(a) => kneecap::cmd::args::profile::profile_config(&a)
            .map(drop)
            .map_err(err),
        Command::Predict(a) => kneecap::cmd::args::predict::predict_options(&a)
            .map(drop)
            .map_err(err),
        Command::Sim(a) => {
            kneecap::cmd::args::sim::truth_args(&a).map_err(err)?;
            kneecap::cmd::args::sim::sim_options(*a)
                .map(drop)
                .map_err(err)
        }
        _ => Ok(()),
    }
}

#[test]
fn every_documented_command_parses_and_makes_a_valid_config() {
    let bad: Vec<String> = all_commands()
        .iter()
        .filter_map(|c| {
            check(c)
                .err()
                .map(|e| format!("{}: kneecap {}\n  {e}", c.at, c.words.join(" ")))
        })
        .collect();
    assert!(
        bad.is_empty(),
        "documented commands that no longer work:\n{}",
        bad.join("\n")
    );
}

/// Quick: against the simulator (no target flag) and bounded by design:
/// `sim --explain` and `predict` (virtual time, no server), a `profile` of
/// the simulator within a budget of at most 30 s, or a `run` of a few
/// hundred requests at a given rate.
fn quick(c: &DocCommand) -> bool {
    let has = |flag: &str| {
        c.words
            .iter()
            .any(|w| w == flag || w.starts_with(&format!("{flag}=")))
    };
    let targeted = has("--base-url") || has("--host") || has("--port");
    match c.words[0].as_str() {
        "sim" => has("--explain"),
        "predict" => true,
        "profile" => !targeted && budget_s(c).is_some_and(|b| b <= 30.0),
        "run" => !targeted && has("--num-prompts") && has("--request-rate"),
        _ => false,
    }
}

/// A documented `profile`'s `--budget` in seconds.
fn budget_s(c: &DocCommand) -> Option<f64> {
    let i = c.words.iter().position(|w| w == "--budget")?;
    c.words.get(i + 1)?.parse().ok()
}

/// A quick command that waits on the clock (a `run` at its rate, a
/// `profile` probing the simulator for its budget) rather than spending CPU
/// in virtual time (`sim --explain`, `predict`): the two kinds run side by
/// side, so the test takes the longer of the two, not their sum.
fn waits_on_real_time(c: &DocCommand) -> bool {
    matches!(c.words[0].as_str(), "run" | "profile")
}

/// Run `cmds` one after another in a directory of their own (a `--profile`
/// a command reads is [`PROFILE`], as in [`check`]: the lane that writes
/// one runs beside this one); a line for each that failed or ran too long.
fn run_in_turn(cmds: &[&DocCommand]) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let mut bad = Vec::new();
    for c in cmds {
        let start = Instant::now();
        let words = with_repo_files(c);
        let out = Process::new(env!("CARGO_BIN_EXE_kneecap"))
            .args(&words)
            .args(["--ui", "plain"].iter().filter(|_| words[0] == "run"))
            .current_dir(dir.path())
            .output()
            .expect("kneecap runs");
        let took = start.elapsed();
        if !out.status.success() {
            bad.push(format!(
                "{}: kneecap {} exited {:?}\n{}",
                c.at,
                words.join(" "),
                out.status.code(),
                String::from_utf8_lossy(&out.stderr)
            ));
        } else if took > Duration::from_secs(120) {
            bad.push(format!("{}: a quick command took {took:?}", c.at));
        }
    }
    bad
}

#[test]
fn the_quick_documented_commands_run_against_the_simulator() {
    let quick: Vec<DocCommand> = all_commands().into_iter().filter(quick).collect();
    assert!(!quick.is_empty(), "no quick command found in the docs");
    let (clock, cpu): (Vec<&DocCommand>, Vec<&DocCommand>) =
        quick.iter().partition(|c| waits_on_real_time(c));
    let bad: Vec<String> = std::thread::scope(|s| {
        let lanes = [
            s.spawn(|| run_in_turn(&clock)),
            s.spawn(|| run_in_turn(&cpu)),
        ];
        lanes
            .into_iter()
            .flat_map(|lane| lane.join().expect("a lane of commands ran"))
            .collect()
    });
    assert!(
        bad.is_empty(),
        "quick documented commands that failed:\n{}",
        bad.join("\n")
    );
}

/// Commands the README and BENCHMARKS.md show that the quick test does not
/// run, each with why. A line is named by the entry it starts with, after
/// any leading `VAR=value` words. The `kneecap` ones still parse above.
const NOT_RUN_IN_CI: &[(&str, &str)] = &[
    ("cargo test", "the test suite itself"),
    (
        "cargo run --release -- sweep",
        "too slow for CI: a sweep of the simulator, about 1.5 min",
    ),
    (
        "kneecap sweep",
        "too slow for CI: a sweep is minutes of real load, against a server",
    ),
    (
        "kneecap bench serve",
        "needs a server: vLLM's default target, 127.0.0.1:8000",
    ),
    ("kneecap run --base-url", "needs the server the line names"),
    (
        "kneecap sim",
        "a server: it serves until stopped (`sim --explain` runs above)",
    ),
    (
        "bench/peers.sh",
        "too slow for CI: 7 min on an idle machine, and it needs the peers \
         (vllm-bench, or the Python tools' virtualenvs)",
    ),
    (
        "bench/sim_capacity.sh",
        "a speed benchmark (tests never assert speed): 2,000 streams \
         against the simulator, both on the same cores",
    ),
    (
        "bench/dispatch.sh",
        "a speed benchmark (tests never assert speed): 10 s at each of 3 \
         rates, up to 5,000 req/s",
    ),
    (
        "bench/time_to_knee.sh",
        "too slow for CI: four methods of 259 to 927 s each, three of them \
         other tools",
    ),
    (
        "bench/twin_time_to_knee.py",
        "too slow for CI: 25 min (3 seeds, two sweeps each)",
    ),
    (
        "bench/twin_recovery.sh",
        "too slow for CI: 16 min for 20 hidden parameter sets",
    ),
    (
        "bench/vllm_side_by_side.sh",
        "needs the real vLLM engine (scripts/vllm-server.sh); \
         tests/vllm_e2e runs the same comparison in .ci/run",
    ),
    (
        "bench/twin_vllm.sh",
        "too slow for CI and needs the real vLLM engine: two servers, 80 min \
         of one-step sweeps; tests/vllm_e2e checks one held-out knee in .ci/run",
    ),
    (
        "python3 bench/twin_vllm.py --repredict",
        "reads a twin_vllm.sh run's measured steps (the real vLLM engine, 80          min), which CI does not make",
    ),
    (
        "bench/twin_speed.sh",
        "a speed benchmark (tests never assert speed): old and new \
         predictions timed side by side (issue 39)",
    ),
    (
        "eval $(scripts/llama-server.sh env)",
        "too slow for this test: builds llama.cpp's server unless cached \
         (1,949 s under load) for the llama_e2e line; .ci/run runs both",
    ),
    (
        "cargo test --test llama_e2e",
        "too slow for this test: a real llama.cpp engine, 271 to 412 s; \
         .ci/run runs it",
    ),
];

/// A documented line's `VAR=value` words dropped, the rest rejoined.
fn without_env(line: &str) -> String {
    let is_env = |w: &String| {
        w.split_once('=').is_some_and(|(name, _)| {
            !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
        })
    };
    let words = shell_words(line);
    let rest: Vec<String> = words.into_iter().skip_while(is_env).collect();
    rest.join(" ")
}

#[test]
fn every_command_the_readme_and_benchmarks_show_runs_or_is_named_not_run() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut unnamed = Vec::new();
    for file in ["README.md", "BENCHMARKS.md"] {
        for (at, line) in shell_lines(&root.join(file)) {
            if as_command(&at, &line).is_some_and(|c| quick(&c)) {
                continue;
            }
            let bare = without_env(&line);
            if !NOT_RUN_IN_CI
                .iter()
                .any(|(start, _)| bare.starts_with(start))
            {
                unnamed.push(format!("{at}: {line}"));
            }
        }
    }
    assert!(
        unnamed.is_empty(),
        "documented commands neither run by the quick test nor named in NOT_RUN_IN_CI:\n{}",
        unnamed.join("\n")
    );
}

//! vLLM 0.33's whole `bench serve` command line (issue 13): every flag in the
//! committed list (`tests/data/vllm-0.33-bench-serve-flags.txt`, generated
//! from `vllm bench serve --help=all`) parses as `kneecap bench serve`, alone
//! and all together; a flag with no meaning for kneecap becomes one note.

use clap::Parser;
use kneecap::cli::{normalize_args, Cli, Command};
use kneecap::cmd::args::run::{run_config_for, DefaultTarget};

const LIST: &str = include_str!("../data/vllm-0.33-bench-serve-flags.txt");

/// (flag, argument) pairs of the committed list.
fn flags() -> Vec<(&'static str, &'static str)> {
    LIST.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| l.split_once('\t').unwrap_or((l, "")))
        .collect()
}

/// A plausible value for `flag`, whose help shows `arg` (empty: a switch).
fn values(flag: &str, arg: &str) -> Vec<&'static str> {
    if arg.is_empty() {
        return vec![];
    }
    let v: &[&'static str] = match flag {
        "--backend" => &["openai-chat"],
        "--dataset-name" => &["random"],
        "--lora-assignment" => &["round-robin"],
        "--ramp-up-strategy" => &["linear"],
        "--speed-bench-dataset-subset" => &["throughput_1k"],
        "--base-url" => &["http://127.0.0.1:8000"],
        "--host" => &["127.0.0.1"],
        "--endpoint" => &["/v1/chat/completions"],
        "--chat-template-kwargs" => &[r#"{"thinking": true}"#],
        "--extra-body" => &[r#"{"min_tokens": 1}"#],
        "--random-mm-limit-mm-per-prompt" => &[r#"{"image": 1}"#],
        "--random-mm-bucket-config" => &["{(256, 256, 1): 1.0}"],
        "--goodput" => &["ttft:500", "tpot:50"],
        "--header" => &["x-a=1", "x-b=2"],
        "--metadata" => &["tp=1", "version=0.33"],
        "--lora-modules" => &["adapter-a", "adapter-b"],
        "--metric-percentiles" => &["50,99"],
        "--percentile-metrics" => &["ttft,tpot,itl,e2el"],
        "--random-range-ratio" => &["0.1"],
        "--burstiness" | "--request-rate" | "--probe-request-rate" => &["2.5"],
        "--temperature"
        | "--top-p"
        | "--min-p"
        | "--frequency-penalty"
        | "--presence-penalty"
        | "--repetition-penalty"
        | "--timed-trace-sec-multiplier"
        | "--blazedit-min-distance"
        | "--blazedit-max-distance"
        | "--random-mm-num-mm-items-range-ratio" => &["0.5"],
        "--timeline-itl-thresholds" => &["25,50"],
        "--label"
        | "--model"
        | "--served-model-name"
        | "--tokenizer-mode"
        | "--hf-name"
        | "--hf-split"
        | "--hf-subset"
        | "--spec-bench-category"
        | "--speed-bench-category"
        | "--bfcl-categories"
        | "--request-id-prefix"
        | "--result-filename"
        | "--timed-trace-label-timestamp"
        | "--timed-trace-label-input-length"
        | "--timed-trace-label-output-length"
        | "--timed-trace-label-hash-ids" => &["x"],
        "--dataset-path" | "--tokenizer" | "--result-dir" => &["some/path"],
        _ => &["4"],
    };
    v.to_vec()
}

fn parse(extra: &[&str]) -> Result<Cli, clap::Error> {
    let argv = ["kneecap", "bench", "serve"]
        .iter()
        .chain(extra)
        .map(|s| s.to_string());
    Cli::try_parse_from(normalize_args(argv))
}

#[test]
fn the_committed_list_is_vllms_whole_command_line() {
    let f = flags();
    assert!(f.len() >= 100, "{} flags", f.len());
    for must in [
        "--backend",
        "--ready-check-timeout-sec",
        "--lora-modules",
        "--profile",
    ] {
        assert!(f.iter().any(|(name, _)| *name == must), "{must}");
    }
}

#[test]
fn every_vllm_flag_parses_alone() {
    for (flag, arg) in flags() {
        let mut line = vec![flag];
        line.extend(values(flag, arg));
        if let Err(e) = parse(&line) {
            panic!("{line:?} was rejected:\n{e}");
        }
        // vLLM spells flags with underscores too.
        let underscored = flag
            .replacen("--", "@", 1)
            .replace('-', "_")
            .replacen('@', "--", 1);
        line[0] = &underscored;
        if let Err(e) = parse(&line) {
            panic!("{line:?} was rejected:\n{e}");
        }
    }
}

#[test]
fn every_vllm_flag_parses_in_one_command_line() {
    let mut line = Vec::new();
    for (flag, arg) in flags() {
        if flag == "--no-self-timed" {
            continue; // --self-timed and --no-self-timed override each other
        }
        line.push(flag);
        line.extend(values(flag, arg));
    }
    if let Err(e) = parse(&line) {
        panic!("the whole command line was rejected:\n{e}");
    }
}

#[test]
fn flags_without_meaning_become_one_note_each_and_the_run_goes_on() {
    let cli = parse(&[
        "--plot-timeline",
        "--spec-bench-category",
        "x",
        "--chat-template-kwargs",
        "{}",
        "--probe-request-rate",
        "2",
    ])
    .unwrap();
    let Command::Bench { command } = cli.command else {
        panic!("not bench serve");
    };
    let kneecap::cli::BenchCommand::Serve(args) = command;
    let cfg = run_config_for(&args, DefaultTarget::VllmLocalhost).unwrap();
    assert_eq!(cfg.ignored_flags.len(), 4, "{:#?}", cfg.ignored_flags);
    for (note, flag) in cfg.ignored_flags.iter().zip([
        "--chat-template-kwargs",
        "--spec-bench-category",
        "--probe-request-rate",
        "--plot-timeline",
    ]) {
        assert!(note.starts_with(flag), "{note}");
        assert!(
            note.contains("no meaning for kneecap") && !note.contains('\n'),
            "{note}"
        );
    }
    assert!(!cfg.profile);
}

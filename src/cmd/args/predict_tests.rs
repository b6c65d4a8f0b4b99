//! `kneecap predict`'s flags to options: every rule names its flag.

use super::*;
use crate::cli::{normalize_args, Cli, Command};
use crate::cmd::args::tests_support::{argv, assert_rows_rejected};
use clap::Parser;
use std::time::Duration;

fn parse(args: &[&str]) -> Result<PredictOptions> {
    let words = ["kneecap", "predict"]
        .into_iter()
        .chain(args.iter().copied())
        .map(String::from);
    match Cli::try_parse_from(normalize_args(words))?.command {
        Command::Predict(a) => predict_options(&a),
        other => panic!("expected predict, got {other:?}"),
    }
}

#[test]
fn the_engine_workload_and_search_flags_reach_the_prediction() {
    let o = parse(&argv(
        "--preset 7b-24gb --max-num-seqs 64 --step-base-ms 10 --no-enable-prefix-caching \
         --random-input-len 512 --random-output-len 64 --random-range-ratio 0.1 \
         --random-prefix-len 256 --burstiness 2 --slo p99_ttft_ms<=500 --slo p99_itl_ms<=50 \
         --requests 500 --warmup 50 --seeds 2 --seed 7 --precision 0.01 --target-rate 100 -o p.json",
    ))
    .unwrap();
    let t = &o.config.truth;
    assert_eq!(t.params.max_num_seqs, 64);
    assert_eq!(t.params.step_base, Duration::from_millis(10));
    assert_eq!(
        t.params.kv_cache_tokens,
        crate::sim::preset::seven_b_24gb().kv_cache_tokens
    );
    let l = &t.load;
    assert_eq!((l.input_len, l.output_len, l.shared_prefix), (512, 64, 256));
    assert_eq!((l.warmup, l.requests), (50, 500));
    assert!(
        !l.prefix_caching && l.token_times,
        "ITL needs every token's time"
    );
    assert_eq!(t.range_ratio, (0.1, 0.1));
    assert_eq!((t.burstiness, t.precision), (2.0, 0.01));
    assert_eq!(t.seeds, vec![7, 8]);
    assert_eq!(t.slos.len(), 2);
    assert!(o.config.moves && o.config.corners.is_empty() && o.grid.is_none());
    assert_eq!(o.target_rate, Some(100.0));
    assert_eq!(o.output.as_deref(), Some(std::path::Path::new("p.json")));
    assert_eq!(o.source, "preset 7b-24gb");
}

#[test]
fn the_grid_parses_its_lists_and_skips_the_moves() {
    let o = parse(&argv(
        "--slo p99_ttft_ms<=500 --grid --grid-input 256,1024 --grid-output 64 --grid-prefix 0,0.5 --html h.html",
    ))
    .unwrap();
    let g = o.grid.unwrap();
    assert_eq!(
        (g.inputs, g.outputs, g.prefix_shares),
        (vec![256, 1024], vec![64], vec![0.0, 0.5])
    );
    assert!(!o.config.moves);
    assert_eq!(o.html.as_deref(), Some(std::path::Path::new("h.html")));
    // The defaults: 3 × 2 cells, no prefix.
    let d = parse(&argv("--slo p99_ttft_ms<=500 --grid"))
        .unwrap()
        .grid
        .unwrap();
    assert_eq!(
        (d.inputs.len(), d.outputs.len(), d.prefix_shares),
        (3, 2, vec![0.0])
    );
}

#[test]
fn predict_rules_name_their_flag() {
    assert_rows_rejected(
        &[
            "--slo p99_ttft => --slo: invalid SLO",
            "--slo ttft:1 --preset nope => --preset",
            "--slo ttft:1 --max-num-seqs 0 => --max-num-seqs must be at least 1",
            "--slo ttft:1 --requests 0 => --requests must be at least 1",
            "--slo ttft:1 --seeds 0 => --seeds must be between 1 and 64",
            "--slo ttft:1 --precision 0 => --precision must be a fraction",
            "--slo ttft:1 --random-range-ratio 1.5 => --random-range-ratio",
            "--slo ttft:1 --random-output-len 0 => --random-output-len must be at least 1",
            "--slo ttft:1 --random-input-len 4000 --random-output-len 200 => over --max-model-len 4096",
            // 1000 + 2000 + 128 fit; at their longest (ratio 0.5) they do not.
            "--slo ttft:1 --random-input-len 2000 --random-range-ratio 0.5 --random-prefix-len 1000 \
             => reach 4192 tokens",
            "--slo ttft:1 --target-rate 0 => --target-rate must be a positive number",
            "--slo ttft:1 --grid --grid-input 256,x => --grid-input: 'x' is not a number",
            "--slo ttft:1 --grid --grid-output 0 => must be at least 1",
            "--slo ttft:1 --grid --grid-prefix 1 => --grid-prefix: 1 must be a share in [0, 1)",
            "--slo ttft:1 --grid --grid-input 1 --grid-prefix 0.9 => leaves no prompt tokens",
            "--slo ttft:1 --grid --grid-input 1,2,3,4,5,6,7,8,9 --grid-output 1,2,3,4,5,6,7,8 => over 64",
        ],
        parse,
    );
}

#[test]
fn the_grid_flags_need_grid_and_an_slo_is_required() {
    for line in [
        "--slo ttft:1 --grid-input 256",
        "--slo ttft:1 --html h.html",
        "--random-input-len 256",
    ] {
        let words = ["kneecap", "predict"]
            .into_iter()
            .chain(argv(line))
            .map(String::from);
        assert!(
            Cli::try_parse_from(normalize_args(words)).is_err(),
            "{line}"
        );
    }
    // With the grid the single workload's lengths are not checked.
    parse(&argv("--slo ttft:1 --grid --random-input-len 9000")).unwrap();
}

/// A profile file (the `tiny` parameters with ±5% on the costs) in `dir`.
fn profile_file(dir: &std::path::Path) -> String {
    let path = dir.join("prof.json");
    std::fs::write(&path, crate::twin::testing::sample().to_json()).unwrap();
    path.to_str().unwrap().to_string()
}

#[test]
fn a_profile_gives_the_central_parameters_and_its_corners_with_the_overrides_on_top() {
    let dir = tempfile::tempdir().unwrap();
    let file = profile_file(dir.path());
    let profile = crate::twin::testing::sample();
    let o = parse(&argv(&format!("--slo ttft:1 --profile {file}"))).unwrap();
    assert_eq!(o.config.truth.params, profile.params());
    assert_eq!(o.source, format!("profile {file}"));
    assert!(o.config.truth.load.prefix_caching && o.config.misfit.is_none());
    // Corners equal to the centre (the reported KV cache) are dropped.
    let c = &o.config.corners;
    assert!(
        c.len() >= 10 && c.len() < profile.corners().len(),
        "{}",
        c.len()
    );
    assert!(c.iter().all(|p| *p != profile.params()));
    // "What if": an override holds in the centre and in every corner.
    let o = parse(&argv(&format!(
        "--slo ttft:1 --profile {file} --max-num-seqs 64 --no-enable-prefix-caching"
    )))
    .unwrap();
    assert_eq!(o.config.truth.params.max_num_seqs, 64);
    assert!(o.config.corners.iter().all(|p| p.max_num_seqs == 64));
    assert!(!o.config.truth.load.prefix_caching);
}

#[test]
fn a_profile_with_a_misfit_asks_for_a_wider_interval() {
    let dir = tempfile::tempdir().unwrap();
    let mut profile = crate::twin::testing::sample();
    let e = profile.params.decode_seq_us.clone();
    profile.params.decode_seq_us = e.misfit(10.0, 0.0, "curved");
    let path = dir.path().join("bad.json");
    std::fs::write(&path, profile.to_json()).unwrap();
    let o = parse(&argv(&format!("--slo ttft:1 --profile {}", path.display()))).unwrap();
    let m = o.config.misfit.unwrap();
    assert!(m.widen >= 0.1 && m.reasons[0].contains("curved"), "{m:?}");
}

#[test]
fn draw_stalls_takes_the_profiles_stalls_as_pauses_over_the_costs_without_them() {
    let dir = tempfile::tempdir().unwrap();
    let mut profile = crate::twin::testing::sample();
    profile.params.stall_rate_per_s = crate::twin::Estimate::fitted(2.0, 0.2, 0.0, "t");
    profile.params.stall_ms = crate::twin::Estimate::fitted(100.0, 10.0, 0.0, "t");
    let path = dir.path().join("stalls.json");
    std::fs::write(&path, profile.to_json()).unwrap();
    let flags = format!("--slo ttft:1 --profile {}", path.display());
    let mean = parse(&argv(&flags)).unwrap().config.truth.params;
    let drawn = parse(&argv(&format!("{flags} --draw-stalls")))
        .unwrap()
        .config
        .truth
        .params;
    // At their mean: no pause, the decode step 20% longer; drawn: 2 a
    // second of 100 ms over the step without them.
    assert!(!mean.stalls.active());
    assert_eq!(
        (drawn.stalls.rate_per_s, drawn.stalls.mean.as_millis()),
        (2.0, 100)
    );
    let ratio = mean.step_base.as_secs_f64() / drawn.step_base.as_secs_f64();
    assert!((ratio - 1.2).abs() < 1e-6, "{ratio}");
    // Without a profile there are no stalls to draw.
    let err = parse(&argv("--slo ttft:1 --draw-stalls")).unwrap_err();
    assert!(format!("{err:#}").contains("--profile"), "{err:#}");
}

#[test]
fn a_missing_or_foreign_profile_is_refused_naming_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    let other = dir.path().join("other.json");
    std::fs::write(&other, "{\"kind\": \"kneecap-predict\"}").unwrap();
    let file = profile_file(dir.path());
    let rows = [
        "--slo ttft:1 --profile /nonexistent/p.json => --profile: cannot read".to_string(),
        format!(
            "--slo ttft:1 --profile {} => no schema_version",
            other.display()
        ),
        format!(
            "--slo ttft:1 --profile {file} --max-num-seqs 0 => --max-num-seqs must be at least 1"
        ),
    ];
    assert_rows_rejected(&rows.iter().map(String::as_str).collect::<Vec<_>>(), parse);
    // A profile replaces the preset: both is a usage error.
    let words = [
        "kneecap",
        "predict",
        "--slo",
        "ttft:1",
        "--preset",
        "tiny",
        "--profile",
        &file,
    ]
    .into_iter()
    .map(String::from);
    assert!(Cli::try_parse_from(normalize_args(words)).is_err());
}

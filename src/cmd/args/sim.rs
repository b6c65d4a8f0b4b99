//! Sim arguments to [`SimOptions`]: the preset with the user's overrides, the
//! fault rates and the `--explain` shape, each rule naming its flag.

use crate::cli::sim::{SimArgs, SimEngineArgs, SimSpecArgs};
use crate::sim::spec::SpecDecode;
use crate::sim::{self, ModelParams, SimConfig, SimOptions};
use crate::sweep::slo::Slo;
use crate::twin::ServerProfile;
use anyhow::{bail, Context as _};
use std::str::FromStr;
use std::time::Duration;

/// Validate `kneecap sim`'s flags into [`SimOptions`]; errors name the flag.
pub fn sim_options(a: SimArgs) -> anyhow::Result<SimOptions> {
    let mut cfg = SimConfig::from_preset(&a.preset).context("--preset")?;
    if let Some(path) = &a.profile {
        load_profile(path, "--profile")?.apply(&mut cfg);
        cfg.preset = format!("profile {}", path.display());
    }
    apply_engine(&a.engine, &mut cfg)?;
    cfg.spec = speculation(&a.spec)?;
    cfg.gpu_watts = super::gpu::sim_gpu_watts(&a.gpu)?;
    if a.explain && cfg.spec.is_some() {
        bail!("--explain does not model speculative decoding; drop --spec-draft-tokens, or measure the simulator with `kneecap sweep --base-url`");
    }
    cfg.served_model_name = a.served_model_name;
    cfg.seed = a.seed;
    cfg.server_log = a.trace;
    cfg.realtime_engine = !a.no_realtime;
    cfg.tls = match (a.tls_cert, a.tls_key) {
        (Some(cert), Some(key)) => Some(sim::tls::SimTls { cert, key }),
        _ => None,
    };
    cfg.reasoning_tokens = a.reasoning_tokens;
    cfg.reasoning_field = match a.reasoning_field.as_str() {
        "reasoning_content" => sim::api::ReasoningField::ReasoningContent,
        _ => sim::api::ReasoningField::Reasoning,
    };
    cfg.faults = sim::Faults {
        http_500: a.fault_http_500,
        http_429: a.fault_http_429,
        cut_stream: a.fault_cut_stream,
        malformed: a.fault_malformed,
        stall: duration("--fault-stall", a.fault_stall)?,
        stall_rate: a.fault_stall_rate,
        error_event: a.fault_error_event,
    };
    if cfg.faults.stall_rate > 0.0 && cfg.faults.stall.is_zero() {
        bail!("--fault-stall-rate needs --fault-stall SECONDS greater than 0");
    }
    if a.explain && (a.input_len == 0 || a.output_len == 0) {
        bail!("--input-len and --output-len must be at least 1");
    }
    if !(0.0..=1.0).contains(&a.cache_hit_fraction) {
        bail!(
            "--cache-hit-fraction must be between 0 and 1, got {}",
            a.cache_hit_fraction
        );
    }
    cfg.validate()?;
    Ok(SimOptions {
        config: cfg,
        host: a.host,
        port: a.port,
        explain: a.explain.then_some((a.input_len, a.output_len)),
        explain_cache_hit: a.cache_hit_fraction,
    })
}

/// `kneecap sim --explain --slo ...`: what the true-knee search needs beyond
/// the engine and the shape.
#[derive(Debug, Clone, PartialEq)]
pub struct TruthArgs {
    /// Every SLO must hold at the knee.
    pub slos: Vec<Slo>,
    /// Warm-up requests per simulated run.
    pub warmup: usize,
    /// Measured requests per simulated run.
    pub requests: usize,
    /// The seeds, `--seed` onwards.
    pub seeds: Vec<u64>,
    /// Arrival burstiness (1 Poisson, infinity evenly spaced).
    pub burstiness: f64,
}

/// Most `--truth-seeds` (each seed is a full search).
pub const MAX_TRUTH_SEEDS: u32 = 64;

/// Validate `--slo` and its companions; `None` without `--slo`.
pub fn truth_args(a: &SimArgs) -> anyhow::Result<Option<TruthArgs>> {
    if a.slos.is_empty() {
        return Ok(None);
    }
    let slos = a
        .slos
        .iter()
        .map(|s| Slo::from_str(s).map_err(|e| anyhow::anyhow!("--slo: {e}")))
        .collect::<anyhow::Result<Vec<_>>>()?;
    if a.truth_requests == 0 {
        bail!("--truth-requests must be at least 1");
    }
    if a.truth_seeds == 0 || a.truth_seeds > MAX_TRUTH_SEEDS {
        bail!("--truth-seeds must be between 1 and {MAX_TRUTH_SEEDS}");
    }
    if a.burstiness.is_nan() || a.burstiness <= 0.0 {
        bail!(
            "--burstiness must be a positive number (or inf), got {}",
            a.burstiness
        );
    }
    Ok(Some(TruthArgs {
        slos,
        warmup: a.truth_warmup,
        requests: a.truth_requests,
        seeds: (0..u64::from(a.truth_seeds))
            .map(|k| a.seed.wrapping_add(k))
            .collect(),
        burstiness: a.burstiness,
    }))
}

/// `--spec-draft-tokens` and its companions, checked (`None`: off).
fn speculation(a: &SimSpecArgs) -> anyhow::Result<Option<SpecDecode>> {
    let (Some(k), Some(p)) = (a.spec_draft_tokens, a.spec_acceptance) else {
        return Ok(None);
    };
    let spec = SpecDecode {
        draft_cost: a.spec_draft_cost,
        verify_cost: a.spec_verify_cost,
        ..SpecDecode::new(k, p)
    };
    spec.validate().map_err(anyhow::Error::msg)?;
    Ok(Some(spec))
}

/// Applies the engine overrides (each rule names its flag) to `cfg`.
pub fn apply_engine(a: &SimEngineArgs, cfg: &mut SimConfig) -> anyhow::Result<()> {
    override_params(a, &mut cfg.params)?;
    if a.no_enable_prefix_caching {
        cfg.prefix_caching = false;
    }
    Ok(())
}

/// Applies the overrides of the engine's parameters (all but the prefix
/// cache) to `p`, checking the result; each rule names its flag.
pub fn override_params(a: &SimEngineArgs, p: &mut ModelParams) -> anyhow::Result<()> {
    set(&mut p.max_num_seqs, a.max_num_seqs);
    set(&mut p.max_num_batched_tokens, a.max_num_batched_tokens);
    set(&mut p.kv_cache_tokens, a.kv_cache_tokens);
    set(&mut p.max_model_len, a.max_model_len);
    if let Some(ms) = a.step_base_ms {
        p.step_base = positive_duration("--step-base-ms", ms / 1e3)?;
    }
    if let Some(us) = a.prefill_token_us {
        p.per_prefill_token = duration("--prefill-token-us", us / 1e6)?;
    }
    if let Some(us) = a.decode_seq_us {
        p.per_decode_seq = duration("--decode-seq-us", us / 1e6)?;
    }
    if let Some(alpha) = a.prefill_interference {
        if !(0.0..=1.0).contains(&alpha) {
            bail!("--prefill-interference must be between 0 and 1 (1 = one shared batch step, 0 = disaggregated prefill), got {alpha}");
        }
        p.prefill_interference = alpha;
    }
    for (flag, v) in [
        ("--max-num-seqs", p.max_num_seqs),
        ("--max-num-batched-tokens", p.max_num_batched_tokens),
    ] {
        if v == 0 {
            bail!("{flag} must be at least 1");
        }
    }
    if p.kv_cache_tokens < p.max_model_len {
        bail!(
            "--kv-cache-tokens ({}) must be at least --max-model-len ({}) so one request always fits",
            p.kv_cache_tokens,
            p.max_model_len
        );
    }
    Ok(())
}

/// The preset's parameters with the overrides applied (`kneecap predict`);
/// errors name the flag. The prefix cache is the workload's to say, so
/// `--no-enable-prefix-caching` is read by the caller.
pub fn engine_params(preset: &str, a: &SimEngineArgs) -> anyhow::Result<ModelParams> {
    let mut cfg = SimConfig::from_preset(preset).context("--preset")?;
    apply_engine(a, &mut cfg)?;
    Ok(cfg.params)
}

/// Whether any engine override was given.
pub fn any_engine_flag(a: &SimEngineArgs) -> Option<&'static str> {
    [
        (a.max_num_seqs.is_some(), "--max-num-seqs"),
        (
            a.max_num_batched_tokens.is_some(),
            "--max-num-batched-tokens",
        ),
        (a.kv_cache_tokens.is_some(), "--kv-cache-tokens"),
        (a.max_model_len.is_some(), "--max-model-len"),
        (a.step_base_ms.is_some(), "--step-base-ms"),
        (a.prefill_token_us.is_some(), "--prefill-token-us"),
        (a.decode_seq_us.is_some(), "--decode-seq-us"),
        (a.prefill_interference.is_some(), "--prefill-interference"),
        (a.no_enable_prefix_caching, "--no-enable-prefix-caching"),
    ]
    .into_iter()
    .find_map(|(set, flag)| set.then_some(flag))
}

/// Reads a `kneecap profile` JSON; the error names the file and the fix.
pub fn load_profile(path: &std::path::Path, flag: &str) -> anyhow::Result<ServerProfile> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        anyhow::anyhow!(
            "{flag}: cannot read '{}': {e}; give the JSON that `kneecap profile -o FILE` wrote",
            path.display()
        )
    })?;
    ServerProfile::from_json(&text).map_err(|e| anyhow::anyhow!("{flag} '{}': {e}", path.display()))
}

fn set(field: &mut u32, v: Option<u32>) {
    if let Some(v) = v {
        *field = v;
    }
}

fn duration(flag: &str, secs: f64) -> anyhow::Result<Duration> {
    Duration::try_from_secs_f64(secs)
        .map_err(|_| anyhow::anyhow!("{flag} must be a non-negative number, got {secs}"))
}

fn positive_duration(flag: &str, secs: f64) -> anyhow::Result<Duration> {
    let d = duration(flag, secs)?;
    if d.is_zero() {
        bail!("{flag} must be greater than 0");
    }
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::sim::SimArgs;
    use crate::cmd::args::tests_support::{argv, assert_rows_rejected};
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        sim: SimArgs,
    }

    fn parse(args: &[&str]) -> anyhow::Result<SimOptions> {
        let mut argv = vec!["sim"];
        argv.extend_from_slice(args);
        sim_options(Cli::try_parse_from(argv)?.sim)
    }

    #[test]
    fn defaults_give_the_tiny_preset_on_port_8000() {
        let o = parse(&[]).unwrap();
        assert_eq!((o.host.as_str(), o.port), ("127.0.0.1", 8000));
        assert_eq!(o.config.params, crate::sim::preset::tiny());
        assert_eq!(o.explain, None);
    }

    #[test]
    fn overrides_and_explain_shape_are_applied() {
        let o = parse(&[
            "--preset",
            "7b-24gb",
            "--max-num-seqs",
            "64",
            "--step-base-ms",
            "2.5",
            "--explain",
            "--input-len",
            "512",
            "--output-len",
            "64",
        ])
        .unwrap();
        assert_eq!(o.config.params.max_num_seqs, 64);
        assert_eq!(o.config.params.step_base, Duration::from_micros(2500));
        assert_eq!(o.explain, Some((512, 64)));
    }

    #[test]
    fn speculation_flags_make_the_spec_and_name_their_flag() {
        assert_eq!(parse(&[]).unwrap().config.spec, None);
        let o = parse(&["--spec-draft-tokens", "4", "--spec-acceptance", "0.7"]).unwrap();
        assert_eq!(o.config.spec, Some(SpecDecode::new(4, 0.7)));
        let costs = ["--spec-draft-cost", "0.2", "--spec-verify-cost", "0"];
        let o = parse(
            &[
                &["--spec-draft-tokens", "2", "--spec-acceptance", "1"][..],
                &costs,
            ]
            .concat(),
        )
        .unwrap();
        let spec = o.config.spec.unwrap();
        assert_eq!((spec.draft_cost, spec.verify_cost), (0.2, 0.0));
        for (args, flag) in [
            (
                &["--spec-draft-tokens", "0", "--spec-acceptance", "0.5"][..],
                "--spec-draft-tokens",
            ),
            (
                &["--spec-draft-tokens", "3", "--spec-acceptance", "1.2"][..],
                "--spec-acceptance",
            ),
            (&["--spec-draft-tokens", "3"][..], "--spec-acceptance"),
            (&["--spec-acceptance", "0.5"][..], "--spec-draft-tokens"),
            (
                &[
                    "--spec-draft-tokens",
                    "3",
                    "--spec-acceptance",
                    "0.5",
                    "--explain",
                ][..],
                "--explain",
            ),
        ] {
            let err = format!("{:#}", parse(args).unwrap_err());
            assert!(err.contains(flag), "{args:?}: {err}");
        }
    }

    #[test]
    fn invalid_values_name_the_flag() {
        for (args, flag) in [
            (&["--preset", "nope"][..], "--preset"),
            (&["--max-num-seqs", "0"][..], "--max-num-seqs"),
            (&["--fault-http-500", "2"][..], "--fault-http-500"),
            (&["--step-base-ms=-1"][..], "--step-base-ms"),
            (&["--fault-stall-rate", "0.5"][..], "--fault-stall"),
            (&["--kv-cache-tokens", "10"][..], "--kv-cache-tokens"),
        ] {
            let err = format!("{:#}", parse(args).unwrap_err());
            assert!(err.contains(flag), "{args:?}: {err}");
        }
    }

    #[test]
    fn every_engine_override_replaces_the_preset_value() {
        let line = "--max-num-seqs 3 --max-num-batched-tokens 512 --kv-cache-tokens 9000 \
                    --max-model-len 2048 --step-base-ms 1 --prefill-token-us 0 --decode-seq-us 7 \
                    --prefill-interference 0.25";
        let o = parse(&argv(line)).unwrap();
        let want = crate::sim::model::ModelParams {
            max_num_seqs: 3,
            max_num_batched_tokens: 512,
            kv_cache_tokens: 9000,
            max_model_len: 2048,
            step_base: Duration::from_millis(1),
            per_prefill_token: Duration::ZERO,
            per_decode_seq: Duration::from_micros(7),
            prefill_interference: 0.25,
            block_tokens: crate::sim::blocks::BLOCK_TOKENS,
            per_context_token: std::time::Duration::ZERO,
            per_request: std::time::Duration::ZERO,
            per_prefill_pair: std::time::Duration::ZERO,
            per_prefill_step: std::time::Duration::ZERO,
            stalls: crate::sim::params::HostStalls::NONE,
        };
        assert_eq!(o.config.params, want);
    }

    #[test]
    fn sim_rules_name_their_flag() {
        assert_rows_rejected(
            &[
                "--max-num-batched-tokens 0 => --max-num-batched-tokens must be at least 1",
                // A zero step cost is refused here, naming the flag.
                "--step-base-ms 0 => --step-base-ms must be greater than 0",
                "--prefill-token-us=-1 => --prefill-token-us must be a non-negative number",
                "--decode-seq-us=-1 => --decode-seq-us must be a non-negative number",
                "--prefill-interference 1.5 => --prefill-interference must be between 0 and 1",
                "--prefill-interference=-0.1 => --prefill-interference must be between 0 and 1",
                "--fault-stall=-1 => --fault-stall must be a non-negative number",
                // One request of --max-model-len must fit in the KV cache.
                "--max-model-len 9000 --kv-cache-tokens 8999 => \
                 --kv-cache-tokens (8999) must be at least --max-model-len (9000)",
                // The message names the field, not the flag (parameter validation).
                "--max-model-len 1 --kv-cache-tokens 1 => must be at least 2",
                // A stall rate needs a stall length.
                "--fault-stall-rate 0.5 => --fault-stall-rate needs --fault-stall SECONDS",
                // --explain needs a real shape.
                "--explain --input-len 0 => --input-len and --output-len must be at least 1",
                "--explain --output-len 0 => --input-len and --output-len must be at least 1",
                "--served-model-name= => --served-model-name must not be empty",
                // Fault rates are fractions.
                "--fault-http-429 1.5 => --fault-http-429 must be a fraction",
                "--fault-cut-stream 1.5 => --fault-cut-stream must be a fraction",
                "--fault-malformed 1.5 => --fault-malformed must be a fraction",
                "--fault-error-event 1.5 => --fault-error-event must be a fraction",
                "--fault-stall-rate 1.5 --fault-stall 1 => --fault-stall-rate must be a fraction",
            ],
            parse,
        );
    }

    #[test]
    fn edge_values_the_rules_allow_are_accepted() {
        parse(&argv("--max-model-len 9000 --kv-cache-tokens 9000")).unwrap();
        let o = parse(&argv("--fault-stall-rate 0.5 --fault-stall 2")).unwrap();
        let f = &o.config.faults;
        assert_eq!((f.stall, f.stall_rate), (Duration::from_secs(2), 0.5));
    }

    fn truth(args: &[&str]) -> anyhow::Result<Option<TruthArgs>> {
        let mut argv = vec!["sim"];
        argv.extend_from_slice(args);
        truth_args(&Cli::try_parse_from(argv)?.sim)
    }

    #[test]
    fn slo_flags_become_truth_args_with_consecutive_seeds() {
        assert_eq!(truth(&["--explain"]).unwrap(), None);
        let t = truth(&argv(
            "--explain --seed 5 --slo p99_ttft_ms<=500 --slo mean_tpot_ms<30 \
             --truth-requests 500 --truth-warmup 50 --truth-seeds 2 --burstiness inf",
        ))
        .unwrap()
        .unwrap();
        let want: Vec<Slo> = ["p99_ttft_ms<=500", "mean_tpot_ms<30"]
            .iter()
            .map(|s| s.parse().unwrap())
            .collect();
        assert_eq!(t.slos, want);
        assert_eq!((t.warmup, t.requests), (50, 500));
        assert_eq!(t.seeds, vec![5, 6]);
        assert!(t.burstiness.is_infinite());
    }

    #[test]
    fn truth_rules_name_their_flag() {
        assert_rows_rejected(
            &[
                "--explain --slo p99_ttft => --slo: invalid SLO",
                "--explain --slo ttft:1 --truth-requests 0 => --truth-requests must be at least 1",
                "--explain --slo ttft:1 --truth-seeds 0 => --truth-seeds must be between 1 and 64",
                "--explain --slo ttft:1 --truth-seeds 65 => --truth-seeds must be between 1 and 64",
                "--explain --slo ttft:1 --burstiness 0 => --burstiness must be a positive number",
                // Syntax: --slo needs --explain, and the search flags need --slo.
                "--slo ttft:1 => --explain",
                "--explain --truth-seeds 2 => --slo",
            ],
            truth,
        );
    }

    #[test]
    fn no_realtime_turns_the_realtime_engine_off() {
        assert!(parse(&[]).unwrap().config.realtime_engine);
        assert!(!parse(&["--no-realtime"]).unwrap().config.realtime_engine);
    }

    #[test]
    fn server_settings_pass_through() {
        let line = "--host 0.0.0.0 --port 0 --served-model-name m --seed 7 --trace t.jsonl";
        let o = parse(&argv(line)).unwrap();
        assert_eq!((o.host.as_str(), o.port), ("0.0.0.0", 0));
        let c = &o.config;
        assert_eq!((c.served_model_name.as_str(), c.seed), ("m", 7));
        assert_eq!(
            c.server_log.as_deref(),
            Some(std::path::Path::new("t.jsonl"))
        );
    }
}

//! Sim arguments to [`SimOptions`]: the preset with the user's overrides, the
//! fault rates and the `--explain` shape, each rule naming its flag.

use crate::cli::sim::SimArgs;
use crate::sim::{self, SimConfig, SimOptions};
use anyhow::{bail, Context as _};
use std::time::Duration;

/// Validate `kneecap sim`'s flags into [`SimOptions`]; errors name the flag.
pub fn sim_options(a: SimArgs) -> anyhow::Result<SimOptions> {
    let mut cfg = SimConfig::from_preset(&a.preset).context("--preset")?;
    let p = &mut cfg.params;
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
    cfg.served_model_name = a.served_model_name;
    cfg.seed = a.seed;
    cfg.trace = a.trace;
    cfg.realtime_engine = !a.no_realtime;
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
    cfg.validate()?;
    Ok(SimOptions {
        config: cfg,
        host: a.host,
        port: a.port,
        explain: a.explain.then_some((a.input_len, a.output_len)),
    })
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
}

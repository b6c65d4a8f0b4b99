//! `kneecap sim` arguments: clap syntax only; [`SimArgs::into_options`]
//! turns them into a validated, clap-free [`crate::sim::SimOptions`].

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context as _};

use crate::sim::{self, SimConfig, SimOptions};

/// Run a simulated continuous-batching LLM server (OpenAI API + vLLM /metrics).
#[derive(Debug, Clone, clap::Args)]
pub struct SimArgs {
    /// Address to bind.
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    /// Port to bind (0 picks a free port; the address is printed to stderr).
    #[arg(long, default_value_t = 8000)]
    pub port: u16,
    /// Engine preset: `tiny` (fast, for tests) or `7b-24gb` (a 7B model on one
    /// 24 GB GPU, simulated).
    #[arg(long, default_value = "tiny")]
    pub preset: String,
    /// Override: most sequences in the running batch.
    #[arg(long)]
    pub max_num_seqs: Option<u32>,
    /// Override: token budget of one engine step.
    #[arg(long)]
    pub max_num_batched_tokens: Option<u32>,
    /// Override: KV-cache capacity in tokens.
    #[arg(long)]
    pub kv_cache_tokens: Option<u32>,
    /// Override: longest prompt + max_tokens accepted.
    #[arg(long)]
    pub max_model_len: Option<u32>,
    /// Override: fixed cost of each step, milliseconds.
    #[arg(long, value_name = "MS")]
    pub step_base_ms: Option<f64>,
    /// Override: cost per prefill token, microseconds.
    #[arg(long, value_name = "US")]
    pub prefill_token_us: Option<f64>,
    /// Override: cost per decoding sequence, microseconds.
    #[arg(long, value_name = "US")]
    pub decode_seq_us: Option<f64>,
    /// Model name in responses and /v1/models.
    #[arg(long, default_value = sim::DEFAULT_MODEL_NAME)]
    pub served_model_name: String,
    /// Seed for sampled output lengths (without ignore_eos) and faults.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Write one JSON line per request (server-side times) to FILE.
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// Fraction of requests answered with HTTP 500.
    #[arg(long, default_value_t = 0.0, value_name = "FRACTION")]
    pub fault_http_500: f64,
    /// Fraction of requests answered with HTTP 429.
    #[arg(long, default_value_t = 0.0, value_name = "FRACTION")]
    pub fault_http_429: f64,
    /// Fraction of streams closed mid-way, without the DONE terminator.
    #[arg(long, default_value_t = 0.0, value_name = "FRACTION")]
    pub fault_cut_stream: f64,
    /// Fraction of streams with a malformed (non-JSON) data line mid-way.
    #[arg(long, default_value_t = 0.0, value_name = "FRACTION")]
    pub fault_malformed: f64,
    /// How long a stalled stream pauses, seconds.
    #[arg(long, default_value_t = 0.0, value_name = "SECONDS")]
    pub fault_stall: f64,
    /// Fraction of streams that stall mid-way for --fault-stall seconds.
    #[arg(long, default_value_t = 0.0, value_name = "FRACTION")]
    pub fault_stall_rate: f64,
    /// Fraction of streams that send an in-stream error object and end.
    #[arg(long, default_value_t = 0.0, value_name = "FRACTION")]
    pub fault_error_event: f64,
    /// Do not ask for real-time (SCHED_FIFO) scheduling of the engine thread.
    #[arg(long)]
    pub no_realtime: bool,
    /// Print the simulated capacity (μ) for --input-len/--output-len and exit.
    #[arg(long)]
    pub explain: bool,
    /// Prompt length for --explain.
    #[arg(long, default_value_t = 1024, requires = "explain")]
    pub input_len: u32,
    /// Output length for --explain.
    #[arg(long, default_value_t = 128, requires = "explain")]
    pub output_len: u32,
}

impl SimArgs {
    /// Validates the flags into [`SimOptions`]; errors name the flag.
    pub fn into_options(self) -> anyhow::Result<SimOptions> {
        let mut cfg = SimConfig::from_preset(&self.preset).context("--preset")?;
        let p = &mut cfg.params;
        set(&mut p.max_num_seqs, self.max_num_seqs);
        set(&mut p.max_num_batched_tokens, self.max_num_batched_tokens);
        set(&mut p.kv_cache_tokens, self.kv_cache_tokens);
        set(&mut p.max_model_len, self.max_model_len);
        if let Some(ms) = self.step_base_ms {
            p.step_base = positive_duration("--step-base-ms", ms / 1e3)?;
        }
        if let Some(us) = self.prefill_token_us {
            p.per_prefill_token = duration("--prefill-token-us", us / 1e6)?;
        }
        if let Some(us) = self.decode_seq_us {
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
        cfg.served_model_name = self.served_model_name;
        cfg.seed = self.seed;
        cfg.trace = self.trace;
        cfg.realtime_engine = !self.no_realtime;
        cfg.faults = sim::Faults {
            http_500: self.fault_http_500,
            http_429: self.fault_http_429,
            cut_stream: self.fault_cut_stream,
            malformed: self.fault_malformed,
            stall: duration("--fault-stall", self.fault_stall)?,
            stall_rate: self.fault_stall_rate,
            error_event: self.fault_error_event,
        };
        if cfg.faults.stall_rate > 0.0 && cfg.faults.stall.is_zero() {
            bail!("--fault-stall-rate needs --fault-stall SECONDS greater than 0");
        }
        if self.explain && (self.input_len == 0 || self.output_len == 0) {
            bail!("--input-len and --output-len must be at least 1");
        }
        cfg.validate()?;
        Ok(SimOptions {
            config: cfg,
            host: self.host,
            port: self.port,
            explain: self.explain.then_some((self.input_len, self.output_len)),
        })
    }
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
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        sim: SimArgs,
    }

    fn parse(args: &[&str]) -> anyhow::Result<SimOptions> {
        let mut argv = vec!["sim"];
        argv.extend_from_slice(args);
        Cli::try_parse_from(argv)?.sim.into_options()
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

//! `kneecap sim`: print the simulator's explanation (with `--slo`, also its
//! true knee from a virtual-time simulation), or serve the simulated server
//! on `--host`/`--port` until Ctrl-C / SIGTERM, then shut it down.

mod explain;

use super::args::sim::{sim_options, truth_args};
use crate::cli::sim::SimArgs;
use crate::sim;
use anyhow::{Context, Result};
use std::process::ExitCode;
use tokio::sync::watch;

/// Run `kneecap sim`.
pub async fn execute(args: SimArgs, mut interrupt: watch::Receiver<bool>) -> Result<ExitCode> {
    let truth = truth_args(&args)?;
    let json = args.json;
    let opts = sim_options(args)?;
    let cfg = opts.config;
    if let Some(shape) = opts.explain {
        explain::execute(&cfg, shape, opts.explain_cache_hit, truth.as_ref(), json)?;
        return Ok(ExitCode::SUCCESS);
    }
    let bind = format!("{}:{}", opts.host, opts.port);
    let listener = tokio::net::TcpListener::bind(&bind)
        .await
        .with_context(|| format!("binding --host/--port {bind}"))?;
    let preset = cfg.preset.clone();
    let scheme = if cfg.tls.is_some() { "https" } else { "http" };
    let handle = sim::start(cfg, listener).await?;
    eprintln!(
        "kneecap sim: serving preset {preset} on {scheme}://{} (simulated)",
        handle.addr()
    );
    // The first Ctrl-C / SIGTERM (a dropped sender also ends the wait).
    let _ = interrupt.wait_for(|&stop| stop).await;
    let lag = handle.max_batch_step_lag();
    let realtime = handle.metrics().engine_realtime;
    handle.shutdown().await?;
    eprintln!(
        "kneecap sim: stopped; max step-clock lag {:.3} ms (engine thread {})",
        lag * 1e3,
        if realtime {
            "SCHED_FIFO"
        } else {
            "normal priority"
        }
    );
    Ok(ExitCode::SUCCESS)
}

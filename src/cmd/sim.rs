//! `kneecap sim`: print the simulator's explanation, or serve the simulated
//! server on `--host`/`--port` until Ctrl-C / SIGTERM, then shut it down.

use super::args::sim::sim_options;
use crate::cli::sim::SimArgs;
use crate::sim;
use anyhow::{Context, Result};
use std::process::ExitCode;
use tokio::sync::watch;

/// Run `kneecap sim`.
pub async fn execute(args: SimArgs, mut interrupt: watch::Receiver<bool>) -> Result<ExitCode> {
    let opts = sim_options(args)?;
    let cfg = opts.config;
    if let Some((input_len, output_len)) = opts.explain {
        let hit = opts.explain_cache_hit;
        print!("{}", sim::explain_cached(&cfg, input_len, output_len, hit));
        return Ok(ExitCode::SUCCESS);
    }
    let bind = format!("{}:{}", opts.host, opts.port);
    let listener = tokio::net::TcpListener::bind(&bind)
        .await
        .with_context(|| format!("binding --host/--port {bind}"))?;
    let preset = cfg.preset.clone();
    let handle = sim::start(cfg, listener).await?;
    eprintln!(
        "kneecap sim: serving preset {preset} on http://{} (simulated)",
        handle.addr()
    );
    // The first Ctrl-C / SIGTERM (a dropped sender also ends the wait).
    let _ = interrupt.wait_for(|&stop| stop).await;
    let lag = handle.max_step_lag();
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

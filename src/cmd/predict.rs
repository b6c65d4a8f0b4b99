//! `kneecap predict`: validate the flags, predict the knee (or the grid's
//! knees) in virtual time, time it in CPU and wall-clock seconds, print it
//! (marked PREDICTED), and write the JSON (`-o`) and the heat map (`--html`).

use super::args::predict::{predict_options, PredictOptions};
use super::clock;
use crate::cli::predict::PredictArgs;
use crate::report::save::write_atomic;
use crate::twin::at_load::at_loads;
use crate::twin::grid::predict_grid;
use crate::twin::json::PredictJson;
use crate::twin::predict::{predict, replicas};
use crate::twin::{html, render};
use anyhow::{Context as _, Result};
use std::process::ExitCode;
use std::time::Instant;

/// Run `kneecap predict`.
pub fn execute(args: &PredictArgs) -> Result<ExitCode> {
    let o = predict_options(args)?;
    let started = (Instant::now(), clock::cpu_seconds());
    eprintln!(
        "kneecap predict: simulating {} in virtual time ({} seed(s) × {} requests per run)...",
        if o.grid.is_some() {
            "the grid"
        } else {
            "the workload"
        },
        o.config.truth.seeds.len(),
        o.config.truth.load.requests
    );
    let mut out = run(&o)?;
    out.wall_s = started.0.elapsed().as_secs_f64();
    out.cpu_s = match (started.1, clock::cpu_seconds()) {
        (Some(a), Some(b)) => b - a,
        _ => out.wall_s,
    };
    if out.grid.is_some() {
        print!("{}", render::grid_text(&out));
    } else {
        print!("{}", render::knee_text(&out));
    }
    if let Some(path) = &o.output {
        let text = serde_json::to_vec_pretty(&out)?;
        write_atomic(path, &text).context("-o")?;
        eprintln!("kneecap predict: wrote {}", path.display());
    }
    if let Some(path) = &o.html {
        write_atomic(path, html::render(&out).as_bytes()).context("--html")?;
        eprintln!("kneecap predict: wrote {}", path.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// The prediction, without its timings.
fn run(o: &PredictOptions) -> Result<PredictJson> {
    let cfg = &o.config;
    let mut out = PredictJson::new(
        env!("CARGO_PKG_VERSION"),
        &o.source,
        &cfg.truth,
        cfg.corners.len(),
    );
    match &o.grid {
        None => {
            let p = predict(cfg).map_err(|e| anyhow::anyhow!("kneecap predict: {e}"))?;
            out.target = o.target_rate.map(|r| replicas(r, &p));
            out.knee = Some(p);
            out.at_rates = at_loads(&cfg.truth, &o.at_rates)
                .map_err(|e| anyhow::anyhow!("kneecap predict: {e}"))?;
        }
        Some(spec) => {
            let mut cells = predict_grid(cfg, spec);
            if let Some(r) = o.target_rate {
                for c in &mut cells {
                    c.replicas = c.prediction.as_ref().map(|p| replicas(r, p));
                }
            }
            out.grid = Some(cells);
        }
    }
    Ok(out)
}

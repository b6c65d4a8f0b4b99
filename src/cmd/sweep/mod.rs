//! Sweep orchestration: run a step per load chosen by the search, judge it,
//! keep the evidence (client records, server queue gauges, generator health),
//! and rewrite the sweep JSON after every step so an interruption loses nothing.

mod adaptive;
mod cache_reset;
mod calibrate;
mod prompts;
mod sharded;
mod start;
mod step;
mod trace;
mod twin;

use super::args::sweep::sweep_config;
use super::clock;
use super::live::{resolve_ui, slo_lines, Live, LiveStart};
use super::prepare::{self as runner, Prepared};
use super::target::{self, Server};
use crate::cli::sweep::SweepArgs;
use crate::client::scrape::Scraper;
use crate::config::sweep::SweepConfig;
use crate::config::UiMode;
use crate::result::sweep::{SweepResult, Verdict};
use crate::sweep::knee::{self, LoadUnit, StepPoint};
use crate::sweep::rows::{exit_code, finish, step_line};
use crate::sweep::step::Judged;
use crate::twin::measured;
use anyhow::Result;
use start::{announce, new_result};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use step::run_step;
use tokio::sync::watch;

/// Everything a step needs.
pub(crate) struct Ctx<'a> {
    pub(crate) cfg: &'a SweepConfig,
    pub(crate) server: &'a Server,
    pub(crate) prepared: Prepared,
    pub(crate) scraper: Option<Scraper>,
    /// The dashboard and `--metrics-listen`, when asked for.
    pub(crate) live: Option<Live>,
    /// Where each step's prompts come from.
    pub(crate) prompts: prompts::Prompts,
    /// `--reset-prefix-cache`.
    pub(crate) reset: Option<cache_reset::CacheReset>,
    /// `--gpu-metrics-url`: the GPU hosts sampled through each step.
    pub(crate) gpu: Option<crate::cmd::gpu_power::GpuHosts>,
    /// `--twin` / `--predict`: the twin each adaptive step's prior comes
    /// from (set once the prediction is made; `None` without a prior).
    pub(crate) twin_prior: Option<twin::PriorModel>,
    /// A step's samples contradicted the twin: later steps take no prior.
    pub(crate) twin_contradicted: std::sync::atomic::AtomicBool,
}

/// Run `kneecap sweep`.
pub async fn execute(args: &SweepArgs, interrupt: watch::Receiver<bool>) -> Result<ExitCode> {
    let mut cfg = sweep_config(args)?;
    let ui = resolve_ui(&cfg.run.output.live);
    cfg.run.output.progress &= ui == UiMode::Plain;
    if let Some(start) = cfg.run.start_at {
        crate::shard::wait_for_start(start, clock::now()).map_err(anyhow::Error::msg)?;
    }
    runner::check_os_limits(&cfg.run)?;
    check_sweep_concurrency(&cfg)?;
    let out_path = output_path(&cfg);
    let outputs =
        std::iter::once(("-o/--output", &out_path)).chain(cfg.html.as_ref().map(|h| ("--html", h)));
    for (flag, path) in outputs {
        crate::report::save::check_writable(
            path.parent().filter(|p| !p.as_os_str().is_empty()),
            flag,
        )?;
    }
    let server = target::start(&cfg.run.target).await?;
    let outcome = sweep(&cfg, &server, &out_path, ui, interrupt).await;
    server.shutdown().await;
    let (result, live) = outcome?;
    print!("{}", crate::report::table::render(&result));
    println!("{}", crate::report::chart::render(&result, 100));
    if let Some(html) = &cfg.html {
        crate::report::save::write_atomic(html, crate::report::html::render(&result).as_bytes())?;
        eprintln!("kneecap: HTML report written to {}", html.display());
    }
    eprintln!("kneecap: sweep JSON written to {}", out_path.display());
    if let Some(live) = live {
        live.finish().await;
    }
    if cfg.run.shard.is_some() && !result.interrupted {
        // A shard's verdicts judge only its share; the sweep's verdict (and
        // exit status) comes from `kneecap merge`. Exiting 1 here would also
        // fail a Kubernetes Indexed Job and stop the other shards.
        return Ok(ExitCode::SUCCESS);
    }
    Ok(exit_code(&result))
}

/// A closed-loop sweep may go up to its largest concurrency: check it fits
/// under the open-file limit before the first step, not at the last.
fn check_sweep_concurrency(cfg: &SweepConfig) -> Result<()> {
    if cfg.mode != LoadUnit::Concurrency {
        return Ok(());
    }
    let top = match &cfg.plan {
        knee::SearchPlan::List(loads) => loads.iter().copied().fold(0.0, f64::max),
        knee::SearchPlan::Auto { max_load, .. } => *max_load,
    };
    let sim = matches!(cfg.run.target, crate::config::Target::Sim { .. });
    let limit = crate::client::limits::raise_open_file_limit();
    crate::client::limits::check_concurrency(top.ceil() as usize, sim, limit).map_err(|e| {
        anyhow::anyhow!("{e} (the sweep may reach {top} streams; see --max-load / --concurrencies)")
    })
}

fn output_path(cfg: &SweepConfig) -> PathBuf {
    cfg.output.clone().unwrap_or_else(|| {
        let date = chrono::Local::now().format("%Y%m%d-%H%M%S");
        PathBuf::from(format!("kneecap-sweep-{date}.json"))
    })
}

async fn sweep(
    cfg: &SweepConfig,
    server: &Server,
    out: &Path,
    ui: UiMode,
    interrupt: watch::Receiver<bool>,
) -> Result<(SweepResult, Option<Live>)> {
    let metrics_url = cfg
        .metrics_url
        .clone()
        .unwrap_or_else(|| format!("{}/metrics", server.base_url));
    let live = Live::start(LiveStart {
        cfg: &cfg.run.output.live,
        ui,
        command: "kneecap sweep",
        slos: slo_lines(&cfg.slos),
        server_metrics: Some(metrics_url.clone()),
    })
    .await?;
    let gpu = crate::cmd::gpu_power::GpuHosts::connect(cfg.run.gpu.as_ref()).await?;
    let prepared = runner::prepare(&cfg.run, server).await?;
    let (prompts, too_few) = prompts::Prompts::new(cfg, &prepared)?;
    let mut ctx = Ctx {
        cfg,
        server,
        scraper: Scraper::new(&metrics_url).ok(),
        prepared,
        live,
        prompts,
        reset: cfg.reset_prefix_cache.then(cache_reset::CacheReset::new),
        gpu,
        twin_prior: None,
        twin_contradicted: Default::default(),
    };
    if let Some(line) = too_few {
        say(&ctx, line);
    }
    if cfg.mode == LoadUnit::TraceSpeed {
        let (_, rate) = trace::replayed(&ctx)?;
        eprintln!("kneecap sweep: the trace runs at {rate:.2} req/s as recorded; each step replays it faster");
    }
    let mut result = new_result(&ctx);
    announce(&ctx, &result);
    // Before the dashboard: a profile prints its probes on stderr.
    ctx.twin_prior = twin::predict_first(&ctx, &mut result, out, interrupt.clone()).await?;
    if let Some(live) = ctx.live.as_mut() {
        live.show_dashboard()?;
    }
    if cfg.run.shard.is_none() {
        if let Some(start) = cfg.run.start_at {
            clock::wait_until(start).await?;
        }
    }
    if result.interrupted {
        // Interrupted while profiling: no step ran.
    } else if cfg.run.shard.is_some() {
        sharded::run_all_steps(&ctx, &mut result, out, interrupt).await?;
    } else {
        search(&ctx, &mut result, out, interrupt).await?;
    }
    result.complete = !result.interrupted;
    let max_num_seqs = match (&server.sim_config, &result.prediction) {
        (Some(c), _) => Some(c.params.max_num_seqs),
        (None, Some(p)) => p.max_num_seqs,
        (None, None) => None,
    };
    result.knee.explain = measured::explain_measured(&result.steps, &result.knee, max_num_seqs);
    if let Some(p) = cfg.pricing {
        result.price(p);
    }
    save(&result, out)?;
    let mut live = ctx.live.take();
    if let Some(live) = live.as_mut() {
        live.close_dashboard();
    }
    Ok((result, live))
}

/// The single-process search: the next load depends on the verdicts so far.
async fn search(
    ctx: &Ctx<'_>,
    result: &mut SweepResult,
    out: &Path,
    interrupt: watch::Receiver<bool>,
) -> Result<()> {
    let mut plan = ctx.cfg.plan.clone();
    if let Some(budget) = ctx.cfg.calibrate {
        match calibrate::calibrate(ctx, budget, interrupt.clone()).await? {
            None => {
                result.interrupted = true;
                return Ok(());
            }
            Some((end, mu, levels, took)) => {
                plan = crate::sweep::calibrate::plan_after(&plan, mu);
                let start = match plan {
                    knee::SearchPlan::Auto { start, .. } => start,
                    knee::SearchPlan::List(_) => 0.0,
                };
                let row = calibrate::row(end, mu, &levels, took, start);
                say(ctx, calibration_line(&row));
                result.calibration = Some(row);
            }
        }
    }
    if let (Some(t), Some(k)) = (&ctx.cfg.twin, &result.prediction) {
        plan = twin::opened_plan(plan, k, t);
    }
    let mut history: Vec<StepPoint> = Vec::new();
    while let Some(load) = knee::next_load(&plan, &history) {
        let refining = history.iter().any(|p| p.verdict == Verdict::Fail);
        if history.iter().any(|p| p.load == load) {
            say(
                ctx,
                format!("kneecap sweep: re-testing {load:.1}: at its cap its SLO verdict was still within noise"),
            );
        }
        let step = run_step(ctx, history.len(), load, refining, interrupt.clone()).await?;
        if !keep_step(ctx, result, &mut history, step, *interrupt.borrow(), out)? {
            break;
        }
    }
    Ok(())
}

/// Print a progress line: on stderr, or in the dashboard while it is shown.
pub(crate) fn say(ctx: &Ctx<'_>, line: String) {
    match &ctx.live {
        Some(live) => live.say(line),
        None => eprintln!("{line}"),
    }
}

/// One stderr line on the probe: its μ and where the search starts, or why
/// it fell back to the doubling search.
fn calibration_line(c: &crate::result::sweep::CalibrationRow) -> String {
    let streams: Vec<String> = c.levels.iter().map(|l| l.concurrency.to_string()).collect();
    let probe = format!(
        "closed-loop probe at {} streams, {:.1} s",
        streams.join(", "),
        c.duration_s
    );
    match c.service_rate {
        Some(mu) => format!(
            "kneecap sweep: calibration ({}): μ ≈ {mu:.1} req/s ({probe}); the search starts at {:.1} req/s",
            c.end, c.start_load
        ),
        None => format!(
            "kneecap sweep: calibration ended ({}) without a service rate ({probe}); falling back to the doubling search from {} req/s",
            c.end, c.start_load
        ),
    }
}

/// Add a finished step to the result and save it; false when the sweep must
/// stop (interrupted: a step cut short proves nothing — its data is kept, not
/// its verdict).
pub(crate) fn keep_step(
    ctx: &Ctx<'_>,
    result: &mut SweepResult,
    history: &mut Vec<StepPoint>,
    judged: Judged,
    interrupted: bool,
    out: &Path,
) -> Result<bool> {
    let Judged {
        row: mut step,
        point,
    } = judged;
    if interrupted {
        step.verdict = Verdict::Interrupted;
        step.reasons
            .insert(0, "interrupted by signal before the step finished".into());
        say(ctx, step_line(&step, result.load_unit()));
        result.steps.push(step);
        result.interrupted = true;
        return Ok(false);
    }
    say(ctx, step_line(&step, result.load_unit()));
    twin::note_contradiction(ctx, &step);
    history.push(point);
    result.steps.push(step);
    finish(result, history);
    let (pass, fail) = (result.knee.last_pass, result.knee.first_fail);
    if let Some(p) = result.prediction.as_mut() {
        p.compare(pass, fail);
    }
    save(result, out)?;
    Ok(true)
}

pub(crate) fn save(r: &SweepResult, path: &Path) -> Result<()> {
    let text = serde_json::to_vec_pretty(r)?;
    crate::report::save::write_atomic(path, &text)
}

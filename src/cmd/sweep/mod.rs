//! Sweep orchestration: run a step per load chosen by the search, judge it,
//! keep the evidence (client records, server queue gauges, generator health),
//! and rewrite the sweep JSON after every step so an interruption loses nothing.

mod sharded;

use super::args::sweep::sweep_config;
use super::clock;
use super::prepare::{self as runner, Level, Prepared};
use super::target::{self, Server};
use crate::cli::sweep::SweepArgs;
use crate::client::scrape::{QueueSample, Scraper};
use crate::config::sweep::{StepTiming, SweepConfig};
use crate::engine::{self, probe, Releases};
use crate::metrics::health;
use crate::metrics::stats::{self, StatsOptions};
use crate::metrics::RequestRecord;
use crate::metrics::KNEECAP_PERCENTILES;
use crate::report::sweep::{self as model, StepResult, SweepResult};
use crate::schedule::{self, Arrival};
use crate::sweep::knee::{self, LoadUnit, StepPoint, StepVerdict};
use crate::sweep::rows::{
    dist, due_times, exit_code, finish, goodput_slo, mean, point, queue_stats, slo_row, steady_row,
    step_line, verdict_name,
};
use crate::sweep::{slo, steady, StepVerdictInput};
use anyhow::Result;
use rand::{rngs::StdRng, SeedableRng};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// Queue gauge sampling period.
const SCRAPE_EVERY: Duration = Duration::from_millis(250);
/// Event-loop lag probe period.
const LAG_EVERY: Duration = Duration::from_millis(10);

/// Everything a step needs.
pub(crate) struct Ctx<'a> {
    pub(crate) cfg: &'a SweepConfig,
    pub(crate) server: &'a Server,
    pub(crate) prepared: Prepared,
    pub(crate) scraper: Option<Scraper>,
}

/// Run `kneecap sweep`.
pub async fn execute(args: &SweepArgs, interrupt: watch::Receiver<bool>) -> Result<ExitCode> {
    let cfg = sweep_config(args)?;
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
    let outcome = sweep(&cfg, &server, &out_path, interrupt).await;
    server.shutdown().await;
    let result = outcome?;
    print!("{}", crate::report::table::render(&result));
    println!("{}", crate::report::chart::render(&result, 100));
    if let Some(html) = &cfg.html {
        crate::report::save::write_atomic(html, crate::report::html::render(&result).as_bytes())?;
        eprintln!("kneecap: HTML report written to {}", html.display());
    }
    eprintln!("kneecap: sweep JSON written to {}", out_path.display());
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
    interrupt: watch::Receiver<bool>,
) -> Result<SweepResult> {
    let prepared = runner::prepare(&cfg.run, server).await?;
    let metrics_url = cfg
        .metrics_url
        .clone()
        .unwrap_or_else(|| format!("{}/metrics", server.base_url));
    let ctx = Ctx {
        cfg,
        server,
        scraper: Scraper::new(&metrics_url).ok(),
        prepared,
    };
    let mut result = new_result(&ctx);
    announce(&ctx, &result);
    if cfg.run.shard.is_none() {
        if let Some(start) = cfg.run.start_at {
            clock::wait_until(start).await?;
        }
    }
    if cfg.run.shard.is_some() {
        sharded::run(&ctx, &mut result, out, interrupt).await?;
    } else {
        search(&ctx, &mut result, out, interrupt).await?;
    }
    result.complete = !result.interrupted;
    save(&result, out)?;
    Ok(result)
}

/// The single-process search: the next load depends on the verdicts so far.
async fn search(
    ctx: &Ctx<'_>,
    result: &mut SweepResult,
    out: &Path,
    interrupt: watch::Receiver<bool>,
) -> Result<()> {
    let mut history: Vec<StepPoint> = Vec::new();
    while let Some(load) = knee::next_load(&ctx.cfg.plan, &history) {
        let refining = history.iter().any(|p| p.verdict == StepVerdict::Fail);
        let step = run_step(ctx, history.len(), load, refining, interrupt.clone()).await;
        if !keep_step(result, &mut history, step, *interrupt.borrow(), out)? {
            break;
        }
    }
    Ok(())
}

/// Add a finished step to the result and save it; false when the sweep must
/// stop (interrupted: a step cut short proves nothing — its data is kept, not
/// its verdict).
pub(crate) fn keep_step(
    result: &mut SweepResult,
    history: &mut Vec<StepPoint>,
    mut step: StepResult,
    interrupted: bool,
    out: &Path,
) -> Result<bool> {
    if interrupted {
        step.verdict = "interrupted".into();
        step.reasons
            .insert(0, "interrupted by signal before the step finished".into());
        eprintln!("{}", step_line(&step, result.load_unit()));
        result.steps.push(step);
        result.interrupted = true;
        return Ok(false);
    }
    eprintln!("{}", step_line(&step, result.load_unit()));
    history.push(point(&step));
    result.steps.push(step);
    finish(result, history);
    save(result, out)?;
    Ok(true)
}

fn new_result(ctx: &Ctx<'_>) -> SweepResult {
    let cfg = ctx.cfg;
    let specs = &ctx.prepared.specs;
    let n = specs.len().max(1) as f64;
    let mode = match cfg.mode {
        LoadUnit::Rate => "rate",
        LoadUnit::Concurrency => "concurrency",
    };
    let sim_service_rate = ctx.server.sim_config.as_ref().map(|s| {
        let (i, o) = (
            specs.iter().map(|s| s.prompt_len as f64).sum::<f64>() / n,
            specs.iter().map(|s| s.output_len as f64).sum::<f64>() / n,
        );
        crate::sim::service_rate(s, i.round() as u32, o.round() as u32)
    });
    SweepResult {
        kind: "kneecap_sweep".into(),
        schema_version: model::SCHEMA_VERSION,
        kneecap_version: env!("CARGO_PKG_VERSION").into(),
        started_at: chrono::Local::now().to_rfc3339(),
        workload: model::Workload {
            target: ctx.server.base_url.clone(),
            endpoint: cfg.run.endpoint.clone(),
            model: ctx.prepared.model_id.clone(),
            dataset: cfg.run.dataset_name.into(),
            mean_input_tokens: specs.iter().map(|s| s.prompt_len as f64).sum::<f64>() / n,
            mean_output_tokens: specs.iter().map(|s| s.output_len as f64).sum::<f64>() / n,
            arrival: arrival_name(cfg),
            burstiness: cfg.run.load.burstiness,
            seed: cfg.run.load.seed,
            step_warmup_s: cfg.timing.warmup.as_secs_f64(),
            step_min_duration_s: cfg.timing.min_measured.as_secs_f64(),
            step_min_requests: cfg.timing.min_requests,
        },
        slos: cfg.slos.iter().map(|s| s.to_string()).collect(),
        max_error_rate: cfg.max_error_rate,
        mode: mode.into(),
        simulated: ctx.server.simulated,
        sim_service_rate,
        ..Default::default()
    }
}

fn arrival_name(cfg: &SweepConfig) -> String {
    match cfg.mode {
        LoadUnit::Concurrency => "closed loop (fixed concurrency)".into(),
        LoadUnit::Rate if cfg.run.load.burstiness.is_infinite() => "constant spacing".into(),
        LoadUnit::Rate if cfg.run.load.burstiness == 1.0 => "poisson".into(),
        LoadUnit::Rate => format!("gamma (burstiness {})", cfg.run.load.burstiness),
    }
}

fn announce(ctx: &Ctx<'_>, r: &SweepResult) {
    let w = &r.workload;
    let slos = if r.slos.is_empty() {
        "none (steady state and errors only)".to_string()
    } else {
        r.slos.join(", ")
    };
    let sim = if r.simulated {
        " — built-in simulator: SIMULATED numbers"
    } else {
        ""
    };
    eprintln!(
        "kneecap sweep: {} model {} | {} | in {:.0} / out {:.0} tokens | SLO {slos}{sim}",
        ctx.server.base_url, w.model, w.arrival, w.mean_input_tokens, w.mean_output_tokens
    );
    if let Some(mu) = r.sim_service_rate {
        eprintln!("kneecap sweep: the simulator's computed capacity for this workload is μ ≈ {mu:.1} req/s");
    }
}

/// Run one step at `load` and judge it.
async fn run_step(
    ctx: &Ctx<'_>,
    index: usize,
    load: f64,
    refining: bool,
    interrupt: watch::Receiver<bool>,
) -> StepResult {
    let cfg = ctx.cfg;
    let timing = if refining {
        cfg.timing.refined()
    } else {
        cfg.timing.clone()
    };
    let (releases, length, cap) = step_releases(cfg, &timing, index, load);
    let level = Level {
        releases,
        specs: ctx.prepared.specs.clone(),
        max_concurrency: cap,
        cancel_at: Some(length + timing.drain),
    };
    let m = measure(ctx, level, interrupt).await;
    let evidence = Evidence {
        records: &m.out.records,
        window: (timing.warmup, length),
        queue: m.queue,
        source: m.source,
        check: m.check,
    };
    let mut step = judge_step(cfg, load, evidence);
    if cfg.run.output.save_detailed {
        step.due_times_s = due_times(&m.out.records);
    }
    step
}

/// What running one step left: the engine's records, the generator's
/// self-check and the server's queue gauges.
pub(crate) struct Measured {
    pub(crate) out: engine::EngineOutput,
    pub(crate) check: probe::SelfCheck,
    pub(crate) source: Option<String>,
    pub(crate) queue: Vec<QueueSample>,
}

/// Run one load level while scraping the server's queue gauges.
pub(crate) async fn measure(
    ctx: &Ctx<'_>,
    level: Level,
    interrupt: watch::Receiver<bool>,
) -> Measured {
    let (stop_tx, stop_rx) = watch::channel(false);
    let t0 = Instant::now();
    let scrape = async {
        match &ctx.scraper {
            Some(s) => s.series(t0, SCRAPE_EVERY, stop_rx.clone()).await,
            None => (None, Vec::new()),
        }
    };
    let progress = runner::progress_bar(ctx.cfg.run.output.progress, &level.releases);
    let run = async {
        let level = runner::run_level_with(&ctx.prepared, level, progress, interrupt);
        let out = probe::self_checked(level, LAG_EVERY).await;
        let _ = stop_tx.send(true);
        out
    };
    let ((out, check), (source, queue)) = tokio::join!(run, scrape);
    Measured {
        out,
        check,
        source: source.map(|s| format!("{s:?}").to_lowercase()),
        queue,
    }
}

/// Releases for one step: a Poisson/gamma schedule at `load` req/s, or a
/// closed loop of `load` streams. Seeded per step so reruns are identical.
pub(crate) fn step_releases(
    cfg: &SweepConfig,
    timing: &StepTiming,
    index: usize,
    load: f64,
) -> (Releases, Duration, Option<usize>) {
    match cfg.mode {
        LoadUnit::Rate => {
            let length = timing.length_for_rate(load);
            let burstiness = cfg.run.load.burstiness;
            let arrival = if burstiness.is_infinite() {
                Arrival::Constant { rate: load }
            } else {
                Arrival::Gamma {
                    rate: load,
                    burstiness,
                }
            };
            let mut rng = StdRng::seed_from_u64(cfg.run.load.seed.wrapping_add(index as u64));
            let offsets = schedule::offsets_until(length, &arrival, &mut rng);
            (
                Releases::Scheduled(offsets),
                length,
                cfg.run.load.max_concurrency,
            )
        }
        LoadUnit::Concurrency => {
            let length = timing.length_closed();
            (
                Releases::ClosedFor(length),
                length,
                Some(load.round().max(1.0) as usize),
            )
        }
    }
}

/// What a step left behind.
pub(crate) struct Evidence<'a> {
    pub(crate) records: &'a [RequestRecord],
    pub(crate) window: (Duration, Duration),
    pub(crate) queue: Vec<QueueSample>,
    pub(crate) source: Option<String>,
    pub(crate) check: probe::SelfCheck,
}

pub(crate) fn judge_step(cfg: &SweepConfig, load: f64, e: Evidence<'_>) -> StepResult {
    let (w0, w1) = e.window;
    let in_window: Vec<RequestRecord> = e
        .records
        .iter()
        .filter(|r| r.due >= w0 && r.due < w1)
        .cloned()
        .collect();
    let opts = StatsOptions {
        percentiles: KNEECAP_PERCENTILES.to_vec(),
        goodput: goodput_slo(&cfg.slos),
    };
    let summary = stats::summarize(&in_window, w1 - w0, &opts);
    let ok: Vec<RequestRecord> = in_window.iter().filter(|r| r.is_ok()).cloned().collect();
    let outcomes: Vec<slo::SloOutcome> = cfg.slos.iter().map(|s| slo::evaluate(s, &ok)).collect();
    let mut steadiness = steady::assess(e.records, e.window, &steady::SteadyThresholds::default());
    let waiting: Vec<(f64, f64)> = e
        .queue
        .iter()
        .filter_map(|q| q.waiting.map(|w| (q.t_s, w)))
        .collect();
    if let Some(trend) = steady::queue_trend(&waiting, e.window).filter(|t| t.growing()) {
        steadiness.reasons.push(trend.reason());
        steadiness.steady = false;
    }
    let offered = if cfg.mode == LoadUnit::Rate {
        load
    } else {
        steadiness.offered_rate
    };
    let lag_p99 = e.check.lag_p99_ms();
    let cpu = e.check.cpu_busy_fraction;
    let bound = cfg
        .max_lateness_ms
        .unwrap_or_else(|| health::lateness_bound_ms(offered));
    let generator = health::generator_health_with_bound(&summary.lateness, bound, cpu, lag_p99);
    let n = in_window.len();
    let error_rate = if n == 0 {
        0.0
    } else {
        summary.failed as f64 / n as f64
    };
    let input = StepVerdictInput {
        slo_outcomes: &outcomes,
        error_rate,
        max_error_rate: cfg.max_error_rate,
        steadiness: &steadiness,
        generator: &generator,
    };
    let (verdict, reasons) = crate::sweep::judge(&input);
    let (mean_waiting, max_waiting, mean_running) = queue_stats(&e.queue, w0, w1);
    let mut warnings: Vec<String> = outcomes.iter().filter_map(|o| o.warning.clone()).collect();
    warnings.extend(generator.warnings.iter().cloned());
    StepResult {
        load,
        verdict: verdict_name(verdict).into(),
        reasons,
        warnings,
        window_start_s: w0.as_secs_f64(),
        window_end_s: w1.as_secs_f64(),
        n_requests: n,
        completed: summary.completed,
        failed: summary.failed,
        error_rate,
        offered_rate: steadiness.offered_rate,
        achieved_rate: steadiness.achieved_rate,
        goodput: summary
            .request_goodput
            .unwrap_or(summary.request_throughput),
        output_token_rate: summary.output_throughput,
        mean_input_tokens: mean(
            in_window
                .iter()
                .filter(|r| r.is_ok())
                .map(|r| r.prompt_len as f64),
        ),
        mean_output_tokens: mean(
            in_window
                .iter()
                .filter(|r| r.is_ok())
                .map(|r| r.output_tokens as f64),
        ),
        ttft_ms: dist(&summary.ttft),
        tpot_ms: dist(&summary.tpot),
        itl_ms: dist(&summary.itl),
        e2el_ms: dist(&summary.e2el),
        ttft_from_due_ms: dist(&summary.ttft_from_due),
        lateness_ms: dist(&summary.lateness),
        slo_outcomes: outcomes.iter().map(slo_row).collect(),
        steady: steady_row(&steadiness),
        generator: model::GeneratorRow {
            limited: generator.limited,
            lateness_p50_ms: summary.lateness.median_ms,
            lateness_p99_ms: health::p99_ms(&summary.lateness),
            lateness_max_ms: summary.lateness.max_ms,
            cpu_busy_fraction: cpu,
            event_loop_lag_p99_ms: lag_p99,
            reasons: generator.reasons.clone(),
        },
        queue_source: e.source,
        queue: e.queue,
        mean_waiting,
        max_waiting,
        mean_running,
        errors_by_kind: summary.errors_by_kind.clone(),
        first_errors: in_window
            .iter()
            .filter_map(|r| r.error.as_ref())
            .take(5)
            .map(|x| x.message.clone()) // redacted by the client at the source
            .collect(),
        ..Default::default()
    }
}

pub(crate) fn save(r: &SweepResult, path: &Path) -> Result<()> {
    let text = serde_json::to_vec_pretty(r)?;
    crate::report::save::write_atomic(path, &text)
}

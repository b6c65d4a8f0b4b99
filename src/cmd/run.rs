//! `kneecap run`: the orchestration of one load level, from validated config
//! to saved result. Reads like a table of contents; the work is in the
//! modules it calls.

use super::args::run::{run_config_for, DefaultTarget};
use super::cache_hits::CacheProbe;
use super::clock;
use super::live::{self, Live, LiveStart};
use super::prepare::{check_os_limits, prepare, progress_bar, run_level, Level, Prepared};
use super::spec_decode::SpecProbe;
use super::target::{self, Server};
use crate::cli::run::RunArgs;
use crate::config::{self, LoadConfig, RunConfig, UiMode};
use crate::engine::{self, Releases};
use crate::metrics::fold::summarize_folded;
use crate::metrics::hist::RunHists;
use crate::metrics::stats::{self, Summary};
use crate::metrics::KNEECAP_PERCENTILES;
use crate::report;
use crate::result::shard::{ShardCounters, ShardIdentity, ShardPart, ShardRun};
use crate::result::{GeneratorVerdict, RunHeader, RunOutcome, RunResult};
use crate::schedule::{self, Arrival};
use crate::shard;
use anyhow::Result;
use rand::{rngs::StdRng, SeedableRng};
use std::process::ExitCode;
use std::time::Duration;
use tokio::sync::watch;

/// Runtime scheduling-lag probe period.
const LAG_PROBE_EVERY: Duration = Duration::from_millis(10);
/// How many failure messages the summary and JSON keep.
const FIRST_ERRORS: usize = 10;

/// Run `kneecap run` / `kneecap bench serve` (`default` says where a command
/// line without a target goes).
pub async fn execute(
    args: &RunArgs,
    default: DefaultTarget,
    interrupt: watch::Receiver<bool>,
) -> Result<ExitCode> {
    let mut cfg = run_config_for(args, default)?;
    let ui = live::resolve_ui(&cfg.output.live);
    cfg.output.progress &= ui == UiMode::Plain;
    if let Some(start) = cfg.start_at {
        shard::wait_for_start(start, clock::now()).map_err(anyhow::Error::msg)?;
    }
    check_os_limits(&cfg)?;
    if cfg.output.save_result {
        report::save::check_writable(cfg.output.result_dir.as_deref(), "--result-dir")?;
    }
    let server = target::start(&cfg.target).await?;
    let live = Live::start(LiveStart {
        cfg: &cfg.output.live,
        ui,
        command: "kneecap run",
        slos: Vec::new(),
        server_metrics: Some(format!("{}/metrics", server.base_url)),
    })
    .await;
    let (outcome, live) = match live {
        Ok(mut live) => (
            run_against(&cfg, &server, live.as_mut(), interrupt).await,
            live,
        ),
        Err(e) => (Err(e), None),
    };
    server.shutdown().await;
    let result = outcome?;
    print!("{}", report::console::render(&result));
    save_result(&cfg, &result)?;
    if let Some(live) = live {
        live.finish().await;
    }
    Ok(if result.kneecap.interrupted {
        ExitCode::from(2)
    } else {
        ExitCode::SUCCESS
    })
}

async fn run_against(
    cfg: &RunConfig,
    server: &Server,
    mut live: Option<&mut Live>,
    interrupt: watch::Receiver<bool>,
) -> Result<RunResult> {
    let gpu_hosts = super::gpu_power::GpuHosts::connect(cfg.gpu.as_ref()).await?;
    let p = prepare(cfg, server).await?;
    let timestamps = p.trace.as_ref().map(|t| t.timestamps.as_slice());
    let global = releases(&cfg.load, p.specs.len(), timestamps)?;
    let (mut level, globals) = shard_level(cfg, &p, global)?;
    announce(cfg, server, &p.served_model, &level.releases);
    if let Some(live) = live.as_deref_mut() {
        watch_live(live, cfg, &mut level)?;
    }
    let progress = progress_bar(cfg.output.progress, &level.releases);
    let scheduled = matches!(&level.releases, Releases::Scheduled(_))
        && (cfg.load.request_rate.is_finite() || cfg.load.trace_speed.is_some());
    let offered = offered_rate(cfg, &level.releases);
    if let Some(start) = cfg.start_at {
        clock::wait_until(start).await?;
    }
    if cfg.profile {
        super::prepare::profile(&p.client, "/start_profile").await;
    }
    let cache = CacheProbe::start(&server.base_url).await;
    let spec = SpecProbe::start(&server.base_url).await;
    let gpu = super::gpu_power::start(gpu_hosts.as_ref());
    let level = run_level(&p, level, progress, interrupt);
    let (out, check) = engine::probe::self_checked(level, LAG_PROBE_EVERY).await;
    let gpu = super::gpu_power::finish(gpu).await;
    let mut out = out?;
    if let Some(live) = live {
        live.close_dashboard();
    }
    let prefix_cache = cache.finish(&out.records).await;
    let spec_decode = spec.finish().await;
    if cfg.profile {
        super::prepare::profile(&p.client, "/stop_profile").await;
    }
    if let Some(s) = cfg.shard {
        shard::apply::renumber(s, &mut out.records, globals.as_deref());
    }
    let summary = summarize(&out, cfg);
    let sessions = cfg
        .sessions
        .as_ref()
        .map(|_| crate::metrics::session::summarize(&out.records, &out.sessions));
    let lateness = crate::metrics::health::judged_lateness(&out.records);
    let generator = generator_verdict(&summary, &lateness, offered, scheduled, &check);
    let outcome = RunOutcome {
        started: Some(out.started_at.into()),
        interrupted: out.interrupted,
        first_errors: first_errors(&out.records),
        warmups_ok: p.warmups_ok,
        shard: cfg
            .shard
            .map(|s| shard_run(cfg, s, &p.model_id, &out, generator.health.limited)),
        generator: Some(generator),
        merged: None,
    };
    let header = run_header(cfg, server, p.model_id, p.server.clone());
    let mut result = RunResult::assemble(header, summary, out.records, outcome);
    result.kneecap.prefix_cache = prefix_cache;
    result.kneecap.spec_decode = spec_decode;
    result.kneecap.gpu = gpu.map(|g| {
        let s = &result.summary;
        g.with_work(s.total_output_tokens, s.completed as u64)
    });
    result.kneecap.sessions = sessions;
    Ok(result)
}

/// Observe the level live, and show the dashboard (when asked) from here on.
fn watch_live(live: &mut Live, cfg: &RunConfig, level: &mut Level) -> Result<()> {
    let planned = match &level.releases {
        Releases::Scheduled(due) => due.last().copied(),
        Releases::ClosedFor(d) => Some(*d),
    };
    let sessions = cfg.sessions.is_some();
    let (load, unit) = match (
        cfg.load.trace_speed,
        cfg.load.request_rate,
        level.max_concurrency,
    ) {
        (Some(speed), _, _) => (Some(speed), "× trace speed"),
        (None, rate, _) if rate.is_finite() && sessions => (Some(rate), "sessions/s"),
        (None, rate, _) if rate.is_finite() => (Some(rate), "req/s"),
        (None, _, Some(c)) if sessions => (Some(c as f64), "users"),
        (None, _, Some(c)) => (Some(c as f64), "streams"),
        _ => (None, ""),
    };
    level.watch = live.observe(level.watch.take());
    live.begin(None, load, unit, planned);
    live.show_dashboard()
}

/// The whole load, or this shard's part of it (`--shard`): releases, prompts
/// reordered to their global numbers, and this shard's concurrency share.
fn shard_level(
    cfg: &RunConfig,
    p: &Prepared,
    global: Releases,
) -> Result<(Level, Option<Vec<usize>>)> {
    let Some(s) = cfg.shard else {
        let level = Level {
            releases: global,
            specs: p.specs.clone(),
            max_concurrency: cfg.load.max_concurrency,
            cancel_at: None,
            watch: None,
            sessions: None,
        };
        return Ok((level, None));
    };
    let max_concurrency = cfg
        .load
        .max_concurrency
        .map(|c| s.concurrency(c, "--max-concurrency"))
        .transpose()
        .map_err(anyhow::Error::msg)?;
    let load = shard::apply::select(s, cfg.load.seed, global, &p.specs);
    eprintln!("kneecap: shard {s}: sending this shard's share of the seeded global load");
    let level = Level {
        releases: load.releases,
        specs: load.specs,
        max_concurrency,
        cancel_at: None,
        watch: None,
        sessions: None,
    };
    Ok((level, load.globals))
}

/// The `kneecap.shard` block of a sharded run.
fn shard_run(
    cfg: &RunConfig,
    s: shard::Shard,
    model_id: &str,
    out: &engine::EngineOutput,
    limited: bool,
) -> ShardRun {
    let start = clock::unix_s(out.started_at);
    let part = ShardPart {
        start_lateness_ms: cfg.start_at.map(|a| (start - a.unix_s()) * 1e3),
        window_start_unix_s: start,
        window_end_unix_s: start + out.duration.as_secs_f64(),
        counters: ShardCounters::from_records(&out.records, cfg.stats.goodput.as_ref()),
        hists: RunHists::from_records_and_fold(&out.records, out.fold.as_ref()),
        generator_limited: limited,
        interrupted: out.interrupted,
    };
    let id = ShardIdentity {
        shard: s,
        fingerprint: config::run_fingerprint(cfg, model_id, &[]),
        seed: cfg.load.seed,
        start_at: cfg.start_at,
    };
    ShardRun { id, part }
}

/// The offered rate the lateness bound is set from: `--request-rate`, or for
/// a replayed trace its releases over their span.
fn offered_rate(cfg: &RunConfig, releases: &Releases) -> f64 {
    match (cfg.load.trace_speed, releases) {
        (Some(_), Releases::Scheduled(due)) => match due.last() {
            Some(last) if !last.is_zero() => due.len() as f64 / last.as_secs_f64(),
            _ => f64::INFINITY,
        },
        _ => cfg.load.request_rate,
    }
}

/// Did kneecap keep to its schedule? Dispatch lateness is judged only for a
/// finite-rate schedule: with `--request-rate inf` every request is due at
/// t0 and lateness measures the burst, not the generator. `lateness` is
/// [`crate::metrics::health::judged_lateness`] of the run's records.
fn generator_verdict(
    s: &Summary,
    lateness: &stats::Distribution,
    rate: f64,
    scheduled: bool,
    check: &engine::probe::SelfCheck,
) -> GeneratorVerdict {
    use crate::metrics::health;
    let lag_p99 = check.lag_p99_ms();
    let health = if scheduled {
        health::generator_health(lateness, rate, check.cpu_busy_fraction, lag_p99)
    } else {
        let unjudged = stats::Distribution::default();
        health::generator_health_with_bound(
            &unjudged,
            health::lateness_bound_ms(rate),
            check.cpu_busy_fraction,
            lag_p99,
        )
    };
    let delay = s.stamps.scheduling_delay.percentile_ms(99.0);
    let health = health.with_scheduling_delay(delay.filter(|_| s.stamps.kernel > 0));
    GeneratorVerdict {
        health,
        lateness_judged: scheduled,
        cpu_busy_fraction: check.cpu_busy_fraction,
        runtime_lag_p99_ms: lag_p99,
    }
}

/// Due offsets (open loop), a trace's own timestamps (self-timed replay), or
/// a closed loop for a fixed time.
fn releases(load: &LoadConfig, n_specs: usize, trace: Option<&[f64]>) -> Result<Releases> {
    if let (Some(speed), Some(timestamps)) = (load.trace_speed, trace) {
        let mut due = schedule::trace_offsets(timestamps, speed);
        if let Some(d) = load.duration {
            due.retain(|t| *t < d);
        }
        return Ok(Releases::Scheduled(due));
    }
    let mut rng = StdRng::seed_from_u64(load.seed);
    Ok(match (load.duration, &load.arrival) {
        (Some(d), Arrival::Infinite) => Releases::ClosedFor(d),
        (Some(d), arrival) => Releases::Scheduled(schedule::offsets_until(d, arrival, &mut rng)),
        (None, arrival) => {
            let n = if load.num_prompts == 0 || load.requests_from_dataset {
                n_specs
            } else {
                load.num_prompts
            };
            Releases::Scheduled(schedule::offsets(n, arrival, &mut rng))
        }
    })
}

fn announce(cfg: &RunConfig, server: &Server, model: &str, releases: &Releases) {
    let unit = if cfg.sessions.is_some() {
        "sessions"
    } else {
        "requests"
    };
    let what = match releases {
        Releases::Scheduled(d) => format!("{} {unit}", d.len()),
        Releases::ClosedFor(d) => format!("closed loop for {d:.0?}"),
    };
    let sim = if server.simulated {
        " (built-in simulator: numbers are SIMULATED)"
    } else {
        ""
    };
    eprintln!(
        "kneecap: {what} to {}{} model {model}, {}{sim}",
        server.base_url,
        cfg.endpoint,
        describe_load(cfg)
    );
}

fn summarize(out: &engine::EngineOutput, cfg: &RunConfig) -> Summary {
    let (records, duration) = (&out.records, out.duration);
    let mut s = match &out.fold {
        Some(fold) => summarize_folded(records, duration, &cfg.stats, fold),
        None => stats::summarize(records, duration, &cfg.stats),
    };
    // kneecap's own block always carries p50/p90/p99/p99.9, whatever --metric-percentiles says.
    let own = stats::StatsOptions {
        percentiles: KNEECAP_PERCENTILES.to_vec(),
        goodput: None,
    };
    let full = stats::summarize(records, duration, &own);
    s.lateness = full.lateness;
    s.ttft_from_due = full.ttft_from_due;
    s.e2el_from_due = full.e2el_from_due;
    s.ttfo = full.ttfo;
    s.answer_tpot = full.answer_tpot;
    s
}

/// What this run was asked to do: vLLM's header and kneecap's identity.
fn run_header(
    cfg: &RunConfig,
    server: &Server,
    model_id: String,
    info: Option<crate::result::ServerInfo>,
) -> RunHeader {
    RunHeader {
        backend: cfg.backend.name().into(),
        label: cfg.output.label.clone(),
        model_id,
        tokenizer_id: cfg.tokenizer.as_ref().map(|p| p.display().to_string()),
        num_prompts: cfg.load.num_prompts,
        metadata: cfg.output.metadata.clone(),
        request_rate: cfg.load.request_rate,
        burstiness: cfg.load.burstiness,
        max_concurrency: cfg.load.max_concurrency,
        ramp_up: cfg
            .load
            .ramp_up
            .map(|(s, a, b)| (ramp_name(s).into(), a, b)),
        percentile_metrics: cfg.output.percentile_metrics.clone(),
        percentiles: cfg.stats.percentiles.clone(),
        target: server.base_url.clone(),
        simulated: server.simulated,
        sim_preset: server.preset.clone(),
        endpoint: cfg.endpoint.clone(),
        dataset: cfg.dataset_name.into(),
        arrival: describe_load(cfg),
        seed: cfg.load.seed,
        duration_bound_s: cfg.load.duration.map(|d| d.as_secs_f64()),
        server: info,
    }
}

/// The first failure messages (redacted by the client at the source).
fn first_errors(records: &[crate::metrics::RequestRecord]) -> Vec<String> {
    records
        .iter()
        .filter_map(|r| r.error.as_ref())
        .take(FIRST_ERRORS)
        .map(|e| e.message.clone())
        .collect()
}

fn ramp_name(r: schedule::RampStrategy) -> &'static str {
    match r {
        schedule::RampStrategy::Linear => "linear",
        schedule::RampStrategy::Exponential => "exponential",
    }
}

/// [`describe_arrival`], in sessions and users with `--multi-turn`.
fn describe_load(cfg: &RunConfig) -> String {
    let words = describe_arrival(&cfg.load);
    match &cfg.sessions {
        Some(_) => format!(
            "multi-turn sessions, {}",
            words
                .replace("req/s", "sessions/s")
                .replace("max concurrency", "users")
        ),
        None => words,
    }
}

/// "poisson 10 req/s", "gamma(b=0.5) 10 req/s", "constant 10 req/s", "all at once".
pub fn describe_arrival(load: &LoadConfig) -> String {
    let conc = load
        .max_concurrency
        .map(|c| format!(", max concurrency {c}"))
        .unwrap_or_default();
    if let Some(speed) = load.trace_speed {
        return format!("trace timestamps at {speed}x speed (self-timed){conc}");
    }
    let base = match &load.arrival {
        Arrival::Infinite if load.max_concurrency.is_some() => "closed loop (rate inf)".to_string(),
        Arrival::Infinite => "all at once (rate inf)".to_string(),
        Arrival::Constant { rate } => format!("constant {rate} req/s"),
        Arrival::Gamma { rate, burstiness } if *burstiness == 1.0 => {
            format!("poisson {rate} req/s")
        }
        Arrival::Gamma { rate, burstiness } => {
            format!("gamma(burstiness {burstiness}) {rate} req/s")
        }
        Arrival::Ramp {
            strategy,
            start,
            end,
            ..
        } => format!("ramp-up {strategy:?} {start}→{end} req/s"),
    };
    format!("{base}{conc}")
}

fn save_result(cfg: &RunConfig, result: &RunResult) -> Result<()> {
    if !cfg.output.save_result {
        return Ok(());
    }
    let path = report::save::result_path(
        cfg.output.result_dir.as_deref(),
        cfg.output.result_filename.as_deref(),
        result,
    );
    report::save::save(
        result,
        &path,
        cfg.output.save_detailed,
        cfg.output.append_result,
    )?;
    eprintln!("kneecap: result written to {}", path.display());
    Ok(())
}

#[cfg(test)]
#[path = "run_tests.rs"]
mod tests;

//! Sharded sweep: `kneecap sweep --shard i/N --start-at T --rates a,b,c` (or
//! `--concurrencies`). Every shard runs **every** listed step, whatever its own
//! verdicts say: no early stop, no refinement, so the step list and the step
//! timing are fixed in advance and all shards agree without talking. Step k
//! runs in its wall-clock slot ([`crate::shard::step_starts`] from `--start-at`),
//! so the shards' step windows line up; a shard that finishes early waits for
//! the next slot, and a step that starts after its slot (the previous one
//! overran) says so (`overran_slot_ms`).
//!
//! A shard sends its share of step k's seeded global schedule (or of its
//! streams) and judges the step on that share — an informative local verdict
//! only. Beside each step it writes a `shard` block that `kneecap merge` adds
//! up: the counters and histograms of a sharded run over the step's window
//! (its failed requests among the counters: the merge counts them as misses),
//! its start lateness against the slot, the steady-state inputs
//! ([`crate::sweep::steady::Steadiness`]: they add across shards), the generator
//! verdict, and the exact counts of goodput-form SLOs
//! ([`crate::sweep::slo_hist::Attainment`]). The scraped queue series stays in the
//! step as in any sweep.
use super::prompts::{self, Which};
use super::step::{self as live, Evidence};
use super::{keep_step, say, Ctx};
use crate::cmd::clock;
use crate::cmd::prepare::Level;
use crate::config::sweep::{StepTiming, SweepConfig};
use crate::engine::EngineOutput;
use crate::metrics::hist::RunHists;
use crate::result::shard::{ShardCounters, ShardIdentity, ShardPart};
use crate::result::shard_sweep::{StepShard, SweepIdentity};
use crate::result::sweep::SweepResult;
use crate::shard::{self, apply, Shard, StartAt};
use crate::sweep::knee::{LoadUnit, SearchPlan, StepPoint};
use crate::sweep::rows::{due_times, goodput_slo};
use crate::sweep::slo_hist::attainment;
use crate::sweep::steady::{self, SteadyThresholds};
use crate::workload::RequestSpec;
use anyhow::{bail, Result};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// Run the fixed step list in slots, keeping a shard block per step.
pub(super) async fn run_all_steps(
    ctx: &Ctx<'_>,
    result: &mut SweepResult,
    out: &Path,
    interrupt: watch::Receiver<bool>,
) -> Result<()> {
    let cfg = ctx.cfg;
    let (Some(me), Some(start)) = (cfg.run.shard, cfg.run.start_at) else {
        bail!("a sharded sweep needs --shard and --start-at");
    };
    let loads = fixed_loads(&cfg.plan)?;
    let timing = cfg.timing.clone();
    let lengths: Vec<Duration> = loads
        .iter()
        .map(|&l| step_length(cfg, &timing, l))
        .collect();
    let slots = shard::step_starts(&lengths, timing.drain);
    result.shard = Some(SweepIdentity {
        id: identity(cfg, me, start, &ctx.prepared.model_id, &loads),
        slots_s: slots.iter().map(Duration::as_secs_f64).collect(),
    });
    say(
        ctx,
        format!(
            "kneecap sweep: shard {me}: {} steps in fixed slots from {}; verdicts below judge this shard's share only — `kneecap merge` judges the sweep",
            loads.len(),
            start.rfc3339()
        ),
    );
    let mut history: Vec<StepPoint> = Vec::new();
    for (k, (&load, slot)) in loads.iter().zip(&slots).enumerate() {
        let at = StartAt(start.0 + slot.as_nanos() as i128);
        // Every shard draws step k's prompts from --seed and k alone; only
        // shard 0 resets the cache, so no shard drops what another's step
        // has just put there.
        let drawn = prompts::draw(ctx, Which::Step(k));
        let reset = me.index == 0 && super::cache_reset::before_step(ctx).await;
        let overran_ms = clock::wait_for_slot(at).await;
        if let Some(ms) = overran_ms {
            say(ctx, format!("kneecap sweep: shard {me}: step {k} starts {ms:.0} ms after its slot (the previous step overran it)"));
        }
        let (level, length) = my_level(ctx, me, (k, load), &drawn.specs)?;
        let m = live::measure(ctx, level, None, interrupt.clone()).await?;
        let interrupted = *interrupt.borrow();
        let window = (timing.warmup, length);
        let evidence = Evidence {
            records: &m.out.records,
            window,
            queue: m.queue,
            source: m.source,
            check: m.check,
            ended_early: false,
            tests: 1,
            prior: None,
        };
        let mut judged = live::judge_records(cfg, load, evidence);
        let step = &mut judged.row;
        let slot_info = Slot { at, overran_ms };
        let flags = (step.generator.limited, interrupted);
        step.shard = Some(step_block(cfg, &m.out, window, slot_info, flags));
        if cfg.run.output.save_detailed {
            step.due_times_s = due_times(&m.out.records);
        }
        live::note_prompts(ctx, step, (drawn.row, reset), m.out.records.len());
        if !keep_step(ctx, result, &mut history, judged, interrupted, out)? {
            break;
        }
    }
    Ok(())
}

/// This shard's share of step `k` at `load` with the step's prompts, and
/// the step's length.
fn my_level(
    ctx: &Ctx<'_>,
    me: Shard,
    (k, load): (usize, f64),
    specs: &Arc<Vec<RequestSpec>>,
) -> Result<(Level, Duration)> {
    let (cfg, timing) = (ctx.cfg, &ctx.cfg.timing);
    let (releases, length, cap) = live::step_releases(cfg, timing, k, load, None);
    if let Some(dash) = &ctx.live {
        let unit = crate::result::sweep::load_unit(cfg.run.sessions.is_some(), cfg.mode);
        dash.begin(Some(k), Some(load), unit, Some(length));
    }
    let flag = match cfg.mode {
        LoadUnit::Rate | LoadUnit::TraceSpeed => "--max-concurrency",
        LoadUnit::Concurrency => "--concurrencies",
    };
    let cap = cap
        .map(|c| me.concurrency(c, flag))
        .transpose()
        .map_err(anyhow::Error::msg)?;
    let mine = apply::select(me, cfg.run.load.seed, releases, specs);
    let level = Level {
        releases: mine.releases,
        specs: mine.specs,
        sessions: None,
        max_concurrency: cap,
        cancel_at: Some(length + timing.drain),
        watch: None,
    };
    Ok((level, length))
}

/// The listed loads, each once, in order; the automatic search is refused
/// (config does too): each shard would judge on its share and drift apart.
fn fixed_loads(plan: &SearchPlan) -> Result<Vec<f64>> {
    let SearchPlan::List(list) = plan else {
        bail!("--shard: a sharded sweep needs a fixed step list (--rates a,b,c or --concurrencies a,b,c)");
    };
    let mut loads: Vec<f64> = Vec::new();
    for &l in list {
        if !loads.contains(&l) {
            loads.push(l);
        }
    }
    Ok(loads)
}

fn step_length(cfg: &SweepConfig, timing: &StepTiming, load: f64) -> Duration {
    match cfg.mode {
        // A trace-speed sweep is never sharded (refused in config).
        LoadUnit::Rate | LoadUnit::TraceSpeed => timing.length_for_rate(load),
        LoadUnit::Concurrency => timing.length_closed(),
    }
}

/// Who this shard is; the fingerprint covers the run's workload plus the
/// sweep's SLOs, loads and step timing (shards of one sweep agree on all).
fn identity(
    cfg: &SweepConfig,
    me: Shard,
    start: StartAt,
    model: &str,
    loads: &[f64],
) -> ShardIdentity {
    let slos: Vec<String> = cfg.slos.iter().map(|s| s.to_string()).collect();
    let extra = [
        ("sweep_slos", slos.join(" ")),
        ("sweep_mode", format!("{:?}", cfg.mode)),
        ("sweep_loads", format!("{loads:?}")),
        ("sweep_timing", format!("{:?}", cfg.timing)),
        ("sweep_max_error_rate", cfg.max_error_rate.to_string()),
        ("sweep_reuse_prompts", cfg.reuse_prompts.to_string()),
        (
            "sweep_max_lateness_ms",
            format!("{:?}", cfg.max_lateness_ms),
        ),
    ];
    ShardIdentity {
        shard: me,
        fingerprint: crate::config::run_fingerprint(&cfg.run, model, &extra),
        seed: cfg.run.load.seed,
        start_at: Some(start),
    }
}

/// A step's slot and how late the shard reached it.
struct Slot {
    at: StartAt,
    overran_ms: Option<f64>,
}

/// The `shard` block of one step (module docs). `flags` = (generator
/// limited, interrupted).
fn step_block(
    cfg: &SweepConfig,
    out: &EngineOutput,
    window: (Duration, Duration),
    slot: Slot,
    flags: (bool, bool),
) -> StepShard {
    let (w0, w1) = window;
    let in_window = live::due_in(&out.records, window);
    let start = clock::unix_s(out.started_at);
    let part = ShardPart {
        start_lateness_ms: Some((start - slot.at.unix_s()) * 1e3),
        window_start_unix_s: start + w0.as_secs_f64(),
        window_end_unix_s: start + w1.as_secs_f64(),
        counters: ShardCounters::from_records(&in_window, goodput_slo(&cfg.slos).as_ref()),
        hists: RunHists::from_records(&in_window),
        generator_limited: flags.0,
        interrupted: flags.1,
    };
    let steadiness = steady::assess(&out.records, window, &SteadyThresholds::default());
    StepShard {
        part,
        slot_start_unix_s: slot.at.unix_s(),
        overran_slot_ms: slot.overran_ms,
        steadiness,
        slo_attainment: cfg.slos.iter().map(|s| attainment(s, &in_window)).collect(),
    }
}

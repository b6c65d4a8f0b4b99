//! One live sweep step: its releases (seeded per step) and prompts (drawn
//! per step, [`super::prompts`]), running it while the server's queue gauges
//! are scraped and the generator checks itself, and turning the records into
//! the evidence the one step judge ([`crate::sweep::step`]) weighs.

use super::adaptive::{watch_step, Monitor};
use super::prompts::{self, Drawn, Which};
use super::Ctx;
use crate::client::scrape::QueueSample;
use crate::cmd::prepare::{self as runner, Level};
use crate::cmd::{cache_hits, gpu_power, spec_decode};
use crate::config::sweep::{StepTiming, SweepConfig};
use crate::engine::{self, probe, Releases};
use crate::metrics::health;
use crate::metrics::stats::{self, StatsOptions};
use crate::metrics::{RequestRecord, KNEECAP_PERCENTILES};
use crate::result::sweep::{StepPrompts, StepResult};
use crate::result::PrefixCacheStats;
use crate::schedule::{self, Arrival};
use crate::sweep::adaptive::{step_decision_with, AdaptiveRule};
use crate::sweep::confidence::DEFAULT_CONFIDENCE;
use crate::sweep::knee::LoadUnit;
use crate::sweep::prior::{self, StepPrior};
use crate::sweep::rows::{due_times, goodput_slo, mean};
use crate::sweep::step::{judge_step, Judged, StepCounts, StepDists, StepEvidence};
use crate::sweep::{slo, steady};
use rand::{rngs::StdRng, SeedableRng};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// An adaptive step runs at most this many times its minimum length (its
/// checkpoints: the minimum, twice it, the cap).
const ADAPTIVE_STRETCH: u32 = 4;
/// Queue gauge sampling period.
const SCRAPE_EVERY: Duration = Duration::from_millis(250);
/// Event-loop lag probe period.
const LAG_EVERY: Duration = Duration::from_millis(10);

/// Run one step at `load` and judge it. With `--confidence` (the default)
/// the step is adaptive: it is scheduled up to its cap and ends its releases
/// as soon as its verdict is decided ([`crate::sweep::adaptive`]).
pub(crate) async fn run_step(
    ctx: &Ctx<'_>,
    index: usize,
    load: f64,
    refining: bool,
    interrupt: watch::Receiver<bool>,
) -> anyhow::Result<Judged> {
    let cfg = ctx.cfg;
    let timing = match (refining, cfg.confidence) {
        (true, None) => cfg.timing.refined(),
        _ => cfg.timing.clone(),
    };
    let prefix_cache_reset = super::cache_reset::before_step(ctx).await;
    let StepLoad {
        releases,
        length,
        min_length,
        cap,
        drawn,
    } = StepLoad::plan(ctx, index, load, &timing);
    if let Some(live) = &ctx.live {
        let unit = crate::result::sweep::load_unit(cfg.run.sessions.is_some(), cfg.mode);
        live.begin(Some(index), Some(load), unit, Some(length));
    }
    let trusted = !ctx
        .twin_contradicted
        .load(std::sync::atomic::Ordering::Relaxed);
    let prior = match (&ctx.twin_prior, cfg.confidence) {
        (Some(model), Some(_)) if trusted => super::twin::step_prior(ctx, model, load).await,
        _ => None,
    };
    let (end_tx, end_rx) = watch::channel(false);
    let adaptive = cfg.confidence.map(|level| {
        let rule = adaptive_rule(cfg, &timing, (min_length, length), level, prior.clone());
        (Arc::new(Monitor::new(&cfg.slos)), rule, end_tx)
    });
    let row = drawn.row;
    let level = Level {
        releases,
        specs: drawn.specs,
        sessions: drawn.sessions,
        max_concurrency: cap,
        cancel_at: Some(length + timing.drain),
        watch: adaptive.as_ref().map(|(monitor, _, _)| engine::Watch {
            observer: monitor.clone(),
            end_releases: end_rx,
            drain: timing.drain,
        }),
    };
    let tests = adaptive.as_ref().map_or(1, |(_, rule, _)| rule.tests());
    let m = measure(ctx, level, adaptive, interrupt).await?;
    let end = m.out.releases_ended_at.unwrap_or(length);
    let evidence = Evidence {
        records: &m.out.records,
        window: (timing.warmup, end.max(timing.warmup)),
        queue: m.queue,
        source: m.source,
        check: m.check,
        ended_early: m.out.releases_ended_at.is_some(),
        tests,
        prior: prior.as_ref(),
    };
    let mut judged = judge_records(cfg, load, evidence);
    let step = &mut judged.row;
    if cfg.run.output.save_detailed {
        step.due_times_s = due_times(&m.out.records);
    }
    if cfg.html.is_some() {
        step.latency_series = crate::result::series::latency_series(&m.out.records);
    }
    step.prefix_cache = m.prefix_cache;
    step.spec_decode = m.spec_decode;
    step.gpu = m.gpu.map(|g| with_work(g, &m.out.records));
    let sent = m.out.records.len();
    note_prompts(ctx, step, (row, prefix_cache_reset), sent);
    Ok(judged)
}

/// A step's releases, length (scheduled, and the minimum an adaptive step
/// runs), concurrency cap and prompts.
struct StepLoad {
    releases: Releases,
    length: Duration,
    min_length: Duration,
    cap: Option<usize>,
    drawn: Drawn,
}

impl StepLoad {
    /// Step `index` at `load`: its schedule, and its prompts (a trace-speed
    /// step's: the trace expanded for it).
    fn plan(ctx: &Ctx<'_>, index: usize, load: f64, timing: &StepTiming) -> Self {
        let cfg = ctx.cfg;
        // Checked before the first step (`sweep`), so present in trace mode.
        let trace = match cfg.mode {
            LoadUnit::TraceSpeed => super::trace::replayed(ctx).ok(),
            _ => None,
        };
        let min_length = match (cfg.mode, trace) {
            (LoadUnit::Rate, _) => timing.length_for_rate(load),
            (LoadUnit::TraceSpeed, Some((_, rate))) => timing.length_for_rate(load * rate),
            _ => timing.length_closed(),
        };
        // An adaptive step may stretch to ADAPTIVE_STRETCH times its minimum,
        // within --step-max-duration (a starved generator or a stalled server
        // never decides; it must not hold the sweep for the whole cap).
        let horizon = cfg.confidence.map(|_| {
            timing
                .max_total
                .min(min_length * ADAPTIVE_STRETCH)
                .max(min_length)
        });
        let Some((trace, _)) = trace else {
            let (releases, length, cap) = step_releases(cfg, timing, index, load, horizon);
            let drawn = prompts::draw(ctx, Which::Step(index));
            return StepLoad {
                releases,
                length,
                min_length,
                cap,
                drawn,
            };
        };
        let length = horizon.unwrap_or(min_length);
        let at = ctx.prompts.trace_index(index);
        let (releases, specs) = super::trace::step_level(ctx, trace, at, load, length);
        let row = ctx.prompts.trace_speed_row(cfg.run.dataset.seed, index);
        StepLoad {
            releases,
            length,
            min_length,
            cap: cfg.run.load.max_concurrency,
            drawn: Drawn {
                specs,
                sessions: None,
                row,
            },
        }
    }
}

/// Record which prompts the step sent and whether the server's prefix
/// cache was dropped before it, and warn (on stderr and in the step) when
/// a workload with no designed sharing found many of them cached; `sent`
/// is how many requests the step sent.
pub(crate) fn note_prompts(
    ctx: &Ctx<'_>,
    step: &mut StepResult,
    (row, reset): (StepPrompts, bool),
    sent: usize,
) {
    step.prompts = Some(row);
    step.prefix_cache_reset = reset;
    if let Some(w) = ctx.prompts.hit_warning(step, sent) {
        let unit = crate::result::sweep::load_unit(ctx.cfg.run.sessions.is_some(), ctx.cfg.mode);
        super::say(
            ctx,
            format!("kneecap sweep: warning: step at {} {unit}: {w}", step.load),
        );
        step.cache_warning = Some(w);
    }
}

/// What running one step left: the engine's records, the generator's
/// self-check and the server's queue gauges.
pub(crate) struct Measured {
    pub(crate) out: engine::EngineOutput,
    pub(crate) check: probe::SelfCheck,
    pub(crate) source: Option<String>,
    pub(crate) queue: Vec<QueueSample>,
    /// The server's prefix-cache hit rate over the step.
    pub(crate) prefix_cache: Option<PrefixCacheStats>,
    /// The server's speculative decoding over the step.
    pub(crate) spec_decode: Option<crate::result::SpecDecodeStats>,
    /// The GPUs' power and energy over the step (`--gpu-metrics-url`).
    pub(crate) gpu: Option<crate::result::GpuStats>,
}

/// An adaptive step's observer, rule and the sender that ends its releases.
pub(crate) type Adaptive = (Arc<Monitor>, AdaptiveRule, watch::Sender<bool>);

/// Run one load level while scraping the server's queue gauges (and, for
/// an adaptive step, watching for its verdict); an error when the server
/// refused the level's first requests ([`runner::run_level`]).
pub(crate) async fn measure(
    ctx: &Ctx<'_>,
    mut level: Level,
    adaptive: Option<Adaptive>,
    interrupt: watch::Receiver<bool>,
) -> anyhow::Result<Measured> {
    if let Some(live) = &ctx.live {
        level.watch = live.observe(level.watch.take());
    }
    let (stop_tx, stop_rx) = watch::channel(false);
    let watcher = async {
        match adaptive {
            Some((monitor, rule, end)) => {
                watch_step(monitor, rule, ctx.cfg.slos.clone(), end, stop_rx.clone()).await
            }
            None => None,
        }
    };
    let cache_before = cache_hits::counters(ctx.scraper.as_ref()).await;
    let spec_before = spec_decode::reading(ctx.scraper.as_ref()).await;
    let gpu = gpu_power::start(ctx.gpu.as_ref());
    let t0 = Instant::now();
    let scrape = async {
        match &ctx.scraper {
            Some(s) => s.series(t0, SCRAPE_EVERY, stop_rx.clone()).await,
            None => (None, Vec::new()),
        }
    };
    let progress = runner::progress_bar(ctx.cfg.run.output.progress, &level.releases);
    let run = async {
        let level = runner::run_level(&ctx.prepared, level, progress, interrupt);
        let out = probe::self_checked(level, LAG_EVERY).await;
        let _ = stop_tx.send(true);
        out
    };
    let ((out, check), (source, queue), _last_look) = tokio::join!(run, scrape, watcher);
    let gpu = gpu_power::finish(gpu).await;
    let out = out?;
    let prefix_cache = cache_hits::since(ctx.scraper.as_ref(), cache_before, &out.records).await;
    let spec_decode = spec_decode::since(ctx.scraper.as_ref(), spec_before.as_ref()).await;
    Ok(Measured {
        out,
        check,
        source: source.map(|s| format!("{s:?}").to_lowercase()),
        queue,
        prefix_cache,
        spec_decode,
        gpu,
    })
}

/// The step's GPU energy over every output token and request it completed
/// (the warm-up's and the drain's too: the energy covers the whole step).
fn with_work(
    g: crate::result::GpuStats,
    records: &[crate::metrics::RequestRecord],
) -> crate::result::GpuStats {
    let ok = records.iter().filter(|r| r.is_ok());
    let tokens: u64 = ok.clone().map(|r| u64::from(r.output_tokens)).sum();
    g.with_work(tokens, ok.count() as u64)
}

/// Releases for one step: a Poisson/gamma schedule at `load` req/s, or a
/// closed loop of `load` streams, for the step's minimum length or up to
/// `horizon` (an adaptive step's cap). Seeded per step so reruns are identical.
pub(crate) fn step_releases(
    cfg: &SweepConfig,
    timing: &StepTiming,
    index: usize,
    load: f64,
    horizon: Option<Duration>,
) -> (Releases, Duration, Option<usize>) {
    match cfg.mode {
        LoadUnit::Rate => {
            let length = horizon.unwrap_or_else(|| timing.length_for_rate(load));
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
        // Built by `trace::step_level` instead (never reached).
        LoadUnit::TraceSpeed => (
            Releases::Scheduled(Vec::new()),
            horizon.unwrap_or_default(),
            None,
        ),
        LoadUnit::Concurrency => {
            let length = horizon.unwrap_or_else(|| timing.length_closed());
            (
                Releases::ClosedFor(length),
                length,
                Some(load.round().max(1.0) as usize),
            )
        }
    }
}

/// An adaptive step's rule: its window, minimum, cap, level and the twin's
/// prior on its verdict.
fn adaptive_rule(
    cfg: &SweepConfig,
    timing: &StepTiming,
    (min_length, cap): (Duration, Duration),
    level: f64,
    prior: Option<StepPrior>,
) -> AdaptiveRule {
    AdaptiveRule {
        window_start: timing.warmup,
        min_length,
        min_requests: match cfg.mode {
            LoadUnit::Rate | LoadUnit::TraceSpeed => timing.min_requests,
            LoadUnit::Concurrency => 0,
        },
        cap,
        level,
        prior,
    }
}

/// What a step left behind.
pub(crate) struct Evidence<'a> {
    pub(crate) records: &'a [RequestRecord],
    pub(crate) window: (Duration, Duration),
    pub(crate) queue: Vec<QueueSample>,
    pub(crate) source: Option<String>,
    pub(crate) check: probe::SelfCheck,
    /// An adaptive step ended its releases early, decided.
    pub(crate) ended_early: bool,
    /// How many tests an adaptive step's confidences are corrected for
    /// ([`AdaptiveRule::tests`]; 1 otherwise).
    pub(crate) tests: usize,
    /// The twin's prior on the verdict ([`crate::sweep::prior`]).
    pub(crate) prior: Option<&'a StepPrior>,
}

/// Judge a step from its records: the window's stats, SLOs, steadiness and
/// generator health become [`StepEvidence`] for the one step judge.
pub(crate) fn judge_records(cfg: &SweepConfig, load: f64, e: Evidence<'_>) -> Judged {
    let (w0, w1) = e.window;
    let in_window = due_in(e.records, e.window);
    let opts = StatsOptions {
        percentiles: KNEECAP_PERCENTILES.to_vec(),
        goodput: goodput_slo(&cfg.slos),
    };
    let summary = stats::summarize(&in_window, w1 - w0, &opts);
    let steadiness = steady::assess(e.records, e.window, &steady::SteadyThresholds::default());
    // A trace's arrivals are its own (bursty): its offered rate is what the
    // window saw, like a closed loop's.
    let offered = match cfg.mode {
        LoadUnit::Rate => load,
        LoadUnit::Concurrency | LoadUnit::TraceSpeed => steadiness.offered_rate,
    };
    let (cpu, lag_p99) = (e.check.cpu_busy_fraction, e.check.lag_p99_ms());
    let bound = cfg
        .max_lateness_ms
        .unwrap_or_else(|| health::lateness_bound_ms(offered));
    let evidence = StepEvidence {
        load,
        window: e.window,
        counts: counts(&in_window, &summary),
        // Every request due in the window: a failed one is a miss (`slo`).
        slo_outcomes: cfg
            .slos
            .iter()
            .map(|s| slo::evaluate(s, &in_window))
            .collect(),
        steadiness,
        generator: health::generator_health_with_bound(
            &health::judged_lateness(&in_window),
            bound,
            cpu,
            lag_p99,
        )
        .with_scheduling_delay(scheduling_delay_p99(&summary)),
        dists: StepDists {
            ttft: summary.ttft,
            tpot: summary.tpot,
            itl: summary.itl,
            e2el: summary.e2el,
            ttft_from_due: summary.ttft_from_due,
            lateness: summary.lateness,
        },
        queue: e.queue,
        queue_source: e.source,
        cpu_busy_fraction: cpu,
        event_loop_lag_p99_ms: lag_p99,
        confidence: cfg.confidence.map(|level| {
            (
                level,
                step_decision_with(&cfg.slos, &in_window, level, e.tests, e.prior).2,
            )
        }),
        ended_early: e.ended_early,
        twin_prior: e.prior.map(|p| {
            let level = cfg.confidence.unwrap_or(DEFAULT_CONFIDENCE);
            prior::row(p, &prior::weigh(&cfg.slos, &in_window, level, Some(p)).1)
        }),
        ..StepEvidence::default()
    };
    judge_step(evidence, cfg.max_error_rate)
}

/// A window's counts and rates from its records and their summary.
fn counts(in_window: &[RequestRecord], summary: &stats::Summary) -> StepCounts {
    let ok = || in_window.iter().filter(|r| r.is_ok());
    StepCounts {
        n_requests: in_window.len(),
        completed: summary.completed,
        failed: summary.failed,
        goodput: summary
            .request_goodput
            .unwrap_or(summary.request_throughput),
        output_token_rate: summary.output_throughput,
        mean_input_tokens: mean(ok().map(|r| r.prompt_len as f64)),
        mean_output_tokens: mean(ok().map(|r| r.output_tokens as f64)),
        errors_by_kind: summary.errors_by_kind.clone(),
        first_errors: in_window
            .iter()
            .filter_map(|r| r.error.as_ref())
            .take(5)
            .map(|x| x.message.clone()) // redacted by the client at the source
            .collect(),
    }
}

/// The records due in the measurement window (warm-up and drain excluded).
pub(super) fn due_in(
    records: &[RequestRecord],
    (w0, w1): (Duration, Duration),
) -> Vec<RequestRecord> {
    records
        .iter()
        .filter(|r| r.due >= w0 && r.due < w1)
        .cloned()
        .collect()
}

/// The client scheduling delay p99 (ms) when some request was kernel-stamped.
fn scheduling_delay_p99(s: &stats::Summary) -> Option<f64> {
    let d = &s.stamps.scheduling_delay;
    (s.stamps.kernel > 0)
        .then(|| d.percentile_ms(99.0))
        .flatten()
}

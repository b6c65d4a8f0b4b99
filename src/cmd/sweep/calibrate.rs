//! The live calibration probe: run the closed-loop levels the pure probe
//! ([`crate::sweep::calibrate`]) asks for, within its time budget, and turn
//! its μ into the search plan's start (or fall back to the doubling search).

use super::prompts::{self, Which};
use super::Ctx;
use crate::cmd::prepare::{self as runner, Level};
use crate::engine::Releases;
use crate::metrics::ErrorKind;
use crate::result::sweep::{CalibrationRow, ProbeLevelRow};
use crate::sweep::calibrate::{
    departure_rate, next_probe, steady_latency, ProbeEnd, ProbeLevel, ProbeStep,
};
use crate::sweep::knee::SearchPlan;
use indicatif::ProgressBar;
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// What the probe found: how it ended, μ, its levels and how long it took.
type Probed = (ProbeEnd, Option<f64>, Vec<ProbeLevel>, Duration);

/// Run the probe within `budget`; `None` when interrupted, an error when the
/// server refused its first requests ([`runner::run_level`]).
pub(super) async fn calibrate(
    ctx: &Ctx<'_>,
    budget: Duration,
    interrupt: watch::Receiver<bool>,
) -> anyhow::Result<Option<Probed>> {
    let t0 = Instant::now();
    let max_streams = match ctx.cfg.plan {
        SearchPlan::Auto { max_load, .. } => (max_load.ceil() as usize).clamp(1, 4096),
        SearchPlan::List(_) => 4096,
    };
    let mut levels: Vec<ProbeLevel> = Vec::new();
    loop {
        match next_probe(&levels, t0.elapsed(), budget, max_streams) {
            ProbeStep::Done { end, mu } => return Ok(Some((end, mu, levels, t0.elapsed()))),
            ProbeStep::Run {
                concurrency,
                length,
            } => {
                // The level's drain never runs past the budget.
                let left = budget.saturating_sub(t0.elapsed());
                // Each probe level draws its own prompts, none a step's.
                let drawn = prompts::draw(ctx, Which::Probe(levels.len()));
                let level = Level {
                    releases: Releases::ClosedFor(length),
                    specs: drawn.specs,
                    sessions: drawn.sessions,
                    max_concurrency: Some(concurrency),
                    cancel_at: Some(left.max(length)),
                    watch: None,
                };
                let started = Instant::now();
                let out = runner::run_level(
                    &ctx.prepared,
                    level,
                    ProgressBar::hidden(),
                    interrupt.clone(),
                )
                .await?;
                if out.interrupted {
                    return Ok(None);
                }
                levels.push(summarize(
                    concurrency,
                    &out.records,
                    started.elapsed(),
                    length,
                ));
            }
        }
    }
}

fn summarize(
    concurrency: usize,
    records: &[crate::metrics::RequestRecord],
    took: Duration,
    length: Duration,
) -> ProbeLevel {
    let ends: Vec<Duration> = records
        .iter()
        .filter(|r| r.is_ok())
        .filter_map(|r| r.last_token)
        .collect();
    let e2el: Vec<f64> = records
        .iter()
        .filter(|r| r.is_ok())
        .filter_map(|r| r.last_token.map(|t| t.saturating_sub(r.sent).as_secs_f64()))
        .collect();
    let visits: Vec<(Duration, Duration)> = records
        .iter()
        .filter(|r| r.is_ok())
        .filter_map(|r| r.last_token.map(|t| (r.sent, t)))
        .collect();
    let completed = e2el.len();
    ProbeLevel {
        concurrency,
        completed,
        failed: records
            .iter()
            .filter(|r| {
                r.error
                    .as_ref()
                    .is_some_and(|e| e.kind != ErrorKind::Cancelled)
            })
            .count(),
        // Cancelled: still unanswered when the budget ran out (the level's
        // drain lasts to the end of the budget).
        stuck: records
            .iter()
            .filter(|r| {
                r.error
                    .as_ref()
                    .is_some_and(|e| e.kind == ErrorKind::Cancelled)
            })
            .count(),
        mean_e2el_s: (completed > 0).then(|| e2el.iter().sum::<f64>() / completed as f64),
        duration_s: took.as_secs_f64(),
        departure_rate: departure_rate(&ends, length),
        steady_e2el_s: steady_latency(&visits),
    }
}

/// The probe as the sweep JSON records it.
pub(super) fn row(
    end: ProbeEnd,
    mu: Option<f64>,
    levels: &[ProbeLevel],
    took: Duration,
    start_load: f64,
) -> CalibrationRow {
    CalibrationRow {
        levels: levels
            .iter()
            .map(|l| ProbeLevelRow {
                concurrency: l.concurrency,
                completed: l.completed,
                failed: l.failed,
                stuck: l.stuck,
                mean_e2el_ms: l.mean_e2el_s.map(|s| s * 1000.0),
                throughput: l.throughput(),
                duration_s: l.duration_s,
            })
            .collect(),
        end: serde_json::to_value(end)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default(),
        service_rate: mu,
        start_load,
        duration_s: took.as_secs_f64(),
    }
}

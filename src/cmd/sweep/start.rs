//! The start of a live sweep: the empty [`SweepResult`] with its workload
//! (and the simulator's computed μ when the target is the simulator), and
//! the line that announces the sweep on stderr.

use super::Ctx;
use crate::config::sweep::SweepConfig;
use crate::result::sweep::{self as model, SweepResult};
use crate::sweep::knee::LoadUnit;

pub(super) fn new_result(ctx: &Ctx<'_>) -> SweepResult {
    let cfg = ctx.cfg;
    let specs = &ctx.prepared.specs;
    let n = specs.len().max(1) as f64;
    // The simulator's μ is for single requests; a session's turns differ.
    let sim_config = ctx
        .server
        .sim_config
        .as_ref()
        .filter(|_| cfg.run.sessions.is_none());
    let sim_service_rate = sim_config.map(|s| {
        let (i, o) = (
            specs.iter().map(|s| s.prompt_len as f64).sum::<f64>() / n,
            specs.iter().map(|s| s.output_len as f64).sum::<f64>() / n,
        );
        crate::sim::service_rate(s, i.round() as u32, o.round() as u32)
    });
    SweepResult {
        kind: model::KIND.into(),
        schema_version: model::SCHEMA_VERSION,
        kneecap_version: env!("CARGO_PKG_VERSION").into(),
        started_at: chrono::Local::now().to_rfc3339(),
        workload: model::Workload {
            target: ctx.server.base_url.clone(),
            endpoint: cfg.run.endpoint.clone(),
            model: ctx.prepared.served_model.clone(),
            dataset: cfg.run.dataset_name.into(),
            mean_input_tokens: specs.iter().map(|s| s.prompt_len as f64).sum::<f64>() / n,
            mean_output_tokens: specs.iter().map(|s| s.output_len as f64).sum::<f64>() / n,
            arrival: arrival_name(cfg),
            burstiness: cfg.run.load.burstiness,
            seed: cfg.run.load.seed,
            step_warmup_s: cfg.timing.warmup.as_secs_f64(),
            step_min_duration_s: cfg.timing.min_measured.as_secs_f64(),
            step_min_requests: cfg.timing.min_requests,
            sessions: cfg.run.sessions.as_ref().map(session_shape),
        },
        server: ctx.prepared.server.clone(),
        slos: cfg.slos.iter().map(|s| s.to_string()).collect(),
        max_error_rate: cfg.max_error_rate,
        mode: cfg.mode,
        simulated: ctx.server.simulated,
        sim_service_rate,
        ..Default::default()
    }
}

/// "2-4 turns, think 500 ms (exponential)".
fn session_shape(sc: &crate::config::SessionConfig) -> String {
    use crate::workload::session::ThinkTime;
    let t = sc.params.turns;
    let turns = if t.min == t.max {
        format!("{} turns", t.max)
    } else {
        format!("{}-{} turns", t.min, t.max)
    };
    let think = match sc.params.think {
        ThinkTime::Fixed(d) => format!("think {} ms", d.as_millis()),
        ThinkTime::Exponential(d) => format!("think {} ms (exponential)", d.as_millis()),
    };
    format!("{turns}, {think}")
}

fn arrival_name(cfg: &SweepConfig) -> String {
    if cfg.run.sessions.is_some() {
        return match cfg.mode {
            LoadUnit::Concurrency => "multi-turn sessions, closed loop (users)".into(),
            LoadUnit::Rate | LoadUnit::TraceSpeed => format!(
                "multi-turn sessions, {} session starts",
                if cfg.run.load.burstiness == 1.0 {
                    "poisson".to_string()
                } else {
                    format!("gamma (burstiness {})", cfg.run.load.burstiness)
                }
            ),
        };
    }
    match cfg.mode {
        LoadUnit::Concurrency => "closed loop (fixed concurrency)".into(),
        LoadUnit::Rate if cfg.run.load.burstiness.is_infinite() => "constant spacing".into(),
        LoadUnit::Rate if cfg.run.load.burstiness == 1.0 => "poisson".into(),
        LoadUnit::Rate => format!("gamma (burstiness {})", cfg.run.load.burstiness),
        LoadUnit::TraceSpeed => "the trace's own timestamps, sped up per step".into(),
    }
}

pub(super) fn announce(ctx: &Ctx<'_>, r: &SweepResult) {
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

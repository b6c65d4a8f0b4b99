//! `sweep --twin FILE` / `sweep --predict`: the twin's knee for this sweep's
//! workload and SLOs (a server profile, read or measured now within
//! `--twin-budget`, run in virtual time), the search opened at the
//! prediction's interval ends, and the prediction kept for the result.

use super::{say, Ctx};
use crate::cmd::clock;
use crate::config::sweep::{TwinPlan, TwinSource};
use crate::result::sweep::{StepResult, SweepResult};
use crate::result::twin::Backing;
use crate::result::twin::TwinKnee;
use crate::sim::virtual_time::VirtualLoad;
use crate::sim::ModelParams;
use crate::sweep::knee::SearchPlan;
use crate::sweep::prior::StepPrior;
use crate::twin::knee::{needs_token_times, TruthConfig};
use crate::twin::predict::{distinct_corners, predict, PredictConfig, Prediction};
use crate::twin::profile::Status;
use crate::twin::ServerProfile;
use crate::workload::dataset::DatasetKind;
use crate::workload::Prompt;
use anyhow::Result;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::Instant;
use tokio::sync::watch;

/// The virtual-time search's size: a quarter of `kneecap predict`'s default
/// requests and twice its bracket (the prediction takes about a quarter of
/// the CPU time; the seeds' wider spread widens the interval, honestly); the
/// steps' own statistics are coarser than either.
const REQUESTS: usize = 5_000;
const WARMUP: usize = 500;
const SEEDS: u64 = 3;
const PRECISION: f64 = 0.005;

/// The twin a sweep's steps take their prior from ([`crate::sweep::prior`]):
/// the prediction's central parameters, workload, SLOs and seeds, its
/// corners, and the prior's weight.
#[derive(Debug, Clone)]
pub(crate) struct PriorModel {
    truth: TruthConfig,
    corners: Vec<ModelParams>,
    weight: usize,
}

/// With `--twin` / `--predict`: predict, announce and save the prediction
/// before the first step (the sweep is marked interrupted when a signal
/// came while profiling). Returns the twin the steps' priors come from:
/// `None` without a twin, with `--twin-prior-weight 0`, for a fixed-length
/// (non-adaptive) sweep, or when the profile flagged a misfit (the model
/// is off there, so its word counts for nothing).
pub(super) async fn predict_first(
    ctx: &Ctx<'_>,
    result: &mut SweepResult,
    out: &Path,
    interrupt: watch::Receiver<bool>,
) -> Result<Option<PriorModel>> {
    let Some(t) = &ctx.cfg.twin else {
        return Ok(None);
    };
    match predicted(ctx, t, out, interrupt).await? {
        Some((mut k, model)) => {
            let model = prior_model(ctx, t, model);
            if let Some(m) = &model {
                open_clear(ctx, m, &mut k).await;
            }
            say(ctx, line(&k));
            if model.is_some() {
                say(ctx, format!("kneecap sweep: each step's verdict also weighs the twin's prediction at its load as {} samples (SIMULATED; only where the step's own samples lean the same way, and no more once a step's samples contradict the twin)", t.prior_weight));
            }
            result.prediction = Some(k);
            super::save(result, out)?;
            Ok(model)
        }
        None => {
            result.interrupted = true;
            Ok(None)
        }
    }
}

/// The steps' prior, when the sweep takes one; says why not when the
/// profile's misfit rules it out.
fn prior_model(ctx: &Ctx<'_>, t: &TwinPlan, cfg: PredictConfig) -> Option<PriorModel> {
    if t.prior_weight == 0 || ctx.cfg.confidence.is_none() {
        return None;
    }
    if cfg.misfit.is_some() {
        say(ctx, "kneecap sweep: the profile flagged a misfit, so the steps are judged on their samples alone (no twin prior)".into());
        return None;
    }
    Some(PriorModel {
        truth: cfg.truth,
        corners: cfg.corners,
        weight: t.prior_weight,
    })
}

/// With a prior, the search opens at the twin-clear loads outside the
/// predicted interval ([`crate::twin::prior::clear_loads`]), where the
/// prior leans clearly; at the interval's own ends it is silent. Kept as
/// it was when either end is not found.
async fn open_clear(ctx: &Ctx<'_>, model: &PriorModel, k: &mut TwinKnee) {
    let (m, interval) = (model.clone(), (k.low_req_s, k.high_req_s));
    let found = tokio::task::spawn_blocking(move || {
        crate::twin::prior::clear_loads(&m.truth, &m.corners, interval)
    })
    .await;
    match found.map_err(|e| e.to_string()).and_then(|r| r) {
        Ok((Some(pass), Some(fail))) => k.opening = vec![round_load(pass), round_load(fail)],
        Ok(_) => say(ctx, "kneecap sweep: the twin found no load where it clearly passes and one where it clearly fails; the search opens at the predicted interval".into()),
        Err(e) => say(ctx, format!("kneecap sweep: the twin's clear loads: {e}")),
    }
}

/// After a step: when its samples contradicted the twin on some SLO, the
/// twin is off for this server or workload, and later steps are judged on
/// their samples alone (said once).
pub(super) fn note_contradiction(ctx: &Ctx<'_>, step: &StepResult) {
    if contradicts(step) && !ctx.twin_contradicted.swap(true, Ordering::Relaxed) {
        say(
            ctx,
            format!(
                "kneecap sweep: the step at {} contradicted the twin's prediction; later steps are judged on their samples alone",
                step.load
            ),
        );
    }
}

/// Whether a step's samples leaned against the twin on some SLO.
fn contradicts(step: &StepResult) -> bool {
    step.decision
        .as_ref()
        .and_then(|d| d.twin_prior.as_ref())
        .is_some_and(|p| {
            p.slos
                .iter()
                .flatten()
                .any(|s| s.backing == Backing::Contradicted)
        })
}

/// The twin's prior on a step at `load`, run off the runtime's threads;
/// `None` (said on stderr) when the model cannot run it.
pub(super) async fn step_prior(ctx: &Ctx<'_>, model: &PriorModel, load: f64) -> Option<StepPrior> {
    let m = model.clone();
    let got = tokio::task::spawn_blocking(move || {
        crate::twin::prior::step_prior(&m.truth, &m.corners, load, m.weight)
    })
    .await;
    match got.map_err(|e| e.to_string()).and_then(|r| r) {
        Ok(p) => Some(p),
        Err(e) => {
            say(ctx, format!("kneecap sweep: no twin prior at {load}: {e}"));
            None
        }
    }
}

/// The twin's prediction for the sweep and the model it ran (`None`:
/// interrupted while profiling).
async fn predicted(
    ctx: &Ctx<'_>,
    twin: &TwinPlan,
    out: &Path,
    interrupt: watch::Receiver<bool>,
) -> Result<Option<(TwinKnee, PredictConfig)>> {
    if ctx
        .prepared
        .specs
        .iter()
        .any(|s| matches!(s.prompt, Prompt::Media(_)))
    {
        anyhow::bail!("--twin/--predict predict text prompts; the twin does not model image tokens yet: drop the rows' \"images\" or the flag");
    }
    let started = Instant::now();
    let (profile, source, written) = match &twin.source {
        TwinSource::File(path) => (
            crate::cmd::args::sim::load_profile(path, "--twin")?,
            format!("profile {}", path.display()),
            None,
        ),
        TwinSource::Measure(budget) => {
            say(
                ctx,
                format!(
                    "kneecap sweep: profiling the server first (--predict, within {:.0} s)...",
                    budget.as_secs_f64()
                ),
            );
            let p = crate::cmd::profile::measure(
                &ctx.cfg.run,
                ctx.server,
                *budget,
                ctx.cfg.metrics_url.clone(),
                interrupt.clone(),
            )
            .await?;
            if *interrupt.borrow() {
                return Ok(None);
            }
            let path = profile_path(out);
            crate::report::save::write_atomic(&path, p.to_json().as_bytes())?;
            let source = format!("profiled now ({:.1} s)", started.elapsed().as_secs_f64());
            (p, source, Some((path, started.elapsed().as_secs_f64())))
        }
    };
    let cfg = predict_config(ctx, &profile);
    let kept = cfg.clone();
    let (wall0, cpu0) = (Instant::now(), clock::cpu_seconds());
    let p = tokio::task::spawn_blocking(move || predict(&cfg))
        .await?
        .map_err(|e| anyhow::anyhow!("kneecap sweep: the twin's prediction failed: {e}"))?;
    let wall_s = wall0.elapsed().as_secs_f64();
    let cpu_s = match (cpu0, clock::cpu_seconds()) {
        (Some(a), Some(b)) => b - a,
        _ => wall_s,
    };
    let tolerance = match &ctx.cfg.plan {
        SearchPlan::Auto { tolerance, .. } => *tolerance,
        SearchPlan::List(_) => 0.0,
    };
    let mut k = knee_of(p, source, written, (cpu_s, wall_s), tolerance);
    let seqs = &profile.params.max_num_seqs;
    k.max_num_seqs = matches!(seqs.status, Status::Measured | Status::Reported)
        .then_some(seqs.value.round() as u32);
    Ok(Some((k, kept)))
}

/// The profile `--predict` writes: beside the sweep JSON, `NAME.profile.json`.
fn profile_path(out: &Path) -> PathBuf {
    out.with_extension("profile.json")
}

/// The prediction for the requests this sweep sends: their lengths (after
/// a shared prefix), arrival burstiness, SLOs; the profile's corners.
fn predict_config(ctx: &Ctx<'_>, profile: &ServerProfile) -> PredictConfig {
    let run = &ctx.cfg.run;
    let prefix = match run.dataset.kind {
        DatasetKind::Random { prefix_len, .. } => prefix_len,
        _ => 0,
    };
    let lengths: Vec<(u32, u32)> = ctx
        .prepared
        .specs
        .iter()
        .map(|s| (s.prompt_len.saturating_sub(prefix).max(1), s.output_len))
        .collect();
    let n = lengths.len().max(1) as f64;
    let mean = |f: fn(&(u32, u32)) -> u32| {
        (lengths.iter().map(|l| f64::from(f(l))).sum::<f64>() / n).round() as u32
    };
    let params = profile.params();
    let load = VirtualLoad {
        token_times: needs_token_times(&ctx.cfg.slos),
        lengths: lengths.clone(),
        shared_prefix: prefix,
        prefix_caching: profile.params.prefix_caching.enabled.unwrap_or(true),
        ..VirtualLoad::fixed(mean(|l| l.0), mean(|l| l.1), WARMUP, REQUESTS)
    };
    PredictConfig {
        truth: TruthConfig {
            params: params.clone(),
            load,
            slos: ctx.cfg.slos.clone(),
            range_ratio: (0.0, 0.0),
            burstiness: run.load.burstiness,
            seeds: (0..SEEDS).map(|k| run.load.seed.wrapping_add(k)).collect(),
            precision: PRECISION,
            tail: profile.host_stalls(),
        },
        corners: distinct_corners(&params, profile.corners().into_iter().map(|c| c.params)),
        moves: false,
        misfit: profile.misfit(),
    }
}

fn knee_of(
    p: Prediction,
    source: String,
    written: Option<(PathBuf, f64)>,
    (cpu_s, wall_s): (f64, f64),
    tolerance: f64,
) -> TwinKnee {
    let opening: Vec<f64> = opening(p.knee_req_s, (p.low_req_s, p.high_req_s), tolerance)
        .into_iter()
        .filter(|l| l.is_finite() && *l > 0.0)
        .map(round_load)
        .collect();
    TwinKnee {
        source,
        profile_path: written.as_ref().map(|(p, _)| p.display().to_string()),
        profile_s: written.map(|(_, s)| s),
        knee_req_s: p.knee_req_s,
        low_req_s: p.low_req_s,
        high_req_s: p.high_req_s,
        opening,
        explain: p.explain,
        cpu_s,
        wall_s,
        agreement: None,
        max_num_seqs: None,
    }
}

/// The first two loads: the predicted interval's ends, or, when the
/// interval is narrower than the search's tolerance, the loads spanning
/// the tolerance around the predicted knee (geometrically): the search could
/// not tell closer loads apart within its stop rule, and loads nearer the
/// knee take longer to decide.
fn opening(knee: f64, (low, high): (f64, f64), tolerance: f64) -> [f64; 2] {
    if low > 0.0 && high / low >= 1.0 + tolerance {
        return [low, high];
    }
    let half = (1.0 + tolerance).sqrt();
    [knee / half, knee * half]
}

/// Loads to 3 significant digits (a step's load is printed and compared).
fn round_load(x: f64) -> f64 {
    let scale = 10f64.powi(2 - x.log10().floor() as i32);
    (x * scale).round() / scale
}

/// The search opened at the prediction's ends; without `--tolerance`, the
/// predicted interval's width (when wider than the default) ends it once
/// both ends are confirmed.
pub(super) fn opened_plan(plan: SearchPlan, k: &TwinKnee, twin: &TwinPlan) -> SearchPlan {
    let plan = plan.with_opening(k.opening.clone());
    let SearchPlan::Auto {
        tolerance,
        max_steps,
        ..
    } = plan
    else {
        return plan;
    };
    let (lo, hi) = (round_load(k.low_req_s), round_load(k.high_req_s));
    match twin.interval_tolerance && k.opening.len() == 2 && lo > 0.0 {
        true => {
            let width = (hi - lo) / lo * (1.0 + 1e-9);
            plan.with_stops(tolerance.max(width), max_steps)
        }
        false => plan,
    }
}

/// The stderr line announcing the prediction and the opening.
pub(super) fn line(k: &TwinKnee) -> String {
    let binds = k
        .explain
        .as_ref()
        .map_or(String::new(), |e| format!("; binds: {}", e.binds.label()));
    let opens = match k.opening.as_slice() {
        [] => "the search starts as without a twin".to_string(),
        loads => format!(
            "the search opens at {} req/s",
            loads
                .iter()
                .map(|l| format!("{l}"))
                .collect::<Vec<_>>()
                .join(" and ")
        ),
    };
    format!(
        "kneecap sweep: twin ({}; SIMULATED in virtual time, {:.1} CPU s): predicted knee {:.2} req/s ({:.2}–{:.2}){binds}; {opens}",
        k.source, k.cpu_s, k.knee_req_s, k.low_req_s, k.high_req_s
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sweep::knee::LoadUnit;

    #[test]
    fn a_narrow_interval_opens_at_the_tolerance_around_the_knee() {
        assert_eq!(opening(10.0, (9.0, 11.0), 0.10), [9.0, 11.0]);
        let [lo, hi] = opening(3.35, (3.29, 3.38), 0.10);
        assert!((hi / lo - 1.1).abs() < 1e-9 && (lo * hi - 3.35 * 3.35).abs() < 1e-9);
        // A knee of 0 (every rate failed in the model) opens nowhere.
        assert_eq!(opening(0.0, (0.0, 0.0), 0.10), [0.0, 0.0]);
    }

    #[test]
    fn a_step_contradicts_the_twin_only_when_one_slo_leaned_against_it() {
        use crate::result::sweep::{Decision, DecisionRow};
        use crate::result::twin::{SloPriorRow, StepPriorRow};
        let slo = |backing| {
            Some(SloPriorRow {
                share_over_low: 0.0,
                share_over_high: 0.001,
                backing,
            })
        };
        let step = |slos: Vec<Option<SloPriorRow>>| StepResult {
            decision: Some(DecisionRow {
                level: 0.9,
                decision: Decision::Pass,
                confidence: 0.95,
                samples: 100,
                effective_samples: 100,
                ended_early: true,
                twin_prior: Some(StepPriorRow { weight: 2000, slos }),
            }),
            ..StepResult::default()
        };
        assert!(contradicts(&step(vec![
            slo(Backing::Agrees),
            None,
            slo(Backing::Contradicted)
        ])));
        for quiet in [Backing::Agrees, Backing::TooFew, Backing::Silent] {
            assert!(!contradicts(&step(vec![slo(quiet), None])), "{quiet:?}");
        }
        assert!(
            !contradicts(&StepResult::default()),
            "no prior, nothing to contradict"
        );
    }

    #[test]
    fn loads_round_to_three_significant_digits() {
        assert_eq!(round_load(1.23456), 1.23);
        assert_eq!(round_load(42.149), 42.1);
        assert_eq!(round_load(0.012345), 0.0123);
    }

    #[test]
    fn without_a_tolerance_the_interval_width_ends_the_search_when_wider() {
        let k = TwinKnee {
            opening: vec![3.1, 3.7],
            low_req_s: 3.1,
            high_req_s: 3.7,
            ..TwinKnee::default()
        };
        let plan = || SearchPlan::auto(1.0, 100.0, LoadUnit::Rate);
        let widened = TwinPlan {
            source: TwinSource::Measure(std::time::Duration::from_secs(60)),
            interval_tolerance: true,
            prior_weight: 0,
        };
        let SearchPlan::Auto {
            tolerance, start, ..
        } = opened_plan(plan(), &k, &widened)
        else {
            panic!()
        };
        assert!((tolerance - 0.6 / 3.1).abs() < 1e-6, "{tolerance}");
        assert_eq!(start, 3.1);
        let given = TwinPlan {
            interval_tolerance: false,
            ..widened.clone()
        };
        let SearchPlan::Auto { tolerance, .. } = opened_plan(plan(), &k, &given) else {
            panic!()
        };
        assert_eq!(tolerance, 0.10, "an explicit --tolerance stands");
        // Opened at the twin-clear loads outside the interval: the
        // interval's width still sets the stop, not the opening's.
        let clear = TwinKnee {
            opening: vec![2.6, 4.4],
            ..k.clone()
        };
        let SearchPlan::Auto {
            tolerance, start, ..
        } = opened_plan(plan(), &clear, &widened)
        else {
            panic!()
        };
        assert!((tolerance - 0.6 / 3.1).abs() < 1e-6, "{tolerance}");
        assert_eq!(start, 2.6);
        let narrow = TwinKnee {
            opening: vec![3.1, 3.2],
            high_req_s: 3.2,
            ..k
        };
        let SearchPlan::Auto { tolerance, .. } = opened_plan(plan(), &narrow, &widened) else {
            panic!()
        };
        assert_eq!(tolerance, 0.10, "never narrower than the default");
    }
}

//! A predicted knee ([`Prediction`]): the knee search ([`super::knee`]) run
//! on the central parameters and on every corner of their uncertainty (a
//! server profile's parameter sets at the ends of each parameter's range).
//! The interval spans the central search's seeds and every corner's knee,
//! up to the rate each search found to fail above its knee; a corner's knee
//! is one seed's, so it carries chance as a seed does: the interval reaches
//! half the central seeds' spread beyond the corners.
//! The binding resource comes from the central search's median seed, and
//! "what moves it" from two more searches, at ±25% of the binding parameter;
//! when compute binds, six: ±25% of each compute parameter, and the one that
//! moves the knee most says whether prefill or decode compute binds.
//! For speed (issue 39) the corners and the moves are searched on runs a
//! tenth as long, of the first seed, each starting from the central
//! parameters' knee on those runs, and scaled to the central knee; the
//! central seeds and the corners run side by side ([`predict_from`]).
//! Also how many replicas serve a target rate ([`replicas`]). Pure.

use super::explain::{explain, explain_as, AtKnee, Knob};
use super::knee::{
    coarse, median_seed, par_map, seed_knee, true_knee_from, truth_of, Hint, KneeKind, SeedKnee,
    Truth, TruthConfig, HINT_STEP,
};
use crate::result::explain::{Binding, KneeExplain, MovedKnee, Moves};
use crate::sim::ModelParams;
use serde::{Deserialize, Serialize};

/// What to predict.
#[derive(Debug, Clone)]
pub struct PredictConfig {
    /// The search, with the central parameters in `truth.params`.
    pub truth: TruthConfig,
    /// Parameter sets at the ends of each parameter's uncertainty; empty when
    /// the parameters are taken as exact.
    pub corners: Vec<ModelParams>,
    /// Also find what moves the knee (two more searches; six when compute binds).
    pub moves: bool,
    /// The profile said the server departed from the model: the interval
    /// widens beyond the corners.
    pub misfit: Option<Misfit>,
}

/// A departure from the model that a server profile flagged (a residual
/// its fits could not explain). The parameters' ranges already cover it
/// within the model; the model itself may be off there too, so the
/// prediction's interval moves out by `widen` on each side.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Misfit {
    /// Each end of the interval moves out by this share (0.2: the low end
    /// × 0.8, the high end × 1.2).
    pub widen: f64,
    /// What the model did not explain, one line per flagged parameter.
    pub reasons: Vec<String>,
}

/// A predicted knee, in req/s of virtual time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Prediction {
    /// The central parameters' knee (the median over seeds).
    pub knee_req_s: f64,
    /// The interval's low end: the lowest seed knee, or the lowest corner
    /// knee less half the seeds' spread (a corner's knee is one seed's).
    pub low_req_s: f64,
    /// The interval's high end: where the highest seed or corner knee's
    /// search found the rate above it to fail (the knee lies below that,
    /// within the search's precision), a corner's plus half the seeds'
    /// spread.
    pub high_req_s: f64,
    /// How the central search ended (a knee, or beyond its bracket).
    pub kind: KneeKind,
    /// The computed capacity μ the search was bracketed from.
    pub mu_req_s: f64,
    /// The central knee's spread over seeds (low, high).
    pub seed_spread_req_s: (f64, f64),
    /// Each corner's knee (median over seeds), in the corners' order.
    pub corner_knees_req_s: Vec<f64>,
    /// Virtual-time runs in all.
    pub runs: usize,
    /// What binds the knee and what moves it.
    pub explain: Option<KneeExplain>,
    /// The profile's flagged departure from the model, which widened the
    /// interval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub misfit: Option<Misfit>,
}

/// Replicas that serve a target rate within the SLO.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Replicas {
    /// The rate to serve (req/s).
    pub target_req_s: f64,
    /// `ceil(target / knee)`; `None` when the knee is 0.
    pub replicas: Option<u64>,
    /// At the interval's high end.
    pub low: Option<u64>,
    /// At the interval's low end (`None` when it is 0).
    pub high: Option<u64>,
}

/// The corner parameter sets worth a search: those equal to the centre or
/// to an earlier corner dropped (an overridden parameter is exact, so its
/// corners collapse).
pub fn distinct_corners(
    centre: &ModelParams,
    corners: impl IntoIterator<Item = ModelParams>,
) -> Vec<ModelParams> {
    let mut out: Vec<ModelParams> = Vec::new();
    for p in corners {
        if p != *centre && !out.contains(&p) {
            out.push(p);
        }
    }
    out
}

/// Predicts the knee: the central search, one per corner, the explanation.
pub fn predict(cfg: &PredictConfig) -> Result<Prediction, String> {
    predict_from(cfg, None).map(|(p, _)| p)
}

/// [`predict`], its central search starting from `hint` when given (a
/// neighbouring shape's knee); also the hint its own knee gives.
///
/// When the runs are long enough, the first seed is searched first on runs
/// a tenth as long ([`coarse`]): that knee starts the central search's
/// seeds, and the corners (and the moves) are searched on those short runs
/// too, each starting from it; a corner's knee is the central knee scaled
/// by the corner's knee over the central one on the short runs (with the
/// same arrival gaps, a parameter moves every run length's knee alike).
pub fn predict_from(
    cfg: &PredictConfig,
    hint: Option<Hint>,
) -> Result<(Prediction, Option<Hint>), String> {
    let side = match coarse(&cfg.truth) {
        Some(c) => {
            let t = true_knee_from(&c, |_| hint)?;
            (t.median > 0.0 && kind_of(&t) == KneeKind::Knee).then_some((c, t))
        }
        None => None,
    };
    // Runs ten times longer move the knee by more than a step: no second
    // run at the short runs' failing rate.
    let central_hint = side
        .as_ref()
        .and_then(|(c, t)| Hint::from_truth(t, c.seeds[0], HINT_STEP))
        .map(|h| Hint {
            fails_at: None,
            ..h
        })
        .or(hint);
    let (central, corners) = match &side {
        Some((c, t)) => central_and_near(&cfg.truth, central_hint, c, &cfg.corners, t),
        None => {
            let central = true_knee_from(&cfg.truth, |_| central_hint)?;
            let corners = searches_near(&cfg.truth, &cfg.corners, &central, HINT_STEP);
            (Ok(central), corners)
        }
    };
    let central = central?;
    let near = match &side {
        Some((c, t)) => Near::new(c, t, central.median),
        None => Near::new(&cfg.truth, &central, central.median),
    };
    let mut runs = runs_of(&central) + side.as_ref().map_or(0, |(_, t)| runs_of(t));
    let mut corner_knees = Vec::with_capacity(cfg.corners.len());
    let mut high = central
        .seeds
        .iter()
        .map(fails_at)
        .fold(central.max, f64::max);
    let mut low = central.min;
    let chance = seed_chance(&central);
    for (i, corner) in corners.into_iter().enumerate() {
        let corner = corner.map_err(|e| format!("corner {} of the parameters: {e}", i + 1))?;
        runs += runs_of(&corner);
        let knee = corner.median * near.scale;
        corner_knees.push(knee);
        low = low.min(knee - chance);
        high = high.max(fails_at(median_seed(&corner)) * near.scale + chance);
    }
    let (explained, n) = explain_truth(&cfg.truth, &central, cfg.moves, &near);
    runs += n;
    let widen = cfg.misfit.as_ref().map_or(0.0, |m| m.widen.clamp(0.0, 1.0));
    let low = low.max(0.0) * (1.0 - widen);
    let high = high * (1.0 + widen);
    let next = Hint::from_truth(&central, median_seed(&central).seed, HINT_STEP);
    let p = Prediction {
        knee_req_s: central.median,
        low_req_s: low,
        high_req_s: high,
        kind: kind_of(&central),
        mu_req_s: central.mu,
        seed_spread_req_s: (central.min, central.max),
        corner_knees_req_s: corner_knees,
        runs,
        explain: explained,
        misfit: cfg.misfit.clone(),
    };
    Ok((p, next))
}

/// Where the searches beside the central one (corners, moves) run: their
/// configuration, the knee they start from, and the factor from their knee
/// to the central search's.
struct Near<'a> {
    cfg: &'a TruthConfig,
    truth: &'a Truth,
    scale: f64,
}

impl<'a> Near<'a> {
    fn new(cfg: &'a TruthConfig, truth: &'a Truth, central: f64) -> Self {
        let scale = if truth.median > 0.0 {
            central / truth.median
        } else {
            1.0
        };
        Near { cfg, truth, scale }
    }
}

/// The central search (from `hint`) and each of `sets` on the short runs
/// `near_cfg` (from `near`), all at once.
fn central_and_near(
    central: &TruthConfig,
    hint: Option<Hint>,
    near_cfg: &TruthConfig,
    sets: &[ModelParams],
    near: &Truth,
) -> (Result<Truth, String>, Vec<Result<Truth, String>>) {
    let mut configs = vec![central.clone()];
    configs.extend(with_params(near_cfg, sets));
    let mut jobs: Vec<(usize, u64, Option<Hint>)> =
        central.seeds.iter().map(|&s| (0, s, hint)).collect();
    jobs.extend(near_jobs(near_cfg, 1..configs.len(), near, HINT_STEP));
    let mut found = run_all(&configs, &jobs).into_iter();
    let mut all = configs.iter().enumerate().map(|(i, cfg)| {
        let n = if i == 0 {
            central.seeds.len()
        } else {
            near_cfg.seeds.len()
        };
        let seeds: Result<Vec<_>, String> = found.by_ref().take(n).collect();
        seeds.map(|s| truth_of(cfg, s))
    });
    let first = all
        .next()
        .unwrap_or_else(|| Err("no central search".into()));
    (first, all.collect())
}

/// `base` with each of `sets` as its parameters.
fn with_params(base: &TruthConfig, sets: &[ModelParams]) -> Vec<TruthConfig> {
    sets.iter()
        .map(|params| TruthConfig {
            params: params.clone(),
            ..base.clone()
        })
        .collect()
}

/// One job per seed of `base` for each configuration in `range`, each
/// starting from the same seed's knee in `near`; a step of at most
/// [`HINT_STEP`] expects the knee to stay close, and runs `near`'s failing
/// rate second.
fn near_jobs(
    base: &TruthConfig,
    range: std::ops::Range<usize>,
    near: &Truth,
    step: f64,
) -> Vec<(usize, u64, Option<Hint>)> {
    let hint = |seed| {
        Hint::from_truth(near, seed, step).map(|h| Hint {
            fails_at: h.fails_at.filter(|_| step <= HINT_STEP),
            ..h
        })
    };
    range
        .flat_map(|i| base.seeds.iter().map(move |&seed| (i, seed, hint(seed))))
        .collect()
}

/// Every `(configuration, seed, hint)` search, in parallel, in order.
fn run_all(
    configs: &[TruthConfig],
    jobs: &[(usize, u64, Option<Hint>)],
) -> Vec<Result<SeedKnee, String>> {
    par_map(jobs, |&(i, seed, hint)| seed_knee(&configs[i], seed, hint))
}

/// The search of `base` with each of `sets` as its parameters, every seed
/// starting from the same seed's knee in `near` (a step of `step` out);
/// all (set, seed) searches in parallel. One result per set, in order.
pub fn searches_near(
    base: &TruthConfig,
    sets: &[ModelParams],
    near: &Truth,
    step: f64,
) -> Vec<Result<Truth, String>> {
    let configs = with_params(base, sets);
    let jobs = near_jobs(base, 0..configs.len(), near, step);
    let mut found = run_all(&configs, &jobs).into_iter();
    configs
        .iter()
        .map(|cfg| {
            let seeds: Result<Vec<_>, String> = found.by_ref().take(base.seeds.len()).collect();
            seeds.map(|s| truth_of(cfg, s))
        })
        .collect()
}

/// How many replicas serve `target` req/s: `ceil(target / knee)` at the
/// knee and at both ends of its interval.
pub fn replicas(target: f64, p: &Prediction) -> Replicas {
    let n = |knee: f64| (knee > 0.0).then(|| (target / knee).ceil().max(1.0) as u64);
    Replicas {
        target_req_s: target,
        replicas: n(p.knee_req_s),
        low: n(p.high_req_s),
        high: n(p.low_req_s),
    }
}

/// The lowest rate a seed's search found to fail (its knee when none
/// did): the knee lies below it, at or above the knee.
/// How far chance alone moves one seed's knee: half the central seeds'
/// spread. A corner's knee is one seed's (on the short runs, scaled), so
/// the interval reaches this far beyond the corners' knees; 0 with one seed.
fn seed_chance(t: &Truth) -> f64 {
    ((t.max - t.min) / 2.0).max(0.0)
}

fn fails_at(s: &SeedKnee) -> f64 {
    s.fails_at.unwrap_or(s.knee)
}

fn runs_of(t: &Truth) -> usize {
    t.seeds.iter().map(|s| s.runs).sum()
}

/// The first seed whose search did not end at a knee, else a knee.
fn kind_of(t: &Truth) -> KneeKind {
    t.seeds
        .iter()
        .map(|s| s.kind)
        .find(|k| *k != KneeKind::Knee)
        .unwrap_or(KneeKind::Knee)
}

/// The explanation at the median seed's knee (none when no rate passed)
/// and the runs it took. With `with_moves`, what moves the knee: for a
/// compute binding each compute parameter is moved ±25% and the one that
/// moves the knee most names the binding ([`super::explain`]'s rule 3).
fn explain_truth(
    cfg: &TruthConfig,
    t: &Truth,
    with_moves: bool,
    near: &Near,
) -> (Option<KneeExplain>, usize) {
    let seed = median_seed(t);
    if seed.kind == KneeKind::BelowLowest {
        return (None, 0);
    }
    let at = AtKnee {
        usage: &seed.usage,
        max_num_seqs: cfg.params.max_num_seqs,
        rate: seed.knee,
        at_fail: &seed.at_fail,
        fail_kept_up: seed.fail_kept_up,
    };
    let first = explain(&at);
    if !with_moves {
        return (Some(first), 0);
    }
    let candidates: Vec<Knob> = match first.binds {
        Binding::PrefillCompute | Binding::DecodeCompute => Knob::COMPUTE.to_vec(),
        b => Knob::for_binding(b, &seed.usage).into_iter().collect(),
    };
    let (all, runs) = moves(cfg, near, &candidates);
    let mut most: Option<(Knob, Moves)> = None;
    for (knob, m) in candidates.into_iter().zip(all) {
        if most
            .as_ref()
            .is_none_or(|(_, best)| swing(&m) > swing(best))
        {
            most = Some((knob, m));
        }
    }
    let Some((knob, m)) = most else {
        return (Some(first), runs);
    };
    let mut e = explain_as(&at, knob.binding());
    e.moves = Some(m);
    (Some(e), runs)
}

/// How far ±25% of a parameter moves the knee, relative to the lower knee;
/// a knee the search could not find at one end only (pushed out of its
/// range) counts as the largest move.
fn swing(m: &Moves) -> f64 {
    match (m.minus_25.knee, m.plus_25.knee) {
        (Some(a), Some(b)) if a.min(b) > 0.0 => (a - b).abs() / a.min(b),
        (None, None) => 0.0,
        _ => f64::INFINITY,
    }
}

/// Each knob's move: the knee at 75% and 125% of it, every search run
/// where `near` says and starting from its knee, all at once; and the runs
/// taken.
fn moves(cfg: &TruthConfig, near: &Near, knobs: &[Knob]) -> (Vec<Moves>, usize) {
    let scaled: Vec<(Knob, ModelParams)> = knobs
        .iter()
        .flat_map(|&k| [0.75, 1.25].map(|f| (k, k.scaled(&cfg.params, f))))
        .collect();
    let sets: Vec<ModelParams> = scaled.iter().map(|(_, p)| p.clone()).collect();
    let found = searches_near(near.cfg, &sets, near.truth, MOVE_STEP);
    let mut runs = 0;
    let moved: Vec<MovedKnee> = scaled
        .iter()
        .zip(found)
        .map(|((k, params), t)| MovedKnee {
            value: k.value(params),
            knee: t.ok().map(|t| {
                runs += runs_of(&t);
                t.median * near.scale
            }),
        })
        .collect();
    let all = knobs
        .iter()
        .zip(moved.chunks(2))
        .map(|(k, m)| Moves {
            parameter: k.name().to_string(),
            value: k.value(&cfg.params),
            minus_25: m[0].clone(),
            plus_25: m[1].clone(),
        })
        .collect();
    (all, runs)
}

/// The first step out of a search at ±25% of a parameter: such a move
/// shifts the knee by up to about as much.
const MOVE_STEP: f64 = 0.1;

#[cfg(test)]
#[path = "predict_tests.rs"]
mod tests;

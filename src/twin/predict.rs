//! A predicted knee ([`Prediction`]): the knee search ([`super::knee`]) run
//! on the central parameters and on every corner of their uncertainty (a
//! server profile's parameter sets at the ends of each parameter's range).
//! The interval spans the central search's seeds and every corner's knee.
//! The binding resource comes from the central search's median seed, and
//! "what moves it" from two more searches, at ±25% of the binding parameter;
//! when compute binds, six: ±25% of each compute parameter, and the one that
//! moves the knee most says whether prefill or decode compute binds.
//! Also how many replicas serve a target rate ([`replicas`]). Pure.

use super::explain::{explain, explain_as, AtKnee, Knob};
use super::knee::{true_knee, KneeKind, Truth, TruthConfig};
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
    /// The interval's low end: the lowest seed or corner knee.
    pub low_req_s: f64,
    /// The interval's high end: the highest seed or corner knee.
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
    let central = true_knee(&cfg.truth)?;
    let mut runs = runs_of(&central);
    let mut corner_knees = Vec::with_capacity(cfg.corners.len());
    for (i, params) in cfg.corners.iter().enumerate() {
        let corner = true_knee(&TruthConfig {
            params: params.clone(),
            ..cfg.truth.clone()
        })
        .map_err(|e| format!("corner {} of the parameters: {e}", i + 1))?;
        runs += runs_of(&corner);
        corner_knees.push(corner.median);
    }
    let (explained, n) = explain_truth(&cfg.truth, &central, cfg.moves);
    runs += n;
    let widen = cfg.misfit.as_ref().map_or(0.0, |m| m.widen.clamp(0.0, 1.0));
    let low = corner_knees.iter().fold(central.min, |a, &b| a.min(b)) * (1.0 - widen);
    let high = corner_knees.iter().fold(central.max, |a, &b| a.max(b)) * (1.0 + widen);
    Ok(Prediction {
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
    })
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

/// The seed whose knee is the median.
fn median_seed(t: &Truth) -> &super::knee::SeedKnee {
    t.seeds
        .iter()
        .find(|s| s.knee == t.median)
        .unwrap_or(&t.seeds[0])
}

/// The explanation at the median seed's knee (none when no rate passed)
/// and the runs it took. With `with_moves`, what moves the knee: for a
/// compute binding each compute parameter is moved ±25% and the one that
/// moves the knee most names the binding ([`super::explain`]'s rule 3).
fn explain_truth(cfg: &TruthConfig, t: &Truth, with_moves: bool) -> (Option<KneeExplain>, usize) {
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
    let mut runs = 0;
    let mut most: Option<(Knob, Moves)> = None;
    for knob in candidates {
        let (m, n) = moves(cfg, knob);
        runs += n;
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

/// The knee at 75% and 125% of `knob`, and the runs that took.
fn moves(cfg: &TruthConfig, knob: Knob) -> (Moves, usize) {
    let mut runs = 0;
    let mut at = |factor: f64| {
        let params = knob.scaled(&cfg.params, factor);
        let value = knob.value(&params);
        let found = true_knee(&TruthConfig {
            params,
            ..cfg.clone()
        });
        let knee = found.ok().map(|t| {
            runs += runs_of(&t);
            t.median
        });
        MovedKnee { value, knee }
    };
    let (minus_25, plus_25) = (at(0.75), at(1.25));
    let moves = Moves {
        parameter: knob.name().to_string(),
        value: knob.value(&cfg.params),
        minus_25,
        plus_25,
    };
    (moves, runs)
}

#[cfg(test)]
#[path = "predict_tests.rs"]
mod tests;

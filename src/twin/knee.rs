//! The simulator's true knee: the highest arrival rate whose virtual-time run
//! ([`crate::sim::virtual_time`]) meets every SLO, found by bisection on λ,
//! per seed. The SLOs are judged by the sweep's own code
//! ([`crate::sweep::slo::evaluate`]) over `RequestRecord`s built from the
//! virtual timings, so the statistic is the one a sweep computes. Pure: no
//! clock, seeded randomness.

use crate::metrics::RequestRecord;
use crate::sim::capacity::capacity;
use crate::sim::virtual_time::{simulate, unit_gaps, VirtualLoad, VirtualRun};
use crate::sim::ModelParams;
use crate::sweep::slo::{evaluate, Slo, SloMetric, SloOutcome};
use serde::Serialize;

/// What to search.
#[derive(Debug, Clone)]
pub struct TruthConfig {
    /// The engine.
    pub params: ModelParams,
    /// The load's shape (request counts, lengths).
    pub load: VirtualLoad,
    /// Every SLO must hold at the knee.
    pub slos: Vec<Slo>,
    /// Arrival burstiness (1 = Poisson, infinity = evenly spaced).
    pub burstiness: f64,
    /// One independent search per seed.
    pub seeds: Vec<u64>,
    /// Stop when the bracket is narrower than this fraction of the rate.
    pub precision: f64,
}

/// How a seed's search ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum KneeKind {
    /// A knee between the lowest and the highest rate tried.
    Knee,
    /// Even the lowest rate tried fails: the knee is below it (reported 0).
    BelowLowest,
    /// The highest rate tried passes (it is above the computed capacity).
    AboveHighest,
}

/// One seed's search.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SeedKnee {
    /// The seed of the arrival gaps.
    pub seed: u64,
    /// The highest rate found to pass (req/s); 0 when none did.
    pub knee: f64,
    /// How the search ended.
    pub kind: KneeKind,
    /// The lowest rate found to fail (req/s), when one did.
    pub fails_at: Option<f64>,
    /// Virtual-time runs the search took.
    pub runs: usize,
    /// The SLOs at the knee rate (at the lowest rate when none passed).
    pub at_knee: Vec<SloOutcome>,
}

/// The search's result over all seeds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Truth {
    /// The computed capacity μ (req/s) the search was bracketed from.
    pub mu: f64,
    /// The lowest and highest rates tried.
    pub bracket: (f64, f64),
    /// Per-seed knees, in seed order.
    pub seeds: Vec<SeedKnee>,
    /// The median of the per-seed knees.
    pub median: f64,
    /// The smallest per-seed knee.
    pub min: f64,
    /// The largest per-seed knee.
    pub max: f64,
}

/// The verdict of one virtual-time run.
#[derive(Debug, Clone)]
struct Verdict {
    pass: bool,
    outcomes: Vec<SloOutcome>,
}

/// Finds the true knee for every seed (seeds run on their own threads).
pub fn true_knee(cfg: &TruthConfig) -> Result<Truth, String> {
    if cfg.slos.is_empty() || cfg.seeds.is_empty() {
        return Err("the knee needs at least one SLO and one seed".into());
    }
    if !(cfg.precision > 0.0 && cfg.precision < 1.0) {
        return Err(format!(
            "precision must be in (0, 1), got {}",
            cfg.precision
        ));
    }
    let mu = capacity(&cfg.params, cfg.load.input_len, cfg.load.output_len).mu;
    let bracket = (mu / 100.0, mu * 1.5);
    let results: Vec<Result<SeedKnee, String>> = std::thread::scope(|s| {
        let handles: Vec<_> = cfg
            .seeds
            .iter()
            .map(|&seed| s.spawn(move || search_seed(cfg, seed, bracket)))
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("a search thread panicked".into()))
            })
            .collect()
    });
    let seeds = results.into_iter().collect::<Result<Vec<_>, _>>()?;
    let mut knees: Vec<f64> = seeds.iter().map(|s| s.knee).collect();
    knees.sort_by(f64::total_cmp);
    Ok(Truth {
        mu,
        bracket,
        median: knees[knees.len() / 2],
        min: knees[0],
        max: knees[knees.len() - 1],
        seeds,
    })
}

/// Bisection on λ for one seed's arrival gaps: keeps a passing `lo` and a
/// failing `hi` and halves the bracket until it is within the precision.
fn search_seed(
    cfg: &TruthConfig,
    seed: u64,
    (lowest, highest): (f64, f64),
) -> Result<SeedKnee, String> {
    let gaps = unit_gaps(seed, cfg.burstiness, cfg.load.gaps_needed())?;
    let judge = |rate: f64| judge(cfg, &gaps, rate);
    let mut result = SeedKnee {
        seed,
        knee: 0.0,
        kind: KneeKind::Knee,
        fails_at: None,
        runs: 2,
        at_knee: Vec::new(),
    };
    let low = judge(lowest)?;
    if !low.pass {
        result.kind = KneeKind::BelowLowest;
        result.fails_at = Some(lowest);
        result.at_knee = low.outcomes;
        return Ok(result);
    }
    let high = judge(highest)?;
    if high.pass {
        result.kind = KneeKind::AboveHighest;
        result.knee = highest;
        result.at_knee = high.outcomes;
        return Ok(result);
    }
    let (mut lo, mut hi, mut at_lo) = (lowest, highest, low.outcomes);
    while hi - lo > cfg.precision * lo {
        let mid = (lo + hi) / 2.0;
        let v = judge(mid)?;
        result.runs += 1;
        if v.pass {
            (lo, at_lo) = (mid, v.outcomes);
        } else {
            hi = mid;
        }
    }
    result.knee = lo;
    result.fails_at = Some(hi);
    result.at_knee = at_lo;
    Ok(result)
}

/// Runs the load at `rate` and judges every SLO over the measured requests.
/// A rate the server cannot keep up with ([`keeps_up`]) fails even if the
/// SLOs hold: over a finite run an overloaded queue's latency is finite, but
/// it grows without bound in steady state.
fn judge(cfg: &TruthConfig, gaps: &[f64], rate: f64) -> Result<Verdict, String> {
    let run = simulate(&cfg.params, &cfg.load, gaps, rate)?;
    let records = records(&run);
    let outcomes: Vec<SloOutcome> = cfg.slos.iter().map(|s| evaluate(s, &records)).collect();
    let pass = outcomes.iter().all(|o| o.pass) && keeps_up(&run);
    Ok(Verdict { pass, outcomes })
}

/// Most the measured requests' finishes may spread beyond their arrivals,
/// as a share of the arrivals' span, for the queue to count as steady.
pub const MAX_BACKLOG_GROWTH: f64 = 0.02;

/// Whether the server kept up: the measured requests finished over a span at
/// most [`MAX_BACKLOG_GROWTH`] longer than the one they arrived over. In a
/// stable queue the two spans differ by a latency; in an overloaded one the
/// finishes spread by the growing backlog (at 1.1 μ, 10% of the span).
pub fn keeps_up(run: &VirtualRun) -> bool {
    let (Some(first), Some(last)) = (run.requests.first(), run.requests.last()) else {
        return true;
    };
    let arrivals = (last.arrival - first.arrival).as_secs_f64();
    let finishes = (last.finish.saturating_sub(first.finish)).as_secs_f64();
    finishes <= arrivals * (1.0 + MAX_BACKLOG_GROWTH)
}

/// The measured requests as the client would have recorded them: sent on
/// arrival, one SSE message per token.
pub fn records(run: &VirtualRun) -> Vec<RequestRecord> {
    run.requests
        .iter()
        .enumerate()
        .map(|(index, r)| RequestRecord {
            index,
            due: r.arrival,
            released: r.arrival,
            sent: r.arrival,
            first_token: Some(r.first_token),
            last_token: Some(r.finish),
            itl: r.token_times.windows(2).map(|w| w[1] - w[0]).collect(),
            output_tokens: r.output_tokens,
            ..RequestRecord::default()
        })
        .collect()
}

/// Whether any SLO needs every token's time (ITL).
pub fn needs_token_times(slos: &[Slo]) -> bool {
    slos.iter().any(|s| s.metric == SloMetric::Itl)
}

#[cfg(test)]
#[path = "knee_tests.rs"]
mod tests;

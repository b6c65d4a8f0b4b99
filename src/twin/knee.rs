//! The simulator's true knee: the highest arrival rate whose virtual-time run
//! ([`crate::sim::virtual_time`]) meets every SLO, found by bisection on λ,
//! per seed. The SLOs are judged by the sweep's own code
//! ([`crate::sweep::slo::evaluate`]) over `RequestRecord`s built from the
//! virtual timings, so the statistic is the one a sweep computes. Pure: no
//! clock, seeded randomness.

use crate::metrics::RequestRecord;
use crate::sim::blocks::BLOCK_TOKENS;
use crate::sim::capacity::capacity_cached;
use crate::sim::usage::Usage;
use crate::sim::virtual_time::{simulate, unit_gaps, VirtualLoad, VirtualRun};
use crate::sim::ModelParams;
use crate::sweep::slo::{evaluate, Slo, SloMetric, SloOutcome};
use crate::workload::random::{input_len_range, output_len_range, RandomParams};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

/// What to search.
#[derive(Debug, Clone)]
pub struct TruthConfig {
    /// The engine.
    pub params: ModelParams,
    /// The load's shape (request counts, lengths).
    pub load: VirtualLoad,
    /// Every SLO must hold at the knee.
    pub slos: Vec<Slo>,
    /// `--random-range-ratio` of the prompt's own and of the output length:
    /// each seed draws every request's lengths uniformly from the ranges
    /// `kneecap run`'s random dataset uses; `(0, 0)` keeps them fixed.
    pub range_ratio: (f64, f64),
    /// Arrival burstiness (1 = Poisson, infinity = evenly spaced).
    pub burstiness: f64,
    /// One independent search per seed.
    pub seeds: Vec<u64>,
    /// Stop when the bracket is narrower than this fraction of the rate.
    pub precision: f64,
}

/// How a seed's search ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
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
    /// The engine's utilisation at the knee rate (as `at_knee`).
    #[serde(skip)]
    pub usage: Usage,
    /// The SLOs at the failing rate, when one failed.
    #[serde(skip)]
    pub at_fail: Vec<SloOutcome>,
    /// Whether the server kept up at the failing rate (else it fell behind).
    #[serde(skip)]
    pub fail_kept_up: bool,
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
    kept_up: bool,
    outcomes: Vec<SloOutcome>,
    usage: Usage,
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
    let mu = service_rate(cfg);
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
    let load = load_for_seed(cfg, seed)?;
    let gaps = unit_gaps(seed, cfg.burstiness, load.gaps_needed())?;
    let judge = |rate: f64| judge(cfg, &load, &gaps, rate);
    let mut result = SeedKnee {
        seed,
        knee: 0.0,
        kind: KneeKind::Knee,
        fails_at: None,
        runs: 2,
        at_knee: Vec::new(),
        usage: Usage::default(),
        at_fail: Vec::new(),
        fail_kept_up: true,
    };
    let low = judge(lowest)?;
    if !low.pass {
        result.kind = KneeKind::BelowLowest;
        result.fails_at = Some(lowest);
        result.fail_kept_up = low.kept_up;
        result.at_fail = low.outcomes.clone();
        (result.at_knee, result.usage) = (low.outcomes, low.usage);
        return Ok(result);
    }
    let high = judge(highest)?;
    if high.pass {
        result.kind = KneeKind::AboveHighest;
        result.knee = highest;
        (result.at_knee, result.usage) = (high.outcomes, high.usage);
        return Ok(result);
    }
    let (mut lo, mut hi, mut at_lo, mut at_hi) = (lowest, highest, low, high);
    while hi - lo > cfg.precision * lo {
        let mid = (lo + hi) / 2.0;
        let v = judge(mid)?;
        result.runs += 1;
        if v.pass {
            (lo, at_lo) = (mid, v);
        } else {
            (hi, at_hi) = (mid, v);
        }
    }
    result.knee = lo;
    result.fails_at = Some(hi);
    (result.at_knee, result.usage) = (at_lo.outcomes, at_lo.usage);
    (result.at_fail, result.fail_kept_up) = (at_hi.outcomes, at_hi.kept_up);
    Ok(result)
}

/// Salt of the lengths' random stream (apart from the arrival gaps').
const LENGTHS_SALT: u64 = 0x6c65_6e67_7468_7321; // "lengths!"

/// The load one seed runs: with a range ratio, every request's lengths drawn
/// as `kneecap run`'s random dataset draws them (no tokenizer), seeded.
pub(crate) fn load_for_seed(cfg: &TruthConfig, seed: u64) -> Result<VirtualLoad, String> {
    let (ri, ro) = cfg.range_ratio;
    if ri == 0.0 && ro == 0.0 {
        return Ok(cfg.load.clone());
    }
    for (name, r) in [("input", ri), ("output", ro)] {
        if !(0.0..1.0).contains(&r) {
            return Err(format!("the {name} range ratio must be in [0, 1), got {r}"));
        }
    }
    let params = RandomParams {
        input_len: cfg.load.input_len,
        output_len: cfg.load.output_len,
        range_ratio_input: ri,
        range_ratio_output: ro,
        prefix_len: cfg.load.shared_prefix,
    };
    let (inputs, outputs) = (input_len_range(&params, 0), output_len_range(&params));
    let mut rng = StdRng::seed_from_u64(seed ^ LENGTHS_SALT);
    let lengths = (0..cfg.load.gaps_needed())
        .map(|_| {
            let input = rng.random_range(inputs.clone());
            (input, rng.random_range(outputs.clone()))
        })
        .collect();
    Ok(VirtualLoad {
        lengths,
        ..cfg.load.clone()
    })
}

/// The computed capacity μ the search is bracketed from: the mean shape,
/// with the shared prefix served by the cache when it is on.
fn service_rate(cfg: &TruthConfig) -> f64 {
    let l = &cfg.load;
    let prompt = l.shared_prefix.saturating_add(l.input_len);
    let hit = if l.prefix_caching && prompt > 0 {
        f64::from(l.shared_prefix / BLOCK_TOKENS * BLOCK_TOKENS) / f64::from(prompt)
    } else {
        0.0
    };
    capacity_cached(&cfg.params, prompt, l.output_len, hit).mu
}

/// Runs the load at `rate` and judges every SLO over the measured requests.
/// A rate the server cannot keep up with ([`keeps_up`]) fails even if the
/// SLOs hold: over a finite run an overloaded queue's latency is finite, but
/// it grows without bound in steady state.
fn judge(
    cfg: &TruthConfig,
    load: &VirtualLoad,
    gaps: &[f64],
    rate: f64,
) -> Result<Verdict, String> {
    let run = simulate(&cfg.params, load, gaps, rate)?;
    let records = records(&run);
    let outcomes: Vec<SloOutcome> = cfg.slos.iter().map(|s| evaluate(s, &records)).collect();
    let kept_up = keeps_up(&run);
    Ok(Verdict {
        pass: kept_up && outcomes.iter().all(|o| o.pass),
        kept_up,
        outcomes,
        usage: run.usage,
    })
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

//! The simulator's true knee: the highest arrival rate whose virtual-time run
//! ([`crate::sim::virtual_time`]) meets every SLO, found per seed by a
//! bracketing search on λ ([`search`]) to the configured precision. The SLOs
//! are judged by the sweep's own code ([`crate::sweep::slo::evaluate`]) over
//! `RequestRecord`s built from the virtual timings, so the statistic is the
//! one a sweep computes. The search starts from a [`Hint`] (an earlier
//! search's knee: another seed's, the central parameters' for a corner) or,
//! without one, from a coarse search on short runs; the seeds run in
//! parallel ([`par_map`]). Pure: no clock, seeded randomness.

use crate::metrics::RequestRecord;
use crate::sim::capacity::capacity_cached;
use crate::sim::params::HostStalls;
use crate::sim::usage::Usage;
use crate::sim::virtual_time::{simulate, unit_gaps, VirtualLoad, VirtualRun};
use crate::sim::ModelParams;
use crate::sweep::slo::{evaluate, Slo, SloMetric, SloOutcome};
use crate::workload::random::{input_len_range, output_len_range, RandomParams};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
pub use search::par_map;
use search::{backlog_margin, locate, slo_margin, slope_near, Probe, Start};
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
    /// The host's stalls redrawn over each request's TTFT ([`super::tail`]):
    /// a profile's, when its engine holds them at their mean; else none.
    pub tail: HostStalls,
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
    /// Virtual-time runs the search took (the coarse search's short runs
    /// not counted).
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
    /// How fast the worst margin rises with ln λ near the knee (a later
    /// search's [`Hint`]).
    #[serde(skip)]
    pub slope: Option<f64>,
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

/// Where an earlier search found the knee, for a search of a nearby
/// question (another seed, a corner of the parameters, ±25% of one).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hint {
    /// The rate to run first.
    pub rate: f64,
    /// The first step out when that run leaves one side unknown (a share).
    pub step: f64,
    /// d margin / d ln λ near that knee.
    pub slope: Option<f64>,
    /// The lowest rate that search found to fail, when it is worth a run
    /// (within a few steps of `rate`).
    pub fails_at: Option<f64>,
}

impl Hint {
    /// A search's own seed's knee as the hint for `seed`'s search, or the
    /// median seed's when `seed` was not searched; `None` without a knee.
    pub fn from_truth(t: &Truth, seed: u64, step: f64) -> Option<Hint> {
        let own = t.seeds.iter().find(|s| s.seed == seed);
        let k = own.unwrap_or_else(|| median_seed(t));
        (k.kind == KneeKind::Knee).then_some(Hint {
            rate: k.knee,
            step,
            slope: k.slope.or_else(|| median_seed(t).slope),
            fails_at: k.fails_at,
        })
    }
}

/// The seed whose knee is the median.
pub fn median_seed(t: &Truth) -> &SeedKnee {
    t.seeds
        .iter()
        .find(|s| s.knee == t.median)
        .unwrap_or(&t.seeds[0])
}

/// The verdict of one virtual-time run.
#[derive(Debug, Clone)]
struct Verdict {
    pass: bool,
    kept_up: bool,
    outcomes: Vec<SloOutcome>,
    usage: Usage,
    /// The worst criterion's margin ([`search::Probe::margin`]).
    margin: f64,
}

/// The first step out of a hinted search: seeds and corners move a knee by
/// a few percent.
pub const HINT_STEP: f64 = 0.03;

/// The coarse search's runs are this share of the full ones ([`coarse`]).
const COARSE_SHARE: usize = 10;
/// The fewest measured requests of a coarse run.
pub const COARSE_MIN: usize = 500;
/// Without a hint a search starts at this share of μ, stepping out by
/// [`COLD_STEP`].
const COLD_GUESS: f64 = 0.8;
const COLD_STEP: f64 = 0.15;

/// Finds the true knee for every seed (seeds run in parallel), starting
/// from the first seed's knee on short runs ([`coarse`]).
pub fn true_knee(cfg: &TruthConfig) -> Result<Truth, String> {
    check_config(cfg)?;
    let hint = match coarse(cfg) {
        Some(c) => {
            let t = true_knee_from(&c, |_| None)?;
            let h = Hint::from_truth(&t, c.seeds[0], HINT_STEP);
            h.map(|h| Hint {
                fails_at: None,
                ..h
            })
        }
        None => None,
    };
    true_knee_from(cfg, |_| hint)
}

/// The same search on runs a tenth as long (at least [`COARSE_MIN`]
/// requests, the warm-up in proportion), the first seed only: where a
/// search starts, and where a prediction measures how far its corners and
/// moves shift the knee. `None` when the runs are that short already.
pub fn coarse(cfg: &TruthConfig) -> Option<TruthConfig> {
    let requests = (cfg.load.requests / COARSE_SHARE).max(COARSE_MIN);
    if requests * 2 > cfg.load.requests || cfg.seeds.is_empty() {
        return None;
    }
    Some(TruthConfig {
        load: VirtualLoad {
            requests,
            warmup: cfg.load.warmup * requests / cfg.load.requests,
            ..cfg.load.clone()
        },
        seeds: cfg.seeds[..1].to_vec(),
        ..cfg.clone()
    })
}

/// Finds the true knee for every seed, each seed's search starting from
/// `hint(seed)` (or, for `None`, from 0.8 μ with wide steps).
pub fn true_knee_from(
    cfg: &TruthConfig,
    hint: impl Fn(u64) -> Option<Hint> + Sync,
) -> Result<Truth, String> {
    check_config(cfg)?;
    let mu = service_rate(cfg);
    let bracket = (mu / 100.0, mu * 1.5);
    let results = par_map(&cfg.seeds, |&seed| {
        search_seed(cfg, seed, bracket, start(mu, hint(seed)))
    });
    let seeds = results.into_iter().collect::<Result<Vec<_>, _>>()?;
    Ok(summarise(mu, bracket, seeds))
}

fn check_config(cfg: &TruthConfig) -> Result<(), String> {
    if cfg.slos.is_empty() || cfg.seeds.is_empty() {
        return Err("the knee needs at least one SLO and one seed".into());
    }
    if !(cfg.precision > 0.0 && cfg.precision < 1.0) {
        return Err(format!(
            "precision must be in (0, 1), got {}",
            cfg.precision
        ));
    }
    Ok(())
}

fn start(mu: f64, hint: Option<Hint>) -> Start {
    match hint {
        Some(h) => Start {
            guess: h.rate,
            step: h.step,
            slope: h.slope,
            other: h.fails_at,
        },
        None => Start {
            guess: COLD_GUESS * mu,
            step: COLD_STEP,
            slope: None,
            other: None,
        },
    }
}

/// One seed's search of `cfg`, from `hint` (as [`true_knee_from`] runs it).
pub fn seed_knee(cfg: &TruthConfig, seed: u64, hint: Option<Hint>) -> Result<SeedKnee, String> {
    check_config(cfg)?;
    let mu = service_rate(cfg);
    search_seed(cfg, seed, (mu / 100.0, mu * 1.5), start(mu, hint))
}

/// The search's result from its seeds' searches ([`seed_knee`]), in order.
pub fn truth_of(cfg: &TruthConfig, seeds: Vec<SeedKnee>) -> Truth {
    let mu = service_rate(cfg);
    summarise(mu, (mu / 100.0, mu * 1.5), seeds)
}

fn summarise(mu: f64, bracket: (f64, f64), seeds: Vec<SeedKnee>) -> Truth {
    let mut knees: Vec<f64> = seeds.iter().map(|s| s.knee).collect();
    knees.sort_by(f64::total_cmp);
    Truth {
        mu,
        bracket,
        median: knees[knees.len() / 2],
        min: knees[0],
        max: knees[knees.len() - 1],
        seeds,
    }
}

/// One seed's search ([`search::locate`]) between `lowest` and `highest`.
fn search_seed(
    cfg: &TruthConfig,
    seed: u64,
    (lowest, highest): (f64, f64),
    start: Start,
) -> Result<SeedKnee, String> {
    let load = load_for_seed(cfg, seed)?;
    let gaps = unit_gaps(seed, cfg.burstiness, load.gaps_needed())?;
    let run = |rate: f64| {
        let v = judge(cfg, (&load, &gaps, seed), rate)?;
        let probe = Probe {
            rate,
            pass: v.pass,
            margin: v.margin,
        };
        Ok((probe, v))
    };
    let found = locate((lowest, highest), start, cfg.precision, run)?;
    let mut result = SeedKnee {
        seed,
        knee: 0.0,
        kind: KneeKind::Knee,
        fails_at: None,
        runs: found.runs,
        at_knee: Vec::new(),
        usage: Usage::default(),
        at_fail: Vec::new(),
        fail_kept_up: true,
        slope: None,
    };
    if let Some((p, v)) = found.fail {
        result.fails_at = Some(p.rate);
        result.fail_kept_up = v.kept_up;
        result.at_fail = v.outcomes.clone();
        (result.at_knee, result.usage) = (v.outcomes, v.usage);
    }
    match found.pass {
        Some((p, v)) => {
            result.knee = p.rate;
            (result.at_knee, result.usage) = (v.outcomes, v.usage);
            if result.fails_at.is_none() {
                result.kind = KneeKind::AboveHighest;
            }
        }
        None => result.kind = KneeKind::BelowLowest,
    }
    result.slope = slope_near(&found.probes, result.knee.max(lowest), SLOPE_WINDOW);
    Ok(result)
}

/// Probes within this share of the knee give its slope.
const SLOPE_WINDOW: f64 = 0.1;

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
pub fn service_rate(cfg: &TruthConfig) -> f64 {
    let l = &cfg.load;
    let prompt = l.shared_prefix.saturating_add(l.input_len);
    let hit = if l.prefix_caching && prompt > 0 {
        let block = cfg.params.block_tokens.max(1);
        f64::from(l.shared_prefix / block * block) / f64::from(prompt)
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
    (load, gaps, seed): (&VirtualLoad, &[f64], u64),
    rate: f64,
) -> Result<Verdict, String> {
    let run = run_at(cfg, &cfg.params, (load, gaps, seed), rate)?;
    let records = records(&run);
    let outcomes: Vec<SloOutcome> = cfg.slos.iter().map(|s| evaluate(s, &records)).collect();
    let kept_up = keeps_up(&run);
    let pass = kept_up && outcomes.iter().all(|o| o.pass);
    let worst = outcomes
        .iter()
        .map(slo_margin)
        .fold(backlog_margin(&run), f64::max);
    // The verdict decides; the margin only steers, so its sign follows it.
    let margin = if pass {
        worst.min(0.0)
    } else {
        worst.max(f64::MIN_POSITIVE)
    };
    Ok(Verdict {
        pass,
        kept_up,
        outcomes,
        usage: run.usage,
        margin,
    })
}

/// One virtual-time run of `params` under `cfg`'s load at `rate`, each
/// request's TTFT with the host's stalls redrawn over it ([`super::tail`]).
pub(crate) fn run_at(
    cfg: &TruthConfig,
    params: &ModelParams,
    (load, gaps, seed): (&VirtualLoad, &[f64], u64),
    rate: f64,
) -> Result<VirtualRun, String> {
    let mut run = simulate(params, load, gaps, rate)?;
    super::tail::redraw(&mut run, cfg.tail, seed);
    Ok(run)
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

#[path = "knee_search.rs"]
pub mod search;

#[cfg(test)]
#[path = "knee_tests.rs"]
mod tests;

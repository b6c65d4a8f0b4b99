//! Schedule: when each request is due, as offsets from the run's start.
//!
//! Owns the arrival processes of open-loop load (vLLM's precomputed schedule,
//! `vllm bench serve` §3.1–3.3) and their validation. PURE: the seeded RNG is
//! passed in, no clock is read, nothing is slept on, nothing panics.
//!
//! Every process is built from a *unit renewal process*: i.i.d. gaps with mean 1
//! (Gamma with shape = burstiness and scale = 1/burstiness, or exactly 1 when
//! burstiness is infinite). Dividing a unit gap by a rate r gives a draw of
//! Gamma(shape = burstiness, scale = 1/(r·burstiness)), which is vLLM's rule.
use rand::rngs::StdRng;
use rand_distr::{Distribution, Gamma};
use std::time::Duration;

/// How requests arrive in open-loop mode.
#[derive(Debug, Clone, PartialEq)]
pub enum Arrival {
    /// `--request-rate inf`: every request is due at t = 0.
    Infinite,
    /// Gamma-distributed gaps with shape `burstiness` and scale 1/(rate·burstiness);
    /// burstiness 1 is a Poisson process.
    Gamma { rate: f64, burstiness: f64 },
    /// Evenly spaced gaps of exactly 1/rate.
    Constant { rate: f64 },
    /// vLLM's ramp-up: per-request-index rate from `start` to `end` rps.
    Ramp {
        strategy: RampStrategy,
        start: f64,
        end: f64,
        burstiness: f64,
    },
}

/// How a ramp moves from its start rate to its end rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RampStrategy {
    /// r = start + (end − start)·progress.
    Linear,
    /// r = start·(end/start)^progress.
    Exponential,
}

/// Defensive bound on `offsets_until`: a degenerate burstiness (e.g. 1e-9, whose
/// Gamma draws underflow to 0) could otherwise fill memory with offsets at t = 0.
pub const MAX_OFFSETS_UNTIL: usize = 10_000_000;

/// Offsets of `n` arrivals, exactly as `vllm bench serve` builds them.
///
/// Per request i: rate rᵢ (constant, or the ramp value at progress i/max(n−1, 1));
/// gap gᵢ = 0 for an infinite rate, 1/rᵢ for infinite burstiness, else a Gamma
/// draw; tᵢ = g₀ + … + gᵢ (request 0 is delayed by one gap too). Without a ramp
/// the offsets are then scaled so that the last one is exactly n/rate.
///
/// A rate that is not positive (only a linear ramp starting at 0 produces one;
/// vLLM asserts there, `validate` rejects the other cases) is replaced by the next
/// positive rate of the ramp. When no request has a positive rate (an invalid
/// configuration) every gap is 0. An invalid burstiness (≤ 0 or NaN, rejected by
/// `validate`) gives deterministic gaps.
pub fn offsets(n: usize, arrival: &Arrival, rng: &mut StdRng) -> Vec<Duration> {
    let rates = next_positive_rates((0..n).map(|i| rate_at_index(arrival, i, n)).collect());
    let unit = UnitGaps::new(burstiness(arrival));
    let gaps: Vec<f64> = rates.iter().map(|&r| scaled_gap(r, &unit, rng)).collect();
    let mut cumulative = cumulative_sum(&gaps);
    if let Some(last) = normalised_last_offset(n, arrival) {
        normalise(&mut cumulative, last);
    }
    cumulative.into_iter().map(seconds_to_duration).collect()
}

/// Offsets of every arrival due strictly before `limit` (duration-bounded runs).
///
/// Gaps follow the same rules as [`offsets`] but are never normalised, so a
/// burstiness of 1 gives a true Poisson process. `Infinite` yields an empty
/// vector: an unbounded rate over a time window is meaningless, and the caller
/// runs that case closed-loop until the deadline instead.
///
/// A ramp has no request count here, so its rate follows *time*: progress =
/// t/limit, and arrivals are the unit renewal process mapped through the inverse
/// of the cumulative rate Λ(t) = ∫₀ᵗ r. This handles a start rate of 0 (the
/// first arrival simply comes later), and for burstiness 1 it is exactly the
/// inhomogeneous Poisson process with rate r(t). At most [`MAX_OFFSETS_UNTIL`]
/// offsets are returned.
pub fn offsets_until(limit: Duration, arrival: &Arrival, rng: &mut StdRng) -> Vec<Duration> {
    let Some(intensity) = Intensity::new(arrival, limit.as_secs_f64()) else {
        return Vec::new();
    };
    let unit = UnitGaps::new(burstiness(arrival));
    let mut out = Vec::new();
    let mut unit_time = 0.0;
    while out.len() < MAX_OFFSETS_UNTIL {
        unit_time += unit.draw(rng);
        match intensity.time_of(unit_time).map(seconds_to_duration) {
            Some(t) if t < limit => out.push(t),
            _ => break,
        }
    }
    out
}

/// Offsets of a trace replayed `speed` times faster: vLLM's self-timed rule,
/// each request due at its own timestamp (seconds from the start) / speed.
pub fn trace_offsets(timestamps: &[f64], speed: f64) -> Vec<Duration> {
    timestamps
        .iter()
        .map(|t| seconds_to_duration(t / speed))
        .collect()
}

/// One release of a looped trace replay: when, which row, which pass.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TraceRelease {
    pub due: Duration,
    pub row: usize,
    pub pass: u32,
}

/// A trace replayed `speed` times faster from its first request (timestamps
/// are taken relative to the first), looped until `limit`: pass `p` is the
/// trace again, shifted by `p` periods, where a period is the trace's span
/// plus one mean gap (so the seam looks like any other gap). `timestamps`
/// must be sorted; fewer than two give no loop (just the rows before `limit`).
pub fn trace_loop_until(timestamps: &[f64], speed: f64, limit: Duration) -> Vec<TraceRelease> {
    let (Some(first), Some(last)) = (timestamps.first(), timestamps.last()) else {
        return Vec::new();
    };
    let n = timestamps.len();
    let span = last - first;
    let period = if n >= 2 && span > 0.0 {
        span + span / (n - 1) as f64
    } else {
        f64::INFINITY
    };
    let limit_s = limit.as_secs_f64();
    let mut out = Vec::new();
    for pass in 0u32.. {
        let base = if pass == 0 {
            0.0
        } else {
            f64::from(pass) * period
        };
        if !base.is_finite() || base / speed >= limit_s || out.len() >= MAX_OFFSETS_UNTIL {
            break;
        }
        for (row, t) in timestamps.iter().enumerate() {
            let due = (base + t - first) / speed;
            if due >= limit_s {
                break;
            }
            out.push(TraceRelease {
                due: seconds_to_duration(due),
                row,
                pass,
            });
        }
    }
    out
}

/// Check an arrival process the way `vllm bench serve` validates its flags; the
/// message names the offending flag and value.
pub fn validate(arrival: &Arrival) -> Result<(), String> {
    match *arrival {
        Arrival::Infinite => Ok(()),
        Arrival::Constant { rate } => validate_rate(rate),
        Arrival::Gamma { rate, burstiness } => {
            validate_rate(rate)?;
            validate_burstiness(burstiness)
        }
        Arrival::Ramp {
            strategy,
            start,
            end,
            burstiness,
        } => {
            validate_ramp(strategy, start, end)?;
            validate_burstiness(burstiness)
        }
    }
}

fn validate_rate(rate: f64) -> Result<(), String> {
    if rate.is_finite() && rate > 0.0 {
        Ok(())
    } else {
        Err(format!(
            "--request-rate must be a positive number or `inf`, got {rate}"
        ))
    }
}

fn validate_burstiness(burstiness: f64) -> Result<(), String> {
    // Infinity is allowed: it means perfectly regular gaps.
    if burstiness > 0.0 {
        Ok(())
    } else {
        Err(format!(
            "--burstiness must be > 0 (1 = Poisson, <1 burstier, >1 more regular), got {burstiness}"
        ))
    }
}

fn validate_ramp(strategy: RampStrategy, start: f64, end: f64) -> Result<(), String> {
    if !(start.is_finite() && start >= 0.0) {
        return Err(format!(
            "--ramp-up-start-rps must be a finite number ≥ 0, got {start}"
        ));
    }
    if !(end.is_finite() && end > 0.0) {
        return Err(format!(
            "--ramp-up-end-rps must be a finite number > 0, got {end}"
        ));
    }
    if start > end {
        return Err(format!(
            "--ramp-up-start-rps ({start}) must not exceed --ramp-up-end-rps ({end})"
        ));
    }
    if strategy == RampStrategy::Exponential && start <= 0.0 {
        return Err(format!(
            "--ramp-up-start-rps must be > 0 with --ramp-up-strategy exponential, got {start}"
        ));
    }
    Ok(())
}

/// Gap shape of the process; infinite for `Infinite` and `Constant`.
fn burstiness(arrival: &Arrival) -> f64 {
    match *arrival {
        Arrival::Infinite | Arrival::Constant { .. } => f64::INFINITY,
        Arrival::Gamma { burstiness, .. } | Arrival::Ramp { burstiness, .. } => burstiness,
    }
}

/// Rate of request `i` out of `n` (vLLM §3.3 for ramps: rates per index, not per time).
fn rate_at_index(arrival: &Arrival, i: usize, n: usize) -> f64 {
    match *arrival {
        Arrival::Infinite => f64::INFINITY,
        Arrival::Gamma { rate, .. } | Arrival::Constant { rate } => rate,
        Arrival::Ramp {
            strategy,
            start,
            end,
            ..
        } => {
            let progress = i as f64 / n.saturating_sub(1).max(1) as f64;
            ramp_rate(strategy, start, end, progress)
        }
    }
}

/// The ramp formula at `progress` ∈ [0, 1].
fn ramp_rate(strategy: RampStrategy, start: f64, end: f64, progress: f64) -> f64 {
    match strategy {
        RampStrategy::Linear => start + (end - start) * progress,
        RampStrategy::Exponential => start * (end / start).powf(progress),
    }
}

/// Replace every rate that is not positive by the next positive one (see [`offsets`]).
fn next_positive_rates(mut rates: Vec<f64>) -> Vec<f64> {
    let mut next = None;
    for rate in rates.iter_mut().rev() {
        if *rate > 0.0 {
            next = Some(*rate);
        } else if let Some(positive) = next {
            *rate = positive;
        }
    }
    rates
}

/// Gap at rate `rate` in seconds: 0 for an infinite (or, degenerate, non-positive) rate.
fn scaled_gap(rate: f64, unit: &UnitGaps, rng: &mut StdRng) -> f64 {
    if rate.is_infinite() || rate.is_nan() || rate <= 0.0 {
        0.0
    } else {
        unit.draw(rng) / rate
    }
}

/// Last offset after vLLM's normalisation (n/rate), or `None` when it does not apply.
fn normalised_last_offset(n: usize, arrival: &Arrival) -> Option<f64> {
    match *arrival {
        Arrival::Gamma { rate, .. } | Arrival::Constant { rate } if rate > 0.0 => {
            Some(n as f64 / rate).filter(|t| t.is_finite())
        }
        _ => None,
    }
}

/// Scale all offsets so the last equals `last`; skipped when the last offset is 0.
fn normalise(offsets: &mut [f64], last: f64) {
    let Some(&current) = offsets.last() else {
        return;
    };
    if current == 0.0 || !current.is_finite() {
        return;
    }
    let factor = last / current;
    offsets.iter_mut().for_each(|t| *t *= factor);
    // Mathematically t_{N−1}·factor = last; pin it to avoid a 1-ulp rounding.
    if let Some(t) = offsets.last_mut() {
        *t = last;
    }
}

fn cumulative_sum(gaps: &[f64]) -> Vec<f64> {
    gaps.iter()
        .scan(0.0, |acc, g| {
            *acc += g;
            Some(*acc)
        })
        .collect()
}

/// Seconds to a `Duration`, rounded to the nanosecond. Never panics: negative or
/// NaN gives 0, and huge values saturate (float-to-int casts saturate).
fn seconds_to_duration(seconds: f64) -> Duration {
    Duration::from_nanos((seconds * 1e9).round() as u64)
}

/// Gaps of the unit renewal process (mean 1).
enum UnitGaps {
    /// Infinite (or invalid) burstiness: every gap is exactly 1.
    Regular,
    /// Gamma(shape = b, scale = 1/b).
    Gamma(Gamma<f64>),
}

impl UnitGaps {
    fn new(burstiness: f64) -> Self {
        if burstiness.is_infinite() {
            return UnitGaps::Regular;
        }
        match Gamma::new(burstiness, 1.0 / burstiness) {
            Ok(gamma) => UnitGaps::Gamma(gamma),
            Err(_) => UnitGaps::Regular,
        }
    }

    fn draw(&self, rng: &mut StdRng) -> f64 {
        match self {
            UnitGaps::Regular => 1.0,
            UnitGaps::Gamma(gamma) => gamma.sample(rng),
        }
    }
}

/// Time-varying rate of a duration-bounded run, through the inverse of its
/// cumulative rate Λ.
enum Intensity {
    /// Constant rate r: Λ(t) = r·t.
    Constant(f64),
    /// Linear ramp r(t) = start + slope·t.
    Linear { start: f64, slope: f64 },
    /// Exponential ramp r(t) = start·e^(k·t), k = ln(end/start)/limit.
    Exponential { start: f64, k: f64 },
}

impl Intensity {
    /// `None` for `Infinite` (handled by the caller) and for an empty window.
    fn new(arrival: &Arrival, limit_s: f64) -> Option<Self> {
        if limit_s.is_nan() || limit_s <= 0.0 {
            return None;
        }
        match *arrival {
            Arrival::Infinite => None,
            Arrival::Gamma { rate, .. } | Arrival::Constant { rate } => {
                Some(Intensity::Constant(rate))
            }
            Arrival::Ramp {
                strategy: RampStrategy::Linear,
                start,
                end,
                ..
            } => Some(Intensity::Linear {
                start,
                slope: (end - start) / limit_s,
            }),
            Arrival::Ramp {
                strategy: RampStrategy::Exponential,
                start,
                end,
                ..
            } => Some(Intensity::Exponential {
                start,
                k: (end / start).ln() / limit_s,
            }),
        }
    }

    /// Λ⁻¹(s): the time at which the cumulative rate reaches `s`, or `None` when
    /// it never does (zero or decreasing rates of invalid configurations).
    fn time_of(&self, s: f64) -> Option<f64> {
        let t = match *self {
            Intensity::Constant(rate) => s / rate,
            Intensity::Linear { start, slope } => {
                // Root of slope·t²/2 + start·t = s, in the form that is stable
                // for slope → 0 and for start = 0.
                let discriminant = start * start + 2.0 * slope * s;
                2.0 * s / (start + discriminant.sqrt())
            }
            Intensity::Exponential { start, k: 0.0 } => s / start,
            Intensity::Exponential { start, k } => (s * k / start).ln_1p() / k,
        };
        Some(t).filter(|t| t.is_finite() && *t >= 0.0)
    }
}

#[cfg(test)]
#[path = "schedule_tests.rs"]
mod tests;

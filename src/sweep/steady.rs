//! Steady state: did one step see the server in equilibrium? Judged from the
//! client's own records over the measurement window `[w0, w1)` (offsets from
//! the run's t0). PURE: reads records; no clock, no I/O.
//!
//! Definitions (all over the window, length `T = w1 − w0`):
//!
//! - **offered rate** λ: records whose `due` lies in the window, per second.
//! - **achieved rate** X: records that *finished* in the window (successful or
//!   failed; see [`end_of`]), per second. Failures count as departures because
//!   this is a flow-balance check; the error rate is judged separately.
//! - **in flight**: a record is in the server-side system over `[sent, end)`.
//!   [`end_of`] gives `end`: `last_token` (else `first_token`, else `sent`, so
//!   a failure with no token time is a zero-length visit); a `Cancelled` record
//!   that was sent never finished, so it counts as in flight up to `w1`. A
//!   cancelled record never sent is not in flight at all.
//! - **L**: the time-average number in flight (exact integral over the window).
//! - **W**: mean `end − sent` of records *sent* in the window (their whole visit,
//!   even past `w1`; an unfinished visit counts up to `w1`, a lower bound).
//! - **Little's gap**: `|L − λ_s·W| / L`, where λ_s is the rate of records sent in
//!   the window (equal to λ in open loop with a healthy generator; using the
//!   same arrivals as W keeps the identity exact in equilibrium).
//! - **trend**: least-squares slope of the in-flight count sampled at
//!   [`TREND_POINTS`] midpoints of the window; growth = slope·T.
//! - **backlog**: records due before `w1` that had not finished by `w1`.
//!
//! A window found unsteady whose warm-up was shorter than W is judged again
//! from where the load had filled the system (`filled_from`); when that
//! part is steady, the fill alone made the whole look unsteady, and the step
//! is judged on that part (recorded as `judged_from_s`). An overload stays
//! unsteady on any part, and keeps its whole window's reasons.
use crate::metrics::stats::request::was_sent;
use crate::metrics::{ErrorKind, RequestRecord};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// In-flight samples used for the trend fit.
pub const TREND_POINTS: usize = 100;

/// When a step counts as steady. See [`SteadyThresholds::default`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SteadyThresholds {
    /// Minimum achieved/offered ratio (default 0.9).
    pub min_throughput_ratio: f64,
    /// In-flight growth over the window is allowed up to
    /// `max(max_growth_requests, max_growth_fraction · L)` (defaults 2 and 0.2).
    pub max_growth_requests: f64,
    /// See `max_growth_requests`.
    pub max_growth_fraction: f64,
    /// Maximum Little's gap (default 0.25), checked only when L ≥
    /// `littles_min_in_flight` (default 1: below it the gap is all edge noise).
    pub max_littles_gap: f64,
    /// See `max_littles_gap`.
    pub littles_min_in_flight: f64,
    /// Shortfalls and growth within this many standard deviations of what a
    /// stationary system shows by chance are not judged unsteady (default 3).
    pub noise_sigmas: f64,
}

impl Default for SteadyThresholds {
    fn default() -> Self {
        SteadyThresholds {
            min_throughput_ratio: 0.9,
            max_growth_requests: 2.0,
            max_growth_fraction: 0.2,
            max_littles_gap: 0.25,
            littles_min_in_flight: 1.0,
            noise_sigmas: 3.0,
        }
    }
}

pub use crate::result::evidence::Steadiness;

/// When `record` left the system; `None` when it never finished (a sent,
/// cancelled request). See the module docs.
pub fn end_of(record: &RequestRecord) -> Option<Duration> {
    let cancelled = matches!(&record.error, Some(e) if e.kind == ErrorKind::Cancelled);
    if cancelled {
        return None;
    }
    Some(
        record
            .last_token
            .or(record.first_token)
            .unwrap_or(record.sent)
            .max(record.sent),
    )
}

/// A record's visit `[sent, end)` in seconds, `end = +∞` when unfinished;
/// `None` for a record that was never sent.
fn visit(record: &RequestRecord) -> Option<(f64, f64)> {
    if !was_sent(record) {
        return None;
    }
    let end = end_of(record).map_or(f64::INFINITY, |e| e.as_secs_f64());
    Some((record.sent.as_secs_f64(), end))
}

/// Judge whether the step was in steady state over `window = (w0, w1)`.
///
/// Pass **every** record of the step (warm-up and cool-down included), not
/// only those of the window: requests sent before `w0` are in flight during
/// it, and requests due near `w1` finish after it.
pub fn assess(
    records: &[RequestRecord],
    window: (Duration, Duration),
    thresholds: &SteadyThresholds,
) -> Steadiness {
    let (w0, w1) = (window.0.as_secs_f64(), window.1.as_secs_f64());
    if w1 - w0 <= 0.0 {
        return Steadiness {
            reasons: vec!["empty measurement window".to_string()],
            ..Steadiness::default()
        };
    }
    let visits: Vec<(f64, f64)> = records.iter().filter_map(visit).collect();
    let whole = judge(records, &visits, (w0, w1), thresholds);
    if whole.steady {
        return whole;
    }
    match filled_from(whole.mean_time_in_system_s, (w0, w1)) {
        Some(from) => {
            let filled = judge(records, &visits, (from, w1), thresholds);
            if filled.steady {
                Steadiness {
                    judged_from_s: Some(from),
                    ..filled
                }
            } else {
                whole
            }
        }
        None => whole,
    }
}

/// The flows over `[w0, w1)` and the thresholds' verdict on them.
fn judge(
    records: &[RequestRecord],
    visits: &[(f64, f64)],
    (w0, w1): (f64, f64),
    thresholds: &SteadyThresholds,
) -> Steadiness {
    let span = w1 - w0;
    let inside = |t: f64| t >= w0 && t < w1;
    let due = records
        .iter()
        .filter(|r| inside(r.due.as_secs_f64()))
        .count();
    let finished = visits.iter().filter(|v| inside(v.1)).count();
    let mut s = Steadiness {
        offered_rate: due as f64 / span,
        achieved_rate: finished as f64 / span,
        backlog_at_end: backlog(records, w1),
        ..Steadiness::default()
    };
    s.throughput_ratio = if due == 0 {
        0.0
    } else {
        finished as f64 / due as f64
    };
    s.mean_in_flight = mean_in_flight(visits, w0, w1);
    let (arrival_rate, w) = arrivals_and_mean_visit(visits, w0, w1);
    s.mean_time_in_system_s = w;
    s.sent_rate = arrival_rate;
    s.littles_gap = (s.mean_in_flight > 0.0)
        .then(|| (s.mean_in_flight - arrival_rate * w).abs() / s.mean_in_flight);
    let (slope, start, end) = in_flight_trend(visits, w0, w1);
    (s.in_flight_slope_per_s, s.in_flight_start, s.in_flight_end) = (slope, start, end);
    s.reasons = unsteady_reasons(&s, due, span, thresholds);
    s.steady = s.reasons.is_empty();
    s
}

/// The steadiness of the union of `parts`: shards that ran the same window
/// (of length `span_s`) against one server, each judged by [`assess`]. The
/// flows add — λ, X, λ_s, L, the backlog, and the fitted in-flight line (a
/// least-squares fit is linear in the counts, and the shards sample the same
/// relative grid) — W is the arrival-weighted mean, and the thresholds are
/// applied to the sums exactly as [`assess`] applies them to one process's
/// records: the single-process verdict on the combined load.
pub fn combine(parts: &[Steadiness], span_s: f64, thresholds: &SteadyThresholds) -> Steadiness {
    let sum = |f: fn(&Steadiness) -> f64| parts.iter().map(f).sum::<f64>();
    let mut s = Steadiness {
        offered_rate: sum(|p| p.offered_rate),
        achieved_rate: sum(|p| p.achieved_rate),
        sent_rate: sum(|p| p.sent_rate),
        mean_in_flight: sum(|p| p.mean_in_flight),
        in_flight_slope_per_s: sum(|p| p.in_flight_slope_per_s),
        in_flight_start: sum(|p| p.in_flight_start),
        in_flight_end: sum(|p| p.in_flight_end),
        backlog_at_end: parts.iter().map(|p| p.backlog_at_end).sum(),
        ..Steadiness::default()
    };
    if span_s <= 0.0 {
        s.reasons = vec!["empty measurement window".to_string()];
        return s;
    }
    let work = sum(|p| p.sent_rate * p.mean_time_in_system_s);
    s.mean_time_in_system_s = if s.sent_rate > 0.0 {
        work / s.sent_rate
    } else {
        0.0
    };
    let due = (s.offered_rate * span_s).round() as usize;
    let finished = (s.achieved_rate * span_s).round();
    s.throughput_ratio = if due == 0 { 0.0 } else { finished / due as f64 };
    s.littles_gap =
        (s.mean_in_flight > 0.0).then(|| (s.mean_in_flight - work).abs() / s.mean_in_flight);
    s.reasons = unsteady_reasons(&s, due, span_s, thresholds);
    s.steady = s.reasons.is_empty();
    s
}

/// Where the load had filled the system, when the warm-up was shorter than
/// a request's time in it: a request finishes about W after it is due, so
/// until W after the load started (t0) the finishes count only the arrivals
/// since the start, fewer than the window's, and the number in flight is
/// still climbing to its level. `None` when the warm-up covered W, or when
/// the rest of the window would be under half of it.
/// `w` is W over the whole window.
fn filled_from(w: f64, (w0, w1): (f64, f64)) -> Option<f64> {
    let span = w1 - w0;
    // t0 is when the load started; a fill within 5% of the window is noise.
    (w - w0 > FILL_MATERIAL * span && w1 - w >= span / 2.0).then_some(w)
}

/// The share of the window a fill must take to move the judged window.
const FILL_MATERIAL: f64 = 0.05;

fn backlog(records: &[RequestRecord], w1: f64) -> usize {
    records
        .iter()
        .filter(|r| r.due.as_secs_f64() < w1)
        .filter(|r| end_of(r).is_none_or(|e| e.as_secs_f64() >= w1))
        .count()
}

/// Exact time average over `[w0, w1)` of the number of visits in progress.
fn mean_in_flight(visits: &[(f64, f64)], w0: f64, w1: f64) -> f64 {
    let busy: f64 = visits
        .iter()
        .map(|&(start, end)| (end.min(w1) - start.max(w0)).max(0.0))
        .sum();
    busy / (w1 - w0)
}

/// (arrivals per second, mean visit length in s) of visits starting in the window.
fn arrivals_and_mean_visit(visits: &[(f64, f64)], w0: f64, w1: f64) -> (f64, f64) {
    let lengths: Vec<f64> = visits
        .iter()
        .filter(|v| v.0 >= w0 && v.0 < w1)
        .map(|&(start, end)| if end.is_finite() { end } else { w1 } - start)
        .collect();
    let rate = lengths.len() as f64 / (w1 - w0);
    let mean = if lengths.is_empty() {
        0.0
    } else {
        lengths.iter().sum::<f64>() / lengths.len() as f64
    };
    (rate, mean)
}

/// Least-squares line through the in-flight count at [`TREND_POINTS`] grid
/// midpoints: (slope per s, fitted value at w0, fitted value at w1).
fn in_flight_trend(visits: &[(f64, f64)], w0: f64, w1: f64) -> (f64, f64, f64) {
    let step = (w1 - w0) / TREND_POINTS as f64;
    let points: Vec<(f64, f64)> = (0..TREND_POINTS)
        .map(|i| w0 + (i as f64 + 0.5) * step)
        .map(|t| {
            let n = visits.iter().filter(|v| v.0 <= t && t < v.1).count();
            (t, n as f64)
        })
        .collect();
    let k = points.len() as f64;
    let mean_t = points.iter().map(|p| p.0).sum::<f64>() / k;
    let mean_n = points.iter().map(|p| p.1).sum::<f64>() / k;
    let sxy: f64 = points.iter().map(|p| (p.0 - mean_t) * (p.1 - mean_n)).sum();
    let sxx: f64 = points.iter().map(|p| (p.0 - mean_t).powi(2)).sum();
    let slope = if sxx > 0.0 { sxy / sxx } else { 0.0 };
    let at = |t: f64| mean_n + slope * (t - mean_t);
    (slope, at(w0), at(w1))
}

/// Chance fluctuation of a stationary system, used to tell noise from trend.
/// The number in flight of a stationary open system fluctuates with standard
/// deviation ≈ √L (exact for M/G/∞), and stays correlated for about one time
/// in system W; a window of length T therefore holds about T/W independent
/// looks at it.
struct Noise {
    /// sd of (arrivals − departures) over the window: the change in the
    /// number in flight between its two ends, ≈ √(2L).
    balance: f64,
    /// sd of the least-squares growth (slope·T) fitted to the in-flight count,
    /// ≈ √L · √(12·W/T).
    growth: f64,
}

fn noise(s: &Steadiness, span: f64) -> Noise {
    let l = s.mean_in_flight.max(0.0);
    let corr = s.mean_time_in_system_s.max(span / TREND_POINTS as f64);
    Noise {
        balance: (2.0 * l).sqrt(),
        growth: l.sqrt() * (12.0 * corr / span).min(12.0).sqrt(),
    }
}

fn unsteady_reasons(s: &Steadiness, due: usize, span: f64, th: &SteadyThresholds) -> Vec<String> {
    let mut reasons = Vec::new();
    if due == 0 {
        reasons.push("no requests were due in the window".to_string());
        return reasons;
    }
    let noise = noise(s, span);
    let shortfall = s.offered_rate * span - s.achieved_rate * span;
    if s.throughput_ratio < th.min_throughput_ratio
        && shortfall > 2.0 + th.noise_sigmas * noise.balance
    {
        reasons.push(format!(
            "throughput {:.2}/s is {:.0}% of offered {:.2}/s (need {:.0}%)",
            s.achieved_rate,
            s.throughput_ratio * 100.0,
            s.offered_rate,
            th.min_throughput_ratio * 100.0
        ));
    }
    let growth = s.in_flight_end - s.in_flight_start;
    let allowed = th
        .max_growth_requests
        .max(th.max_growth_fraction * s.mean_in_flight)
        .max(th.noise_sigmas * noise.growth);
    if growth >= allowed {
        reasons.push(format!(
            "in flight grew {:.0} → {:.0} ({:+.1}/s; allowed growth {:.1})",
            s.in_flight_start, s.in_flight_end, s.in_flight_slope_per_s, allowed
        ));
    }
    // Edge effects alone make L and λ·W differ by about W/T.
    let max_gap = th.max_littles_gap.max(1.5 * s.mean_time_in_system_s / span);
    if let Some(gap) = s.littles_gap {
        if s.mean_in_flight >= th.littles_min_in_flight && gap >= max_gap {
            reasons.push(format!(
                "Little's law gap {:.2} ≥ {:.2} (L {:.1}, W {:.3} s)",
                gap, max_gap, s.mean_in_flight, s.mean_time_in_system_s
            ));
        }
    }
    reasons
}

/// The server's waiting-queue gauge over the window: a least-squares fit of
/// `(t_s, waiting)` samples inside `[w0, w1)`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct QueueTrend {
    /// Fitted waiting count at `w0` and at `w1`.
    pub start: f64,
    pub end: f64,
    pub mean: f64,
    /// Growth the queue may show by chance: max(3, 3·√(mean + 1)).
    pub allowed_growth: f64,
}

impl QueueTrend {
    /// True when the server's queue grew by more than chance allows.
    pub fn growing(&self) -> bool {
        self.end - self.start >= self.allowed_growth
    }

    /// Why the step is not steady, from the server's side.
    pub fn reason(&self) -> String {
        format!(
            "server queue grew {:.0} → {:.0} waiting (allowed growth {:.1})",
            self.start, self.end, self.allowed_growth
        )
    }
}

/// Fit the waiting gauge over the window; `None` with fewer than 4 samples.
/// Below capacity the queue of a batching server stays near zero with small
/// blips; above it, it grows by (λ − μ) per second.
pub fn queue_trend(samples: &[(f64, f64)], window: (Duration, Duration)) -> Option<QueueTrend> {
    let (w0, w1) = (window.0.as_secs_f64(), window.1.as_secs_f64());
    let pts: Vec<(f64, f64)> = samples
        .iter()
        .copied()
        .filter(|(t, _)| *t >= w0 && *t < w1)
        .collect();
    if pts.len() < 4 {
        return None;
    }
    let k = pts.len() as f64;
    let mean_t = pts.iter().map(|p| p.0).sum::<f64>() / k;
    let mean = pts.iter().map(|p| p.1).sum::<f64>() / k;
    let sxy: f64 = pts.iter().map(|p| (p.0 - mean_t) * (p.1 - mean)).sum();
    let sxx: f64 = pts.iter().map(|p| (p.0 - mean_t).powi(2)).sum();
    let slope = if sxx > 0.0 { sxy / sxx } else { 0.0 };
    let at = |t: f64| mean + slope * (t - mean_t);
    let allowed_growth = (3.0 * (mean.max(0.0) + 1.0).sqrt()).max(3.0);
    Some(QueueTrend {
        start: at(w0),
        end: at(w1),
        mean,
        allowed_growth,
    })
}

#[cfg(test)]
#[path = "steady_tests.rs"]
mod tests;

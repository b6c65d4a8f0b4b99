//! One seed's knee in few virtual-time runs (issue 39): a bracketing root
//! search on λ steered by each run's *margin* (how far its worst SLO, or its
//! backlog, sits from failing) instead of plain bisection. The verdicts
//! still decide: the search ends, as the bisection did, with a rate that
//! passed and one that failed within the precision of each other (or beyond
//! the allowed range), and a rate that passed is never moved past one that
//! failed. The margins only choose where to look next: interpolated between
//! a pass and a fail (regula falsi in ln λ, with the Illinois correction and a
//! bisection when one end stops moving), extrapolated from one side with a
//! slope an earlier search measured, or a growing step. Each probe is kept a
//! little inside the bracket's ends so that a good estimate closes it in one
//! more run. Also the margins themselves, and [`par_map`], which runs the
//! searches of the seeds, corners and moves side by side. Pure: the runs
//! are the caller's closure.

use crate::sim::virtual_time::VirtualRun;
use crate::sweep::slo::SloOutcome;

/// One run, reduced to what the search steers by.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Probe {
    /// The arrival rate run (req/s).
    pub rate: f64,
    /// Whether every SLO held and the server kept up.
    pub pass: bool,
    /// ln(observed / bound) of the worst criterion: ≤ 0 when it passed,
    /// > 0 when it failed; infinite when a statistic had no finite value.
    pub margin: f64,
}

/// Where a search starts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Start {
    /// The first rate to run.
    pub guess: f64,
    /// How far (a share of the rate) to step out while only one side of the
    /// knee is known; doubled at each further step.
    pub step: f64,
    /// d margin / d ln λ near the knee, from an earlier search, to
    /// extrapolate from one side.
    pub slope: Option<f64>,
    /// Where an earlier search found the other side of its knee (above a
    /// passing guess): run next when the guess goes the same way, so a knee
    /// that did not move is confirmed in two runs.
    pub other: Option<f64>,
}

/// How a search ended: the highest rate that passed and the lowest that
/// failed, each with its run's result, and the runs taken.
#[derive(Debug)]
pub struct Located<V> {
    /// The highest passing rate (none when even the lowest failed).
    pub pass: Option<(Probe, V)>,
    /// The lowest failing rate (none when even the highest passed).
    pub fail: Option<(Probe, V)>,
    /// Runs taken.
    pub runs: usize,
    /// Every probe in the order run.
    pub probes: Vec<Probe>,
}

/// Share of the precision a probe keeps from the bracket's ends.
const NUDGE: f64 = 0.9;

/// Finds the knee within `(lowest, highest)` to `precision` (a share of the
/// passing rate), calling `run` once per probe.
pub fn locate<V>(
    (lowest, highest): (f64, f64),
    start: Start,
    precision: f64,
    mut run: impl FnMut(f64) -> Result<(Probe, V), String>,
) -> Result<Located<V>, String> {
    let mut s = State {
        pass: None,
        fail: None,
        probes: Vec::new(),
        step: start.step.max(2.0 * precision),
        slope: start.slope.filter(|s| s.is_finite() && *s > 0.0),
        same_end: 0,
        last_pass: None,
    };
    let mut rate = start.guess.clamp(lowest, highest);
    loop {
        let (p, v) = run(rate)?;
        s.record(p, v);
        let done = match (&s.pass, &s.fail) {
            (Some((a, _)), Some((b, _))) => b.rate - a.rate <= precision * a.rate,
            (None, Some((b, _))) => b.rate <= lowest,
            (Some((a, _)), None) => a.rate >= highest,
            (None, None) => unreachable!("a run was just recorded"),
        };
        if done {
            return Ok(Located {
                runs: s.probes.len(),
                pass: s.pass,
                fail: s.fail,
                probes: s.probes,
            });
        }
        let confirm = start
            .other
            .filter(|o| s.probes.len() == 1 && p.pass == (*o > p.rate) && *o != p.rate);
        rate = confirm
            .unwrap_or_else(|| s.next(precision))
            .clamp(lowest, highest);
    }
}

struct State<V> {
    pass: Option<(Probe, V)>,
    fail: Option<(Probe, V)>,
    probes: Vec<Probe>,
    step: f64,
    slope: Option<f64>,
    /// Probes in a row that moved the same end of the bracket.
    same_end: usize,
    last_pass: Option<bool>,
}

impl<V> State<V> {
    fn record(&mut self, p: Probe, v: V) {
        self.same_end = if self.last_pass == Some(p.pass) {
            self.same_end + 1
        } else {
            0
        };
        self.last_pass = Some(p.pass);
        self.probes.push(p);
        // A pass above a known fail (or a fail below a known pass) would
        // mean the verdict is not monotone in λ here: keep the bracket
        // consistent by trusting the newer run on its own side only.
        if p.pass {
            if self.fail.as_ref().is_none_or(|(f, _)| p.rate < f.rate) {
                self.pass = Some((p, v));
            }
        } else if self.pass.as_ref().is_none_or(|(a, _)| p.rate > a.rate) {
            self.fail = Some((p, v));
        }
    }

    /// The next rate to run.
    fn next(&mut self, precision: f64) -> f64 {
        match (&self.pass, &self.fail) {
            (Some((a, _)), Some((b, _))) => self.between(*a, *b, precision),
            (Some((a, _)), None) => {
                let a = *a;
                self.outward(a, 1.0, precision)
            }
            (None, Some((b, _))) => {
                let b = *b;
                self.outward(b, -1.0, precision)
            }
            (None, None) => unreachable!("a run was recorded"),
        }
    }

    /// Between a pass `a` and a fail `b`: the interpolated root, or the
    /// middle when one end has not moved for two probes, kept a little
    /// inside both ends.
    fn between(&self, a: Probe, b: Probe, precision: f64) -> f64 {
        let width = precision * a.rate;
        let mid = (a.rate + b.rate) / 2.0;
        if b.rate - a.rate <= 2.0 * NUDGE * width || self.same_end >= 2 {
            return mid;
        }
        let (ma, mb) = (a.margin, b.margin);
        let guess = if ma.is_finite() && mb.is_finite() && mb > ma {
            // Illinois: after one repeat on the same end, the other end's
            // margin counts half, which pulls the estimate towards it.
            let (ma, mb) = match (self.same_end, self.last_pass) {
                (1, Some(true)) => (ma, mb / 2.0),
                (1, Some(false)) => (ma / 2.0, mb),
                _ => (ma, mb),
            };
            let (la, lb) = (a.rate.ln(), b.rate.ln());
            (la + (lb - la) * (-ma) / (mb - ma)).exp()
        } else {
            mid
        };
        guess.clamp(a.rate + NUDGE * width, b.rate - NUDGE * width)
    }

    /// Beyond the one known side (`dir` +1: up from a pass, −1: down from a
    /// fail): extrapolated with the slope when there is one, else one step,
    /// within [precision, step] of the known rate; the step doubles.
    fn outward(&mut self, known: Probe, dir: f64, precision: f64) -> f64 {
        let step = self.step;
        self.step *= 2.0;
        let near = NUDGE * precision;
        let slope = self.local_slope(known.rate).or(self.slope);
        let ratio = match slope {
            Some(s) if known.margin.is_finite() => {
                // The root, then a little beyond it so the probe likely
                // lands on the other side (at least `near` out: a root that
                // close is then bracketed within the precision).
                let to_root = (-known.margin / s).exp();
                let beyond = 1.0 + dir * near / 2.0;
                to_root * beyond
            }
            _ => 1.0 + dir * step,
        };
        let (lo, hi) = if dir > 0.0 {
            (1.0 + near, 1.0 + step)
        } else {
            (1.0 / (1.0 + step), 1.0 - near)
        };
        known.rate * ratio.clamp(lo, hi)
    }

    /// The slope of the margin over ln λ between the two probes nearest
    /// `rate` on its side, when both margins are finite and they differ.
    fn local_slope(&self, rate: f64) -> Option<f64> {
        let mut near: Vec<&Probe> = self
            .probes
            .iter()
            .filter(|p| p.margin.is_finite())
            .collect();
        near.sort_by(|x, y| (x.rate - rate).abs().total_cmp(&(y.rate - rate).abs()));
        let (x, y) = (near.first()?, near.get(1)?);
        let d = y.rate.ln() - x.rate.ln();
        let s = (y.margin - x.margin) / d;
        (d.abs() > 1e-9 && s.is_finite() && s > 0.0).then_some(s)
    }
}

/// The slope of the margin over ln λ around `knee`, from the probes within
/// ±`window` (a share) of it: least squares, when at least two distinct
/// rates with finite margins are there and it rises.
pub fn slope_near(probes: &[Probe], knee: f64, window: f64) -> Option<f64> {
    let pts: Vec<(f64, f64)> = probes
        .iter()
        .filter(|p| p.margin.is_finite() && (p.rate / knee - 1.0).abs() <= window)
        .map(|p| (p.rate.ln(), p.margin))
        .collect();
    let n = pts.len() as f64;
    if pts.len() < 2 {
        return None;
    }
    let (mx, my) = pts
        .iter()
        .fold((0.0, 0.0), |(a, b), (x, y)| (a + x / n, b + y / n));
    let sxx: f64 = pts.iter().map(|(x, _)| (x - mx).powi(2)).sum();
    let sxy: f64 = pts.iter().map(|(x, y)| (x - mx) * (y - my)).sum();
    let s = sxy / sxx;
    (sxx > 1e-12 && s.is_finite() && s > 0.0).then_some(s)
}

/// ln(observed / bound) of one SLO (> 0 when the statistic exceeds it;
/// +∞ when it has no finite value, −∞ for a bound of 0 that holds).
pub(super) fn slo_margin(o: &SloOutcome) -> f64 {
    let bound = o.slo.threshold_ms;
    match o.observed_ms {
        Some(v) if bound > 0.0 && v > 0.0 => (v / bound).ln(),
        Some(_) if o.pass => f64::NEG_INFINITY,
        _ => f64::INFINITY,
    }
}

/// ln of the finishes' span over the most [`super::keeps_up`] allows: > 0 when
/// the server fell behind.
pub(super) fn backlog_margin(run: &VirtualRun) -> f64 {
    let (Some(first), Some(last)) = (run.requests.first(), run.requests.last()) else {
        return f64::NEG_INFINITY;
    };
    let arrivals = (last.arrival - first.arrival).as_secs_f64();
    let finishes = (last.finish.saturating_sub(first.finish)).as_secs_f64();
    let allowed = arrivals * (1.0 + super::MAX_BACKLOG_GROWTH);
    if allowed > 0.0 && finishes > 0.0 {
        (finishes / allowed).ln()
    } else {
        f64::NEG_INFINITY
    }
}

/// `f` over `items` on up to as many threads as the machine has cores,
/// results in `items`' order (the same whatever the thread count).
pub fn par_map<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(items.len());
    if threads <= 1 {
        return items.iter().map(f).collect();
    }
    let next = std::sync::atomic::AtomicUsize::new(0);
    let mut out: Vec<(usize, R)> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let mut mine = Vec::new();
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(item) = items.get(i) else {
                            return mine;
                        };
                        mine.push((i, f(item)));
                    }
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
            .collect()
    });
    out.sort_by_key(|(i, _)| *i);
    out.into_iter().map(|(_, r)| r).collect()
}

#[cfg(test)]
#[path = "knee_search_tests.rs"]
mod tests;

//! The knee search's moves: climb (not past the probed μ first), bisect
//! between the decided ends around the noise band, step down. PURE: loads
//! in, a load out.
/// Step-down stops below `start / STEP_DOWN_FLOOR_DIVISOR` (rate loads).
pub const STEP_DOWN_FLOOR_DIVISOR: f64 = 64.0;

/// The first opening load not yet measured, while every step below it
/// passed (decided or within noise): a failure below it already brackets the
/// knee lower, and the search takes over from there.
pub(super) fn opening_next(opening: &[f64], raw: &[super::StepPoint]) -> Option<f64> {
    use crate::result::Verdict;
    let next = opening
        .iter()
        .copied()
        .find(|&l| !raw.iter().any(|p| p.load == l))?;
    let failed_below = raw
        .iter()
        .any(|p| p.load < next && matches!(p.verdict, Verdict::Fail | Verdict::GeneratorLimited));
    (!failed_below).then_some(next)
}

/// Climb from `from`, but not past the probe's μ (`ceiling`) until a step
/// at it has been measured: a load at μ already fails, so it brackets the
/// knee without the long drain of a load far past it.
pub(super) fn climb_under(
    from: f64,
    factor: f64,
    ceiling: Option<f64>,
    max_load: f64,
    integer: bool,
) -> Option<f64> {
    let top = match ceiling {
        Some(c) if from < c * 0.999 => {
            let c = c.min(max_load);
            if integer {
                c.round().max(1.0)
            } else {
                c
            }
        }
        _ => max_load,
    };
    climb(from, factor, top, integer).or_else(|| climb(from, factor, max_load, integer))
}

fn climb(pass: f64, factor: f64, max_load: f64, integer: bool) -> Option<f64> {
    if pass >= max_load {
        return None;
    }
    let mut next = (pass * factor).min(max_load);
    if integer {
        next = next.round().max(pass + 1.0).min(max_load);
    }
    Some(next)
}

/// The next load between a decided `pass` and a decided `fail`, with the
/// undecided loads `band` between them: the geometric midpoint of the wider
/// of the two gaps next to the decided ends (the upper one on a tie). `None`
/// once the interval is within `tolerance` (rates), or when neither gap can
/// be split (adjacent integers; rate gaps under a quarter of the tolerance:
/// the noise band itself is wider than the tolerance).
pub(super) fn bisect(
    pass: f64,
    fail: f64,
    band: &[f64],
    low_passed: bool,
    tolerance: f64,
    integer: bool,
) -> Option<f64> {
    if !integer && (fail - pass) / pass <= tolerance {
        return None;
    }
    // The gaps next to the decided ends: between two undecided loads is
    // noise already, and a gap narrower than a quarter of the tolerance is
    // not worth a step.
    // Below a band whose lowest load passed within noise, a step can only
    // pass further from the knee: split above the band instead.
    let gaps = match (band.first(), band.last()) {
        (Some(_), Some(&high)) if low_passed => vec![(high, fail)],
        (Some(&low), Some(&high)) => vec![(high, fail), (pass, low)],
        _ => vec![(pass, fail)],
    };
    let worth = |(lo, hi): &(f64, f64)| {
        if integer {
            hi - lo > 1.0
        } else {
            (hi - lo) / lo > tolerance / 4.0
        }
    };
    // Widest ratio first; the upper gap (listed first) wins a tie.
    let (lo, hi) = gaps.into_iter().filter(worth).reduce(|best, g| {
        if g.1 / g.0 > best.1 / best.0 * (1.0 + 1e-9) {
            g
        } else {
            best
        }
    })?;
    let mid = (lo * hi).sqrt();
    Some(if integer {
        mid.round().clamp(lo + 1.0, hi - 1.0)
    } else {
        mid
    })
}

pub(super) fn step_down(fail: f64, factor: f64, start: f64, integer: bool) -> Option<f64> {
    if integer {
        return (fail > 1.0).then(|| (fail / factor).floor().clamp(1.0, fail - 1.0));
    }
    let next = fail / factor;
    (next >= start / STEP_DOWN_FLOOR_DIVISOR).then_some(next)
}

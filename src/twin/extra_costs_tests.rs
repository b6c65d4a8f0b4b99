use super::*;
use crate::twin::profile::Status;

/// A level's step from known costs: 40 ms base, 1 ms a sequence, 5 µs a
/// context token of each decoder; `noise` seconds added.
fn level(batch: f64, context: f64, noise: f64) -> Point {
    Point {
        batch,
        context,
        step_s: 0.040 + 0.001 * batch + 5e-6 * batch * context + noise,
    }
}

/// The profile's levels: doubling batches of short prompts, then long
/// prompts at 4 streams, with a little noise.
fn levels() -> Vec<Point> {
    let noise = [
        0.4e-3, -0.3e-3, 0.2e-3, -0.5e-3, 0.1e-3, 0.3e-3, -0.2e-3, 0.4e-3, -0.1e-3,
    ];
    let mut out: Vec<Point> = [1.0, 2.0, 4.0, 8.0, 16.0, 32.0]
        .iter()
        .zip(noise)
        .map(|(&d, e)| level(d, 20.0, e))
        .collect();
    out.push(level(4.0, 1040.0, noise[6]));
    out.push(level(8.0, 10.0, noise[7]));
    out.push(level(4.0, 1040.0, noise[8]));
    out
}

#[test]
fn the_context_cost_comes_back_from_levels_that_vary_it() {
    let e = fit(&levels(), "test");
    let c = &e.context_token_us;
    assert_eq!(c.status, Status::Measured, "{c:?}");
    assert!((c.value - 5.0).abs() < 0.5, "context {c:?}");
    assert!(c.low <= 5.0 && c.high.unwrap() >= 5.0, "{c:?}");
    // What it adds at the long-prompt level: 4 × 1040 × 5 µs.
    let p = level(4.0, 1040.0, 0.0);
    assert!((e.at(&p) - 0.0208).abs() < 0.002, "{}", e.at(&p));
    assert_eq!(e.request_ms.status, Status::Assumed, "not probed");
}

#[test]
fn a_context_no_level_varies_is_not_probed_and_stays_zero() {
    // Only the doubling levels: one context.
    let only: Vec<Point> = levels().into_iter().take(6).collect();
    let e = fit(&only, "test");
    let x = &e.context_token_us;
    assert_eq!(x.status, Status::Assumed, "{x:?}");
    assert_eq!((x.value, x.high), (0.0, Some(0.0)), "{x:?}");
    assert!(x.how.contains("not probed"), "{}", x.how);
    assert_eq!(e.at(&level(4.0, 1040.0, 0.0)), 0.0);
}

#[test]
fn a_cost_the_data_cannot_tell_from_zero_opens_down_to_zero() {
    // No context cost at all, and noise larger than the levels can resolve.
    let mut pts = levels();
    for p in &mut pts {
        p.step_s -= 5e-6 * p.batch * p.context;
    }
    pts[6].step_s += 2e-3;
    pts[8].step_s -= 2.5e-3;
    let c = fit(&pts, "test").context_token_us;
    assert!(
        matches!(c.status, Status::NotIdentifiable | Status::Measured),
        "{c:?}"
    );
    assert!(c.value >= 0.0 && c.low == 0.0, "{c:?}");
    assert!(c.value < 1.0, "{c:?}");
}

#[test]
fn a_negative_fit_is_held_at_zero() {
    let mut pts = levels();
    for p in &mut pts {
        p.step_s -= 5e-6 * p.batch * p.context;
    }
    pts[6].step_s -= 6e-3;
    pts[8].step_s -= 6e-3;
    let c = fit(&pts, "test").context_token_us;
    assert_eq!(c.value, 0.0, "{c:?}");
    assert!(c.how.contains("held at 0"), "{}", c.how);
}

#[test]
fn least_squares_solves_an_exact_plane_and_refuses_a_singular_one() {
    let x: Vec<Vec<f64>> = (0..6)
        .map(|i| vec![1.0, f64::from(i), f64::from(i * i) * 1e3])
        .collect();
    let y: Vec<f64> = x.iter().map(|r| 2.0 + 3.0 * r[1] + 4e-3 * r[2]).collect();
    let (b, se) = least_squares(&x, &y).unwrap();
    for (got, want) in b.iter().zip([2.0, 3.0, 4e-3]) {
        assert!((got - want).abs() < 1e-9 * want.abs().max(1.0), "{b:?}");
    }
    assert!(se.iter().all(|s| *s < 1e-6), "{se:?}");
    let twice: Vec<Vec<f64>> = x.iter().map(|r| vec![r[0], r[1], 2.0 * r[1]]).collect();
    assert_eq!(least_squares(&twice, &y), None);
    assert_eq!(
        least_squares(&x[..3], &y[..3]),
        None,
        "no more rows than regressors"
    );
}

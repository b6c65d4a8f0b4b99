//! Tests for `schedule.rs` (kept apart to keep the module short).
use super::*;
use rand::SeedableRng;

fn rng(seed: u64) -> StdRng {
    StdRng::seed_from_u64(seed)
}

fn secs(d: &[Duration]) -> Vec<f64> {
    d.iter().map(Duration::as_secs_f64).collect()
}

/// Gaps between consecutive offsets, the first measured from t = 0.
fn gaps(offsets: &[Duration]) -> Vec<f64> {
    let mut previous = Duration::ZERO;
    offsets
        .iter()
        .map(|&t| {
            let gap = (t - previous).as_secs_f64();
            previous = t;
            gap
        })
        .collect()
}

/// One-sample Kolmogorov–Smirnov statistic D against the Exp(rate) CDF.
fn ks_statistic_exponential(samples: &[f64], rate: f64) -> f64 {
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len() as f64;
    sorted
        .iter()
        .enumerate()
        .map(|(i, &x)| {
            let cdf = 1.0 - (-rate * x).exp();
            (cdf - i as f64 / n).max((i + 1) as f64 / n - cdf)
        })
        .fold(0.0, f64::max)
}

/// 1 % critical value of the KS test for large n.
fn ks_critical_1pct(n: usize) -> f64 {
    1.63 / (n as f64).sqrt()
}

fn mean_and_cv(xs: &[f64]) -> (f64, f64) {
    let n = xs.len() as f64;
    let mean = xs.iter().sum::<f64>() / n;
    let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n;
    (mean, var.sqrt() / mean)
}

const POISSON_2: Arrival = Arrival::Gamma {
    rate: 2.0,
    burstiness: 1.0,
};

#[test]
fn same_seed_gives_identical_schedule() {
    let a = offsets(500, &POISSON_2, &mut rng(7));
    let b = offsets(500, &POISSON_2, &mut rng(7));
    assert_eq!(a, b);
    let a = offsets_until(Duration::from_secs(100), &POISSON_2, &mut rng(7));
    let b = offsets_until(Duration::from_secs(100), &POISSON_2, &mut rng(7));
    assert_eq!(a, b);
}

#[test]
fn different_seed_gives_different_schedule() {
    let a = offsets(500, &POISSON_2, &mut rng(7));
    let b = offsets(500, &POISSON_2, &mut rng(8));
    assert_ne!(a, b);
    let a = offsets_until(Duration::from_secs(100), &POISSON_2, &mut rng(7));
    let b = offsets_until(Duration::from_secs(100), &POISSON_2, &mut rng(8));
    assert_ne!(a, b);
}

#[test]
fn normalisation_puts_last_arrival_exactly_at_n_over_rate() {
    for (n, rate, burstiness) in [(1000, 2.0, 1.0), (7, 3.0, 0.5), (250, 0.7, 4.0)] {
        let arrival = Arrival::Gamma { rate, burstiness };
        let o = offsets(n, &arrival, &mut rng(1));
        assert_eq!(o.len(), n);
        assert_eq!(*o.last().unwrap(), seconds_to_duration(n as f64 / rate));
        assert!(o.windows(2).all(|w| w[0] <= w[1]), "offsets are sorted");
        assert!(o[0] > Duration::ZERO, "request 0 is delayed by one gap");
    }
}

#[test]
fn normalised_poisson_schedule_spans_exactly_500_seconds_for_1000_requests_at_2_rps() {
    let o = offsets(1000, &POISSON_2, &mut rng(3));
    assert_eq!(*o.last().unwrap(), Duration::from_secs(500));
}

#[test]
fn constant_gaps_are_exactly_one_over_rate() {
    let o = offsets(100, &Arrival::Constant { rate: 4.0 }, &mut rng(0));
    assert!(gaps(&o).iter().all(|&g| g == 0.25), "{:?}", &o[..5]);
    assert_eq!(o[0], Duration::from_millis(250));
    assert_eq!(o[99], Duration::from_secs(25));
    // 1/3 s is not representable: every gap is within a nanosecond of it.
    let o = offsets(1000, &Arrival::Constant { rate: 3.0 }, &mut rng(0));
    let mut previous = Duration::ZERO;
    for t in o {
        let gap_ns = (t - previous).as_nanos() as i64;
        assert!((gap_ns - 333_333_333).abs() <= 1, "gap {gap_ns} ns");
        previous = t;
    }
}

#[test]
fn constant_schedule_draws_no_randomness() {
    let a = offsets(10, &Arrival::Constant { rate: 5.0 }, &mut rng(1));
    let b = offsets(10, &Arrival::Constant { rate: 5.0 }, &mut rng(2));
    assert_eq!(a, b);
}

#[test]
fn infinite_rate_makes_every_request_due_at_zero() {
    let o = offsets(5, &Arrival::Infinite, &mut rng(0));
    assert_eq!(o, vec![Duration::ZERO; 5]);
    assert!(offsets(0, &Arrival::Infinite, &mut rng(0)).is_empty());
    assert!(offsets(0, &POISSON_2, &mut rng(0)).is_empty());
}

#[test]
fn infinite_rate_until_a_limit_is_empty_because_the_caller_runs_closed_loop() {
    let o = offsets_until(Duration::from_secs(10), &Arrival::Infinite, &mut rng(0));
    assert!(o.is_empty());
}

#[test]
fn poisson_gaps_pass_kolmogorov_smirnov() {
    let rate = 2.0;
    let o = offsets_until(Duration::from_secs(6000), &POISSON_2, &mut rng(42));
    assert!(o.len() >= 10_000, "{} samples", o.len());
    let d = ks_statistic_exponential(&gaps(&o), rate);
    assert!(d < ks_critical_1pct(o.len()), "D = {d}");
}

#[test]
fn kolmogorov_smirnov_rejects_gaps_that_are_not_exponential() {
    let rate = 2.0;
    let limit = Duration::from_secs(6000);
    let constant = offsets_until(limit, &Arrival::Constant { rate }, &mut rng(42));
    assert!(constant.len() >= 10_000);
    let d = ks_statistic_exponential(&gaps(&constant), rate);
    assert!(
        d > ks_critical_1pct(constant.len()),
        "constant gaps: D = {d}"
    );

    // Same mean, different shape: Gamma with burstiness 4.
    let regular = offsets_until(
        limit,
        &Arrival::Gamma {
            rate,
            burstiness: 4.0,
        },
        &mut rng(42),
    );
    let d = ks_statistic_exponential(&gaps(&regular), rate);
    assert!(
        d > ks_critical_1pct(regular.len()),
        "gamma(4) gaps: D = {d}"
    );

    // Uniform on [0, 2/rate]: mean 1/rate, yet not exponential.
    let uniform: Vec<f64> = (0..12_000)
        .map(|i| (i as f64 + 0.5) / 12_000.0 * 2.0 / rate)
        .collect();
    let d = ks_statistic_exponential(&uniform, rate);
    assert!(d > ks_critical_1pct(uniform.len()), "uniform gaps: D = {d}");
}

#[test]
fn gamma_gaps_have_mean_one_over_rate_and_cv_one_over_root_burstiness() {
    let rate = 10.0;
    for burstiness in [0.5, 4.0] {
        let arrival = Arrival::Gamma { rate, burstiness };
        let o = offsets_until(Duration::from_secs(10_000), &arrival, &mut rng(9));
        assert!(o.len() > 90_000);
        let (mean, cv) = mean_and_cv(&gaps(&o));
        let expected_cv = 1.0 / burstiness.sqrt();
        assert!(
            (mean * rate - 1.0).abs() < 0.02,
            "b={burstiness}: mean {mean}"
        );
        assert!(
            (cv / expected_cv - 1.0).abs() < 0.03,
            "b={burstiness}: cv {cv}"
        );
    }
}

#[test]
fn gamma_with_infinite_burstiness_is_evenly_spaced() {
    let arrival = Arrival::Gamma {
        rate: 4.0,
        burstiness: f64::INFINITY,
    };
    let o = offsets(8, &arrival, &mut rng(5));
    assert!(gaps(&o).iter().all(|&g| g == 0.25));
}

#[test]
fn linear_ramp_rates_follow_the_formula_per_request_index() {
    let arrival = Arrival::Ramp {
        strategy: RampStrategy::Linear,
        start: 1.0,
        end: 5.0,
        burstiness: f64::INFINITY,
    };
    // progress i/4 → rates 1, 2, 3, 4, 5 → gaps 1/r, not normalised.
    let o = offsets(5, &arrival, &mut rng(0));
    let expected = [1.0, 0.5, 1.0 / 3.0, 0.25, 0.2];
    for (gap, want) in gaps(&o).iter().zip(expected) {
        assert!((gap - want).abs() < 2e-9, "{gap} vs {want}");
    }
    assert!((secs(&o)[4] - 2.283_333_333).abs() < 1e-8);
}

#[test]
fn exponential_ramp_rates_follow_the_formula_per_request_index() {
    let arrival = Arrival::Ramp {
        strategy: RampStrategy::Exponential,
        start: 1.0,
        end: 16.0,
        burstiness: f64::INFINITY,
    };
    // rates 1·16^(i/4) = 1, 2, 4, 8, 16.
    let o = offsets(5, &arrival, &mut rng(0));
    let expected = [1.0, 0.5, 0.25, 0.125, 0.0625];
    for (gap, want) in gaps(&o).iter().zip(expected) {
        assert!((gap - want).abs() < 2e-9, "{gap} vs {want}");
    }
}

#[test]
fn linear_ramp_from_zero_uses_the_next_positive_rate_for_request_zero() {
    let arrival = Arrival::Ramp {
        strategy: RampStrategy::Linear,
        start: 0.0,
        end: 4.0,
        burstiness: f64::INFINITY,
    };
    // rates 0, 1, 2, 3, 4 → request 0 borrows rate 1.
    let o = offsets(5, &arrival, &mut rng(0));
    let expected = [1.0, 1.0, 0.5, 1.0 / 3.0, 0.25];
    for (gap, want) in gaps(&o).iter().zip(expected) {
        assert!((gap - want).abs() < 2e-9, "{gap} vs {want}");
    }
    // A single request ramps nowhere: rate = start = 0, so it is due at once.
    assert_eq!(offsets(1, &arrival, &mut rng(0)), vec![Duration::ZERO]);
}

#[test]
fn bursty_ramp_is_not_normalised() {
    let arrival = Arrival::Ramp {
        strategy: RampStrategy::Linear,
        start: 1.0,
        end: 1.0,
        burstiness: 1.0,
    };
    let o = offsets(1000, &arrival, &mut rng(11));
    assert_ne!(*o.last().unwrap(), Duration::from_secs(1000));
    let span = o.last().unwrap().as_secs_f64();
    assert!((span / 1000.0 - 1.0).abs() < 0.1, "span {span}");
}

#[test]
fn offsets_until_stay_strictly_before_the_limit() {
    let o = offsets_until(
        Duration::from_secs(1),
        &Arrival::Constant { rate: 4.0 },
        &mut rng(0),
    );
    let expected: Vec<Duration> = [250, 500, 750].map(Duration::from_millis).to_vec();
    assert_eq!(o, expected);
    let limit = Duration::from_secs(50);
    let o = offsets_until(limit, &POISSON_2, &mut rng(4));
    assert!(o.iter().all(|&t| t < limit));
    assert!(o.windows(2).all(|w| w[0] <= w[1]));
    assert!(offsets_until(Duration::ZERO, &POISSON_2, &mut rng(4)).is_empty());
}

#[test]
fn linear_ramp_until_a_limit_follows_the_cumulative_rate() {
    // r(t) = t over 10 s: Λ(t) = t²/2, so arrival k is at √(2k); Λ(10) = 50
    // puts arrival 50 exactly on the limit, where it is excluded.
    let arrival = Arrival::Ramp {
        strategy: RampStrategy::Linear,
        start: 0.0,
        end: 10.0,
        burstiness: f64::INFINITY,
    };
    let o = offsets_until(Duration::from_secs(10), &arrival, &mut rng(0));
    assert_eq!(o.len(), 49);
    for (k, t) in secs(&o).iter().enumerate() {
        let want = (2.0 * (k + 1) as f64).sqrt();
        assert!((t - want).abs() < 1e-9, "arrival {k}: {t} vs {want}");
    }
}

#[test]
fn exponential_ramp_until_a_limit_follows_the_cumulative_rate() {
    // r(t) = 2^t over 2 s (1 → 4 rps): Λ(t) = (2^t − 1)/ln 2, so arrival k is
    // at log2(1 + k·ln 2), and Λ(2) = 3/ln 2 ≈ 4.33 gives 4 arrivals.
    let arrival = Arrival::Ramp {
        strategy: RampStrategy::Exponential,
        start: 1.0,
        end: 4.0,
        burstiness: f64::INFINITY,
    };
    let o = offsets_until(Duration::from_secs(2), &arrival, &mut rng(0));
    assert_eq!(o.len(), 4);
    for (k, t) in secs(&o).iter().enumerate() {
        let want = (1.0 + (k + 1) as f64 * std::f64::consts::LN_2).log2();
        assert!((t - want).abs() < 1e-9, "arrival {k}: {t} vs {want}");
    }
}

#[test]
fn invalid_processes_do_not_panic() {
    let bad = [
        Arrival::Gamma {
            rate: 0.0,
            burstiness: 1.0,
        },
        Arrival::Gamma {
            rate: 2.0,
            burstiness: 0.0,
        },
        Arrival::Gamma {
            rate: f64::NAN,
            burstiness: f64::NAN,
        },
        Arrival::Constant { rate: -1.0 },
        Arrival::Ramp {
            strategy: RampStrategy::Linear,
            start: 0.0,
            end: 0.0,
            burstiness: 1.0,
        },
        Arrival::Ramp {
            strategy: RampStrategy::Linear,
            start: 5.0,
            end: 1.0,
            burstiness: 1.0,
        },
        Arrival::Ramp {
            strategy: RampStrategy::Exponential,
            start: 0.0,
            end: 4.0,
            burstiness: 1.0,
        },
        Arrival::Ramp {
            strategy: RampStrategy::Exponential,
            start: 4.0,
            end: 1.0,
            burstiness: 1.0,
        },
    ];
    for arrival in bad {
        assert!(
            validate(&arrival).is_err(),
            "{arrival:?} should be rejected"
        );
        assert_eq!(offsets(20, &arrival, &mut rng(0)).len(), 20);
        let until = offsets_until(Duration::from_secs(100), &arrival, &mut rng(0));
        assert!(
            until.iter().all(|&t| t < Duration::from_secs(100)),
            "{arrival:?}"
        );
    }
}

#[test]
fn validation_accepts_the_processes_vllm_accepts() {
    let good = [
        Arrival::Infinite,
        Arrival::Constant { rate: 0.5 },
        POISSON_2,
        Arrival::Gamma {
            rate: 2.0,
            burstiness: f64::INFINITY,
        },
        Arrival::Ramp {
            strategy: RampStrategy::Linear,
            start: 0.0,
            end: 5.0,
            burstiness: 1.0,
        },
        Arrival::Ramp {
            strategy: RampStrategy::Exponential,
            start: 1.0,
            end: 1.0,
            burstiness: 0.3,
        },
    ];
    for arrival in good {
        assert_eq!(validate(&arrival), Ok(()), "{arrival:?}");
    }
}

#[test]
fn validation_messages_name_the_flag() {
    let cases = [
        (Arrival::Constant { rate: 0.0 }, "--request-rate"),
        (
            Arrival::Gamma {
                rate: 1.0,
                burstiness: -1.0,
            },
            "--burstiness",
        ),
        (
            Arrival::Ramp {
                strategy: RampStrategy::Linear,
                start: -1.0,
                end: 2.0,
                burstiness: 1.0,
            },
            "--ramp-up-start-rps",
        ),
        (
            Arrival::Ramp {
                strategy: RampStrategy::Linear,
                start: 0.0,
                end: 0.0,
                burstiness: 1.0,
            },
            "--ramp-up-end-rps",
        ),
        (
            Arrival::Ramp {
                strategy: RampStrategy::Linear,
                start: 3.0,
                end: 2.0,
                burstiness: 1.0,
            },
            "must not exceed --ramp-up-end-rps",
        ),
        (
            Arrival::Ramp {
                strategy: RampStrategy::Exponential,
                start: 0.0,
                end: 2.0,
                burstiness: 1.0,
            },
            "--ramp-up-strategy exponential",
        ),
    ];
    for (arrival, needle) in cases {
        let message = validate(&arrival).unwrap_err();
        assert!(message.contains(needle), "{message:?} lacks {needle:?}");
    }
}

#[test]
fn a_trace_is_due_at_its_timestamps_over_the_speed() {
    let d = trace_offsets(&[0.0, 0.5, 2.0], 2.0);
    assert_eq!(d, [0.0, 0.25, 1.0].map(Duration::from_secs_f64));
}

#[test]
fn a_looped_trace_starts_at_its_first_row_and_repeats_after_one_mean_gap() {
    // Rows at 10, 11, 13 s: span 3 s, mean gap 1.5 s, period 4.5 s.
    let plan = trace_loop_until(&[10.0, 11.0, 13.0], 1.5, Duration::from_secs(5));
    let got: Vec<(f64, usize, u32)> = plan
        .iter()
        .map(|r| ((r.due.as_secs_f64() * 1e6).round() / 1e6, r.row, r.pass))
        .collect();
    // At 1.5x: 0, 0.667, 2.0, then pass 1 at 3.0, 3.667 (5.0 is not < 5).
    let want = [
        (0.0, 0, 0),
        (0.666667, 1, 0),
        (2.0, 2, 0),
        (3.0, 0, 1),
        (3.666667, 1, 1),
    ];
    assert_eq!(got, want);
    assert!(trace_loop_until(&[], 1.0, Duration::from_secs(5)).is_empty());
    // One row (or a zero span): no loop.
    assert_eq!(
        trace_loop_until(&[7.0], 1.0, Duration::from_secs(5)).len(),
        1
    );
    assert_eq!(
        trace_loop_until(&[7.0, 7.0], 1.0, Duration::from_secs(5)).len(),
        2
    );
}

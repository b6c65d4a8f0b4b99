use super::*;
use crate::twin::interference::Injection;

/// A prompt whose own step came out `step_ms` longer than the decoders'
/// baseline; over its whole wait they lost 100 ms more (the front end's
/// time, a stall), which the reading must leave out.
fn injection(prompt_tokens: u32, step_ms: f64) -> Injection {
    Injection {
        prompt_tokens,
        extra_s: (step_ms + 100.0) / 1e3,
        decoders: 3,
        lengthened_s: Vec::new(),
        step_extra_s: step_ms / 1e3,
    }
}

/// Three long prompts of 600 tokens (each cost the decoders 106.2 ms: at
/// 0.15 ms a token and α 1, 90 ms of tokens and a 16.2-ms fixed part), and
/// short ones of 32 tokens whose steps came out as given (ms over the
/// baseline).
fn probe(shorts: &[f64]) -> InterferenceObs {
    let long = Injection {
        prompt_tokens: 600,
        extra_s: 0.1062,
        decoders: 3,
        lengthened_s: Vec::new(),
        step_extra_s: 0.1062,
    };
    let mut injections = vec![long; 3];
    injections.extend(shorts.iter().map(|&e| injection(32, e)));
    InterferenceObs {
        decoders: 3,
        baseline_gap_s: 0.040,
        gap_noise_s: 0.001,
        injections,
    }
}

#[test]
fn the_fixed_cost_is_the_short_prompts_median_loss_less_their_own_cost() {
    // 32 tokens at 0.25 ms each: 8 ms of each loss is the prompt's.
    let cost = |n: u32| f64::from(n) * 2.5e-4;
    let obs = probe(&[20.0, 21.0, 170.0, 22.0, 23.0]);
    let (f, se, k) = fixed_cost_ms(&obs, 1.0, cost).unwrap();
    // Median of 12, 13, 14, 15, 162: the stall moves nothing.
    assert!((f - 14.0).abs() < 1e-9, "{f}");
    assert_eq!(k, 5);
    // MAD 1 ms: 1.253 × 1.4826 / √5.
    assert!((se - 1.253 * 1.4826 / 5f64.sqrt()).abs() < 1e-9, "{se}");
    // Half of a prefill's work lengthens the decoders' step: the loss is
    // α (F + c(n)), so F = 22 / 0.5 − 8.
    let (f, _, _) = fixed_cost_ms(&obs, 0.5, cost).unwrap();
    assert!((f - 36.0).abs() < 1e-9, "{f}");
}

#[test]
fn too_few_short_prompts_or_none_give_no_reading() {
    let cost = |_: u32| 0.0;
    assert!(fixed_cost_ms(&probe(&[20.0, 21.0]), 1.0, cost).is_none());
    assert!(fixed_cost_ms(&probe(&[]), 1.0, cost).is_none());
    // A disaggregated server: nothing of a prefill shows beside decoders.
    assert!(fixed_cost_ms(&probe(&[20.0, 21.0, 22.0]), 0.1, cost).is_none());
}

#[test]
fn the_short_prompts_loss_takes_the_fixed_part_out_of_alpha() {
    let obs = probe(&[20.0, 21.0, 22.0]);
    assert_eq!(obs.long().count(), 3);
    assert_eq!(obs.short().count(), 3);
    // The short ones lost 21 ms (4.8 ms of tokens and the fixed 16.2): the
    // long ones' 106.2 less that, over 568 tokens at 0.15 ms, is α = 1.
    let fit = |o: &InterferenceObs| crate::twin::interference::fit_alpha(o, 1.5e-4, 0.0).unwrap();
    let a = fit(&obs);
    assert!((a.value - 1.0).abs() < 1e-9, "{a:?}");
    // Without short prompts the fixed part counts as tokens: 106.2 / 90.
    let a = fit(&probe(&[]));
    assert!((a.value - 1.18).abs() < 1e-9, "{a:?}");
}

#[test]
fn a_cost_the_probe_cannot_tell_from_zero_is_named_so() {
    let e = estimate((-2.0, 3.0, 6), 3);
    assert_eq!(e.value, 0.0);
    assert_eq!(e.status, crate::twin::Status::NotIdentifiable);
    let e = estimate((13.0, 2.0, 6), 3);
    assert_eq!(e.value, 13.0);
    assert_eq!(e.status, crate::twin::Status::Measured);
}

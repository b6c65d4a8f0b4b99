//! Interference and budget on synthetic decoder timelines with known answers.

use super::*;

fn ms(x: f64) -> Duration {
    Duration::from_secs_f64(x / 1e3)
}

/// A decoder whose tokens arrive at `times` (ms), cut at the end.
fn decoder(times: &[f64]) -> RequestRecord {
    RequestRecord {
        first_token: Some(ms(times[0])),
        last_token: times.last().map(|&t| ms(t)),
        itl: times.windows(2).map(|w| ms(w[1] - w[0])).collect(),
        prompt_len: 4,
        ..Default::default()
    }
}

fn prompt(sent: f64, first: f64, n: u32) -> RequestRecord {
    RequestRecord {
        sent: ms(sent),
        first_token: Some(ms(first)),
        last_token: Some(ms(first)),
        prompt_len: n,
        output_tokens: 1,
        ..Default::default()
    }
}

/// Decoders stepping every `g` ms from 10 ms; each prompt `(sent, extras)`
/// is computed in the steps after the one in progress, lengthening them by
/// `extras` (ms); its first token comes at the end of its last step.
/// Returns the decoder timeline and the prompts' first tokens.
fn timeline(g: f64, prompts: &[(f64, Vec<f64>)], until: f64) -> (Vec<f64>, Vec<f64>) {
    let (mut t, mut times, mut firsts) = (10.0, vec![10.0], Vec::new());
    let mut pending: Vec<f64> = Vec::new();
    let mut next = 0;
    while t < until {
        let busy = !pending.is_empty();
        t += g + if busy { pending.remove(0) } else { 0.0 };
        times.push(t);
        if busy && pending.is_empty() {
            firsts.push(t);
        }
        if next < prompts.len() && prompts[next].0 < t {
            pending = prompts[next].1.clone();
            next += 1;
        }
    }
    (times, firsts)
}

fn probe(alpha: f64, n: u32, chunk: Option<u32>) -> InterferenceObs {
    // 10 ms steps, 100 µs per prompt token: a prompt costs α·0.1·n ms in all.
    let chunks: Vec<f64> = match chunk {
        None => vec![alpha * 0.1 * f64::from(n)],
        Some(c) => (0..n.div_ceil(c))
            .map(|k| alpha * 0.1 * f64::from(c.min(n - k * c)))
            .collect(),
    };
    let sends = [105.0, 405.0, 705.0, 1005.0];
    let prompts: Vec<(f64, Vec<f64>)> = sends.iter().map(|&s| (s, chunks.clone())).collect();
    let (times, firsts) = timeline(10.0, &prompts, 1500.0);
    let decoders = vec![decoder(&times), decoder(&times), decoder(&times)];
    let injected: Vec<RequestRecord> = sends
        .iter()
        .zip(&firsts)
        .map(|(&s, &f)| prompt(s, f, n))
        .collect();
    observe(&decoders, &injected).unwrap()
}

#[test]
fn each_prompt_costs_the_decoders_alpha_times_its_prefill() {
    for alpha in [1.0, 0.5, 0.2] {
        let obs = probe(alpha, 400, None);
        assert_eq!(obs.injections.len(), 4);
        assert!((obs.baseline_gap_s - 0.010).abs() < 1e-9);
        for i in &obs.injections {
            assert!((i.extra_s - alpha * 0.040).abs() < 1e-9, "{i:?}");
            assert_eq!(i.decoders, 3);
        }
        let e = fit_alpha(&obs, 100e-6, 0.0).unwrap();
        assert!((e.value - alpha).abs() < 1e-6, "α {alpha}: {e:?}");
        assert_eq!(e.status, crate::twin::Status::Measured);
    }
}

#[test]
fn disaggregated_decoders_lose_nothing() {
    let obs = probe(0.0, 400, None);
    let e = fit_alpha(&obs, 100e-6, 5e-6).unwrap();
    assert!(e.value.abs() < 1e-6 && e.low == 0.0, "{e:?}");
    assert_eq!(fit_budget(&obs, &e, 100e-6, 0.05), None, "invisible at α 0");
}

#[test]
fn the_prefill_costs_uncertainty_carries_into_alpha() {
    let obs = probe(1.0, 400, None);
    let tight = fit_alpha(&obs, 100e-6, 0.0).unwrap();
    let loose = fit_alpha(&obs, 100e-6, 10e-6).unwrap();
    assert!(tight.uncertainty < 1e-6);
    assert!((loose.uncertainty - 0.1).abs() < 1e-6, "{loose:?}");
}

#[test]
fn more_lost_than_three_times_the_whole_prefill_is_a_misfit() {
    // The decoders lost 40 ms a prompt, but the fit says a prompt costs 4.
    let obs = probe(1.0, 400, None);
    let e = fit_alpha(&obs, 10e-6, 1e-6).unwrap();
    assert_eq!(e.status, crate::twin::Status::Misfit);
    assert_eq!(e.value, 3.0);
    assert!(e.uncertainty >= 6.99, "{e:?}");
    assert!(e.note.unwrap().contains("1000%"));
    // Twice is a mixed step slower than a lone prefill: measured, not held
    // at 1.
    let e = fit_alpha(&obs, 50e-6, 1e-6).unwrap();
    assert_eq!(e.status, crate::twin::Status::Measured);
    assert!((e.value - 2.0).abs() < 1e-9, "{e:?}");
}

#[test]
fn chunked_prompts_show_the_budget() {
    // 1000 tokens in chunks of 256 beside 3 decoders: a budget of 259.
    let obs = probe(1.0, 1000, Some(256));
    let i = &obs.injections[0];
    assert_eq!(i.lengthened_s.len(), 4);
    let alpha = fit_alpha(&obs, 100e-6, 0.0).unwrap();
    assert!((alpha.value - 1.0).abs() < 1e-6);
    let b = fit_budget(&obs, &alpha, 100e-6, 0.0).unwrap();
    assert!((b.value - 259.0).abs() < 1e-6, "{b:?}");
    // One lengthened gap per prompt: only a lower bound.
    let obs = probe(1.0, 300, None);
    let alpha = fit_alpha(&obs, 100e-6, 0.0).unwrap();
    let b = fit_budget(&obs, &alpha, 100e-6, 0.0).unwrap();
    assert_eq!(
        (b.status, b.value, b.high),
        (crate::twin::Status::LowerBound, 303.0, None)
    );
}

/// A short prompt waits 55 ms in the front end, a 120-ms stall among the
/// decoders' steps meanwhile; the step that computes it is 7 ms longer.
/// The whole wait counts the stall; the prompt's own step does not.
#[test]
fn the_step_that_computed_a_prompt_leaves_the_wait_before_it_out() {
    // 10 ms steps from 10 ms; the 4th step stalled (130 ms), the 7th the
    // prompt's (17 ms).
    let mut times = vec![10.0];
    for k in 1..=20 {
        let step = match k {
            4 => 130.0,
            7 => 17.0,
            _ => 10.0,
        };
        times.push(times[k - 1] + step);
    }
    let first = times[7];
    let dec: Vec<RequestRecord> = (0..3)
        .map(|d| decoder(&times.iter().map(|t| t + 0.1 * d as f64).collect::<Vec<_>>()))
        .collect();
    let obs = observe(&dec, &[prompt(times[1] + 2.0, first, 32)]).unwrap();
    let i = &obs.injections[0];
    assert!((obs.baseline_gap_s - 0.010).abs() < 1e-9);
    assert!((i.step_extra_s - 0.007).abs() < 1e-9, "{i:?}");
    assert!((i.extra_s - 0.127).abs() < 1e-9, "{i:?}");
}

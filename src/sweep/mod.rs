//! Sweep: the pure core of `kneecap sweep`. It owns SLO parsing and
//! evaluation ([`slo`]), the steady-state check ([`steady`]), the generator
//! health check ([`health`], from [`crate::metrics`]), the knee search
//! ([`mod@knee`], over the [`point`]s of the steps), the verdict on one step
//! ([`judge`]) and the one step judge shared by the live sweep and `kneecap
//! merge` ([`step`]: from one typed judgement, the step's row of a
//! [`crate::result::sweep::SweepResult`] and its point for the search), each
//! step's prompt seed ([`draws`]); [`rows`] builds the rows' parts. PURE:
//! the command layer runs the steps, scrapes `/metrics` and writes output;
//! nothing here reads a clock, a socket or a file.
//!
//! A step **passes** only when every SLO holds, the error rate is within its
//! bound, the step was steady, and the generator was healthy. A step where the
//! generator was limited is [`Verdict::GeneratorLimited`], unless a
//! latency SLO failed by far more than the generator's own delay could
//! explain ([`EXPLAINED_BY_GENERATOR`]): a step that failed only because the
//! generator fell behind is never the server's knee, but a server that
//! misses its SLO by seconds while the client is a few ms late has failed.
//! A step where most requests failed is judged on its failures alone
//! ([`failures`]), never as generator-limited.
//! The mirror rule holds for a pass: a step that met every latency SLO with
//! a margin of more than that many times the generator's delay, and passed
//! everything else, passes (a few ms of client delay cannot have moved its
//! latencies across the bound; what the delay changes is *when* requests
//! arrived, and a delayed schedule bunches arrivals, which is harder on the
//! server, not easier).
pub mod adaptive;
pub mod calibrate;
pub mod confidence;
pub mod draws;
pub mod evidence;
pub mod failures;
pub mod knee;
mod moves;
pub mod plateau;
pub mod point;
pub mod pooled;
pub mod prior;
pub mod rows;
pub mod slo;
mod slo_eval;
pub mod slo_hist;
pub mod steady;
pub mod step;
#[cfg(test)]
mod testing;

pub use crate::metrics::health::{self, generator_health, GeneratorHealth};
use crate::result::Verdict;
pub use knee::{
    knee, next_load, queue_onset, service_rate_estimate, Knee, LoadUnit, SearchPlan, StepPoint,
};
pub use slo::{evaluate, from_goodput, tail_samples, Slo, SloMetric, SloOp, SloOutcome, SloStat};
pub use steady::{assess, combine as combine_steadiness, Steadiness, SteadyThresholds};

/// Default bound on a step's error rate (failed / all requests in the window).
pub const DEFAULT_MAX_ERROR_RATE: f64 = 0.01;

/// Everything [`judge`] weighs for one step.
#[derive(Debug, Clone, Copy)]
pub struct StepVerdictInput<'a> {
    /// One outcome per configured SLO.
    pub slo_outcomes: &'a [SloOutcome],
    /// Failed / all requests of the step's window, 0–1.
    pub error_rate: f64,
    /// The largest acceptable error rate, 0–1 (e.g. [`DEFAULT_MAX_ERROR_RATE`]).
    pub max_error_rate: f64,
    /// The step's steady-state check.
    pub steadiness: &'a Steadiness,
    /// The generator's health over the step.
    pub generator: &'a GeneratorHealth,
}

/// Judge one step. Returns the verdict and every reason it is not a pass
/// (empty for a pass), generator reasons first.
pub fn judge(input: &StepVerdictInput<'_>) -> (Verdict, Vec<String>) {
    let mut reasons: Vec<String> = input
        .generator
        .reasons
        .iter()
        .map(|r| format!("generator limited: {r}"))
        .collect();
    reasons.extend(
        input
            .slo_outcomes
            .iter()
            .filter(|o| !o.pass)
            .map(SloOutcome::describe),
    );
    // Written so that a NaN error rate (nothing measurable) fails the step.
    let errors_within_bound = input.error_rate <= input.max_error_rate;
    if !errors_within_bound {
        reasons.push(format!(
            "error rate {} > {}",
            percent(input.error_rate),
            percent(input.max_error_rate)
        ));
    }
    if !input.steadiness.steady {
        reasons.extend(
            input
                .steadiness
                .reasons
                .iter()
                .map(|r| format!("not steady: {r}")),
        );
    }
    let server_failed = input.generator.limited && failed_beyond_the_generator(input);
    if server_failed {
        // The server's misses decided the verdict: they come first (the
        // step line shows the first reason), the generator's after.
        reasons.rotate_left(input.generator.reasons.len());
        reasons.push(format!(
            "the SLO failed by more than {EXPLAINED_BY_GENERATOR}× the generator's own delay: the server's failure, not the generator's"
        ));
    }
    let generator_reasons = input.generator.reasons.len();
    let server_passed = input.generator.limited
        && reasons.len() == generator_reasons
        && passed_beyond_the_generator(input);
    if server_passed {
        return (Verdict::Pass, Vec::new());
    }
    let verdict = if input.generator.limited && !server_failed {
        Verdict::GeneratorLimited
    } else if reasons.is_empty() {
        Verdict::Pass
    } else {
        Verdict::Fail
    };
    (verdict, reasons)
}

/// Whether every reason [`judge`] gives is a missed SLO: no generator
/// reason, errors within bound, steady, and no server failure beyond the
/// generator's delay. (A step that passed has no reasons at all.)
pub fn slo_misses_only(input: &StepVerdictInput<'_>) -> bool {
    input.generator.reasons.is_empty()
        && input.error_rate <= input.max_error_rate
        && input.steadiness.steady
        && !(input.generator.limited && failed_beyond_the_generator(input))
}

/// How many times its own delay a strained generator could plausibly add to
/// a latency. A late generator sends *less* load than asked (its requests go
/// out late), and what it adds to each measured latency is its own delay
/// (dispatch lateness, the request task's scheduling delay), a few ms. So an
/// SLO missed by far more than that delay was missed by the server.
pub const EXPLAINED_BY_GENERATOR: f64 = 10.0;

/// Whether some latency SLO failed by more than
/// [`EXPLAINED_BY_GENERATOR`] times the generator's largest delay (its
/// lateness p99, its bound, its scheduling delay p99).
fn failed_beyond_the_generator(input: &StepVerdictInput<'_>) -> bool {
    let Some(delay) = generator_delay_ms(input.generator) else {
        return false;
    };
    input.slo_outcomes.iter().any(|o| {
        let over = o.observed_ms.map(|ms| ms - o.slo.threshold_ms);
        !o.pass && o.attained.is_none() && over.is_some_and(|x| x > EXPLAINED_BY_GENERATOR * delay)
    })
}

/// The generator's largest delay, ms: its lateness p99, its bound, its
/// scheduling delay p99. `None` when not a positive number.
fn generator_delay_ms(g: &GeneratorHealth) -> Option<f64> {
    let delay = g
        .lateness_p99_ms
        .max(g.lateness_bound_ms)
        .max(g.scheduling_delay_p99_ms.unwrap_or(0.0));
    (delay.is_finite() && delay > 0.0).then_some(delay)
}

/// Whether every SLO passed, each a latency bound met by more than
/// [`EXPLAINED_BY_GENERATOR`] times the generator's largest delay. A
/// goodput-form SLO has no margin in ms, so it never qualifies.
fn passed_beyond_the_generator(input: &StepVerdictInput<'_>) -> bool {
    let Some(delay) = generator_delay_ms(input.generator) else {
        return false;
    };
    !input.slo_outcomes.is_empty()
        && input.slo_outcomes.iter().all(|o| {
            let margin = o.observed_ms.map(|ms| o.slo.threshold_ms - ms);
            o.pass
                && o.attained.is_none()
                && margin.is_some_and(|m| m > EXPLAINED_BY_GENERATOR * delay)
        })
}

/// A 0–1 fraction as a percentage with at most one decimal (`0.031` → `3.1%`).
fn percent(fraction: f64) -> String {
    let pct = (fraction * 1000.0).round() / 10.0;
    format!("{pct}%")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(text: &str, observed: f64, pass: bool) -> SloOutcome {
        SloOutcome {
            slo: text.parse().expect("valid SLO"),
            observed_ms: Some(observed),
            pass,
            samples: 10_000,
            tail_samples: 100,
            attained: None,
            warning: None,
            failures: 0,
            failed_in_tail: 0,
            vllm_observed_ms: None,
        }
    }

    fn steady(ok: bool, reasons: &[&str]) -> Steadiness {
        Steadiness {
            steady: ok,
            reasons: reasons.iter().map(|r| r.to_string()).collect(),
            ..Steadiness::default()
        }
    }

    fn generator(limited: bool) -> GeneratorHealth {
        GeneratorHealth {
            limited,
            reasons: if limited {
                vec!["generator CPU 97% busy ≥ 95%".to_string()]
            } else {
                vec![]
            },
            ..GeneratorHealth::default()
        }
    }

    #[test]
    fn a_step_meeting_everything_passes_with_no_reasons() {
        let slos = [outcome("p99_ttft_ms<=500", 420.0, true)];
        let (s, g) = (steady(true, &[]), generator(false));
        let input = StepVerdictInput {
            slo_outcomes: &slos,
            error_rate: 0.01,
            max_error_rate: 0.01,
            steadiness: &s,
            generator: &g,
        };
        assert_eq!(judge(&input), (Verdict::Pass, vec![]));
    }

    #[test]
    fn a_failing_step_lists_every_reason_in_plain_words() {
        let slos = [
            outcome("p99_ttft_ms<=500", 812.3, false),
            outcome("mean_tpot_ms<=30", 12.0, true),
        ];
        let (s, g) = (
            steady(false, &["in flight grew 41 → 230"]),
            generator(false),
        );
        let input = StepVerdictInput {
            slo_outcomes: &slos,
            error_rate: 0.031,
            max_error_rate: 0.01,
            steadiness: &s,
            generator: &g,
        };
        let (verdict, reasons) = judge(&input);
        assert_eq!(verdict, Verdict::Fail);
        assert_eq!(
            reasons,
            vec![
                "p99_ttft_ms 812.3 > 500".to_string(),
                "error rate 3.1% > 1%".to_string(),
                "not steady: in flight grew 41 → 230".to_string(),
            ]
        );
    }

    #[test]
    fn a_limited_generator_makes_the_step_generator_limited_even_if_slos_fail() {
        let slos = [outcome("p99_ttft_ms<=500", 900.0, false)];
        let (s, g) = (steady(true, &[]), generator(true));
        let input = StepVerdictInput {
            slo_outcomes: &slos,
            error_rate: 0.0,
            max_error_rate: 0.01,
            steadiness: &s,
            generator: &g,
        };
        let (verdict, reasons) = judge(&input);
        assert_eq!(verdict, Verdict::GeneratorLimited);
        assert_eq!(reasons.len(), 2);
        assert!(reasons[0].starts_with("generator limited: generator CPU"));
    }

    #[test]
    fn a_failure_far_beyond_the_generators_delay_is_the_servers() {
        let s = steady(true, &[]);
        let g = GeneratorHealth {
            lateness_p99_ms: 2.06,
            lateness_bound_ms: 1.81,
            ..generator(true)
        };
        let judged = |observed: f64| {
            let slos = [outcome("p99_ttft_ms<=200", observed, false)];
            let input = StepVerdictInput {
                slo_outcomes: &slos,
                error_rate: 0.0,
                max_error_rate: 0.01,
                steadiness: &s,
                generator: &g,
            };
            judge(&input)
        };
        // 3152 ms against 200: 2952 ms over, far beyond 10 × 2.06 ms.
        let (verdict, reasons) = judged(3152.0);
        assert_eq!(verdict, Verdict::Fail);
        // The server's miss comes first (the step line shows it), the
        // generator's strain is still listed.
        assert!(reasons[0].starts_with("p99_ttft_ms"), "{reasons:?}");
        assert!(
            reasons.iter().any(|r| r.starts_with("generator limited:")),
            "{reasons:?}"
        );
        assert!(
            reasons.last().unwrap().contains("the server's failure"),
            "{reasons:?}"
        );
        // 15 ms over: within what 2 ms of client delay might have done.
        assert_eq!(judged(215.0).0, Verdict::GeneratorLimited);
    }

    #[test]
    fn a_pass_far_inside_the_bound_is_the_servers_despite_a_late_generator() {
        let g = GeneratorHealth {
            lateness_p99_ms: 3.66,
            lateness_bound_ms: 3.16,
            ..generator(true)
        };
        let judged = |observed: f64, steady_ok: bool| {
            let slos = [outcome("p99_ttft_ms<=300", observed, observed <= 300.0)];
            let s = if steady_ok {
                steady(true, &[])
            } else {
                steady(false, &["in flight grew 4 → 40"])
            };
            let input = StepVerdictInput {
                slo_outcomes: &slos,
                error_rate: 0.0,
                max_error_rate: 0.01,
                steadiness: &s,
                generator: &g,
            };
            judge(&input)
        };
        // 131 ms against 300: 169 ms of margin, over 10 × 3.66 ms.
        assert_eq!(judged(131.0, true), (Verdict::Pass, vec![]));
        // 290 ms: 10 ms of margin, within what the delay might have done.
        assert_eq!(judged(290.0, true).0, Verdict::GeneratorLimited);
        // Far inside the bound but not steady: not a pass.
        assert_eq!(judged(131.0, false).0, Verdict::GeneratorLimited);
    }

    #[test]
    fn an_unmeasurable_error_rate_fails_the_step() {
        let (s, g) = (steady(true, &[]), generator(false));
        let input = StepVerdictInput {
            slo_outcomes: &[],
            error_rate: f64::NAN,
            max_error_rate: 0.01,
            steadiness: &s,
            generator: &g,
        };
        assert_eq!(judge(&input).0, Verdict::Fail);
    }
}

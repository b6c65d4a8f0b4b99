//! Rows: the parts of a [`SweepResult`] step row built from pure values
//! (distributions, SLO outcomes, steadiness, the step line on the console),
//! and the knee summary recomputed from the search's points. Shared by the live sweep
//! (the command layer) and `kneecap merge` of sharded sweeps, so both write
//! the same format.
//! PURE: no clock, no I/O.

use super::knee::{self, StepPoint};
use super::{slo, steady};
use crate::client::scrape::QueueSample;
use crate::metrics::stats::{self, Distribution};
use crate::result::sweep::{self as model, Dist, KneeSummary, LoadUnit, StepResult, SweepResult};
use std::process::ExitCode;
use std::time::Duration;

/// vLLM-style goodput counts requests meeting every per-request SLO; built
/// from the SLOs that have a per-request meaning (TTFT, TPOT, E2EL bounds).
pub fn goodput_slo(slos: &[slo::Slo]) -> Option<stats::GoodputSlo> {
    let mut g = stats::GoodputSlo::default();
    for s in slos {
        match s.metric {
            slo::SloMetric::Ttft => {
                g.ttft_ms = Some(g.ttft_ms.map_or(s.threshold_ms, |v| v.min(s.threshold_ms)))
            }
            slo::SloMetric::Tpot => {
                g.tpot_ms = Some(g.tpot_ms.map_or(s.threshold_ms, |v| v.min(s.threshold_ms)))
            }
            slo::SloMetric::E2el => {
                g.e2el_ms = Some(g.e2el_ms.map_or(s.threshold_ms, |v| v.min(s.threshold_ms)))
            }
            slo::SloMetric::Itl | slo::SloMetric::Ttfo => {}
        }
    }
    (g != stats::GoodputSlo::default()).then_some(g)
}

pub fn queue_stats(
    q: &[QueueSample],
    w0: Duration,
    w1: Duration,
) -> (Option<f64>, Option<f64>, Option<f64>) {
    let inside: Vec<&QueueSample> = q
        .iter()
        .filter(|s| s.t_s >= w0.as_secs_f64() && s.t_s < w1.as_secs_f64())
        .collect();
    let waiting: Vec<f64> = inside.iter().filter_map(|s| s.waiting).collect();
    let running: Vec<f64> = inside.iter().filter_map(|s| s.running).collect();
    let mean_of = |v: &[f64]| (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64);
    (
        mean_of(&waiting),
        waiting.iter().copied().reduce(f64::max),
        mean_of(&running),
    )
}

pub fn mean(it: impl Iterator<Item = f64>) -> f64 {
    let (sum, n) = it.fold((0.0, 0usize), |(s, n), v| (s + v, n + 1));
    if n == 0 {
        0.0
    } else {
        sum / n as f64
    }
}

pub fn dist(d: &Distribution) -> Dist {
    let p = |q: f64| d.percentile_ms(q).unwrap_or(0.0);
    Dist {
        count: d.count,
        mean: d.mean_ms,
        p50: p(50.0),
        p90: p(90.0),
        p99: p(99.0),
        p999: p(99.9),
        max: d.max_ms,
    }
}

pub fn slo_row(o: &slo::SloOutcome) -> model::SloOutcomeRow {
    model::SloOutcomeRow {
        slo: o.slo.to_string(),
        observed_ms: o.observed_ms,
        pass: o.pass,
        samples: o.samples,
        tail_samples: o.tail_samples,
        failures: o.failures,
        failed_in_tail: o.failed_in_tail,
        vllm_observed_ms: o.vllm_observed_ms,
        warning: o.warning.clone(),
        confidence: None,
    }
}

pub fn steady_row(s: &steady::Steadiness) -> model::SteadyRow {
    model::SteadyRow {
        steady: s.steady,
        throughput_ratio: s.throughput_ratio,
        mean_in_flight: s.mean_in_flight,
        mean_time_in_system_s: s.mean_time_in_system_s,
        littles_gap: s.littles_gap.unwrap_or(0.0),
        in_flight_slope_per_s: s.in_flight_slope_per_s,
        backlog_at_end: s.backlog_at_end,
        reasons: s.reasons.clone(),
    }
}

/// Recompute the knee, μ and queue onset from the steps so far.
pub fn finish(r: &mut SweepResult, history: &[StepPoint]) {
    let k = knee::knee(history);
    // Without a decided pass, the interval still has a lower end: the
    // lowest load that passed, within noise, with its confidence.
    let (last_pass, last_pass_confidence) = match k.pass_within_noise {
        Some((load, c)) => (Some(load), Some(c)),
        None => (k.last_pass, k.last_pass_confidence),
    };
    let goodput_at_knee = k.goodput_at_knee.or_else(|| {
        let load = last_pass?;
        history.iter().find(|p| p.load == load).map(|p| p.goodput)
    });
    r.knee = KneeSummary {
        last_pass,
        first_fail: k.first_fail,
        goodput_at_knee,
        bounded_by_generator: k.bounded_by_generator,
        non_monotonic: k.non_monotonic,
        last_pass_confidence,
        first_fail_confidence: k.first_fail_confidence,
        undecided: k
            .undecided
            .into_iter()
            .filter(|&l| last_pass.is_none_or(|p| l > p))
            .collect(),
        last_pass_pooled: k.last_pass_pooled,
        last_pass_within_noise: k.pass_within_noise.is_some(),
        explain: None,
        energy_per_token_j: r
            .steps
            .iter()
            .find(|s| Some(s.load) == last_pass)
            .and_then(|s| s.gpu.as_ref()?.joules_per_output_token),
    };
    // Open loop: an overloaded step's throughput is μ. Closed loop never
    // overloads the client's way; there the server's own queue says when the
    // batch was full and throughput had reached μ.
    r.service_rate_estimate = match r.mode {
        LoadUnit::Concurrency => knee::service_rate_from_queue(history),
        LoadUnit::Rate | LoadUnit::TraceSpeed => knee::service_rate_estimate(history),
    };
    r.queue_onset_load = knee::queue_onset(history);
}

pub fn step_line(s: &StepResult, unit: &str) -> String {
    let verdict = s.verdict.label();
    let why = s
        .reasons
        .first()
        .map(|r| format!(" — {r}"))
        .unwrap_or_default();
    let cache = match s.prefix_cache.as_ref().and_then(|p| p.hit_rate) {
        Some(rate) => format!(", cache hit {:.1}%", rate * 100.0),
        None => String::new(),
    };
    let spec = match &s.spec_decode {
        Some(sd) => format!(", accept len {:.2}", sd.acceptance_length),
        None => String::new(),
    };
    let gpu = crate::report::gpu_text::step_part(s);
    let mut line = format!(
        "  step {:>8.2} {unit}: achieved {:>7.2} req/s, p99 TTFT {:>8.1} ms, {} requests{cache}{spec}{gpu} → {verdict}{why}",
        s.load, s.achieved_rate, s.ttft_ms.p99, s.n_requests
    );
    // Where failed requests (misses) changed an SLO's statistic: both values.
    for note in crate::report::misses::step_notes(s) {
        line.push_str("\n      failures as misses: ");
        line.push_str(&note);
    }
    line
}

pub fn exit_code(r: &SweepResult) -> ExitCode {
    if r.interrupted {
        ExitCode::from(2)
    } else if r.knee.last_pass.is_none() {
        ExitCode::from(1) // not even the lowest load met the SLO
    } else {
        ExitCode::SUCCESS
    }
}

/// The due offsets (s from the step start) of a step's requests, sorted:
/// the intended schedule, written with `--save-detailed`.
pub fn due_times(records: &[crate::metrics::RequestRecord]) -> Vec<f64> {
    let mut due: Vec<f64> = records.iter().map(|r| r.due.as_secs_f64()).collect();
    due.sort_by(f64::total_cmp);
    due
}

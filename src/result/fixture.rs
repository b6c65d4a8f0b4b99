//! Test fixtures shared by the table, chart and HTML renderers' tests: a
//! realistic sweep of a server with μ ≈ 40 req/s (throughput follows the
//! offered load up to ~40 then plateaus; p99 TTFT flat near 50 ms, then it
//! explodes; the waiting queue is empty, then climbs).

use crate::client::scrape::QueueSample;
use crate::result::sweep::{
    Dist, KneeSummary, LoadUnit, StepResult, SweepResult, Verdict, Workload,
};

/// Service rate of the fixture server (req/s).
pub const MU: f64 = 40.0;

/// A distribution with `p50` and `p99` (other fields derived).
pub fn dist(p50: f64, p99: f64) -> Dist {
    Dist {
        count: 500,
        mean: p50 * 1.1,
        p50,
        p90: (p50 + p99) / 2.0,
        p99,
        p999: p99 * 1.3,
        max: p99 * 1.5,
    }
}

/// One step at `load` with a verdict; latency and queue follow utilisation.
pub fn step(load: f64, verdict: Verdict, offered: f64, mu: f64) -> StepResult {
    let rho = if mu > 0.0 { load / mu } else { 0.0 };
    let achieved = offered.min(mu * 1.005);
    let p99_ttft = if rho < 0.85 {
        50.0 + 80.0 * rho * rho
    } else {
        500.0 * (rho - 0.85) * 40.0 + 500.0
    };
    let waiting = if rho < 0.85 { 0.0 } else { (rho - 0.85) * 60.0 };
    let queue = (0..10)
        .map(|i| QueueSample {
            t_s: i as f64,
            waiting: Some(waiting * i as f64 / 5.0),
            running: Some((rho.min(1.0) * 48.0).round()),
            kv_cache_usage: Some(rho.min(1.0) * 0.9),
            preemptions: Some(if rho > 1.0 { i as f64 * 3.0 } else { 0.0 }),
        })
        .collect();
    let pass = verdict == Verdict::Pass;
    StepResult {
        load,
        verdict,
        reasons: if pass {
            vec![]
        } else {
            vec![format!(
                "p99_ttft_ms {p99_ttft:.0} > 500 (SLO p99_ttft_ms<=500)"
            )]
        },
        offered_rate: offered,
        achieved_rate: achieved,
        output_token_rate: achieved * 128.0,
        goodput: if pass {
            achieved * 0.99
        } else {
            achieved * 0.3
        },
        ttft_ms: dist(45.0 + 10.0 * rho, p99_ttft),
        tpot_ms: dist(20.0 + 5.0 * rho, 25.0 + 30.0 * rho),
        itl_ms: dist(20.0, 30.0),
        e2el_ms: dist(3000.0 + 500.0 * rho, 4000.0 + p99_ttft),
        mean_waiting: Some(waiting),
        max_waiting: Some(waiting * 2.0),
        mean_running: Some((rho.min(1.0) * 48.0).round()),
        queue_source: Some("vllm".into()),
        queue,
        steady: crate::result::sweep::SteadyRow {
            steady: rho < 0.95,
            ..Default::default()
        },
        ..Default::default()
    }
}

/// A sweep with the given passing and failing loads (knee filled in).
pub fn sweep_with(passes: &[f64], fails: &[f64]) -> SweepResult {
    let mut steps: Vec<StepResult> = passes
        .iter()
        .map(|&l| step(l, Verdict::Pass, l, MU * 10.0))
        .collect();
    steps.extend(fails.iter().map(|&l| step(l, Verdict::Fail, l, MU)));
    let last_pass = passes.iter().copied().reduce(f64::max);
    SweepResult {
        kind: "sweep".into(),
        schema_version: 1,
        workload: Workload {
            target: "http://127.0.0.1:8000".into(),
            endpoint: "/v1/completions".into(),
            model: "llama-3-8b".into(),
            dataset: "random".into(),
            mean_input_tokens: 512.0,
            mean_output_tokens: 128.0,
            arrival: "poisson".into(),
            burstiness: 1.0,
            seed: 42,
            ..Default::default()
        },
        slos: vec!["p99_ttft_ms<=500".into(), "p99_tpot_ms<=50".into()],
        max_error_rate: 0.01,
        mode: LoadUnit::Rate,
        steps,
        knee: KneeSummary {
            last_pass,
            first_fail: fails.iter().copied().reduce(f64::min),
            goodput_at_knee: last_pass.map(|l| l * 0.99),
            ..Default::default()
        },
        complete: true,
        ..Default::default()
    }
}

/// The 7-step sweep: knee between 32 and 36 req/s, μ ≈ 40, simulated.
pub fn sweep() -> SweepResult {
    let mut r = SweepResult {
        kind: "sweep".into(),
        ..sweep_with(&[], &[])
    };
    // Ran in search order, not load order: renderers must sort.
    for &(l, v) in &[
        (8.0, Verdict::Pass),
        (16.0, Verdict::Pass),
        (48.0, Verdict::Fail),
        (32.0, Verdict::Pass),
        (40.0, Verdict::Fail),
        (24.0, Verdict::Pass),
        (36.0, Verdict::Fail),
    ] {
        r.steps.push(step(l, v, l, MU));
    }
    r.knee = KneeSummary {
        last_pass: Some(32.0),
        first_fail: Some(36.0),
        goodput_at_knee: Some(31.68),
        ..Default::default()
    };
    r.service_rate_estimate = Some(40.2);
    r.queue_onset_load = Some(36.0);
    r.sim_service_rate = Some(40.0);
    r.simulated = true;
    r
}

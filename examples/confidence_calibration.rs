//! Benchmark: is a step's stated confidence honest? Runs the slot server of
//! issue 14 (4 slots, 5 ms steps, 16 in / 19 out tokens: μ ≈ 42.1 req/s) in
//! virtual time — a simulation, through the simulator's own engine model —
//! at loads around its true knee for `p99_ttft_ms<=300` (35.3 req/s, from
//! `kneecap sim --explain --slo`, 10 seeds × 400,000 requests), and judges
//! every seeded window exactly as an adaptive sweep step does: the verdict
//! tested at the step's checkpoints (8 s, doubling, the cap; window from
//! 2 s), each confidence corrected for those tests, the step ending at the
//! first decided test. A step may say "pass at 90%" at a load whose true p99
//! is over the bound at most 10% of the time; this counts how often it does.
//!
//! Usage: cargo run --release --example confidence_calibration -- [SEEDS] [CAP_S...]
//! Prints one line per (cap, load): passes, fails and undecided over SEEDS,
//! and how many windows had no request over the bound at all.
//!
//! With `sweep` as the first argument (`-- sweep [SEEDS]`) it runs the whole
//! calibrated search instead (μ = 42.1 req/s from the model, tolerance 5%,
//! 32 s step caps), every step a seeded virtual-time window judged as above,
//! and prints each seed's bracket, steps and measured seconds, then how
//! often the reported ends are wrong (a pass end above the true knee, a
//! fail end below it) against the confidence they claimed.
use kneecap::metrics::RequestRecord;
use kneecap::sim::model::ModelParams;
use kneecap::sim::preset;
use kneecap::sim::virtual_time::{simulate, unit_gaps, VirtualLoad};
use kneecap::sweep::adaptive::{step_decision, window_point, AdaptiveRule};
use kneecap::sweep::calibrate::plan_after;
use kneecap::sweep::confidence::Decision;
use kneecap::sweep::knee::{knee, next_load, LoadUnit, SearchPlan, StepPoint};
use kneecap::sweep::slo::Slo;
use std::time::Duration;

/// The true knee (virtual time, docs/benchmarks/2026-12-02.md "Time to knee").
const KNEE: f64 = 35.25;

fn slot_server() -> ModelParams {
    ModelParams {
        max_num_seqs: 4,
        per_prefill_token: Duration::ZERO,
        per_decode_seq: Duration::ZERO,
        max_num_batched_tokens: 8192,
        ..preset::tiny()
    }
}

/// One seeded window at `rate`, as the records a step would hold.
fn window(rate: f64, length: Duration, seed: u64) -> Vec<RequestRecord> {
    let requests = (rate * length.as_secs_f64()).ceil() as usize;
    let load = VirtualLoad::fixed(16, 19, 200, requests);
    let gaps = unit_gaps(seed, 1.0, load.gaps_needed()).expect("Poisson gaps");
    let run = simulate(&slot_server(), &load, &gaps, rate).expect("a valid model");
    let t0 = run.requests[0].arrival;
    run.requests
        .iter()
        .map(|r| RequestRecord {
            due: r.arrival - t0,
            released: r.arrival - t0,
            sent: r.arrival - t0,
            first_token: Some(r.first_token - t0),
            last_token: Some(r.finish - t0),
            output_tokens: r.output_tokens,
            prompt_len: 16,
            ..RequestRecord::default()
        })
        .collect()
}

/// The step's decision: tested at each checkpoint and at the cap, ending at
/// the first decided test. Returns it, when the step ended, and its window.
fn judge(
    rule: &AdaptiveRule,
    slos: &[Slo],
    records: &[RequestRecord],
) -> (Decision, Duration, Vec<RequestRecord>) {
    let mut last = (Decision::Undecided, rule.cap, Vec::new());
    for cut in rule.checkpoints().into_iter().chain([rule.cap]) {
        let sample: Vec<RequestRecord> = records
            .iter()
            .filter(|r| r.due >= rule.window_start && r.due < cut)
            .cloned()
            .collect();
        let decision = step_decision(slos, &sample, rule.level, rule.tests()).0;
        last = (decision, cut, sample);
        if decision != Decision::Undecided {
            break;
        }
    }
    last
}

fn rule(cap_s: f64) -> AdaptiveRule {
    AdaptiveRule {
        window_start: Duration::from_secs(2),
        min_length: Duration::from_secs(8),
        min_requests: 100,
        cap: Duration::from_secs_f64(cap_s),
        level: 0.9,
        prior: None,
    }
}

/// One sweep step in virtual time, as the live sweep's judge sees it: the
/// verdict is the point estimate over the step's window; its confidence and
/// evidence are judged once more over that window.
fn sweep_step(load: f64, seed: u64, slos: &[Slo]) -> (StepPoint, Duration) {
    let rule = rule(
        std::env::var("CALIBRATION_CAP")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(32.0),
    );
    let records = window(load, rule.cap + Duration::from_secs(1), seed);
    let (_, ended, window) = judge(&rule, slos, &records);
    let point = window_point(load, slos, &window, &rule);
    (point, ended)
}

/// The calibrated search over `seeds` seeds: each seed's bracket, and how
/// often an end claimed at 90% or more is on the wrong side of the knee.
fn sweeps(seeds: u64) {
    let slos = vec!["p99_ttft_ms<=300".parse::<Slo>().expect("valid SLO")];
    let plan = plan_after(
        &SearchPlan::auto(1.0, 4096.0, LoadUnit::Rate),
        Some(4.0 / 0.095),
    )
    .with_stops(0.05, 16);
    println!("seed  steps  measured_s  pass_end (conf)  fail_end (conf)");
    let (mut wrong_pass, mut claimed_pass, mut wrong_fail, mut claimed_fail) = (0, 0, 0, 0);
    let (mut within5, mut within10, mut total_s) = (0, 0, 0.0);
    for seed in 0..seeds {
        let mut history: Vec<StepPoint> = Vec::new();
        let mut took = Duration::ZERO;
        while let Some(load) = next_load(&plan, &history) {
            let (point, t) = sweep_step(load, 10_000 * (seed + 1) + history.len() as u64, &slos);
            took += t;
            history.push(point);
        }
        if std::env::var_os("CALIBRATION_STEPS").is_some() {
            for p in &history {
                println!(
                    "      {:.2} {:?}{} {:.2}",
                    p.load,
                    p.verdict,
                    if p.undecided { " (within noise)" } else { "" },
                    p.confidence.unwrap_or(0.0)
                );
            }
        }
        let k = knee(&history);
        let pass = k
            .last_pass
            .map(|l| (l, k.last_pass_confidence.unwrap_or(0.0)));
        let pass = pass.or(k.pass_within_noise);
        let fail = k
            .first_fail
            .map(|l| (l, k.first_fail_confidence.unwrap_or(0.0)));
        if let Some((l, _)) = pass.filter(|&(_, c)| c >= 0.9) {
            claimed_pass += 1;
            wrong_pass += usize::from(l > KNEE);
        }
        if let Some((l, _)) = fail.filter(|&(_, c)| c >= 0.9) {
            claimed_fail += 1;
            wrong_fail += usize::from(l < KNEE);
        }
        let near = |x: Option<(f64, f64)>, tol: f64| {
            x.is_some_and(|(l, c)| c >= 0.9 && (l / KNEE - 1.0).abs() <= tol)
        };
        within5 += usize::from(near(pass, 0.05) && near(fail, 0.05));
        within10 += usize::from(near(pass, 0.10) && near(fail, 0.10));
        total_s += took.as_secs_f64();
        let show = |x: Option<(f64, f64)>| {
            x.map_or("—".to_string(), |(l, c)| format!("{l:.2} ({c:.2})"))
        };
        println!(
            "{seed:>4}  {:>5}  {:>10.0}  {:>15}  {:>15}",
            history.len(),
            took.as_secs_f64(),
            show(pass),
            show(fail)
        );
    }
    println!(
        "pass ends claimed at >= 90%: {claimed_pass}, above the knee: {wrong_pass}; fail ends claimed: {claimed_fail}, below it: {wrong_fail}; both ends within 5% at >= 90%: {within5} (within 10%: {within10}) of {seeds}; mean measured time {:.0} s",
        total_s / seeds as f64
    );
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("sweep") {
        sweeps(args.get(1).and_then(|s| s.parse().ok()).unwrap_or(100));
        return;
    }
    let seeds: u64 = args.first().and_then(|s| s.parse().ok()).unwrap_or(400);
    let caps: Vec<f64> = match args.get(1..) {
        Some(rest) if !rest.is_empty() => rest.iter().filter_map(|s| s.parse().ok()).collect(),
        _ => vec![32.0, 64.0, 128.0],
    };
    let slos = vec!["p99_ttft_ms<=300".parse::<Slo>().expect("valid SLO")];
    println!(
        "slot server in virtual time (a simulation); true knee {KNEE} req/s; {seeds} seeds per row"
    );
    println!("cap_s  load  x_knee  pass  fail  undecided  clean  (a pass above 1.00x or a fail below it is wrong; clean: no request over the bound in the window)");
    for &cap in &caps {
        let rule = rule(cap);
        for x in [0.88, 0.95, 1.0, 1.05] {
            let rate = KNEE * x;
            let (mut pass, mut fail, mut clean) = (0, 0, 0);
            for seed in 0..seeds {
                let records = window(rate, rule.cap + Duration::from_secs(1), 1_000 + seed);
                // A window (warm-up to cap) with no request over the bound:
                // the most a pass can rest on.
                clean += u64::from(records.iter().all(|r| {
                    r.due < rule.window_start
                        || r.due >= rule.cap
                        || slos[0].threshold_ms / 1000.0
                            >= (r.first_token.unwrap_or(r.due) - r.due).as_secs_f64()
                }));
                match judge(&rule, &slos, &records).0 {
                    Decision::Pass => pass += 1,
                    Decision::Fail => fail += 1,
                    Decision::Undecided => {}
                }
            }
            let und = seeds - pass - fail;
            println!(
                "{cap:>5.0}  {rate:>5.2}  {x:>5.2}  {pass:>4}  {fail:>4}  {und:>9}  {clean:>5}"
            );
        }
    }
}

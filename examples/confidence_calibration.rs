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
//! Prints one line per (cap, load): passes, fails and undecided over SEEDS.
use kneecap::metrics::RequestRecord;
use kneecap::sim::model::ModelParams;
use kneecap::sim::preset;
use kneecap::sim::virtual_time::{simulate, unit_gaps, VirtualLoad};
use kneecap::sweep::adaptive::{step_decision, AdaptiveRule};
use kneecap::sweep::confidence::Decision;
use kneecap::sweep::slo::Slo;
use std::time::Duration;

/// The true knee (virtual time, BENCHMARKS.md "Time to knee").
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
    let load = VirtualLoad {
        input_len: 16,
        output_len: 19,
        warmup: 200,
        requests: (rate * length.as_secs_f64()).ceil() as usize,
        token_times: false,
    };
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
/// the first decided test.
fn judge(rule: &AdaptiveRule, slos: &[Slo], records: &[RequestRecord]) -> Decision {
    let mut last = Decision::Undecided;
    for cut in rule.checkpoints().into_iter().chain([rule.cap]) {
        let sample: Vec<RequestRecord> = records
            .iter()
            .filter(|r| r.due >= rule.window_start && r.due < cut)
            .cloned()
            .collect();
        last = step_decision(slos, &sample, rule.level, rule.tests()).0;
        if last != Decision::Undecided {
            break;
        }
    }
    last
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let seeds: u64 = args.first().and_then(|s| s.parse().ok()).unwrap_or(400);
    let caps: Vec<f64> = match args.get(1..) {
        Some(rest) if !rest.is_empty() => rest.iter().filter_map(|s| s.parse().ok()).collect(),
        _ => vec![32.0, 64.0, 128.0],
    };
    let slos = vec!["p99_ttft_ms<=300".parse::<Slo>().expect("valid SLO")];
    println!(
        "slot server in virtual time (a simulation); true knee {KNEE} req/s; {seeds} seeds per row"
    );
    println!("cap_s  load  x_knee  pass  fail  undecided  (a pass above 1.00x or a fail below it is wrong)");
    for &cap in &caps {
        let rule = AdaptiveRule {
            window_start: Duration::from_secs(2),
            min_length: Duration::from_secs(8),
            min_requests: 100,
            cap: Duration::from_secs_f64(cap),
            level: 0.9,
        };
        for x in [0.88, 0.95, 1.0, 1.05] {
            let rate = KNEE * x;
            let (mut pass, mut fail) = (0, 0);
            for seed in 0..seeds {
                let records = window(rate, rule.cap + Duration::from_secs(1), 1_000 + seed);
                match judge(&rule, &slos, &records) {
                    Decision::Pass => pass += 1,
                    Decision::Fail => fail += 1,
                    Decision::Undecided => {}
                }
            }
            let und = seeds - pass - fail;
            println!("{cap:>5.0}  {rate:>5.2}  {x:>5.2}  {pass:>4}  {fail:>4}  {und:>9}");
        }
    }
}

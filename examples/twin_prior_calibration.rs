//! Benchmark (issue 27): is a twin's prior on a step's verdict honest?
//!
//! `sweep --predict` / `--twin` with `--adaptive` let each step's verdict
//! weigh what the twin predicts at the step's load, as a stated number of
//! samples (`sweep::prior`), and open the search at the twin-clear loads
//! outside the predicted interval (`twin::prior::clear_loads`). This checks,
//! on hidden servers, how often a step decided that way is wrong.
//!
//! For each of N hidden parameter sets (drawn as `twin_recovery.rs` draws
//! them, `support/hidden.rs`), one workload of 256/64, 2048/256 and
//! 1024/128 in turn, and the SLO `p99_ttft_ms` within 5 × a lone request's
//! TTFT:
//!
//! 1. `kneecap profile --budget B` against the built-in simulator started
//!    with the hidden parameters (real time, real HTTP on loopback);
//! 2. the true knee: the hidden parameters' own virtual-time knee (3 seeds ×
//!    5,000 requests, the median);
//! 3. for each twin error `e` (`--errors`): the profile's time costs (step
//!    base, per prefill token, per decoding sequence, and every corner's)
//!    multiplied by `1 + e`, a twin wrong by about `e` on purpose (0: the
//!    profile as measured); its prediction and clear loads as the sweep
//!    computes them (3 seeds × 5,000 requests);
//! 4. at each clear load, and at 0.9 and 1.1 × the true knee (where a wrong
//!    twin leans the wrong way), `--trials` seeded adaptive steps in virtual
//!    time on the hidden server, as the live sweep runs them against the
//!    simulator (1 s warm-up, 4 s minimum, 80 requests, capped at `--cap`
//!    s, looked at every 250 ms, the step ended at the first decided look;
//!    the verdict and its decision then judged over the whole window), for
//!    each prior weight (`--weights`; 0 = the samples alone).
//!
//! A decided pass is wrong when its load is above the true knee, a decided
//! fail when at or below it. Loads within 3% of the true knee (the truth's
//! own seed spread) are counted apart.
//!
//! Usage: cargo run --release --example twin_prior_calibration -- --bin PATH
//!        [--sets 20] [--seed 1] [--budget 30] [--trials 3] [--cap 120]
//!        [--weights 0,600,2000] [--errors 0,0.15,-0.15] [--dir DIR]
use kneecap::metrics::RequestRecord;
use kneecap::sim::virtual_time::{simulate, unit_gaps, VirtualLoad};
use kneecap::sim::ModelParams;
use kneecap::sweep::adaptive::{step_decision_with, AdaptiveRule, LOOK_EVERY};
use kneecap::sweep::confidence::Decision;
use kneecap::sweep::prior::StepPrior;
use kneecap::sweep::slo::{evaluate, Slo};
use kneecap::twin::knee::{true_knee, TruthConfig};
use kneecap::twin::predict::{distinct_corners, predict, PredictConfig};
use kneecap::twin::prior::{clear_loads, step_prior};
use kneecap::twin::ServerProfile;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

#[path = "support/hidden.rs"]
mod hidden;
use hidden::Hidden;

const WORKLOADS: [(u32, u32); 3] = [(256, 64), (2048, 256), (1024, 128)];
/// Loads this close to the true knee are counted apart (its seed spread).
const NEAR: f64 = 0.03;

struct Args {
    bin: PathBuf,
    sets: u64,
    seed: u64,
    budget: f64,
    trials: u64,
    cap_s: f64,
    weights: Vec<usize>,
    errors: Vec<f64>,
    dir: PathBuf,
}

fn args() -> Args {
    let mut a = Args {
        bin: PathBuf::from("target/release/kneecap"),
        sets: 20,
        seed: 1,
        budget: 30.0,
        trials: 3,
        cap_s: 120.0,
        weights: vec![0, 600, 2000],
        errors: vec![0.0, 0.15, -0.15],
        dir: std::env::temp_dir().join("kneecap-twin-prior"),
    };
    let argv: Vec<String> = std::env::args().skip(1).collect();
    for pair in argv.chunks(2) {
        let v = pair.get(1).cloned().unwrap_or_default();
        let num = |what: &str| -> f64 {
            v.parse()
                .unwrap_or_else(|_| panic!("{what} wants a number, got {v:?}"))
        };
        let list = |what: &str| -> Vec<f64> {
            v.split(',')
                .map(|x| x.parse().unwrap_or_else(|_| panic!("{what}: {x:?}")))
                .collect()
        };
        match pair[0].as_str() {
            "--bin" => a.bin = PathBuf::from(&v),
            "--sets" => a.sets = num("--sets") as u64,
            "--seed" => a.seed = num("--seed") as u64,
            "--budget" => a.budget = num("--budget"),
            "--trials" => a.trials = num("--trials") as u64,
            "--cap" => a.cap_s = num("--cap"),
            "--weights" => a.weights = list("--weights").iter().map(|&w| w as usize).collect(),
            "--errors" => a.errors = list("--errors"),
            "--dir" => a.dir = PathBuf::from(&v),
            other => panic!("unknown flag {other}; see the usage at the top of the file"),
        }
    }
    a
}

/// `kneecap profile` of the hidden server, read back.
fn profile(a: &Args, h: &Hidden, k: u64) -> Result<ServerProfile, String> {
    let path = a.dir.join(format!("profile-{}-{k}.json", a.seed));
    if !path.exists() {
        let out = Command::new(&a.bin)
            .args(["profile", "--budget", &a.budget.to_string(), "-o"])
            .arg(&path)
            .args(h.flags())
            .output()
            .map_err(|e| format!("cannot run {}: {e}", a.bin.display()))?;
        if !out.status.success() {
            return Err(String::from_utf8_lossy(&out.stderr).into_owned());
        }
    }
    let text = std::fs::read_to_string(&path).map_err(|e| e.to_string())?;
    ServerProfile::from_json(&text)
}

/// A lone request's TTFT on `params`, seconds (virtual time).
fn lone_ttft(params: &ModelParams, (input, output): (u32, u32)) -> f64 {
    let load = VirtualLoad::fixed(input, output, 0, 1);
    let gaps = unit_gaps(1, 1.0, load.gaps_needed()).expect("gaps");
    let run = simulate(params, &load, &gaps, 0.001).expect("a valid model");
    run.requests[0].ttft().as_secs_f64()
}

fn truth_config(
    params: ModelParams,
    shape: (u32, u32),
    slos: &[Slo],
    seeds: &[u64],
) -> TruthConfig {
    TruthConfig {
        params,
        load: VirtualLoad::fixed(shape.0, shape.1, 500, 5_000),
        slos: slos.to_vec(),
        range_ratio: (0.0, 0.0),
        burstiness: 1.0,
        seeds: seeds.to_vec(),
        precision: 0.005,
        tail: kneecap::sim::params::HostStalls::NONE,
    }
}

/// Time costs × `f`.
fn scaled(p: &ModelParams, f: f64) -> ModelParams {
    ModelParams {
        step_base: p.step_base.mul_f64(f),
        per_prefill_token: p.per_prefill_token.mul_f64(f),
        per_decode_seq: p.per_decode_seq.mul_f64(f),
        ..p.clone()
    }
}

/// One adaptive step in virtual time on the hidden server: (verdict held,
/// decision, seconds the step ran).
fn step(
    hidden: &ModelParams,
    shape: (u32, u32),
    slos: &[Slo],
    load: f64,
    prior: Option<StepPrior>,
    cap: Duration,
    seed: u64,
) -> (bool, Decision, f64) {
    let requests = (load * (cap.as_secs_f64() + 1.0)).ceil() as usize;
    let vload = VirtualLoad::fixed(shape.0, shape.1, 0, requests.max(1));
    let gaps = unit_gaps(seed, 1.0, vload.gaps_needed()).expect("gaps");
    let run = simulate(hidden, &vload, &gaps, load).expect("a valid model");
    let t0 = run.requests[0].arrival;
    let records: Vec<RequestRecord> = run
        .requests
        .iter()
        .enumerate()
        .map(|(index, r)| RequestRecord {
            index,
            due: r.arrival - t0,
            released: r.arrival - t0,
            sent: r.arrival - t0,
            first_token: Some(r.first_token - t0),
            last_token: Some(r.finish - t0),
            output_tokens: r.output_tokens,
            ..RequestRecord::default()
        })
        .collect();
    let rule = AdaptiveRule {
        window_start: Duration::from_secs(1),
        min_length: Duration::from_secs(5),
        min_requests: 80,
        cap,
        level: 0.9,
        prior,
    };
    let end = first_end(&rule, slos, &records).unwrap_or(cap);
    let window: Vec<RequestRecord> = records
        .into_iter()
        .filter(|r| r.due >= rule.window_start && r.due < end)
        .collect();
    let held = slos.iter().all(|s| evaluate(s, &window).pass);
    let (decision, _, _) =
        step_decision_with(slos, &window, rule.level, rule.tests(), rule.prior.as_ref());
    (held, decision, end.as_secs_f64())
}

/// When the live step would end: the rule looked at every 250 ms, here only
/// from the first look after each checkpoint's requests have all finished
/// (before it the look's sample does not change) and every second after
/// that until the next (a pass may wait for the steady-state check).
fn first_end(rule: &AdaptiveRule, slos: &[Slo], records: &[RequestRecord]) -> Option<Duration> {
    let grid = |t: Duration| {
        let k = (t.as_secs_f64() / LOOK_EVERY.as_secs_f64()).ceil();
        LOOK_EVERY.mul_f64(k.max(1.0))
    };
    let cps = rule.checkpoints();
    for (i, &c) in cps.iter().enumerate() {
        let settled = records
            .iter()
            .filter(|r| r.due < c)
            .filter_map(|r| r.last_token)
            .max()
            .unwrap_or(c)
            .max(c);
        let next = cps.get(i + 1).copied().unwrap_or(rule.cap);
        let mut t = grid(settled);
        while t < next.min(rule.cap) {
            let finished: Vec<RequestRecord> = records
                .iter()
                .filter(|r| r.last_token.is_some_and(|f| f <= t))
                .cloned()
                .collect();
            let in_flight: Vec<Duration> = records
                .iter()
                .filter(|r| r.due < t && r.last_token.is_some_and(|f| f > t))
                .map(|r| r.due)
                .collect();
            if rule.look(t, slos, &finished, &in_flight).end {
                return Some(t);
            }
            t += Duration::from_secs(1);
        }
    }
    None
}

/// What the steps at one kind of load found, per (error, weight, kind).
#[derive(Default, Clone)]
struct Tally {
    steps: usize,
    decided_pass: usize,
    decided_fail: usize,
    wrong: usize,
    seconds: f64,
}

type Key = (String, usize, &'static str);

fn one_set(a: &Args, k: u64, tallies: &mut BTreeMap<Key, Tally>) -> Result<(), String> {
    let hidden = Hidden::draw(a.seed.wrapping_add(k));
    let shape = WORKLOADS[(k as usize - 1) % WORKLOADS.len()];
    let params = hidden.params();
    let slo: Slo = format!("p99_ttft_ms<={:.1}", 5.0 * lone_ttft(&params, shape) * 1e3).parse()?;
    let slos = vec![slo];
    let truth = true_knee(&truth_config(
        params.clone(),
        shape,
        &slos,
        &[101, 102, 103],
    ))?
    .median;
    let profile = profile(a, &hidden, k)?;
    let misfit = profile.misfit();
    print!(
        "set {k:>2} {}/{} {} true knee {truth:.3}",
        shape.0, shape.1, slos[0]
    );
    if misfit.is_some() {
        println!(": the profile flagged a misfit, so a sweep takes no prior; skipped");
        return Ok(());
    }
    for &e in &a.errors {
        let central = scaled(&profile.params(), 1.0 + e);
        let corners: Vec<ModelParams> = profile
            .corners()
            .into_iter()
            .map(|c| scaled(&c.params, 1.0 + e))
            .collect();
        let cfg = truth_config(
            central.clone(),
            shape,
            &slos,
            &[a.seed, a.seed + 1, a.seed + 2],
        );
        let corners = distinct_corners(&central, corners);
        let p = predict(&PredictConfig {
            truth: cfg.clone(),
            corners: corners.clone(),
            moves: false,
            misfit: None,
        })?;
        let (pass, fail) = clear_loads(&cfg, &corners, (p.low_req_s, p.high_req_s))?;
        print!(
            " | e {e:+}: predicted {:.3} ({:.3}-{:.3}), clear {} / {}",
            p.knee_req_s,
            p.low_req_s,
            p.high_req_s,
            pass.map_or("-".into(), |x| format!("{x:.3}")),
            fail.map_or("-".into(), |x| format!("{x:.3}"))
        );
        let loads = [
            ("clear pass", pass),
            ("clear fail", fail),
            ("0.9 knee", Some(0.9 * truth)),
            ("1.1 knee", Some(1.1 * truth)),
        ];
        for (kind, load) in loads {
            let Some(load) = load else { continue };
            for &w in &a.weights {
                let prior = (w > 0)
                    .then(|| step_prior(&cfg, &corners, load, w))
                    .transpose()?;
                for t in 0..a.trials {
                    let seed = 1_000 * k + 10 * t + 7;
                    let cap = Duration::from_secs_f64(a.cap_s);
                    let (held, d, s) = step(&params, shape, &slos, load, prior.clone(), cap, seed);
                    if std::env::var_os("TWIN_PRIOR_STEPS").is_some() {
                        println!(
                            "\n  {kind} {load:.3} weight {w}: held {held} decision {d:?} after {s:.1} s; prior {:?}",
                            prior.as_ref().map(|p| &p.slos)
                        );
                    }
                    let near = (load / truth - 1.0).abs() <= NEAR;
                    let kind = if near { "near the knee" } else { kind };
                    let tally = tallies.entry((format!("{e:+}"), w, kind)).or_default();
                    tally.steps += 1;
                    tally.seconds += s;
                    match d {
                        Decision::Pass => tally.decided_pass += 1,
                        Decision::Fail => tally.decided_fail += 1,
                        Decision::Undecided => {}
                    }
                    let wrong = (d == Decision::Pass && load > truth)
                        || (d == Decision::Fail && load <= truth);
                    tally.wrong += usize::from(wrong);
                }
            }
        }
    }
    println!();
    Ok(())
}

fn main() {
    let a = args();
    std::fs::create_dir_all(&a.dir).expect("a scratch directory");
    let mut tallies: BTreeMap<Key, Tally> = BTreeMap::new();
    for k in 1..=a.sets {
        if let Err(e) = one_set(&a, k, &mut tallies) {
            println!("set {k}: {e}");
        }
    }
    println!();
    println!("| twin error | prior weight | loads | steps | decided pass | decided fail | wrong of decided | mean step s |");
    println!("|---|---|---|---|---|---|---|---|");
    for ((e, w, kind), t) in &tallies {
        let decided = t.decided_pass + t.decided_fail;
        println!(
            "| {e} | {w} | {kind} | {} | {} | {} | {} of {decided} | {:.1} |",
            t.steps,
            t.decided_pass,
            t.decided_fail,
            t.wrong,
            t.seconds / t.steps.max(1) as f64
        );
    }
}

//! Benchmark (issue 27, "the simulator with hidden parameters"): can
//! `kneecap profile` recover a server's parameters over HTTP, and does
//! `kneecap predict --profile` then give the knee of workloads the probes
//! never sent?
//!
//! For each of N hidden parameter sets, drawn (seeded) from the documented
//! range: `kneecap profile --budget B` against the built-in simulator
//! started with those parameters (real time, real HTTP), then, for three
//! workloads (256/64, 2048/256, and 1024/128 of which 90% is one shared
//! prefix), `kneecap predict --profile` against the simulator's own
//! virtual-time knee: `kneecap predict` given the hidden parameters
//! themselves (the same search `sim --explain --slo` runs, which has no
//! shared prefix; tests/it/predict_cli.rs checks the two agree), with the same
//! seeds, so the comparison isolates the profile's error.
//!
//! The range (log-uniform unless said): max-num-seqs 4–256, prefill
//! 20–2,000 µs per token, step base 5–40 ms, decode 50–1,000 µs per
//! sequence, KV cache 20k–2M tokens, prefill interference 0–1 (uniform),
//! prefix caching on or off (a coin). The rest is the `tiny` preset
//! (max-num-batched-tokens 2048, max-model-len 4096). The SLOs of each
//! workload scale with the hidden server: p99 TTFT within 5 × a lone
//! request's TTFT and mean TPOT within 3 × a lone request's TPOT (both from
//! `sim --explain`), so every knee is above zero.
//!
//! Usage: cargo run --release --example twin_recovery -- --bin PATH
//!        [--sets 20] [--seed 1] [--budget 30] [--requests 5000] [--dir DIR]
//! Prints one Markdown row per set as it goes, then the summary tables.

use kneecap::twin::json::PredictJson;
use kneecap::twin::{Estimate, ServerProfile, Status};
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

#[path = "support/hidden.rs"]
mod hidden;
use hidden::Hidden;

/// A workload the probes never sent.
struct Workload {
    name: &'static str,
    /// Prompt tokens, the shared prefix included.
    input: u32,
    output: u32,
    prefix: u32,
}

const WORKLOADS: [Workload; 3] = [
    Workload {
        name: "256/64",
        input: 256,
        output: 64,
        prefix: 0,
    },
    Workload {
        name: "2048/256",
        input: 2048,
        output: 256,
        prefix: 0,
    },
    Workload {
        name: "1024/128, 90% shared prefix",
        input: 1024,
        output: 128,
        prefix: 922,
    },
];

struct Args {
    bin: PathBuf,
    sets: u64,
    seed: u64,
    budget: f64,
    requests: usize,
    dir: PathBuf,
}

fn args() -> Args {
    let mut a = Args {
        bin: PathBuf::from("target/release/kneecap"),
        sets: 20,
        seed: 1,
        budget: 30.0,
        requests: 5000,
        dir: std::env::temp_dir().join("kneecap-twin-recovery"),
    };
    let argv: Vec<String> = std::env::args().skip(1).collect();
    for pair in argv.chunks(2) {
        let v = pair.get(1).cloned().unwrap_or_default();
        let num = |what: &str| -> f64 {
            v.parse()
                .unwrap_or_else(|_| panic!("{what} wants a number, got {v:?}"))
        };
        match pair[0].as_str() {
            "--bin" => a.bin = PathBuf::from(&v),
            "--sets" => a.sets = num("--sets") as u64,
            "--seed" => a.seed = num("--seed") as u64,
            "--budget" => a.budget = num("--budget"),
            "--requests" => a.requests = num("--requests") as usize,
            "--dir" => a.dir = PathBuf::from(&v),
            other => panic!("unknown flag {other}; see the usage at the top of the file"),
        }
    }
    a
}

/// Runs the binary; its stdout, or why it failed.
fn run(bin: &Path, args: &[String]) -> Result<String, String> {
    let out = Command::new(bin)
        .args(args)
        .output()
        .map_err(|e| format!("cannot run {}: {e}", bin.display()))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        return Err(err.lines().last().unwrap_or("failed").to_string());
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn strings(words: &[&str]) -> Vec<String> {
    words.iter().map(|s| s.to_string()).collect()
}

/// The lone request's TTFT and TPOT for a workload (`sim --explain`).
fn lone(a: &Args, h: &Hidden, w: &Workload) -> Result<(f64, f64), String> {
    #[derive(Deserialize)]
    struct Explain {
        lone_ttft_ms: f64,
        lone_tpot_ms: f64,
    }
    let mut args = strings(&["sim", "--explain", "--json"]);
    args.extend(strings(&["--input-len", &w.input.to_string()]));
    args.extend(strings(&["--output-len", &w.output.to_string()]));
    let hit = if h.prefix_caching {
        f64::from(w.prefix) / f64::from(w.input)
    } else {
        0.0
    };
    args.extend(strings(&["--cache-hit-fraction", &hit.to_string()]));
    args.extend(h.flags());
    let e: Explain = serde_json::from_str(&run(&a.bin, &args)?).map_err(|e| e.to_string())?;
    Ok((e.lone_ttft_ms, e.lone_tpot_ms))
}

/// The knee `predict` gives for `w` with `engine` flags: (knee, low, high).
fn knee(
    a: &Args,
    engine: &[String],
    w: &Workload,
    slos: &[String],
    out: &Path,
) -> Result<(f64, f64, f64), String> {
    let mut args = strings(&["predict", "--no-moves", "--seeds", "2", "--seed", "0"]);
    args.extend(strings(&["--requests", &a.requests.to_string()]));
    args.extend(strings(&["--warmup", &(a.requests / 10).to_string()]));
    args.extend(strings(&[
        "--random-input-len",
        &(w.input - w.prefix).to_string(),
    ]));
    args.extend(strings(&["--random-prefix-len", &w.prefix.to_string()]));
    args.extend(strings(&["--random-output-len", &w.output.to_string()]));
    for s in slos {
        args.extend(strings(&["--slo", s]));
    }
    args.extend(strings(&["-o", &out.display().to_string()]));
    args.extend_from_slice(engine);
    run(&a.bin, &args)?;
    let text = std::fs::read_to_string(out).map_err(|e| e.to_string())?;
    let j: PredictJson = serde_json::from_str(&text).map_err(|e| e.to_string())?;
    let p = j.knee.ok_or("no knee in the prediction")?;
    Ok((p.knee_req_s, p.low_req_s, p.high_req_s))
}

/// One workload's comparison.
struct Compared {
    truth: f64,
    predicted: f64,
    low: f64,
    high: f64,
}

impl Compared {
    fn error(&self) -> f64 {
        self.predicted / self.truth - 1.0
    }
}

/// The parameters recovered: (name, hidden value, estimate).
fn recovered<'a>(h: &Hidden, p: &'a ServerProfile) -> Vec<(&'static str, f64, &'a Estimate)> {
    let q = &p.params;
    vec![
        ("max num seqs", f64::from(h.max_num_seqs), &q.max_num_seqs),
        ("prefill per token", h.prefill_us, &q.prefill_token_us),
        ("step base", h.step_ms, &q.step_base_ms),
        ("decode per sequence", h.decode_us, &q.decode_seq_us),
        ("KV cache", f64::from(h.kv_tokens), &q.kv_cache_tokens),
        (
            "prefill interference",
            h.interference,
            &q.prefill_interference,
        ),
    ]
}

/// Measured (not assumed, not only a lower bound).
fn identified(e: &Estimate) -> bool {
    matches!(
        e.status,
        Status::Measured | Status::Misfit | Status::Reported
    )
}

struct SetResult {
    hidden: Hidden,
    profile: Option<ServerProfile>,
    compared: Vec<Option<Compared>>,
    seconds: f64,
}

fn one_set(a: &Args, k: u64) -> SetResult {
    let t0 = Instant::now();
    let hidden = Hidden::draw(a.seed.wrapping_add(k));
    let path = a.dir.join(format!("profile-{k}.json"));
    let mut args = strings(&["profile", "--budget", &a.budget.to_string()]);
    args.extend(strings(&["-o", &path.display().to_string()]));
    args.extend(hidden.flags());
    let profile = run(&a.bin, &args)
        .map_err(|e| eprintln!("set {k}: profile failed: {e}"))
        .ok()
        .and_then(|_| std::fs::read_to_string(&path).ok())
        .and_then(|t| ServerProfile::from_json(&t).ok());
    let compared = WORKLOADS
        .iter()
        .enumerate()
        .map(|(i, w)| {
            compare(a, &hidden, &path, w, k, i)
                .map_err(|e| eprintln!("set {k} {}: {e}", w.name))
                .ok()
        })
        .collect();
    SetResult {
        hidden,
        profile,
        compared,
        seconds: t0.elapsed().as_secs_f64(),
    }
}

fn compare(
    a: &Args,
    h: &Hidden,
    profile: &Path,
    w: &Workload,
    k: u64,
    i: usize,
) -> Result<Compared, String> {
    let (ttft, tpot) = lone(a, h, w)?;
    let slos = vec![
        format!("p99_ttft_ms<={:.0}", (5.0 * ttft).ceil()),
        format!("mean_tpot_ms<={:.1}", 3.0 * tpot),
    ];
    let truth = knee(
        a,
        &h.flags(),
        w,
        &slos,
        &a.dir.join(format!("truth-{k}-{i}.json")),
    )?;
    let from_profile = strings(&["--profile", &profile.display().to_string()]);
    let out = a.dir.join(format!("predict-{k}-{i}.json"));
    let (predicted, low, high) = knee(a, &from_profile, w, &slos, &out)?;
    Ok(Compared {
        truth: truth.0,
        predicted,
        low,
        high,
    })
}

fn row(k: u64, r: &SetResult) -> String {
    let h = &r.hidden;
    let mut s = format!(
        "| {k} | {} | {} | {} | {} | {} | {:.2} | {} |",
        h.max_num_seqs,
        h.prefill_us,
        h.step_ms,
        h.decode_us,
        h.kv_tokens,
        h.interference,
        if h.prefix_caching { "on" } else { "off" }
    );
    match &r.profile {
        Some(p) => {
            for (_, truth, e) in recovered(h, p) {
                let mark = if identified(e) {
                    ""
                } else {
                    " (not identified)"
                };
                s += &format!(" {}{mark} |", rel_or_abs(truth, e.value));
            }
        }
        None => s += " profile failed | | | | | |",
    }
    for c in &r.compared {
        s += &match c {
            Some(c) => format!(
                " {:.3} / {:.3} ({:+.1}%) |",
                c.predicted,
                c.truth,
                100.0 * c.error()
            ),
            None => " failed |".into(),
        };
    }
    s + &format!(" {:.0} |", r.seconds)
}

/// Relative error, or the absolute one for a parameter whose truth may be 0.
fn rel_or_abs(truth: f64, got: f64) -> String {
    if truth.abs() < 0.2 {
        format!("{got:.2} (abs {:+.2})", got - truth)
    } else {
        format!("{:+.1}%", 100.0 * (got / truth - 1.0))
    }
}

fn median(mut v: Vec<f64>) -> Option<f64> {
    v.sort_by(f64::total_cmp);
    (!v.is_empty()).then(|| {
        let n = v.len();
        if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        }
    })
}

fn summary(results: &[SetResult]) {
    println!("\n| parameter | identified | median relative error (identified) | within 10% |");
    println!("|---|---|---|---|");
    for i in 0..6 {
        let mut errs = Vec::new();
        let mut n = 0;
        for r in results {
            let Some(p) = &r.profile else { continue };
            n += 1;
            let (name, truth, e) = recovered(&r.hidden, p)[i];
            let _ = name;
            if identified(e) {
                errs.push(if i == 5 {
                    (e.value - truth).abs()
                } else {
                    (e.value / truth - 1.0).abs()
                });
            }
        }
        let name = recovered(
            &results[0].hidden,
            results.iter().find_map(|r| r.profile.as_ref()).unwrap(),
        )[i]
            .0;
        let within = errs.iter().filter(|&&x| x <= 0.10).count();
        let unit = if i == 5 { " (absolute)" } else { "" };
        println!(
            "| {name} | {}/{n} | {}{unit} | {within}/{} |",
            errs.len(),
            median(errs.clone()).map_or("-".into(), |m| format!("{:.1}%", 100.0 * m)),
            errs.len()
        );
    }
    let caching = results
        .iter()
        .filter_map(|r| {
            Some((
                r.hidden.prefix_caching,
                r.profile.as_ref()?.params.prefix_caching.enabled,
            ))
        })
        .collect::<Vec<_>>();
    let right = caching.iter().filter(|(h, got)| Some(*h) == *got).count();
    println!(
        "| prefix caching (on/off) | {}/{} decided | {right} right | |",
        caching.iter().filter(|c| c.1.is_some()).count(),
        caching.len()
    );
    println!("\n| workload | predicted | within ±10% of the true knee | median abs error | true knee inside the interval |");
    println!("|---|---|---|---|---|");
    for (i, w) in WORKLOADS.iter().enumerate() {
        let c: Vec<&Compared> = results
            .iter()
            .filter_map(|r| r.compared[i].as_ref())
            .collect();
        let within = c.iter().filter(|c| c.error().abs() <= 0.10).count();
        let inside = c
            .iter()
            .filter(|c| c.low <= c.truth && c.truth <= c.high)
            .count();
        let med = median(c.iter().map(|c| c.error().abs()).collect());
        println!(
            "| {} | {}/{} | {within}/{} ({:.0}%) | {} | {inside}/{} |",
            w.name,
            c.len(),
            results.len(),
            c.len(),
            100.0 * within as f64 / c.len().max(1) as f64,
            med.map_or("-".into(), |m| format!("{:.1}%", 100.0 * m)),
            c.len()
        );
    }
}

fn main() {
    let a = args();
    std::fs::create_dir_all(&a.dir).expect("the work directory");
    println!(
        "hidden parameter sets {}..={} (seed + k), profile budget {} s, {} requests x 2 seeds per virtual-time run",
        a.seed,
        a.seed + a.sets - 1,
        a.budget,
        a.requests
    );
    println!("\n| set | seqs | prefill us | step ms | decode us | KV | interf. | cache | seqs err | prefill err | step err | decode err | KV err | interf. | {} | {} | {} | s |", WORKLOADS[0].name, WORKLOADS[1].name, WORKLOADS[2].name);
    println!("|{}", "---|".repeat(18));
    let mut results = Vec::new();
    for k in 0..a.sets {
        let r = one_set(&a, k);
        println!("{}", row(a.seed + k, &r));
        results.push(r);
    }
    summary(&results);
}

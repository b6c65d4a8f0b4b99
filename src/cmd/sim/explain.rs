//! `kneecap sim --explain [--slo ...] [--json]`: the capacity explanation and,
//! with `--slo`, the true knee from [`crate::twin::knee::true_knee`], as text
//! or JSON.

use crate::cmd::args::sim::TruthArgs;
use crate::sim::capacity::{capacity, Bottleneck};
use crate::sim::virtual_time::VirtualLoad;
use crate::sim::{self, SimConfig};
use crate::twin::knee::{self as truth, KneeKind, SeedKnee, Truth, TruthConfig};
use anyhow::Result;
use serde::Serialize;
use std::fmt::Write as _;
use std::time::Instant;

/// The bisection stops when its bracket is narrower than this share of the rate.
pub const PRECISION: f64 = 0.0025;

/// The true-knee block of the JSON output.
#[derive(Debug, Serialize)]
struct TrueKneeJson {
    method: &'static str,
    slos: Vec<String>,
    arrivals: &'static str,
    burstiness: Option<f64>,
    warmup_requests: usize,
    measured_requests: usize,
    precision: f64,
    median_req_s: f64,
    min_req_s: f64,
    max_req_s: f64,
    seeds: Vec<SeedKnee>,
    elapsed_s: f64,
}

/// The JSON output: the shape's capacity, and the true knee when asked.
#[derive(Debug, Serialize)]
struct ExplainJson {
    simulated: bool,
    preset: String,
    input_len: u32,
    output_len: u32,
    max_num_seqs: u32,
    max_num_batched_tokens: u32,
    kv_cache_tokens: u32,
    max_model_len: u32,
    step_base_ms: f64,
    prefill_token_us: f64,
    decode_seq_us: f64,
    prefill_interference: f64,
    lone_ttft_ms: f64,
    lone_tpot_ms: f64,
    bottleneck: &'static str,
    mu_req_s: f64,
    output_tokens_per_s: f64,
    true_knee: Option<TrueKneeJson>,
}

/// Prints the explanation of `(input_len, output_len)` and, with `truth`, the
/// true knee; with `json`, as one JSON object on stdout.
pub fn execute(
    cfg: &SimConfig,
    (input_len, output_len): (u32, u32),
    cache_hit: f64,
    truth: Option<&TruthArgs>,
    json: bool,
) -> Result<()> {
    if truth.is_some() && cache_hit > 0.0 {
        anyhow::bail!("--slo with --cache-hit-fraction: the virtual-time true knee runs prompts without shared prefixes; drop one of the two");
    }
    let knee = match truth {
        Some(t) => {
            let started = Instant::now();
            let found = truth::true_knee(&truth_config(cfg, input_len, output_len, t))
                .map_err(|e| anyhow::anyhow!("--slo: {e}"))?;
            Some((t, found, started.elapsed().as_secs_f64()))
        }
        None => None,
    };
    if json {
        let out = explain_json(cfg, input_len, output_len, knee);
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    print!(
        "{}",
        sim::explain_cached(cfg, input_len, output_len, cache_hit)
    );
    if let Some((t, found, elapsed)) = knee {
        print!("{}", render_truth(t, &found, elapsed));
    }
    Ok(())
}

fn truth_config(cfg: &SimConfig, input_len: u32, output_len: u32, t: &TruthArgs) -> TruthConfig {
    TruthConfig {
        params: cfg.params.clone(),
        load: VirtualLoad {
            token_times: truth::needs_token_times(&t.slos),
            ..VirtualLoad::fixed(input_len, output_len, t.warmup, t.requests)
        },
        slos: t.slos.clone(),
        range_ratio: (0.0, 0.0),
        burstiness: t.burstiness,
        seeds: t.seeds.clone(),
        precision: PRECISION,
        tail: crate::sim::params::HostStalls::NONE,
    }
}

fn arrivals(burstiness: f64) -> &'static str {
    if burstiness.is_infinite() {
        "constant"
    } else if burstiness == 1.0 {
        "poisson"
    } else {
        "gamma"
    }
}

fn slo_list(t: &TruthArgs) -> String {
    let names: Vec<String> = t.slos.iter().map(ToString::to_string).collect();
    names.join(" and ")
}

/// The true-knee lines, e.g. `true knee for p99_ttft_ms<=500: 23.4 req/s
/// (virtual-time simulation, 3 seeds × 20000 requests: 23.1–23.6)`.
pub fn render_truth(t: &TruthArgs, found: &Truth, elapsed_s: f64) -> String {
    let mut s = String::new();
    let headline = match found
        .seeds
        .iter()
        .map(|k| k.kind)
        .find(|k| *k != KneeKind::Knee)
    {
        Some(KneeKind::BelowLowest) => format!("below {:.2} req/s", found.bracket.0),
        Some(KneeKind::AboveHighest) => format!("above {:.1} req/s", found.bracket.1),
        _ => format!("{:.1} req/s", found.median),
    };
    let _ = writeln!(
        s,
        "true knee for {}: {headline} (virtual-time simulation, {} seeds x {} requests: {:.2}-{:.2})",
        slo_list(t),
        found.seeds.len(),
        t.requests,
        found.min,
        found.max
    );
    for k in &found.seeds {
        let fails = k
            .fails_at
            .map_or(String::new(), |f| format!(", fails at {f:.2}"));
        let slos: Vec<String> = k.at_knee.iter().map(|o| o.describe()).collect();
        let _ = writeln!(
            s,
            "  seed {}: passes at {:.2} req/s{fails} ({} runs); there {}",
            k.seed,
            k.knee,
            k.runs,
            slos.join(", ")
        );
    }
    let burst = match arrivals(t.burstiness) {
        "poisson" => "Poisson arrivals".to_string(),
        "constant" => "evenly spaced arrivals".to_string(),
        _ => format!("Gamma arrivals (burstiness {})", t.burstiness),
    };
    let _ = writeln!(
        s,
        "  {burst}, {} warm-up requests per run, knee to {:.2}%; computed in {elapsed_s:.1} s",
        t.warmup,
        PRECISION * 100.0
    );
    s
}

fn explain_json(
    cfg: &SimConfig,
    input_len: u32,
    output_len: u32,
    knee: Option<(&TruthArgs, Truth, f64)>,
) -> ExplainJson {
    let p = &cfg.params;
    let c = capacity(p, input_len, output_len);
    ExplainJson {
        simulated: true,
        preset: cfg.preset.clone(),
        input_len,
        output_len,
        max_num_seqs: p.max_num_seqs,
        max_num_batched_tokens: p.max_num_batched_tokens,
        kv_cache_tokens: p.kv_cache_tokens,
        max_model_len: p.max_model_len,
        step_base_ms: p.step_base.as_secs_f64() * 1e3,
        prefill_token_us: p.per_prefill_token.as_secs_f64() * 1e6,
        decode_seq_us: p.per_decode_seq.as_secs_f64() * 1e6,
        prefill_interference: p.prefill_interference,
        lone_ttft_ms: c.lone_ttft_s * 1e3,
        lone_tpot_ms: c.lone_tpot_s * 1e3,
        bottleneck: match c.bottleneck {
            Bottleneck::MaxNumSeqs => "max_num_seqs",
            Bottleneck::KvCache => "kv_cache",
            Bottleneck::TokenBudget => "token_budget",
            Bottleneck::PrefillLane => "prefill_lane",
        },
        mu_req_s: c.mu,
        output_tokens_per_s: c.output_tokens_per_s,
        true_knee: knee.map(|(t, found, elapsed_s)| TrueKneeJson {
            method: "virtual-time simulation",
            slos: t.slos.iter().map(ToString::to_string).collect(),
            arrivals: arrivals(t.burstiness),
            burstiness: t.burstiness.is_finite().then_some(t.burstiness),
            warmup_requests: t.warmup,
            measured_requests: t.requests,
            precision: PRECISION,
            median_req_s: found.median,
            min_req_s: found.min,
            max_req_s: found.max,
            seeds: found.seeds,
            elapsed_s,
        }),
    }
}

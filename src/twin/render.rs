//! The prediction on the console, drawn from its JSON type ([`PredictJson`]):
//! the knee with its interval, what binds it and what moves it, replicas for
//! a target rate and what the prediction cost; or the grid as a table. Every
//! headline says PREDICTED. Pure: a result in, text out.

use super::at_load::AtLoad;
use super::json::{PredictJson, SIMULATED};
use super::knee::KneeKind;
use super::predict::{Misfit, Prediction, Replicas};
use crate::result::explain::Binding;
use std::fmt::Write as _;

/// A knee with its interval: `23.4 req/s (interval 21.0–25.1)`.
fn knee_words(p: &Prediction) -> String {
    match p.kind {
        KneeKind::BelowLowest => format!(
            "below {:.2} req/s (no rate tried met the SLOs)",
            p.mu_req_s / 100.0
        ),
        KneeKind::AboveHighest => format!(
            "above {:.1} req/s (1.5 × the computed capacity)",
            p.knee_req_s
        ),
        KneeKind::Knee => format!(
            "{:.1} req/s (interval {:.1}–{:.1})",
            p.knee_req_s, p.low_req_s, p.high_req_s
        ),
    }
}

/// `for p99_ttft_ms<=500; 1024 in / 128 out tokens, Poisson arrivals`.
pub(super) fn workload_words(j: &PredictJson) -> String {
    let w = &j.workload;
    let mut shape = format!("{} in / {} out tokens", w.input_len, w.output_len);
    if w.range_ratio_input > 0.0 || w.range_ratio_output > 0.0 {
        let _ = write!(
            shape,
            " (±{:.0}% / ±{:.0}%)",
            w.range_ratio_input * 100.0,
            w.range_ratio_output * 100.0
        );
    }
    if w.shared_prefix > 0 {
        let _ = write!(shape, " after a {}-token shared prefix", w.shared_prefix);
    }
    let arrivals = match (w.arrivals.as_str(), w.burstiness) {
        ("poisson", _) => "Poisson arrivals".to_string(),
        ("constant", _) => "evenly spaced arrivals".to_string(),
        (_, b) => format!("Gamma arrivals (burstiness {})", b.unwrap_or(1.0)),
    };
    format!("for {}; {shape}, {arrivals}", j.slos.join(" and "))
}

pub(super) fn engine_words(j: &PredictJson) -> String {
    let e = &j.engine;
    let uncertainty = if e.corners == 0 {
        "parameters taken as exact: the interval is the seeds' spread".to_string()
    } else {
        format!(
            "interval over {} corner parameter sets and the seeds",
            e.corners
        )
    };
    let mut interference = if e.prefill_interference != 1.0 {
        format!(", prefill interference {:.2}", e.prefill_interference)
    } else {
        String::new()
    };
    if e.context_token_us > 0.0 {
        interference += &format!(" + {} µs/context token", round3(e.context_token_us));
    }
    if e.prefill_pair_ns > 0.0 {
        interference += &format!(" + {} ns/prompt attention pair", round3(e.prefill_pair_ns));
    }
    if e.prefill_step_ms > 0.0 {
        interference += &format!(
            " + {} ms/step with prompt tokens",
            round3(e.prefill_step_ms)
        );
    }
    if e.request_ms > 0.0 {
        interference += &format!(" + {} ms/request", round3(e.request_ms));
    }
    if e.stall_rate_per_s > 0.0 && e.stall_ms > 0.0 {
        interference += &format!(
            ", host stalls {}/s of {} ms",
            round3(e.stall_rate_per_s),
            round3(e.stall_ms)
        );
    }
    format!(
        "engine {}: max-num-seqs {}, kv-cache-tokens {}, step {} ms + {} µs/prefill token + {} µs/decoding sequence{interference}, prefix caching {} ({uncertainty})",
        e.source,
        e.max_num_seqs,
        e.kv_cache_tokens,
        round3(e.step_base_ms),
        round3(e.prefill_token_us),
        round3(e.decode_seq_us),
        if e.prefix_caching { "on" } else { "off" }
    )
}

/// Three significant figures, as a number that prints without trailing
/// noise (a profile's fitted values are not round).
fn round3(x: f64) -> f64 {
    if x == 0.0 || !x.is_finite() {
        return x;
    }
    let scale = 10f64.powi(2 - x.abs().log10().floor() as i32);
    (x * scale).round() / scale
}

/// `the profile flagged a misfit (...)`: why the interval is wider.
fn misfit_words(m: &Misfit) -> String {
    format!(
        "the profile flagged a departure from the model, so the interval is widened by ±{:.0}%: {}",
        m.widen * 100.0,
        m.reasons.join("; ")
    )
}

/// `--at-rates`: one line per load, the model's latencies in ms.
fn at_rates_text(at: &[AtLoad]) -> String {
    let mut s = String::new();
    if at.is_empty() {
        return s;
    }
    let _ = writeln!(
        s,
        "  PREDICTED latency (ms) at  TTFT p50   TTFT p99   TPOT mean  E2E mean"
    );
    for a in at {
        let _ = writeln!(
            s,
            "    {:>9.2} req/s {:>10.1} {:>10.1} {:>10.1} {:>9.1}{}",
            a.rate_req_s,
            a.ttft_ms.p50,
            a.ttft_ms.p99,
            a.tpot_ms.mean,
            a.e2el_ms.mean,
            if a.steady {
                ""
            } else {
                "  (overloaded: the queue grows)"
            }
        );
    }
    s
}

fn replicas_words(r: &Replicas) -> String {
    let n = |x: Option<u64>| x.map_or("unbounded".to_string(), |n| n.to_string());
    let over = if r.low == r.high {
        "the same at both ends of the interval".to_string()
    } else {
        format!("{}–{} over the interval", n(r.low), n(r.high))
    };
    format!(
        "replicas for {} req/s within the SLO: {} ({over})",
        r.target_req_s,
        n(r.replicas)
    )
}

pub(super) fn cost_words(j: &PredictJson, runs: usize) -> String {
    let m = &j.method;
    format!(
        "computed in {:.1} CPU s ({:.1} s wall): {} seed(s) × {} requests per run, {runs} virtual-time runs, knee to {:.2}%",
        j.cpu_s,
        j.wall_s,
        m.seeds.len(),
        m.measured_requests,
        m.precision * 100.0
    )
}

/// The single prediction's lines.
pub fn knee_text(j: &PredictJson) -> String {
    let mut s = String::new();
    let Some(p) = &j.knee else {
        return s;
    };
    let _ = writeln!(s, "PREDICTED knee: {} — {SIMULATED}", knee_words(p));
    let _ = writeln!(s, "  {}", workload_words(j));
    let _ = writeln!(s, "  {}", engine_words(j));
    if let Some(m) = &p.misfit {
        let _ = writeln!(s, "  {}", misfit_words(m));
    }
    if let Some(e) = &p.explain {
        let _ = writeln!(s, "  binds: {}", e.line);
        if let Some(m) = &e.moves {
            let _ = writeln!(s, "  what moves it: {}", m.line());
        }
    }
    if let Some(r) = &j.target {
        let _ = writeln!(s, "  {}", replicas_words(r));
    }
    s.push_str(&at_rates_text(&j.at_rates));
    let _ = writeln!(s, "  {}", cost_words(j, p.runs));
    s
}

/// The binding's short name for a table cell.
pub fn short(b: Binding) -> &'static str {
    match b {
        Binding::BatchSlots => "slots",
        Binding::KvCache => "kv",
        Binding::PrefillCompute => "prefill",
        Binding::DecodeCompute => "decode",
        Binding::Client => "client",
        Binding::Unknown => "?",
    }
}

/// One cell: `41.2 [40.1–42.0] slots` (and `×3` replicas), or why not.
fn cell_words(cell: &super::grid::GridCell) -> String {
    let Some(p) = &cell.prediction else {
        return "refused".to_string();
    };
    let mut s = match p.kind {
        KneeKind::Knee => format!(
            "{:.1} [{:.1}–{:.1}]",
            p.knee_req_s, p.low_req_s, p.high_req_s
        ),
        KneeKind::BelowLowest => "<lowest".to_string(),
        KneeKind::AboveHighest => format!(">{:.1}", p.knee_req_s),
    };
    if let Some(e) = &p.explain {
        let _ = write!(s, " {}", short(e.binds));
    }
    if let Some(n) = cell.replicas.as_ref().and_then(|r| r.replicas) {
        let _ = write!(s, " ×{n}");
    }
    s
}

/// The grid as one table per prefix share: prompt lengths down, output
/// lengths across; refused shapes listed below with their reason.
pub fn grid_text(j: &PredictJson) -> String {
    let mut s = String::new();
    let Some(cells) = &j.grid else {
        return s;
    };
    let _ = writeln!(
        s,
        "PREDICTED knee (req/s, [interval] binding) over the grid — {SIMULATED}"
    );
    let _ = writeln!(
        s,
        "  {}",
        workload_words(j).replacen(
            &format!(
                "{} in / {} out tokens",
                j.workload.input_len, j.workload.output_len
            ),
            "lengths per cell",
            1,
        )
    );
    let _ = writeln!(s, "  {}", engine_words(j));
    if let Some(m) = cells
        .iter()
        .find_map(|c| c.prediction.as_ref()?.misfit.as_ref())
    {
        let _ = writeln!(s, "  {}", misfit_words(m));
    }
    let mut shares: Vec<f64> = cells.iter().map(|c| c.prefix_share).collect();
    shares.dedup();
    for share in shares {
        let part: Vec<&super::grid::GridCell> =
            cells.iter().filter(|c| c.prefix_share == share).collect();
        table(&mut s, share, &part);
    }
    for c in cells.iter().filter(|c| c.error.is_some()) {
        let _ = writeln!(
            s,
            "  {} in / {} out, prefix {:.0}%: {}",
            c.input_len,
            c.output_len,
            c.prefix_share * 100.0,
            c.error.as_deref().unwrap_or_default()
        );
    }
    if let Some(t) = cells.iter().find_map(|c| c.replicas.as_ref()) {
        let _ = writeln!(
            s,
            "  ×N: replicas for {} req/s within the SLO",
            t.target_req_s
        );
    }
    let runs = cells
        .iter()
        .filter_map(|c| c.prediction.as_ref())
        .map(|p| p.runs)
        .sum();
    let _ = writeln!(s, "  {}", cost_words(j, runs));
    s
}

fn table(s: &mut String, share: f64, cells: &[&super::grid::GridCell]) {
    let mut outputs: Vec<u32> = cells.iter().map(|c| c.output_len).collect();
    outputs.sort_unstable();
    outputs.dedup();
    let mut inputs: Vec<u32> = cells.iter().map(|c| c.input_len).collect();
    inputs.dedup();
    let words: Vec<Vec<String>> = inputs
        .iter()
        .map(|&i| {
            outputs
                .iter()
                .map(|&o| {
                    cells
                        .iter()
                        .find(|c| c.input_len == i && c.output_len == o)
                        .map_or(String::new(), |c| cell_words(c))
                })
                .collect()
        })
        .collect();
    let width = words
        .iter()
        .flatten()
        .map(|w| w.chars().count())
        .max()
        .unwrap_or(0)
        .max(8);
    let _ = writeln!(s, "  prefix share {:.0}%:", share * 100.0);
    let _ = write!(s, "  {:>8} ", "in \\ out");
    for o in &outputs {
        let _ = write!(s, " {o:>width$}");
    }
    s.push('\n');
    for (i, row) in inputs.iter().zip(&words) {
        let _ = write!(s, "  {i:>8} ");
        for w in row {
            let _ = write!(s, " {w:>width$}");
        }
        s.push('\n');
    }
}

#[cfg(test)]
#[path = "render_tests.rs"]
mod tests;

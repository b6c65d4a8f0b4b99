//! The profile as a console table: parameter, value, ± uncertainty, status
//! and how it was measured, then the warnings. Pure (a `String`).

use super::profile::{Estimate, ServerProfile, Status};
use std::fmt::Write as _;

fn status(s: Status) -> &'static str {
    match s {
        Status::Measured => "measured",
        Status::Misfit => "MISFIT",
        Status::LowerBound => "at least",
        Status::Reported => "reported",
        Status::Assumed => "assumed",
        Status::NotIdentifiable => "NOT IDENTIFIABLE",
    }
}

/// A number with as many decimals as its size calls for.
fn num(x: f64) -> String {
    let a = x.abs();
    if a >= 1000.0 || x == x.round() && a >= 10.0 {
        format!("{x:.0}")
    } else if a >= 10.0 {
        format!("{x:.1}")
    } else if a >= 0.1 {
        format!("{x:.3}")
    } else {
        format!("{x:.4}")
    }
}

fn row(out: &mut String, name: &str, unit: &str, e: &Estimate) {
    let plus = match e.status {
        Status::Measured | Status::Misfit => format!("± {}", num(e.uncertainty)),
        Status::NotIdentifiable => format!("± ≥ {}", num(e.value)),
        _ => String::new(),
    };
    let _ = writeln!(
        out,
        "  {name:<24} {:>10} {unit:<6} {plus:<12} {:<9} {}",
        num(e.value),
        status(e.status),
        e.how
    );
    if let Some(note) = &e.note {
        let _ = writeln!(
            out,
            "  {:<24} {:>10} {:<6} {:<12} {:<9} ! {note}",
            "", "", "", "", ""
        );
    }
}

/// The table.
pub fn render(p: &ServerProfile) -> String {
    let mut out = String::new();
    let what = if p.simulated {
        "the built-in simulator"
    } else {
        "the server"
    };
    let _ = writeln!(
        out,
        "kneecap profile of {what} at {} (model {}): {:.1} s of a {:.0} s budget",
        p.base_url, p.model, p.elapsed_s, p.budget_s
    );
    let _ = writeln!(
        out,
        "  {:<24} {:>10} {:<6} {:<12} {:<9} how",
        "parameter", "value", "unit", "± (1 sigma)", "status"
    );
    let q = &p.params;
    row(&mut out, "step base", "ms", &q.step_base_ms);
    row(&mut out, "prefill per token", "us", &q.prefill_token_us);
    row(&mut out, "prefill fixed (TTFT)", "ms", &q.prefill_fixed_ms);
    row(&mut out, "decode per sequence", "us", &q.decode_seq_us);
    row(&mut out, "max num seqs", "seqs", &q.max_num_seqs);
    row(&mut out, "KV cache", "tokens", &q.kv_cache_tokens);
    row(
        &mut out,
        "token budget per step",
        "tokens",
        &q.max_num_batched_tokens,
    );
    row(&mut out, "max model len", "tokens", &q.max_model_len);
    row(
        &mut out,
        "prefill interference",
        "0..3",
        &q.prefill_interference,
    );
    row(&mut out, "context per token", "us", &q.context_token_us);
    row(&mut out, "per request", "ms", &q.request_ms);
    row(&mut out, "prefill per pair", "ns", &q.prefill_pair_ns);
    row(&mut out, "prefill step", "ms", &q.prefill_step_ms);
    row(&mut out, "stalls", "per s", &q.stall_rate_per_s);
    row(&mut out, "stall length", "ms", &q.stall_ms);
    let pc = &q.prefix_caching;
    let verdict = match pc.enabled {
        Some(true) => "on",
        Some(false) => "off",
        None => "unknown",
    };
    let _ = writeln!(
        out,
        "  {:<24} {verdict:>10} {:<6} {:<12} {:<9} {}",
        "prefix caching",
        "",
        pc.uncertainty
            .map(|u| format!("± {}", num(u)))
            .unwrap_or_default(),
        "measured",
        pc.how
    );
    if !p.warnings.is_empty() {
        let _ = writeln!(
            out,
            "warnings (what the model does not explain or could not measure):"
        );
        for w in &p.warnings {
            let _ = writeln!(out, "  - {w}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::twin::testing::sample;

    #[test]
    fn every_parameter_has_a_row_with_its_value_uncertainty_and_how() {
        let mut p = sample();
        p.warnings.push("something odd".into());
        p.params.decode_seq_us = p.params.decode_seq_us.clone().misfit(9.0, 0.0, "curved");
        let text = render(&p);
        for name in [
            "step base",
            "prefill per token",
            "decode per sequence",
            "max num seqs",
            "KV cache",
            "token budget per step",
            "prefill interference",
            "prefix caching",
        ] {
            assert!(text.contains(name), "{name}: {text}");
        }
        assert!(text.contains("5.000") && text.contains("± 0.125"), "{text}");
        assert!(
            text.contains("MISFIT") && text.contains("! curved"),
            "{text}"
        );
        assert!(
            text.contains("at least") && text.contains("reported"),
            "{text}"
        );
        assert!(text.contains("- something odd"));
        assert!(text.contains("of a 60 s budget"));
    }
}

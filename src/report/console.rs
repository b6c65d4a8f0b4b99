//! Console summary in `vllm bench serve`'s layout (its labels, in its order),
//! followed by kneecap's own block. Pure: returns a String.

use super::numbers::centered;
use crate::client::openai::Backend;
use crate::metrics::stats::Distribution;
use crate::metrics::MetricName;
use crate::result::RunResult;
use std::fmt::Write;

/// Render the summary printed at the end of a run.
pub fn render(r: &RunResult) -> String {
    let mut out = String::new();
    vllm_block(&mut out, r);
    kneecap_block(&mut out, r);
    out
}

fn line(out: &mut String, label: &str, value: impl std::fmt::Display) {
    let _ = writeln!(out, "{label:<40} {value:<10}");
}

fn fline(out: &mut String, label: &str, value: f64) {
    let _ = writeln!(out, "{label:<40} {value:<10.2}");
}

fn banner(out: &mut String, title: &str, fill: char) {
    let _ = writeln!(out, "{}", centered(title, fill, 50));
}

fn vllm_block(out: &mut String, r: &RunResult) {
    let s = &r.summary;
    banner(out, " Serving Benchmark Result ", '=');
    line(out, "Successful requests:", s.completed);
    line(out, "Failed requests:", s.failed);
    if let Some(c) = r.header.max_concurrency {
        line(out, "Maximum request concurrency:", c);
    }
    if r.header.request_rate.is_finite() {
        fline(out, "Request rate configured (RPS):", r.header.request_rate);
    }
    fline(out, "Benchmark duration (s):", s.duration_s);
    line(out, "Total input tokens:", s.total_input_tokens);
    if Backend::is_pooling_name(&r.header.backend) {
        // vLLM's pooling summary: no output tokens, no peaks.
        fline(out, "Request throughput (req/s):", s.request_throughput);
        fline(
            out,
            "Input throughput (inputs/s):",
            s.input_sequence_throughput,
        );
        fline(
            out,
            "Total token throughput (tok/s):",
            s.total_token_throughput,
        );
    } else {
        generation_lines(out, r);
    }
    for m in r.shown_metrics() {
        let (title, short) = titles(m);
        banner(out, title, '-');
        stats_lines(out, short, r.distribution(m), &r.header.percentiles);
    }
    if let Some(spec) = &r.kneecap.spec_decode {
        spec_lines(out, spec);
    }
    if let Some(g) = &r.kneecap.gpu {
        out.push_str(&super::gpu_text::run_block(g));
    }
    let _ = writeln!(out, "{}", "=".repeat(50));
}

/// vLLM's `Speculative Decoding` block (its labels, in its order); for
/// SGLang's gauges, the rate and length and where they came from.
fn spec_lines(out: &mut String, s: &crate::result::SpecDecodeStats) {
    banner(out, "Speculative Decoding", '-');
    fline(out, "Acceptance rate (%):", s.acceptance_rate);
    fline(out, "Acceptance length:", s.acceptance_length);
    let counts = [
        ("Drafts:", s.num_drafts),
        ("Draft tokens:", s.draft_tokens),
        ("Accepted tokens:", s.accepted_tokens),
    ];
    for (label, n) in counts {
        if let Some(n) = n {
            line(out, label, n);
        }
    }
    if !s.per_position_acceptance_rates.is_empty() {
        let _ = writeln!(out, "Per-position acceptance (%):");
        for (i, rate) in s.per_position_acceptance_rates.iter().enumerate() {
            fline(out, &format!("  Position {i}:"), rate * 100.0);
        }
    }
    if s.source == "sglang" {
        let _ = writeln!(
            out,
            "(SGLang's gauges at the end: its last logging interval)"
        );
    }
}

/// vLLM's throughput lines of a generation run.
fn generation_lines(out: &mut String, r: &RunResult) {
    let s = &r.summary;
    line(out, "Total generated tokens:", s.total_output_tokens);
    fline(out, "Request throughput (req/s):", s.request_throughput);
    if let Some(g) = s.request_goodput {
        fline(out, "Request goodput (req/s):", g);
    }
    fline(out, "Output token throughput (tok/s):", s.output_throughput);
    fline(
        out,
        "Peak output token throughput (tok/s):",
        s.max_output_tokens_per_s,
    );
    fline(
        out,
        "Peak concurrent requests:",
        s.max_concurrent_requests as f64,
    );
    fline(
        out,
        "Total token throughput (tok/s):",
        s.total_token_throughput,
    );
}

/// vLLM's section titles and short names.
fn titles(m: MetricName) -> (&'static str, &'static str) {
    match m {
        MetricName::Ttft => ("Time to First Token", "TTFT"),
        MetricName::Tpot => ("Time per Output Token (excl. 1st token)", "TPOT"),
        MetricName::Itl => ("Inter-token Latency", "ITL"),
        MetricName::E2el => ("End-to-end Latency", "E2EL"),
        MetricName::ClientQueueTime => ("Client-side Queueing", "Client Queue Time"),
        MetricName::E2elIncludingClientQueue => {
            ("Queue-inclusive End-to-end Latency", "E2EL incl. Queue")
        }
    }
}

fn stats_lines(out: &mut String, short: &str, d: &Distribution, percentiles: &[f64]) {
    fline(out, &format!("Mean {short} (ms):"), d.mean_ms);
    fline(out, &format!("Median {short} (ms):"), d.median_ms);
    for (p, v) in &d.percentiles_ms {
        let _ = percentiles;
        fline(out, &format!("P{} {short} (ms):", p_word(*p)), *v);
    }
}

/// `99` for 99.0, `99.9` for 99.9 (vLLM's label rule).
fn p_word(p: f64) -> String {
    if p.fract() == 0.0 {
        format!("{}", p as i64)
    } else {
        format!("{p}")
    }
}

fn kneecap_block(out: &mut String, r: &RunResult) {
    banner(out, " kneecap ", '-');
    setup_lines(out, r);
    timing_lines(out, r);
    let s = &r.summary;
    if s.reasoning.reasoning_requests > 0 {
        reasoning_lines(out, s);
    }
    error_lines(out, r);
    if r.kneecap.interrupted {
        let _ = writeln!(out, "INTERRUPTED: partial result (stopped by signal)");
    }
    let _ = writeln!(out, "{}", "=".repeat(50));
}

/// What was measured: the target, the load, the server's prefix cache and
/// the sessions.
fn setup_lines(out: &mut String, r: &RunResult) {
    let h = &r.header;
    if h.simulated {
        let preset = h.sim_preset.as_deref().unwrap_or("?");
        let _ = writeln!(
            out,
            "Target: built-in simulator (preset {preset}) — SIMULATED numbers, not a real server"
        );
    }
    let _ = writeln!(
        out,
        "Load: {} | dataset {} | seed {}",
        h.arrival, h.dataset, h.seed
    );
    let k = &r.kneecap;
    if let Some(pc) = &k.prefix_cache {
        let rate = pc
            .hit_rate
            .map_or("n/a".into(), |r| format!("{:.1}%", r * 100.0));
        let _ = writeln!(
            out,
            "{:<40} {rate} ({} of {} prompt tokens, from {})",
            "Prefix cache hit rate (server):", pc.hit_tokens, pc.queried_tokens, pc.source
        );
    }
    if let Some(sessions) = &k.sessions {
        super::sessions::console_lines(out, sessions);
    }
}

/// How well the generator kept time, and the latencies counted from each
/// request's due time.
fn timing_lines(out: &mut String, r: &RunResult) {
    let s = &r.summary;
    let l = &s.lateness;
    let _ = writeln!(
        out,
        "{:<40} p50 {:.3}  p99 {:.3}  max {:.3}",
        "Dispatch lateness, sent - due (ms):",
        l.median_ms,
        pct(l, 99.0),
        l.max_ms
    );
    if let Some(g) = &r.kneecap.generator {
        generator_line(out, g);
    }
    stamps_line(out, &s.stamps);
    if Backend::is_pooling_name(&r.header.backend) {
        // Nothing is streamed: the answer's time is its E2EL.
        fline(
            out,
            "Median E2EL from due time (ms):",
            s.e2el_from_due.median_ms,
        );
    } else {
        fline(
            out,
            "Median TTFT from due time (ms):",
            s.ttft_from_due.median_ms,
        );
        fline(
            out,
            "P99 TTFT from due time (ms):",
            pct(&s.ttft_from_due, 99.0),
        );
    }
    fline(
        out,
        "P99 E2EL from due time (ms):",
        pct(&s.e2el_from_due, 99.0),
    );
}

/// The error rate, the failures by kind and the first error messages.
fn error_lines(out: &mut String, r: &RunResult) {
    let s = &r.summary;
    let sent = s.completed + s.failed;
    if sent > 0 {
        let rate = 100.0 * s.failed as f64 / sent as f64;
        let _ = writeln!(
            out,
            "{:<40} {rate:.2}% ({} of {sent})",
            "Error rate:", s.failed
        );
    }
    if !s.errors_by_kind.is_empty() {
        let kinds: Vec<String> = s
            .errors_by_kind
            .iter()
            .map(|(k, n)| format!("{k} {n}"))
            .collect();
        let _ = writeln!(out, "{:<40} {}", "Failures by kind:", kinds.join(", "));
        for e in &r.kneecap.first_errors {
            let _ = writeln!(out, "  error: {e}");
        }
    }
}

/// "Generator: healthy (...)" or "GENERATOR-LIMITED: reasons".
fn generator_line(out: &mut String, g: &crate::result::GeneratorVerdict) {
    let cpu = g
        .cpu_busy_fraction
        .map_or("?".into(), |c| format!("{:.0}%", c * 100.0));
    let lag = g
        .runtime_lag_p99_ms
        .map_or("?".into(), |l| format!("{l:.3} ms"));
    let lateness = if g.lateness_judged {
        format!(
            "lateness p99 {:.3} ms (bound {:.3} ms), ",
            g.health.lateness_p99_ms, g.health.lateness_bound_ms
        )
    } else {
        "lateness not judged (all due at once), ".to_string()
    };
    if g.health.limited {
        let _ = writeln!(
            out,
            "GENERATOR-LIMITED: {} — these numbers may be kneecap's, not the server's",
            g.health.reasons.join("; ")
        );
    } else {
        let _ = writeln!(
            out,
            "{:<40} healthy: {lateness}CPU {cpu}, runtime lag p99 {lag}",
            "Generator self-check:"
        );
    }
    for w in &g.health.warnings {
        let _ = writeln!(out, "  warning: {w}");
    }
}

/// Which clock stamped the arrivals, and how late the tasks saw them.
fn stamps_line(out: &mut String, st: &crate::metrics::stats::stamps::StampStats) {
    let (n, source) = (st.kernel + st.task, st.source());
    let what = match source {
        "none" => return,
        "task" => format!("task (no kernel timestamps), {n} requests"),
        _ => format!("{source} (SO_TIMESTAMPNS), {} of {n} requests", st.kernel),
    };
    let _ = writeln!(out, "{:<40} {what}", "Receive timestamps:");
    if st.kernel > 0 {
        let d = &st.scheduling_delay;
        let _ = writeln!(
            out,
            "{:<40} p50 {:.3}  p99 {:.3}  max {:.3}",
            "Client scheduling delay, 1st token (ms):",
            d.median_ms,
            pct(d, 99.0),
            d.max_ms
        );
    }
}

/// The value of percentile `p` in `d`, computed from the requested list when
/// present (else NaN, shown as "NaN").
fn pct(d: &Distribution, p: f64) -> f64 {
    d.percentile_ms(p).unwrap_or(f64::NAN)
}

/// TTFO, the answer's TPOT and the reasoning tokens (reasoning models only).
fn reasoning_lines(out: &mut String, s: &crate::metrics::stats::Summary) {
    let _ = writeln!(
        out,
        "{:<40} {}",
        "Reasoning tokens:", s.reasoning.reasoning_tokens
    );
    fline(
        out,
        "Median TTFO, first answer token (ms):",
        s.ttfo.median_ms,
    );
    fline(
        out,
        "P99 TTFO, first answer token (ms):",
        pct(&s.ttfo, 99.0),
    );
    fline(
        out,
        "Median TPOT of the answer (ms):",
        s.answer_tpot.median_ms,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn banners_are_centered_like_python_format() {
        // Python: "{s:{c}^{n}}".format(s=" Serving Benchmark Result ", n=50, c="=")
        assert_eq!(
            centered(" Serving Benchmark Result ", '=', 50),
            "============ Serving Benchmark Result ============"
        );
        assert_eq!(
            centered("Time to First Token", '-', 50),
            "---------------Time to First Token----------------"
        );
    }

    #[test]
    fn the_stamp_source_and_the_scheduling_delay_are_shown() {
        use crate::metrics::stats::stamps::StampStats;
        let mut out = String::new();
        stamps_line(&mut out, &StampStats::default());
        assert_eq!(out, "", "nothing succeeded: no line");
        let delay = Distribution {
            median_ms: 0.25,
            max_ms: 4.0,
            percentiles_ms: vec![(50.0, 0.25), (99.0, 1.5)],
            ..Distribution::default()
        };
        let st = StampStats {
            kernel: 9,
            task: 1,
            scheduling_delay: delay,
            ..StampStats::default()
        };
        stamps_line(&mut out, &st);
        assert!(
            out.contains("mixed (SO_TIMESTAMPNS), 9 of 10 requests"),
            "{out}"
        );
        assert!(out.contains("p50 0.250  p99 1.500  max 4.000"), "{out}");
        let mut task = String::new();
        stamps_line(
            &mut task,
            &StampStats {
                task: 3,
                ..StampStats::default()
            },
        );
        assert!(
            task.contains("task (no kernel timestamps), 3 requests"),
            "{task}"
        );
        assert!(!task.contains("scheduling delay"), "{task}");
    }

    #[test]
    fn percentile_labels_follow_vllm() {
        assert_eq!(p_word(99.0), "99");
        assert_eq!(p_word(99.9), "99.9");
    }
}

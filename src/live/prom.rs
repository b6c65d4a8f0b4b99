//! kneecap's own metrics in the Prometheus text exposition format (0.0.4),
//! rendered from the live state. Names follow Prometheus conventions
//! (`kneecap_` prefix, `_total` counters, `_seconds` histograms); the
//! latency histograms mirror vLLM's own names so panels line up.

use super::buckets::Buckets;
use super::state::{LiveState, WINDOW};
use std::fmt::Write;
use std::time::Duration;

/// The `Content-Type` of [`render`]'s text.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The whole exposition at `now` (from the live origin).
pub fn render(s: &LiveState, now: Duration) -> String {
    let mut out = String::with_capacity(8 * 1024);
    requests(&mut out, s);
    let t = &s.totals;
    for (name, help, h) in [
        (
            "kneecap_time_to_first_token_seconds",
            "Time to first token of successful requests, from when the request was sent.",
            &t.ttft,
        ),
        (
            "kneecap_time_per_output_token_seconds",
            "Time per output token after the first, per successful request.",
            &t.tpot,
        ),
        (
            "kneecap_inter_token_latency_seconds",
            "Gaps between streamed token events.",
            &t.itl,
        ),
        (
            "kneecap_e2e_request_latency_seconds",
            "End-to-end latency of successful requests, from sent to the last token.",
            &t.e2el,
        ),
        (
            "kneecap_dispatch_lateness_seconds",
            "How late kneecap sent each request after its scheduled time.",
            &t.lateness,
        ),
    ] {
        histogram(&mut out, name, help, h);
    }
    rates_and_phase(&mut out, s, now);
    out
}

fn requests(out: &mut String, s: &LiveState) {
    let t = &s.totals;
    header(
        out,
        "kneecap_requests_released_total",
        "counter",
        "Requests released by the schedule.",
    );
    let _ = writeln!(out, "kneecap_requests_released_total {}", t.released);
    header(
        out,
        "kneecap_requests_total",
        "counter",
        "Finished requests by outcome; failures carry their error class.",
    );
    let _ = writeln!(
        out,
        "kneecap_requests_total{{outcome=\"success\"}} {}",
        t.succeeded
    );
    for (class, n) in &t.failed {
        let _ = writeln!(
            out,
            "kneecap_requests_total{{outcome=\"failure\",error_class=\"{class}\"}} {n}"
        );
    }
    header(
        out,
        "kneecap_requests_in_flight",
        "gauge",
        "Requests released and not finished.",
    );
    let _ = writeln!(out, "kneecap_requests_in_flight {}", s.in_flight());
    header(
        out,
        "kneecap_output_tokens_total",
        "counter",
        "Output tokens of successful requests.",
    );
    let _ = writeln!(out, "kneecap_output_tokens_total {}", t.output_tokens);
}

fn rates_and_phase(out: &mut String, s: &LiveState, now: Duration) {
    let v = s.view(now);
    let window = WINDOW.as_secs();
    let gauges = [
        (
            "kneecap_offered_requests_per_second",
            format!("Requests released per second over the last {window} s."),
            Some(v.offered_rate),
        ),
        (
            "kneecap_achieved_requests_per_second",
            format!("Successful requests finished per second over the last {window} s."),
            Some(v.achieved_rate),
        ),
        (
            "kneecap_sweep_step",
            "Index of the sweep step running (0-based).".to_string(),
            s.phase.step.map(|i| i as f64),
        ),
        (
            "kneecap_offered_load",
            "The offered load of the run or sweep step, in the unit of kneecap_info's load_unit."
                .to_string(),
            s.phase.load,
        ),
    ];
    for (name, help, value) in gauges {
        if let Some(value) = value {
            header(out, name, "gauge", &help);
            let _ = writeln!(out, "{name} {}", number(value));
        }
    }
    header(
        out,
        "kneecap_info",
        "gauge",
        "The kneecap command running and its load unit.",
    );
    let _ = writeln!(
        out,
        "kneecap_info{{command=\"{}\",load_unit=\"{}\",version=\"{}\"}} 1",
        escape(&s.command),
        escape(&s.phase.unit),
        env!("CARGO_PKG_VERSION")
    );
    if let Some(cpu) = s.cpu_seconds {
        header(
            out,
            "process_cpu_seconds_total",
            "counter",
            "User and system CPU time kneecap used.",
        );
        let _ = writeln!(out, "process_cpu_seconds_total {}", number(cpu));
    }
}

fn histogram(out: &mut String, name: &str, help: &str, h: &Buckets) {
    header(out, name, "histogram", help);
    for (le, n) in h.cumulative() {
        let _ = writeln!(out, "{name}_bucket{{le=\"{}\"}} {n}", number(le));
    }
    let _ = writeln!(out, "{name}_sum {}", number(h.sum()));
    let _ = writeln!(out, "{name}_count {}", h.count());
}

fn header(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// A sample value as Prometheus writes it (`+Inf`, `NaN`, shortest float).
fn number(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v == f64::INFINITY {
        "+Inf".into()
    } else if v == f64::NEG_INFINITY {
        "-Inf".into()
    } else {
        format!("{v}")
    }
}

/// A label value with `\`, `"` and newlines escaped.
fn escape(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::live::state::tests::{failed_record, ok_record};
    use crate::metrics::ErrorKind;

    fn sample(text: &str, series: &str) -> f64 {
        let line = text
            .lines()
            .find(|l| l.starts_with(series) && l[series.len()..].starts_with(' '))
            .unwrap_or_else(|| panic!("no {series} in\n{text}"));
        line[series.len()..].trim().parse().unwrap()
    }

    #[test]
    fn counters_follow_the_records_and_histograms_are_cumulative() {
        let mut s = LiveState::new("kneecap run", vec![]);
        for i in 0..3 {
            s.released(Duration::ZERO);
            s.finished(&ok_record(i, 0, 30, &[5, 5]));
        }
        s.released(Duration::ZERO);
        s.finished(&failed_record(3, 0, ErrorKind::Timeout));
        let text = render(&s, Duration::from_secs(1));
        assert_eq!(
            sample(&text, "kneecap_requests_total{outcome=\"success\"}"),
            3.0
        );
        let timeout = "kneecap_requests_total{outcome=\"failure\",error_class=\"timeout\"}";
        assert_eq!(sample(&text, timeout), 1.0);
        let ttft = "kneecap_time_to_first_token_seconds";
        assert_eq!(
            sample(&text, &format!("{ttft}_bucket{{le=\"0.025\"}}")),
            0.0
        );
        assert_eq!(sample(&text, &format!("{ttft}_bucket{{le=\"0.05\"}}")), 3.0);
        assert_eq!(sample(&text, &format!("{ttft}_bucket{{le=\"+Inf\"}}")), 3.0);
        assert_eq!(
            sample(&text, "kneecap_inter_token_latency_seconds_count"),
            6.0
        );
        assert!(!text.contains("kneecap_sweep_step"), "a run has no step");
    }

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(escape("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }
}

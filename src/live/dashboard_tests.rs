//! The dashboard drawn from fake snapshots on ratatui's `TestBackend`.

use super::*;
use crate::client::scrape::QueueSample;
use crate::live::state::tests::{failed_record, ok_record};
use crate::live::state::{Latency, LiveState, Phase, SloLine};
use crate::metrics::ErrorKind;
use ratatui::backend::TestBackend;
use ratatui::Terminal;

fn screen(v: &View, width: u16) -> Vec<String> {
    let mut term = Terminal::new(TestBackend::new(width, HEIGHT)).unwrap();
    term.draw(|f| draw(f, v)).unwrap();
    let buf = term.backend().buffer();
    (0..buf.area.height)
        .map(|y| (0..buf.area.width).map(|x| buf[(x, y)].symbol()).collect())
        .collect()
}

fn line_with<'a>(screen: &'a [String], needle: &str) -> &'a str {
    screen
        .iter()
        .find(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("no line with {needle:?} in\n{}", screen.join("\n")))
}

fn sweep_step(ttft_ms: u64) -> LiveState {
    let slo = SloLine {
        metric: Latency::Ttft,
        percentile: Some(99.0),
        threshold_ms: 150.0,
        text: "p99_ttft_ms<=150".into(),
    };
    let mut s = LiveState::new("kneecap sweep", vec![slo]);
    s.begin(Phase {
        step: Some(2),
        load: Some(12.0),
        unit: "req/s".into(),
        started_at: Duration::from_secs(100),
        planned: Some(Duration::from_secs(30)),
    });
    for i in 0..50 {
        s.released(Duration::from_millis(i * 100));
    }
    for i in 0..45 {
        s.finished(&ok_record(i, i as u64 * 100, ttft_ms, &[20, 20, 20]));
    }
    s.finished(&failed_record(45, 4500, ErrorKind::Timeout));
    for w in 0..40 {
        s.gauge(QueueSample {
            t_s: w as f64,
            waiting: Some(f64::from(w / 4)),
            running: Some(8.0),
            kv_cache_usage: Some(0.42),
            preemptions: None,
        });
    }
    s
}

#[test]
fn a_step_shows_its_load_time_rates_latencies_gauges_errors_and_health() {
    let mut s = sweep_step(100);
    s.cpu_busy = Some(0.07);
    let screen = screen(&s.view(Duration::from_secs(105)), 100);
    let title = line_with(&screen, "kneecap sweep");
    assert!(
        title.contains("step 3 · 12.0 req/s · 5 s, 25 s left"),
        "{title}"
    );
    let rates = line_with(&screen, "offered");
    assert!(
        rates.contains("10.00 req/s"),
        "50 releases over 5 s: {rates}"
    );
    assert!(rates.contains("in flight     4"), "{rates}");
    let ttft = line_with(&screen, "TTFT");
    assert!(
        ttft.contains("100") && ttft.contains("p99_ttft_ms<=150 ok"),
        "{ttft}"
    );
    let tpot = line_with(&screen, "TPOT");
    assert!(tpot.contains("20.0"), "{tpot}");
    assert!(line_with(&screen, "KV cache").contains("42%"));
    let waiting = line_with(&screen, "waiting");
    assert!(waiting.contains('9'), "the last reading: {waiting}");
    assert!(
        waiting.chars().any(|c| ('▁'..='█').contains(&c)),
        "a sparkline: {waiting}"
    );
    assert!(line_with(&screen, "errors:").contains("timeout 1"));
    assert!(line_with(&screen, "lateness").contains("CPU 7%"));
}

#[test]
fn a_latency_over_its_slo_line_says_so() {
    let s = sweep_step(400);
    let screen = screen(&s.view(Duration::from_secs(105)), 100);
    let ttft = line_with(&screen, "TTFT");
    assert!(ttft.contains("400") && ttft.contains("OVER"), "{ttft}");
}

#[test]
fn a_run_before_any_answer_shows_dashes_not_zeros() {
    let s = LiveState::new("kneecap run", vec![]);
    let screen = screen(&s.view(Duration::ZERO), 80);
    assert!(line_with(&screen, "kneecap run").contains("0 s"));
    let ttft = line_with(&screen, "TTFT");
    assert!(!ttft.contains('0'), "{ttft}");
    assert!(line_with(&screen, "errors:").contains("none"));
}

#[test]
fn the_commands_own_lines_show_newest_last_and_only_the_newest_three() {
    let mut s = sweep_step(120);
    for k in 0..5 {
        s.note(format!("step {k}: 4.0 req/s PASS"));
    }
    let v = s.view(Duration::from_secs(104));
    let screen = screen(&v, 100);
    let rows: Vec<usize> = (2..5)
        .map(|k| {
            let needle = format!("step {k}: 4.0 req/s PASS");
            screen.iter().position(|l| l.contains(&needle)).unwrap()
        })
        .collect();
    assert!(
        rows.windows(2).all(|w| w[0] < w[1]),
        "oldest first: {rows:?}"
    );
    for gone in ["step 0:", "step 1:"] {
        assert!(
            !screen.iter().any(|l| l.contains(gone)),
            "{gone} still shown"
        );
    }
    line_with(&screen, "Ctrl-C stops");
}

//! Tests of the HTML report (a separate file to keep html.rs short).

use super::*;
use crate::result::fixture::{sweep, sweep_with};

fn count(hay: &str, needle: &str) -> usize {
    hay.matches(needle).count()
}

#[test]
fn report_holds_inline_svg_charts_with_balanced_tags() {
    let html = render(&sweep());
    // throughput, queue, Pareto, p99 TTFT, p99 TPOT, p99 E2EL, plus 7 per-step charts
    assert_eq!(count(&html, "<svg"), 13, "{html}");
    assert_eq!(count(&html, "</svg>"), 13);
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(html.trim_end().ends_with("</html>"));
}

#[test]
fn report_fetches_nothing_from_the_network() {
    let html = render(&sweep());
    let lower = html.to_ascii_lowercase();
    for bad in [
        "src=", "href=", "<script", "<link", "url(", "@import", "<img", "<iframe",
    ] {
        assert!(!lower.contains(bad), "found {bad}");
    }
    assert!(lower.contains("default-src 'none'"));
    // The only URL is the escaped target, shown as text.
    let without_target = html.replace(&escape(&sweep().workload.target), "");
    assert!(!without_target.contains("http://") && !without_target.contains("https://"));
}

#[test]
fn script_in_the_model_name_is_escaped() {
    let mut r = sweep();
    r.workload.model = "<script>alert('x')</script>".into();
    r.steps[0].reasons = vec!["<b>bold</b> & co".into()];
    let html = render(&r);
    assert!(!html.to_ascii_lowercase().contains("<script"), "{html}");
    assert!(html.contains("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;"));
    assert!(html.contains("&lt;b&gt;bold&lt;/b&gt; &amp; co"));
}

#[test]
fn every_step_gets_its_own_queue_time_series_chart() {
    let r = sweep();
    let html = render(&r);
    let figures: Vec<&str> = html.split("<figure class=\"qstep\">").skip(1).collect();
    assert_eq!(figures.len(), r.steps.len());
    for f in &figures {
        let fig = &f[..f.find("</figure>").expect("closed")];
        assert!(fig.contains("<svg"), "{fig}");
    }
    for load in ["8 req/s · PASS", "36 req/s · FAIL", "48 req/s · FAIL"] {
        assert!(html.contains(load), "{load}");
    }
}

#[test]
fn headline_has_the_knee_goodput_mu_slos_and_workload() {
    let html = render(&sweep());
    assert!(html.contains("knee: between 32.0 and 36.0 req/s (last pass 32.0, first fail 36.0)"));
    assert!(html.contains("goodput at the knee: 31.7 req/s"));
    assert!(html.contains("service rate μ: 40.2 req/s"));
    assert!(html.contains("queue onset: 36.0 req/s"));
    assert!(html.contains("SLOs: p99_ttft_ms&lt;=500, p99_tpot_ms&lt;=50"));
    assert!(html.contains("workload: target http://127.0.0.1:8000, model llama-3-8b"));
}

#[test]
fn an_explained_knee_says_what_binds_it_in_the_headline() {
    let mut r = sweep();
    r.knee.explain = Some(crate::result::explain::KneeExplain {
        binds: crate::result::explain::Binding::PrefillCompute,
        source: crate::result::explain::ExplainSource::Gauges,
        line: "prefill compute: at 36 req/s p99_ttft_ms<=500 failed".into(),
        failed_slos: vec!["p99_ttft_ms<=500".into()],
        evidence: Default::default(),
        moves: None,
    });
    let html = render(&r);
    assert!(
        html.contains(
            "<p class=\"binds\">binds: prefill compute: at 36 req/s p99_ttft_ms&lt;=500 failed</p>"
        ),
        "{html}"
    );
    assert_eq!(count(&render(&sweep()), "class=\"binds\""), 0);
}

#[test]
fn latency_charts_draw_the_slo_lines_and_the_knee() {
    let html = render(&sweep());
    assert!(html.contains("SLO p99 TTFT ≤ 500 ms"), "{html}");
    assert!(html.contains("SLO p99 TPOT ≤ 50 ms"));
    assert!(html.contains("knee (last pass 32 req/s)"));
    assert!(html.contains("p99 E2EL vs offered load"));
}

#[test]
fn simulated_badge_only_for_simulated_sweeps() {
    let mut r = sweep();
    assert!(render(&r).contains(">SIMULATED</span>"));
    r.simulated = false;
    assert!(!render(&r).contains("SIMULATED"));
}

#[test]
fn step_table_lists_every_step_with_its_full_reasons() {
    let mut r = sweep();
    let long = "p99_ttft_ms 7500 > 500 (SLO p99_ttft_ms<=500) and a very long explanation";
    r.steps[2].reasons = vec![long.into(), "second".into()];
    let html = render(&r);
    assert_eq!(count(&html, "<td class=\"l pass\">PASS</td>"), 4);
    assert_eq!(count(&html, "<td class=\"l fail\">FAIL</td>"), 3);
    assert!(html.contains(&format!("{}; second", escape(long))));
}

#[test]
fn empty_one_step_and_degenerate_sweeps_render_without_panicking() {
    let empty = render(&SweepResult::default());
    assert!(empty.contains("knee: unknown (no steps ran)"));
    assert!(empty.contains("no steps ran</td>"));
    let one = render(&sweep_with(&[5.0], &[]));
    assert_eq!(count(&one, "<figure class=\"qstep\">"), 1);
    let mut odd = sweep_with(&[0.0, 0.0], &[0.0]);
    odd.steps[0].achieved_rate = f64::NAN;
    odd.steps[1].ttft_ms.p99 = f64::INFINITY;
    odd.steps[1].queue.clear();
    odd.steps[2].mean_waiting = None;
    odd.steps[2].queue[0].t_s = f64::NAN;
    odd.knee.last_pass = Some(f64::NAN);
    odd.knee.first_fail = Some(-3.0);
    odd.slos.push("p99_e2el_ms<=0".into());
    let html = render(&odd);
    assert!(html.contains("no queue samples"));
    assert!(html.trim_end().ends_with("</html>"));
}

/// Not a check: writes the fixture's report for `scripts/screenshot-report.sh`.
/// `KNEECAP_SAMPLE_REPORT=/tmp/r.html cargo test --lib sample_report -- --ignored`
#[test]
#[ignore = "writes a sample report file; run by hand"]
fn sample_report_is_written_where_asked() {
    let path = std::env::var("KNEECAP_SAMPLE_REPORT").unwrap_or("sample-report.html".into());
    std::fs::write(&path, render(&sweep())).expect("write sample report");
    assert!(std::fs::metadata(&path).expect("written").len() > 0);
}

#[test]
fn the_pareto_frontier_keeps_only_steps_no_other_step_beats_on_both_axes() {
    let pts = [
        (100.0, 50.0, 1.0),
        (200.0, 40.0, 2.0),
        (150.0, 30.0, 3.0),
        (300.0, 10.0, 4.0),
    ];
    let front = html_pareto::frontier(&pts);
    assert_eq!(front, vec![(100.0, 50.0), (200.0, 40.0), (300.0, 10.0)]);
    let html = render(&sweep());
    assert!(html.contains("output tokens/s per user (1 / median TPOT)"));
    assert!(html.contains("Pareto frontier"), "{html}");
}

#[test]
fn a_priced_sweep_shows_its_cost_at_the_knee_and_an_unpriced_one_does_not() {
    let mut r = sweep();
    assert!(!render(&r).contains("Cost at the knee"));
    for s in &mut r.steps {
        s.output_token_rate = s.load * 100.0;
    }
    let pricing = crate::result::cost::Pricing {
        gpu_hour_cost: 2.5,
        gpus: 8,
    };
    r.price(pricing);
    let html = render(&r);
    // $20/h over 3200 tok/s at the knee (32 req/s): $1.74 per million.
    assert!(
        html.contains("Cost at the knee (32 req/s): $1.74 per million output tokens"),
        "{html}"
    );
    assert!(html.contains("8 GPUs at $2.50 per GPU-hour"));
}

#[test]
fn a_step_with_latencies_over_time_draws_them_above_its_gauges() {
    let mut r = sweep();
    let point = |t_s: f64, ttft: f64| crate::result::series::LatencyPoint {
        t_s,
        requests: 10,
        ttft_p50_ms: Some(ttft / 2.0),
        ttft_p99_ms: Some(ttft),
        tpot_p99_ms: Some(30.0),
        ..Default::default()
    };
    r.steps[0].latency_series = vec![point(0.5, 100.0), point(1.5, 900.0)];
    let html = render(&r);
    let figures: Vec<&str> = html
        .split("<figure class=\"qstep\">")
        .skip(1)
        .map(|f| &f[..f.find("</figure>").expect("closed")])
        .collect();
    let with_latency = figures.iter().filter(|f| f.contains("TTFT p99")).count();
    assert_eq!(with_latency, 1, "only the step that kept its latencies");
    assert!(figures
        .iter()
        .all(|f| f.contains("waiting") && f.contains("KV cache")));
    assert!(
        html.contains("preemptions"),
        "the fixture's server exports them"
    );
    r.steps[1].queue.clear();
    assert!(render(&r).contains("no time series"));
}

#[test]
fn a_cache_hit_column_appears_only_when_a_step_has_the_servers_hit_rate() {
    use crate::result::PrefixCacheStats;
    let plain = sweep();
    let (heads, _) = table::columns(&plain);
    assert!(!heads.iter().any(|h| h == "cache hit"), "{heads:?}");
    assert!(!table::render(&plain).contains("cache hit"));
    assert!(!render(&plain).contains("cache hit"));

    let mut cached = sweep();
    // Only the lowest-load step has stats (steps render in load order).
    let lowest = cached
        .steps
        .iter_mut()
        .min_by(|a, b| a.load.total_cmp(&b.load))
        .unwrap();
    lowest.prefix_cache = Some(PrefixCacheStats::new("vllm", 3000, 2028));
    let (heads, rows) = table::columns(&cached);
    let at = heads.iter().position(|h| h == "cache hit").unwrap();
    assert_eq!(heads[at + 1], "steady", "the column sits before steady");
    assert_eq!(rows[0][at], "67.6%");
    assert!(rows[1..].iter().all(|r| r[at] == "-"), "{rows:?}");
    assert!(rows.iter().all(|r| r.len() == heads.len()));
    let console = table::render(&cached);
    assert!(
        console.contains("cache hit") && console.contains("67.6%"),
        "{console}"
    );
    let html = render(&cached);
    assert!(html.contains("<th>cache hit</th>"), "{html}");
    assert!(html.contains(">67.6%</td>"), "{html}");
}

#[test]
fn a_step_with_more_cache_hits_than_its_prompts_explain_is_marked_and_warned() {
    use crate::result::PrefixCacheStats;
    let mut r = sweep();
    for s in &mut r.steps {
        s.prefix_cache = Some(PrefixCacheStats::new("vllm", 3000, 30));
    }
    let quiet = table::render(&r);
    assert!(!quiet.contains('!'), "no step warned: {quiet}");
    let lowest = r
        .steps
        .iter_mut()
        .min_by(|a, b| a.load.total_cmp(&b.load))
        .unwrap();
    lowest.prefix_cache = Some(PrefixCacheStats::new("vllm", 3000, 2028));
    lowest.cache_warning =
        Some("prefix-cache hit rate 67.6% on prompts with no designed sharing".into());
    let (heads, rows) = table::columns(&r);
    let at = heads.iter().position(|h| h == "cache hit").unwrap();
    assert_eq!(rows[0][at], "67.6%!");
    assert!(rows[1..].iter().all(|row| row[at] == "1.0%"), "{rows:?}");
    let console = table::render(&r);
    assert!(
        console.contains("(! = more than fresh prompts explain)"),
        "{console}"
    );
    let load = table::load_label(r.steps_by_load()[0].load);
    let note = format!(
        "! step at {load}: prefix-cache hit rate 67.6% on prompts with no designed sharing"
    );
    assert_eq!(console.matches(&note).count(), 1, "{console}");
    assert!(render(&r).contains(">67.6%!</td>"));
}

#[test]
fn a_step_whose_failures_decided_an_slo_shows_both_percentiles() {
    use crate::result::sweep::SloOutcomeRow;
    let plain = sweep();
    assert!(!table::render(&plain).contains("misses"));
    assert!(!render(&plain).contains("class=\"misses\""));
    let mut r = sweep();
    let step = r
        .steps
        .iter_mut()
        .min_by(|a, b| a.load.total_cmp(&b.load))
        .unwrap();
    step.slo_outcomes = vec![SloOutcomeRow {
        slo: "p99_ttft_ms<=500".into(),
        observed_ms: None,
        pass: false,
        samples: 400,
        tail_samples: 4,
        failures: 8,
        failed_in_tail: 4,
        vllm_observed_ms: Some(46.04),
        ..SloOutcomeRow::default()
    }];
    let console = table::render(&r);
    assert!(
        console.contains(
            "p99_ttft_ms<=500: vLLM 46.0 ms (successes only), with failures ∞ (failed) \
             (8 failed, 4 of 4 tail samples) → FAIL"
        ),
        "{console}"
    );
    let html = render(&r);
    assert!(html.contains("<table class=\"misses\">"), "{html}");
    assert!(
        html.contains("<td>46.0</td><td>∞ (failed)</td><td>8</td><td>4 of 4</td><td>fail</td>"),
        "{html}"
    );
}

#[test]
fn a_merged_sweep_lists_its_shards_and_notes_and_a_single_one_does_not() {
    let mut r = sweep();
    assert!(!render(&r).contains("Merged from"));
    r.merged = Some(crate::result::shard_sweep::MergedSweep {
        shards: 3,
        notes: vec!["gpu: 1 of 3 shards have no GPU block <none> (steps at load 10)".into()],
        ..Default::default()
    });
    let html = render(&r);
    assert!(html.contains("<h2>Merged from 3 shards</h2>"), "{html}");
    assert!(html
        .contains("<li>gpu: 1 of 3 shards have no GPU block &lt;none&gt; (steps at load 10)</li>"));
}

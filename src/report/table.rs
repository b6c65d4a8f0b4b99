//! Console table of a sweep: one row per step (sorted by load) and a summary
//! block with the knee as an interval, goodput, μ, queue onset, the SLOs and
//! the workload the knee belongs to. Pure: `render(&SweepResult) -> String`.
//!
//! The knee wording ([`knee_lines`]) and the small number formatters are
//! shared with the HTML report so both say the same thing.

pub use super::numbers::{compact, load_label, num};
use crate::result::sweep::{Dist, StepResult, SweepResult, Verdict};
use std::fmt::Write;

/// Longest reason shown in the table's last column (characters).
const REASON_WIDTH: usize = 32;

/// Render the step table and the summary block.
pub use super::knee_text::knee_lines;

pub fn render(r: &SweepResult) -> String {
    let mut out = String::new();
    if r.simulated {
        out.push_str("SIMULATED: numbers come from kneecap's built-in simulator\n");
    }
    let (heads, rows) = columns(r);
    if rows.is_empty() {
        out.push_str("no steps ran\n");
    } else {
        out.push_str(&units_caption(r));
        out.push('\n');
        out.push_str(&layout(&heads, &rows));
    }
    let cache_notes = r.steps_by_load().into_iter().filter_map(|s| {
        let w = s.cache_warning.as_ref()?;
        Some(format!("! step at {}: {w}", load_label(s.load)))
    });
    for line in super::misses::lines(r).into_iter().chain(cache_notes) {
        out.push_str(&line);
        out.push('\n');
    }
    out.push('\n');
    for line in summary_lines(r) {
        out.push_str(&line);
        out.push('\n');
    }
    out
}

/// Column headers of the step table (console and HTML); units are in [`units_caption`].
pub fn headers() -> Vec<String> {
    [
        "load", "achieved", "goodput", "TTFT p50", "TTFT p99", "TPOT p99", "waiting", "steady",
        "verdict", "reason",
    ]
    .iter()
    .map(|h| h.to_string())
    .collect()
}

/// The units of the table's columns.
pub fn units_caption(r: &SweepResult) -> String {
    let warned = r.steps.iter().any(|s| s.cache_warning.is_some());
    let cache = match (has_cache_column(r), warned) {
        (true, true) => {
            "; cache hit = the server's prefix-cache hit rate (! = more than fresh prompts explain)"
        }
        (true, false) => "; cache hit = the server's prefix-cache hit rate",
        _ => "",
    };
    let spec = if has_spec_column(r) {
        "; accept len = the server's mean speculative acceptance length (1 + accepted / drafts)"
    } else {
        ""
    };
    format!(
        "load in {}; achieved and goodput in req/s; latencies in ms; waiting = mean queued requests{cache}{spec}{}",
        r.load_unit(),
        super::gpu_text::caption(r)
    )
}

/// True when some step reports the server's prefix-cache hit rate: the
/// table then has a `cache hit` column before `steady`.
pub fn has_cache_column(r: &SweepResult) -> bool {
    r.steps.iter().any(|s| s.prefix_cache.is_some())
}

/// True when some step reports the server's speculative decoding: the
/// table then has an `accept len` column before `steady`.
pub fn has_spec_column(r: &SweepResult) -> bool {
    r.steps.iter().any(|s| s.spec_decode.is_some())
}

/// The step table (console and HTML): headers, and one row per step in
/// load order, with the `cache hit` and `accept len` columns when some step
/// has them.
pub fn columns(r: &SweepResult) -> (Vec<String>, Vec<Vec<String>>) {
    let cache = has_cache_column(r);
    let mut heads = headers();
    let mut rows: Vec<Vec<String>> = r.steps_by_load().into_iter().map(row).collect();
    if cache {
        let at = heads.len() - 3;
        heads.insert(at, "cache hit".into());
        for (cells, s) in rows.iter_mut().zip(r.steps_by_load()) {
            let mark = if s.cache_warning.is_some() { "!" } else { "" };
            cells.insert(at, hit_rate_cell(s.prefix_cache.as_ref()) + mark);
        }
    }
    if has_spec_column(r) {
        let at = heads.len() - 3;
        heads.insert(at, "accept len".into());
        for (cells, s) in rows.iter_mut().zip(r.steps_by_load()) {
            let len = s.spec_decode.as_ref().map(|sd| sd.acceptance_length);
            cells.insert(at, opt_num(len, 2));
        }
    }
    super::gpu_text::add_columns(r, &mut heads, &mut rows);
    (heads, rows)
}

/// A prefix-cache hit rate as a percentage (`67.6%`), `-` when none.
pub fn hit_rate_cell(p: Option<&crate::result::PrefixCacheStats>) -> String {
    match p.and_then(|p| p.hit_rate) {
        Some(rate) => format!("{}%", num(rate * 100.0, 1)),
        None => "-".into(),
    }
}

/// One table row for a step, cells already formatted (console and HTML).
pub fn row(s: &StepResult) -> Vec<String> {
    vec![
        load_label(s.load),
        num(s.achieved_rate, 1),
        num(s.goodput, 1),
        dist_ms(&s.ttft_ms, |d| d.p50),
        dist_ms(&s.ttft_ms, |d| d.p99),
        dist_ms(&s.tpot_ms, |d| d.p99),
        opt_num(s.mean_waiting, 1),
        if s.steady.steady { "yes" } else { "no" }.into(),
        verdict_label(s.verdict),
        truncate(
            s.reasons.first().map(String::as_str).unwrap_or(""),
            REASON_WIDTH,
        ),
    ]
}

/// `PASS`, `FAIL`, `GEN-LIMITED` or `INTERRUPTED`.
pub fn verdict_label(v: Verdict) -> String {
    v.label().into()
}

/// Like [`num`] for an optional value.
pub fn opt_num(v: Option<f64>, prec: usize) -> String {
    v.map_or_else(|| "-".into(), |v| num(v, prec))
}

/// A percentile of a distribution in ms, `-` when it holds no samples.
fn dist_ms(d: &Dist, pick: impl Fn(&Dist) -> f64) -> String {
    if d.count == 0 {
        return "-".into();
    }
    let v = pick(d);
    num(v, if v.abs() < 10.0 { 2 } else { 1 })
}

/// Cut `s` to at most `max` characters, ending with `…` when cut.
pub fn truncate(s: &str, max: usize) -> String {
    let s = s.trim();
    if s.chars().count() <= max {
        return s.to_string();
    }
    let mut t: String = s.chars().take(max.saturating_sub(1)).collect();
    t.push('…');
    t
}

/// Left-align the first and last columns, right-align the numbers.
fn layout(headers: &[String], rows: &[Vec<String>]) -> String {
    let n = headers.len();
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut out = String::new();
    let mut line = |cells: &[String]| {
        let mut l = String::new();
        for (i, (c, w)) in cells.iter().zip(&widths).enumerate() {
            let pad = " ".repeat(w.saturating_sub(c.chars().count()));
            // steady, verdict and reason are words: left-aligned.
            if i + 3 >= n {
                let _ = write!(l, "{c}{pad}  ");
            } else {
                let _ = write!(l, "{pad}{c}  ");
            }
        }
        out.push_str(l.trim_end());
        out.push('\n');
    };
    line(headers);
    for r in rows {
        line(r);
    }
    out
}

/// Everything printed under the table.
pub fn summary_lines(r: &SweepResult) -> Vec<String> {
    let unit = r.load_unit();
    let mut lines = knee_lines(r);
    if let (Some(g), Some(p)) = (r.knee.goodput_at_knee, r.knee.last_pass) {
        lines.push(format!(
            "goodput at the knee: {} req/s (at {} {unit})",
            num(g, 1),
            load_label(p)
        ));
    }
    lines.push(mu_line(r));
    if let Some(p) = &r.prediction {
        lines.push(prediction_line(r, p));
    }
    if let Some(c) = &r.calibration {
        lines.push(match c.service_rate {
            Some(mu) => format!(
                "calibration: μ ≈ {} req/s from a {:.1} s closed-loop probe ({}); the search started at {} {unit}",
                num(mu, 1),
                c.duration_s,
                c.end,
                load_label(c.start_load)
            ),
            None => format!(
                "calibration: no service rate ({} after {:.1} s); the search doubled from {} {unit}",
                c.end,
                c.duration_s,
                load_label(c.start_load)
            ),
        });
    }
    lines.push(match r.queue_onset_load {
        Some(q) => format!(
            "queue onset: {} {unit} (the waiting queue first left zero)",
            load_label(q)
        ),
        None => "queue onset: not observed".into(),
    });
    lines.push(slo_line(r));
    lines.push(workload_line(r));
    lines
}

/// The twin's knee beside the measured one (`sweep --twin` / `--predict`).
pub fn prediction_line(r: &SweepResult, p: &crate::result::twin::TwinKnee) -> String {
    let k = &r.knee;
    let measured = match (k.last_pass, k.first_fail) {
        (Some(a), Some(b)) => format!("{}–{}", load_label(a), load_label(b)),
        (Some(a), None) => format!("above {}", load_label(a)),
        (None, Some(b)) => format!("below {}", load_label(b)),
        (None, None) => "unknown".into(),
    };
    let verdict = p.agreement.map_or("", |a| a.label());
    let binds = p
        .explain
        .as_ref()
        .map_or(String::new(), |e| format!("binds: {}; ", e.binds.label()));
    format!(
        "predicted knee: {} req/s ({}–{}; {binds}{}, SIMULATED in virtual time) · measured {measured} req/s: {verdict}",
        num(p.knee_req_s, 2),
        num(p.low_req_s, 2),
        num(p.high_req_s, 2),
        p.source
    )
}

/// Estimated μ, and the simulator's computed μ when present.
pub fn mu_line(r: &SweepResult) -> String {
    let est = match r.service_rate_estimate {
        Some(m) if m.is_finite() => format!("{m:.1} req/s (from the throughput plateau)"),
        _ => "not estimated (no throughput plateau)".into(),
    };
    match r.sim_service_rate {
        Some(s) => format!(
            "service rate μ: {est}; simulator's computed μ: {} req/s (simulated)",
            num(s, 1)
        ),
        None => format!("service rate μ: {est}"),
    }
}

/// The SLOs and the error-rate bound.
pub fn slo_line(r: &SweepResult) -> String {
    let slos = if r.slos.is_empty() {
        "none".to_string()
    } else {
        r.slos.join(", ")
    };
    format!(
        "SLOs: {slos}; max error rate {}%",
        num(r.max_error_rate * 100.0, 1)
    )
}

/// The workload shape the knee belongs to.
pub fn workload_line(r: &SweepResult) -> String {
    let w = &r.workload;
    let or_dash = |s: &str| {
        if s.is_empty() {
            "-".to_string()
        } else {
            s.to_string()
        }
    };
    // A replayed trace has its own arrivals: no burstiness to state.
    let burstiness = match r.mode {
        crate::result::LoadUnit::TraceSpeed => String::new(),
        _ => format!(" (burstiness {})", num(w.burstiness, 1)),
    };
    format!(
        "workload: target {}, model {}, dataset {}, mean input {} tok, mean output {} tok, \
         arrival {}{burstiness}, seed {}",
        or_dash(&w.target),
        or_dash(&w.model),
        or_dash(&w.dataset),
        num(w.mean_input_tokens, 0),
        num(w.mean_output_tokens, 0),
        or_dash(&w.arrival),
        w.seed
    )
}

#[cfg(test)]
mod tests {

    #[test]
    fn small_loads_keep_two_significant_digits() {
        assert_eq!(load_label(0.25), "0.25");
        assert_eq!(load_label(0.8371), "0.84");
        assert_eq!(load_label(0.0333), "0.033");
        assert_eq!(load_label(16.43), "16.4");
        assert_eq!(load_label(32.0), "32.0");
        assert_eq!(compact(0.30000000000000004), "0.30");
        assert_eq!(compact(2.5), "2.5");
        assert_eq!(compact(64.0), "64");
        assert_eq!(compact(f64::INFINITY), "-");
    }

    use super::*;
    use crate::result::fixture::{sweep, sweep_with};

    #[test]
    fn a_session_sweep_says_its_load_is_sessions_or_users() {
        let mut r = sweep();
        r.workload.sessions = Some("4 turns, think 500 ms".into());
        let out = render(&r);
        assert!(
            out.contains("knee: between 32.0 and 36.0 sessions/s"),
            "{out}"
        );
        r.mode = crate::result::sweep::LoadUnit::Concurrency;
        assert!(render(&r).contains("36.0 users"), "{}", render(&r));
    }

    #[test]
    fn table_shows_the_knee_as_an_interval() {
        let out = render(&sweep());
        assert!(
            out.contains("knee: between 32.0 and 36.0 req/s (last pass 32.0, first fail 36.0)"),
            "{out}"
        );
    }

    #[test]
    fn table_shows_the_workload_line_beside_the_knee() {
        let out = render(&sweep());
        let line = out
            .lines()
            .find(|l| l.starts_with("workload:"))
            .expect("workload line");
        assert!(line.contains("model llama-3-8b"), "{line}");
        assert!(line.contains("dataset random"), "{line}");
        assert!(line.contains("mean input 512 tok"), "{line}");
        assert!(line.contains("mean output 128 tok"), "{line}");
        assert!(line.contains("arrival poisson"), "{line}");
        assert!(line.contains("seed 42"), "{line}");
    }

    #[test]
    fn table_has_one_row_per_step_in_load_order_with_verdicts() {
        let out = render(&sweep());
        let rows: Vec<&str> = out
            .lines()
            .filter(|l| l.contains("PASS") || l.contains("FAIL"))
            .collect();
        assert_eq!(rows.len(), 7, "{out}");
        assert!(rows[0].trim_start().starts_with("8.0"), "{}", rows[0]);
        assert!(rows[6].trim_start().starts_with("48.0"), "{}", rows[6]);
        assert!(
            rows[4].contains("FAIL") && rows[4].contains("p99_ttft_ms"),
            "{}",
            rows[4]
        );
    }

    #[test]
    fn summary_shows_goodput_mu_queue_onset_and_slos() {
        let out = render(&sweep());
        assert!(out.contains("goodput at the knee: 31.7 req/s"), "{out}");
        assert!(out.contains("service rate μ: 40.2 req/s"), "{out}");
        assert!(
            out.contains("simulator's computed μ: 40.0 req/s (simulated)"),
            "{out}"
        );
        assert!(out.contains("queue onset: 36.0 req/s"), "{out}");
        assert!(
            out.contains("SLOs: p99_ttft_ms<=500, p99_tpot_ms<=50"),
            "{out}"
        );
    }

    #[test]
    fn no_failed_step_says_the_knee_is_above_the_max_load() {
        let r = sweep_with(&[16.0, 32.0, 64.0], &[]);
        let out = render(&r);
        assert!(
            out.contains("knee: above 64 req/s (no step failed; raise --max-load)"),
            "{out}"
        );
    }

    #[test]
    fn first_step_failing_says_the_knee_is_below_it() {
        let r = sweep_with(&[], &[1.0, 2.0]);
        assert!(render(&r).contains("knee: below 1 req/s"));
    }

    #[test]
    fn generator_limited_sweep_blames_the_generator_not_the_server() {
        let mut r = sweep_with(&[100.0, 200.0], &[]);
        r.steps.push(crate::result::fixture::step(
            400.0,
            crate::result::Verdict::GeneratorLimited,
            400.0,
            40.0,
        ));
        r.knee.bounded_by_generator = true;
        let out = render(&r);
        assert!(
            out.contains(
                "the load generator, not the server, was the limit at 400 req/s: \
                 the server's knee is at least 200 req/s"
            ),
            "{out}"
        );
        assert!(out.contains("GEN-LIMITED"), "{out}");
    }

    #[test]
    fn non_monotonic_sweep_prints_a_warning() {
        let mut r = sweep();
        r.knee.non_monotonic = true;
        assert!(render(&r).contains("warning: the curve is not monotonic"));
    }

    #[test]
    fn empty_sweep_renders_without_panicking() {
        let out = render(&SweepResult::default());
        assert!(out.contains("no steps ran"), "{out}");
        assert!(out.contains("knee: unknown (no steps ran)"), "{out}");
    }

    #[test]
    fn nan_and_missing_values_render_as_dashes() {
        let mut r = sweep_with(&[5.0], &[]);
        r.steps[0].achieved_rate = f64::NAN;
        r.steps[0].mean_waiting = None;
        r.steps[0].ttft_ms = Dist::default();
        let out = render(&r);
        let row = out.lines().nth(2).expect("row");
        assert!(row.matches(" - ").count() >= 3, "{row}");
    }

    #[test]
    fn long_reasons_are_truncated_with_an_ellipsis() {
        let t = truncate(&"x".repeat(100), 10);
        assert_eq!(t.chars().count(), 10);
        assert!(t.ends_with('…'));
    }

    #[test]
    fn concurrency_mode_labels_loads_in_streams() {
        let mut r = sweep();
        r.mode = crate::result::sweep::LoadUnit::Concurrency;
        let out = render(&r);
        assert!(out.contains("load in streams"), "{out}");
        assert!(out.contains("between 32.0 and 36.0 streams"), "{out}");
    }
}

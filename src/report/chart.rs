//! Terminal charts of a sweep (braille, via `textplots`): throughput and
//! goodput vs offered load with the y = x reference, and the SLO'd latency
//! percentiles vs load (log scale) with each SLO threshold as a dashed
//! horizontal line; the knee is a dashed vertical line at the last passing
//! load with a `^` marker under the axis. Pure: returns a String, no colours.
//!
//! Also owns which latency series a sweep charts ([`latency_panels`]) and
//! SLO parsing, shared with the HTML report.

use super::table::{compact, num};
use crate::result::sweep::{Dist, StepResult, SweepResult};
use textplots::{AxisBuilder, Chart, LabelBuilder, LabelFormat, LineStyle, Plot, Shape};

/// Canvas height in braille dots (4 per text row).
const HEIGHT: u32 = 40;

/// An SLO as given on the command line: `p99_ttft_ms<=500`.
#[derive(Debug, Clone, PartialEq)]
pub struct Slo {
    /// The SLO text as given.
    pub text: String,
    /// `p99`, `p99.9`, `mean`, `median`, ...
    pub stat: String,
    /// `ttft`, `tpot`, `itl` or `e2el`.
    pub metric: String,
    /// Threshold in ms.
    pub threshold_ms: f64,
}

/// Parse `<stat>_<metric>_ms<=<N>` (also `<`); `None` when it doesn't fit.
pub fn parse_slo(text: &str) -> Option<Slo> {
    let t: String = text.chars().filter(|c| !c.is_whitespace()).collect();
    let (lhs, rhs) = t.split_once("<=").or_else(|| t.split_once('<'))?;
    let threshold_ms: f64 = rhs.parse().ok().filter(|v: &f64| v.is_finite())?;
    let lhs = lhs.to_ascii_lowercase();
    let lhs = lhs.strip_suffix("_ms").unwrap_or(&lhs);
    let (stat, metric) = lhs.split_once('_')?;
    matches!(metric, "ttft" | "tpot" | "itl" | "e2el").then(|| Slo {
        text: text.trim().to_string(),
        stat: stat.to_string(),
        metric: metric.to_string(),
        threshold_ms,
    })
}

/// One latency series to chart: a statistic of one metric per step, in ms.
#[derive(Debug, Clone)]
pub struct LatencyPanel {
    /// e.g. `p99 TTFT`.
    pub title: String,
    /// `(load, ms)` per step, sorted by load; steps without data left out.
    pub points: Vec<(f64, f64)>,
    /// The SLO on this series, when there is one.
    pub slo: Option<Slo>,
}

/// Latency series: one per SLO, plus p99 TTFT when no SLO covers TTFT.
/// With `all`, p99 TPOT and E2EL are added too when no SLO covers them.
pub fn latency_panels(r: &SweepResult, all: bool) -> Vec<LatencyPanel> {
    let slos: Vec<Slo> = r.slos.iter().filter_map(|s| parse_slo(s)).collect();
    let order = ["ttft", "tpot", "itl", "e2el"];
    let mut panels = Vec::new();
    for metric in order {
        let mine: Vec<&Slo> = slos.iter().filter(|s| s.metric == metric).collect();
        let wanted = metric == "ttft" || (all && metric != "itl");
        if mine.is_empty() && wanted {
            panels.push(panel(r, metric, "p99", None));
        }
        for s in mine {
            panels.push(panel(r, metric, &s.stat, Some(s.clone())));
        }
    }
    panels
}

fn panel(r: &SweepResult, metric: &str, stat: &str, slo: Option<Slo>) -> LatencyPanel {
    let points = r
        .steps_by_load()
        .into_iter()
        .filter_map(|s| {
            let v = observed(s, metric, stat, slo.as_ref())?;
            (v.is_finite() && s.load.is_finite()).then_some((s.load, v))
        })
        .collect();
    LatencyPanel {
        title: format!("{stat} {}", metric.to_uppercase()),
        points,
        slo,
    }
}

/// The step's value for an SLO (its recorded outcome) or a stat of a metric.
fn observed(s: &StepResult, metric: &str, stat: &str, slo: Option<&Slo>) -> Option<f64> {
    if let Some(o) = slo.and_then(|slo| s.slo_outcomes.iter().find(|o| o.slo == slo.text)) {
        // None without samples, or +∞ (on a failed request): no point.
        return o.observed_ms;
    }
    let d: &Dist = match metric {
        "ttft" => &s.ttft_ms,
        "tpot" => &s.tpot_ms,
        "itl" => &s.itl_ms,
        _ => &s.e2el_ms,
    };
    if d.count == 0 {
        return None;
    }
    match stat {
        "p50" | "median" => Some(d.p50),
        "p90" => Some(d.p90),
        "p99" => Some(d.p99),
        "p99.9" | "p999" => Some(d.p999),
        "max" | "p100" => Some(d.max),
        "mean" => Some(d.mean),
        _ => None,
    }
}

/// Milliseconds for an axis label: `850ms`, `12s`.
pub fn fmt_ms(v: f64) -> String {
    if !v.is_finite() {
        "-".into()
    } else if v >= 1000.0 {
        let secs = format!("{:.2}", v / 1000.0);
        format!("{}s", secs.trim_end_matches('0').trim_end_matches('.'))
    } else if v >= 10.0 {
        format!("{v:.0}ms")
    } else {
        format!("{v:.1}ms")
    }
}

/// Render the charts for a terminal `width` columns wide (clamped to 40..=240).
pub fn render(r: &SweepResult, width: u32) -> String {
    let steps = r.steps_by_load();
    if steps.is_empty() {
        return "no steps to chart\n".into();
    }
    let cols = width.clamp(40, 240);
    let frame = Frame::new(r, cols);
    let mut out = throughput_chart(r, &frame);
    for p in latency_panels(r, false) {
        out.push('\n');
        out.push_str(&latency_chart(r, &p, &frame));
    }
    out
}

/// The shared x axis and canvas size.
struct Frame {
    width: u32,
    xmax: f64,
    unit: &'static str,
}

impl Frame {
    fn new(r: &SweepResult, cols: u32) -> Self {
        let max_load = r
            .steps
            .iter()
            .map(|s| s.load)
            .filter(|l| l.is_finite())
            .fold(0.0, f64::max);
        let xmax = if max_load > 0.0 { max_load * 1.05 } else { 1.0 };
        Frame {
            width: ((cols - 12) * 2).max(32),
            xmax,
            unit: r.load_unit(),
        }
    }

    /// Braille dot column of load `x`.
    fn px(&self, x: f64) -> u32 {
        let f = (x / self.xmax).clamp(0.0, 1.0);
        (f * self.width as f64).round() as u32
    }
}

/// Points every few dots along a segment: a dashed or dotted line.
fn dashed(a: (f64, f64), b: (f64, f64), dots: u32, on: u32, period: u32) -> Vec<(f32, f32)> {
    let n = dots.max(2);
    (0..=n)
        .filter(|i| i % period.max(1) < on)
        .map(|i| {
            let t = i as f64 / n as f64;
            (
                (a.0 + (b.0 - a.0) * t) as f32,
                (a.1 + (b.1 - a.1) * t) as f32,
            )
        })
        .collect()
}

/// A polyline through `pts` as dots spaced `period` canvas dots apart.
fn dotted(pts: &[(f64, f64)], frame: &Frame, period: u32) -> Vec<(f32, f32)> {
    pts.windows(2)
        .flat_map(|w| {
            let span = frame.px(w[1].0).abs_diff(frame.px(w[0].0)).max(1);
            dashed(w[0], w[1], span, 1, period)
        })
        .collect()
}

/// Draw shapes on one chart; `lines` solid, `dots` as points.
fn draw(
    frame: &Frame,
    (ymin, ymax): (f64, f64),
    lines: &[Vec<(f32, f32)>],
    dots: &[Vec<(f32, f32)>],
    ylabel: fn(f32) -> String,
) -> String {
    let shapes: Vec<Shape> = lines
        .iter()
        .map(|l| Shape::Lines(l))
        .chain(dots.iter().map(|d| Shape::Points(d)))
        .collect();
    let (y0, y1) = (ymin as f32, ymax as f32);
    let mut chart = Chart::new_with_y_range(frame.width, HEIGHT, 0.0, frame.xmax as f32, y0, y1);
    let mut c = chart
        .x_axis_style(LineStyle::None)
        .y_axis_style(LineStyle::None)
        .x_label_format(LabelFormat::None)
        .y_label_format(LabelFormat::Custom(Box::new(ylabel)));
    for s in &shapes {
        c = c.lineplot(s);
    }
    c.figures();
    // Drop textplots' (empty) x-label line: `x_ticks` writes the loads instead.
    let text = c.to_string();
    let mut lines: Vec<&str> = text.lines().map(str::trim_end).collect();
    while lines.last().is_some_and(|l| l.is_empty()) {
        lines.pop();
    }
    lines.iter().map(|l| format!("{l}\n")).collect()
}

/// The steps' loads written under their columns, skipping any that would overlap.
fn x_ticks(r: &SweepResult, frame: &Frame) -> String {
    let mut line = String::new();
    let total = (frame.width / 2) as usize + 1;
    for x in std::iter::once(0.0).chain(r.steps_by_load().iter().map(|s| s.load)) {
        if !x.is_finite() {
            continue;
        }
        let label = compact(x);
        let col = (frame.px(x) / 2) as usize;
        let used = line.chars().count();
        let start = col.saturating_sub(label.len() / 2);
        if (used == 0 || start > used) && start + label.len() <= total {
            line.push_str(&" ".repeat(start - used));
            line.push_str(&label);
        }
    }
    format!("{line}\n")
}

/// A `^` under the knee's column, with a label that stays on screen.
fn knee_marker(r: &SweepResult, frame: &Frame) -> String {
    let Some(k) = r.knee.last_pass.filter(|k| k.is_finite()) else {
        return String::new();
    };
    let col = (frame.px(k) / 2) as usize;
    let label = format!("knee: last pass {} {}", compact(k), frame.unit);
    let total = (frame.width / 2) as usize;
    if col + 2 + label.chars().count() <= total {
        format!("{}^ {label}\n", " ".repeat(col))
    } else {
        let pad = col.saturating_sub(label.chars().count() + 1);
        format!("{}{label} ^\n", " ".repeat(pad))
    }
}

/// A dashed vertical line at the last passing load, spanning `y`.
fn knee_line(r: &SweepResult, (y0, y1): (f64, f64)) -> Option<Vec<(f32, f32)>> {
    let k = r.knee.last_pass.filter(|k| k.is_finite())?;
    Some(dashed((k, y0), (k, y1), HEIGHT, 2, 4))
}

fn throughput_chart(r: &SweepResult, frame: &Frame) -> String {
    let steps = r.steps_by_load();
    let pick = |f: fn(&StepResult) -> f64| -> Vec<(f64, f64)> {
        steps
            .iter()
            .map(|s| (s.load, f(s)))
            .filter(|(x, y)| x.is_finite() && y.is_finite())
            .collect()
    };
    let achieved = pick(|s| s.achieved_rate);
    let goodput = pick(|s| s.goodput);
    let top = achieved
        .iter()
        .chain(&goodput)
        .map(|p| p.1)
        .fold(frame.xmax, f64::max)
        * 1.05;
    let f32s = |v: &[(f64, f64)]| v.iter().map(|&(x, y)| (x as f32, y as f32)).collect();
    let rate_mode = frame.unit == "req/s";
    let mut dots = vec![dotted(&goodput, frame, 2)];
    if rate_mode {
        // y = x only means something when the load is itself a rate.
        dots.push(dashed(
            (0.0, 0.0),
            (frame.xmax, frame.xmax),
            frame.width,
            1,
            4,
        ));
    }
    dots.extend(knee_line(r, (0.0, top)));
    let body = draw(frame, (0.0, top), &[f32s(&achieved)], &dots, |v| {
        format!("{v:.0}")
    });
    let diag = if rate_mode {
        "   sparse dots: y = x (offered)"
    } else {
        ""
    };
    format!(
        "throughput vs offered load ({unit})\n{body}{ticks}{marker}\
         solid: achieved req/s   dotted: goodput req/s{diag}\n",
        unit = frame.unit,
        ticks = x_ticks(r, frame),
        marker = knee_marker(r, frame),
    )
}

fn latency_chart(r: &SweepResult, p: &LatencyPanel, frame: &Frame) -> String {
    let title = format!(
        "{} (ms, log scale) vs offered load ({})",
        p.title, frame.unit
    );
    let pts: Vec<(f64, f64)> = p
        .points
        .iter()
        .filter(|(_, y)| *y > 0.0)
        .map(|&(x, y)| (x, y.log10()))
        .collect();
    let slo = p.slo.as_ref().map(|s| s.threshold_ms).filter(|t| *t > 0.0);
    let ys = pts.iter().map(|p| p.1).chain(slo.map(f64::log10));
    let (lo, hi) = ys.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), y| {
        (a.min(y), b.max(y))
    });
    if !lo.is_finite() || !hi.is_finite() {
        return format!("{title}\n(no data)\n");
    }
    let (lo, hi) = (lo - 0.15, hi.max(lo + 0.3) + 0.15);
    let mut dots: Vec<Vec<(f32, f32)>> = Vec::new();
    if let Some(t) = slo {
        dots.push(dashed(
            (0.0, t.log10()),
            (frame.xmax, t.log10()),
            frame.width,
            3,
            5,
        ));
    }
    dots.extend(knee_line(r, (lo, hi)));
    let line: Vec<(f32, f32)> = pts.iter().map(|&(x, y)| (x as f32, y as f32)).collect();
    let body = draw(frame, (lo, hi), &[line], &dots, |v| {
        fmt_ms(10f64.powf(v as f64))
    });
    let legend = match &p.slo {
        Some(s) => format!(
            "solid: {}   dashed: SLO {} <= {} ms",
            p.title,
            p.title,
            num(s.threshold_ms, 0)
        ),
        None => format!("solid: {} (no SLO on it)", p.title),
    };
    format!(
        "{title}\n{body}{}{}{legend}\n",
        x_ticks(r, frame),
        knee_marker(r, frame)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::result::fixture::{sweep, sweep_with};

    #[test]
    fn slo_text_parses_into_stat_metric_and_threshold() {
        let s = parse_slo("p99_ttft_ms<=500").expect("parses");
        assert_eq!(
            (s.stat.as_str(), s.metric.as_str(), s.threshold_ms),
            ("p99", "ttft", 500.0)
        );
        assert_eq!(
            parse_slo("mean_e2el_ms < 2000").map(|s| s.metric),
            Some("e2el".into())
        );
        assert_eq!(parse_slo("error_rate<=0.01"), None);
        assert_eq!(parse_slo("nonsense"), None);
    }

    #[test]
    fn charts_are_drawn_with_braille_and_label_the_slo_line() {
        let out = render(&sweep(), 80);
        assert!(
            out.chars().any(|c| ('\u{2801}'..='\u{28FF}').contains(&c)),
            "{out}"
        );
        assert!(out.contains("dashed: SLO p99 TTFT <= 500 ms"), "{out}");
        assert!(out.contains("dashed: SLO p99 TPOT <= 50 ms"), "{out}");
        assert!(out.contains("throughput vs offered load (req/s)"), "{out}");
    }

    #[test]
    fn charts_fit_in_80_columns() {
        let out = render(&sweep(), 80);
        for line in out.lines() {
            assert!(
                line.chars().count() <= 80,
                "{} cols: {line}",
                line.chars().count()
            );
        }
    }

    #[test]
    fn knee_is_marked_under_the_chart() {
        let out = render(&sweep(), 80);
        let marker = out
            .lines()
            .find(|l| l.contains("knee: last pass 32 req/s"))
            .expect("marker");
        assert!(marker.contains('^'), "{marker}");
    }

    #[test]
    fn y_equals_x_reference_is_drawn_only_in_rate_mode() {
        let mut r = sweep();
        assert!(render(&r, 80).contains("y = x"));
        r.mode = crate::result::sweep::LoadUnit::Concurrency;
        let out = render(&r, 80);
        assert!(!out.contains("y = x"), "{out}");
        assert!(
            out.contains("throughput vs offered load (streams)"),
            "{out}"
        );
    }

    #[test]
    fn empty_sweep_renders_a_note_instead_of_panicking() {
        assert_eq!(render(&SweepResult::default(), 80), "no steps to chart\n");
    }

    #[test]
    fn one_step_sweep_renders_without_panicking() {
        let out = render(&sweep_with(&[10.0], &[]), 80);
        assert!(out.contains("throughput vs offered load"), "{out}");
        assert!(out.contains("SLO p99 TTFT"), "{out}");
    }

    #[test]
    fn zero_loads_nan_values_and_tiny_widths_do_not_panic() {
        let mut r = sweep_with(&[0.0, 0.0], &[0.0]);
        r.steps[0].achieved_rate = f64::NAN;
        r.steps[1].ttft_ms.p99 = f64::INFINITY;
        r.steps[2].goodput = -1.0;
        r.knee.last_pass = Some(f64::NAN);
        r.slos.push("p99_e2el_ms<=0".into());
        for w in [0, 1, 40, 80, 1000] {
            assert!(!render(&r, w).is_empty());
        }
    }

    #[test]
    fn latency_panels_follow_the_slos_and_add_ttft_when_missing() {
        let mut r = sweep();
        r.slos = vec!["p90_e2el_ms<=9000".into()];
        let titles: Vec<String> = latency_panels(&r, false)
            .into_iter()
            .map(|p| p.title)
            .collect();
        assert_eq!(titles, ["p99 TTFT", "p90 E2EL"]);
        let all: Vec<String> = latency_panels(&r, true)
            .into_iter()
            .map(|p| p.title)
            .collect();
        assert_eq!(all, ["p99 TTFT", "p99 TPOT", "p90 E2EL"]);
    }

    #[test]
    fn milliseconds_format_for_axis_labels() {
        assert_eq!(fmt_ms(850.0), "850ms");
        assert_eq!(fmt_ms(12_000.0), "12s");
        assert_eq!(fmt_ms(4_050.0), "4.05s");
        assert_eq!(fmt_ms(10_600.0), "10.6s");
        assert_eq!(fmt_ms(2.5), "2.5ms");
    }
}

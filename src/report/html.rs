//! Self-contained HTML report of a sweep: one file, inline CSS and inline SVG
//! charts (plotters' SVG backend rendered to a String), no scripts and no
//! network fetches (a Content-Security-Policy of `default-src 'none'` makes
//! sure). Holds the knee headline with goodput, μ, queue onset, SLOs and the
//! workload; throughput, latency and queue-depth charts vs load with the SLO
//! lines and the knee marked; the Pareto chart (tokens/s per user vs total);
//! the cost at the knee when priced; per step, client latencies and server
//! gauges on one time axis; the step table.
//! Pure: `render(&SweepResult) -> String`; every user string is HTML-escaped.

use super::chart::{fmt_ms, latency_panels, LatencyPanel};
use super::knee_text;
use super::table::{self, columns, compact, knee_lines, summary_lines, units_caption};
use crate::result::sweep::{StepResult, SweepResult, Verdict};
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use std::fmt::Write;

const BLUE_: RGBColor = RGBColor(31, 119, 180);
const GREEN_: RGBColor = RGBColor(44, 160, 44);
const ORANGE_: RGBColor = RGBColor(230, 126, 34);
const RED_: RGBColor = RGBColor(214, 39, 40);
const GREY_: RGBColor = RGBColor(150, 150, 150);
const FONT: &str = "sans-serif";

/// Render the whole report as one HTML document.
pub fn render(r: &SweepResult) -> String {
    let mut out = String::with_capacity(64 * 1024);
    head(&mut out, r);
    headline(&mut out, r);
    merged_notes(&mut out, r);
    out.push_str("<section><h2>Load curves</h2><div class=\"grid\">\n");
    let power = html_pareto::power_svg(r);
    for svg in [throughput_svg(r), queue_svg(r), html_pareto::pareto_svg(r)]
        .into_iter()
        .chain(power)
    {
        let _ = writeln!(out, "<figure>{svg}</figure>");
    }
    for p in latency_panels(r, true) {
        let _ = writeln!(out, "<figure>{}</figure>", latency_svg(r, &p));
    }
    out.push_str("</div></section>\n");
    html_pareto::cost_section(&mut out, r);
    queue_series(&mut out, r);
    step_table(&mut out, r);
    out.push_str("</main></body></html>\n");
    out
}

/// Escape text for HTML element content and quoted attribute values.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

const CSS: &str = "\
body{margin:0;background:#f6f7f9;color:#1d2330;font:15px/1.45 system-ui,-apple-system,'Segoe UI',sans-serif}
main{max-width:1180px;margin:0 auto;padding:24px}
h1{font-size:24px;margin:0 0 4px}h2{font-size:18px;margin:28px 0 10px}h3{font-size:14px;margin:0 0 4px}
.meta{color:#667;margin:0 0 16px}
.badge{display:inline-block;background:#8e44ad;color:#fff;border-radius:4px;padding:2px 8px;font-size:13px;vertical-align:middle;letter-spacing:.05em}
.card{background:#fff;border:1px solid #e1e4ea;border-radius:8px;padding:16px 20px}
.knee{font-size:20px;font-weight:600;margin:0 0 8px}
.warn{color:#a04000;margin:4px 0}
.binds{margin:4px 0}
ul.facts{margin:8px 0 0;padding-left:18px}
.grid{display:grid;grid-template-columns:repeat(auto-fit,minmax(440px,1fr));gap:16px}
.small{display:grid;grid-template-columns:repeat(auto-fill,minmax(300px,1fr));gap:12px}
figure{margin:0;background:#fff;border:1px solid #e1e4ea;border-radius:8px;padding:8px}
svg.chart{display:block;width:100%;height:auto}
.nochart{color:#889;font-style:italic;padding:24px;margin:0}
table{border-collapse:collapse;background:#fff;width:100%;font-size:14px}
th,td{border-bottom:1px solid #e6e8ee;padding:6px 8px;text-align:right;white-space:nowrap}
th{background:#eef0f4}td.l,th.l{text-align:left}td.reason{white-space:normal;text-align:left;color:#555}
.pass{color:#1e7d32;font-weight:600}.fail{color:#c0392b;font-weight:600}.gen{color:#b9770e;font-weight:600}
caption{caption-side:bottom;text-align:left;color:#667;padding:6px 0;font-size:13px}
";

fn head(out: &mut String, r: &SweepResult) {
    let title = format!("kneecap sweep: {}", r.workload.model.trim());
    let title = title.trim_end_matches([' ', ':']);
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n\
         <meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{}</title>\n<style>\n{CSS}</style></head><body><main>\n",
        escape(title)
    );
}

fn headline(out: &mut String, r: &SweepResult) {
    let w = &r.workload;
    let badge = if r.simulated {
        " <span class=\"badge\" title=\"numbers come from kneecap's built-in simulator\">SIMULATED</span>"
    } else {
        ""
    };
    let title = match w.model.trim() {
        "" => "kneecap sweep".to_string(),
        m => format!("kneecap sweep: {m}"),
    };
    let _ = writeln!(out, "<h1>{}{badge}</h1>", escape(&title));
    let mut meta: Vec<String> = vec![w.target.clone()];
    meta.push(format!("{} mode", r.mode.name()));
    if !r.started_at.is_empty() {
        meta.push(format!("started {}", r.started_at));
    }
    if !r.kneecap_version.is_empty() {
        meta.push(format!("kneecap {}", r.kneecap_version));
    }
    if r.interrupted || !r.complete {
        meta.push("incomplete".into());
    }
    meta.retain(|m| !m.trim().is_empty());
    let _ = writeln!(out, "<p class=\"meta\">{}</p>", escape(&meta.join(" · ")));
    let knee = knee_lines(r);
    out.push_str("<section class=\"card\">\n");
    let binds = knee_text::binds_line(r);
    for (i, line) in knee.iter().enumerate() {
        let class = match i {
            0 => "knee",
            _ if Some(line) == binds.as_ref() => "binds",
            _ => "warn",
        };
        let _ = writeln!(out, "<p class=\"{class}\">{}</p>", escape(line));
    }
    out.push_str("<ul class=\"facts\">\n");
    for line in summary_lines(r).iter().skip(knee.len()) {
        let _ = writeln!(out, "<li>{}</li>", escape(line));
    }
    let _ = writeln!(
        out,
        "<li>endpoint {}; steps: {} s warm-up, at least {} s and {} requests each</li>",
        escape(&w.endpoint),
        table::num(w.step_warmup_s, 1),
        table::num(w.step_min_duration_s, 1),
        w.step_min_requests
    );
    out.push_str("</ul></section>\n");
}

/// A merged sweep's shards and how its numbers were computed (the same
/// notes as `merged.notes`, including a GPU block left out and why).
fn merged_notes(out: &mut String, r: &SweepResult) {
    let Some(m) = &r.merged else {
        return;
    };
    let _ = writeln!(
        out,
        "<section><h2>Merged from {} shards</h2><ul class=\"facts\">",
        m.shards
    );
    for note in &m.notes {
        let _ = writeln!(out, "<li>{}</li>", escape(note));
    }
    out.push_str("</ul></section>\n");
}

/// Draw into an SVG string of `size`; a note instead of a chart on error.
fn svg(
    size: (u32, u32),
    label: &str,
    draw: impl FnOnce(&DrawingArea<SVGBackend<'_>, Shift>) -> Result<(), String>,
) -> String {
    let mut buf = String::new();
    {
        let root = SVGBackend::with_string(&mut buf, size).into_drawing_area();
        let done = root
            .fill(&WHITE)
            .map_err(|e| e.to_string())
            .and_then(|()| draw(&root))
            .and_then(|()| root.present().map_err(|e| e.to_string()));
        if let Err(e) = done {
            return format!(
                "<p class=\"nochart\">{}: chart unavailable ({})</p>",
                escape(label),
                escape(&e)
            );
        }
    }
    // Replace plotters' root tag: no fixed size (CSS scales it), no namespace URL.
    let body = buf.find('>').map_or("", |i| &buf[i + 1..]);
    format!(
        "<svg class=\"chart\" viewBox=\"0 0 {} {}\" role=\"img\" aria-label=\"{}\">{body}",
        size.0,
        size.1,
        escape(label)
    )
}

fn err<E: std::fmt::Display>(e: E) -> String {
    e.to_string()
}

/// x range shared by the load charts: 0 to a bit past the highest load.
fn load_range(r: &SweepResult) -> f64 {
    let m = r
        .steps
        .iter()
        .map(|s| s.load)
        .filter(|l| l.is_finite())
        .fold(0.0, f64::max);
    if m > 0.0 {
        m * 1.05
    } else {
        1.0
    }
}

/// Finite `(load, f(step))` points by load.
fn series(r: &SweepResult, f: impl Fn(&StepResult) -> Option<f64>) -> Vec<(f64, f64)> {
    r.steps_by_load()
        .into_iter()
        .filter_map(|s| Some((s.load, f(s)?)))
        .filter(|(x, y)| x.is_finite() && y.is_finite())
        .collect()
}

type Cart<Y> = Cartesian2d<RangedCoordf64, Y>;

/// Shade the knee interval and draw a dashed line at the last passing load.
fn mark_knee<Y: Ranged<ValueType = f64>>(
    chart: &mut ChartContext<'_, SVGBackend<'_>, Cart<Y>>,
    r: &SweepResult,
    (y0, y1): (f64, f64),
) -> Result<(), String> {
    let Some(p) = r.knee.last_pass.filter(|p| p.is_finite()) else {
        return Ok(());
    };
    if let Some(f) = r.knee.first_fail.filter(|f| f.is_finite() && *f > p) {
        let band = Rectangle::new([(p, y0), (f, y1)], RED_.mix(0.08).filled());
        chart.draw_series(std::iter::once(band)).map_err(err)?;
    }
    let line = DashedLineSeries::new(vec![(p, y0), (p, y1)], 5, 4, GREEN_.stroke_width(2));
    chart
        .draw_series(line)
        .map_err(err)?
        .label(format!("knee (last pass {} {})", compact(p), r.load_unit()))
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], GREEN_.stroke_width(2)));
    Ok(())
}

/// A line with dot markers, labelled in the legend.
fn line_with_dots<Y: Ranged<ValueType = f64>>(
    chart: &mut ChartContext<'_, SVGBackend<'_>, Cart<Y>>,
    pts: &[(f64, f64)],
    color: RGBColor,
    label: &str,
) -> Result<(), String> {
    chart
        .draw_series(LineSeries::new(pts.iter().copied(), color.stroke_width(2)))
        .map_err(err)?
        .label(label)
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
    chart
        .draw_series(pts.iter().map(|&p| Circle::new(p, 3, color.filled())))
        .map_err(err)?;
    Ok(())
}

fn legend<'a, 'b: 'a, Y: Ranged<ValueType = f64>>(
    chart: &mut ChartContext<'a, SVGBackend<'b>, Cart<Y>>,
    pos: SeriesLabelPosition,
) -> Result<(), String> {
    chart
        .configure_series_labels()
        .position(pos)
        .background_style(WHITE.mix(0.85))
        .border_style(RGBColor(200, 200, 200))
        .label_font((FONT, 13))
        .draw()
        .map_err(err)
}

/// A linear chart of load (x) against `(0, top)` (y), mesh drawn.
fn load_chart<'a, 'b: 'a>(
    root: &'a DrawingArea<SVGBackend<'b>, Shift>,
    r: &SweepResult,
    caption: &str,
    top: f64,
    ydesc: &str,
) -> Result<ChartContext<'a, SVGBackend<'b>, Cart<RangedCoordf64>>, String> {
    let mut chart = ChartBuilder::on(root)
        .caption(caption, (FONT, 18))
        .margin(12)
        .x_label_area_size(42)
        .y_label_area_size(52)
        .build_cartesian_2d(0.0..load_range(r), 0.0..top)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc(format!("offered load ({})", r.load_unit()))
        .x_label_formatter(&|v| compact(*v))
        .y_desc(ydesc)
        .light_line_style(RGBColor(238, 238, 238))
        .draw()
        .map_err(err)?;
    Ok(chart)
}

fn throughput_svg(r: &SweepResult) -> String {
    let achieved = series(r, |s| Some(s.achieved_rate));
    let goodput = series(r, |s| Some(s.goodput));
    let xmax = load_range(r);
    let top = achieved
        .iter()
        .chain(&goodput)
        .map(|p| p.1)
        .fold(xmax, f64::max)
        * 1.08;
    let title = "Throughput and goodput vs offered load";
    svg((640, 380), title, |root| {
        let mut chart = load_chart(root, r, title, top, "req/s")?;
        mark_knee(&mut chart, r, (0.0, top))?;
        // y = x only means something when the load is itself a rate.
        if r.load_unit() == "req/s" {
            let m = xmax.min(top);
            let diag = DashedLineSeries::new(vec![(0.0, 0.0), (m, m)], 6, 4, GREY_.into());
            chart
                .draw_series(diag)
                .map_err(err)?
                .label("offered (y = x)")
                .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], GREY_));
        }
        line_with_dots(&mut chart, &achieved, BLUE_, "achieved")?;
        line_with_dots(&mut chart, &goodput, ORANGE_, "goodput")?;
        legend(&mut chart, SeriesLabelPosition::UpperLeft)
    })
}

fn latency_svg(r: &SweepResult, p: &LatencyPanel) -> String {
    let pts: Vec<(f64, f64)> = p.points.iter().copied().filter(|&(_, y)| y > 0.0).collect();
    let slo = p
        .slo
        .as_ref()
        .map(|s| s.threshold_ms)
        .filter(|t| t.is_finite() && *t > 0.0);
    let ys = pts.iter().map(|p| p.1).chain(slo);
    let (lo, hi) = ys.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), y| {
        (a.min(y), b.max(y))
    });
    let title = format!("{} vs offered load", p.title);
    if !lo.is_finite() || !hi.is_finite() {
        return format!("<p class=\"nochart\">{}: no data</p>", escape(&title));
    }
    // Log scale only when the values span more than ~a decade (it labels decades).
    let log = hi / lo > 20.0;
    let xmax = load_range(r);
    let xdesc = format!("offered load ({})", r.load_unit());
    let ydesc = format!("{} (ms)", p.title);
    let caption = if log {
        format!("{title} (log scale)")
    } else {
        title.clone()
    };
    svg((640, 380), &title, |root| {
        let mut b = ChartBuilder::on(root);
        b.caption(caption, (FONT, 18))
            .margin(12)
            .x_label_area_size(42)
            .y_label_area_size(64);
        let lines = RGBColor(238, 238, 238);
        if log {
            let y = (lo / 1.6, hi * 1.6);
            let mut chart = b
                .build_cartesian_2d(0.0..xmax, (y.0..y.1).log_scale())
                .map_err(err)?;
            let mut mesh = chart.configure_mesh();
            mesh.x_desc(xdesc).y_desc(ydesc).light_line_style(lines);
            mesh.x_label_formatter(&|v| compact(*v))
                .y_label_formatter(&|v| fmt_ms(*v));
            mesh.draw().map_err(err)?;
            latency_series(&mut chart, r, p, &pts, y)
        } else {
            let pad = (hi - lo).max(hi * 0.1) * 0.15;
            let y = ((lo - pad).max(0.0), hi + pad);
            let mut chart = b.build_cartesian_2d(0.0..xmax, y.0..y.1).map_err(err)?;
            let mut mesh = chart.configure_mesh();
            mesh.x_desc(xdesc).y_desc(ydesc).light_line_style(lines);
            mesh.x_label_formatter(&|v| compact(*v))
                .y_label_formatter(&|v| fmt_ms(*v));
            mesh.draw().map_err(err)?;
            latency_series(&mut chart, r, p, &pts, y)
        }
    })
}

/// The knee, the SLO line, the data and the legend of a latency chart.
fn latency_series<'a, 'b: 'a, Y: Ranged<ValueType = f64>>(
    chart: &mut ChartContext<'a, SVGBackend<'b>, Cart<Y>>,
    r: &SweepResult,
    p: &LatencyPanel,
    pts: &[(f64, f64)],
    (y0, y1): (f64, f64),
) -> Result<(), String> {
    mark_knee(chart, r, (y0, y1))?;
    if let Some(s) = p.slo.as_ref().filter(|s| s.threshold_ms > 0.0) {
        let (t, xmax) = (s.threshold_ms, load_range(r));
        let line = DashedLineSeries::new(vec![(0.0, t), (xmax, t)], 8, 5, RED_.stroke_width(2));
        chart
            .draw_series(line)
            .map_err(err)?
            .label(format!("SLO {} ≤ {} ms", p.title, compact(t)))
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], RED_.stroke_width(2)));
    }
    line_with_dots(chart, pts, BLUE_, &p.title)?;
    legend(chart, SeriesLabelPosition::UpperLeft)
}

fn queue_svg(r: &SweepResult) -> String {
    let waiting = series(r, |s| s.mean_waiting);
    let running = series(r, |s| s.mean_running);
    if waiting.is_empty() && running.is_empty() {
        return "<p class=\"nochart\">queue depth vs load: no queue gauges were scraped</p>".into();
    }
    let top = waiting
        .iter()
        .chain(&running)
        .map(|p| p.1)
        .fold(1.0, f64::max)
        * 1.1;
    let title = "Server queue (mean per step) vs offered load";
    svg((640, 380), title, |root| {
        let mut chart = load_chart(root, r, title, top, "requests")?;
        mark_knee(&mut chart, r, (0.0, top))?;
        line_with_dots(&mut chart, &waiting, RED_, "waiting")?;
        line_with_dots(&mut chart, &running, BLUE_, "running")?;
        legend(&mut chart, SeriesLabelPosition::UpperLeft)
    })
}

#[path = "html_pareto.rs"]
mod html_pareto;
#[path = "html_steps.rs"]
mod steps;
use steps::{queue_series, step_table};

#[cfg(test)]
#[path = "html_tests.rs"]
mod tests;

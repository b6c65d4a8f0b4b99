//! The per-step parts of the HTML report: each step's client latencies and
//! server gauges over time (small multiples on one time axis) and the table
//! of every step with its verdict.

use super::*;
use crate::client::scrape::QueueSample;
use crate::result::series::LatencyPoint;

/// Small multiples: within each step, the client's latency percentiles and
/// the server's gauges (waiting, running, preemptions, KV cache) on one
/// time axis, so the moment the queue starts to build is visible.
pub(super) fn queue_series(out: &mut String, r: &SweepResult) {
    out.push_str(
        "<section><h2>Client and server on one time axis, per step</h2><div class=\"small\">\n",
    );
    for s in r.steps_by_load() {
        let title = format!(
            "{} {} · {}",
            compact(s.load),
            r.load_unit(),
            table::verdict_label(s.verdict)
        );
        let _ = writeln!(
            out,
            "<figure class=\"qstep\"><h3>{}</h3>{}</figure>",
            escape(&title),
            step_timeline_svg(s, &title)
        );
    }
    out.push_str("</div></section>\n");
}

type Points = Vec<(f64, f64)>;

fn step_timeline_svg(s: &StepResult, title: &str) -> String {
    let gauge = |f: fn(&QueueSample) -> Option<f64>| -> Points {
        finite(s.queue.iter().filter_map(|q| Some((q.t_s, f(q)?))))
    };
    let latency = |f: fn(&LatencyPoint) -> Option<f64>| -> Points {
        finite(s.latency_series.iter().filter_map(|p| Some((p.t_s, f(p)?))))
    };
    let queue = [
        (gauge(|q| q.waiting), RED_, "waiting"),
        (gauge(|q| q.running), BLUE_, "running"),
        (
            since_first(gauge(|q| q.preemptions)),
            ORANGE_,
            "preemptions",
        ),
    ];
    let kv = gauge(|q| q.kv_cache_usage.map(|u| u * 100.0));
    let client = [
        (latency(|p| p.ttft_p50_ms), BLUE_, "TTFT p50"),
        (latency(|p| p.ttft_p99_ms), RED_, "TTFT p99"),
        (latency(|p| p.tpot_p99_ms), GREEN_, "TPOT p99"),
    ];
    let all = || {
        queue
            .iter()
            .chain(&client)
            .flat_map(|(p, _, _)| p)
            .chain(&kv)
    };
    if all().next().is_none() {
        return "<p class=\"nochart\">no time series: no queue samples (gauges not scraped) and no latencies (kept with --html)</p>".into();
    }
    let t1 = all().map(|p| p.0).fold(s.window_end_s.max(1.0), f64::max);
    svg(
        (380, 360),
        &format!("client and server over time at {title}"),
        |root| {
            let (top, rest) = root.split_vertically(150);
            let (middle, bottom) = rest.split_vertically(120);
            panel(&top, t1, "ms", &client, false)?;
            panel(&middle, t1, "requests", &queue, false)?;
            panel(
                &bottom,
                t1,
                "KV %",
                &[(kv.clone(), GREEN_, "KV cache")],
                true,
            )
        },
    )
}

/// One panel of a step's timeline: lines over `0..t1` seconds.
fn panel(
    area: &DrawingArea<SVGBackend<'_>, Shift>,
    t1: f64,
    ydesc: &str,
    lines: &[(Points, RGBColor, &str)],
    x_axis: bool,
) -> Result<(), String> {
    let top = match ydesc {
        "KV %" => 100.0,
        _ => {
            lines
                .iter()
                .flat_map(|l| &l.0)
                .map(|p| p.1)
                .fold(1.0, f64::max)
                * 1.1
        }
    };
    let mut chart = ChartBuilder::on(area)
        .margin(6)
        .x_label_area_size(if x_axis { 26 } else { 4 })
        .y_label_area_size(44)
        .build_cartesian_2d(0.0..t1, 0.0..top)
        .map_err(err)?;
    let mut mesh = chart.configure_mesh();
    mesh.y_desc(ydesc)
        .y_labels(4)
        .x_labels(6)
        .light_line_style(RGBColor(240, 240, 240));
    if x_axis {
        mesh.x_desc("s from the step start");
    } else {
        mesh.x_label_formatter(&|_| String::new());
    }
    mesh.draw().map_err(err)?;
    let mut drawn = false;
    for (pts, color, label) in lines.iter().filter(|l| !l.0.is_empty()) {
        let color = *color;
        chart
            .draw_series(LineSeries::new(pts.iter().copied(), color.stroke_width(2)))
            .map_err(err)?
            .label(*label)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 16, y)], color.stroke_width(2))
            });
        drawn = true;
    }
    if drawn {
        legend(&mut chart, SeriesLabelPosition::UpperLeft)?;
    }
    Ok(())
}

fn finite(points: impl Iterator<Item = (f64, f64)>) -> Points {
    points
        .filter(|(x, y)| x.is_finite() && y.is_finite())
        .collect()
}

/// A cumulative counter as its increase since the first reading.
fn since_first(points: Points) -> Points {
    let base = points.first().map_or(0.0, |p| p.1);
    points.into_iter().map(|(t, v)| (t, v - base)).collect()
}

pub(super) fn step_table(out: &mut String, r: &SweepResult) {
    let _ = write!(
        out,
        "<section><h2>Steps</h2><table>\n<caption>{}</caption>\n<thead><tr>",
        escape(&units_caption(r))
    );
    let (heads, rows) = columns(r);
    let n = heads.len();
    for (i, h) in heads.iter().enumerate() {
        let class = if i + 3 >= n { " class=\"l\"" } else { "" };
        let _ = write!(out, "<th{class}>{}</th>", escape(h));
    }
    out.push_str("</tr></thead><tbody>\n");
    for (s, mut cells) in r.steps_by_load().into_iter().zip(rows) {
        if let Some(last) = cells.last_mut() {
            *last = s.reasons.join("; ");
        }
        out.push_str("<tr>");
        for (i, c) in cells.iter().enumerate() {
            let class = match i {
                _ if i + 1 == n => "reason",
                _ if i + 2 == n => verdict_class(s.verdict),
                _ if i + 3 == n => "l",
                _ => "",
            };
            let _ = write!(out, "<td class=\"{class}\">{}</td>", escape(c));
        }
        out.push_str("</tr>\n");
    }
    if r.steps.is_empty() {
        let _ = write!(
            out,
            "<tr><td class=\"l\" colspan=\"{n}\">no steps ran</td></tr>"
        );
    }
    out.push_str("</tbody></table>\n");
    misses_table(out, r);
    out.push_str("</section>\n");
}

/// Where failed requests (each a +∞ sample) changed an SLO's statistic:
/// vLLM's over successes beside the one judged. Nothing when none failed.
fn misses_table(out: &mut String, r: &SweepResult) {
    let (heads, rows) = crate::report::misses::table(r);
    if rows.is_empty() {
        return;
    }
    out.push_str("<table class=\"misses\">\n<caption>failed requests counted as misses (+∞): vLLM's statistic is over successes only</caption>\n<thead><tr>");
    for h in &heads {
        let _ = write!(out, "<th>{}</th>", escape(h));
    }
    out.push_str("</tr></thead><tbody>\n");
    for cells in rows {
        out.push_str("<tr>");
        for c in cells {
            let _ = write!(out, "<td>{}</td>", escape(&c));
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</tbody></table>\n");
}

fn verdict_class(v: Verdict) -> &'static str {
    match v {
        Verdict::Pass => "l pass",
        Verdict::Fail => "l fail",
        Verdict::GeneratorLimited | Verdict::Interrupted => "l gen",
    }
}

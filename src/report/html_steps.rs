//! The per-step parts of the HTML report: each step's queue gauges over
//! time (small multiples) and the table of every step with its verdict.

use super::*;

/// Small multiples: waiting and running vs time within each step.
pub(super) fn queue_series(out: &mut String, r: &SweepResult) {
    out.push_str("<section><h2>Queue during each step</h2><div class=\"small\">\n");
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
            step_queue_svg(s, &title)
        );
    }
    out.push_str("</div></section>\n");
}

fn step_queue_svg(s: &StepResult, title: &str) -> String {
    let pick = |f: fn(&crate::client::scrape::QueueSample) -> Option<f64>| -> Vec<(f64, f64)> {
        s.queue
            .iter()
            .filter_map(|q| Some((q.t_s, f(q)?)))
            .filter(|(x, y)| x.is_finite() && y.is_finite())
            .collect()
    };
    let waiting = pick(|q| q.waiting);
    let running = pick(|q| q.running);
    if waiting.is_empty() && running.is_empty() {
        return "<p class=\"nochart\">no queue samples (gauges not scraped)</p>".into();
    }
    let all = || waiting.iter().chain(&running);
    let t0 = all().map(|p| p.0).fold(f64::INFINITY, f64::min).min(0.0);
    let t1 = all().map(|p| p.0).fold(t0 + 1.0, f64::max);
    let top = all().map(|p| p.1).fold(1.0, f64::max) * 1.1;
    svg((360, 200), &format!("queue over time at {title}"), |root| {
        let mut chart = ChartBuilder::on(root)
            .margin(8)
            .x_label_area_size(30)
            .y_label_area_size(40)
            .build_cartesian_2d(t0..t1, 0.0..top)
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc("s")
            .x_labels(6)
            .y_labels(5)
            .light_line_style(RGBColor(240, 240, 240))
            .draw()
            .map_err(err)?;
        for (pts, color, label) in [(&waiting, RED_, "waiting"), (&running, BLUE_, "running")] {
            chart
                .draw_series(LineSeries::new(pts.iter().copied(), color.stroke_width(2)))
                .map_err(err)?
                .label(label)
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 16, y)], color.stroke_width(2))
                });
        }
        legend(&mut chart, SeriesLabelPosition::UpperLeft)
    })
}

pub(super) fn step_table(out: &mut String, r: &SweepResult) {
    let _ = write!(
        out,
        "<section><h2>Steps</h2><table>\n<caption>{}</caption>\n<thead><tr>",
        escape(&units_caption(r))
    );
    let heads = headers();
    let n = heads.len();
    for (i, h) in heads.iter().enumerate() {
        let class = if i + 3 >= n { " class=\"l\"" } else { "" };
        let _ = write!(out, "<th{class}>{}</th>", escape(h));
    }
    out.push_str("</tr></thead><tbody>\n");
    for s in r.steps_by_load() {
        let mut cells = row(s);
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
    out.push_str("</tbody></table></section>\n");
}

fn verdict_class(v: Verdict) -> &'static str {
    match v {
        Verdict::Pass => "l pass",
        Verdict::Fail => "l fail",
        Verdict::GeneratorLimited | Verdict::Interrupted => "l gen",
    }
}

//! The sweep-wide trade-off charts of the HTML report: the Pareto chart of
//! output tokens/s per user against total output tokens/s (one point per
//! step, the frontier drawn, the knee ringed), and the cost at the knee and
//! at each step when the sweep was priced (`--gpu-hour-cost`).

use super::*;

/// Output tokens/s one user sees: the inverse of the step's median TPOT.
fn per_user_rate(s: &StepResult) -> Option<f64> {
    (s.tpot_ms.count > 0 && s.tpot_ms.p50 > 0.0).then(|| 1000.0 / s.tpot_ms.p50)
}

/// `(total output tokens/s, per-user output tokens/s, load)` per step.
fn pareto_points(r: &SweepResult) -> Vec<(f64, f64, f64)> {
    r.steps_by_load()
        .into_iter()
        .filter_map(|s| Some((s.output_token_rate, per_user_rate(s)?, s.load)))
        .filter(|(x, y, _)| x.is_finite() && y.is_finite() && *x > 0.0)
        .collect()
}

/// The points no other point beats on both axes, by total throughput.
pub(super) fn frontier(points: &[(f64, f64, f64)]) -> Vec<(f64, f64)> {
    let mut v: Vec<(f64, f64)> = points.iter().map(|p| (p.0, p.1)).collect();
    v.sort_by(|a, b| b.0.total_cmp(&a.0).then(b.1.total_cmp(&a.1)));
    let mut best_y = f64::NEG_INFINITY;
    let mut out: Vec<(f64, f64)> = v
        .into_iter()
        .filter(|p| {
            let keep = p.1 > best_y;
            best_y = best_y.max(p.1);
            keep
        })
        .collect();
    out.reverse();
    out
}

pub(super) fn pareto_svg(r: &SweepResult) -> String {
    let pts = pareto_points(r);
    let title = "Pareto: output tokens/s per user vs total";
    if pts.is_empty() {
        return format!("<p class=\"nochart\">{title}: no step produced tokens</p>");
    }
    let xmax = pts.iter().map(|p| p.0).fold(1.0, f64::max) * 1.1;
    let ymax = pts.iter().map(|p| p.1).fold(1.0, f64::max) * 1.15;
    let front = frontier(&pts);
    let knee = r.knee.last_pass;
    svg((640, 380), title, |root| {
        let mut chart = ChartBuilder::on(root)
            .caption(title, (FONT, 18))
            .margin(12)
            .x_label_area_size(42)
            .y_label_area_size(52)
            .build_cartesian_2d(0.0..xmax, 0.0..ymax)
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc("total output tokens/s")
            .y_desc("output tokens/s per user (1 / median TPOT)")
            .light_line_style(RGBColor(238, 238, 238))
            .draw()
            .map_err(err)?;
        chart
            .draw_series(LineSeries::new(
                front.iter().copied(),
                GREY_.stroke_width(2),
            ))
            .map_err(err)?
            .label("Pareto frontier")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], GREY_.stroke_width(2)));
        chart
            .draw_series(pts.iter().map(|&(x, y, load)| {
                EmptyElement::at((x, y))
                    + Circle::new((0, 0), 4, BLUE_.filled())
                    + Text::new(compact(load), (6, -14), (FONT, 12))
            }))
            .map_err(err)?
            .label(format!(
                "a step (labelled with its load, {})",
                r.load_unit()
            ))
            .legend(|(x, y)| Circle::new((x + 10, y), 4, BLUE_.filled()));
        let at_knee = pts.iter().filter(|p| Some(p.2) == knee);
        chart
            .draw_series(at_knee.map(|&(x, y, _)| Circle::new((x, y), 9, GREEN_.stroke_width(2))))
            .map_err(err)?
            .label("the knee")
            .legend(|(x, y)| Circle::new((x + 10, y), 6, GREEN_.stroke_width(2)));
        legend(&mut chart, SeriesLabelPosition::UpperRight)
    })
}

/// The cost section: dollars per million output tokens at the knee and at
/// each step (nothing when the sweep was not priced).
pub(super) fn cost_section(out: &mut String, r: &SweepResult) {
    let Some(c) = &r.cost else { return };
    let gpus = if c.gpus == 1 {
        "1 GPU".to_string()
    } else {
        format!("{} GPUs", c.gpus)
    };
    let headline = match (c.usd_per_million_output_tokens_at_knee, c.knee_load) {
        (Some(usd), Some(load)) => format!(
            "Cost at the knee ({} {}): ${usd:.2} per million output tokens",
            compact(load),
            r.load_unit()
        ),
        _ => "Cost at the knee: unknown (no passing step)".to_string(),
    };
    let _ = writeln!(
        out,
        "<section><h2>Cost</h2><div class=\"card\"><p class=\"knee\">{}</p>\
         <p class=\"meta\">{gpus} at ${:.2} per GPU-hour; each step at its measured output rate.</p>\
         <table><thead><tr><th>load ({})</th><th>output tok/s</th><th>$ / M output tokens</th><th class=\"l\">verdict</th></tr></thead><tbody>",
        escape(&headline),
        c.gpu_hour_cost,
        escape(r.load_unit())
    );
    for s in r.steps_by_load() {
        let usd = s
            .usd_per_million_output_tokens
            .map_or("-".to_string(), |u| format!("{u:.2}"));
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td>{:.1}</td><td>{usd}</td><td class=\"l\">{}</td></tr>",
            compact(s.load),
            s.output_token_rate,
            escape(&table::verdict_label(s.verdict))
        );
    }
    out.push_str("</tbody></table></div></section>\n");
}

/// Mean GPU power (all GPUs) against offered load, the knee marked; only
/// drawn when some step measured it (`--gpu-metrics-url`).
pub(super) fn power_svg(r: &SweepResult) -> Option<String> {
    let power = series(r, |s| s.gpu.as_ref().map(|g| g.mean_power_w));
    if power.is_empty() {
        return None;
    }
    let peak = series(r, |s| s.gpu.as_ref().map(|g| g.peak_power_w));
    let top = peak.iter().chain(&power).map(|p| p.1).fold(1.0, f64::max) * 1.15;
    let title = "GPU power (all GPUs) vs offered load";
    Some(svg((640, 380), title, |root| {
        let mut chart = load_chart(root, r, title, top, "W")?;
        mark_knee(&mut chart, r, (0.0, top))?;
        line_with_dots(&mut chart, &power, ORANGE_, "mean power")?;
        line_with_dots(&mut chart, &peak, RED_, "peak power")?;
        legend(&mut chart, SeriesLabelPosition::UpperLeft)
    }))
}

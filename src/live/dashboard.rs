//! The live terminal dashboard, drawn from a [`View`] onto any ratatui
//! frame: the terminal's in `kneecap run`/`sweep`, a `TestBackend`'s in the
//! tests. Pure: no clock, no terminal I/O here.

use super::state::{LatencyRow, View};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Row, Sparkline, Table};
use ratatui::Frame;
use std::time::Duration;

/// Rows the dashboard needs to show everything.
pub const HEIGHT: u16 = 24;

/// Draw one frame.
pub fn draw(frame: &mut Frame, v: &View) {
    let outer = Block::default()
        .borders(Borders::ALL)
        .title(Line::from(title(v)).style(Style::default().add_modifier(Modifier::BOLD)));
    let area = outer.inner(frame.area());
    frame.render_widget(outer, frame.area());
    let [load, latency, gauges, footer] = Layout::vertical([
        Constraint::Length(2),
        Constraint::Length(6),
        Constraint::Length(4),
        Constraint::Min(3),
    ])
    .areas(area);
    frame.render_widget(Paragraph::new(load_lines(v)), load);
    frame.render_widget(latency_table(&v.latency), latency);
    draw_gauges(frame, gauges, v);
    frame.render_widget(Paragraph::new(footer_lines(v)), footer);
}

/// `kneecap sweep · step 3 · 12.0 req/s · 14 s, 16 s left`.
fn title(v: &View) -> String {
    let mut parts = vec![v.command.clone()];
    if let Some(i) = v.phase.step {
        parts.push(format!("step {}", i + 1));
    }
    if let Some(load) = v.phase.load {
        parts.push(format!("{load:.1} {}", v.phase.unit));
    }
    let left = v
        .left
        .map(|l| format!(", {} left", clock(l)))
        .unwrap_or_default();
    parts.push(format!("{}{left}", clock(v.elapsed)));
    format!(" {} ", parts.join(" · "))
}

fn load_lines(v: &View) -> Vec<Line<'static>> {
    vec![
        Line::from(format!(
            "offered {:>8.2} req/s   achieved {:>8.2} req/s   in flight {:>5}",
            v.offered_rate, v.achieved_rate, v.in_flight
        )),
        Line::from(format!(
            "sent {:>8}   succeeded {:>8}   failed {:>6}",
            v.released, v.succeeded, v.failed
        )),
    ]
}

fn latency_table(rows: &[LatencyRow]) -> Table<'static> {
    let header = Row::new(["last 10 s", "p50 ms", "p99 ms", "SLO"])
        .style(Style::default().add_modifier(Modifier::BOLD));
    let body = rows.iter().map(|r| {
        let over = r.slos.iter().any(|s| s.over);
        let slo = r
            .slos
            .iter()
            .map(|s| {
                let mark = match (s.observed_ms, s.over) {
                    (None, _) => "…",
                    (Some(_), true) => "OVER",
                    (Some(_), false) => "ok",
                };
                format!("{} {mark}", s.text)
            })
            .collect::<Vec<_>>()
            .join(", ");
        let style = if over {
            Style::default().fg(Color::Red)
        } else {
            Style::default()
        };
        Row::new([
            r.metric.label().to_string(),
            ms(r.p50_ms),
            ms(r.p99_ms),
            slo,
        ])
        .style(style)
    });
    let widths = [
        Constraint::Length(10),
        Constraint::Length(10),
        Constraint::Length(10),
        Constraint::Min(10),
    ];
    Table::new(body, widths).header(header)
}

fn draw_gauges(frame: &mut Frame, area: Rect, v: &View) {
    let [head, rest @ ..] = Layout::vertical([Constraint::Length(1); 4]).areas::<4>(area);
    frame.render_widget(
        Paragraph::new("server (/metrics)").style(Style::default().add_modifier(Modifier::BOLD)),
        head,
    );
    let series = [
        ("waiting", &v.waiting, 1.0, ""),
        ("running", &v.running, 1.0, ""),
        ("KV cache", &v.kv_usage, 100.0, "%"),
    ];
    for ((name, data, scale, unit), row) in series.into_iter().zip(rest) {
        let [label, spark] =
            Layout::horizontal([Constraint::Length(22), Constraint::Min(4)]).areas(row);
        let now = data
            .last()
            .copied()
            .flatten()
            .map(|x| format!("{:.0}{unit}", x * scale))
            .unwrap_or_else(|| "-".into());
        frame.render_widget(Paragraph::new(format!("  {name:<9}{now:>8}")), label);
        let width = usize::from(spark.width);
        let bars: Vec<Option<u64>> = data[data.len().saturating_sub(width)..]
            .iter()
            .map(|x| x.map(|x| (x * scale).round().max(0.0) as u64))
            .collect();
        frame.render_widget(
            Sparkline::default()
                .data(bars)
                .style(Style::default().fg(Color::Cyan)),
            spark,
        );
    }
}

fn footer_lines(v: &View) -> Vec<Line<'static>> {
    let errors = if v.errors.is_empty() {
        "none".to_string()
    } else {
        v.errors
            .iter()
            .map(|(class, n)| format!("{class} {n}"))
            .collect::<Vec<_>>()
            .join(" · ")
    };
    let error_style = if v.errors.is_empty() {
        Style::default()
    } else {
        Style::default().fg(Color::Red)
    };
    let lateness = v
        .lateness_p99_ms
        .map(|l| format!("{l:.2} ms"))
        .unwrap_or_else(|| "-".into());
    let cpu = v
        .cpu_busy
        .map(|c| format!("{:.0}%", c * 100.0))
        .unwrap_or_else(|| "-".into());
    vec![
        Line::from(vec![
            Span::raw("errors: "),
            Span::styled(errors, error_style),
        ]),
        Line::from(format!(
            "kneecap: dispatch lateness p99 {lateness} · CPU {cpu} of all cores"
        )),
    ]
    .into_iter()
    .chain(v.notes.iter().map(|n| Line::from(n.clone())))
    .chain(std::iter::once(
        Line::from("Ctrl-C stops and keeps the partial result")
            .style(Style::default().fg(Color::DarkGray)),
    ))
    .collect()
}

fn ms(v: Option<f64>) -> String {
    match v {
        Some(v) if v >= 100.0 => format!("{v:.0}"),
        Some(v) => format!("{v:.1}"),
        None => "-".into(),
    }
}

/// `1:05` or `12 s`.
fn clock(d: Duration) -> String {
    let s = d.as_secs();
    if s >= 60 {
        format!("{}:{:02}", s / 60, s % 60)
    } else {
        format!("{s} s")
    }
}

#[cfg(test)]
#[path = "dashboard_tests.rs"]
mod tests;

//! The grid's heat map (`kneecap predict --grid --html FILE`): one
//! self-contained HTML file in the sweep report's style (inline CSS, no
//! scripts, no fetches: a Content-Security-Policy of `default-src 'none'`),
//! with a PREDICTED badge, one table per prefix share (prompt lengths down,
//! output lengths across), each cell coloured by its knee on a log scale and
//! holding its interval and binding resource. Pure: `render(&PredictJson)
//! -> String`; every user string is HTML-escaped.

use super::grid::GridCell;
use super::json::PredictJson;
use super::knee::KneeKind;
use super::render::{cost_words, engine_words, short, workload_words};
use crate::report::html::escape;
use std::fmt::Write as _;

const CSS: &str = "\
body{margin:0;background:#f6f7f9;color:#1d2330;font:15px/1.45 system-ui,-apple-system,'Segoe UI',sans-serif}
main{max-width:1180px;margin:0 auto;padding:24px}
h1{font-size:24px;margin:0 0 4px}h2{font-size:18px;margin:28px 0 10px}
.meta{color:#667;margin:0 0 16px}
.badge{display:inline-block;background:#8e44ad;color:#fff;border-radius:4px;padding:2px 8px;font-size:13px;vertical-align:middle;letter-spacing:.05em}
.card{background:#fff;border:1px solid #e1e4ea;border-radius:8px;padding:16px 20px}
.knee{font-size:20px;font-weight:600;margin:0 0 8px}
ul.facts{margin:8px 0 0;padding-left:18px}
table{border-collapse:collapse;background:#fff;font-size:14px}
th,td{border:1px solid #e6e8ee;padding:8px 12px;text-align:center;white-space:nowrap}
th{background:#eef0f4}th.l{text-align:left}
td b{font-size:17px}td small{color:#445}
td.none{color:#889;font-style:italic}
caption{caption-side:bottom;text-align:left;color:#667;padding:6px 0;font-size:13px}
";

/// Pale red (lowest knee) through pale yellow to pale green (highest).
const LOW: (f64, f64, f64) = (244.0, 199.0, 195.0);
const MID: (f64, f64, f64) = (252.0, 232.0, 178.0);
const HIGH: (f64, f64, f64) = (183.0, 225.0, 205.0);

/// The colour of `knee` between `lo` and `hi` on a log scale.
pub fn colour(knee: f64, lo: f64, hi: f64) -> String {
    let t = if knee > 0.0 && lo > 0.0 && hi > lo {
        ((knee.ln() - lo.ln()) / (hi.ln() - lo.ln())).clamp(0.0, 1.0)
    } else {
        0.5
    };
    let (a, b, u) = if t < 0.5 {
        (LOW, MID, t * 2.0)
    } else {
        (MID, HIGH, (t - 0.5) * 2.0)
    };
    let mix = |x: f64, y: f64| (x + (y - x) * u).round() as u8;
    format!(
        "#{:02x}{:02x}{:02x}",
        mix(a.0, b.0),
        mix(a.1, b.1),
        mix(a.2, b.2)
    )
}

/// The whole heat map as one HTML document.
pub fn render(j: &PredictJson) -> String {
    let mut out = String::with_capacity(16 * 1024);
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n\
         <meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>kneecap predict: the knee over the grid</title>\n<style>\n{CSS}</style></head><body><main>\n\
         <h1>kneecap predict: the knee over the grid <span class=\"badge\" title=\"{}\">PREDICTED</span></h1>\n\
         <p class=\"meta\">{} · kneecap {}</p>\n",
        escape(&j.note),
        escape(&j.note),
        escape(&j.kneecap_version)
    );
    let cells = j.grid.as_deref().unwrap_or_default();
    let runs = cells
        .iter()
        .filter_map(|c| c.prediction.as_ref())
        .map(|p| p.runs)
        .sum();
    let _ = writeln!(
        out,
        "<section class=\"card\">\n<p class=\"knee\">{}</p>\n<ul class=\"facts\">\n<li>{}</li>\n<li>{}</li>\n</ul></section>",
        escape(&workload_words(j)),
        escape(&engine_words(j)),
        escape(&cost_words(j, runs))
    );
    let knees: Vec<f64> = cells
        .iter()
        .filter_map(|c| c.prediction.as_ref())
        .map(|p| p.knee_req_s)
        .filter(|k| *k > 0.0)
        .collect();
    let lo = knees.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = knees.iter().copied().fold(0.0, f64::max);
    let mut shares: Vec<f64> = cells.iter().map(|c| c.prefix_share).collect();
    shares.dedup();
    for share in shares {
        let part: Vec<&GridCell> = cells.iter().filter(|c| c.prefix_share == share).collect();
        table(&mut out, share, &part, (lo, hi));
    }
    out.push_str("</main></body></html>\n");
    out
}

fn table(out: &mut String, share: f64, cells: &[&GridCell], (lo, hi): (f64, f64)) {
    let mut outputs: Vec<u32> = cells.iter().map(|c| c.output_len).collect();
    outputs.sort_unstable();
    outputs.dedup();
    let mut inputs: Vec<u32> = cells.iter().map(|c| c.input_len).collect();
    inputs.dedup();
    let _ = writeln!(
        out,
        "<section><h2>Shared prefix {:.0}% of the prompt</h2><table>",
        share * 100.0
    );
    let _ = write!(out, "<tr><th class=\"l\">prompt \\ output tokens</th>");
    for o in &outputs {
        let _ = write!(out, "<th>{o}</th>");
    }
    out.push_str("</tr>\n");
    for i in &inputs {
        let _ = write!(out, "<tr><th class=\"l\">{i}</th>");
        for o in &outputs {
            let cell = cells
                .iter()
                .find(|c| c.input_len == *i && c.output_len == *o);
            out.push_str(&cell_html(cell.copied(), (lo, hi)));
        }
        out.push_str("</tr>\n");
    }
    let _ = writeln!(
        out,
        "<caption>Each cell: the predicted knee (req/s), its interval and the resource that binds it. \
         Colour: the knee on a log scale, red {lo:.1} to green {hi:.1} req/s.</caption></table></section>"
    );
}

fn cell_html(cell: Option<&GridCell>, (lo, hi): (f64, f64)) -> String {
    let Some(cell) = cell else {
        return "<td class=\"none\"></td>".to_string();
    };
    let Some(p) = &cell.prediction else {
        let why = escape(cell.error.as_deref().unwrap_or_default());
        return format!("<td class=\"none\" title=\"{why}\">refused by the model</td>");
    };
    let knee = match p.kind {
        KneeKind::Knee => format!("{:.1}", p.knee_req_s),
        KneeKind::BelowLowest => "below the lowest rate".to_string(),
        KneeKind::AboveHighest => format!("&gt;{:.1}", p.knee_req_s),
    };
    let (binds, line) = p
        .explain
        .as_ref()
        .map_or(("", String::new()), |e| (short(e.binds), escape(&e.line)));
    let replicas = cell
        .replicas
        .as_ref()
        .and_then(|r| r.replicas)
        .map_or(String::new(), |n| format!(" · {n} replicas"));
    format!(
        "<td style=\"background:{}\" title=\"{line}\"><b>{knee}</b><br><small>[{:.1}–{:.1}] {binds}{replicas}</small></td>",
        colour(p.knee_req_s, lo, hi),
        p.low_req_s,
        p.high_req_s
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::preset;
    use crate::sim::virtual_time::VirtualLoad;
    use crate::twin::knee::TruthConfig;
    use crate::twin::predict::Prediction;

    fn grid() -> PredictJson {
        let cfg = TruthConfig {
            params: preset::tiny(),
            load: VirtualLoad::fixed(1, 1, 10, 100),
            slos: vec!["p99_ttft_ms<=500".parse().unwrap()],
            range_ratio: (0.0, 0.0),
            burstiness: 1.0,
            seeds: vec![0],
            precision: 0.01,
            tail: crate::sim::params::HostStalls::NONE,
        };
        let mut j = PredictJson::new("0.1.0", "preset <tiny>", &cfg, 0);
        let cell = |i, o, knee: Option<f64>| GridCell {
            input_len: i,
            output_len: o,
            prefix_share: 0.0,
            prediction: knee.map(|k| Prediction {
                knee_req_s: k,
                low_req_s: k,
                high_req_s: k,
                kind: KneeKind::Knee,
                mu_req_s: k,
                seed_spread_req_s: (k, k),
                corner_knees_req_s: Vec::new(),
                runs: 1,
                explain: None,
                misfit: None,
            }),
            error: knee.is_none().then(|| "too \"long\"".to_string()),
            replicas: None,
        };
        j.grid = Some(vec![
            cell(256, 64, Some(40.0)),
            cell(256, 256, Some(10.0)),
            cell(4096, 64, Some(2.5)),
            cell(4096, 256, None),
        ]);
        j
    }

    #[test]
    fn the_heat_map_is_self_contained_marked_predicted_and_escaped() {
        let html = render(&grid());
        assert!(html.starts_with("<!DOCTYPE html>"));
        assert!(html.contains("default-src 'none'"));
        assert!(
            !html.contains("<script") && !html.contains("http://") && !html.contains("https://")
        );
        assert!(html.contains(">PREDICTED</span>"));
        assert!(html.contains("preset &lt;tiny&gt;") && !html.contains("<tiny>"));
        assert!(html.contains("title=\"too &quot;long&quot;\">refused by the model"));
        assert_eq!(
            html.matches("<tr>").count(),
            3,
            "a header and two prompt lengths"
        );
        assert!(html.contains("red 2.5 to green 40.0 req/s"));
    }

    #[test]
    fn the_lowest_knee_is_red_the_highest_green_and_between_on_a_log_scale() {
        assert_eq!(colour(2.5, 2.5, 40.0), "#f4c7c3");
        assert_eq!(colour(40.0, 2.5, 40.0), "#b7e1cd");
        // 10 is the geometric middle of 2.5 and 40.
        assert_eq!(colour(10.0, 2.5, 40.0), "#fce8b2");
        let html = render(&grid());
        assert!(html.contains("background:#f4c7c3") && html.contains("background:#b7e1cd"));
    }
}

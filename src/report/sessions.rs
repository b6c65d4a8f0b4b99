//! Multi-turn sessions on the console: sessions by outcome, duration,
//! think time kept, TTFT by turn number (turn 1 against later turns shows
//! the prefix cache). The JSON block is `result::json::sessions`.

use crate::metrics::session::SessionSummary;
use std::fmt::Write;

/// The console lines of the kneecap block.
pub fn console_lines(out: &mut String, s: &SessionSummary) {
    let _ = writeln!(
        out,
        "{:<40} {} started, {} completed, {} failed, {} cut by the run's end ({} turns)",
        "Sessions:", s.started, s.completed, s.failed, s.cut, s.turns_sent
    );
    let d = &s.duration;
    if d.count > 0 {
        let _ = writeln!(
            out,
            "{:<40} mean {:.1}  p50 {:.1}  p99 {:.1}",
            "Session duration (ms):",
            d.mean_ms,
            d.median_ms,
            d.percentile_ms(99.0).unwrap_or(f64::NAN)
        );
    }
    let t = &s.think_time;
    if t.count > 0 {
        let _ = writeln!(
            out,
            "{:<40} mean {:.1}  p50 {:.1}  max {:.1}",
            "Think time kept (ms):", t.mean_ms, t.median_ms, t.max_ms
        );
    }
    for turn in &s.ttft_by_turn {
        let d = &turn.ttft;
        let _ = writeln!(
            out,
            "{:<40} mean {:.2}  p50 {:.2}  p99 {:.2}  (n={})",
            format!("TTFT turn {} (ms):", turn.turn),
            d.mean_ms,
            d.median_ms,
            d.percentile_ms(99.0).unwrap_or(f64::NAN),
            d.count
        );
    }
}

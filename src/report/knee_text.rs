//! The knee in words: the interval (or its edge cases), what binds it, how
//! sure each end is, and the generator-limit and non-monotonic notes, for
//! the console table and the HTML report.

use super::numbers::{compact, load_label, num};
use crate::result::sweep::{SweepResult, Verdict};

/// The knee sentence(s): the interval, or the edge-case wording, then what
/// binds it ([`binds_line`]), plus the generator-limit and non-monotonic
/// notes.
pub fn knee_lines(r: &SweepResult) -> Vec<String> {
    let unit = r.load_unit();
    let k = &r.knee;
    let mut lines = vec![match (k.last_pass, k.first_fail) {
        (Some(p), Some(f)) => {
            let (p, f) = (load_label(p), load_label(f));
            format!("knee: between {p} and {f} {unit} (last pass {p}, first fail {f})")
        }
        (None, Some(f)) => format!(
            "knee: below {} {unit} (the lowest step failed; lower the starting load)",
            compact(f)
        ),
        (Some(p), None) if k.bounded_by_generator => {
            format!("knee: at least {} {unit} (no step failed)", compact(p))
        }
        (Some(p), None) => format!(
            "knee: above {} {unit} (no step failed; raise --max-load)",
            compact(p)
        ),
        (None, None) if r.steps.is_empty() => "knee: unknown (no steps ran)".into(),
        (None, None) => "knee: unknown (no step passed or failed)".into(),
    }];
    if let Some(line) = binds_line(r) {
        lines.push(line);
    }
    if let Some(line) = super::gpu_text::knee_line(r) {
        lines.push(line);
    }
    if let Some(line) = confidence_line(r) {
        lines.push(line);
    }
    if let Some(line) = generator_line(r) {
        lines.push(line);
    }
    if k.non_monotonic {
        lines.push(
            "warning: the curve is not monotonic (a step passed above a failing one); \
             the knee uses the lowest failure, so treat it as noisy"
                .into(),
        );
    }
    if r.interrupted {
        lines.push("note: the sweep was interrupted; only the steps so far are shown".into());
    }
    lines
}

/// "binds: batch slots full: 4.0 running, 12.3 waiting for a slot; at 30
/// req/s p99_ttft_ms<=500 failed": the measured explanation, worded as
/// `kneecap predict` words its own (`binds: ...`).
pub fn binds_line(r: &SweepResult) -> Option<String> {
    r.knee
        .explain
        .as_ref()
        .map(|e| format!("binds: {}", e.line))
}

/// "confidence: 33.9 req/s passes the SLOs with 93% confidence; …" for
/// adaptive steps, saying when an end is below the confidence asked.
fn confidence_line(r: &SweepResult) -> Option<String> {
    let unit = r.load_unit();
    let k = &r.knee;
    let asked = r
        .steps
        .iter()
        .find_map(|s| s.decision.as_ref().map(|d| d.level))?;
    let pct = |c: f64| format!("{}%", num(c * 100.0, 0));
    let end = |load: Option<f64>, c: Option<f64>, verb: &str| {
        let (load, c) = (load?, c?);
        let noise = if c < asked { " (within noise)" } else { "" };
        Some(format!(
            "{} {unit} {verb} with {} confidence{noise}",
            load_label(load),
            pct(c)
        ))
    };
    let pooled = match k.last_pass_pooled.as_slice() {
        [_, .., top] => format!(
            " (the steps from it up to {} {unit} pooled: the share over a bound only grows with load)",
            load_label(*top)
        ),
        _ => String::new(),
    };
    let parts: Vec<String> = [
        end(k.last_pass, k.last_pass_confidence, "meets the SLOs").map(|e| e + &pooled),
        end(k.first_fail, k.first_fail_confidence, "misses them"),
    ]
    .into_iter()
    .flatten()
    .collect();
    let band = match k.undecided.as_slice() {
        [] => String::new(),
        loads => {
            let loads: Vec<String> = loads.iter().map(|&l| load_label(l)).collect();
            format!(
                "; within noise at its cap, inside the interval: {} {unit}",
                loads.join(", ")
            )
        }
    };
    (!parts.is_empty()).then(|| {
        format!(
            "confidence: {}{band} (exact binomial, {} asked)",
            parts.join("; "),
            pct(asked)
        )
    })
}

/// "the load generator, not the server, was the limit at X: the server's knee is at least Y".
fn generator_line(r: &SweepResult) -> Option<String> {
    let unit = r.load_unit();
    let limited = r
        .steps_by_load()
        .into_iter()
        .find(|s| {
            // A pass far inside its bounds, or a failure far beyond the
            // generator's delay, is the server's even with a late generator
            // (`sweep::judge`); the generator limited neither.
            s.verdict == Verdict::GeneratorLimited
        })
        .map(|s| s.load);
    if !r.knee.bounded_by_generator && limited.is_none() {
        return None;
    }
    let at = limited.map_or_else(String::new, |x| format!(" at {} {unit}", compact(x)));
    Some(match r.knee.last_pass {
        Some(y) => format!(
            "the load generator, not the server, was the limit{at}: \
             the server's knee is at least {} {unit}",
            compact(y)
        ),
        None => format!(
            "the load generator, not the server, was the limit{at}: \
             no step passed, so the server's knee is unknown"
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::result::explain::{Binding, Evidence, ExplainSource, KneeExplain};
    use crate::result::fixture::sweep;

    /// The fixture's sweep with its knee explained as `line`.
    fn explained(line: &str) -> SweepResult {
        let mut r = sweep();
        r.knee.explain = Some(KneeExplain {
            binds: Binding::BatchSlots,
            source: ExplainSource::Gauges,
            line: line.into(),
            failed_slos: vec!["p99_ttft_ms<=500".into()],
            evidence: Evidence::default(),
            moves: None,
        });
        r
    }

    #[test]
    fn an_explained_knee_says_what_binds_it_right_under_the_interval() {
        let r = explained("batch slots full: 32.0 running, 4.1 waiting for a slot");
        let lines = knee_lines(&r);
        assert!(lines[0].starts_with("knee: between 32.0 and 36.0"));
        assert_eq!(
            lines[1],
            "binds: batch slots full: 32.0 running, 4.1 waiting for a slot"
        );
        assert!(knee_lines(&sweep())
            .iter()
            .all(|l| !l.starts_with("binds:")));
    }
}

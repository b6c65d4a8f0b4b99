//! `--fail-if` conditions: parsing (`knee_drop>10%`, `p99_ttft_increase>50ms`)
//! and judging one against baseline/candidate value pairs. PURE.

use serde::Serialize;
use std::fmt;

/// The stat of a latency metric.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Stat {
    Mean,
    Median,
    /// A percentile, e.g. 99 or 99.9.
    P(f64),
}

impl fmt::Display for Stat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Stat::Mean => write!(f, "mean"),
            Stat::Median => write!(f, "median"),
            Stat::P(p) => write!(f, "p{p}"),
        }
    }
}

/// What a condition measures.
#[derive(Debug, Clone, PartialEq)]
pub enum Metric {
    /// Sweeps: the last passing load fell.
    KneeDrop,
    /// Goodput fell (sweeps: at the knee; runs: `request_goodput`).
    GoodputDrop,
    /// Request throughput fell (sweeps: peak achieved rate; runs: `request_throughput`).
    ThroughputDrop,
    /// A latency stat (`ttft`, `tpot`, `itl`, `e2el`) rose.
    LatencyIncrease { stat: Stat, name: String },
}

/// The bound, relative or absolute.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Threshold {
    /// Percent of the baseline value.
    Percent(f64),
    /// In the metric's own unit: ms for latencies, req/s (or streams) for rates.
    Absolute(f64),
}

/// One parsed `--fail-if` condition.
#[derive(Debug, Clone, PartialEq)]
pub struct FailIf {
    /// The condition as given.
    pub text: String,
    pub metric: Metric,
    pub threshold: Threshold,
}

/// Baseline and candidate values of a metric at one place (a load level, or
/// the whole run).
#[derive(Debug, Clone, PartialEq)]
pub struct Pair {
    /// Where the values come from (`at 16 req/s`, `run`), for the message.
    pub place: String,
    pub baseline: f64,
    pub candidate: f64,
}

/// The outcome of one condition.
#[derive(Debug, Clone, Serialize)]
pub struct Judgement {
    pub condition: String,
    pub held: bool,
    /// Why: the worst place and its change.
    pub detail: String,
}

const METRICS_HELP: &str = "knee_drop, goodput_drop, throughput_drop, or \
    <median|mean|pNN>_<ttft|tpot|itl|e2el>_increase";

/// Parse `METRIC>VALUE[%|ms]`.
pub fn parse(text: &str) -> Result<FailIf, String> {
    let bad = |why: String| format!("--fail-if '{text}': {why}");
    let (name, value) = text.split_once('>').ok_or_else(|| {
        bad(
            "expected METRIC>VALUE, e.g. knee_drop>10% or p99_ttft_increase>50ms \
                 (quote it: an unquoted > is a shell redirect)"
                .into(),
        )
    })?;
    let metric = parse_metric(name.trim()).map_err(bad)?;
    let threshold = parse_threshold(value.trim(), &metric).map_err(bad)?;
    Ok(FailIf {
        text: text.trim().to_string(),
        metric,
        threshold,
    })
}

fn parse_metric(name: &str) -> Result<Metric, String> {
    match name {
        "knee_drop" => return Ok(Metric::KneeDrop),
        "goodput_drop" => return Ok(Metric::GoodputDrop),
        "throughput_drop" => return Ok(Metric::ThroughputDrop),
        _ => {}
    }
    let unknown = || format!("unknown metric '{name}'; use {METRICS_HELP}");
    let body = name.strip_suffix("_increase").ok_or_else(unknown)?;
    let (stat, lat) = body.split_once('_').ok_or_else(unknown)?;
    if !["ttft", "tpot", "itl", "e2el"].contains(&lat) {
        return Err(unknown());
    }
    let stat = match stat {
        "mean" => Stat::Mean,
        "median" | "p50" => Stat::Median,
        p => match p.strip_prefix('p').and_then(|x| x.parse::<f64>().ok()) {
            Some(x) if x > 0.0 && x < 100.0 => Stat::P(x),
            _ => return Err(unknown()),
        },
    };
    Ok(Metric::LatencyIncrease {
        stat,
        name: lat.to_string(),
    })
}

fn parse_threshold(value: &str, metric: &Metric) -> Result<Threshold, String> {
    let latency = matches!(metric, Metric::LatencyIncrease { .. });
    let (number, percent) = if let Some(n) = value.strip_suffix('%') {
        (n, true)
    } else if let Some(n) = value.strip_suffix("ms").filter(|_| latency) {
        (n, false)
    } else {
        (value.trim_end_matches("req/s"), false)
    };
    let x: f64 = number.trim().parse().map_err(|_| {
        let unit = if latency {
            "% or ms"
        } else {
            "%, or an absolute req/s"
        };
        format!("'{value}' is not a number with a unit ({unit})")
    })?;
    if !x.is_finite() || x < 0.0 {
        return Err(format!("'{value}' must be a non-negative number"));
    }
    Ok(if percent {
        Threshold::Percent(x)
    } else {
        Threshold::Absolute(x)
    })
}

impl Metric {
    /// True for drops (a smaller candidate is worse).
    fn is_drop(&self) -> bool {
        !matches!(self, Metric::LatencyIncrease { .. })
    }
}

/// Judge `cond` over `pairs`: it holds when any place worsens by more than
/// the threshold. The detail names the worst place.
pub fn judge(cond: &FailIf, pairs: &[Pair]) -> Judgement {
    let worsening = |p: &Pair| {
        let change = if cond.metric.is_drop() {
            p.baseline - p.candidate
        } else {
            p.candidate - p.baseline
        };
        match cond.threshold {
            Threshold::Absolute(_) => change,
            Threshold::Percent(_) => relative_percent(change, p.baseline),
        }
    };
    let limit = match cond.threshold {
        Threshold::Percent(x) | Threshold::Absolute(x) => x,
    };
    let worst = pairs
        .iter()
        .map(|p| (p, worsening(p)))
        .max_by(|a, b| a.1.total_cmp(&b.1));
    let Some((p, w)) = worst else {
        return Judgement {
            condition: cond.text.clone(),
            held: false,
            detail: "nothing to compare".into(),
        };
    };
    let unit = match cond.threshold {
        Threshold::Percent(_) => "%",
        Threshold::Absolute(_) if cond.metric.is_drop() => "",
        Threshold::Absolute(_) => " ms",
    };
    Judgement {
        condition: cond.text.clone(),
        held: w > limit,
        detail: format!(
            "{}: {} → {} ({} {:.1}{unit}; limit {limit}{unit})",
            p.place,
            short(p.baseline),
            short(p.candidate),
            if w > 0.0 {
                "worse by"
            } else if w < 0.0 {
                "better by"
            } else {
                "unchanged,"
            },
            w.abs(),
        ),
    }
}

/// `change` as a percent of `base`; infinite when the base is 0 and it grew.
fn relative_percent(change: f64, base: f64) -> f64 {
    if base.abs() > f64::EPSILON {
        change / base.abs() * 100.0
    } else if change > 0.0 {
        f64::INFINITY
    } else {
        0.0
    }
}

fn short(v: f64) -> String {
    if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conditions_parse_with_relative_and_absolute_units() {
        let c = parse("knee_drop>10%").unwrap();
        assert_eq!(c.metric, Metric::KneeDrop);
        assert_eq!(c.threshold, Threshold::Percent(10.0));
        let c = parse(" p99_ttft_increase > 50ms ").unwrap();
        assert_eq!(
            c.metric,
            Metric::LatencyIncrease {
                stat: Stat::P(99.0),
                name: "ttft".into()
            }
        );
        assert_eq!(c.threshold, Threshold::Absolute(50.0));
        let c = parse("median_e2el_increase>20%").unwrap();
        assert!(matches!(
            c.metric,
            Metric::LatencyIncrease {
                stat: Stat::Median,
                ..
            }
        ));
        assert!(
            matches!(parse("p99.9_itl_increase>5ms").unwrap().metric, Metric::LatencyIncrease { stat: Stat::P(p), .. } if p == 99.9)
        );
        assert_eq!(
            parse("goodput_drop>2").unwrap().threshold,
            Threshold::Absolute(2.0)
        );
    }

    #[test]
    fn bad_conditions_name_the_flag_and_the_fix() {
        let e = parse("knee_drop10%").unwrap_err();
        assert!(
            e.contains("--fail-if 'knee_drop10%'") && e.contains("METRIC>VALUE"),
            "{e}"
        );
        let e = parse("p99_foo_increase>5%").unwrap_err();
        assert!(
            e.contains("unknown metric") && e.contains("knee_drop"),
            "{e}"
        );
        assert!(parse("knee_drop>5ms").unwrap_err().contains("not a number"));
        assert!(parse("knee_drop>-5%").is_err());
        assert!(parse("p100_ttft_increase>5%").is_err());
    }

    fn pair(a: f64, b: f64) -> Pair {
        Pair {
            place: "run".into(),
            baseline: a,
            candidate: b,
        }
    }

    #[test]
    fn drops_and_increases_are_judged_against_the_baseline() {
        let knee = parse("knee_drop>10%").unwrap();
        assert!(judge(&knee, &[pair(40.0, 28.0)]).held);
        assert!(!judge(&knee, &[pair(40.0, 38.0)]).held);
        assert!(!judge(&knee, &[pair(40.0, 60.0)]).held, "a rise is no drop");
        let ttft = parse("p99_ttft_increase>50ms").unwrap();
        let j = judge(&ttft, &[pair(100.0, 120.0), pair(100.0, 180.0)]);
        assert!(
            j.held && j.detail.contains("worse by 80.0 ms"),
            "{}",
            j.detail
        );
        let rel = parse("p99_ttft_increase>20%").unwrap();
        assert!(!judge(&rel, &[pair(100.0, 110.0)]).held);
        assert!(judge(&rel, &[pair(0.0, 1.0)]).held, "from zero");
        assert!(!judge(&rel, &[]).held);
    }
}

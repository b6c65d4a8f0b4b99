//! SLOs as users write them, and their evaluation over one step's records.
//! PURE: parses strings and reads records; no clock, no I/O.
//!
//! Two spellings are accepted:
//!
//! - statistic bounds: `p99_ttft_ms<=500`, `p99.9_itl_ms<50`, `mean_tpot_ms<=30`,
//!   `median_ttft_ms<=200`, `p99_ttfo_ms<=2000` (TTFO: time to the first answer
//!   token of a reasoning model; whitespace anywhere, `_ms` optional). The statistic is
//!   computed exactly as [`crate::metrics::stats`] computes it (NumPy-linear
//!   percentiles over vLLM's per-request values).
//! - vLLM's goodput items: `ttft:500`, `tpot:30`, `e2el:2000`, optionally with an
//!   attainment ratio `ttft:500@0.95` (default [`DEFAULT_GOODPUT_RATIO`]). Such an
//!   SLO is judged per request, as vLLM's goodput is: it holds when at least
//!   `ratio` of the step's requests have a value ≤ the bound (inclusive,
//!   compared in seconds as vLLM does; TPOT of a request with ≤ 1 output token
//!   counts as 0). Exactly: with `n` samples and `k = ⌈ratio·n⌉`, it holds iff the
//!   `k`-th smallest value is within the bound, i.e. the "inverted CDF" percentile
//!   at `ratio` — not the NumPy-linear one, which interpolates. The reported
//!   `observed_ms` is that `k`-th smallest value.
//!
//! Evaluation ([`evaluate`], in `slo_eval`) counts every failed
//! request of the window as a sample of +∞: a failed request is a miss, not
//! a missing sample.
pub use super::slo_eval::evaluate;
pub(crate) use super::slo_eval::{
    judge, needed, percentile_with_failures, sample_seconds, sample_sequence, Sampled,
};
use crate::metrics::stats::percentile_key;
use crate::result::sweep::INFINITE;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::str::FromStr;

/// Default share of requests that must meet a goodput-form SLO (`ttft:500`).
pub const DEFAULT_GOODPUT_RATIO: f64 = 0.99;

/// A percentile or attainment SLO resting on fewer tail samples than this gets
/// a warning in its [`SloOutcome`].
pub const MIN_TAIL_SAMPLES: usize = 10;

/// Slack for float products such as `0.99 · 100`, so a rank that is an integer
/// on paper is not pushed to the next one by rounding.
pub(crate) const RANK_EPSILON: f64 = 1e-9;

/// Which per-request latency an SLO bounds (vLLM's definitions).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SloMetric {
    /// Time to first token, from `sent`.
    Ttft,
    /// Time per output token after the first (requests with > 1 token).
    Tpot,
    /// Inter-token latency, every gap of every request flattened.
    Itl,
    /// End-to-end latency, from `sent` to the last token.
    E2el,
    /// kneecap: time to the first answer token (reasoning excluded), from `sent`.
    Ttfo,
}

/// Which statistic of the metric's samples is bounded.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SloStat {
    /// Arithmetic mean.
    Mean,
    /// `np.median`.
    Median,
    /// NumPy-linear percentile, 0–100.
    Percentile(f64),
    /// Goodput form: at least this share (0 < r ≤ 1) of samples meet the bound.
    Attainment(f64),
}

/// Comparison between the statistic and the threshold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SloOp {
    /// `<=`
    Le,
    /// `<`
    Lt,
}

/// One latency SLO, e.g. `p99_ttft_ms<=500`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Slo {
    /// The per-request latency bounded.
    pub metric: SloMetric,
    /// The statistic of its samples that is compared.
    pub stat: SloStat,
    /// `<=` or `<`.
    pub op: SloOp,
    /// The bound in milliseconds (finite, ≥ 0).
    pub threshold_ms: f64,
}

/// The verdict of one SLO over one step (failed requests counted as +∞
/// samples: see the module docs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SloOutcome {
    /// The SLO judged (serialized as its canonical string).
    pub slo: Slo,
    /// The statistic in ms, failures counted; `None` when there were no
    /// samples, or when it is +∞ (it lands on a failure: `samples > 0`).
    pub observed_ms: Option<f64>,
    /// Whether the SLO held (never true without samples).
    pub pass: bool,
    /// Samples the statistic was computed from, failures included.
    pub samples: usize,
    /// Samples at or above the statistic's rank: what a tail rests on.
    pub tail_samples: usize,
    /// Attainment SLOs: the share of samples within the bound.
    pub attained: Option<f64>,
    /// No samples, or a tail resting on fewer than [`MIN_TAIL_SAMPLES`].
    pub warning: Option<String>,
    /// Failed requests, each one +∞ sample.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub failures: usize,
    /// How many of the tail samples are failures (`failures` at most).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub failed_in_tail: usize,
    /// vLLM's statistic, over the successful requests only, in ms; only
    /// when some request failed (else it is `observed_ms`) and some succeeded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vllm_observed_ms: Option<f64>,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

impl SloMetric {
    /// The lowercase name used in SLO strings (`ttft`, `tpot`, `itl`, `e2el`, `ttfo`).
    pub fn as_str(self) -> &'static str {
        match self {
            SloMetric::Ttft => "ttft",
            SloMetric::Tpot => "tpot",
            SloMetric::Itl => "itl",
            SloMetric::E2el => "e2el",
            SloMetric::Ttfo => "ttfo",
        }
    }

    fn parse(name: &str) -> Option<Self> {
        [Self::Ttft, Self::Tpot, Self::Itl, Self::E2el, Self::Ttfo]
            .into_iter()
            .find(|m| m.as_str() == name)
    }
}

impl SloOp {
    /// Whether `observed op threshold` holds.
    pub fn holds(self, observed: f64, threshold: f64) -> bool {
        match self {
            SloOp::Le => observed <= threshold,
            SloOp::Lt => observed < threshold,
        }
    }

    /// `<=` or `<`.
    pub fn as_str(self) -> &'static str {
        match self {
            SloOp::Le => "<=",
            SloOp::Lt => "<",
        }
    }
}

const EXAMPLE: &str = "expected e.g. `p99_ttft_ms<=500`, `mean_tpot_ms<30` or `ttft:500`";

impl Slo {
    /// The quantile (0–1) this SLO bounds; `None` for a mean.
    pub fn quantile(&self) -> Option<f64> {
        match self.stat {
            SloStat::Mean => None,
            SloStat::Median => Some(0.5),
            SloStat::Percentile(p) => Some((p / 100.0).clamp(0.0, 1.0)),
            SloStat::Attainment(r) => Some(r),
        }
    }
}

impl FromStr for Slo {
    type Err = String;

    fn from_str(input: &str) -> Result<Self, Self::Err> {
        let compact: String = input
            .chars()
            .filter(|c| !c.is_whitespace())
            .collect::<String>()
            .to_ascii_lowercase();
        if compact.contains(':') {
            return parse_goodput(&compact).map_err(|why| bad(input, &why));
        }
        parse_statistic(&compact).map_err(|why| bad(input, &why))
    }
}

fn bad(input: &str, why: &str) -> String {
    format!("invalid SLO `{input}`: {why}; {EXAMPLE}")
}

fn parse_statistic(s: &str) -> Result<Slo, String> {
    let (lhs, op, rhs) = if let Some((l, r)) = s.split_once("<=") {
        (l, SloOp::Le, r)
    } else if let Some((l, r)) = s.split_once('<') {
        (l, SloOp::Lt, r)
    } else {
        return Err("no `<=` or `<`".to_string());
    };
    let lhs = lhs.strip_suffix("_ms").unwrap_or(lhs);
    let (stat, metric) = lhs
        .split_once('_')
        .ok_or_else(|| format!("`{lhs}` is not `<stat>_<metric>`"))?;
    let metric = SloMetric::parse(metric)
        .ok_or_else(|| format!("unknown metric `{metric}` (ttft, tpot, itl, e2el, ttfo)"))?;
    Ok(Slo {
        metric,
        stat: parse_stat(stat)?,
        op,
        threshold_ms: parse_threshold(rhs)?,
    })
}

fn parse_stat(stat: &str) -> Result<SloStat, String> {
    match stat {
        "mean" => return Ok(SloStat::Mean),
        "median" => return Ok(SloStat::Median),
        _ => {}
    }
    let p = stat
        .strip_prefix('p')
        .and_then(|p| p.parse::<f64>().ok())
        .ok_or_else(|| format!("unknown statistic `{stat}` (mean, median, p<0-100>)"))?;
    if !(0.0..=100.0).contains(&p) {
        return Err(format!("percentile {p} is outside 0–100"));
    }
    Ok(SloStat::Percentile(p))
}

fn parse_threshold(text: &str) -> Result<f64, String> {
    let text = text.strip_suffix("ms").unwrap_or(text);
    match text.parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        _ => Err(format!(
            "threshold `{text}` is not a non-negative number of ms"
        )),
    }
}

fn parse_goodput(s: &str) -> Result<Slo, String> {
    let (item, ratio) = match s.split_once('@') {
        Some((item, r)) => (item, parse_ratio(r)?),
        None => (s, DEFAULT_GOODPUT_RATIO),
    };
    let (name, bound) = item
        .split_once(':')
        .ok_or_else(|| "goodput items are `<metric>:<ms>`".to_string())?;
    let metric = match name {
        "ttft" => SloMetric::Ttft,
        "tpot" => SloMetric::Tpot,
        "e2el" => SloMetric::E2el,
        "ttfo" => SloMetric::Ttfo,
        other => {
            return Err(format!(
                "goodput metric `{other}` is not ttft, tpot, e2el or ttfo"
            ))
        }
    };
    Ok(Slo {
        metric,
        stat: SloStat::Attainment(ratio),
        op: SloOp::Le,
        threshold_ms: parse_threshold(bound)?,
    })
}

fn parse_ratio(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(r) if r > 0.0 && r <= 1.0 => Ok(r),
        _ => Err(format!("attainment ratio `{text}` is not in (0, 1]")),
    }
}

/// Parse one vLLM `--goodput` item (`ttft:500`, `tpot:30`, `e2el:2000`) into a
/// per-request SLO that holds when at least `goodput_ratio` of the
/// requests meet it (see the module docs for the exact rule).
pub fn from_goodput(item: &str, goodput_ratio: f64) -> Result<Slo, String> {
    let compact: String = item
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect::<String>()
        .to_ascii_lowercase();
    if compact.contains('@') {
        return Err(bad(item, "give the ratio as a parameter, not with `@`"));
    }
    if !(goodput_ratio > 0.0 && goodput_ratio <= 1.0) {
        return Err(format!("goodput ratio {goodput_ratio} is not in (0, 1]"));
    }
    let mut slo = parse_goodput(&compact).map_err(|why| bad(item, &why))?;
    slo.stat = SloStat::Attainment(goodput_ratio);
    Ok(slo)
}

impl fmt::Display for Slo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (metric, op, t) = (self.metric.as_str(), self.op.as_str(), self.threshold_ms);
        match self.stat {
            SloStat::Attainment(r) if self.op == SloOp::Le => write!(f, "{metric}:{t}@{r}"),
            // Not expressible as a goodput item; shown for humans only.
            SloStat::Attainment(r) => write!(f, "{metric}:<{t}@{r}"),
            SloStat::Mean => write!(f, "mean_{metric}_ms{op}{t}"),
            SloStat::Median => write!(f, "median_{metric}_ms{op}{t}"),
            SloStat::Percentile(p) => write!(f, "{}_{metric}_ms{op}{t}", percentile_key(p)),
        }
    }
}

impl Serialize for Slo {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for Slo {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// How many of `n` ascending samples sit at or above the NumPy-linear rank of
/// percentile `p` (rank `p/100·(n−1)`, 0-based): `n − ⌈rank⌉`. For p99 over
/// 10 000 samples this is 100; for p100 it is 1; 0 when `n` is 0.
pub fn tail_samples(n: usize, p: f64) -> usize {
    if n == 0 {
        return 0;
    }
    let q = if p.is_nan() {
        0.0
    } else {
        (p / 100.0).clamp(0.0, 1.0)
    };
    let rank = ((n - 1) as f64 * q - RANK_EPSILON).ceil().max(0.0) as usize;
    n - rank.min(n - 1)
}

pub(crate) fn low_tail_warning(slo: &Slo, tail: usize, n: usize) -> String {
    format!(
        "{slo}: the tail rests on {tail} of {n} samples (fewer than {MIN_TAIL_SAMPLES}); \
         lengthen the step for a trustworthy result"
    )
}

impl SloOutcome {
    /// One line for a failure list, e.g. `p99_ttft_ms 812.3 > 500`, or
    /// `p99_ttft_ms ∞ (failed) > 500; …` when failed requests decided it.
    pub fn describe(&self) -> String {
        let slo = &self.slo;
        if self.samples == 0 {
            return format!("{slo}: no samples");
        }
        let verb = match (self.pass, slo.op) {
            (true, op) => op.as_str(),
            (false, SloOp::Le) => ">",
            (false, SloOp::Lt) => ">=",
        };
        let observed = self
            .observed_ms
            .map_or_else(|| INFINITE.to_string(), |v| format!("{v:.1}"));
        let name = match slo.stat {
            SloStat::Attainment(r) => {
                let met = self.attained.unwrap_or(0.0) * 100.0;
                let line = format!(
                    "{slo}: {met:.1}% of {} within {} ms (need {}%)",
                    slo.metric.as_str(),
                    slo.threshold_ms,
                    r * 100.0
                );
                return self.with_failures(line);
            }
            SloStat::Mean => format!("mean_{}_ms", slo.metric.as_str()),
            SloStat::Median => format!("median_{}_ms", slo.metric.as_str()),
            SloStat::Percentile(p) => format!("{}_{}_ms", percentile_key(p), slo.metric.as_str()),
        };
        self.with_failures(format!("{name} {observed} {verb} {}", slo.threshold_ms))
    }

    /// `line`, then what the failed requests did when there were some:
    /// `6 failed requests counted as misses (3 of 3 tail samples); 45.2 ms over successes`.
    fn with_failures(&self, line: String) -> String {
        let failures = self.failures;
        if failures == 0 {
            return line;
        }
        let vllm = match self.vllm_observed_ms {
            Some(v) => format!("; {v:.1} ms over successes"),
            None => String::new(),
        };
        format!(
            "{line}; {failures} failed request{} counted as misses ({} of {} tail samples){vllm}",
            if failures == 1 { "" } else { "s" },
            self.failed_in_tail,
            self.tail_samples
        )
    }
}

#[cfg(test)]
#[path = "slo_tests.rs"]
mod tests;

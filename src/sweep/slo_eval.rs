//! SLO evaluation over one step's window: the samples of an SLO's metric
//! and the statistic it bounds, with every failed request counted. PURE:
//! reads records; no clock, no I/O.
//!
//! **A failed request is a miss, not a missing sample** (as AIPerf and
//! GuideLLM count it). Every request of the window that failed or timed out
//! is one sample of +∞ for every latency SLO, whatever it had received:
//! one per request for TTFT, TPOT, E2EL and TTFO, and one per request for ITL
//! too (beside the successful requests' gaps). So:
//!
//! - a percentile or the median is taken over successes and failures
//!   together, failures ranked last; it has no finite value when it lands on
//!   a failure (every tail sample failed), and the SLO is then missed;
//! - a mean has no finite value as soon as one request failed: a mean bound
//!   tolerates no failure (use a percentile to allow a few);
//! - a goodput-form SLO needs `ratio` of *all* the window's requests (failed
//!   ones counted as not within the bound), not of the successful ones.
//!
//! The outcome also keeps vLLM's statistic, over the successful requests
//! only (`vllm_observed_ms`, when some request failed), which is what
//! `vllm bench serve` would print. `--max-error-rate` stays a separate bound.
use super::slo::{
    low_tail_warning, tail_samples, Slo, SloMetric, SloOutcome, SloStat, MIN_TAIL_SAMPLES,
    RANK_EPSILON,
};
use crate::metrics::stats::reasoning::ttfo_seconds;
use crate::metrics::stats::request::{
    e2el_seconds, goodput_tpot_seconds, itl_seconds, tpot_seconds, ttft_seconds,
};
use crate::metrics::stats::{mean, median};
use crate::metrics::RequestRecord;

/// Evaluate `slo` over `records`: the successful ones give their samples,
/// each failed one a sample of +∞ (module docs). The caller passes only the
/// records of the step's measurement window (e.g. those due in it). Without
/// samples the SLO fails, with a warning saying so.
pub fn evaluate(slo: &Slo, records: &[RequestRecord]) -> SloOutcome {
    let mut values = sample_seconds(slo, records);
    values.sort_by(f64::total_cmp);
    let failures = records.iter().filter(|r| !r.is_ok()).count();
    let met = match slo.stat {
        SloStat::Attainment(_) => {
            let bound_s = slo.threshold_ms / 1000.0;
            Some(values.iter().filter(|&&v| slo.op.holds(v, bound_s)).count())
        }
        _ => None,
    };
    let sampled = Sampled {
        successes: values.len(),
        failures,
        met,
    };
    judge(slo, sampled, |f| statistic_ms(slo.stat, &values, f))
}

/// The samples of `slo`'s metric over the successful requests among
/// `records`, in seconds, in record order (vLLM's values).
pub(crate) fn sample_seconds(slo: &Slo, records: &[RequestRecord]) -> Vec<f64> {
    let mut out = Vec::with_capacity(records.len());
    for r in records.iter().filter(|r| r.is_ok()) {
        push_seconds(slo, r, &mut out);
    }
    out
}

/// The samples of `slo`'s metric over `records` in record order, each
/// failed request one `+∞` (the sequence the confidence tests read).
pub(crate) fn sample_sequence(slo: &Slo, records: &[RequestRecord]) -> Vec<f64> {
    let mut out = Vec::with_capacity(records.len());
    for r in records {
        if r.is_ok() {
            push_seconds(slo, r, &mut out);
        } else {
            out.push(f64::INFINITY);
        }
    }
    out
}

/// One successful record's samples of `slo`'s metric (vLLM's definitions;
/// goodput-form TPOT counts a one-token request as 0).
fn push_seconds(slo: &Slo, r: &RequestRecord, out: &mut Vec<f64>) {
    let attainment = matches!(slo.stat, SloStat::Attainment(_));
    let one = match slo.metric {
        SloMetric::Ttft => ttft_seconds(r),
        SloMetric::Tpot if attainment => goodput_tpot_seconds(r),
        SloMetric::Tpot => tpot_seconds(r),
        SloMetric::E2el => e2el_seconds(r),
        SloMetric::Ttfo => ttfo_seconds(r),
        SloMetric::Itl => {
            out.extend(itl_seconds(r));
            return;
        }
    };
    out.extend(one);
}

/// What one SLO's samples amount to, however they are held (a window's
/// records, or merged histograms and counts).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Sampled {
    /// Samples of the successful requests.
    pub successes: usize,
    /// Failed requests: one +∞ sample each.
    pub failures: usize,
    /// Attainment SLOs: successful samples within the bound.
    pub met: Option<usize>,
}

/// The outcome of `slo` over `s`; `value_ms(f)` is the statistic in ms with
/// `f` failures ranked after the successes (`None` when +∞ or without
/// samples): `f = s.failures` is judged, `f = 0` is vLLM's.
pub(crate) fn judge(slo: &Slo, s: Sampled, value_ms: impl Fn(usize) -> Option<f64>) -> SloOutcome {
    let n = s.successes + s.failures;
    let mut o = SloOutcome {
        slo: *slo,
        observed_ms: None,
        pass: false,
        samples: n,
        tail_samples: 0,
        attained: None,
        warning: None,
        failures: s.failures,
        failed_in_tail: 0,
        vllm_observed_ms: None,
    };
    if n == 0 {
        o.warning = Some(format!("{slo}: no {} samples", slo.metric.as_str()));
        return o;
    }
    o.observed_ms = value_ms(s.failures);
    if s.failures > 0 && s.successes > 0 {
        o.vllm_observed_ms = value_ms(0);
    }
    o.tail_samples = tail_of(slo.stat, n);
    o.failed_in_tail = s.failures.min(o.tail_samples);
    o.pass = match (slo.stat, s.met) {
        (SloStat::Attainment(ratio), Some(met)) => {
            o.attained = Some(met as f64 / n as f64);
            met >= needed(ratio, n)
        }
        _ => o
            .observed_ms
            .is_some_and(|v| slo.op.holds(v, slo.threshold_ms)),
    };
    let rests_on_tail = matches!(slo.stat, SloStat::Percentile(_) | SloStat::Attainment(_));
    if rests_on_tail && o.tail_samples < MIN_TAIL_SAMPLES {
        o.warning = Some(low_tail_warning(slo, o.tail_samples, n));
    }
    o
}

/// How many of `n` samples the statistic's tail rests on.
fn tail_of(stat: SloStat, n: usize) -> usize {
    match stat {
        SloStat::Mean => n,
        SloStat::Median => tail_samples(n, 50.0),
        SloStat::Percentile(p) => tail_samples(n, p),
        SloStat::Attainment(ratio) => n - needed(ratio, n) + 1,
    }
}

/// How many of `n` samples a goodput-form SLO at `ratio` needs within its
/// bound: `⌈ratio·n⌉`, in `1..=n`.
pub(crate) fn needed(ratio: f64, n: usize) -> usize {
    ((ratio * n as f64 - RANK_EPSILON).ceil().max(1.0) as usize).min(n.max(1))
}

/// `stat` in ms over `sorted` successful samples (ascending, seconds) and
/// `failures` samples of +∞ after them; `None` when it is +∞ or there is no
/// sample. Without failures: exactly [`crate::metrics::stats`]' value.
fn statistic_ms(stat: SloStat, sorted: &[f64], failures: usize) -> Option<f64> {
    let n = sorted.len();
    if n + failures == 0 {
        return None;
    }
    let nth = |k: usize| sorted[k.min(n.saturating_sub(1))];
    let ms = |seconds: f64| seconds * 1000.0;
    match stat {
        SloStat::Mean => (failures == 0).then(|| ms(mean(sorted))),
        SloStat::Median if failures == 0 => Some(ms(median(sorted))),
        SloStat::Median => percentile_with_failures(n, failures, 50.0, nth).map(ms),
        SloStat::Percentile(p) => percentile_with_failures(n, failures, p, nth).map(ms),
        SloStat::Attainment(ratio) => {
            let k = needed(ratio, n + failures);
            (k <= n).then(|| ms(sorted[k - 1]))
        }
    }
}

/// The NumPy-linear percentile `p` of `successes` ascending values read
/// through `nth` (0-based) followed by `failures` values of +∞: `None` when
/// it lands on a failure, i.e. when every one of its tail samples
/// ([`tail_samples`]) failed. Otherwise the same interpolation as
/// [`crate::metrics::stats::percentile`] (the upper neighbour read is a
/// success, or is weighted 0).
pub(crate) fn percentile_with_failures(
    successes: usize,
    failures: usize,
    p: f64,
    nth: impl Fn(usize) -> f64,
) -> Option<f64> {
    let n = successes + failures;
    if n == 0 || tail_samples(n, p) <= failures {
        return None;
    }
    let last = successes - 1;
    Some(crate::metrics::stats::distribution::percentile_by(
        n,
        p,
        |k| nth(k.min(last)),
    ))
}

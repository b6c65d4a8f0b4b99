//! SLO evaluation over merged histograms: the verdict on a step of a sharded
//! sweep, where no process holds all the records. PURE: reads histograms and
//! counts; no clock, no I/O.
//!
//! The statistics are those of [`super::slo::evaluate`], read from the
//! [`RunHists`] of [`crate::metrics::hist`] (the same sample sets): the mean is
//! exact (to the recorded microsecond); percentiles and the median follow the
//! same NumPy-linear rule on bucket midpoints, within half a bucket (≤ 0.05 %)
//! of the value over the union of all samples. Goodput-form SLOs
//! (`ttft:500@0.99`) are decided **exactly** from additive counts that every
//! shard computes from its own records ([`Attainment`]: samples and how many
//! met the bound); only the value reported beside the verdict (the k-th
//! smallest sample) comes from the histogram.
//!
//! Failed requests are +∞ samples here as in a single process: each shard's
//! block counts the failures due in its window, the merge sums them, and
//! they are ranked after the histogram's samples (a goodput-form SLO's
//! exact counts gain them as samples never within the bound).
use super::slo::{self, Sampled, Slo, SloMetric, SloOutcome, SloStat};
use crate::metrics::hist::{LatencyHist, RunHists};
use crate::metrics::RequestRecord;

pub use crate::result::evidence::Attainment;

/// The counts of a goodput-form SLO over `records` (one shard's window);
/// `None` unless `slo` is goodput-form. Same samples and comparison as
/// [`super::slo::evaluate`].
pub fn attainment(slo: &Slo, records: &[RequestRecord]) -> Option<Attainment> {
    let SloStat::Attainment(_) = slo.stat else {
        return None;
    };
    let values = slo::sample_seconds(slo, records);
    let bound_s = slo.threshold_ms / 1000.0;
    let met = values.iter().filter(|&&v| slo.op.holds(v, bound_s)).count();
    Some(Attainment {
        samples: values.len() as u64,
        met: met as u64,
    })
}

/// The histogram of `metric`; shard files carry none for TTFO.
fn hist_of(metric: SloMetric, h: &RunHists) -> Option<&LatencyHist> {
    match metric {
        SloMetric::Ttft => Some(&h.ttft),
        SloMetric::Tpot => Some(&h.tpot),
        SloMetric::Itl => Some(&h.itl),
        SloMetric::E2el => Some(&h.e2el),
        SloMetric::Ttfo => None,
    }
}

/// Evaluate `slo` over merged histograms; `attainment` carries the summed
/// counts of a goodput-form SLO (without them such an SLO fails, saying why),
/// `failures` the summed failed requests of the window, each one +∞ sample
/// as in [`super::slo::evaluate`].
pub fn evaluate_hist(
    slo: &Slo,
    hists: &RunHists,
    attainment: Option<Attainment>,
    failures: u64,
) -> SloOutcome {
    let Some(h) = hist_of(slo.metric, hists) else {
        return unjudged(
            slo,
            format!(
                "{slo}: shard files carry no {} histogram; judge it in one process",
                slo.metric.as_str()
            ),
        );
    };
    let failures = failures as usize;
    let count = h.count() as usize;
    let SloStat::Attainment(ratio) = slo.stat else {
        let sampled = Sampled {
            successes: count,
            failures,
            met: None,
        };
        return slo::judge(slo, sampled, |f| statistic_ms(slo.stat, h, f));
    };
    let Some(a) = attainment else {
        let why = format!("{slo}: the shards' files carry no attainment counts");
        return SloOutcome {
            samples: count,
            ..unjudged(slo, why)
        };
    };
    let successes = a.samples as usize;
    // Goodput TPOT counts a request with ≤ 1 output token as 0; those
    // requests are not in the TPOT histogram.
    let zeros = successes.saturating_sub(count);
    let kth = |f: usize| {
        let k = slo::needed(ratio, successes + f);
        (k <= successes).then(|| {
            if k <= zeros {
                0.0
            } else {
                h.nth_ms((k - 1 - zeros) as u64)
            }
        })
    };
    let sampled = Sampled {
        successes,
        failures,
        met: Some(a.met as usize),
    };
    slo::judge(slo, sampled, kth)
}

/// A failed outcome without a statistic, saying why.
fn unjudged(slo: &Slo, why: String) -> SloOutcome {
    SloOutcome {
        slo: *slo,
        observed_ms: None,
        pass: false,
        samples: 0,
        tail_samples: 0,
        attained: None,
        warning: Some(why),
        failures: 0,
        failed_in_tail: 0,
        vllm_observed_ms: None,
    }
}

/// `stat` over the histogram's samples and `failures` samples of +∞ after
/// them, in ms (`None` when +∞ or without samples); without failures the
/// histogram's own statistics.
fn statistic_ms(stat: SloStat, h: &LatencyHist, failures: usize) -> Option<f64> {
    let n = h.count() as usize;
    if n + failures == 0 {
        return None;
    }
    let nth = |k: usize| h.nth_ms(k as u64);
    match (stat, failures) {
        (SloStat::Mean, 0) => Some(h.mean_ms()),
        (SloStat::Mean, _) => None,
        (SloStat::Median, 0) => Some(h.percentile_ms(50.0)),
        (SloStat::Percentile(p), 0) => Some(h.percentile_ms(p)),
        (SloStat::Median, f) => slo::percentile_with_failures(n, f, 50.0, nth),
        (SloStat::Percentile(p), f) => slo::percentile_with_failures(n, f, p, nth),
        // Decided from the counts (`evaluate_hist`), never from here.
        (SloStat::Attainment(_), _) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::RequestRecord;
    use std::time::Duration;

    /// A successful request with the given TTFT and E2EL (ms) and `tokens` output tokens.
    fn rec(ttft_us: u64, e2el_us: u64, tokens: u32) -> RequestRecord {
        let us = Duration::from_micros;
        RequestRecord {
            sent: us(1000),
            first_token: Some(us(1000 + ttft_us)),
            last_token: Some(us(1000 + e2el_us)),
            output_tokens: tokens,
            ..Default::default()
        }
    }

    /// Deterministic, skewed latencies: most fast, a slow tail.
    fn records(n: usize, seed: u64) -> Vec<RequestRecord> {
        let mut x = seed;
        (0..n)
            .map(|_| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let u = (x >> 11) as f64 / (1u64 << 53) as f64;
                let ttft = (2_000.0 * (500.0f64).powf(u * u * u)) as u64;
                let tokens = 1 + (x % 9) as u32;
                rec(ttft, ttft + 30_000 * u64::from(tokens), tokens)
            })
            .collect()
    }

    /// Three "shards" of one load: their merged histograms against the union's records.
    fn shards() -> (Vec<Vec<RequestRecord>>, Vec<RequestRecord>) {
        let parts = vec![records(4000, 1), records(150, 2), records(2500, 3)];
        let union = parts.concat();
        (parts, union)
    }

    fn merged(parts: &[Vec<RequestRecord>]) -> RunHists {
        let mut h = RunHists::default();
        for p in parts {
            h.merge(&RunHists::from_records(p)).unwrap();
        }
        h
    }

    #[test]
    fn percentiles_over_merged_histograms_equal_those_over_the_union_within_precision() {
        let (parts, union) = shards();
        let h = merged(&parts);
        for text in [
            "p99_ttft_ms<=100",
            "p99.9_ttft_ms<=100",
            "p50_e2el_ms<=100",
            "median_tpot_ms<=31",
            "p90_tpot_ms<=100",
        ] {
            let slo: Slo = text.parse().unwrap();
            let exact = slo::evaluate(&slo, &union);
            let got = evaluate_hist(&slo, &h, None, 0);
            let (e, g) = (exact.observed_ms.unwrap(), got.observed_ms.unwrap());
            assert!(
                (g - e).abs() <= e * 0.0005 + 0.001,
                "{text}: merged {g} vs union {e}"
            );
            assert_eq!(
                (got.samples, got.tail_samples),
                (exact.samples, exact.tail_samples)
            );
        }
        let mean: Slo = "mean_ttft_ms<=100".parse().unwrap();
        let (e, g) = (
            slo::evaluate(&mean, &union).observed_ms.unwrap(),
            evaluate_hist(&mean, &h, None, 0).observed_ms.unwrap(),
        );
        assert!((g - e).abs() < 1e-9 * e, "mean: {g} vs {e}");
    }

    #[test]
    fn the_merged_p99_is_not_the_mean_of_the_shards_p99s() {
        // load-generation.md §5.2: 1000 requests at 50 ms and 100 with half at 5 s.
        let fast: Vec<RequestRecord> = (0..1000).map(|_| rec(50_000, 60_000, 2)).collect();
        let mut mixed: Vec<RequestRecord> = (0..50).map(|_| rec(50_000, 60_000, 2)).collect();
        mixed.extend((0..50).map(|_| rec(5_000_000, 5_010_000, 2)));
        let h = merged(&[fast, mixed]);
        let slo: Slo = "p99_ttft_ms<=1000".parse().unwrap();
        let o = evaluate_hist(&slo, &h, None, 0);
        assert!(
            (o.observed_ms.unwrap() - 5000.0).abs() < 5000.0 * 0.0005,
            "{o:?}"
        );
        assert!(!o.pass);
    }

    #[test]
    fn attainment_is_decided_exactly_from_summed_counts() {
        let (parts, union) = shards();
        let h = merged(&parts);
        for text in [
            "ttft:20@0.9",
            "ttft:3@0.5",
            "tpot:30.5@0.95",
            "e2el:150@0.99",
        ] {
            let slo: Slo = text.parse().unwrap();
            let mut sum = Attainment::default();
            for p in &parts {
                sum.add(&attainment(&slo, p).unwrap());
            }
            let exact = slo::evaluate(&slo, &union);
            let got = evaluate_hist(&slo, &h, Some(sum), 0);
            assert_eq!(got.pass, exact.pass, "{text}");
            assert_eq!(got.attained, exact.attained, "{text}");
            assert_eq!(got.samples, exact.samples, "{text}");
            let (e, g) = (exact.observed_ms.unwrap(), got.observed_ms.unwrap());
            assert!((g - e).abs() <= e * 0.0005 + 0.001, "{text}: {g} vs {e}");
        }
        let slo: Slo = "ttft:20".parse().unwrap();
        let missing = evaluate_hist(&slo, &h, None, 0);
        assert!(!missing.pass && missing.warning.is_some());
    }

    /// [`shards`] with every `every`-th request of each part failed.
    fn shards_with_failures(every: usize) -> (Vec<Vec<RequestRecord>>, Vec<RequestRecord>) {
        let (mut parts, _) = shards();
        for p in &mut parts {
            for r in p.iter_mut().step_by(every) {
                r.error = Some(crate::metrics::RequestError {
                    kind: crate::metrics::ErrorKind::Timeout,
                    status: None,
                    message: "timeout".into(),
                });
            }
        }
        let union = parts.concat();
        (parts, union)
    }

    #[test]
    fn failures_summed_over_shards_give_the_single_process_verdict() {
        // 1 failure in 50 (2%) and in 500 (0.2%): p99s land on them or not.
        for every in [50, 500] {
            let (parts, union) = shards_with_failures(every);
            let h = merged(&parts);
            let failures = union.iter().filter(|r| !r.is_ok()).count() as u64;
            for text in [
                "p99_ttft_ms<=1000",
                "p99.9_itl_ms<=1000",
                "p90_e2el_ms<=1000",
                "median_tpot_ms<=100",
                "mean_ttft_ms<=1000",
                "ttft:1000@0.99",
                "tpot:100@0.995",
            ] {
                let slo: Slo = text.parse().unwrap();
                let mut sum = Attainment::default();
                for p in &parts {
                    sum.add(&attainment(&slo, p).unwrap_or_default());
                }
                let exact = slo::evaluate(&slo, &union);
                let got = evaluate_hist(&slo, &h, Some(sum), failures);
                let what = format!("{text}, 1 in {every} failed: {got:?} vs {exact:?}");
                assert_eq!(got.pass, exact.pass, "{what}");
                assert_eq!(
                    (
                        got.samples,
                        got.tail_samples,
                        got.failures,
                        got.failed_in_tail
                    ),
                    (
                        exact.samples,
                        exact.tail_samples,
                        exact.failures,
                        exact.failed_in_tail
                    ),
                    "{what}"
                );
                assert_eq!(got.attained, exact.attained, "{what}");
                let close = |a: Option<f64>, b: Option<f64>| match (a, b) {
                    (Some(g), Some(e)) => (g - e).abs() <= e * 0.0005 + 0.001,
                    (a, b) => a.is_none() && b.is_none(),
                };
                assert!(close(got.observed_ms, exact.observed_ms), "{what}");
                assert!(
                    close(got.vllm_observed_ms, exact.vllm_observed_ms),
                    "{what}"
                );
            }
        }
        // The rows differ from vLLM's where they should: at 2% the p99 is +∞.
        let (_, union) = shards_with_failures(50);
        let p99 = slo::evaluate(&"p99_ttft_ms<=1000".parse().unwrap(), &union);
        assert_eq!(p99.observed_ms, None);
        assert!(p99.vllm_observed_ms.is_some_and(|v| v < 1000.0), "{p99:?}");
    }

    #[test]
    fn no_samples_fail_with_a_warning() {
        let slo: Slo = "p99_itl_ms<=10".parse().unwrap();
        let o = evaluate_hist(&slo, &RunHists::default(), None, 0);
        assert!(!o.pass && o.observed_ms.is_none());
        assert!(o.warning.unwrap().contains("no itl samples"));
    }
}

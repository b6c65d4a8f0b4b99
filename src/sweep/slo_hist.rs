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
use super::slo::{self, Slo, SloMetric, SloOutcome, SloStat, MIN_TAIL_SAMPLES, RANK_EPSILON};
use crate::metrics::hist::{LatencyHist, RunHists};
use crate::metrics::RequestRecord;
use serde::{Deserialize, Serialize};

/// Additive evidence for a goodput-form SLO: how many samples, how many met it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Attainment {
    pub samples: u64,
    pub met: u64,
}

impl Attainment {
    /// The counts over `records` (one shard's window); `None` unless `slo` is
    /// goodput-form. Same samples and comparison as [`super::slo::evaluate`].
    pub fn of(slo: &Slo, records: &[RequestRecord]) -> Option<Attainment> {
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

    /// Add another shard's counts.
    pub fn add(&mut self, other: &Attainment) {
        self.samples += other.samples;
        self.met += other.met;
    }
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
/// counts of a goodput-form SLO (without them such an SLO fails, saying why).
pub fn evaluate_hist(slo: &Slo, hists: &RunHists, attainment: Option<Attainment>) -> SloOutcome {
    let Some(h) = hist_of(slo.metric, hists) else {
        return SloOutcome {
            slo: *slo,
            observed_ms: None,
            pass: false,
            samples: 0,
            tail_samples: 0,
            attained: None,
            warning: Some(format!(
                "{slo}: shard files carry no {} histogram; judge it in one process",
                slo.metric.as_str()
            )),
        };
    };
    let mut o = SloOutcome {
        slo: *slo,
        observed_ms: None,
        pass: false,
        samples: h.count() as usize,
        tail_samples: 0,
        attained: None,
        warning: None,
    };
    if let SloStat::Attainment(ratio) = slo.stat {
        let Some(a) = attainment else {
            o.warning = Some(format!(
                "{slo}: the shards' files carry no attainment counts"
            ));
            return o;
        };
        o.samples = a.samples as usize;
        if a.samples == 0 {
            o.warning = Some(format!("{slo}: no {} samples", slo.metric.as_str()));
            return o;
        }
        let n = a.samples;
        let needed = ((ratio * n as f64 - RANK_EPSILON).ceil().max(1.0) as u64).min(n);
        // Goodput TPOT counts a request with ≤ 1 output token as 0; those
        // requests are not in the TPOT histogram.
        let zeros = n.saturating_sub(h.count());
        o.observed_ms = Some(if needed <= zeros {
            0.0
        } else {
            h.nth_ms(needed - 1 - zeros)
        });
        o.pass = a.met >= needed;
        o.attained = Some(a.met as f64 / n as f64);
        o.tail_samples = (n - needed + 1) as usize;
        if o.tail_samples < MIN_TAIL_SAMPLES {
            o.warning = Some(slo::low_tail_warning(slo, o.tail_samples, o.samples));
        }
        return o;
    }
    let n = o.samples;
    if n == 0 {
        o.warning = Some(format!("{slo}: no {} samples", slo.metric.as_str()));
        return o;
    }
    let (observed, tail) = match slo.stat {
        SloStat::Mean => (h.mean_ms(), n),
        SloStat::Median => (h.percentile_ms(50.0), slo::tail_samples(n, 50.0)),
        SloStat::Percentile(p) | SloStat::Attainment(p) => {
            (h.percentile_ms(p), slo::tail_samples(n, p))
        }
    };
    o.observed_ms = Some(observed);
    o.pass = slo.op.holds(observed, slo.threshold_ms);
    o.tail_samples = tail;
    if matches!(slo.stat, SloStat::Percentile(_)) && tail < MIN_TAIL_SAMPLES {
        o.warning = Some(slo::low_tail_warning(slo, tail, n));
    }
    o
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
            let got = evaluate_hist(&slo, &h, None);
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
            evaluate_hist(&mean, &h, None).observed_ms.unwrap(),
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
        let o = evaluate_hist(&slo, &h, None);
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
                sum.add(&Attainment::of(&slo, p).unwrap());
            }
            let exact = slo::evaluate(&slo, &union);
            let got = evaluate_hist(&slo, &h, Some(sum));
            assert_eq!(got.pass, exact.pass, "{text}");
            assert_eq!(got.attained, exact.attained, "{text}");
            assert_eq!(got.samples, exact.samples, "{text}");
            let (e, g) = (exact.observed_ms.unwrap(), got.observed_ms.unwrap());
            assert!((g - e).abs() <= e * 0.0005 + 0.001, "{text}: {g} vs {e}");
        }
        let slo: Slo = "ttft:20".parse().unwrap();
        let missing = evaluate_hist(&slo, &h, None);
        assert!(!missing.pass && missing.warning.is_some());
    }

    #[test]
    fn no_samples_fail_with_a_warning() {
        let slo: Slo = "p99_itl_ms<=10".parse().unwrap();
        let o = evaluate_hist(&slo, &RunHists::default(), None);
        assert!(!o.pass && o.observed_ms.is_none());
        assert!(o.warning.unwrap().contains("no itl samples"));
    }
}

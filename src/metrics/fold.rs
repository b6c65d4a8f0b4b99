//! Fold: bounds a long run's memory. Past [`FOLD_AFTER_ITLS`] held ITL gaps
//! (and only when per-request detail was not asked for), each finished
//! record's ITL gaps move into one run-wide histogram and its output events
//! into 10 ms slots, and the record keeps only its fixed-size fields. Small
//! runs never fold, so their statistics stay exact and equal vLLM's. The
//! statistics and histograms of a folded run are made here too, from those
//! of [`super::stats`] and [`super::hist`].
//! PURE: no clock, no I/O.

use super::hist::{LatencyHist, RunHists};
use super::stats::peak::output_event_times;
use super::stats::{successful, summarize, StatsOptions, Summary};
use super::RequestRecord;
use std::time::Duration;

/// Held ITL gaps (16 bytes each) before folding starts: 16 MB.
pub const FOLD_AFTER_ITLS: usize = 1_000_000;
/// Width of an output-event slot (resolution of the folded peak tokens/s).
pub const SLOT: Duration = Duration::from_millis(10);

/// The folded part of a run: ITL gaps and output-event times of the records
/// marked `itl_folded`.
#[derive(Debug, Clone, Default)]
pub struct ItlFold {
    /// Every folded ITL gap (successful requests only, as in the stats).
    pub itl: LatencyHist,
    /// Output events of folded successful requests, per [`SLOT`] since t0.
    pub slots: Vec<u32>,
    /// ITL gaps held by records not folded yet.
    held: usize,
    active: bool,
}

impl ItlFold {
    /// True once the run passed the threshold.
    pub fn is_active(&self) -> bool {
        self.active
    }

    /// Take a finished record; once the held gaps pass the threshold, fold
    /// every record seen so far (`earlier`) and every later one.
    pub fn admit(&mut self, rec: &mut RequestRecord, earlier: &mut [RequestRecord]) {
        if !self.active {
            self.held += rec.itl.len();
            if self.held <= FOLD_AFTER_ITLS {
                return;
            }
            self.active = true;
            for r in earlier.iter_mut() {
                self.fold(r);
            }
        }
        self.fold(rec);
    }

    /// Move one record's gaps and event times in; failed requests just drop
    /// theirs (the stats exclude them).
    pub fn fold(&mut self, rec: &mut RequestRecord) {
        if rec.itl_folded {
            return;
        }
        if rec.is_ok() {
            if let Some(first) = rec.first_token {
                let mut t = first;
                self.count_event(t);
                for gap in &rec.itl {
                    self.itl.record_duration(*gap);
                    t = t.saturating_add(*gap);
                    self.count_event(t);
                }
            }
        }
        rec.itl = Vec::new();
        rec.itl_folded = true;
    }

    fn count_event(&mut self, t: Duration) {
        let slot = (t.as_nanos() / SLOT.as_nanos()) as usize;
        if slot >= self.slots.len() {
            self.slots.resize(slot + 1, 0);
        }
        self.slots[slot] += 1;
    }

    /// The largest count of folded output events in a one-second bucket,
    /// buckets starting at `origin` (slots are attributed by their start,
    /// so a bucket edge is placed to within one slot).
    pub fn bucket_counts(&self, origin: Duration) -> Vec<u64> {
        let mut buckets = Vec::new();
        for (i, &n) in self.slots.iter().enumerate() {
            let start = SLOT * i as u32;
            if n == 0 || start + SLOT <= origin {
                continue;
            }
            let b = start.saturating_sub(origin).as_secs() as usize;
            if b >= buckets.len() {
                buckets.resize(b + 1, 0);
            }
            buckets[b] += u64::from(n);
        }
        buckets
    }
}

/// [`summarize`] for a run whose long tail of ITL gaps was folded: ITL
/// statistics come from the folded histogram plus the records not folded (percentiles then to the histogram's
/// precision, means and std exact), the peak output rate from its 10 ms slots.
pub fn summarize_folded(
    records: &[RequestRecord],
    duration: Duration,
    opts: &StatsOptions,
    fold: &ItlFold,
) -> Summary {
    let mut s = summarize(records, duration, opts);
    if fold.is_active() {
        let mut itl = fold.itl.clone();
        for r in successful(records).filter(|r| !r.itl_folded) {
            r.itl.iter().for_each(|gap| itl.record_duration(*gap));
        }
        s.itl = itl.distribution(&opts.percentiles);
        s.max_output_tokens_per_s = max_output_tokens_per_s_folded(records, fold);
    }
    s
}

/// [`super::stats::max_output_tokens_per_s`] when part of the run was folded: the folded
/// events come from `fold`'s slots, the rest from the records not folded.
pub fn max_output_tokens_per_s_folded(records: &[RequestRecord], fold: &ItlFold) -> f64 {
    let Some(origin) = successful(records).map(|r| r.sent).min() else {
        return 0.0;
    };
    let mut buckets = fold.bucket_counts(origin);
    let unfolded = successful(records).filter(|r| !r.itl_folded);
    for t in unfolded.flat_map(output_event_times) {
        let b = t.saturating_sub(origin).as_secs() as usize;
        if b >= buckets.len() {
            buckets.resize(b + 1, 0);
        }
        buckets[b] += 1;
    }
    buckets.into_iter().max().unwrap_or(0) as f64
}

impl RunHists {
    /// Histograms over `records` plus the ITL gaps folded out of them.
    pub fn from_records_and_fold(records: &[RequestRecord], fold: Option<&ItlFold>) -> Self {
        let mut h = Self::from_records(records);
        if let Some(fold) = fold {
            // One fixed configuration on both sides: adding cannot fail.
            let _ = h.itl.merge(&fold.itl);
        }
        h
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::stats::testing::ok;

    #[test]
    fn nothing_folds_below_the_threshold() {
        let mut fold = ItlFold::default();
        let mut r = ok(0, 100, &[10, 10], 3);
        fold.admit(&mut r, &mut []);
        assert!(!fold.is_active());
        assert_eq!(r.itl.len(), 2);
        assert!(!r.itl_folded);
    }

    #[test]
    fn passing_the_threshold_folds_earlier_and_later_records() {
        let mut fold = ItlFold::default();
        let gaps = vec![1u64; FOLD_AFTER_ITLS / 2 + 1];
        let mut earlier = vec![ok(0, 100, &gaps, 1)];
        fold.admit(&mut earlier[0].clone(), &mut []);
        let mut second = ok(0, 100, &gaps, 1);
        fold.admit(&mut second, &mut earlier);
        assert!(fold.is_active());
        assert!(earlier[0].itl_folded && earlier[0].itl.is_empty());
        assert!(second.itl_folded && second.itl.is_empty());
        assert_eq!(fold.itl.count(), 2 * gaps.len() as u64);
        let mut third = ok(0, 100, &[5], 2);
        fold.admit(&mut third, &mut []);
        assert!(third.itl_folded);
        assert_eq!(fold.itl.count(), 2 * gaps.len() as u64 + 1);
    }

    #[test]
    fn event_times_land_in_slots_and_buckets() {
        let mut fold = ItlFold::default();
        // sent 0, first token 100 ms, then +950 ms and +10 ms: 100, 1050, 1060 ms.
        let mut r = ok(0, 100, &[950, 10], 3);
        fold.fold(&mut r);
        assert_eq!(fold.slots.iter().map(|&n| u64::from(n)).sum::<u64>(), 3);
        assert_eq!(fold.bucket_counts(Duration::ZERO), vec![1, 2]);
        assert_eq!(fold.bucket_counts(Duration::from_millis(100)), vec![3]);
    }

    #[test]
    fn folded_summary_matches_the_exact_one() {
        use crate::metrics::stats::{summarize, StatsOptions};

        // 400 requests, 1 per 25 ms, with gaps of 7..37 ms.
        let records: Vec<RequestRecord> = (0..400u64)
            .map(|i| {
                let gaps: Vec<u64> = (0..20).map(|k| 7 + (i * 7 + k * 13) % 31).collect();
                ok(i * 25, 50 + i % 17, &gaps, 21)
            })
            .collect();
        let opts = StatsOptions {
            percentiles: vec![50.0, 99.0],
            goodput: None,
        };
        let exact = summarize(&records, Duration::from_secs(12), &opts);
        let mut folded = records;
        let mut fold = ItlFold {
            active: true,
            ..ItlFold::default()
        };
        for r in folded.iter_mut().skip(100) {
            fold.fold(r);
        }
        let got = summarize_folded(&folded, Duration::from_secs(12), &opts, &fold);
        assert_eq!(got.itl.count, exact.itl.count);
        assert!((got.itl.mean_ms - exact.itl.mean_ms).abs() < 1e-3);
        assert!((got.itl.std_ms - exact.itl.std_ms).abs() < 1e-3);
        for (a, b) in got.itl.percentiles_ms.iter().zip(&exact.itl.percentiles_ms) {
            assert!(
                (a.1 - b.1).abs() <= b.1 * 1e-3,
                "p{}: {} vs {}",
                a.0,
                a.1,
                b.1
            );
        }
        // Every event is on a whole millisecond, so 10 ms slots place bucket
        // edges exactly when the origin is on a slot edge (here 0).
        assert_eq!(got.max_output_tokens_per_s, exact.max_output_tokens_per_s);
        assert_eq!(got.ttft, exact.ttft);
    }

    #[test]
    fn failed_requests_fold_to_nothing() {
        let mut fold = ItlFold::default();
        let mut r = crate::metrics::stats::testing::failed(0, crate::metrics::ErrorKind::Reset);
        r.itl = vec![Duration::from_millis(3)];
        fold.fold(&mut r);
        assert_eq!(fold.itl.count(), 0);
        assert!(r.itl.is_empty());
    }
}

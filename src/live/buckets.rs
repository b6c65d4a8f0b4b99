//! Fixed-bucket histograms in Prometheus's shape (cumulative `le` buckets,
//! a sum and a count), for kneecap's own `/metrics`. Pure and bounded: a
//! histogram is a few dozen counters whatever the run's length.

/// Bucket upper bounds (seconds) for request-level latencies (TTFT, E2EL).
pub const REQUEST_BOUNDS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0,
];
/// Bucket upper bounds (seconds) for per-token latencies (TPOT, ITL).
pub const TOKEN_BOUNDS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
];
/// Bucket upper bounds (seconds) for dispatch lateness (sent − due).
pub const LATENESS_BOUNDS: &[f64] = &[
    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0,
];

/// One histogram: a count per bucket (not cumulative; `+Inf` is the last).
#[derive(Debug, Clone, PartialEq)]
pub struct Buckets {
    bounds: &'static [f64],
    counts: Vec<u64>,
    sum: f64,
}

impl Buckets {
    pub fn new(bounds: &'static [f64]) -> Self {
        Buckets {
            bounds,
            counts: vec![0; bounds.len() + 1],
            sum: 0.0,
        }
    }

    /// Count one observation in seconds (a negative or NaN one is ignored).
    pub fn observe(&mut self, seconds: f64) {
        if seconds.is_nan() || seconds < 0.0 {
            return;
        }
        let slot = self.bounds.partition_point(|&b| b < seconds);
        self.counts[slot] += 1;
        self.sum += seconds;
    }

    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }

    pub fn sum(&self) -> f64 {
        self.sum
    }

    /// `(upper bound, cumulative count)` per bucket, `+Inf` last.
    pub fn cumulative(&self) -> Vec<(f64, u64)> {
        let bounds = self.bounds.iter().copied().chain([f64::INFINITY]);
        let mut running = 0;
        bounds
            .zip(&self.counts)
            .map(|(b, c)| {
                running += c;
                (b, running)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_observation_on_a_bound_falls_in_that_bucket_and_counts_are_cumulative() {
        let mut h = Buckets::new(&[0.1, 1.0]);
        for s in [0.05, 0.1, 0.5, 3.0, -1.0, f64::NAN] {
            h.observe(s);
        }
        assert_eq!(h.cumulative(), vec![(0.1, 2), (1.0, 3), (f64::INFINITY, 4)]);
        assert_eq!(h.count(), 4);
        assert!((h.sum() - 3.65).abs() < 1e-12);
    }
}

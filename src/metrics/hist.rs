//! Hist: mergeable latency histograms (HdrHistogram) with ONE fixed
//! configuration, built from [`RequestRecord`]s. Owns recording, merging,
//! percentiles over merged data, and the on-disk form (HdrHistogram's
//! standard V2+DEFLATE encoding, base64). PURE: no clock, no I/O.
//!
//! Every histogram in kneecap uses the same configuration — values in
//! **microseconds**, 1 µs to 1 h, 3 significant digits — so any two can be
//! added bucket by bucket and the sum is exactly the histogram of the union of
//! their samples. That is what makes `kneecap merge` exact: percentiles are
//! read from the merged counts, never averaged across shards.
//!
//! Percentiles follow the same NumPy-linear rule as
//! [`crate::metrics::stats::percentile`] (rank `p/100·(n−1)`, interpolated
//! between the two closest ranks), applied to each bucket's midpoint value, so
//! they differ from the exact percentile of the raw samples by at most half a
//! bucket (≤ 0.05 % of the value, values < 2.048 ms are exact to 1 µs).
//! Count, sum and sum of squares are kept exactly beside the buckets, so means
//! and standard deviations are exact (to the recorded microsecond).

use super::stats::request::{
    client_queue_seconds, e2el_from_due_seconds, e2el_including_client_queue_seconds, e2el_seconds,
    itl_seconds, lateness_seconds, successful, tpot_seconds, ttft_from_due_seconds, ttft_seconds,
    was_sent,
};
use super::stats::Distribution;
use super::RequestRecord;
use base64::Engine as _;
use hdrhistogram::serialization::{Deserializer, Serializer, V2DeflateSerializer};
use hdrhistogram::Histogram;
use serde_json::{json, Value};

/// Smallest discernible value, µs.
pub const LOWEST_US: u64 = 1;
/// Largest trackable value, µs (1 hour); larger values are clamped to it.
pub const HIGHEST_US: u64 = 3_600_000_000;
/// Significant decimal digits kept.
pub const SIGFIG: u8 = 3;
/// Name of the configuration written beside every serialized histogram.
pub const CONFIG: &str = "us,1..3600000000,3sig";

/// Why a histogram could not be built, merged or read.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum HistError {
    #[error("histogram is not valid base64: {0}")]
    Base64(String),
    #[error("histogram is not a valid HdrHistogram V2 encoding: {0}")]
    Decode(String),
    #[error("histogram configuration {0} differs from kneecap's ({CONFIG}); it was written by an incompatible version")]
    Config(String),
    #[error("histogram field `{0}` is missing or not a number")]
    Field(&'static str),
    #[error("histograms cannot be added: {0}")]
    Add(String),
}

/// One latency histogram in the fixed configuration, plus exact sums.
#[derive(Debug, Clone)]
pub struct LatencyHist {
    h: Histogram<u64>,
    /// Σ recorded values, µs (exact).
    sum_us: u64,
    /// Σ recorded values², µs² (exact).
    sum_sq_us2: u128,
}

/// Equal when every bucket count and both sums are equal (the internal
/// max/min trackers may differ by a bucket after `add`, which is no difference
/// in the data).
impl PartialEq for LatencyHist {
    fn eq(&self, other: &Self) -> bool {
        let buckets = |h: &Histogram<u64>| -> Vec<(u64, u64)> {
            h.iter_recorded()
                .map(|v| (v.value_iterated_to(), v.count_at_value()))
                .collect()
        };
        self.sum_us == other.sum_us
            && self.sum_sq_us2 == other.sum_sq_us2
            && buckets(&self.h) == buckets(&other.h)
    }
}

impl Default for LatencyHist {
    fn default() -> Self {
        LatencyHist::new()
    }
}

impl LatencyHist {
    /// An empty histogram in the fixed configuration.
    pub fn new() -> Self {
        let h = fixed_histogram();
        LatencyHist {
            h,
            sum_us: 0,
            sum_sq_us2: 0,
        }
    }

    /// Record one value given in seconds (rounded to the microsecond, clamped to 1 h).
    pub fn record_seconds(&mut self, seconds: f64) {
        let us = (seconds * 1e6).round();
        let us = if us.is_nan() || us < 0.0 {
            0
        } else {
            (us as u64).min(HIGHEST_US)
        };
        self.record_us(us);
    }

    /// Record one duration (truncated to the microsecond, clamped to 1 h).
    pub fn record_duration(&mut self, d: std::time::Duration) {
        self.record_us(u64::try_from(d.as_micros()).unwrap_or(u64::MAX));
    }

    /// Record one value in microseconds (clamped to 1 h).
    pub fn record_us(&mut self, us: u64) {
        let us = us.min(HIGHEST_US);
        self.h.saturating_record(us);
        self.sum_us = self.sum_us.saturating_add(us);
        self.sum_sq_us2 = self
            .sum_sq_us2
            .saturating_add(u128::from(us) * u128::from(us));
    }

    /// Add `other`'s counts and sums (exact: the configurations are equal).
    pub fn merge(&mut self, other: &LatencyHist) -> Result<(), HistError> {
        self.h
            .add(&other.h)
            .map_err(|e| HistError::Add(format!("{e:?}")))?;
        self.sum_us = self.sum_us.saturating_add(other.sum_us);
        self.sum_sq_us2 = self.sum_sq_us2.saturating_add(other.sum_sq_us2);
        Ok(())
    }

    /// Number of recorded values.
    pub fn count(&self) -> u64 {
        self.h.len()
    }

    /// Exact mean in ms (0 when empty).
    pub fn mean_ms(&self) -> f64 {
        match self.count() {
            0 => 0.0,
            n => self.sum_us as f64 / n as f64 / 1e3,
        }
    }

    /// Population standard deviation in ms (0 when empty).
    pub fn std_ms(&self) -> f64 {
        let n = self.count() as f64;
        if n == 0.0 {
            return 0.0;
        }
        let mean = self.sum_us as f64 / n;
        (self.sum_sq_us2 as f64 / n - mean * mean).max(0.0).sqrt() / 1e3
    }

    /// Largest value in ms (to the histogram's precision; 0 when empty).
    pub fn max_ms(&self) -> f64 {
        if self.count() == 0 {
            return 0.0;
        }
        self.h.highest_equivalent(self.h.max()) as f64 / 1e3
    }

    /// Percentile `p` (0–100) in ms by NumPy's linear rule on bucket midpoints
    /// (see the module docs); 0 when empty.
    pub fn percentile_ms(&self, p: f64) -> f64 {
        let n = usize::try_from(self.count()).unwrap_or(usize::MAX);
        crate::metrics::stats::distribution::percentile_by(n, p, |k| self.nth_us(k as u64)) / 1e3
    }

    /// The `k`-th smallest sample (0-based) in ms, as its bucket midpoint
    /// (exact below 2.048 ms); 0 when empty.
    pub fn nth_ms(&self, k: u64) -> f64 {
        if self.count() == 0 {
            return 0.0;
        }
        self.nth_us(k.min(self.count() - 1)) / 1e3
    }

    /// The value (bucket midpoint, µs) of the `k`-th smallest sample, 0-based.
    fn nth_us(&self, k: u64) -> f64 {
        let mut seen = 0u64;
        for v in self.h.iter_recorded() {
            seen += v.count_at_value();
            if seen > k {
                let value = v.value_iterated_to();
                return self.representative(value) as f64;
            }
        }
        self.representative(self.h.max()) as f64
    }

    /// Midpoint of the bucket holding `value` (exact for single-value buckets).
    fn representative(&self, value: u64) -> u64 {
        let lo = self.h.lowest_equivalent(value);
        let hi = self.h.highest_equivalent(value);
        if lo == hi {
            lo
        } else {
            self.h.median_equivalent(value)
        }
    }

    /// The same [`Distribution`] the stats module produces, read from the histogram.
    pub fn distribution(&self, percentiles: &[f64]) -> Distribution {
        Distribution {
            count: self.count() as usize,
            mean_ms: self.mean_ms(),
            median_ms: self.percentile_ms(50.0),
            std_ms: self.std_ms(),
            max_ms: self.max_ms(),
            percentiles_ms: percentiles
                .iter()
                .map(|&p| (p, self.percentile_ms(p)))
                .collect(),
        }
    }

    /// HdrHistogram V2+DEFLATE, base64 (standard alphabet, padded).
    pub fn to_base64(&self) -> Result<String, HistError> {
        let mut bytes = Vec::new();
        V2DeflateSerializer::new()
            .serialize(&self.h, &mut bytes)
            .map_err(|e| HistError::Decode(format!("{e:?}")))?;
        Ok(base64::engine::general_purpose::STANDARD.encode(bytes))
    }

    /// The JSON form written in shard results: config, exact sums, encoded buckets.
    pub fn to_json(&self) -> Result<Value, HistError> {
        Ok(json!({
            "config": CONFIG,
            "count": self.count(),
            "sum_us": self.sum_us,
            // u128 as a decimal string: JSON numbers lose integers above 2^53.
            "sum_sq_us2": self.sum_sq_us2.to_string(),
            "hdr_v2_deflate_base64": self.to_base64()?,
        }))
    }

    /// Read [`LatencyHist::to_json`]'s form, refusing any other configuration.
    pub fn from_json(v: &Value) -> Result<Self, HistError> {
        let config = v.get("config").and_then(Value::as_str).unwrap_or("none");
        if config != CONFIG {
            return Err(HistError::Config(config.to_string()));
        }
        let text = v
            .get("hdr_v2_deflate_base64")
            .and_then(Value::as_str)
            .ok_or(HistError::Field("hdr_v2_deflate_base64"))?;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(text)
            .map_err(|e| HistError::Base64(e.to_string()))?;
        let h: Histogram<u64> = Deserializer::new()
            .deserialize(&mut bytes.as_slice())
            .map_err(|e| HistError::Decode(format!("{e:?}")))?;
        if h.low() != LOWEST_US || h.high() != HIGHEST_US || h.sigfig() != SIGFIG {
            let got = format!("us,{}..{},{}sig", h.low(), h.high(), h.sigfig());
            return Err(HistError::Config(got));
        }
        let sum_us = v
            .get("sum_us")
            .and_then(Value::as_u64)
            .ok_or(HistError::Field("sum_us"))?;
        let sum_sq_us2 = v
            .get("sum_sq_us2")
            .and_then(Value::as_str)
            .and_then(|s| s.parse::<u128>().ok())
            .ok_or(HistError::Field("sum_sq_us2"))?;
        Ok(LatencyHist {
            h,
            sum_us,
            sum_sq_us2,
        })
    }
}

/// An empty HdrHistogram with the fixed bounds.
fn fixed_histogram() -> Histogram<u64> {
    match Histogram::new_with_bounds(LOWEST_US, HIGHEST_US, SIGFIG) {
        Ok(h) => h,
        // Unreachable: the bounds are constants hdrhistogram accepts (see the
        // `fixed_configuration_is_accepted` test); kept as a clear message.
        Err(e) => unreachable!("kneecap's fixed histogram bounds were rejected: {e:?}"),
    }
}

/// The latency histograms of one run or one sweep step (vLLM's definitions,
/// same sample sets as [`crate::metrics::stats::summarize`]).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RunHists {
    /// TTFT of successful requests.
    pub ttft: LatencyHist,
    /// TPOT of successful requests with more than one output token.
    pub tpot: LatencyHist,
    /// Every inter-token gap of successful requests.
    pub itl: LatencyHist,
    /// E2EL of successful requests.
    pub e2el: LatencyHist,
    /// Dispatch lateness (sent − due) of every request that was sent.
    pub lateness: LatencyHist,
    /// TTFT from the due time, successful requests.
    pub ttft_from_due: LatencyHist,
    /// E2EL from the due time, successful requests.
    pub e2el_from_due: LatencyHist,
    /// Time waiting for the concurrency cap, successful requests.
    pub client_queue_time: LatencyHist,
    /// E2EL plus that wait, successful requests.
    pub e2el_including_client_queue: LatencyHist,
}

/// Names of the histograms in [`RunHists`], in JSON order.
pub const HIST_NAMES: [&str; 9] = [
    "ttft",
    "tpot",
    "itl",
    "e2el",
    "dispatch_lateness",
    "ttft_from_due",
    "e2el_from_due",
    "client_queue_time",
    "e2el_including_client_queue",
];

impl RunHists {
    /// Histograms of `records` (see the field docs for which requests count).
    pub fn from_records(records: &[RequestRecord]) -> Self {
        let mut h = RunHists::default();
        records.iter().for_each(|r| h.record(r));
        h
    }

    /// Add one request.
    pub fn record(&mut self, r: &RequestRecord) {
        if was_sent(r) {
            self.lateness.record_seconds(lateness_seconds(r));
        }
        if successful(std::slice::from_ref(r)).next().is_none() {
            return;
        }
        if let Some(v) = ttft_seconds(r) {
            self.ttft.record_seconds(v);
        }
        if let Some(v) = tpot_seconds(r) {
            self.tpot.record_seconds(v);
        }
        if let Some(v) = e2el_seconds(r) {
            self.e2el.record_seconds(v);
        }
        itl_seconds(r).for_each(|v| self.itl.record_seconds(v));
        if let Some(v) = ttft_from_due_seconds(r) {
            self.ttft_from_due.record_seconds(v);
        }
        if let Some(v) = e2el_from_due_seconds(r) {
            self.e2el_from_due.record_seconds(v);
        }
        self.client_queue_time
            .record_seconds(client_queue_seconds(r));
        if let Some(v) = e2el_including_client_queue_seconds(r) {
            self.e2el_including_client_queue.record_seconds(v);
        }
    }

    fn parts(&self) -> [&LatencyHist; 9] {
        [
            &self.ttft,
            &self.tpot,
            &self.itl,
            &self.e2el,
            &self.lateness,
            &self.ttft_from_due,
            &self.e2el_from_due,
            &self.client_queue_time,
            &self.e2el_including_client_queue,
        ]
    }

    fn parts_mut(&mut self) -> [&mut LatencyHist; 9] {
        [
            &mut self.ttft,
            &mut self.tpot,
            &mut self.itl,
            &mut self.e2el,
            &mut self.lateness,
            &mut self.ttft_from_due,
            &mut self.e2el_from_due,
            &mut self.client_queue_time,
            &mut self.e2el_including_client_queue,
        ]
    }

    /// Add every histogram of `other`.
    pub fn merge(&mut self, other: &RunHists) -> Result<(), HistError> {
        for (a, b) in self.parts_mut().into_iter().zip(other.parts()) {
            a.merge(b)?;
        }
        Ok(())
    }

    /// `{"ttft": {...}, ..., "dispatch_lateness": {...}}`.
    pub fn to_json(&self) -> Result<Value, HistError> {
        let mut m = serde_json::Map::new();
        for (name, h) in HIST_NAMES.iter().zip(self.parts()) {
            m.insert((*name).into(), h.to_json()?);
        }
        Ok(Value::Object(m))
    }

    /// Read [`RunHists::to_json`]'s form; the error names the histogram.
    pub fn from_json(v: &Value) -> Result<Self, String> {
        let mut out = RunHists::default();
        for (name, h) in HIST_NAMES.iter().zip(out.parts_mut()) {
            let item = v
                .get(*name)
                .ok_or_else(|| format!("histogram `{name}` is missing"))?;
            *h = LatencyHist::from_json(item).map_err(|e| format!("histogram `{name}`: {e}"))?;
        }
        Ok(out)
    }
}

/// The shard files' form ([`RunHists::to_json`]); a histogram that cannot
/// be encoded is written as `{"error": "..."}` (reading it back fails).
impl serde::Serialize for RunHists {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.to_json()
            .unwrap_or_else(|e| json!({ "error": e.to_string() }))
            .serialize(s)
    }
}

/// Read [`RunHists::to_json`]'s form; the error names the histogram.
impl<'de> serde::Deserialize<'de> for RunHists {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = Value::deserialize(d)?;
        RunHists::from_json(&v).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
#[path = "hist_tests.rs"]
mod tests;

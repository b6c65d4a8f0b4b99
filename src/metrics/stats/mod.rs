//! Stats: the one place latency and throughput numbers are defined (vLLM's
//! definitions, NumPy-linear percentiles, population std). PURE: no clock, no I/O,
//! no formatting beyond vLLM's percentile key.
//!
//! - [`mod@distribution`]: mean / median / std / percentiles (the only implementation).
//! - [`request`]: per-request values (TTFT, TPOT, ITL, E2EL, queue, lateness) and goodput.
//! - [`peak`]: peak concurrency and peak output events per second.
//! - [`reasoning`]: kneecap's TTFO, answer TPOT and reasoning-token totals.
//! - [`stamps`]: which clock stamped each request, and the client scheduling delay.
//!
//! [`summarize`] ties them together into a [`Summary`]. Latency statistics use
//! only successful requests (vLLM's S); kneecap's `lateness` uses every request
//! that was sent, failed ones included, because dispatch delay is a property of
//! the load generator, not of the server's answer.
use super::RequestRecord;
use std::collections::BTreeMap;
use std::time::Duration;

pub mod distribution;
pub mod peak;
pub mod reasoning;
pub mod request;
pub mod stamps;
#[cfg(test)]
pub(crate) mod testing;

pub use distribution::{
    distribution, mean, median, median_error, percentile, percentile_key, robust_sigma,
    shorth_center, std_population,
};
pub use peak::{max_concurrent_requests, max_output_tokens_per_s};
pub use request::{
    goodput_tpot_seconds, meets_slo, request_goodput, successful, tpot_seconds, Samples,
};

/// mean / median / population std / requested percentiles, all in milliseconds.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Distribution {
    pub count: usize,
    pub mean_ms: f64,
    pub median_ms: f64,
    pub std_ms: f64,
    pub max_ms: f64,
    /// (percentile, value_ms) in the order requested.
    pub percentiles_ms: Vec<(f64, f64)>,
}

impl Distribution {
    /// The value of percentile `p` (ms), if it was among those computed.
    pub fn percentile_ms(&self, p: f64) -> Option<f64> {
        self.percentiles_ms
            .iter()
            .find(|(q, _)| (*q - p).abs() < 1e-9)
            .map(|&(_, v)| v)
    }
}

/// vLLM's `--goodput` SLOs, in milliseconds (inclusive bounds).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct GoodputSlo {
    pub ttft_ms: Option<f64>,
    pub tpot_ms: Option<f64>,
    pub e2el_ms: Option<f64>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct StatsOptions {
    /// `--metric-percentiles`, e.g. [99.0].
    pub percentiles: Vec<f64>,
    pub goodput: Option<GoodputSlo>,
}

/// Everything computed over one run's records.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Summary {
    pub duration_s: f64,
    pub completed: usize,
    pub failed: usize,
    pub total_input_tokens: u64,
    pub total_output_tokens: u64,
    /// Σ inputs of the successful requests (vLLM's `total_input_sequences`;
    /// reported for pooling backends).
    pub total_input_sequences: u64,
    pub request_throughput: f64,
    /// `total_input_sequences` per second (vLLM's `input_sequence_throughput`).
    pub input_sequence_throughput: f64,
    pub request_goodput: Option<f64>,
    pub output_throughput: f64,
    pub total_token_throughput: f64,
    pub max_output_tokens_per_s: f64,
    pub max_concurrent_requests: usize,
    pub ttft: Distribution,
    pub tpot: Distribution,
    pub itl: Distribution,
    pub e2el: Distribution,
    pub client_queue_time: Distribution,
    pub e2el_including_client_queue: Distribution,
    /// kneecap: sent minus due, over every request that was sent.
    pub lateness: Distribution,
    /// kneecap: TTFT measured from the due time (no coordinated omission).
    pub ttft_from_due: Distribution,
    /// kneecap: E2EL measured from the due time.
    pub e2el_from_due: Distribution,
    /// kneecap: failures by `ErrorKind::as_str()`.
    pub errors_by_kind: BTreeMap<String, u64>,
    /// kneecap: time to the first answer token (reasoning excluded).
    pub ttfo: Distribution,
    /// kneecap: TPOT of the answer alone (reasoning tokens excluded).
    pub answer_tpot: Distribution,
    /// kneecap: reasoning-token totals.
    pub reasoning: reasoning::ReasoningTotals,
    /// kneecap: receive-stamp sources and the client scheduling delay.
    pub stamps: stamps::StampStats,
}

/// Compute the summary of a run of length `duration` (vLLM's D: throughputs
/// divide by it; a zero duration gives zero throughputs).
pub fn summarize(records: &[RequestRecord], duration: Duration, opts: &StatsOptions) -> Summary {
    let tokens = TokenTotals::of(records);
    let completed = successful(records).count();
    let samples = Samples::from_records(records);
    let dist = |values: &[f64]| distribution(values, &opts.percentiles);
    let per_second = |amount: f64| request::per_second(amount, duration);
    Summary {
        duration_s: duration.as_secs_f64(),
        completed,
        failed: records.len() - completed,
        total_input_tokens: tokens.input,
        total_output_tokens: tokens.output,
        total_input_sequences: tokens.sequences,
        request_throughput: per_second(completed as f64),
        input_sequence_throughput: per_second(tokens.sequences as f64),
        request_goodput: opts
            .goodput
            .as_ref()
            .and_then(|slo| request_goodput(records, slo, duration)),
        output_throughput: per_second(tokens.output as f64),
        total_token_throughput: per_second((tokens.input + tokens.output) as f64),
        max_output_tokens_per_s: max_output_tokens_per_s(records),
        max_concurrent_requests: max_concurrent_requests(records),
        ttft: dist(&samples.ttft),
        tpot: dist(&samples.tpot),
        itl: dist(&samples.itl),
        e2el: dist(&samples.e2el),
        client_queue_time: dist(&samples.client_queue_time),
        e2el_including_client_queue: dist(&samples.e2el_including_client_queue),
        lateness: dist(&samples.lateness),
        ttft_from_due: dist(&samples.ttft_from_due),
        e2el_from_due: dist(&samples.e2el_from_due),
        errors_by_kind: errors_by_kind(records),
        ttfo: dist(&samples.ttfo),
        answer_tpot: dist(&samples.answer_tpot),
        reasoning: reasoning::ReasoningTotals::of(records),
        stamps: stamps::StampStats::of(records, &stamps::PERCENTILES),
    }
}

/// Token totals over the successful requests (failed ones contribute 0, as in vLLM).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TokenTotals {
    /// Σ `prompt_len` (server-reported when usage was present).
    pub input: u64,
    /// Σ `output_tokens` (the engine already applied vLLM's usage/tokenizer/1 fallback).
    pub output: u64,
    /// Σ `input_sequences`.
    pub sequences: u64,
}

impl TokenTotals {
    /// Sum the successful records' token counts.
    pub fn of(records: &[RequestRecord]) -> Self {
        successful(records).fold(TokenTotals::default(), |acc, r| TokenTotals {
            input: acc.input + u64::from(r.prompt_len),
            output: acc.output + u64::from(r.output_tokens),
            sequences: acc.sequences + u64::from(r.input_sequences),
        })
    }
}

/// Failed requests counted by `ErrorKind::as_str()`.
pub fn errors_by_kind(records: &[RequestRecord]) -> BTreeMap<String, u64> {
    let mut counts = BTreeMap::new();
    for error in records.iter().filter_map(|r| r.error.as_ref()) {
        *counts.entry(error.kind.as_str().to_string()).or_insert(0) += 1;
    }
    counts
}

#[cfg(test)]
mod tests {
    use super::testing::{failed, ms, ok};
    use super::*;
    use crate::metrics::ErrorKind;

    fn opts(percentiles: &[f64]) -> StatsOptions {
        StatsOptions {
            percentiles: percentiles.to_vec(),
            goodput: None,
        }
    }

    fn assert_close(got: f64, want: f64) {
        assert!((got - want).abs() < 1e-9, "got {got}, want {want}");
    }

    #[test]
    fn vllm_docs_worked_example_gives_mean_itl_40_ms_and_tpot_20_ms() {
        let s = summarize(
            &[ok(0, 100, &[40, 40], 5)],
            Duration::from_secs(1),
            &opts(&[99.0]),
        );
        assert_close(s.itl.mean_ms, 40.0);
        assert_close(s.tpot.mean_ms, 20.0);
        assert_close(s.ttft.mean_ms, 100.0);
        assert_close(s.e2el.mean_ms, 180.0);
        assert_eq!(s.itl.count, 2);
    }

    #[test]
    fn counts_tokens_and_throughputs_over_successful_requests_only() {
        let records = vec![
            ok(0, 100, &[40, 40], 5),
            ok(50, 200, &[], 1),
            failed(10, ErrorKind::RateLimited),
            failed(20, ErrorKind::RateLimited),
            failed(30, ErrorKind::Timeout),
        ];
        let s = summarize(&records, Duration::from_secs(4), &opts(&[99.0]));
        assert_eq!((s.completed, s.failed), (2, 3));
        assert_eq!((s.total_input_tokens, s.total_output_tokens), (20, 6));
        assert_eq!(s.duration_s, 4.0);
        assert_eq!(s.request_throughput, 0.5);
        assert_eq!(s.output_throughput, 1.5);
        assert_eq!(s.total_token_throughput, 6.5);
        assert_eq!(s.request_goodput, None);
        let want: BTreeMap<String, u64> = [("http_429".to_string(), 2), ("timeout".to_string(), 1)]
            .into_iter()
            .collect();
        assert_eq!(s.errors_by_kind, want);
    }

    #[test]
    fn failed_requests_are_excluded_from_every_latency_stat_and_from_token_totals() {
        let good = vec![ok(0, 100, &[40, 40], 5), ok(500, 250, &[10, 20, 30], 9)];
        let mut broken = failed(200, ErrorKind::Reset);
        broken.first_token = Some(ms(205)); // a fast partial answer must not leak in
        broken.last_token = Some(ms(210));
        broken.itl = vec![ms(5)];
        let mut with_failures = good.clone();
        with_failures.push(broken);
        let d = Duration::from_secs(2);
        let a = summarize(&good, d, &opts(&[50.0, 99.0]));
        let b = summarize(&with_failures, d, &opts(&[50.0, 99.0]));
        assert_eq!(b.failed, 1);
        assert_eq!((a.total_input_tokens, a.total_output_tokens), (20, 14));
        assert_eq!((b.total_input_tokens, b.total_output_tokens), (20, 14));
        for (x, y) in [
            (&a.ttft, &b.ttft),
            (&a.tpot, &b.tpot),
            (&a.itl, &b.itl),
            (&a.e2el, &b.e2el),
            (&a.client_queue_time, &b.client_queue_time),
            (
                &a.e2el_including_client_queue,
                &b.e2el_including_client_queue,
            ),
            (&a.ttft_from_due, &b.ttft_from_due),
            (&a.e2el_from_due, &b.e2el_from_due),
        ] {
            assert_eq!(x, y);
        }
        assert_eq!(a.max_concurrent_requests, b.max_concurrent_requests);
        assert_eq!(a.max_output_tokens_per_s, b.max_output_tokens_per_s);
        // Lateness is about dispatch: the failed request was sent, so it counts.
        assert_eq!((a.lateness.count, b.lateness.count), (2, 3));
    }

    #[test]
    fn single_token_requests_are_omitted_from_tpot_but_good_for_goodput() {
        let records = vec![ok(0, 100, &[40, 40], 5), ok(0, 150, &[], 1)];
        let slo = GoodputSlo {
            ttft_ms: Some(200.0),
            tpot_ms: Some(20.0),
            e2el_ms: None,
        };
        let o = StatsOptions {
            percentiles: vec![99.0],
            goodput: Some(slo),
        };
        let s = summarize(&records, Duration::from_secs(2), &o);
        assert_eq!(s.tpot.count, 1);
        assert_close(s.tpot.mean_ms, 20.0);
        assert_eq!(s.ttft.count, 2);
        assert_eq!(s.request_goodput, Some(1.0));
    }

    #[test]
    fn due_based_latencies_and_queue_time_include_waiting_before_the_send() {
        let mut r = ok(0, 100, &[40, 40], 5);
        r.due = ms(0);
        r.released = ms(10);
        r.sent = ms(30);
        r.first_token = Some(ms(130));
        r.last_token = Some(ms(210));
        let s = summarize(&[r], Duration::from_secs(1), &opts(&[]));
        assert_close(s.ttft.mean_ms, 100.0);
        assert_close(s.ttft_from_due.mean_ms, 130.0);
        assert_close(s.e2el_from_due.mean_ms, 210.0);
        assert_close(s.lateness.mean_ms, 30.0);
        assert_close(s.client_queue_time.mean_ms, 20.0);
        assert_close(s.e2el_including_client_queue.mean_ms, 200.0);
    }

    #[test]
    fn an_empty_run_gives_zeros_everywhere() {
        let o = StatsOptions {
            percentiles: vec![99.0],
            goodput: Some(GoodputSlo::default()),
        };
        let s = summarize(&[], Duration::ZERO, &o);
        let zero = Distribution {
            percentiles_ms: vec![(99.0, 0.0)],
            ..Distribution::default()
        };
        // The scheduling delay is always reported at p50 and p99.
        let zero_at_50_99 = Distribution {
            percentiles_ms: vec![(50.0, 0.0), (99.0, 0.0)],
            ..Distribution::default()
        };
        let want = Summary {
            ttft: zero.clone(),
            tpot: zero.clone(),
            itl: zero.clone(),
            e2el: zero.clone(),
            client_queue_time: zero.clone(),
            e2el_including_client_queue: zero.clone(),
            lateness: zero.clone(),
            ttft_from_due: zero.clone(),
            e2el_from_due: zero.clone(),
            ttfo: zero.clone(),
            answer_tpot: zero,
            stamps: stamps::StampStats {
                scheduling_delay: zero_at_50_99.clone(),
                ttft_task_stamped: zero_at_50_99,
                ..Default::default()
            },
            ..Summary::default()
        };
        assert_eq!(s, want);
    }

    #[test]
    fn a_run_of_only_failures_has_zero_throughput_and_no_nan() {
        let records = vec![failed(0, ErrorKind::Connect), failed(5, ErrorKind::Connect)];
        let slo = GoodputSlo {
            ttft_ms: Some(100.0),
            ..GoodputSlo::default()
        };
        let o = StatsOptions {
            percentiles: vec![50.0, 99.9],
            goodput: Some(slo),
        };
        let s = summarize(&records, Duration::from_secs(3), &o);
        assert_eq!((s.completed, s.failed), (0, 2));
        assert_eq!(s.request_throughput, 0.0);
        assert_eq!(s.request_goodput, Some(0.0));
        assert_eq!(s.ttft.percentiles_ms, vec![(50.0, 0.0), (99.9, 0.0)]);
        assert_eq!(s.errors_by_kind.get("connect"), Some(&2));
    }
}

//! Predicted latency at given loads (`predict --at-rates`): what the engine
//! model says TTFT, TPOT and E2E latency come to at each rate, the central
//! parameters' virtual-time runs over every seed pooled. The numbers a
//! measured sweep step gives, so the two can stand side by side. Pure.

use super::knee::{keeps_up, load_for_seed, par_map, records, run_at, TruthConfig};
use crate::metrics::stats::distribution::distribution;
use crate::metrics::stats::request::{e2el_seconds, tpot_seconds, ttft_seconds};
use crate::metrics::stats::Distribution;
use crate::sim::virtual_time::unit_gaps;
use serde::{Deserialize, Serialize};

/// The percentiles each latency gives.
const PERCENTILES: [f64; 3] = [50.0, 90.0, 99.0];

/// One latency's summary, milliseconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Latency {
    pub mean: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
}

impl Latency {
    fn of(d: &Distribution) -> Self {
        let p = |q: f64| d.percentile_ms(q).unwrap_or(0.0);
        Self {
            mean: d.mean_ms,
            p50: p(50.0),
            p90: p(90.0),
            p99: p(99.0),
        }
    }
}

/// The model's latency at one offered load.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AtLoad {
    /// Offered load, requests per second.
    pub rate_req_s: f64,
    /// Whether every seed's run kept up ([`keeps_up`]): when not, the queue
    /// grows and these latencies grow with the run's length.
    pub steady: bool,
    /// Measured requests pooled over the seeds.
    pub requests: usize,
    pub ttft_ms: Latency,
    pub tpot_ms: Latency,
    pub e2el_ms: Latency,
}

/// The latency at each of `rates` (req/s), in that order; an error names
/// the rate or the input the simulator refused.
pub fn at_loads(cfg: &TruthConfig, rates: &[f64]) -> Result<Vec<AtLoad>, String> {
    if let Some(r) = rates.iter().find(|r| !(r.is_finite() && **r > 0.0)) {
        return Err(format!("--at-rates: {r} is not a positive rate"));
    }
    let jobs: Vec<(f64, u64)> = rates
        .iter()
        .flat_map(|&r| cfg.seeds.iter().map(move |&s| (r, s)))
        .collect();
    let runs = par_map(&jobs, |&(rate, seed)| {
        let load = load_for_seed(cfg, seed)?;
        let gaps = unit_gaps(seed, cfg.burstiness, load.gaps_needed())?;
        run_at(cfg, &cfg.params, (&load, &gaps, seed), rate)
    });
    let mut runs = runs.into_iter();
    rates
        .iter()
        .map(|&rate| {
            let mine: Vec<_> = runs
                .by_ref()
                .take(cfg.seeds.len())
                .collect::<Result<_, _>>()?;
            Ok(summarize(rate, &mine))
        })
        .collect()
}

fn summarize(rate: f64, runs: &[crate::sim::virtual_time::VirtualRun]) -> AtLoad {
    let recs: Vec<_> = runs.iter().flat_map(records).collect();
    let of = |f: fn(&crate::metrics::RequestRecord) -> Option<f64>| {
        let v: Vec<f64> = recs.iter().filter_map(f).collect();
        Latency::of(&distribution(&v, &PERCENTILES))
    };
    AtLoad {
        rate_req_s: rate,
        steady: runs.iter().all(keeps_up),
        requests: recs.len(),
        ttft_ms: of(ttft_seconds),
        tpot_ms: of(tpot_seconds),
        e2el_ms: of(e2el_seconds),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::virtual_time::VirtualLoad;
    use crate::sim::ModelParams;
    use std::time::Duration;

    fn cfg(seeds: Vec<u64>) -> TruthConfig {
        let params = ModelParams {
            max_num_seqs: 4,
            max_num_batched_tokens: 2048,
            kv_cache_tokens: 100_000,
            max_model_len: 4096,
            step_base: Duration::from_millis(10),
            per_prefill_token: Duration::from_micros(100),
            per_decode_seq: Duration::from_millis(1),
            prefill_interference: 1.0,
            block_tokens: crate::sim::blocks::BLOCK_TOKENS,
            per_context_token: std::time::Duration::ZERO,
            per_request: std::time::Duration::ZERO,
            per_prefill_pair: std::time::Duration::ZERO,
            per_prefill_step: std::time::Duration::ZERO,
            stalls: crate::sim::params::HostStalls::NONE,
        };
        TruthConfig {
            params,
            load: VirtualLoad::fixed(100, 10, 50, 400),
            slos: Vec::new(),
            range_ratio: (0.0, 0.0),
            burstiness: 1.0,
            seeds,
            precision: 0.01,
            tail: crate::sim::params::HostStalls::NONE,
        }
    }

    #[test]
    fn a_lone_request_takes_its_prefill_then_one_step_a_token() {
        // At 0.01 req/s every request is alone: TTFT is one step with its
        // 100 prompt tokens (10 + 10 ms), then 9 decode steps of 11 ms.
        let at = at_loads(&cfg(vec![0]), &[0.01]).unwrap();
        let a = &at[0];
        assert!(a.steady);
        assert_eq!(a.requests, 400);
        assert!((a.ttft_ms.p50 - 20.0).abs() < 1e-6, "{a:?}");
        assert!((a.tpot_ms.mean - 11.0).abs() < 1e-6, "{a:?}");
        assert!((a.e2el_ms.mean - (20.0 + 9.0 * 11.0)).abs() < 1e-6, "{a:?}");
    }

    #[test]
    fn latency_rises_with_load_and_overload_is_not_steady() {
        let c = cfg(vec![0, 1]);
        let at = at_loads(&c, &[5.0, 20.0, 200.0]).unwrap();
        assert_eq!(
            at.iter().map(|a| a.rate_req_s).collect::<Vec<_>>(),
            [5.0, 20.0, 200.0]
        );
        assert_eq!(at[0].requests, 800);
        assert!(at[0].ttft_ms.p99 < at[1].ttft_ms.p99, "{at:?}");
        assert!(at[0].e2el_ms.mean < at[1].e2el_ms.mean, "{at:?}");
        // 4 slots of ~30 ms a request serve about 100 req/s at most.
        assert!(at[0].steady && !at[2].steady, "{at:?}");
        assert!(at[2].ttft_ms.p99 > 10.0 * at[0].ttft_ms.p99, "{at:?}");
    }

    #[test]
    fn a_rate_that_is_not_positive_is_named() {
        let e = at_loads(&cfg(vec![0]), &[1.0, 0.0]).unwrap_err();
        assert!(e.contains("--at-rates") && e.contains('0'), "{e}");
    }
}

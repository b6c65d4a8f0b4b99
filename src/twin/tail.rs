//! The host's stalls over each request's wait for its first token, drawn
//! where the engine model holds them at their mean. Pure and seeded.
//!
//! The twin runs the engine with the profile's stalls at their mean: every
//! decode step a little longer ([`super::profile::ServerProfile::params`]).
//! That gives the queue and every mean as the real engine has them, and
//! drawn as events in the engine instead they made queues vLLM's CPU engine
//! did not have (docs/benchmarks/2026-12-07.md). But a mean leaves out the
//! tail: on the real engine a request's time to first token meets a stall
//! of about 100 ms (a Gamma of shape 2) or none, and at a few stalls a
//! second one request in five or ten meets one, which is what a TTFT p99
//! below the knee is made of (the default engine's p99 came out 1.4-2.4
//! times the twin's on decode-heavy shapes).
//!
//! So each request's TTFT is redrawn after the run: its time without the
//! stalls' share (`ttft / (1 + rate × mean)`) plus the stalls that fall in
//! that much engine time, drawn as the simulator draws them
//! ([`crate::sim::stalls`]); its later tokens move with its first. The
//! redrawn TTFT has the same mean as the run's; its spread is the stalls'.
//! The queue is the mean model's: a stall drawn here delays no one else.

use crate::sim::params::HostStalls;
use crate::sim::stalls::SHAPE;
use crate::sim::virtual_time::VirtualRun;
use rand::rngs::StdRng;
use rand::SeedableRng;
use rand_distr::{Distribution, Exp, Gamma};
use std::time::Duration;

/// Salt of the redraw's random stream (apart from the arrivals' and the
/// lengths').
const SALT: u64 = 0x7474_6674_7461_696c; // "ttfttail"

/// Redraws every measured request's TTFT with `stalls` drawn over it
/// (seeded by `seed`: the same draws at every rate of one seed's search);
/// nothing without stalls.
pub fn redraw(run: &mut VirtualRun, stalls: HostStalls, seed: u64) {
    if !stalls.active() {
        return;
    }
    let (Ok(gap), Ok(size)) = (
        Exp::new(stalls.rate_per_s),
        Gamma::new(SHAPE, stalls.mean.as_secs_f64() / SHAPE),
    ) else {
        return;
    };
    let stretch = 1.0 + stalls.share();
    let mut rng = StdRng::seed_from_u64(seed ^ SALT);
    for r in &mut run.requests {
        let plain = r.ttft().as_secs_f64() / stretch;
        let mut extra = 0.0;
        let mut at: f64 = gap.sample(&mut rng);
        while at < plain {
            extra += size.sample(&mut rng);
            at += gap.sample(&mut rng);
        }
        let ttft = Duration::try_from_secs_f64(plain + extra).unwrap_or(Duration::MAX);
        let first = r.arrival.saturating_add(ttft);
        let shift = |t: Duration| {
            if first >= r.first_token {
                t.saturating_add(first - r.first_token)
            } else {
                t.saturating_sub(r.first_token - first)
            }
        };
        r.finish = shift(r.finish);
        for t in &mut r.token_times {
            *t = shift(*t);
        }
        r.first_token = first;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::virtual_time::VirtualRequest;

    fn run(n: usize, ttft_ms: u64) -> VirtualRun {
        let requests = (0..n)
            .map(|i| {
                let arrival = Duration::from_millis(i as u64 * 1000);
                let first_token = arrival + Duration::from_millis(ttft_ms);
                VirtualRequest {
                    arrival,
                    first_token,
                    finish: first_token + Duration::from_millis(300),
                    output_tokens: 4,
                    token_times: (0..4)
                        .map(|k| first_token + Duration::from_millis(100 * k))
                        .collect(),
                }
            })
            .collect();
        VirtualRun {
            requests,
            arrived: n,
            steps: 0,
            preemptions: 0,
            usage: Default::default(),
        }
    }

    fn stalls(rate: f64, mean_ms: u64) -> HostStalls {
        HostStalls {
            rate_per_s: rate,
            mean: Duration::from_millis(mean_ms),
        }
    }

    #[test]
    fn the_mean_stays_and_the_tail_grows() {
        // 2 stalls a second of 100 ms: a 240-ms TTFT is 200 ms of plain
        // time, which meets a stall 1 - e^-0.4 = 33% of the time.
        let mut r = run(20_000, 240);
        redraw(&mut r, stalls(2.0, 100), 7);
        let mut ttft: Vec<f64> = r.requests.iter().map(|q| q.ttft().as_secs_f64()).collect();
        let mean = ttft.iter().sum::<f64>() / ttft.len() as f64;
        assert!((mean - 0.240).abs() < 0.003, "mean {mean}");
        ttft.sort_by(f64::total_cmp);
        let at = |q: f64| ttft[(q * (ttft.len() - 1) as f64) as usize];
        let met = ttft.iter().filter(|&&t| t > 0.2 + 1e-9).count() as f64 / ttft.len() as f64;
        assert!((met - 0.33).abs() < 0.015, "share that met a stall {met}");
        // Without a stall a request's TTFT is its plain 200 ms.
        assert!((at(0.5) - 0.2).abs() < 1e-9, "p50 {}", at(0.5));
        // The p99 of a Gamma(2) stall of 100 ms (about 330 ms) or two.
        assert!(at(0.99) > 0.45 && at(0.99) < 0.75, "p99 {}", at(0.99));
    }

    #[test]
    fn later_tokens_move_with_the_first_and_nothing_without_stalls() {
        let mut r = run(500, 240);
        redraw(&mut r, stalls(2.0, 100), 7);
        for q in &r.requests {
            assert_eq!(q.token_times[0], q.first_token);
            assert_eq!(q.finish - q.first_token, Duration::from_millis(300));
            assert_eq!(q.token_times[3], q.finish);
        }
        let before = run(50, 240);
        let mut same = before.clone();
        redraw(&mut same, HostStalls::NONE, 7);
        assert_eq!(same.requests, before.requests);
        // The same seed draws the same stalls.
        let mut again = run(500, 240);
        redraw(&mut again, stalls(2.0, 100), 7);
        assert_eq!(again.requests, r.requests);
    }
}

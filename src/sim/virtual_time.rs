//! The engine model in virtual time: a discrete-event simulation of an open
//! load, for the simulator's *true* knee. Pure: seeded randomness, no clock.
//!
//! It drives [`Engine`] exactly as the real-time driver ([`super::driver`])
//! does, with the wall clock replaced by a virtual one: an idle engine starts a
//! step when a request arrives; a busy engine starts the next step when the
//! previous one ends, after admitting every request that arrived by then (so
//! an arrival during a step joins at the next step). A step's tokens leave at
//! its end. Every request asks for a fixed prompt and output length (kneecap's
//! random dataset sends `ignore_eos`, so the server produces exactly
//! `max_tokens`).
//!
//! Arrivals come from a *unit renewal process* ([`unit_gaps`]: i.i.d. gaps of
//! mean 1, Gamma with shape = burstiness, exponential for burstiness 1, exactly
//! 1 for infinite burstiness) divided by the rate λ. Reusing one unit sequence
//! for every λ (common random numbers) makes a latency statistic move
//! smoothly and, in practice, monotonically with λ, so a bisection on λ
//! converges on one knee instead of chasing sampling noise.
//!
//! The first `warmup` requests are run but not measured. Arrivals continue
//! after the measured ones until every measured request has finished (at most
//! another `requests` arrivals), so the measured requests see steady load, not
//! a draining server.

use std::time::Duration;

use rand::rngs::StdRng;
use rand::SeedableRng;
use rand_distr::{Distribution, Exp1, Gamma};

use super::blocks::splitmix64;
use super::blocks::BLOCK_TOKENS;
use super::model::{BatchStep, DecodeRun, Engine, EventKind, ModelParams};
use super::usage::{BatchState, Usage, UsageMeter};

/// The shape of a virtual-time load (the rate and the gaps are passed apart).
#[derive(Debug, Clone, PartialEq)]
pub struct VirtualLoad {
    /// Prompt tokens of every request.
    pub input_len: u32,
    /// Output tokens of every request (`ignore_eos`).
    pub output_len: u32,
    /// Requests run first and left out of the results.
    pub warmup: usize,
    /// Requests measured after the warm-up.
    pub requests: usize,
    /// Keep every token's time (needed for ITL; costs memory).
    pub token_times: bool,
    /// Per-request `(prompt, output)` lengths, request `i` taking entry
    /// `i mod len` (the prompt's own tokens, after the shared prefix); empty:
    /// every request asks for `input_len` and `output_len`.
    pub lengths: Vec<(u32, u32)>,
    /// Tokens of one prefix every prompt starts with, before its own tokens
    /// (`kneecap run --random-prefix-len`); 0 for none. With prefix caching
    /// its full KV blocks are computed once and then served from the cache.
    pub shared_prefix: u32,
    /// The engine's prefix cache (`SimConfig::prefix_caching`, on by default).
    pub prefix_caching: bool,
}

impl VirtualLoad {
    /// Every request asks for `input_len` prompt and `output_len` output
    /// tokens; no shared prefix, prefix caching on, no token times.
    pub fn fixed(input_len: u32, output_len: u32, warmup: usize, requests: usize) -> Self {
        Self {
            input_len,
            output_len,
            warmup,
            requests,
            token_times: false,
            lengths: Vec::new(),
            shared_prefix: 0,
            prefix_caching: true,
        }
    }

    /// How many unit gaps [`simulate`] may use: warm-up, measured requests
    /// and as many again to keep the load on while the measured ones finish.
    pub fn gaps_needed(&self) -> usize {
        self.warmup + 2 * self.requests
    }

    /// Request `i`'s `(prompt, output)` tokens, the shared prefix included.
    pub fn shape(&self, i: usize) -> (u32, u32) {
        let (own, output) = match self.lengths.len() {
            0 => (self.input_len, self.output_len),
            n => self.lengths[i % n],
        };
        (self.shared_prefix.saturating_add(own), output)
    }

    /// The longest prompt + output any request asks for.
    fn longest(&self) -> u64 {
        let longest = |(i, o): (u32, u32)| u64::from(i) + u64::from(o);
        let own = self.lengths.iter().copied().map(longest).max();
        own.unwrap_or(longest((self.input_len, self.output_len))) + u64::from(self.shared_prefix)
    }
}

/// One measured request's virtual timings (offsets from the start).
#[derive(Debug, Clone, PartialEq)]
pub struct VirtualRequest {
    /// When it arrived at the server.
    pub arrival: Duration,
    /// When its first token left.
    pub first_token: Duration,
    /// When its last token left.
    pub finish: Duration,
    /// Tokens produced.
    pub output_tokens: u32,
    /// Every token's time, first included (empty unless
    /// [`VirtualLoad::token_times`]).
    pub token_times: Vec<Duration>,
}

impl VirtualRequest {
    /// Time to first token.
    pub fn ttft(&self) -> Duration {
        self.first_token - self.arrival
    }

    /// End-to-end latency.
    pub fn e2el(&self) -> Duration {
        self.finish - self.arrival
    }
}

/// The result of one virtual-time run.
#[derive(Debug, Clone, PartialEq)]
pub struct VirtualRun {
    /// The measured requests, in arrival order.
    pub requests: Vec<VirtualRequest>,
    /// Requests that arrived in all (warm-up and cool-down included).
    pub arrived: usize,
    /// Batch steps the engine ran.
    pub steps: u64,
    /// Preemptions.
    pub preemptions: u64,
    /// The engine's resources over the measured window (from the first
    /// measured arrival to the last measured finish).
    pub usage: Usage,
}

impl VirtualRun {
    /// Measured requests finished per second of virtual time, between the
    /// first and the last measured finish (at overload this is the service
    /// rate; below it, the arrival rate).
    pub fn throughput(&self) -> f64 {
        let finishes = || self.requests.iter().map(|r| r.finish);
        let (Some(first), Some(last)) = (finishes().min(), finishes().max()) else {
            return 0.0;
        };
        let span = (last - first).as_secs_f64();
        if span > 0.0 {
            (self.requests.len() - 1) as f64 / span
        } else {
            0.0
        }
    }
}

/// The host stalls' seed of a run: from its first arrival gaps, so it
/// follows the arrivals' seed and not the rate (a knee search compares
/// rates under the same draws).
fn stall_seed(gaps: &[f64]) -> u64 {
    gaps.iter()
        .take(4)
        .fold(0x9e37_79b9_7f4a_7c15, |h: u64, g| {
            h.rotate_left(17) ^ g.to_bits()
        })
}

/// `n` i.i.d. unit gaps (mean 1) of a renewal process with `burstiness`
/// (Gamma shape; 1 is Poisson, infinity is evenly spaced), seeded.
pub fn unit_gaps(seed: u64, burstiness: f64, n: usize) -> Result<Vec<f64>, String> {
    if burstiness.is_infinite() && burstiness > 0.0 {
        return Ok(vec![1.0; n]);
    }
    if !(burstiness.is_finite() && burstiness > 0.0) {
        return Err(format!(
            "burstiness must be a positive number or inf, got {burstiness}"
        ));
    }
    let mut rng = StdRng::seed_from_u64(seed);
    if burstiness == 1.0 {
        return Ok((0..n).map(|_| Exp1.sample(&mut rng)).collect());
    }
    let gamma = Gamma::new(burstiness, 1.0 / burstiness).map_err(|e| e.to_string())?;
    Ok((0..n).map(|_| gamma.sample(&mut rng)).collect())
}

/// Per-request progress inside a run.
#[derive(Debug, Clone, Default)]
struct Track {
    first_token: Option<Duration>,
    finish: Option<Duration>,
    tokens: u32,
    times: Vec<Duration>,
}

/// Runs `load` at `rate` requests/s, with arrival `i` at
/// `(gaps[0] + … + gaps[i]) / rate` (request 0 waits one gap, as vLLM's
/// schedule does). Errors name what is wrong with the input.
pub fn simulate(
    params: &ModelParams,
    load: &VirtualLoad,
    gaps: &[f64],
    rate: f64,
) -> Result<VirtualRun, String> {
    check(params, load, gaps, rate)?;
    let arrivals = arrival_times(gaps, rate);
    let measured = load.warmup..load.warmup + load.requests;
    let prefix = prefix_blocks(load.shared_prefix);
    let mut tracks: Vec<Track> = Vec::with_capacity(arrivals.len());
    let mut engine = Engine::new(params.clone())
        .with_prefix_caching(load.prefix_caching)
        .with_stall_seed(stall_seed(gaps));
    let mut meter = UsageMeter::new(params, arrivals[load.warmup]);
    let mut clock = Duration::ZERO;
    let mut left = load.requests;
    while left > 0 {
        if engine.is_idle() {
            // Nothing to do until the next arrival (there is one: a measured
            // request is still unfinished, so it has not arrived yet).
            let next = arrivals[tracks.len()];
            meter.idle(clock, next);
            clock = clock.max(next);
        }
        while tracks.len() < arrivals.len() && arrivals[tracks.len()] <= clock {
            let id = tracks.len();
            let (input, output) = load.shape(id);
            engine.submit_blocks(id as u64, input, prefix.clone(), output, arrivals[id]);
            tracks.push(Track::default());
        }
        if !load.token_times {
            let next = arrivals.get(tracks.len()).copied();
            if let Some(run) = decode_run(&mut engine, clock, next) {
                let (out, kv_mean) = (&run.0.last, run.1);
                let done = record_batch_step(out, &mut tracks, false, &measured);
                left -= done.measured_finished;
                let state = BatchState {
                    running: engine.n_running() as u64 + done.finished,
                    waiting: engine.n_waiting() as u64,
                    kv_usage: kv_mean,
                    preemptions: 0,
                };
                meter.batch_steps(params, out, state, run.0.steps, run.0.span);
                clock = out.end();
                continue;
            }
        }
        let out = engine
            .step(clock)
            .ok_or_else(|| "the engine model stalled with work queued".to_string())?;
        let done = record_batch_step(&out, &mut tracks, load.token_times, &measured);
        left -= done.measured_finished;
        let state = BatchState {
            running: engine.n_running() as u64 + done.finished,
            waiting: engine.n_waiting() as u64,
            kv_usage: engine.kv_usage(),
            preemptions: done.preemptions,
        };
        meter.batch_step(params, &out, state);
        clock = out.end();
    }
    let counters = engine.counters();
    Ok(VirtualRun {
        arrived: tracks.len(),
        requests: collect(&arrivals, &mut tracks, measured),
        steps: counters.n_batch_steps,
        preemptions: counters.n_preemptions,
        usage: meter.usage(),
    })
}

/// The engine's identical decode steps from `clock` on, taken at once
/// ([`Engine::decode_run`]) when no token's own time is needed, with the
/// mean KV usage at their ends over their time (it grows by one token a
/// sequence a step; each step may be longer than the one before).
fn decode_run(
    engine: &mut Engine,
    clock: Duration,
    next: Option<Duration>,
) -> Option<(DecodeRun, f64)> {
    let before = engine.kv_usage();
    let per_step = engine.n_running() as f64 / f64::from(engine.params().kv_cache_tokens.max(1));
    let run = engine.decode_run(clock, next)?;
    let k = f64::from(run.steps);
    // Steps 1..k-1 end before anything finishes, at `before + per_step × j`;
    // the k-th after. Step j lasts `a + g × (j − 1)`.
    let (m, a) = (k - 1.0, run.first.as_secs_f64());
    let g = (run.last.duration.as_secs_f64() - a) / m;
    let s1 = m * (m + 1.0) / 2.0;
    let s2 = m * (m + 1.0) * (2.0 * m + 1.0) / 6.0;
    let (a0, b) = (a - g, before);
    let weighted = m * a0 * b + (a0 * per_step + g * b) * s1 + g * per_step * s2;
    let last = run.last.duration.as_secs_f64() * engine.kv_usage();
    let span = run.span.as_secs_f64();
    let mean = if span > 0.0 {
        (weighted + last) / span
    } else {
        (m * before + per_step * s1 + engine.kv_usage()) / k
    };
    Some((run, mean))
}
/// The hashes of a shared prefix's full KV blocks: the same for every
/// request, so the prefix cache can serve them.
fn prefix_blocks(tokens: u32) -> Vec<u64> {
    let mut chain = 0x7368_6172_6564_0000_u64; // "shared" in ASCII
    (0..tokens / BLOCK_TOKENS)
        .map(|i| {
            chain = splitmix64(chain ^ u64::from(i));
            chain
        })
        .collect()
}

/// What one step did to the requests: how many finished (of them, measured)
/// and how many were preempted.
struct BatchStepDone {
    finished: u64,
    measured_finished: usize,
    preemptions: u64,
}

/// Records the step's tokens in the requests' tracks.
fn record_batch_step(
    out: &BatchStep,
    tracks: &mut [Track],
    token_times: bool,
    measured: &std::ops::Range<usize>,
) -> BatchStepDone {
    let end = out.end();
    let mut done = BatchStepDone {
        finished: 0,
        measured_finished: 0,
        preemptions: 0,
    };
    for ev in &out.events {
        let (index, last) = match ev.kind {
            EventKind::Token { index, last } => (index, last),
            EventKind::Preempted => {
                done.preemptions += 1;
                continue;
            }
            EventKind::Scheduled { .. } | EventKind::Drafted { .. } => continue,
        };
        let id = ev.id as usize;
        let t = &mut tracks[id];
        if index == 1 {
            t.first_token = Some(end);
        }
        t.tokens = index;
        if token_times && measured.contains(&id) {
            t.times.push(end);
        }
        if last {
            t.finish = Some(end);
            done.finished += 1;
            if measured.contains(&id) {
                done.measured_finished += 1;
            }
        }
    }
    done
}

fn check(params: &ModelParams, load: &VirtualLoad, gaps: &[f64], rate: f64) -> Result<(), String> {
    params.validate()?;
    if !(rate.is_finite() && rate > 0.0) {
        return Err(format!("the rate must be a positive number, got {rate}"));
    }
    let empty = |(i, o): (u32, u32)| i.saturating_add(load.shared_prefix) == 0 || o == 0;
    if empty((load.input_len, load.output_len)) || load.lengths.iter().copied().any(empty) {
        return Err("input and output lengths must be at least 1".into());
    }
    let total = load.longest();
    if total > u64::from(params.max_model_len) {
        return Err(format!(
            "input + output length ({total}) exceeds max_model_len ({}); the server would refuse every request",
            params.max_model_len
        ));
    }
    if load.requests == 0 {
        return Err("at least one request must be measured".into());
    }
    if gaps.len() < load.warmup + load.requests {
        return Err(format!(
            "{} unit gaps cannot cover {} warm-up and {} measured requests",
            gaps.len(),
            load.warmup,
            load.requests
        ));
    }
    if gaps.iter().any(|g| !(g.is_finite() && *g >= 0.0)) {
        return Err("unit gaps must be finite and non-negative".into());
    }
    // Arrivals beyond ~30 million years of virtual time would overflow the
    // engine's clock (issue 38: a rate that small panicked in arrival_times).
    let span_s = gaps.iter().sum::<f64>() / rate;
    if span_s > 1e15 {
        return Err(format!("at {rate:.3e} req/s the arrivals span {span_s:.3e} s of virtual time, more than the simulator's clock holds: the engine is too slow to simulate"));
    }
    Ok(())
}

fn arrival_times(gaps: &[f64], rate: f64) -> Vec<Duration> {
    let mut sum = 0.0;
    gaps.iter()
        .map(|g| {
            sum += g;
            Duration::from_secs_f64(sum / rate)
        })
        .collect()
}

fn collect(
    arrivals: &[Duration],
    tracks: &mut [Track],
    measured: std::ops::Range<usize>,
) -> Vec<VirtualRequest> {
    measured
        .map(|id| {
            let t = std::mem::take(&mut tracks[id]);
            // Every measured request finished: the loop ran until they did.
            let finish = t.finish.unwrap_or_default();
            VirtualRequest {
                arrival: arrivals[id],
                first_token: t.first_token.unwrap_or(finish),
                finish,
                output_tokens: t.tokens,
                token_times: t.times,
            }
        })
        .collect()
}

#[cfg(test)]
#[path = "virtual_time_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "virtual_time_fast_tests.rs"]
mod fast_tests;

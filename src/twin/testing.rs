//! Test fixtures for the twin: a complete profile with known values, and
//! the engine model run on fake time behind a zero-latency client.

use super::observe::GaugeSample;
use super::profile::{
    Estimate, PrefixCaching, ProbeSummary, ProfileParams, ServerProfile, SCHEMA_VERSION,
};
use crate::metrics::{ErrorKind, RequestError, RequestRecord};
use crate::sim::model::{Engine, EventKind};
use crate::sim::ModelParams;
use std::time::Duration;

/// A profile of the `tiny` preset's parameters with ±5% (2σ) on the costs,
/// a batch limit seen at 32, a KV cache reported as 16,384 tokens, a budget
/// only known to be at least 1,024, and full interference.
pub fn sample() -> ServerProfile {
    let fit = |v: f64| Estimate::fitted(v, v * 0.025, 0.0, "synthetic");
    ServerProfile {
        schema_version: SCHEMA_VERSION,
        kneecap_version: "test".into(),
        base_url: "http://127.0.0.1:1".into(),
        simulated: true,
        model: "kneecap-sim".into(),
        gauges: Some("vllm".into()),
        budget_s: 60.0,
        elapsed_s: 50.0,
        params: ProfileParams {
            step_base_ms: fit(5.0),
            prefill_token_us: fit(5.0),
            prefill_fixed_ms: fit(5.2),
            decode_seq_us: fit(50.0),
            max_num_seqs: Estimate::fitted(32.0, 0.5, 1.0, "synthetic"),
            kv_cache_tokens: Estimate::reported(16_384.0, "synthetic"),
            max_num_batched_tokens: Estimate::lower_bound(1024.0, "synthetic"),
            max_model_len: Estimate::reported(4096.0, "synthetic"),
            prefill_interference: Estimate::fitted(1.0, 0.02, 0.0, "synthetic"),
            prefix_caching: PrefixCaching {
                enabled: Some(true),
                saved_fraction: Some(0.98),
                uncertainty: Some(0.01),
                how: "synthetic".into(),
            },
        },
        warnings: vec![],
        probes: vec![ProbeSummary {
            name: "prefill".into(),
            requests: 12,
            failed: 0,
            duration_s: 3.0,
            detail: "synthetic".into(),
        }],
    }
}

/// A request the fake client sends.
#[derive(Debug, Clone, Copy)]
pub struct Ask {
    pub prompt: u32,
    pub output: u32,
    /// Asks with the same id send the same prompt (its KV blocks match).
    pub prompt_id: u64,
}

/// How a group of fake requests is sent.
pub enum Stream {
    /// One after another, each when the previous one finished.
    Sequential(Vec<Ask>),
    /// `streams` closed loops of fresh prompts, from time 0.
    Closed {
        streams: usize,
        prompt: u32,
        output: u32,
    },
    /// Each at its time.
    Timed(Vec<(Duration, Ask)>),
}

/// What a fake run saw: each stream group's records, and the gauges.
pub struct FakeRun {
    pub records: Vec<Vec<RequestRecord>>,
    pub gauges: Vec<GaugeSample>,
}

/// Runs the engine model on fake time with a zero-latency client, as the
/// real-time driver would (a request sent during a step joins the next);
/// requests unfinished at `end` are cut (cancelled, partial tokens kept).
/// The gauges are read every `every` (at the next step's end).
pub fn fake_run(
    params: &ModelParams,
    caching: bool,
    streams: &[Stream],
    end: Duration,
    every: Duration,
) -> FakeRun {
    let mut engine = Engine::new(params.clone()).with_prefix_caching(caching);
    let mut fresh = 1u64 << 40;
    let mut due: Vec<(Duration, usize, Ask)> = Vec::new();
    let mut seq_next: Vec<usize> = vec![0; streams.len()];
    for (g, s) in streams.iter().enumerate() {
        match s {
            Stream::Sequential(asks) => due.extend(asks.first().map(|a| (Duration::ZERO, g, *a))),
            Stream::Closed {
                streams: n,
                prompt,
                output,
            } => {
                for _ in 0..*n {
                    fresh += 1;
                    due.push((
                        Duration::ZERO,
                        g,
                        Ask {
                            prompt: *prompt,
                            output: *output,
                            prompt_id: fresh,
                        },
                    ));
                }
            }
            Stream::Timed(asks) => due.extend(asks.iter().map(|(t, a)| (*t, g, *a))),
        }
    }
    let mut run = FakeRun {
        records: vec![Vec::new(); streams.len()],
        gauges: Vec::new(),
    };
    let mut where_: Vec<(usize, usize)> = Vec::new();
    let mut done: Vec<bool> = Vec::new();
    let (mut now, mut next_gauge) = (Duration::ZERO, Duration::ZERO);
    while now < end {
        due.sort_by_key(|d| d.0);
        while due.first().is_some_and(|d| d.0 <= now) {
            let (t, g, a) = due.remove(0);
            let blocks: Vec<u64> = (0..a.prompt / 16)
                .map(|k| a.prompt_id << 20 | u64::from(k))
                .collect();
            engine.submit_blocks(where_.len() as u64, a.prompt, blocks, a.output, t);
            let index = run.records[g].len();
            where_.push((g, index));
            done.push(false);
            run.records[g].push(RequestRecord {
                index,
                sent: t,
                prompt_len: a.prompt,
                ..Default::default()
            });
        }
        let out = match engine.step(now) {
            Some(out) if !out.duration.is_zero() => out,
            _ => match due.first() {
                Some(d) => {
                    now = d.0;
                    continue;
                }
                None => break,
            },
        };
        let t = out.end();
        // Published at the step's end, as the real-time driver does: the
        // engine's state after the step, stamped when its tokens arrive.
        if now >= next_gauge {
            let c = engine.counters();
            run.gauges.push(GaugeSample {
                t_s: t.as_secs_f64(),
                running: Some(engine.n_running() as f64),
                kv_usage: Some(engine.kv_usage()),
                preemptions: Some(c.n_preemptions as f64),
            });
            next_gauge = now + every;
        }
        for ev in &out.events {
            let EventKind::Token { index, last } = ev.kind else {
                continue;
            };
            let (g, i) = where_[ev.id as usize];
            let r = &mut run.records[g][i];
            match r.last_token {
                None => r.first_token = Some(t),
                Some(prev) => r.itl.push(t - prev),
            }
            r.last_token = Some(t);
            if last {
                r.output_tokens = index;
                done[ev.id as usize] = true;
                match &streams[g] {
                    Stream::Sequential(asks) => {
                        seq_next[g] += 1;
                        due.extend(asks.get(seq_next[g]).map(|a| (t, g, *a)));
                    }
                    Stream::Closed { prompt, output, .. } => {
                        fresh += 1;
                        due.push((
                            t,
                            g,
                            Ask {
                                prompt: *prompt,
                                output: *output,
                                prompt_id: fresh,
                            },
                        ));
                    }
                    Stream::Timed(_) => {}
                }
            }
        }
        now = t;
    }
    for (id, (g, i)) in where_.into_iter().enumerate() {
        if !done[id] {
            run.records[g][i].error = Some(RequestError {
                kind: ErrorKind::Cancelled,
                status: None,
                message: "cut".into(),
            });
        }
    }
    run
}

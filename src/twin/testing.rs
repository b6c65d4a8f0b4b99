//! Test fixtures for the twin: a complete profile with known values, and
//! the engine model run on fake time behind a zero-latency client.

use super::observe::{DecodeLevel, GaugeSample, KvPoint};
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
            block_tokens: None,
            context_token_us: Estimate::not_profiled(),
            request_ms: Estimate::not_profiled(),
            prefill_pair_ns: Estimate::not_profiled(),
            prefill_step_ms: Estimate::not_profiled(),
            stall_rate_per_s: Estimate::not_profiled(),
            stall_ms: Estimate::not_profiled(),
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

/// A run's stall seed, from what it sends: one server serves every probe,
/// so its stalls (if any) must not start over alike with each run.
fn stall_seed(streams: &[Stream], end: Duration) -> u64 {
    use std::hash::{DefaultHasher, Hash, Hasher};
    let mut h = DefaultHasher::new();
    end.hash(&mut h);
    for s in streams {
        match s {
            Stream::Sequential(asks) => asks
                .iter()
                .for_each(|a| (a.prompt, a.output, a.prompt_id).hash(&mut h)),
            Stream::Closed {
                streams,
                prompt,
                output,
            } => (streams, prompt, output).hash(&mut h),
            Stream::Timed(asks) => asks
                .iter()
                .for_each(|(t, a)| (t, a.prompt, a.output, a.prompt_id).hash(&mut h)),
        }
    }
    h.finish()
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
    let mut client = FakeClient::new(streams);
    let mut engine = Engine::new(params.clone())
        .with_prefix_caching(caching)
        .with_stall_seed(stall_seed(streams, end));
    let (mut now, mut next_gauge) = (Duration::ZERO, Duration::ZERO);
    while now < end {
        client.submit_due(&mut engine, now);
        let out = match engine.step(now) {
            Some(out) if !out.duration.is_zero() => out,
            _ => match client.next_due() {
                Some(t) => {
                    now = t;
                    continue;
                }
                None => break,
            },
        };
        let t = out.end();
        // Published at the step's end, as the real-time driver does: the
        // engine's state after the step, stamped when its tokens arrive.
        if now >= next_gauge {
            client.run.gauges.push(gauge(&engine, t));
            next_gauge = now + every;
        }
        for ev in &out.events {
            if let EventKind::Token { index, last } = ev.kind {
                client.token(ev.id as usize, index, last, t);
            }
        }
        now = t;
    }
    client.finish()
}

/// The engine's gauges after a step, stamped at `t`.
fn gauge(engine: &Engine, t: Duration) -> GaugeSample {
    GaugeSample {
        t_s: t.as_secs_f64(),
        running: Some(engine.n_running() as f64),
        kv_usage: Some(engine.kv_usage()),
        preemptions: Some(engine.counters().n_preemptions as f64),
    }
}

/// The zero-latency client of [`fake_run`]: what is due when, and where each
/// submitted request's record lives.
struct FakeClient<'a> {
    streams: &'a [Stream],
    run: FakeRun,
    /// (when, stream group, ask), not yet submitted.
    due: Vec<(Duration, usize, Ask)>,
    /// The next ask of each sequential group.
    seq_next: Vec<usize>,
    /// Engine id → (group, index in its records), and whether it finished.
    where_: Vec<(usize, usize)>,
    done: Vec<bool>,
    /// The last fresh prompt id handed out.
    fresh: u64,
}

impl<'a> FakeClient<'a> {
    fn new(streams: &'a [Stream]) -> Self {
        let mut c = FakeClient {
            streams,
            run: FakeRun {
                records: vec![Vec::new(); streams.len()],
                gauges: Vec::new(),
            },
            due: Vec::new(),
            seq_next: vec![0; streams.len()],
            where_: Vec::new(),
            done: Vec::new(),
            fresh: 1u64 << 40,
        };
        for (g, s) in streams.iter().enumerate() {
            match s {
                Stream::Sequential(asks) => {
                    c.due.extend(asks.first().map(|a| (Duration::ZERO, g, *a)))
                }
                Stream::Closed { streams: n, .. } => {
                    (0..*n).for_each(|_| c.follow_up(g, Duration::ZERO));
                }
                Stream::Timed(asks) => c.due.extend(asks.iter().map(|(t, a)| (*t, g, *a))),
            }
        }
        c
    }

    /// When the earliest request not yet submitted is due.
    fn next_due(&self) -> Option<Duration> {
        self.due.first().map(|d| d.0)
    }

    /// Submits every request due by `now`, in order of its due time.
    fn submit_due(&mut self, engine: &mut Engine, now: Duration) {
        self.due.sort_by_key(|d| d.0);
        while self.due.first().is_some_and(|d| d.0 <= now) {
            let (t, g, a) = self.due.remove(0);
            let blocks: Vec<u64> = (0..a.prompt / 16)
                .map(|k| a.prompt_id << 20 | u64::from(k))
                .collect();
            engine.submit_blocks(self.where_.len() as u64, a.prompt, blocks, a.output, t);
            let index = self.run.records[g].len();
            self.where_.push((g, index));
            self.done.push(false);
            self.run.records[g].push(RequestRecord {
                index,
                sent: t,
                prompt_len: a.prompt,
                ..Default::default()
            });
        }
    }

    /// Records token `index` of request `id` at `t`; a last token sends the
    /// group's next request.
    fn token(&mut self, id: usize, index: u32, last: bool, t: Duration) {
        let (g, i) = self.where_[id];
        let r = &mut self.run.records[g][i];
        match r.last_token {
            None => r.first_token = Some(t),
            Some(prev) => r.itl.push(t - prev),
        }
        r.last_token = Some(t);
        if last {
            r.output_tokens = index;
            self.done[id] = true;
            self.follow_up(g, t);
        }
    }

    /// Queues group `g`'s next request at `t` (a closed loop's fresh prompt,
    /// a sequential group's next ask; nothing for a timed group).
    fn follow_up(&mut self, g: usize, t: Duration) {
        match &self.streams[g] {
            Stream::Sequential(asks) => {
                self.seq_next[g] += 1;
                self.due
                    .extend(asks.get(self.seq_next[g]).map(|a| (t, g, *a)));
            }
            Stream::Closed { prompt, output, .. } => {
                self.fresh += 1;
                let ask = Ask {
                    prompt: *prompt,
                    output: *output,
                    prompt_id: self.fresh,
                };
                self.due.push((t, g, ask));
            }
            _ => {}
        }
    }

    /// The records, with every request unfinished at the end cut.
    fn finish(mut self) -> FakeRun {
        for (id, (g, i)) in self.where_.into_iter().enumerate() {
            if !self.done[id] {
                self.run.records[g][i].error = Some(RequestError {
                    kind: ErrorKind::Cancelled,
                    status: None,
                    message: "cut".into(),
                });
            }
        }
        self.run
    }
}

/// Issue 38's decode levels on vLLM 0.32 (CPU): 1 … 128 streams, then 256
/// offered of which 128 ran (the batch limit), so the top two levels sit at
/// one batch, their streaming counts a rounding error apart; the step flat
/// at small batches (the weights' read), compute-bound at large ones.
pub fn vllm_levels() -> Vec<DecodeLevel> {
    let step = |d: f64| 0.030f64.max(0.0015 * d);
    let level = |k: usize, d: f64, gap: f64| DecodeLevel {
        concurrency: k,
        output_tokens: 32,
        start_s: 1.0,
        window_s: 10.0,
        streaming: d,
        gaps: 500,
        mean_gap_s: gap,
        median_gap_s: gap,
        prefill_tokens_per_s: 0.0,
        mean_context: 40.0,
        clean: None,
        running_mean: Some(d.min(128.0)),
        running_max: Some(d.min(128.0)),
        preemptions: Some(0.0),
        kv_usage_max: Some(0.3),
        stalls: Default::default(),
        failed: 0,
    };
    let mut ls: Vec<DecodeLevel> = [1, 2, 4, 8, 16, 32, 64, 128]
        .iter()
        .map(|&k| level(k, k as f64, step(k as f64)))
        .collect();
    let top = 128.0 * (1.0 + 4.0 * f64::EPSILON);
    ls.push(level(256, top, step(128.0) + 0.004));
    ls
}

/// KV readings at those levels (8-token prompts, 32-token outputs): usage
/// with an offset and a bend, the top two levels at one token count.
pub fn vllm_kv_points() -> Vec<KvPoint> {
    vllm_levels()
        .iter()
        .map(|l| {
            let tokens = l.streaming * 24.0;
            let usage = 0.01 + tokens / 93_184.0 * (1.0 + 0.3 * (tokens / 3072.0).sqrt());
            KvPoint {
                tokens,
                scheduled: tokens + l.streaming,
                usage,
            }
        })
        .collect()
}

//! Running `kneecap profile`'s probes: each is one engine level (the same
//! `prepare::run_level` a run or a sweep step uses), its prompts from the
//! random dataset at exact lengths, the decode levels with `/metrics`
//! scraped beside them; every level is cancelled at the budget's deadline.

use crate::client::scrape::{GaugeSource, Scraper};
use crate::cmd::prepare::{self as runner, Level, Prepared};
use crate::config::RunConfig;
use crate::engine::Releases;
use crate::metrics::{ErrorKind, RequestRecord};
use crate::twin::decode::{self, saturated};
use crate::twin::fit::Observations;
use crate::twin::interference::{self, InterferenceObs};
use crate::twin::observe::{decode_level, kv_level_point, tokens_in_flight, GaugeSample};
use crate::twin::plan::{self, InterferencePlan, Pilot, PrefillPlan};
use crate::twin::prefill::{self, TtftSample};
use crate::twin::prefill_batch::{self, BatchPlan, BatchSample};
use crate::twin::profile::ProbeSummary;
use crate::workload::dataset::{self, DatasetKind};
use crate::workload::RequestSpec;
use anyhow::{bail, Result};
use indicatif::ProgressBar;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// How often the decode levels scrape `/metrics`.
const SCRAPE_EVERY: Duration = Duration::from_millis(50);
/// The longest a level waits for the server to finish what an earlier
/// level left behind.
const SETTLE_MAX: Duration = Duration::from_secs(10);

/// The probes' shared state.
pub(super) struct Probe<'a> {
    pub(super) cfg: &'a RunConfig,
    pub(super) prepared: Prepared,
    pub(super) scraper: Option<Scraper>,
    pub(super) deadline: Instant,
    pub(super) interrupt: watch::Receiver<bool>,
    /// Seeds the next batch of prompts (every prompt is new unless repeated on purpose).
    pub(super) seed: u64,
    pub(super) summaries: Vec<ProbeSummary>,
    pub(super) gauges: Option<GaugeSource>,
}

impl Probe<'_> {
    /// Time left before the deadline.
    pub(super) fn left(&self) -> Duration {
        self.deadline.saturating_duration_since(Instant::now())
    }

    /// `n` fresh prompts of `input` tokens asking for `output` tokens.
    pub(super) fn specs(&mut self, input: u32, output: u32, n: usize) -> Result<Vec<RequestSpec>> {
        self.seed += 1;
        let mut ds = self.cfg.dataset.clone();
        ds.kind = DatasetKind::Random {
            input_len: input.max(1),
            output_len: output.max(1),
            range_ratio_input: 0.0,
            range_ratio_output: 0.0,
            prefix_len: 0,
        };
        ds.num_prompts = n;
        ds.seed = self.cfg.dataset.seed.wrapping_add(self.seed);
        ds.batch_size = 1;
        dataset::load(&ds, self.prepared.tokenizer.as_ref())
    }

    /// Waits until the server's gauges show nothing running or waiting (at
    /// most [`SETTLE_MAX`], never past the deadline; at once without
    /// `/metrics`). A level cut at its end leaves requests in the server's
    /// hands: llama.cpp, for one, finishes a prompt it has started before it
    /// sees the client gone, and the next level's first requests would
    /// queue behind it.
    async fn settle(&self) {
        let Some(scraper) = &self.scraper else {
            return;
        };
        let until = Instant::now() + SETTLE_MAX.min(self.left());
        while Instant::now() < until {
            let busy = scraper.sample().await.is_some_and(|(_, q)| {
                q.running.unwrap_or(0.0) > 0.0 || q.waiting.unwrap_or(0.0) > 0.0
            });
            if !busy {
                return;
            }
            tokio::time::sleep(SCRAPE_EVERY).await;
        }
    }

    /// Runs one level, cut at `length` (and at the deadline), scraping the
    /// gauges when `scrape`, once the server has settled. Errors when
    /// interrupted.
    pub(super) async fn level(
        &mut self,
        releases: Releases,
        specs: Vec<RequestSpec>,
        max_concurrency: Option<usize>,
        length: Duration,
        scrape: bool,
    ) -> Result<(Vec<RequestRecord>, Vec<GaugeSample>)> {
        self.settle().await;
        let level = Level {
            releases,
            specs: Arc::new(specs),
            max_concurrency,
            cancel_at: Some(length.min(self.left())),
            watch: None,
            sessions: None,
        };
        let (stop_tx, stop_rx) = watch::channel(false);
        let t0 = Instant::now();
        let scraper = self.scraper.as_ref().filter(|_| scrape);
        let gauges = async {
            match scraper {
                Some(s) => s.series(t0, SCRAPE_EVERY, stop_rx).await,
                None => (None, Vec::new()),
            }
        };
        let run = async {
            let out = runner::run_level(
                &self.prepared,
                level,
                ProgressBar::hidden(),
                self.interrupt.clone(),
            )
            .await;
            let _ = stop_tx.send(true);
            out
        };
        let (out, (source, samples)) = tokio::join!(run, gauges);
        let out = out?;
        if out.interrupted {
            bail!("interrupted before the profile finished; nothing written");
        }
        self.gauges = self.gauges.or(source);
        let samples = samples
            .iter()
            .map(|q| GaugeSample {
                t_s: q.t_s,
                running: q.running,
                kv_usage: q.kv_cache_usage,
                preemptions: q.preemptions,
            })
            .collect();
        Ok((out.records, samples))
    }

    pub(super) fn summary(
        &mut self,
        name: &str,
        records: &[RequestRecord],
        took: Duration,
        detail: String,
    ) {
        let failed = records.iter().filter(|r| failed(r)).count();
        eprintln!(
            "kneecap profile: {name} probe: {} requests ({failed} failed) in {:.1} s: {detail}",
            records.len(),
            took.as_secs_f64()
        );
        self.summaries.push(ProbeSummary {
            name: name.into(),
            requests: records.len(),
            failed,
            duration_s: took.as_secs_f64(),
            detail,
        });
    }

    /// A warm-up request, then a short and a long lone request.
    pub(super) async fn pilot(&mut self, max_len: u32) -> Result<Pilot> {
        let long = (max_len / 2).clamp(64, 1040);
        let mut specs = self.specs(16, 4, 1)?;
        specs.extend(self.specs(16, 16, 1)?);
        specs.extend(self.specs(long, 2, 1)?);
        let t = Instant::now();
        let (r, _) = self
            .level(
                Releases::Scheduled(vec![Duration::ZERO; 3]),
                specs,
                Some(1),
                self.left(),
                false,
            )
            .await?;
        self.summary(
            "pilot",
            &r,
            t.elapsed(),
            format!("one warm-up, then lone prompts of 16 and {long} tokens"),
        );
        let (Some(short), Some(long_t)) = (ttft(&r[1]), ttft(&r[2])) else {
            bail!(
                "the server did not answer the pilot requests ({}); check the target and --model",
                first_error(&r)
            );
        };
        let mut gaps: Vec<f64> = r[1].itl.iter().map(Duration::as_secs_f64).collect();
        gaps.sort_by(f64::total_cmp);
        let gap = gaps.get(gaps.len() / 2).copied().unwrap_or(short);
        Ok(Pilot::new(
            (r[1].prompt_len, short),
            (r[2].prompt_len, long_t),
            gap,
        ))
    }

    /// Lone requests, one after another.
    pub(super) async fn prefill(
        &mut self,
        plan: &PrefillPlan,
        share: Duration,
    ) -> Result<Vec<TtftSample>> {
        let reqs = plan.requests();
        let mut specs: Vec<RequestSpec> = Vec::with_capacity(reqs.len());
        for &(n, again) in &reqs {
            let spec = match (again, specs.last()) {
                (true, Some(prev)) => prev.clone(),
                _ => self.specs(n, plan::PREFILL_OUTPUT, 1)?.remove(0),
            };
            specs.push(spec);
        }
        let (t, until) = (Instant::now(), Instant::now() + share);
        let (mut all, mut samples) = (Vec::new(), Vec::new());
        // One level per request, so they go in this order and a repeat right
        // after its first sending: one level's requests, held to one at a
        // time by the cap, may be sent in any order.
        for (spec, &(_, repeat)) in specs.into_iter().zip(&reqs) {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            let once = Releases::Scheduled(vec![Duration::ZERO]);
            let (r, _) = self.level(once, vec![spec], Some(1), left, false).await?;
            samples.extend(r.iter().filter_map(|rec| {
                Some(TtftSample {
                    prompt_tokens: rec.prompt_len,
                    ttft_s: ttft(rec)?,
                    repeat,
                })
            }));
            all.extend(r);
        }
        self.summary(plan.name(), &all, t.elapsed(), plan.describe());
        Ok(samples)
    }

    /// Levels of a blocker then a burst of prompts sent together, whole and
    /// split in turn, within `share`: the steps they show.
    pub(super) async fn prefill_batch(
        &mut self,
        plan: &BatchPlan,
        share: Duration,
    ) -> Result<Vec<BatchSample>> {
        let (t, until) = (Instant::now(), Instant::now() + share);
        let (mut all, mut samples, mut levels) = (Vec::new(), Vec::new(), 0);
        for i in 0..prefill_batch::MAX_LEVELS {
            let left = until.saturating_duration_since(Instant::now());
            if left < plan.length.min(share / 2) {
                break;
            }
            let (k, n) = plan.burst(i);
            let mut specs = self.specs(plan.tokens, 1, 1)?;
            specs.extend(self.specs(n, 1, k as usize)?);
            let mut offsets = vec![Duration::ZERO];
            offsets.extend(std::iter::repeat_n(plan.send_at, k as usize));
            let releases = Releases::Scheduled(offsets);
            let (r, _) = self
                .level(releases, specs, None, plan.length.min(left), false)
                .await?;
            samples.extend(prefill_batch::observe(&r));
            all.extend(r);
            levels += 1;
        }
        let detail = format!(
            "{levels} levels of a {n}-token prompt, then 1 x {n}, {k} x {m} or {h} x {m} tokens sent while it computes; {} computed in one step",
            samples.len(),
            n = plan.tokens,
            k = plan.split,
            h = plan.split / 2,
            m = plan.tokens / plan.split,
        );
        self.summary("prefill_batch", &all, t.elapsed(), detail);
        Ok(samples)
    }

    /// `decoders` streams from the start, prompts at the plan's times.
    pub(super) async fn interference(
        &mut self,
        plan: &InterferencePlan,
        decoders: usize,
    ) -> Result<Option<InterferenceObs>> {
        let mut specs = self.specs(plan::DECODE_PROMPT, plan.decoder_output, decoders)?;
        let mut offsets = vec![Duration::ZERO; decoders];
        let long = self.specs(plan.prompt_tokens, 1, plan.sends.len())?;
        let short = self.specs(plan.short_tokens, 1, plan.short_sends.len())?;
        // Released in time order.
        let mut prompts: Vec<(Duration, RequestSpec)> =
            plan.sends.iter().copied().zip(long).collect();
        prompts.extend(plan.short_sends.iter().copied().zip(short));
        prompts.sort_by_key(|p| p.0);
        for (at, spec) in prompts {
            offsets.push(at);
            specs.push(spec);
        }
        let t = Instant::now();
        let (r, _) = self
            .level(
                Releases::Scheduled(offsets),
                specs,
                None,
                plan.length,
                false,
            )
            .await?;
        self.summary("interference", &r, t.elapsed(), plan.describe(decoders));
        let (streams, injected) = r.split_at(decoders.min(r.len()));
        Ok(interference::observe(streams, injected))
    }

    /// Closed-loop levels at doubling concurrency, then the levels of other
    /// shapes ([`plan::shape_levels`]), within `share`.
    pub(super) async fn decode(
        &mut self,
        pilot: &Pilot,
        share: Duration,
        max_len: u32,
        obs: &mut Observations,
    ) -> Result<()> {
        let output = plan::DECODE_OUTPUT
            .min(max_len.saturating_sub(plan::DECODE_PROMPT + 1))
            .max(2);
        let t = Instant::now();
        let end = t + share.min(self.left());
        // Time kept for two rounds of the other shapes (at the pilot's gap,
        // which the steps of a loaded level exceed), but only from the
        // repeats: the first climb to the batch limit comes first.
        let room = share.mul_f64(plan::CONTEXT_ROOM_SHARE);
        let curve = prefill::fit(&obs.prefill, &[]);
        let lone = |n: u32| curve.as_ref().map_or(0.0, |f| f.cost_s(n));
        let gap = |_| pilot.lone_gap_s;
        let kept: Duration = plan::shape_levels(pilot, max_len, usize::MAX, room, (gap, lone))
            .iter()
            .map(|l| l.length)
            .sum();
        let repeats_until = end.checked_sub(kept.mul_f64(2.5)).unwrap_or(t);
        let mut done: Vec<(usize, bool, f64)> = Vec::new();
        let mut all = Vec::new();
        let until = |done: &[(usize, bool, f64)]| match done.iter().any(|d| d.1) {
            true => repeats_until,
            false => end,
        };
        while let Some((k, length)) = plan::next_decode_level(
            &done,
            pilot,
            until(&done).saturating_duration_since(Instant::now()),
        ) {
            // Repeats (after a saturated level) only while the fit is loose.
            if done.iter().any(|d| d.1) && decode::precise(&obs.decode) {
                break;
            }
            let shape = (k, plan::DECODE_PROMPT, output, length);
            let (seen, bad) = self.decode_level(shape, true, obs, &mut all).await?;
            done.extend(seen);
            if bad * 10 > k {
                eprintln!("kneecap profile: {bad} requests failed at {k} streams; the decode probe stops there");
                break;
            }
        }
        let shapes = self
            .shape_levels((pilot, &lone), (max_len, room), end, &done, obs, &mut all)
            .await?;
        let levels: Vec<String> = done.iter().map(|d| d.0.to_string()).collect();
        let detail = format!(
            "closed loops of {} streams, {}-token prompts, {output}-token outputs{shapes}",
            levels.join(", "),
            plan::DECODE_PROMPT
        );
        self.summary("decode", &all, t.elapsed(), detail);
        Ok(())
    }

    /// Rounds of the other shapes' levels until `end`, each within `room`;
    /// what they were, for the probe's summary.
    async fn shape_levels(
        &mut self,
        (pilot, lone): (&Pilot, &impl Fn(u32) -> f64),
        (max_len, room): (u32, Duration),
        end: Instant,
        done: &[(usize, bool, f64)],
        obs: &mut Observations,
        all: &mut Vec<RequestRecord>,
    ) -> Result<String> {
        let limit = plan::context_stream_limit(&obs.decode, &obs.kv_points);
        // The gap at the nearest doubling level's concurrency.
        let gap = |k: usize| {
            done.iter()
                .min_by_key(|d| d.0.abs_diff(k))
                .map_or(pilot.lone_gap_s, |d| d.2)
        };
        let levels = plan::shape_levels(pilot, max_len, limit, room, (gap, lone));
        let mut ran = Vec::new();
        for _ in 0..plan::SHAPE_ROUNDS {
            for l in &levels {
                if end.saturating_duration_since(Instant::now()) < l.length {
                    continue;
                }
                let shape = (l.streams, l.prompt, l.output, l.length);
                self.decode_level(shape, false, obs, all).await?;
                ran.push(format!("{} x {}/{}", l.streams, l.prompt, l.output));
            }
        }
        Ok(match ran.is_empty() {
            true => String::new(),
            false => format!("; then streams x prompt/output {}", ran.join(", ")),
        })
    }

    /// One closed-loop level of `(streams, prompt, output, length)`, its
    /// observation kept in `obs` (its KV point only when `kv`: a level of
    /// long prompts, its first wave still in prefill, bent the KV line on
    /// the simulator) and its records in `all`; the level as `(streams,
    /// saturated, mean gap)` when it gave one, and its failures.
    async fn decode_level(
        &mut self,
        (k, prompt, output, length): (usize, u32, u32, Duration),
        kv: bool,
        obs: &mut Observations,
        all: &mut Vec<RequestRecord>,
    ) -> Result<(Option<(usize, bool, f64)>, usize)> {
        let specs = self.specs(prompt, output, 4 * k)?;
        let (r, gauges) = self
            .level(Releases::ClosedFor(length), specs, Some(k), length, true)
            .await?;
        let bad = r.iter().filter(|x| failed(x)).count();
        let mut seen = None;
        if let Some(level) = decode_level(k, output, &r, &gauges, length) {
            seen = Some((k, saturated(&level), level.mean_gap_s));
            let from = Duration::from_secs_f64(level.start_s);
            if let Some(point) = kv_level_point(&r, &gauges, from, length).filter(|_| kv) {
                obs.kv_systematic = block_rounding(&level, point.tokens);
                obs.kv_points.push(point);
            }
            for g in &gauges {
                let held = tokens_in_flight(&r, Duration::from_secs_f64(g.t_s)).0;
                obs.most_held_tokens = obs.most_held_tokens.max(held);
            }
            obs.decode.push(level);
        }
        all.extend(r);
        Ok((seen, bad))
    }
}

/// vLLM counts KV in 16-token blocks; tokens counted one by one can be short
/// by up to half a block per sequence. The relative size of that at a level.
fn block_rounding(level: &crate::twin::observe::DecodeLevel, held: f64) -> f64 {
    if held > 0.0 {
        8.0 * level.streaming / held
    } else {
        0.0
    }
}

fn ttft(r: &RequestRecord) -> Option<f64> {
    Some(r.first_token?.saturating_sub(r.sent).as_secs_f64())
}

fn failed(r: &RequestRecord) -> bool {
    r.error
        .as_ref()
        .is_some_and(|e| e.kind != ErrorKind::Cancelled)
}

fn first_error(r: &[RequestRecord]) -> String {
    r.iter()
        .find_map(|x| x.error.as_ref().map(|e| e.message.clone()))
        .unwrap_or_else(|| "no first token".into())
}

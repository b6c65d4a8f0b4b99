//! The whole pure pipeline on fake time: the probe plan run against the
//! engine model behind a zero-latency client, reduced and fitted, gives back
//! the hidden parameters.

use super::*;
use crate::sim::ModelParams;
use crate::twin::decode::saturated;
use crate::twin::observe::{decode_level, kv_level_point, tokens_in_flight};
use crate::twin::plan::{self, Pilot, DECODERS, DECODE_OUTPUT, DECODE_PROMPT};
use crate::twin::prefill_batch::{self, BatchSample};
use crate::twin::testing::{fake_run, Ask, Stream};
use crate::twin::{interference, Status};
use std::time::Duration;

const GAUGE: Duration = Duration::from_millis(20);

fn ask(prompt: u32, output: u32, prompt_id: u64) -> Ask {
    Ask {
        prompt,
        output,
        prompt_id,
    }
}

fn ttft(r: &crate::metrics::RequestRecord) -> f64 {
    (r.first_token.unwrap() - r.sent).as_secs_f64()
}

fn pilot(p: &ModelParams, caching: bool) -> Pilot {
    let run = fake_run(
        p,
        caching,
        &[Stream::Sequential(vec![ask(16, 16, 1), ask(1040, 2, 2)])],
        Duration::from_secs(100),
        GAUGE,
    );
    let r = &run.records[0];
    let mut gaps: Vec<f64> = r[0].itl.iter().map(|g| g.as_secs_f64()).collect();
    gaps.sort_by(f64::total_cmp);
    Pilot::new((16, ttft(&r[0])), (1040, ttft(&r[1])), gaps[gaps.len() / 2])
}

fn prefill_samples(
    p: &ModelParams,
    caching: bool,
    pl: &Pilot,
    budget: Duration,
) -> Vec<TtftSample> {
    let plan = plan::prefill(pl, budget, p.max_model_len);
    let reqs = plan.requests();
    let asks: Vec<Ask> = reqs
        .iter()
        .enumerate()
        .map(|(i, &(n, again))| ask(n, plan::PREFILL_OUTPUT, 100 + i as u64 - u64::from(again)))
        .collect();
    let run = fake_run(
        p,
        caching,
        &[Stream::Sequential(asks)],
        Duration::from_secs(1000),
        GAUGE,
    );
    run.records[0]
        .iter()
        .zip(&reqs)
        .map(|(r, &(_, repeat))| TtftSample {
            prompt_tokens: r.prompt_len,
            ttft_s: ttft(r),
            repeat,
        })
        .collect()
}

fn interference_obs(p: &ModelParams, pl: &Pilot, budget: Duration) -> InterferenceObs {
    let plan = plan::interference(pl, budget, p.max_model_len);
    let decoders = Stream::Timed(
        (0..DECODERS)
            .map(|i| {
                (
                    Duration::ZERO,
                    ask(DECODE_PROMPT, plan.decoder_output, 500 + i as u64),
                )
            })
            .collect(),
    );
    let mut prompts: Vec<(Duration, Ask)> = plan
        .sends
        .iter()
        .enumerate()
        .map(|(i, &t)| (t, ask(plan.prompt_tokens, 1, 600 + i as u64)))
        .collect();
    prompts.extend(
        plan.short_sends
            .iter()
            .enumerate()
            .map(|(i, &t)| (t, ask(plan.short_tokens, 1, 700 + i as u64))),
    );
    prompts.sort_by_key(|p| p.0);
    let prompts = Stream::Timed(prompts);
    let run = fake_run(p, true, &[decoders, prompts], plan.length, GAUGE);
    interference::observe(&run.records[0], &run.records[1]).unwrap()
}

/// Profiles `p` in fake time within `budget` (the decode levels get what
/// the plan gives them).
pub(super) fn profile(p: &ModelParams, caching: bool, budget: Duration) -> ServerProfile {
    fit(&observations(p, caching, budget), header(budget))
}

/// What the probes see of `p` in fake time within `budget`.
pub(super) fn observations(p: &ModelParams, caching: bool, budget: Duration) -> Observations {
    let pl = pilot(p, caching);
    let mut obs = Observations {
        prefill: prefill_samples(p, caching, &pl, budget),
        interference: Some(interference_obs(p, &pl, budget)),
        max_model_len: Some(p.max_model_len),
        ..Default::default()
    };
    let mut left =
        budget.mul_f64(1.0 - plan::PREFILL_SHARE - plan::INTERFERENCE_SHARE - plan::SLACK_SHARE);
    let mut done = Vec::new();
    while let Some((k, length)) = plan::next_decode_level(&done, &pl, left) {
        left = left.saturating_sub(length);
        let run = fake_run(
            p,
            caching,
            &[Stream::Closed {
                streams: k,
                prompt: DECODE_PROMPT,
                output: DECODE_OUTPUT,
            }],
            length,
            GAUGE,
        );
        let (records, gauges) = (&run.records[0], &run.gauges);
        let level = decode_level(k, DECODE_OUTPUT, records, gauges, length).unwrap();
        done.push((k, saturated(&level), level.mean_gap_s));
        let from = Duration::from_secs_f64(level.start_s);
        obs.kv_points
            .extend(kv_level_point(records, gauges, from, length));
        for g in gauges {
            let held = tokens_in_flight(records, Duration::from_secs_f64(g.t_s)).0;
            obs.most_held_tokens = obs.most_held_tokens.max(held);
        }
        obs.decode.push(level);
    }
    let room = budget.mul_f64(
        (1.0 - plan::PREFILL_SHARE - plan::INTERFERENCE_SHARE - plan::SLACK_SHARE)
            * plan::CONTEXT_ROOM_SHARE,
    );
    shape_levels(p, caching, (&pl, room), &done, &mut obs);
    obs.prefill_batch = batched_steps(p, caching, &obs);
    obs
}

/// Two levels of each burst of [`prefill_batch`]'s plan, as the profile
/// sends them (the token budget reported, as vLLM does).
fn batched_steps(p: &ModelParams, caching: bool, obs: &Observations) -> Vec<BatchSample> {
    let budget = Some(u64::from(p.max_num_batched_tokens));
    let Some(bp) = prefill_batch::plan(&obs.prefill, budget, plan::batch_limit(&obs.decode)) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for i in 0..6 {
        let (k, n) = bp.burst(i);
        let id = 9000 + 100 * i as u64;
        let mut asks = vec![(Duration::ZERO, ask(bp.tokens, 1, id))];
        asks.extend((1..=u64::from(k)).map(|j| (bp.send_at, ask(n, 1, id + j))));
        let run = fake_run(p, caching, &[Stream::Timed(asks)], bp.length, GAUGE);
        out.extend(prefill_batch::observe(&run.records[0]));
    }
    out
}

/// The long-context levels after the climb, as the profile runs them (no
/// KV point; the streams within the batch limit and the KV cache).
fn shape_levels(
    p: &ModelParams,
    caching: bool,
    (pl, room): (&Pilot, Duration),
    done: &[(usize, bool, f64)],
    obs: &mut Observations,
) {
    let limit = plan::context_stream_limit(&obs.decode, &obs.kv_points);
    let gap = |k: usize| {
        done.iter()
            .min_by_key(|d| d.0.abs_diff(k))
            .map_or(pl.lone_gap_s, |d| d.2)
    };
    for _ in 0..plan::SHAPE_ROUNDS {
        let prompt_s = |n: u32| match prefill::fit(&obs.prefill, &[]) {
            Some(f) => f.cost_s(n),
            None => pl.per_token_s * f64::from(n),
        };
        for l in plan::shape_levels(pl, p.max_model_len, limit, room, (gap, prompt_s)) {
            let stream = Stream::Closed {
                streams: l.streams,
                prompt: l.prompt,
                output: l.output,
            };
            let run = fake_run(p, caching, &[stream], l.length, GAUGE);
            let level = decode_level(l.streams, l.output, &run.records[0], &run.gauges, l.length);
            obs.decode.extend(level);
        }
    }
}

pub(super) fn header(budget: Duration) -> Header {
    Header {
        kneecap_version: "test".into(),
        base_url: "fake".into(),
        simulated: true,
        model: "m".into(),
        gauges: Some("vllm".into()),
        budget_s: budget.as_secs_f64(),
        elapsed_s: 0.0,
        probes: vec![],
    }
}

pub(super) fn params(
    m: u32,
    base_ms: u64,
    c_p_us: u64,
    c_d_us: u64,
    kv: u32,
    alpha: f64,
) -> ModelParams {
    ModelParams {
        max_num_seqs: m,
        max_num_batched_tokens: 2048,
        kv_cache_tokens: kv,
        max_model_len: 4096,
        step_base: Duration::from_millis(base_ms),
        per_prefill_token: Duration::from_micros(c_p_us),
        per_decode_seq: Duration::from_micros(c_d_us),
        prefill_interference: alpha,
        block_tokens: crate::sim::blocks::BLOCK_TOKENS,
        per_context_token: std::time::Duration::ZERO,
        per_request: std::time::Duration::ZERO,
        per_prefill_pair: std::time::Duration::ZERO,
        per_prefill_step: std::time::Duration::ZERO,
        stalls: crate::sim::params::HostStalls::NONE,
    }
}

pub(super) fn close(e: &Estimate, truth: f64, tol: f64, what: &str) {
    assert!(
        (e.value - truth).abs() <= tol * truth.abs().max(1e-9),
        "{what}: {} vs true {truth} ({e:?})",
        e.value
    );
}

fn check(p: &ModelParams, caching: bool, budget_s: u64) -> ServerProfile {
    let prof = profile(p, caching, Duration::from_secs(budget_s));
    let e = &prof.params;
    close(
        &e.step_base_ms,
        p.step_base.as_secs_f64() * 1e3,
        0.05,
        "step base",
    );
    close(
        &e.prefill_token_us,
        p.per_prefill_token.as_secs_f64() * 1e6,
        0.03,
        "prefill",
    );
    close(
        &e.decode_seq_us,
        p.per_decode_seq.as_secs_f64() * 1e6,
        0.10,
        "decode",
    );
    assert!(
        (e.prefill_interference.value - p.prefill_interference).abs() < 0.05,
        "{:?}",
        e.prefill_interference
    );
    close(
        &e.max_num_seqs,
        f64::from(p.max_num_seqs),
        0.0,
        "max_num_seqs",
    );
    close(&e.kv_cache_tokens, f64::from(p.kv_cache_tokens), 0.03, "kv");
    assert_eq!(e.prefix_caching.enabled, Some(caching));
    let context_us = p.per_context_token.as_secs_f64() * 1e6;
    if context_us > 0.0 {
        close(&e.context_token_us, context_us, 0.10, "context");
    } else {
        // Free context: what it adds to 4 decoders at 1,024 tokens stays
        // within 3% of their step.
        let step_us = p.step_base.as_secs_f64() * 1e6 + 4.0 * p.per_decode_seq.as_secs_f64() * 1e6;
        assert!(
            4.0 * 1024.0 * e.context_token_us.value <= 0.03 * step_us,
            "context {:?} on a server without a context cost",
            e.context_token_us
        );
    }
    let step_ms = p.per_prefill_step.as_secs_f64() * 1e3;
    if step_ms > 0.0 {
        close(&e.prefill_step_ms, step_ms, 0.10, "prefill step");
        assert!(
            e.prefill_step_ms.how.contains("short prompts"),
            "{:?}",
            e.prefill_step_ms
        );
    } else {
        let base_ms = p.step_base.as_secs_f64() * 1e3;
        assert!(
            e.prefill_step_ms.value <= 0.05 * base_ms,
            "prefill step {:?} on a server without one",
            e.prefill_step_ms
        );
    }
    let pair_ns = p.per_prefill_pair.as_secs_f64() * 1e9;
    if pair_ns > 0.0 {
        close(&e.prefill_pair_ns, pair_ns, 0.10, "prefill pair");
    } else {
        // Linear prefill: the pair cost adds at most 3% to a 2,048-token
        // prompt's prefill.
        let n = 2048.0;
        assert!(
            e.prefill_pair_ns.value * 1e-3 * n * (n + 1.0) / 2.0
                <= 0.03 * e.prefill_token_us.value * n,
            "pair {:?} on a server whose prefill is linear",
            e.prefill_pair_ns
        );
    }
    prof
}

/// vLLM on CPU: each prompt token attends over the ones before it, 100 ns
/// a pair beside 280 µs a token (a lone line read 376-420 µs), and a step
/// computing prompt tokens costs 50 ms more than a decode step.
#[test]
fn a_prefill_quadratic_in_the_prompt_comes_back() {
    let p = ModelParams {
        per_prefill_pair: Duration::from_nanos(100),
        per_prefill_step: Duration::from_millis(50),
        stalls: crate::sim::params::HostStalls::NONE,
        ..params(64, 40, 280, 900, 93_184, 1.0)
    };
    check(&p, true, 90);
}

#[test]
fn a_shared_step_server_comes_back() {
    let prof = check(&params(16, 10, 100, 200, 40_000, 1.0), true, 60);
    assert_eq!(prof.params.max_num_seqs.status, Status::Measured);
}

#[test]
fn a_partly_overlapped_server_without_prefix_caching_comes_back() {
    check(&params(8, 20, 500, 300, 30_000, 0.3), false, 120);
}

#[test]
fn a_disaggregated_server_with_a_wide_batch_comes_back() {
    check(&params(64, 5, 20, 50, 200_000, 0.0), true, 60);
}

#[test]
fn a_server_slower_with_context_comes_back() {
    let p = ModelParams {
        per_context_token: Duration::from_micros(5),
        ..params(64, 30, 400, 800, 200_000, 1.0)
    };
    check(&p, true, 90);
}

/// Slow prefill, mostly hidden from the decoders (α = 0.12): the long
/// prompts' prefill lasts most of the long-context level (recovery set 9,
/// where it read as 0.41 µs a context token).
#[test]
fn a_slow_hidden_prefill_is_not_read_as_a_context_cost() {
    check(&params(68, 9, 634, 525, 67_000, 0.12), false, 30);
}

/// Slow prefill and a small batch limit: the long-context level's few
/// streams, a wave of prefills, are not the batch limit (recovery set 5,
/// where max_num_seqs read 9 of 20).
#[test]
fn a_long_context_level_does_not_read_as_the_batch_limit() {
    check(&params(20, 8, 639, 67, 48_000, 0.38), false, 30);
}

#[test]
fn a_context_per_slot_without_a_kv_gauge_gives_the_slots_context() {
    // llama.cpp: 6 slots of 2048 tokens each, no KV gauge, no max_model_len.
    let budget = Duration::from_secs(60);
    let mut obs = observations(&params(6, 10, 300, 400, 12_288, 1.0), true, budget);
    obs.kv_points.clear();
    obs.max_model_len = None;
    let unknown = fit(&obs, header(budget));
    assert_eq!(unknown.params.kv_cache_tokens.status, Status::LowerBound);
    obs.slot_context = Some(2048);
    let prof = fit(&obs, header(budget));
    let (kv, len) = (&prof.params.kv_cache_tokens, &prof.params.max_model_len);
    assert_eq!(
        (kv.status, kv.value),
        (Status::Reported, 12_288.0),
        "{kv:?}"
    );
    assert_eq!(
        (len.status, len.value),
        (Status::Reported, 2048.0),
        "{len:?}"
    );
    assert!(!prof
        .warnings
        .iter()
        .any(|w| w.contains("KV capacity unknown")));
}

/// Issue 38's probes of vLLM 0.32 on CPU: a repeated top batch at the
/// batch limit, a bent step and a bent KV gauge. Every fitted parameter
/// comes out with a finite standard error below its value, or marked not
/// identifiable with the reason (and a warning naming it).
#[test]
fn every_fitted_parameter_is_pinned_down_or_named_not_identifiable() {
    let p = params(16, 10, 150, 200, 50_000, 1.0);
    let mut obs = observations(&p, true, Duration::from_secs(20));
    obs.decode = crate::twin::testing::vllm_levels();
    obs.kv_points = crate::twin::testing::vllm_kv_points();
    let prof = fit(&obs, header(Duration::from_secs(20)));
    let q = &prof.params;
    let named = [
        ("step base", &q.step_base_ms),
        ("prefill per token", &q.prefill_token_us),
        ("prefill fixed", &q.prefill_fixed_ms),
        ("decode per sequence", &q.decode_seq_us),
        ("max num seqs", &q.max_num_seqs),
        ("KV cache", &q.kv_cache_tokens),
        ("token budget", &q.max_num_batched_tokens),
        ("prefill interference", &q.prefill_interference),
    ];
    for (name, e) in named {
        match e.status {
            Status::Measured | Status::Misfit => assert!(
                e.uncertainty.is_finite() && e.uncertainty < e.value.abs(),
                "{name}: {e:?}"
            ),
            Status::NotIdentifiable => {
                let note = e.note.as_deref().unwrap_or_default();
                assert!(
                    note.starts_with("not identifiable from these probes"),
                    "{name}: {note}"
                );
                assert!(prof.warnings.iter().any(|w| w.starts_with(name)), "{name}");
            }
            _ => {}
        }
    }
    assert!(q.decode_seq_us.uncertainty < 1e4, "{:?}", q.decode_seq_us);
    assert_eq!(q.max_num_seqs.value, 128.0);
    // It reads back.
    assert_eq!(ServerProfile::from_json(&prof.to_json()), Ok(prof));
}

/// vLLM publishes its KV cache and prefix caching: the profile reports
/// them, keeps the probes' reading in `how`, and warns when the probes
/// are more than 25% off (issue 38: 93,184 reported, 17,516 probed).
#[test]
fn the_servers_own_cache_figures_are_reported_beside_the_probes() {
    let p = params(16, 10, 150, 200, 50_000, 1.0);
    let mut obs = observations(&p, true, Duration::from_secs(20));
    obs.reported_kv_tokens = Some(93_184);
    obs.reported_prefix_caching = Some(true);
    let prof = fit(&obs, header(Duration::from_secs(20)));
    let kv = &prof.params.kv_cache_tokens;
    assert_eq!((kv.status, kv.value), (Status::Reported, 93_184.0));
    assert!(kv.how.contains("the probes measured"), "{}", kv.how);
    // The simulator has 50,000 tokens: the probes see that, 46% lower.
    let w = prof
        .warnings
        .iter()
        .find(|w| w.starts_with("KV cache: the server reports 93184"))
        .unwrap_or_else(|| panic!("{:?}", prof.warnings));
    assert!(w.contains("% lower"), "{w}");
    let pc = &prof.params.prefix_caching;
    assert_eq!(pc.enabled, Some(true));
    assert!(pc.how.starts_with("enable_prefix_caching on"), "{}", pc.how);
    // Reported at 52,000 (within 25% of the probes): no warning.
    obs.reported_kv_tokens = Some(52_000);
    let close = fit(&obs, header(Duration::from_secs(20)));
    assert!(
        !close.warnings.iter().any(|w| w.starts_with("KV cache")),
        "{:?}",
        close.warnings
    );
}

//! Explains a *measured* knee from a sweep's steps: the server's gauges at
//! the first failing step (running batch against `max_num_seqs`, waiting
//! queue, KV-cache usage, the preemption counter) and which SLO failed there.
//!
//! The rules, in order:
//! 1. **Client** when the sweep stopped because the generator fell behind.
//! 2. **KV cache** when the failing step preempted (at least
//!    [`KV_PREEMPTIONS_PER_REQUEST`] per request), or requests waited while
//!    the KV cache was full and the batch had room. Full: at least
//!    [`KV_FULL`] used on average, or with no room for one more prompt in at
//!    least [`KV_BLOCKED`] of the step's gauge samples (the free tokens
//!    estimated from the usage and the running sequences' tokens: an engine
//!    admits a request only when its prompt fits, so a cache of long
//!    sequences blocks admission well below 90%).
//! 3. **Decode compute** when only token-time SLOs (TPOT, ITL) failed.
//! 4. **Batch slots** when requests waited (a mean queue of at least
//!    [`QUEUED`]) with the batch full: at `max_num_seqs` (peak) or at
//!    [`SLOTS_MEAN_FILL`] of it on average. When `max_num_seqs` is unknown,
//!    a queue with the KV cache not full is read as full slots while the
//!    steps kept their low-load length (the median TPOT less than
//!    [`SLOTS_TPOT_GROWTH`] times the lowest step's): an engine only queues
//!    for slots, KV blocks or compute, and slowed steps mean compute. With
//!    no TPOT to compare (no request finished) the binding is unknown.
//! 5. Otherwise compute: **prefill** when a TTFT SLO failed (the batch had
//!    room, so each step's compute sets the knee), **decode** when only the
//!    end-to-end latency or the throughput did and TPOT grew faster than
//!    TTFT from the lowest step to the failing one.
//!
//! Without running gauges rules 4 and 5 cannot tell slots from compute: the
//! binding is then unknown. Pure: rows in, an explanation out.

use super::explain::{KV_PREEMPTIONS_PER_REQUEST, SLOTS_MEAN_FILL};
use crate::client::scrape::QueueSample;
use crate::result::explain::{Binding, Evidence, ExplainSource, KneeExplain};
use crate::result::sweep::{KneeSummary, StepResult};
use crate::result::Verdict;
use crate::sweep::slo::{Slo, SloMetric};

/// KV-cache usage that counts as full.
pub const KV_FULL: f64 = 0.9;
/// Share of the failing step's gauge samples with requests waiting and no
/// KV room for one more prompt that counts as a full KV cache.
pub const KV_BLOCKED: f64 = 0.5;
/// Mean waiting requests that count as a queue.
pub const QUEUED: f64 = 0.5;
/// With `max_num_seqs` unknown, how many times the lowest step's median
/// TPOT the failing step's may reach for a queue to read as full slots.
pub const SLOTS_TPOT_GROWTH: f64 = 2.0;

/// The server's gauges over one step.
#[derive(Debug, Clone, Copy, Default)]
struct Gauges {
    mean_running: Option<f64>,
    peak_running: Option<f64>,
    mean_waiting: Option<f64>,
    kv_usage: Option<f64>,
    kv_blocked_share: Option<f64>,
    preemptions_per_request: Option<f64>,
}

fn mean(values: impl Iterator<Item = f64>) -> Option<f64> {
    let (n, sum) = values.fold((0usize, 0.0), |(n, s), v| (n + 1, s + v));
    (n > 0).then(|| sum / n as f64)
}

fn gauges(steps: &[StepResult], s: &StepResult) -> Gauges {
    let q = &s.queue;
    let running = || q.iter().filter_map(|x| x.running);
    let preempted = q.iter().filter_map(|x| x.preemptions);
    let delta = preempted
        .clone()
        .next_back()
        .zip(preempted.clone().next())
        .map(|(last, first)| (last - first).max(0.0));
    let requests = s.completed.max(s.n_requests).max(1) as f64;
    Gauges {
        mean_running: s.mean_running.or_else(|| mean(running())),
        peak_running: running().reduce(f64::max),
        mean_waiting: s
            .mean_waiting
            .or_else(|| mean(q.iter().filter_map(|x| x.waiting))),
        kv_usage: mean(q.iter().filter_map(|x| x.kv_cache_usage)),
        kv_blocked_share: kv_blocked_share(q, tokens(steps, s)),
        preemptions_per_request: delta.map(|d| d / requests),
    }
}

/// A request's prompt tokens and a running sequence's tokens in the KV
/// cache (its prompt and, on average, half its output), from `s`, or from
/// the other steps when none of its requests finished.
fn tokens(steps: &[StepResult], s: &StepResult) -> Option<(f64, f64)> {
    std::iter::once(s)
        .chain(steps)
        .find(|x| x.mean_input_tokens > 0.0)
        .map(|x| {
            let prompt = x.mean_input_tokens;
            (prompt, prompt + x.mean_output_tokens / 2.0)
        })
}

/// Share of the samples in which requests waited and the free KV (the
/// running sequences' tokens scaled by the usage) could not hold one more
/// prompt; `None` without the gauges or the token counts.
fn kv_blocked_share(q: &[QueueSample], tokens: Option<(f64, f64)>) -> Option<f64> {
    let (prompt, per_seq) = tokens?;
    let blocked: Vec<bool> = q
        .iter()
        .filter_map(|x| {
            let (waiting, running, kv) = (x.waiting?, x.running?, x.kv_cache_usage?);
            let free = if kv > 0.0 {
                (1.0 - kv) / kv * running * per_seq
            } else {
                f64::INFINITY
            };
            Some(waiting >= 1.0 && free < prompt)
        })
        .collect();
    let n = blocked.len();
    (n > 0).then(|| blocked.iter().filter(|b| **b).count() as f64 / n as f64)
}

/// A load as the step lines print it: two decimals, trailing zeros dropped
/// (a bisected load such as 16.79381908304497 reads 16.79).
fn rate(x: f64) -> String {
    let s = format!("{x:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// Whether an SLO string bounds a token time (TPOT, ITL).
fn is_token_time(slo: &str) -> bool {
    slo.parse::<Slo>()
        .is_ok_and(|s| matches!(s.metric, SloMetric::Tpot | SloMetric::Itl))
}

fn is_ttft(slo: &str) -> bool {
    slo.parse::<Slo>()
        .is_ok_and(|s| matches!(s.metric, SloMetric::Ttft | SloMetric::Ttfo))
}

/// Explains the knee of a sweep's `steps` (`knee` as the search reported
/// it); `max_num_seqs` when the server's batch limit is known. `None` when
/// no step failed (there is no knee to explain yet).
pub fn explain_measured(
    steps: &[StepResult],
    knee: &KneeSummary,
    max_num_seqs: Option<u32>,
) -> Option<KneeExplain> {
    if knee.bounded_by_generator {
        return Some(client(knee));
    }
    let fail_at = knee.first_fail?;
    let fail = steps
        .iter()
        .rev()
        .find(|s| s.load == fail_at && s.verdict == Verdict::Fail)?;
    let g = gauges(steps, fail);
    let failed_slos: Vec<String> = fail
        .slo_outcomes
        .iter()
        .filter(|o| !o.pass)
        .map(|o| o.slo.clone())
        .collect();
    let (binds, why) = rule(steps, fail, &g, &failed_slos, max_num_seqs);
    let above = if failed_slos.is_empty() {
        "the server fell behind".to_string()
    } else {
        format!("{} failed", failed_slos.join(" and "))
    };
    Some(KneeExplain {
        binds,
        source: ExplainSource::Gauges,
        line: format!(
            "{}: {why}; at {} req/s {above}",
            binds.label(),
            rate(fail_at)
        ),
        failed_slos,
        evidence: Evidence {
            mean_running: g.mean_running,
            max_num_seqs,
            mean_waiting: g.mean_waiting,
            kv_usage: g.kv_usage,
            kv_blocked_share: g.kv_blocked_share,
            preemptions_per_request: g.preemptions_per_request,
            ..Evidence::default()
        },
        moves: None,
    })
}

fn client(knee: &KneeSummary) -> KneeExplain {
    let at = knee
        .first_fail
        .or(knee.last_pass)
        .map_or(String::new(), |l| format!(" at {} req/s", rate(l)));
    KneeExplain {
        binds: Binding::Client,
        source: ExplainSource::Gauges,
        line: format!(
            "{}: the load generator could not keep to its schedule{at}; the server's knee is higher",
            Binding::Client.label()
        ),
        failed_slos: Vec::new(),
        evidence: Evidence::default(),
        moves: None,
    }
}

/// What the failing step's gauges say, read once for the rules.
struct Reading {
    /// `12.0 of 32 running`, `4.0 running` or `no running gauge`.
    running: String,
    waiting: f64,
    kv: f64,
    preempts: f64,
    /// Requests waited with the KV cache full (module docs, rule 2).
    kv_full: bool,
    /// How many times the lowest step's median TPOT the failing step's is.
    slowed: Option<f64>,
    /// The batch was full; `None` when that cannot be told (rule 4).
    batch_full: Option<bool>,
}

fn read(steps: &[StepResult], fail: &StepResult, g: &Gauges, max: Option<u32>) -> Reading {
    let waiting = g.mean_waiting.unwrap_or(0.0);
    let kv = g.kv_usage.unwrap_or(0.0);
    let blocked = g.kv_blocked_share.unwrap_or(0.0);
    let kv_full = waiting >= QUEUED && (kv >= KV_FULL || blocked >= KV_BLOCKED);
    let slowed = tpot_growth(steps, fail);
    let batch_full = match (max.map(f64::from), g.mean_running, g.peak_running) {
        (Some(m), Some(mean), peak) => {
            Some(peak.unwrap_or(mean) >= m || mean >= SLOTS_MEAN_FILL * m)
        }
        (None, Some(_), _) if kv_full => Some(false),
        (None, Some(_), _) => slowed.map(|x| x < SLOTS_TPOT_GROWTH),
        (_, None, _) => Some(false),
    };
    Reading {
        running: match (g.mean_running, max) {
            (Some(r), Some(m)) => format!("{r:.1} of {m} running"),
            (Some(r), None) => format!("{r:.1} running"),
            (None, _) => "no running gauge".to_string(),
        },
        waiting,
        kv,
        preempts: g.preemptions_per_request.unwrap_or(0.0),
        kv_full,
        slowed,
        batch_full,
    }
}

/// The binding at the failing step and why (the module docs' rules 2–5).
fn rule(
    steps: &[StepResult],
    fail: &StepResult,
    g: &Gauges,
    failed: &[String],
    max_num_seqs: Option<u32>,
) -> (Binding, String) {
    let r = read(steps, fail, g, max_num_seqs);
    let (running, waiting) = (&r.running, r.waiting);
    if r.preempts >= KV_PREEMPTIONS_PER_REQUEST || (r.kv_full && r.batch_full != Some(true)) {
        let no_room = g
            .kv_blocked_share
            .filter(|s| *s > 0.0)
            .map_or(String::new(), |s| {
                format!(", no room for another prompt {:.0}% of the time", s * 100.0)
            });
        let why = format!(
            "{:.0}% used{no_room}, {:.2} preemptions per request, {waiting:.1} waiting ({running})",
            r.kv * 100.0,
            r.preempts
        );
        return (Binding::KvCache, why);
    }
    if !failed.is_empty() && failed.iter().all(|s| is_token_time(s)) {
        return (
            Binding::DecodeCompute,
            format!("a token-time SLO failed with {running}"),
        );
    }
    if waiting >= QUEUED {
        match r.batch_full {
            Some(true) => {
                return (
                    Binding::BatchSlots,
                    format!("{running}, {waiting:.1} waiting for a slot"),
                )
            }
            None => return (
                Binding::Unknown,
                format!("{running}, {waiting:.1} waiting, the batch limit unknown and no request finished to show whether the steps slowed"),
            ),
            Some(false) => {}
        }
    }
    if g.mean_running.is_none() {
        return (
            Binding::Unknown,
            "the server exported no running gauge".to_string(),
        );
    }
    compute(steps, fail, &r, failed, max_num_seqs.is_some())
}

/// Rule 5: the batch had room, so compute binds.
fn compute(
    steps: &[StepResult],
    fail: &StepResult,
    r: &Reading,
    failed: &[String],
    max_known: bool,
) -> (Binding, String) {
    let (running, waiting) = (&r.running, r.waiting);
    let room = match r.slowed {
        Some(x) if !max_known => format!(
            "the steps slowed {x:.1}× from the lowest step's ({running}, {waiting:.1} waiting)"
        ),
        _ => format!("the batch had room ({running}, {waiting:.1} waiting)"),
    };
    if failed.iter().any(|s| is_ttft(s)) || !tpot_grew_faster(steps, fail) {
        (
            Binding::PrefillCompute,
            format!("{room}; the time to first token grew"),
        )
    } else {
        (
            Binding::DecodeCompute,
            format!("{room}; the time per output token grew"),
        )
    }
}

/// The lowest step, when it is below `fail`.
fn lowest<'a>(steps: &'a [StepResult], fail: &StepResult) -> Option<&'a StepResult> {
    steps
        .iter()
        .min_by(|a, b| a.load.total_cmp(&b.load))
        .filter(|s| s.load < fail.load)
}

/// How many times the lowest step's median TPOT the failing step's is;
/// `None` when either has none.
fn tpot_growth(steps: &[StepResult], fail: &StepResult) -> Option<f64> {
    let first = lowest(steps, fail)?;
    let (a, b) = (&first.tpot_ms, &fail.tpot_ms);
    (a.count > 0 && b.count > 0 && a.p50 > 0.0).then(|| b.p50 / a.p50)
}

/// Whether the median TPOT grew by a larger factor than the median TTFT
/// from the lowest step to `fail`.
fn tpot_grew_faster(steps: &[StepResult], fail: &StepResult) -> bool {
    let Some(first) = lowest(steps, fail) else {
        return false;
    };
    let growth = |a: f64, b: f64| if a > 0.0 { b / a } else { 1.0 };
    growth(first.tpot_ms.p50, fail.tpot_ms.p50) > growth(first.ttft_ms.p50, fail.ttft_ms.p50)
}

#[cfg(test)]
#[path = "measured_tests.rs"]
mod tests;

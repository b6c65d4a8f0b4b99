//! Explains a *measured* knee from a sweep's steps: the server's gauges at
//! the first failing step (running batch against `max_num_seqs`, waiting
//! queue, KV-cache usage, the preemption counter) and which SLO failed there.
//!
//! The rules, in order:
//! 1. **Client** when the sweep stopped because the generator fell behind.
//! 2. **KV cache** when the failing step preempted (at least
//!    [`KV_PREEMPTIONS_PER_REQUEST`] per request) or requests waited while
//!    the KV cache was at least [`KV_FULL`] used and the batch had room.
//! 3. **Decode compute** when only token-time SLOs (TPOT, ITL) failed.
//! 4. **Batch slots** when requests waited (a mean queue of at least
//!    [`QUEUED`]) with the batch full: at `max_num_seqs` (peak) or at
//!    [`SLOTS_MEAN_FILL`] of it on average; when `max_num_seqs` is unknown, a
//!    queue with the KV cache not full is read as full slots (an engine only
//!    queues for slots, KV blocks or token budget).
//! 5. Otherwise compute: **prefill** when a TTFT SLO failed (the batch had
//!    room, so each step's compute sets the knee), **decode** when only the
//!    end-to-end latency or the throughput did and TPOT grew faster than
//!    TTFT from the lowest step to the failing one.
//!
//! Without running gauges rules 4 and 5 cannot tell slots from compute: the
//! binding is then unknown. Pure: rows in, an explanation out.

use super::explain::{KV_PREEMPTIONS_PER_REQUEST, SLOTS_MEAN_FILL};
use crate::result::explain::{Binding, Evidence, ExplainSource, KneeExplain};
use crate::result::sweep::{KneeSummary, StepResult};
use crate::result::Verdict;
use crate::sweep::slo::{Slo, SloMetric};

/// KV-cache usage that counts as full.
pub const KV_FULL: f64 = 0.9;
/// Mean waiting requests that count as a queue.
pub const QUEUED: f64 = 0.5;

/// The server's gauges over one step.
#[derive(Debug, Clone, Copy, Default)]
struct Gauges {
    mean_running: Option<f64>,
    peak_running: Option<f64>,
    mean_waiting: Option<f64>,
    kv_usage: Option<f64>,
    preemptions_per_request: Option<f64>,
}

fn mean(values: impl Iterator<Item = f64>) -> Option<f64> {
    let (n, sum) = values.fold((0usize, 0.0), |(n, s), v| (n + 1, s + v));
    (n > 0).then(|| sum / n as f64)
}

fn gauges(s: &StepResult) -> Gauges {
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
        preemptions_per_request: delta.map(|d| d / requests),
    }
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
    let g = gauges(fail);
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
        line: format!("{}: {why}; at {fail_at} req/s {above}", binds.label()),
        failed_slos,
        evidence: Evidence {
            mean_running: g.mean_running,
            max_num_seqs,
            mean_waiting: g.mean_waiting,
            kv_usage: g.kv_usage,
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
        .map_or(String::new(), |l| format!(" at {l} req/s"));
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

/// The binding at the failing step and why (the module docs' rules 2–5).
fn rule(
    steps: &[StepResult],
    fail: &StepResult,
    g: &Gauges,
    failed: &[String],
    max_num_seqs: Option<u32>,
) -> (Binding, String) {
    let running = match (g.mean_running, max_num_seqs) {
        (Some(r), Some(m)) => format!("{r:.1} of {m} running"),
        (Some(r), None) => format!("{r:.1} running"),
        (None, _) => "no running gauge".to_string(),
    };
    let waiting = g.mean_waiting.unwrap_or(0.0);
    let kv = g.kv_usage.unwrap_or(0.0);
    let preempts = g.preemptions_per_request.unwrap_or(0.0);
    let batch_full = match (max_num_seqs.map(f64::from), g.mean_running, g.peak_running) {
        (Some(m), Some(mean), peak) => peak.unwrap_or(mean) >= m || mean >= SLOTS_MEAN_FILL * m,
        (None, Some(_), _) => kv < KV_FULL,
        (_, None, _) => false,
    };
    if preempts >= KV_PREEMPTIONS_PER_REQUEST || (waiting >= QUEUED && kv >= KV_FULL && !batch_full)
    {
        let why = format!(
            "KV cache {:.0}% used, {preempts:.2} preemptions per request, {waiting:.1} waiting ({running})",
            kv * 100.0
        );
        return (Binding::KvCache, why);
    }
    if !failed.is_empty() && failed.iter().all(|s| is_token_time(s)) {
        return (
            Binding::DecodeCompute,
            format!("a token-time SLO failed with {running}"),
        );
    }
    if waiting >= QUEUED && batch_full {
        return (
            Binding::BatchSlots,
            format!("{running}, {waiting:.1} waiting for a slot"),
        );
    }
    if g.mean_running.is_none() {
        return (
            Binding::Unknown,
            "the server exported no running gauge".to_string(),
        );
    }
    let room = format!("the batch had room ({running}, {waiting:.1} waiting)");
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

/// Whether the median TPOT grew by a larger factor than the median TTFT
/// from the lowest step to `fail`.
fn tpot_grew_faster(steps: &[StepResult], fail: &StepResult) -> bool {
    let Some(first) = steps.iter().min_by(|a, b| a.load.total_cmp(&b.load)) else {
        return false;
    };
    let growth = |a: f64, b: f64| if a > 0.0 { b / a } else { 1.0 };
    growth(first.tpot_ms.p50, fail.tpot_ms.p50) > growth(first.ttft_ms.p50, fail.ttft_ms.p50)
}

#[cfg(test)]
#[path = "measured_tests.rs"]
mod tests;

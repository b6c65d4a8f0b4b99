//! The measured explanation on synthetic step rows: four servers, each bound
//! by one resource, as their gauges would show it.

use super::*;
use crate::client::scrape::QueueSample;
use crate::result::sweep::{Dist, SloOutcomeRow};

/// What the server's gauges read during a step (constant over its samples,
/// the preemption counter rising by `preempted` in all).
#[derive(Clone, Copy, Default)]
struct Read {
    running: f64,
    waiting: f64,
    kv: f64,
    preempted: f64,
}

fn dist(p50: f64) -> Dist {
    Dist {
        count: 100,
        mean: p50,
        p50,
        p90: p50,
        p99: p50,
        p999: p50,
        max: p50,
    }
}

fn step(
    load: f64,
    pass: bool,
    failed: &[&str],
    read: Read,
    (ttft, tpot): (f64, f64),
) -> StepResult {
    let queue = (0..=10)
        .map(|i| QueueSample {
            t_s: f64::from(i),
            waiting: Some(read.waiting),
            running: Some(read.running),
            kv_cache_usage: Some(read.kv),
            preemptions: Some(100.0 + read.preempted * f64::from(i) / 10.0),
        })
        .collect();
    StepResult {
        load,
        verdict: if pass { Verdict::Pass } else { Verdict::Fail },
        completed: 1_000,
        n_requests: 1_000,
        slo_outcomes: failed
            .iter()
            .map(|s| SloOutcomeRow {
                slo: s.to_string(),
                pass,
                ..SloOutcomeRow::default()
            })
            .collect(),
        queue,
        ttft_ms: dist(ttft),
        tpot_ms: dist(tpot),
        ..StepResult::default()
    }
}

/// A sweep at 5, 10 and 12 req/s whose 12 fails `failed` with `read`.
fn sweep(failed: &[&str], read: Read, latency: (f64, f64)) -> (Vec<StepResult>, KneeSummary) {
    let quiet = Read {
        running: 3.0,
        kv: 0.1,
        ..Read::default()
    };
    let steps = vec![
        step(5.0, true, failed, quiet, (50.0, 10.0)),
        step(10.0, true, failed, quiet, (60.0, 11.0)),
        step(12.0, false, failed, read, latency),
    ];
    let knee = KneeSummary {
        last_pass: Some(10.0),
        first_fail: Some(12.0),
        ..KneeSummary::default()
    };
    (steps, knee)
}

fn binds(failed: &[&str], read: Read, latency: (f64, f64), max: Option<u32>) -> KneeExplain {
    let (steps, knee) = sweep(failed, read, latency);
    explain_measured(&steps, &knee, max).unwrap()
}

const TTFT: &[&str] = &["p99_ttft_ms<=500"];
const TPOT: &[&str] = &["p99_tpot_ms<=30"];

#[test]
fn four_servers_each_bound_by_one_resource_are_named_from_their_gauges() {
    let slots = Read {
        running: 32.0,
        waiting: 12.0,
        kv: 0.4,
        ..Read::default()
    };
    let kv = Read {
        running: 18.0,
        waiting: 30.0,
        kv: 0.97,
        preempted: 80.0,
    };
    let prefill = Read {
        running: 6.0,
        kv: 0.2,
        ..Read::default()
    };
    let tpot = Read {
        running: 40.0,
        kv: 0.5,
        ..Read::default()
    };
    for (name, failed, read, latency, want) in [
        ("slots", TTFT, slots, (900.0, 12.0), Binding::BatchSlots),
        ("kv", TTFT, kv, (900.0, 30.0), Binding::KvCache),
        (
            "prefill",
            TTFT,
            prefill,
            (900.0, 12.0),
            Binding::PrefillCompute,
        ),
        ("tpot", TPOT, tpot, (70.0, 40.0), Binding::DecodeCompute),
    ] {
        let max = if name == "slots" { 32 } else { 256 };
        let e = binds(failed, read, latency, Some(max));
        assert_eq!(e.binds, want, "{name}: {}", e.line);
        assert_eq!(e.source, ExplainSource::Gauges);
        assert_eq!(e.failed_slos, failed, "{name}");
        assert!(e.line.starts_with(want.label()), "{name}: {}", e.line);
        assert!(e.line.ends_with("failed"), "{name}: {}", e.line);
    }
}

#[test]
fn the_evidence_is_the_failing_steps_gauges() {
    let read = Read {
        running: 18.0,
        waiting: 30.0,
        kv: 0.97,
        preempted: 80.0,
    };
    let e = binds(TTFT, read, (900.0, 30.0), Some(256));
    let ev = &e.evidence;
    assert_eq!((ev.mean_running, ev.mean_waiting), (Some(18.0), Some(30.0)));
    assert!((ev.kv_usage.unwrap() - 0.97).abs() < 1e-12);
    // The counter rose by 80 over 1000 requests.
    assert!((ev.preemptions_per_request.unwrap() - 0.08).abs() < 1e-12);
    assert!(
        e.line.contains("0.08 preemptions per request"),
        "{}",
        e.line
    );
    assert!(
        e.line.contains("at 12 req/s p99_ttft_ms<=500 failed"),
        "{}",
        e.line
    );
}

#[test]
fn a_queue_at_full_kv_without_preemptions_is_the_kv_cache_when_slots_are_free() {
    let read = Read {
        running: 20.0,
        waiting: 5.0,
        kv: 0.95,
        ..Read::default()
    };
    assert_eq!(
        binds(TTFT, read, (900.0, 12.0), Some(256)).binds,
        Binding::KvCache
    );
    // With every slot taken the queue is for a slot.
    let full = Read {
        running: 256.0,
        ..read
    };
    assert_eq!(
        binds(TTFT, full, (900.0, 12.0), Some(256)).binds,
        Binding::BatchSlots
    );
}

#[test]
fn without_max_num_seqs_a_queue_with_kv_room_reads_as_full_slots() {
    let read = Read {
        running: 4.0,
        waiting: 9.0,
        kv: 0.3,
        ..Read::default()
    };
    let e = binds(TTFT, read, (900.0, 12.0), None);
    assert_eq!(e.binds, Binding::BatchSlots, "{}", e.line);
    assert!(
        e.line.contains("4.0 running, 9.0 waiting for a slot"),
        "{}",
        e.line
    );
    // No queue: compute.
    let free = Read {
        waiting: 0.0,
        ..read
    };
    assert_eq!(
        binds(TTFT, free, (900.0, 12.0), None).binds,
        Binding::PrefillCompute
    );
}

#[test]
fn without_max_num_seqs_a_queue_behind_slowed_steps_is_compute_not_slots() {
    // A prefill-bound server: requests queue for the token budget while
    // every step carries a long prompt, so the time per output token grew
    // from 10 ms at the lowest step to 50 ms.
    let read = Read {
        running: 7.0,
        waiting: 10.0,
        kv: 0.04,
        ..Read::default()
    };
    let e = binds(TTFT, read, (900.0, 50.0), None);
    assert_eq!(e.binds, Binding::PrefillCompute, "{}", e.line);
    assert!(
        e.line
            .contains("the steps slowed 5.0× from the lowest step's"),
        "{}",
        e.line
    );
    // Just under twice the lowest step's TPOT the steps kept their length.
    let kept = binds(TTFT, read, (900.0, 19.0), None);
    assert_eq!(kept.binds, Binding::BatchSlots, "{}", kept.line);
    // No request finished at the failing step: slots or compute, unknown.
    let (mut steps, knee) = sweep(TTFT, read, (900.0, 50.0));
    steps[2].tpot_ms.count = 0;
    let e = explain_measured(&steps, &knee, None).unwrap();
    assert_eq!(e.binds, Binding::Unknown, "{}", e.line);
    // With the batch limit known, a batch with room says compute anyway.
    assert_eq!(
        explain_measured(&steps, &knee, Some(32)).unwrap().binds,
        Binding::PrefillCompute
    );
}

/// The sweep of [`sweep`] with every step's requests `prompt` tokens in,
/// `output` out.
fn with_tokens(read: Read, (prompt, output): (f64, f64), max: Option<u32>) -> KneeExplain {
    let (mut steps, knee) = sweep(TTFT, read, (900.0, 12.0));
    for s in &mut steps {
        s.mean_input_tokens = prompt;
        s.mean_output_tokens = output;
    }
    explain_measured(&steps, &knee, max).unwrap()
}

#[test]
fn a_queue_with_no_kv_room_for_the_next_prompt_is_the_kv_cache_below_90_percent() {
    // 3.8 sequences of ~992 tokens fill 85%: the free 15% (~665 tokens)
    // cannot hold another 960-token prompt.
    let read = Read {
        running: 3.8,
        waiting: 25.0,
        kv: 0.85,
        ..Read::default()
    };
    for max in [None, Some(32)] {
        let e = with_tokens(read, (960.0, 64.0), max);
        assert_eq!(e.binds, Binding::KvCache, "{max:?}: {}", e.line);
        assert_eq!(e.evidence.kv_blocked_share, Some(1.0));
        assert!(
            e.line
                .contains("no room for another prompt 100% of the time"),
            "{}",
            e.line
        );
    }
    // 20 sequences of short prompts at 85% leave room for many more: the
    // queue is for a slot.
    let short = Read {
        running: 20.0,
        ..read
    };
    let e = with_tokens(short, (64.0, 64.0), None);
    assert_eq!(e.binds, Binding::BatchSlots, "{}", e.line);
    assert_eq!(e.evidence.kv_blocked_share, Some(0.0));
}

#[test]
fn a_throughput_failure_is_decode_compute_when_tpot_grew_faster_than_ttft() {
    let read = Read {
        running: 50.0,
        kv: 0.5,
        ..Read::default()
    };
    let decode = binds(&[], read, (70.0, 40.0), Some(256));
    assert_eq!(decode.binds, Binding::DecodeCompute, "{}", decode.line);
    assert!(
        decode.line.ends_with("the server fell behind"),
        "{}",
        decode.line
    );
    let prefill = binds(&[], read, (300.0, 12.0), Some(256));
    assert_eq!(prefill.binds, Binding::PrefillCompute, "{}", prefill.line);
}

#[test]
fn a_generator_limited_sweep_is_the_client_and_no_failing_step_is_nothing() {
    let (steps, mut knee) = sweep(TTFT, Read::default(), (900.0, 12.0));
    knee.bounded_by_generator = true;
    let e = explain_measured(&steps, &knee, None).unwrap();
    assert_eq!(e.binds, Binding::Client);
    knee.bounded_by_generator = false;
    knee.first_fail = None;
    assert_eq!(explain_measured(&steps, &knee, None), None);
}

#[test]
fn without_gauges_slots_and_compute_cannot_be_told_apart() {
    let (mut steps, knee) = sweep(TTFT, Read::default(), (900.0, 12.0));
    steps[2].queue.clear();
    let e = explain_measured(&steps, &knee, Some(32)).unwrap();
    assert_eq!(e.binds, Binding::Unknown, "{}", e.line);
    // A token-time failure still says decode compute.
    let (mut steps, knee) = sweep(TPOT, Read::default(), (70.0, 40.0));
    steps[2].queue.clear();
    assert_eq!(
        explain_measured(&steps, &knee, None).unwrap().binds,
        Binding::DecodeCompute
    );
}

#[test]
fn a_bisected_load_is_printed_to_two_decimals() {
    assert_eq!(super::rate(16.79381908304497), "16.79");
    assert_eq!(super::rate(30.0), "30");
    assert_eq!(super::rate(2.5), "2.5");
}

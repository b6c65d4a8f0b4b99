//! The binding rules on synthetic utilisation.

use super::*;
use crate::result::explain::Binding;
use crate::sim::preset;
use crate::sweep::slo::Slo;
use std::time::Duration;

fn usage() -> Usage {
    Usage {
        window_s: 100.0,
        busy_share: 0.9,
        mean_running: 10.0,
        base_share: 0.4,
        prefill_share: 0.3,
        decode_share: 0.3,
        ..Usage::default()
    }
}

fn outcome(slo: &str, pass: bool) -> SloOutcome {
    let slo: Slo = slo.parse().unwrap();
    SloOutcome {
        pass,
        ..crate::sweep::slo::evaluate(&slo, &[])
    }
}

fn binds(u: &Usage, failed: &[&str]) -> Binding {
    let at_fail: Vec<SloOutcome> = failed.iter().map(|s| outcome(s, false)).collect();
    binding(&AtKnee {
        usage: u,
        max_num_seqs: 32,
        rate: 10.0,
        at_fail: &at_fail,
        fail_kept_up: true,
    })
}

#[test]
fn preemptions_or_kv_blocked_admission_name_the_kv_cache() {
    // 1000 requests over the window: 10 preemptions is 0.01 per request.
    let preempting = Usage {
        preemptions: 10,
        ..usage()
    };
    assert_eq!(binds(&preempting, &["p99_ttft_ms<=1"]), Binding::KvCache);
    let rare = Usage {
        preemptions: 9,
        ..usage()
    };
    assert_ne!(binds(&rare, &["p99_ttft_ms<=1"]), Binding::KvCache);
    let blocked = Usage {
        kv_blocked_share: 0.05,
        ..usage()
    };
    assert_eq!(binds(&blocked, &["p99_tpot_ms<=1"]), Binding::KvCache);
}

#[test]
fn pressed_slots_bind_a_ttft_knee_when_the_fixed_cost_leads() {
    let full = Usage {
        full_slots_share: 0.2,
        ..usage()
    };
    assert_eq!(binds(&full, &["p99_ttft_ms<=1"]), Binding::BatchSlots);
    // The server falling behind (no SLO failed) is a queue too.
    assert_eq!(binds(&full, &[]), Binding::BatchSlots);
    // A mean batch of 24 of 32 is pressed as well.
    let busy = Usage {
        mean_running: 24.0,
        ..usage()
    };
    assert_eq!(binds(&busy, &["p99_e2el_ms<=1"]), Binding::BatchSlots);
    // ...but a token-time SLO is capped by a full batch, not broken by it.
    assert_eq!(binds(&full, &["p99_tpot_ms<=1"]), Binding::DecodeCompute);
}

#[test]
fn full_slots_whose_steps_are_mostly_prompt_tokens_name_prefill() {
    let u = Usage {
        full_slots_share: 0.9,
        base_share: 0.2,
        prefill_share: 0.6,
        decode_share: 0.2,
        ..usage()
    };
    assert_eq!(binds(&u, &["p99_ttft_ms<=1"]), Binding::PrefillCompute);
}

#[test]
fn free_slots_leave_compute_split_by_where_the_step_time_goes() {
    let prefill = Usage {
        base_share: 0.2,
        prefill_share: 0.61,
        decode_share: 0.19,
        ..usage()
    };
    assert_eq!(
        binds(&prefill, &["p99_ttft_ms<=1"]),
        Binding::PrefillCompute
    );
    let even = Usage {
        base_share: 0.25,
        prefill_share: 0.5,
        decode_share: 0.25,
        ..usage()
    };
    assert_eq!(binds(&even, &["p99_ttft_ms<=1"]), Binding::DecodeCompute);
}

#[test]
fn the_explanation_carries_its_evidence_and_the_failed_slos() {
    let u = Usage {
        full_slots_share: 0.5,
        mean_running: 30.0,
        ..usage()
    };
    let at_fail = [
        outcome("p99_ttft_ms<=300", false),
        outcome("p99_tpot_ms<=50", true),
    ];
    let e = explain(&AtKnee {
        usage: &u,
        max_num_seqs: 32,
        rate: 10.0,
        at_fail: &at_fail,
        fail_kept_up: true,
    });
    assert_eq!(e.binds, Binding::BatchSlots);
    assert_eq!(e.failed_slos, vec!["p99_ttft_ms<=300".to_string()]);
    assert_eq!(e.evidence.mean_running, Some(30.0));
    assert_eq!(e.evidence.max_num_seqs, Some(32));
    assert!(
        e.line.starts_with("batch slots full: 30.0 of 32 running"),
        "{}",
        e.line
    );
    assert!(
        e.line.ends_with("above it p99_ttft_ms<=300 fails"),
        "{}",
        e.line
    );
}

#[test]
fn knobs_scale_their_parameter_and_keep_the_rest() {
    let p = preset::tiny();
    let slots = Knob::MaxNumSeqs.scaled(&p, 1.25);
    assert_eq!(slots.max_num_seqs, 40);
    assert_eq!(
        ModelParams {
            max_num_seqs: 32,
            ..slots
        },
        p
    );
    let kv = Knob::KvCacheTokens.scaled(&p, 0.2);
    assert_eq!((kv.kv_cache_tokens, kv.max_model_len), (3_277, 3_277));
    let prefill = Knob::PrefillTokenUs.scaled(&p, 0.75);
    assert_eq!(prefill.per_prefill_token, Duration::from_nanos(3_750));
    assert!((Knob::PrefillTokenUs.value(&prefill) - 3.75).abs() < 1e-9);
    assert_eq!(Knob::StepBaseMs.value(&p), 5.0);
    assert_eq!(
        Knob::DecodeSeqUs.scaled(&p, 2.0).per_decode_seq,
        Duration::from_micros(100)
    );
    let decode_heavy = Usage {
        base_share: 0.3,
        decode_share: 0.5,
        ..usage()
    };
    assert_eq!(
        Knob::for_binding(Binding::DecodeCompute, &decode_heavy),
        Some(Knob::DecodeSeqUs)
    );
    assert_eq!(
        Knob::for_binding(Binding::DecodeCompute, &usage()),
        Some(Knob::StepBaseMs)
    );
    assert_eq!(Knob::for_binding(Binding::Unknown, &usage()), None);
}

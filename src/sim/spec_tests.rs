//! Unit tests of speculative decoding in the engine model: the seeded acceptance, the cost rule, the counters.
use super::*;

fn params() -> ModelParams {
    ModelParams {
        max_num_seqs: 64,
        max_num_batched_tokens: 2048,
        kv_cache_tokens: 100_000,
        max_model_len: 4096,
        step_base: Duration::from_millis(10),
        per_prefill_token: Duration::from_micros(10),
        per_decode_seq: Duration::from_micros(100),
        prefill_interference: 1.0,
        block_tokens: crate::sim::blocks::BLOCK_TOKENS,
        per_context_token: std::time::Duration::ZERO,
        per_request: std::time::Duration::ZERO,
        per_prefill_pair: std::time::Duration::ZERO,
        per_prefill_step: std::time::Duration::ZERO,
        stalls: crate::sim::params::HostStalls::NONE,
    }
}

/// Mean drafts accepted over many draws (requests × steps) under `seed`.
fn mean_accepted(spec: &SpecDecode, seed: u64) -> f64 {
    let mut sum = 0u64;
    let n = 200 * 100;
    for id in 0..200u64 {
        for generated in 1..=100u32 {
            sum += u64::from(spec.accepted(seed, id, generated, spec.draft_tokens));
        }
    }
    sum as f64 / f64::from(n)
}

#[test]
fn the_mean_accepted_per_step_approaches_the_geometric_sum() {
    for (k, p) in [(1, 0.5), (3, 0.7), (4, 0.8), (8, 0.9), (5, 0.0), (2, 1.0)] {
        let spec = SpecDecode::new(k, p);
        let want: f64 = (1..=k).map(|i| p.powi(i as i32)).sum();
        assert!((spec.expected_accepted() - want).abs() < 1e-12);
        for seed in [0, 7] {
            let got = mean_accepted(&spec, seed);
            // 20,000 draws: the standard error is below 0.02 for every case.
            assert!(
                (got - want).abs() < 0.06,
                "K={k} P={p} seed {seed}: mean {got}, expected {want}"
            );
        }
    }
}

#[test]
fn draws_are_reproducible_and_depend_on_the_seed() {
    let spec = SpecDecode::new(4, 0.6);
    let run = |seed| -> Vec<u32> {
        (0..500)
            .map(|i| spec.accepted(seed, i % 50, (i / 50) as u32, 4))
            .collect()
    };
    assert_eq!(run(3), run(3));
    assert_ne!(run(3), run(4));
    assert!(run(3).iter().all(|&a| a <= 4));
    // Fewer drafts than K (a cut token budget) cap the count.
    assert!((0..500).all(|i| spec.accepted(3, i, 1, 2) <= 2));
}

#[test]
fn acceptance_stops_at_the_first_rejection() {
    // Position i is accepted only if every earlier one was: the count of
    // draws accepting more than i falls with i, geometrically.
    let spec = SpecDecode::new(6, 0.5);
    let mut c = SpecCounters::default();
    for id in 0..4000 {
        c.observe(6, spec.accepted(11, id, 1, 6));
    }
    let per = &c.accepted_per_pos[..6];
    assert!(per.windows(2).all(|w| w[0] >= w[1]), "{per:?}");
    let ratio = per[1] as f64 / per[0] as f64;
    assert!((ratio - 0.5).abs() < 0.07, "{per:?}");
    assert_eq!(c.accepted_tokens, per.iter().sum::<u64>());
    assert_eq!((c.drafts, c.draft_tokens), (4000, 24_000));
}

#[test]
fn the_cost_rule_charges_drafting_and_verifying() {
    let p = params();
    let spec = SpecDecode::new(4, 0.7);
    assert_eq!(spec.step_overhead(&p, 3, 0), Duration::ZERO);
    // D = 2, S = 8: 4 × 0.1 × (10 + 0.1 × 2) ms + 0.35 × 0.1 ms × 8.
    let want = 4.0 * 0.1 * 10.2e-3 + 0.35 * 0.1e-3 * 8.0;
    let got = spec.step_overhead(&p, 2, 8).as_secs_f64();
    assert!((got - want).abs() < 1e-9, "{got} vs {want}");
    // Free drafting and verifying cost nothing.
    let free = SpecDecode {
        draft_cost: 0.0,
        verify_cost: 0.0,
        ..spec
    };
    assert_eq!(free.step_overhead(&p, 2, 8), Duration::ZERO);
    // The relative overhead is larger on a full batch than on one sequence.
    let rel = |d: u64| {
        spec.step_overhead(&p, d, 4 * d).as_secs_f64() / p.batch_step_time(0, d).as_secs_f64()
    };
    assert!(rel(64) > rel(1), "{} vs {}", rel(64), rel(1));
}

#[test]
fn invalid_parameters_name_their_flag() {
    let bad = [
        (SpecDecode::new(0, 0.5), "--spec-draft-tokens"),
        (SpecDecode::new(17, 0.5), "--spec-draft-tokens"),
        (SpecDecode::new(2, 1.5), "--spec-acceptance"),
        (SpecDecode::new(2, f64::NAN), "--spec-acceptance"),
        (
            SpecDecode {
                draft_cost: -1.0,
                ..SpecDecode::new(2, 0.5)
            },
            "--spec-draft-cost",
        ),
        (
            SpecDecode {
                verify_cost: f64::INFINITY,
                ..SpecDecode::new(2, 0.5)
            },
            "--spec-verify-cost",
        ),
    ];
    for (spec, flag) in bad {
        let err = spec.validate().unwrap_err();
        assert!(err.starts_with(flag), "{err}");
    }
    assert_eq!(SpecDecode::new(16, 0.0).validate(), Ok(()));
}

mod engine {
    use super::*;
    use crate::sim::model::{Engine, EventKind};

    /// Runs one request of `prompt` in, `out` out alone with `spec`; the
    /// (tokens emitted, step duration) of each step, the drafts reported in
    /// events, and the engine. Checks the KV in use after every step.
    fn lone(
        spec: SpecDecode,
        prompt: u32,
        out: u32,
    ) -> (Vec<(u32, Duration)>, SpecCounters, Engine) {
        let mut engine = Engine::new(params())
            .with_prefix_caching(false)
            .with_speculation(Some(spec), 5);
        engine.submit(0, prompt, out, Duration::ZERO);
        let (mut steps, mut seen, mut now, mut generated) =
            (Vec::new(), SpecCounters::default(), Duration::ZERO, 0);
        while let Some(step) = engine.step(now) {
            for ev in &step.events {
                match ev.kind {
                    EventKind::Drafted { drafts, accepted } => seen.observe(drafts, accepted),
                    EventKind::Token { index, .. } => {
                        steps.push((index - generated, step.duration));
                        generated = index;
                    }
                    _ => {}
                }
            }
            if !engine.is_idle() {
                // The sequence keeps the KV of its prompt and of every token
                // but the newest (rejected drafts gave theirs back).
                assert_eq!(engine.kv_used(), u64::from(prompt + generated - 1));
            }
            now = step.end();
        }
        assert_eq!(engine.kv_used(), 0, "everything freed at the end");
        assert_eq!(generated, out);
        (steps, seen, engine)
    }

    #[test]
    fn always_accepted_drafts_emit_one_plus_k_tokens_a_step() {
        let spec = SpecDecode::new(4, 1.0);
        let (steps, seen, engine) = lone(spec, 100, 20);
        let emitted: Vec<u32> = steps.iter().map(|s| s.0).collect();
        // The prefill's first token, then 5 a step, the last step cut at the target.
        assert_eq!(emitted, [1, 5, 5, 5, 4]);
        let c = engine.counters();
        assert_eq!(c.spec, seen, "the counters are the events' sum");
        assert_eq!(
            (c.spec.drafts, c.spec.draft_tokens, c.spec.accepted_tokens),
            (4, 16, 16)
        );
        assert_eq!(&c.spec.accepted_per_pos[..5], &[4, 4, 4, 4, 0]);
        assert_eq!(c.generation_tokens, 20);
        // A decode step lasts the plain step time plus the cost rule's overhead.
        let p = params();
        assert_eq!(
            steps[1].1,
            p.batch_step_time(0, 1) + spec.step_overhead(&p, 1, 4)
        );
        assert_eq!(
            steps[0].1,
            p.batch_step_time(100, 0),
            "no drafting in a prefill step"
        );
    }

    #[test]
    fn never_accepted_drafts_emit_one_token_a_step_at_a_higher_cost() {
        let spec = SpecDecode::new(3, 0.0);
        let (steps, seen, _) = lone(spec, 10, 8);
        assert!(steps.iter().all(|s| s.0 == 1));
        assert_eq!(
            (seen.drafts, seen.draft_tokens, seen.accepted_tokens),
            (7, 21, 0)
        );
        let p = params();
        assert!(steps[1].1 > p.batch_step_time(0, 1));
    }

    #[test]
    fn a_seeded_engine_replays_and_the_counters_sum_its_drafts() {
        let spec = SpecDecode::new(4, 0.6);
        let run = || {
            let mut engine = Engine::new(params()).with_speculation(Some(spec), 9);
            for id in 0..16 {
                engine.submit(id, 64, 50, Duration::ZERO);
            }
            let (mut now, mut seen) = (Duration::ZERO, SpecCounters::default());
            while let Some(step) = engine.step(now) {
                for ev in &step.events {
                    if let EventKind::Drafted { drafts, accepted } = ev.kind {
                        seen.observe(drafts, accepted);
                    }
                }
                now = step.end();
            }
            assert_eq!(engine.counters().spec, seen);
            assert_eq!(engine.counters().generation_tokens, 16 * 50);
            (seen, now)
        };
        let (a, b) = (run(), run());
        assert_eq!(a, b);
        // 16 requests of 49 decode tokens at about 1 + 1.35 tokens a draft.
        let per_draft = 1.0 + a.0.accepted_tokens as f64 / a.0.drafts as f64;
        assert!((1.7..=3.0).contains(&per_draft), "{per_draft}");
    }
}

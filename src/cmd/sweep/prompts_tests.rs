//! Unit tests of the steps' prompt windows and the prefix-cache warnings.

use super::*;
use crate::result::PrefixCacheStats;

fn file_source(distinct: usize, per_step: usize, steps: usize) -> Prompts {
    Prompts {
        source: Source::Window(Arc::new(Vec::new())),
        per_step,
        steps,
        distinct: Some(distinct),
        sharing: None,
    }
}

#[test]
fn a_file_gives_disjoint_windows_until_it_runs_out_and_the_warning_counts_the_rest() {
    // 2,500 distinct prompts, 1,000 a step, 7 steps: steps 0 and 1 get
    // their own; step 2 would need rows 2,000..3,000 and wraps into step 0's.
    let p = file_source(2500, 1000, 7);
    let windows: Vec<(usize, PromptDraw)> = (0..7).map(|k| p.window(Which::Step(k))).collect();
    assert_eq!(windows[0], (0, PromptDraw::Fresh));
    assert_eq!(windows[1], (1000, PromptDraw::Fresh));
    assert_eq!(windows[2], (2000, PromptDraw::Repeated));
    assert_eq!(windows[3], (500, PromptDraw::Repeated));
    let repeated = windows
        .iter()
        .filter(|w| w.1 == PromptDraw::Repeated)
        .count();
    let line = repeat_warning("'short.jsonl'", 2500, 1000, 7, "").unwrap();
    assert!(
        line.contains(&format!("{repeated} of the 7 steps (from step 3 on)")),
        "the warning names the {repeated} repeating steps: {line}"
    );
    assert!(
        line.contains("'short.jsonl' gives 2500 distinct prompts"),
        "{line}"
    );
    assert_eq!(line.lines().count(), 1);
}

#[test]
fn a_large_enough_dataset_is_not_warned_and_a_tiny_one_repeats_from_step_two() {
    assert_eq!(repeat_warning("f", 7000, 1000, 7, ""), None);
    let tiny = repeat_warning("f", 50, 1000, 16, "at most ").unwrap();
    assert!(
        tiny.contains("15 of the at most 16 steps (from step 2 on)"),
        "{tiny}"
    );
    let p = file_source(50, 1000, 16);
    assert_eq!(p.window(Which::Step(0)).1, PromptDraw::Fresh);
    assert_eq!(p.window(Which::Step(1)).1, PromptDraw::Repeated);
}

#[test]
fn probe_levels_take_the_windows_after_the_steps() {
    let p = file_source(100_000, 1000, 7);
    let steps: Vec<usize> = (0..7).map(|k| p.window(Which::Step(k)).0).collect();
    for j in 0..10 {
        let (start, _) = p.window(Which::Probe(j));
        assert!(start >= 7000, "probe level {j} starts at {start}");
        assert!(!steps.contains(&start));
    }
}

#[test]
fn the_hit_bound_is_a_few_percent_plus_a_chat_templates_head() {
    assert!((hit_bound(4096.0) - (0.05 + 32.0 / 4096.0)).abs() < 1e-12);
    assert!((hit_bound(128.0) - 0.30).abs() < 1e-12);
    assert_eq!(hit_bound(0.0), 0.05);
}

fn step_with_hits(queried: u64, hit: u64, mean_input: f64) -> StepResult {
    StepResult {
        load: 8.0,
        mean_input_tokens: mean_input,
        prefix_cache: Some(PrefixCacheStats::new("vllm", queried, hit)),
        ..Default::default()
    }
}

#[test]
fn hits_on_prompts_without_designed_sharing_are_warned_with_their_likely_cause() {
    let p = Prompts {
        source: Source::Seeded,
        per_step: 1000,
        steps: 7,
        distinct: None,
        sharing: None,
    };
    // 1% hits: chance collisions, no warning.
    assert_eq!(
        p.hit_warning(&step_with_hits(100_000, 1_000, 4096.0), 80),
        None
    );
    let warm = step_with_hits(100_000, 93_000, 4096.0);
    let w = p.hit_warning(&warm, 80).unwrap();
    assert!(
        w.contains("hit rate 93.0%") && w.contains("above the 5.8%"),
        "{w}"
    );
    assert!(w.contains("another client"), "{w}");
    // A step that sent more requests than it has prompts resent its own.
    let w = p.hit_warning(&warm, 1500).unwrap();
    assert!(w.contains("raise --num-prompts above 1500"), "{w}");
    // Designed sharing is never warned.
    let shared = Prompts {
        sharing: Some("--random-prefix-len"),
        ..p
    };
    assert_eq!(shared.hit_warning(&warm, 80), None);
}

//! Tests of the sonnet dataset: line counts by vLLM's arithmetic (worked
//! by hand here), the shared prefix, the length filter, seeding, errors.

use super::*;
use crate::workload::dataset::dataset_rng;
use crate::workload::tokenizer::tests::smollm2;
use crate::workload::Prompt;

/// Eight lines of 8 characters: 2 estimated tokens each. The base prompt is
/// 53 characters: 14 estimated tokens.
const EVEN: &str = "line-a1\nline-b2\nline-c3\nline-d4\nline-e5\nline-f6\nline-g7\nline-h8\n";

fn params(input_len: u32, prefix_len: u32) -> SonnetParams {
    SonnetParams {
        input_len,
        output_len: 7,
        prefix_len,
    }
}

fn text(r: &RequestSpec) -> &str {
    match &r.prompt {
        Prompt::Text(t) => t,
        other => panic!("sonnet prompts are text, got {other:?}"),
    }
}

/// The lines after the base prompt.
fn body(r: &RequestSpec) -> Vec<&str> {
    let t = text(r);
    assert!(t.starts_with(BASE_PROMPT), "{t:?}");
    t[BASE_PROMPT.len()..].split_inclusive('\n').collect()
}

#[test]
fn line_counts_follow_vllms_arithmetic_without_a_tokenizer() {
    // (30 - 14) / 2 = 8 lines in all; (20 - 14) / 2 = 3 of them the prefix.
    let p = plan("f", &lines(EVEN), &params(30, 20), None).unwrap();
    assert_eq!(p.base_len, 14);
    assert_eq!(p.avg_line_len, 2.0);
    assert_eq!((p.input_lines, p.prefix_lines), (8, 3));
    let reqs = generate("f", EVEN, &params(30, 20), 5, None, &mut dataset_rng(0)).unwrap();
    assert_eq!(reqs.len(), 5);
    for r in &reqs {
        let b = body(r);
        assert_eq!(b.len(), 8);
        assert_eq!(&b[..3], &["line-a1\n", "line-b2\n", "line-c3\n"]);
        // 53 + 8 × 8 characters = 117: 30 estimated tokens, exactly the cap.
        assert_eq!(r.prompt_len, 30);
        assert_eq!(r.output_len, 7);
    }
}

#[test]
fn halves_round_to_even_like_python() {
    // (19 - 14) / 2 = 2.5 → 2; (21 - 14) / 2 = 3.5 → 4.
    let l = lines(EVEN);
    assert_eq!(plan("f", &l, &params(19, 0), None).unwrap().input_lines, 2);
    assert_eq!(plan("f", &l, &params(21, 0), None).unwrap().input_lines, 4);
    // A prefix shorter than the base prompt takes no line.
    assert_eq!(plan("f", &l, &params(21, 3), None).unwrap().prefix_lines, 0);
}

#[test]
fn too_long_draws_are_dropped_and_the_rest_fit() {
    // One line of 40 characters (10 tokens) among short ones (2 tokens):
    // mean 3, so (23 - 14) / 3 = 3 lines; a prompt holding the long line is
    // 14 + 10 + 2·2 + ... > 23 tokens and must be drawn again.
    let file = format!("{}\nab\ncd\nef\ngh\n", "x".repeat(39));
    let reqs = generate("f", &file, &params(23, 0), 50, None, &mut dataset_rng(3)).unwrap();
    assert_eq!(reqs.len(), 50);
    for r in &reqs {
        assert!(r.prompt_len <= 23, "{}", r.prompt_len);
        assert_eq!(
            r.prompt_len,
            crate::workload::sample::estimate_tokens(text(r))
        );
        assert!(!text(r).contains("xxxx"), "{:?}", text(r));
        assert_eq!(body(r).len(), 3);
    }
}

#[test]
fn a_cap_no_prompt_can_meet_is_an_error_not_a_hang() {
    // Lines of 41 characters: 11 tokens. (43 - 14) / 11 = 2.6 → 3 lines, and
    // 53 + 3 × 41 = 176 characters is 44 tokens > 43: no draw ever fits.
    let file = format!("{}\n", "x".repeat(40)).repeat(3);
    let msg = generate(
        "poems.txt",
        &file,
        &params(43, 0),
        3,
        None,
        &mut dataset_rng(0),
    )
    .unwrap_err()
    .to_string();
    assert!(msg.contains("--sonnet-input-len 43"), "{msg}");
    assert!(msg.contains("0 of 3 prompts"), "{msg}");
    assert!(msg.contains("poems.txt"), "{msg}");
}

#[test]
fn seeded_draws_repeat_and_differ_by_seed() {
    let draw = |seed| {
        generate("f", EVEN, &params(30, 14), 6, None, &mut dataset_rng(seed))
            .unwrap()
            .iter()
            .map(|r| text(r).to_owned())
            .collect::<Vec<_>>()
    };
    assert_eq!(draw(1), draw(1));
    assert_ne!(draw(1), draw(2));
}

#[test]
fn input_len_at_or_below_the_base_prompt_is_refused() {
    let msg = plan("f", &lines(EVEN), &params(14, 0), None)
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains("--sonnet-input-len 14") && msg.contains("14 tokens"),
        "{msg}"
    );
    let empty = plan("empty.txt", &lines(""), &params(550, 200), None).unwrap_err();
    assert!(empty.to_string().contains("empty.txt"), "{empty}");
}

#[test]
fn crlf_lines_read_as_lf_lines() {
    assert_eq!(lines("a\r\nb\r\nc"), vec!["a\n", "b\n", "c"]);
}

/// The committed poem file with the SmolLM2 tokenizer and vLLM's defaults:
/// the line counts come from token counts taken here independently.
#[test]
fn committed_file_with_a_tokenizer_and_the_defaults() {
    let tok = smollm2();
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/sonnet-lines.txt");
    let contents = std::fs::read_to_string(path).unwrap();
    let file_lines: Vec<&str> = contents.split_inclusive('\n').collect();
    let avg = file_lines
        .iter()
        .map(|l| tok.encode(l).len())
        .sum::<usize>() as f64
        / file_lines.len() as f64;
    let base = tok.encode(BASE_PROMPT).len() as f64;
    let want_lines = ((550.0 - base) / avg).round_ties_even() as usize;
    let want_prefix = ((200.0 - base) / avg).round_ties_even() as usize;
    assert!(
        want_lines > want_prefix && want_prefix > 0,
        "{want_lines} {want_prefix}"
    );
    let sp = SonnetParams::default();
    let reqs = generate("f", &contents, &sp, 20, Some(&tok), &mut dataset_rng(0)).unwrap();
    assert_eq!(reqs.len(), 20);
    for r in &reqs {
        let b = body(r);
        assert_eq!(b.len(), want_lines);
        assert_eq!(&b[..want_prefix], &file_lines[..want_prefix]);
        assert_eq!(r.prompt_len as usize, tok.encode(text(r)).len());
        assert!(
            r.prompt_len <= 550 && r.prompt_len > 450,
            "{}",
            r.prompt_len
        );
        assert_eq!(r.output_len, 150);
    }
}

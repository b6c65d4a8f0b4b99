//! Tests of the hf edit sets read from local files: zeta's next-edit prompt
//! and Blazedit's distance filter (their prompts are in `hf_edit.rs`).
use super::tests::opts;
use super::*;
use crate::workload::dataset::dataset_rng;
use crate::workload::tokenizer::tests::smollm2;

#[test]
fn zeta_wraps_events_and_input_and_expects_the_output_from_its_marker() {
    let rows = concat!(
        r#"{"events": "User edited main.rs", "input": "fn main() {}", "output": "noise <|editable_region_start|>fn main() { run() }"}"#,
        "\n",
        r#"{"events": "e", "input": "i", "output": "no marker at all"}"#,
    );
    let rows = parse(HfSet::Zeta, "z.jsonl", rows).unwrap();
    assert!(rows[0]
        .prompt
        .starts_with("### Instruction:\nYou are a code completion assistant"));
    assert!(rows[0]
        .prompt
        .ends_with("### User Edits:\n\nUser edited main.rs\n\n### User Excerpt:\n\nfn main() {}\n\n### Response:\n\n"));
    assert_eq!(
        rows[0].reference.as_deref(),
        Some("<|editable_region_start|>fn main() { run() }")
    );
    assert_eq!(
        rows[1].reference.as_deref(),
        Some("l"),
        "Python's find() of -1"
    );
    // --hf-output-len is ignored and nothing is filtered, as in vLLM: the
    // one-character reference (1 token, under the usual minimum of 4) stays.
    let tok = smollm2();
    let reqs = sample(
        HfSet::Zeta,
        "z",
        rows,
        Some(99),
        &opts(2),
        Some(&tok),
        &mut dataset_rng(0),
    )
    .unwrap();
    assert_eq!(reqs.len(), 2);
    assert_eq!(
        reqs[0].output_len,
        prompt_tokens("<|editable_region_start|>fn main() { run() }", Some(&tok))
    );
    assert_eq!(reqs[1].output_len, prompt_tokens("l", Some(&tok)));
}

#[test]
fn blazedit_keeps_the_rows_within_the_distance_range_and_asks_for_4000_tokens() {
    let row = |code: &str, d: f64| {
        format!(r#"{{"code": "{code}", "change_request": "Rename x to y.", "norm_distance": {d}}}"#)
    };
    let file = [row("x = 1", 0.1), row("x = 2", 0.5), row("x = 3", 0.9)].join("\n");
    let set = lookup("vdaita/edit_5k_char")
        .unwrap()
        .with_distances(Some(0.2), Some(0.8));
    let rows = parse(set, "b.jsonl", &file).unwrap();
    assert_eq!(rows.len(), 1, "only 0.5 is within 0.2..=0.8");
    assert_eq!(
        rows[0].prompt,
        "Given a code file, please apply the change requests and generate the new file.\n\n\
         Original file:\n```python\nx = 2\n```\n\nChange request:\nRename x to y.\n\n\
         Please generate the new code file in the \"New file\" section below."
    );
    let every = parse(lookup("vdaita/edit_5k_char").unwrap(), "b.jsonl", &file).unwrap();
    assert_eq!(every.len(), 3, "vLLM's default range keeps every row");
    let reqs = sample(
        set,
        "b",
        rows.clone(),
        None,
        &opts(1),
        None,
        &mut dataset_rng(0),
    )
    .unwrap();
    assert_eq!(reqs[0].output_len, 4000);
    let reqs = sample(
        set,
        "b",
        rows,
        Some(64),
        &opts(1),
        None,
        &mut dataset_rng(0),
    )
    .unwrap();
    assert_eq!(reqs[0].output_len, 64);
    let msg = parse(set, "b.jsonl", r#"{"code": "c", "change_request": "r"}"#)
        .unwrap_err()
        .to_string();
    assert!(
        msg.starts_with("b.jsonl:1: field \"norm_distance\""),
        "{msg}"
    );
    let none = lookup("vdaita/edit_5k_char")
        .unwrap()
        .with_distances(Some(0.95), None);
    let rows = parse(none, "b.jsonl", &file).unwrap();
    let err = sample(
        none,
        "b.jsonl",
        rows,
        None,
        &opts(1),
        None,
        &mut dataset_rng(0),
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("norm_distance within 0.95..=1"), "{err}");
}

//! Tests of the hf sets: prompt construction per set, output lengths
//! (default, override, the reference's), the length filters, the ids
//! refused, and errors naming file, line and field.

use super::*;
use crate::workload::dataset::dataset_rng;
use crate::workload::tokenizer::tests::smollm2;
use crate::workload::Prompt;

pub(super) fn opts(num_prompts: usize) -> SampleOptions {
    SampleOptions {
        num_prompts,
        disable_shuffle: true,
        no_oversample: true,
    }
}

/// SmolLM2's tokenizer with a BOS (`<|endoftext|>`) added to every
/// sequence, as Llama's tokenizers do: counts with and without special
/// tokens then differ by one (plain SmolLM2 adds none).
fn with_bos() -> TokenCounter {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/smollm2-135m-tokenizer.json"
    );
    let mut json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let bos = serde_json::json!({"SpecialToken": {"id": "<|endoftext|>", "type_id": 0}});
    let seq =
        |id: &str, type_id: u32| serde_json::json!({"Sequence": {"id": id, "type_id": type_id}});
    json["post_processor"] = serde_json::json!({
        "type": "TemplateProcessing",
        "single": [bos, seq("A", 0)],
        "pair": [bos, seq("A", 0), seq("B", 1)],
        "special_tokens": {"<|endoftext|>": {"id": "<|endoftext|>", "ids": [0], "tokens": ["<|endoftext|>"]}},
    });
    let inner: tokenizers::Tokenizer = json.to_string().parse().unwrap();
    let tok = TokenCounter::from_tokenizer(inner, path.into());
    assert_eq!(tok.num_special_tokens_to_add(), 1);
    tok
}

fn text(r: &RequestSpec) -> &str {
    match &r.prompt {
        Prompt::Text(t) => t,
        other => panic!("hf prompts are text, got {other:?}"),
    }
}

#[test]
fn instructcoder_prompt_is_input_blank_line_instruction_and_the_ask() {
    let file =
        r#"{"instruction": "Rename x to total.", "input": "x = 1\nprint(x)", "output": "..."}"#;
    let rows = parse(HfSet::InstructCoder, "ic.jsonl", file).unwrap();
    assert_eq!(
        rows[0].prompt,
        "x = 1\nprint(x)\n\nRename x to total. Just output the code, do not include any explanation."
    );
    let reqs = sample(
        HfSet::InstructCoder,
        "ic",
        rows,
        None,
        &opts(1),
        None,
        &mut dataset_rng(0),
    );
    assert_eq!(reqs.unwrap()[0].output_len, 200);
}

#[test]
fn mt_bench_takes_the_first_turn_and_256_tokens() {
    let file = "{\"turns\": [\"First question?\", \"Follow-up.\"], \"category\": \"x\"}\n\n\
                {\"turns\": [\"Second row.\"]}\n";
    let rows = parse(HfSet::MtBench, "q.jsonl", file).unwrap();
    let prompts: Vec<&str> = rows.iter().map(|r| r.prompt.as_str()).collect();
    assert_eq!(prompts, ["First question?", "Second row."]);
    let reqs = sample(
        HfSet::MtBench,
        "q",
        rows.clone(),
        None,
        &opts(2),
        None,
        &mut dataset_rng(0),
    );
    assert!(reqs.unwrap().iter().all(|r| r.output_len == 256));
    let fixed = sample(
        HfSet::MtBench,
        "q",
        rows,
        Some(9),
        &opts(2),
        None,
        &mut dataset_rng(0),
    );
    assert!(fixed.unwrap().iter().all(|r| r.output_len == 9));
}

#[test]
fn reference_lengths_come_from_the_tokenizer() {
    let tok = smollm2();
    let file = r#"[{"problem": "What is two plus two, written as a word?", "solution": "Two plus two is four, so the answer is four."}]"#;
    let rows = parse(HfSet::Aimo, "aime.json", file).unwrap();
    let reqs = sample(
        HfSet::Aimo,
        "a",
        rows,
        None,
        &opts(1),
        Some(&tok),
        &mut dataset_rng(0),
    )
    .unwrap();
    assert_eq!(text(&reqs[0]), "What is two plus two, written as a word?");
    assert_eq!(
        reqs[0].prompt_len as usize,
        tok.encode(text(&reqs[0])).len()
    );
    let reference = "Two plus two is four, so the answer is four.";
    assert_eq!(reqs[0].output_len as usize, tok.encode(reference).len());
}

#[test]
fn sharegpt_rows_need_two_turns_and_pass_the_1024_2048_filter() {
    // Estimates (4 characters a token): row 2 has one turn; row 3's prompt
    // is 1100 tokens (> 1024); row 4's reply is 2 tokens (< 4).
    let long = "abcd".repeat(1100);
    let turn = |v: &str| format!(r#"{{"from": "x", "value": "{v}"}}"#);
    let row = |a: &str, b: Option<&str>| {
        let turns: Vec<String> = std::iter::once(turn(a)).chain(b.map(turn)).collect();
        format!(r#"{{"conversations": [{}]}}"#, turns.join(", "))
    };
    let file = [
        row(
            "How long do eggs boil?",
            Some("About six minutes for soft yolks."),
        ),
        row("One turn only.", None),
        row(&long, Some("A reply that is long enough.")),
        row("Another fine question here?", Some("Ok.")),
    ]
    .join("\n");
    let rows = parse(HfSet::ShareGpt, "sg.jsonl", &file).unwrap();
    assert_eq!(rows.len(), 3, "the one-turn row is skipped");
    let reqs = sample(
        HfSet::ShareGpt,
        "sg",
        rows.clone(),
        None,
        &opts(10),
        None,
        &mut dataset_rng(0),
    )
    .unwrap();
    assert_eq!(reqs.len(), 1);
    assert_eq!(text(&reqs[0]), "How long do eggs boil?");
    // "About six minutes for soft yolks." is 33 characters: 9 tokens.
    assert_eq!(reqs[0].output_len, 9);
    // A fixed output length skips the filter, as in vLLM.
    let all = sample(
        HfSet::ShareGpt,
        "sg",
        rows,
        Some(5),
        &opts(10),
        None,
        &mut dataset_rng(0),
    );
    assert_eq!(all.unwrap().len(), 3);
}

#[test]
fn aimo_allows_prompts_up_to_2048() {
    let long = "abcd".repeat(1100);
    let file = format!(r#"{{"problem": "{long}", "solution": "The answer is 42, by counting."}}"#);
    let rows = parse(HfSet::Aimo, "a.jsonl", &file).unwrap();
    let reqs = sample(
        HfSet::Aimo,
        "a",
        rows,
        None,
        &opts(1),
        None,
        &mut dataset_rng(0),
    )
    .unwrap();
    assert_eq!(reqs[0].prompt_len, 1100);
    let longer = "abcd".repeat(2049);
    let file =
        format!(r#"{{"problem": "{longer}", "solution": "The answer is 42, by counting."}}"#);
    let rows = parse(HfSet::Aimo, "a.jsonl", &file).unwrap();
    let err = sample(
        HfSet::Aimo,
        "a.jsonl",
        rows,
        None,
        &opts(1),
        None,
        &mut dataset_rng(0),
    );
    assert!(err.unwrap_err().to_string().contains("'a.jsonl'"));
}

#[test]
fn a_missing_field_names_file_line_and_field() {
    let jsonl = "{\"turns\": [\"ok\"]}\n\n{\"question\": \"no turns here\"}\n";
    let msg = parse(HfSet::MtBench, "q.jsonl", jsonl)
        .unwrap_err()
        .to_string();
    assert!(msg.starts_with("q.jsonl:3: field \"turns[0]\""), "{msg}");
    // In a JSON array the line is where the element starts.
    let array = "[\n  {\"input\": \"a, [b]\", \"instruction\": \"say \\\"hi\\\" }\"},\n\n  {\n    \"input\": \"c\"\n  }\n]";
    let msg = parse(HfSet::InstructCoder, "ic.json", array)
        .unwrap_err()
        .to_string();
    assert!(msg.starts_with("ic.json:4: field \"instruction\""), "{msg}");
    let bad = "{\"turns\": [\"ok\"]}\n{\"turns\": [\"unclosed\"\n";
    let msg = parse(HfSet::MtBench, "q.jsonl", bad)
        .unwrap_err()
        .to_string();
    assert!(msg.starts_with("q.jsonl:2: not valid JSON"), "{msg}");
}

#[test]
fn array_elements_survive_brackets_and_quotes_inside_strings() {
    let array = "[{\"a\": \"],{\\\"\"}, {\"b\": [1, 2]},\n\"s\"]";
    let els = array_elements(array);
    let texts: Vec<&str> = els.iter().map(|(_, t)| *t).collect();
    assert_eq!(texts, ["{\"a\": \"],{\\\"\"}", "{\"b\": [1, 2]}", "\"s\""]);
    assert_eq!(els.iter().map(|(l, _)| *l).collect::<Vec<_>>(), [1, 1, 2]);
}

#[test]
fn ids_are_looked_up_and_the_others_refused_in_one_line() {
    assert_eq!(lookup("philschmid/mt-bench").unwrap(), HfSet::MtBench);
    assert_eq!(lookup("AI-MO/NuminaMath-CoT").unwrap(), HfSet::Aimo);
    for id in [
        "mgoin/mlperf-inference-llama2-data",
        "mgoin/mlperf-inference-llama3.1-data",
    ] {
        assert_eq!(lookup(id).unwrap(), HfSet::MlPerf);
    }
    assert_eq!(
        HfSet::MlPerf.forced_split(),
        Some("train"),
        "as vLLM forces"
    );
    let media = lookup("lmarena-ai/VisionArena-Chat")
        .unwrap_err()
        .to_string();
    assert!(
        media.contains("image") && media.contains("random-mm"),
        "{media}"
    );
    assert_eq!(lookup("zed-industries/zeta").unwrap(), HfSet::Zeta);
    assert_eq!(
        lookup("vdaita/edit_10k_char").unwrap(),
        HfSet::Blazedit {
            min_distance: 0.0,
            max_distance: 1.0
        }
    );
    let unknown = lookup("someone/else").unwrap_err().to_string();
    assert!(
        unknown.contains("--hf-name someone/else") && unknown.contains("likaixin/InstructCoder")
    );
    for msg in [media, unknown] {
        assert!(!msg.contains('\n'), "{msg}");
    }
}

#[test]
fn shuffle_is_seeded_and_oversampling_fills_up() {
    let file: String = (0..20)
        .map(|i| format!("{{\"turns\": [\"question {i}\"]}}\n"))
        .collect();
    let rows = parse(HfSet::MtBench, "q", &file).unwrap();
    let shuffled = SampleOptions {
        num_prompts: 30,
        disable_shuffle: false,
        no_oversample: false,
    };
    let draw = |seed| {
        let reqs = sample(
            HfSet::MtBench,
            "q",
            rows.clone(),
            None,
            &shuffled,
            None,
            &mut dataset_rng(seed),
        );
        reqs.unwrap()
            .iter()
            .map(|r| text(r).to_owned())
            .collect::<Vec<_>>()
    };
    assert_eq!(draw(4), draw(4));
    assert_ne!(draw(4), draw(5));
    assert_eq!(draw(4).len(), 30);
    assert_ne!(
        draw(4)[0],
        "question 0",
        "shuffled (1 in 20 chance by luck at this seed)"
    );
}

#[test]
fn mlperf_joins_system_prompt_and_question_and_counts_the_output_without_special_tokens() {
    let row = r#"{"system_prompt": "You are terse.", "question": "Name a prime.", "output": "Seven is a prime number.", "origin": "cot"}"#;
    let tok = with_bos();
    let reference = "Seven is a prime number.";
    let reqs = |set: HfSet, row: &str| {
        let rows = parse(set, "m.jsonl", row).unwrap();
        sample(
            set,
            "m",
            rows,
            None,
            &opts(1),
            Some(&tok),
            &mut dataset_rng(0),
        )
        .unwrap()
    };
    let mlperf = reqs(HfSet::MlPerf, row);
    assert_eq!(text(&mlperf[0]), "You are terse.\n\nName a prime.");
    // The prompt counts its BOS; MLPerf's reference does not (AIMO's does).
    assert_eq!(
        mlperf[0].prompt_len,
        tok.count("You are terse.\n\nName a prime.") + 1
    );
    assert_eq!(mlperf[0].output_len, tok.count(reference));
    let aimo = reqs(
        HfSet::Aimo,
        &format!(r#"{{"problem": "Name a prime.", "solution": "{reference}"}}"#),
    );
    assert_eq!(aimo[0].output_len, tok.count(reference) + 1);
    let msg = parse(
        HfSet::MlPerf,
        "m.jsonl",
        r#"{"question": "q", "output": "o"}"#,
    )
    .unwrap_err()
    .to_string();
    assert!(
        msg.starts_with("m.jsonl:1: field \"system_prompt\""),
        "{msg}"
    );
}

#[test]
fn mlperf_filters_lengths_even_with_a_fixed_output_length_and_the_others_do_not() {
    let row = |words: usize| {
        format!(
            r#"{{"system_prompt": "s", "question": "{}", "output": "a long enough answer"}}"#,
            "abcd".repeat(words)
        )
    };
    // Estimated at 4 characters a token: 1 + 1000 tokens pass, 1 + 1100 do not.
    let file = format!("{}\n{}\n", row(1100), row(1000));
    let fixed = |set: HfSet| {
        let rows = parse(set, "m.jsonl", &file).unwrap();
        sample(
            set,
            "m.jsonl",
            rows,
            Some(5),
            &opts(2),
            None,
            &mut dataset_rng(0),
        )
    };
    let kept = fixed(HfSet::MlPerf).unwrap();
    assert_eq!(kept.len(), 1, "the 1100-token prompt is filtered");
    assert!(kept[0].prompt_len <= 1024 && kept[0].output_len == 5);
    let one_long = format!("{}\n", row(1100));
    let rows = parse(HfSet::MlPerf, "m.jsonl", &one_long).unwrap();
    let err = sample(
        HfSet::MlPerf,
        "m.jsonl",
        rows,
        Some(5),
        &opts(1),
        None,
        &mut dataset_rng(0),
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("applies to every row"), "{err}");
    // ShareGPT-shaped rows with a fixed length are not filtered (vLLM).
    let share = format!(
        r#"{{"conversations": [{{"value": "{}"}}, {{"value": "ok"}}]}}"#,
        "abcd".repeat(1100)
    );
    let rows = parse(HfSet::ShareGpt, "s.jsonl", &share).unwrap();
    let kept = sample(
        HfSet::ShareGpt,
        "s",
        rows,
        Some(5),
        &opts(1),
        None,
        &mut dataset_rng(0),
    )
    .unwrap();
    assert_eq!(kept.len(), 1);
}

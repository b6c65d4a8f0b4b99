//! Tests of trace parsing and expansion (hand-made files, hand-checked answers).

use super::*;
use crate::workload::trace_expand::{expand, ExpandParams};
use crate::workload::Prompt;

const ORIGIN: &str = "t.jsonl";

fn rows(text: &str) -> Vec<TraceRow> {
    parse(ORIGIN, text, &TraceLabels::default(), 1.0).unwrap()
}

fn err(text: &str) -> String {
    parse(ORIGIN, text, &TraceLabels::default(), 1.0).unwrap_err()
}

#[test]
fn jsonl_rows_are_read_scaled_and_put_in_time_order() {
    let text = "{\"timestamp\": 3000, \"input_length\": 40, \"output_length\": 5, \"hash_ids\": [1, 2, 3]}\n\
                \n\
                {\"timestamp\": 1000, \"input_length\": 20, \"output_length\": 7}\n";
    let r = parse(ORIGIN, text, &TraceLabels::default(), 0.001).unwrap();
    assert_eq!(r.len(), 2);
    assert_eq!(
        (r[0].line, r[0].timestamp, r[0].input_len, r[0].output_len),
        (3, 1.0, 20, 7)
    );
    assert_eq!(r[0].hash_ids, Some(vec![]));
    assert_eq!((r[1].line, r[1].timestamp), (1, 3.0));
    assert_eq!(r[1].hash_ids, Some(vec![1, 2, 3]));
}

#[test]
fn labels_rename_the_fields() {
    let labels = TraceLabels {
        timestamp: "ts".into(),
        input_length: "in".into(),
        output_length: "out".into(),
        hash_ids: "blocks".into(),
    };
    let r = parse(
        ORIGIN,
        r#"{"ts": "2.5", "in": 3, "out": 4, "blocks": [9]}"#,
        &labels,
        1.0,
    )
    .unwrap();
    assert_eq!(
        (r[0].timestamp, r[0].input_len, r[0].output_len),
        (2.5, 3, 4)
    );
    assert_eq!(r[0].hash_ids, Some(vec![9]));
}

#[test]
fn malformed_rows_name_the_file_line_and_field() {
    let ok = r#"{"timestamp": 0, "input_length": 4, "output_length": 4}"#;
    let cases = [
        (format!("{ok}\n{{\"timestamp\": 1, \"output_length\": 4}}"), "t.jsonl:2: field 'input_length' is missing", "--timed-trace-label-input-length"),
        (format!("{ok}\n\n{{\"timestamp\": -1, \"input_length\": 4, \"output_length\": 4}}"), "t.jsonl:3: field 'timestamp'", "non-negative"),
        ("{\"timestamp\": 0, \"input_length\": 4.5, \"output_length\": 4}".to_string(), "t.jsonl:1: field 'input_length'", "whole number"),
        ("{\"timestamp\": 0, \"input_length\": 4, \"output_length\": 0}".to_string(), "t.jsonl:1: field 'output_length'", "at least 1"),
        ("{\"timestamp\": 0, \"input_length\": 4, \"output_length\": 4, \"hash_ids\": [1, \"a\"]}".to_string(), "t.jsonl:1: field 'hash_ids'", "integers"),
        (format!("{ok}\n[1, 2]"), "t.jsonl:2: not a JSON object", ""),
        (format!("{ok}\n{{\"timestamp\": 0,"), "t.jsonl:2: not a JSON object", ""),
        (String::new(), "trace file 't.jsonl' has no requests", ""),
    ];
    for (text, head, hint) in cases {
        let e = err(&text);
        assert!(e.starts_with(head) && e.contains(hint), "{e}");
        assert!(!e.contains('\n'), "one line: {e}");
    }
}

#[test]
fn azure_csv_timestamps_become_seconds_since_the_first_request() {
    let text = "TIMESTAMP,ContextTokens,GeneratedTokens\n\
                2023-11-16 18:15:47.2,100,10\n\
                2023-11-16 18:15:46.7,200,20\n\
                2023-11-17 00:00:01,300,30\n";
    let r = rows(text);
    assert_eq!(detect(text), TraceFormat::AzureCsv);
    let ts: Vec<f64> = r.iter().map(|r| r.timestamp).collect();
    // 18:15:46.7 is the origin; 00:00:01 the next day is 5 h 44 min 14.3 s later.
    assert!(
        (ts[0] - 0.0).abs() < 1e-9 && (ts[1] - 0.5).abs() < 1e-6,
        "{ts:?}"
    );
    assert!((ts[2] - 20_654.3).abs() < 1e-6, "{ts:?}");
    assert_eq!((r[0].input_len, r[0].output_len, r[0].line), (200, 20, 3));
    assert_eq!(r[0].hash_ids, None);
    let e = err("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-13-01 00:00:00,1,1\n");
    assert!(e.starts_with("t.jsonl:2: field 'TIMESTAMP'"), "{e}");
    let e = err("TIMESTAMP,ContextTokens,GeneratedTokens\n5,1,none\n");
    assert!(e.starts_with("t.jsonl:2: field 'GeneratedTokens'"), "{e}");
}

#[test]
fn civil_days_match_known_dates() {
    assert_eq!(days_from_civil(1970, 1, 1), 0);
    assert_eq!(days_from_civil(2000, 3, 1), 11_017);
    assert_eq!(days_from_civil(2023, 11, 16), 19_677);
}

fn params(chat: bool, salt: u64) -> ExpandParams {
    ExpandParams {
        chunk_size: 4,
        seed: 7,
        salt,
        chat,
    }
}

fn trace() -> Vec<TraceRow> {
    rows("{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 3, \"hash_ids\": [5, 6, 7]}\n\
          {\"timestamp\": 1, \"input_length\": 12, \"output_length\": 3, \"hash_ids\": [5, 6, 8]}\n\
          {\"timestamp\": 2, \"input_length\": 10, \"output_length\": 3, \"hash_ids\": [9]}\n\
          {\"timestamp\": 3, \"input_length\": 10, \"output_length\": 3, \"hash_ids\": [5, 6, 7, 1]}\n")
}

fn ids(p: &Prompt) -> &[u32] {
    match p {
        Prompt::Tokens(t) => t,
        other => panic!("expected token ids, got {other:?}"),
    }
}

#[test]
fn equal_leading_ids_give_identical_token_prefixes_and_sizes_key_partial_blocks() {
    let e = expand(&trace(), &params(false, 0), None);
    let r: Vec<&[u32]> = e.requests.iter().map(|r| ids(&r.prompt)).collect();
    assert_eq!(
        [r[0].len(), r[1].len(), r[2].len(), r[3].len()],
        [10, 12, 4, 10]
    );
    // Rows 0 and 1 share blocks 5 and 6 (8 tokens), then differ.
    assert_eq!(r[0][..8], r[1][..8]);
    assert_ne!(r[0][8..10], r[1][8..10]);
    // Row 3 is row 0's ids plus one: identical, including the 2-token tail of block 7.
    assert_eq!(r[0], r[3]);
    // Block 7 in full (row 1 has no 7; row 0's 7 is cut to 2 tokens) is keyed by size.
    assert!(e.requests.iter().all(|r| r.output_len == 3));
    assert_eq!(
        e.requests.iter().map(|r| r.prompt_len).collect::<Vec<_>>(),
        [10, 12, 4, 10]
    );
    // Row 2's one id covers 4 of its 10 tokens: counted as short.
    let s = e.short.unwrap();
    assert_eq!((s.rows, s.first_line, s.covered, s.wanted), (1, 3, 4, 10));
    assert!(r
        .iter()
        .flat_map(|t| t.iter())
        .all(|id| SAFE_RANGE.contains(id)));
}

const SAFE_RANGE: std::ops::Range<u32> = crate::workload::random::SAFE_TOKEN_IDS;

#[test]
fn chat_prompts_share_byte_identical_prefixes() {
    let e = expand(&trace(), &params(true, 0), None);
    let t: Vec<&str> = e
        .requests
        .iter()
        .map(|r| match &r.prompt {
            Prompt::Text(s) => s.as_str(),
            other => panic!("{other:?}"),
        })
        .collect();
    let shared = t[0].split(' ').take(8).collect::<Vec<_>>().join(" ");
    assert!(t[1].starts_with(&shared), "{t:?}");
    assert_eq!(t[0], t[3]);
    assert_eq!(t[0].split(' ').count(), 10);
}

#[test]
fn the_salt_changes_the_tokens_but_keeps_the_sharing() {
    let a = expand(&trace(), &params(false, 0), None);
    let b = expand(&trace(), &params(false, 1), None);
    let again = expand(&trace(), &params(false, 0), None);
    assert_eq!(a, again, "same seed and salt, same prompts");
    let (a0, b0, b1) = (
        ids(&a.requests[0].prompt),
        ids(&b.requests[0].prompt),
        ids(&b.requests[1].prompt),
    );
    assert_ne!(a0[..4], b0[..4]);
    assert_eq!(b0[..8], b1[..8]);
}

#[test]
fn rows_without_ids_share_no_block() {
    let r = rows("TIMESTAMP,ContextTokens,GeneratedTokens\n0,8,2\n1,8,2\n");
    let e = expand(&r, &params(false, 0), None);
    assert_eq!(e.short, None);
    let (a, b) = (ids(&e.requests[0].prompt), ids(&e.requests[1].prompt));
    assert_eq!((a.len(), b.len()), (8, 8));
    assert_ne!(a[..4], b[..4]);
}

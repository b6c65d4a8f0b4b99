use super::*;

const VLLM_400: &str = r#"HTTP 400 Bad Request: {"object":"error","message":"This model's maximum context length is 4096 tokens. However, you requested 4128 tokens (4096 in the messages, 32 in the completion). Please reduce the length of the messages or completion.","type":"BadRequestError","param":null,"code":400}"#;

fn record(index: usize, status: Option<u16>, message: &str) -> RequestRecord {
    RequestRecord {
        index,
        error: status.map(|s| RequestError {
            kind: if s == 429 {
                ErrorKind::RateLimited
            } else {
                ErrorKind::Status
            },
            status: Some(s),
            message: message.to_string(),
        }),
        ..RequestRecord::default()
    }
}

fn too_long(index: usize, tokens: usize) -> RequestRecord {
    let body = format!(
        r#"HTTP 400 Bad Request: {{"error":{{"message":"This model's maximum context length is 4096 tokens. However, your request has {tokens} input tokens.","code":400}}}}"#
    );
    record(index, Some(400), &body)
}

/// Feed `records` in order; the index of the record that tripped the rule.
fn trips_at(records: &[RequestRecord]) -> Option<usize> {
    let mut watch = RefusalWatch::default();
    records
        .iter()
        .position(|r| watch.see(r).is_some())
        .map(|i| records[i].index)
}

#[test]
fn ten_identical_refusals_of_the_first_requests_trip_with_the_servers_message() {
    let first: Vec<RequestRecord> = (0..SAME_REFUSALS_TO_STOP)
        .map(|i| too_long(i, 4096 + i))
        .collect();
    let mut watch = RefusalWatch::default();
    for r in &first[..SAME_REFUSALS_TO_STOP - 1] {
        assert_eq!(watch.see(r), None, "nine refusals are not enough");
    }
    let refusal = watch.see(&first[SAME_REFUSALS_TO_STOP - 1]).cloned();
    let refusal = refusal.expect("the tenth refusal trips");
    assert_eq!(refusal.status, 400);
    assert_eq!(refusal.count, SAME_REFUSALS_TO_STOP);
    assert_eq!(
        refusal.message,
        "This model's maximum context length is 4096 tokens. However, your request has 4096 input tokens."
    );
    assert!(watch.tripped().is_some(), "a tripped rule stays tripped");
}

#[test]
fn the_first_requests_count_in_release_order_not_in_the_order_they_finish() {
    // Refusals come back first; request 3 (a success) finishes last.
    let mut records: Vec<RequestRecord> = (0..12)
        .filter(|&i| i != 3)
        .map(|i| too_long(i, 5000))
        .collect();
    assert_eq!(trips_at(&records), None, "request 3 has not finished yet");
    records.push(record(3, None, ""));
    assert_eq!(trips_at(&records), None, "one of the first ten succeeded");
    // Refusals past the first ten do not stand in for a missing one.
    let later: Vec<RequestRecord> = (1..30).map(|i| too_long(i, 5000)).collect();
    assert_eq!(trips_at(&later), None, "request 0 never finished");
}

#[test]
fn a_success_anywhere_disarms_the_rule() {
    let mut records = vec![record(40, None, "")];
    records.extend((0..SAME_REFUSALS_TO_STOP).map(|i| too_long(i, 5000)));
    assert_eq!(trips_at(&records), None);
}

#[test]
fn a_rare_refusal_among_successes_never_trips() {
    let records: Vec<RequestRecord> = (0..500)
        .map(|i| match i % 50 {
            7 => too_long(i, 5000),
            _ => record(i, None, ""),
        })
        .collect();
    assert_eq!(trips_at(&records), None);
}

#[test]
fn different_statuses_or_kinds_of_message_do_not_add_up() {
    let mut mixed: Vec<RequestRecord> = (0..SAME_REFUSALS_TO_STOP)
        .map(|i| too_long(i, 5000))
        .collect();
    mixed[4] = record(
        4,
        Some(422),
        r#"HTTP 422 Unprocessable Entity: {"detail":"bad"}"#,
    );
    assert_eq!(trips_at(&mixed), None, "a 422 among 400s");
    mixed[4] = record(
        4,
        Some(400),
        r#"HTTP 400 Bad Request: {"message":"temperature must be positive"}"#,
    );
    assert_eq!(trips_at(&mixed), None, "another kind of 400");
    mixed[4] = too_long(4, 12345);
    assert_eq!(
        trips_at(&mixed),
        Some(SAME_REFUSALS_TO_STOP - 1),
        "only the numbers differ"
    );
}

#[test]
fn statuses_that_mean_try_again_and_server_errors_never_trip() {
    for status in [408, 429, 500, 503] {
        let records: Vec<RequestRecord> = (0..50)
            .map(|i| record(i, Some(status), "HTTP error: busy"))
            .collect();
        assert_eq!(trips_at(&records), None, "HTTP {status}");
    }
    for status in [400, 401, 403, 404, 413, 422] {
        let records: Vec<RequestRecord> = (0..SAME_REFUSALS_TO_STOP)
            .map(|i| record(i, Some(status), "HTTP error: no"))
            .collect();
        assert!(trips_at(&records).is_some(), "HTTP {status}");
    }
    let reset = RequestRecord {
        error: Some(RequestError {
            kind: ErrorKind::Connect,
            status: None,
            message: "connection refused".into(),
        }),
        ..RequestRecord::default()
    };
    let records: Vec<RequestRecord> = (0..50)
        .map(|index| RequestRecord {
            index,
            ..reset.clone()
        })
        .collect();
    assert_eq!(trips_at(&records), None, "connection errors");
}

#[test]
fn the_servers_message_is_read_from_each_servers_error_shape() {
    let m = server_message(VLLM_400);
    assert!(m.starts_with("This model's maximum context length is 4096 tokens. However, you requested 4128 tokens"), "{m}");
    assert!(m.ends_with("completion."), "{m}");
    // The client keeps the first 200 characters of a body: a cut string says so.
    let cut: String = VLLM_400.chars().take(150).collect();
    let m = server_message(&cut);
    assert!(
        m.starts_with("This model's maximum context length") && m.ends_with('…'),
        "{m}"
    );
    assert_eq!(
        server_message(r#"HTTP 404 Not Found: {"detail":"Not Found"}"#),
        "Not Found"
    );
    assert_eq!(
        server_message(
            r#"HTTP 422 Unprocessable Entity: {"detail":[{"loc":["body"],"msg":"field \"model\" required"}]}"#
        ),
        "field \"model\" required"
    );
    assert_eq!(
        server_message(
            r#"HTTP 400 Bad Request: {"error":"Input validation error: `inputs` must have less than 2048 tokens","error_type":"validation"}"#
        ),
        "Input validation error: `inputs` must have less than 2048 tokens"
    );
    assert_eq!(
        server_message("HTTP 401 Unauthorized: invalid key"),
        "invalid key"
    );
    assert_eq!(server_message(r#"{"message":"caf\u00e9\n"}"#), "café\n");
}

#[test]
fn message_kinds_ignore_numbers_only() {
    assert_eq!(
        message_kind("has 4096 input tokens, max 4096"),
        message_kind("has 5 input tokens, max 12")
    );
    assert_ne!(
        message_kind("has 5 input tokens"),
        message_kind("has 5 output tokens")
    );
}

#[test]
fn failed_at_once_is_a_4xx_or_a_refused_connection_before_any_token() {
    assert!(failed_at_once(&too_long(0, 5000)));
    assert!(failed_at_once(&record(0, Some(429), "HTTP 429")));
    assert!(
        !failed_at_once(&record(0, Some(500), "HTTP 500")),
        "a 5xx may come after the work"
    );
    assert!(!failed_at_once(&record(0, None, "")), "a success");
    let mut cut = too_long(0, 5000);
    cut.first_token = Some(std::time::Duration::from_millis(5));
    assert!(!failed_at_once(&cut), "an answer had begun");
    let timeout = RequestRecord {
        error: Some(RequestError {
            kind: ErrorKind::Timeout,
            status: None,
            message: "timeout".into(),
        }),
        ..RequestRecord::default()
    };
    assert!(!failed_at_once(&timeout));
}

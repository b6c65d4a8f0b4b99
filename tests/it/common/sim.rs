//! The built-in simulator in the test's own runtime, recording its per-request
//! server log (ground truth), and reading that log back.

use kneecap::sim::{self, SimConfig, SimHandle};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// A running simulator, its base URL and the file its server log goes to (whole
/// once [`SimHandle::shutdown`] has returned).
pub struct LoggedSim {
    pub handle: SimHandle,
    pub url: String,
    pub log: PathBuf,
}

/// Start `cfg` on 127.0.0.1:0, logging to `log`.
pub async fn logged(mut cfg: SimConfig, log: PathBuf) -> LoggedSim {
    cfg.server_log = Some(log.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let handle = sim::start(cfg, listener).await.unwrap();
    let url = format!("http://{}", handle.addr());
    LoggedSim { handle, url, log }
}

/// The `tiny` preset, logging to `log`.
pub async fn tiny(log: PathBuf) -> LoggedSim {
    logged(SimConfig::from_preset("tiny").unwrap(), log).await
}

/// The server log's request lines whose id starts with `prefix` (in file order),
/// and its closing summary (`Value::Null` when absent).
pub fn requests(log: &Path, prefix: &str) -> (Vec<Value>, Value) {
    let mut requests = Vec::new();
    let mut summary = Value::Null;
    let text = std::fs::read_to_string(log).expect("the sim wrote its server log");
    for line in text.lines() {
        let v: Value = serde_json::from_str(line).expect("server log lines are JSON");
        if v["request_id"]
            .as_str()
            .is_some_and(|id| id.starts_with(prefix))
        {
            requests.push(v);
        } else if v.get("summary").is_some() {
            summary = v["summary"].clone();
        }
    }
    (requests, summary)
}

/// The number after `prefix` in a server log line's request id.
pub fn index(v: &Value, prefix: &str) -> usize {
    v["request_id"].as_str().unwrap()[prefix.len()..]
        .parse()
        .unwrap()
}

/// Server log requests (any order) grouped by sweep step. Steps run one
/// after another, each drained before the next, and every step numbers its
/// requests from 0; but the server may see a step's request 1 before its
/// request 0 (each comes on its own connection), so a step does not begin
/// at index 0: in arrival order, it begins at the first index its
/// predecessor already holds.
pub fn by_step(mut requests: Vec<Value>, prefix: &str) -> Vec<Vec<Value>> {
    requests.sort_by(|a, b| {
        a["arrival_s"]
            .as_f64()
            .unwrap()
            .total_cmp(&b["arrival_s"].as_f64().unwrap())
    });
    let mut steps: Vec<(std::collections::HashSet<usize>, Vec<Value>)> = Vec::new();
    for r in requests {
        let i = index(&r, prefix);
        match steps.last_mut() {
            Some((seen, step)) if !seen.contains(&i) => {
                seen.insert(i);
                step.push(r);
            }
            _ => steps.push(([i].into_iter().collect(), vec![r])),
        }
    }
    steps.into_iter().map(|(_, step)| step).collect()
}

/// The sum of an integer field over server log records (`cached_tokens`,
/// `prompt_tokens`, ...): what the server's counters should say.
pub fn total(records: &[Value], field: &str) -> u64 {
    records
        .iter()
        .map(|r| {
            r[field]
                .as_u64()
                .unwrap_or_else(|| panic!("{field} in {r}"))
        })
        .sum()
}

#[test]
fn a_step_whose_request_1_reached_the_server_before_its_request_0_is_still_one_step() {
    let r =
        |i: usize, t: f64| serde_json::json!({ "request_id": format!("p-{i}"), "arrival_s": t });
    // Step 0: 0, 1, 2; step 1's request 1 arrived before its request 0.
    let log = vec![
        r(0, 0.0),
        r(1, 0.1),
        r(2, 0.2),
        r(1, 1.00),
        r(0, 1.01),
        r(2, 1.1),
    ];
    let steps = by_step(log, "p-");
    let ids: Vec<Vec<usize>> = steps
        .iter()
        .map(|s| s.iter().map(|v| index(v, "p-")).collect())
        .collect();
    assert_eq!(ids, vec![vec![0, 1, 2], vec![1, 0, 2]]);
}

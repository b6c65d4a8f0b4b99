//! The built-in simulator in the test's own runtime, recording its per-request
//! trace (ground truth), and reading that trace back.

use kneecap::sim::{self, SimConfig, SimHandle};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// A running simulator, its base URL and the file its trace goes to (whole
/// once [`SimHandle::shutdown`] has returned).
pub struct TracedSim {
    pub handle: SimHandle,
    pub url: String,
    pub trace: PathBuf,
}

/// Start `cfg` on 127.0.0.1:0, tracing to `trace`.
pub async fn traced(mut cfg: SimConfig, trace: PathBuf) -> TracedSim {
    cfg.trace = Some(trace.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let handle = sim::start(cfg, listener).await.unwrap();
    let url = format!("http://{}", handle.addr());
    TracedSim { handle, url, trace }
}

/// The `tiny` preset, tracing to `trace`.
pub async fn tiny(trace: PathBuf) -> TracedSim {
    traced(SimConfig::from_preset("tiny").unwrap(), trace).await
}

/// The trace's request lines whose id starts with `prefix` (in file order),
/// and its closing summary (`Value::Null` when absent).
pub fn requests(trace: &Path, prefix: &str) -> (Vec<Value>, Value) {
    let mut requests = Vec::new();
    let mut summary = Value::Null;
    let text = std::fs::read_to_string(trace).expect("the sim wrote its trace");
    for line in text.lines() {
        let v: Value = serde_json::from_str(line).expect("trace lines are JSON");
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

/// The number after `prefix` in a trace line's request id.
pub fn index(v: &Value, prefix: &str) -> usize {
    v["request_id"].as_str().unwrap()[prefix.len()..]
        .parse()
        .unwrap()
}

/// The sum of an integer field over trace records (`cached_tokens`,
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

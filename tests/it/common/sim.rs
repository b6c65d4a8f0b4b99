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

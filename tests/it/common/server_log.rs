//! Client numbers against the simulator's server log (its ground truth): for each
//! request, the TTFT kneecap reported minus the TTFT the simulator saw.

use serde_json::Value;
use std::path::Path;

/// Client TTFT minus server TTFT, in ms, for every logged request whose id
/// starts with `prefix` (the result must come from `--save-detailed`).
pub fn client_minus_server_ttft_ms(result: &Value, log: &Path, prefix: &str) -> Vec<f64> {
    let lines = std::fs::read_to_string(log).expect("the sim wrote its server log");
    let mut diffs = Vec::new();
    for line in lines.lines() {
        let v: Value = serde_json::from_str(line).expect("server log lines are JSON");
        let Some(id) = v["request_id"].as_str() else {
            continue;
        };
        let Some(i) = id
            .strip_prefix(prefix)
            .and_then(|i| i.parse::<usize>().ok())
        else {
            continue;
        };
        let server_ttft = v["first_token_s"].as_f64().unwrap() - v["arrival_s"].as_f64().unwrap();
        let client_ttft = result["ttfts"][i].as_f64().unwrap();
        diffs.push((client_ttft - server_ttft) * 1e3);
    }
    diffs
}

/// The median of `v` (upper middle for an even count).
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

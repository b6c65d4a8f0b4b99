//! vLLM-compatible result JSON: vLLM's keys, in vLLM's order and units
//! (seconds in per-request arrays, milliseconds in stats), plus a `kneecap`
//! object for what vLLM lacks. Pure: builds a `serde_json::Value`.

use super::RunResult;
use crate::metrics::stats::{percentile_key, Distribution};
use serde_json::{json, Map, Value};

/// Render the result as vLLM's JSON object (`detailed` keeps per-request arrays).
pub fn render(r: &RunResult, detailed: bool) -> Value {
    let mut m = Map::new();
    header(&mut m, r);
    totals(&mut m, r);
    per_request(&mut m, r, detailed);
    for metric in r.shown_metrics() {
        stats(&mut m, metric.key(), r.distribution(metric));
    }
    m.insert("kneecap".into(), kneecap(r, detailed));
    Value::Object(m)
}

fn header(m: &mut Map<String, Value>, r: &RunResult) {
    m.insert("date".into(), json!(r.date));
    m.insert("endpoint_type".into(), json!(r.backend));
    m.insert("backend".into(), json!(r.backend));
    m.insert("label".into(), json!(r.label));
    m.insert("model_id".into(), json!(r.model_id));
    m.insert("tokenizer_id".into(), json!(r.tokenizer_id));
    m.insert("num_prompts".into(), json!(r.num_prompts));
    for (k, v) in &r.metadata {
        m.insert(k.clone(), json!(v));
    }
    m.insert("request_rate".into(), finite_or_inf(r.request_rate));
    // vLLM writes Python's non-standard `Infinity` here; strict JSON can't, so "inf".
    m.insert("burstiness".into(), finite_or_inf(r.burstiness));
    m.insert("max_concurrency".into(), json!(r.max_concurrency));
    if let Some((strategy, start, end)) = &r.ramp_up {
        m.insert("ramp_up_strategy".into(), json!(strategy));
        m.insert("ramp_up_start_rps".into(), json!(start));
        m.insert("ramp_up_end_rps".into(), json!(end));
    }
}

fn finite_or_inf(v: f64) -> Value {
    if v.is_finite() {
        json!(v)
    } else {
        json!("inf")
    }
}

fn totals(m: &mut Map<String, Value>, r: &RunResult) {
    let s = &r.summary;
    m.insert("duration".into(), json!(s.duration_s));
    m.insert("completed".into(), json!(s.completed));
    m.insert("failed".into(), json!(s.failed));
    m.insert("total_input_tokens".into(), json!(s.total_input_tokens));
    m.insert("total_output_tokens".into(), json!(s.total_output_tokens));
    m.insert("request_throughput".into(), json!(s.request_throughput));
    m.insert("request_goodput".into(), json!(s.request_goodput));
    m.insert("output_throughput".into(), json!(s.output_throughput));
    m.insert(
        "total_token_throughput".into(),
        json!(s.total_token_throughput),
    );
}

/// Per-request arrays. vLLM keeps `latencies` and `queue_times` always and the
/// rest only with `--save-detailed`. Failed requests hold 0 (or partial values).
fn per_request(m: &mut Map<String, Value>, r: &RunResult, detailed: bool) {
    let recs = &r.records;
    let secs = |d: Option<std::time::Duration>| d.map(|d| d.as_secs_f64()).unwrap_or(0.0);
    if detailed {
        let ok_out =
            |x: &crate::metrics::RequestRecord| if x.is_ok() { x.output_tokens } else { 0 };
        m.insert(
            "input_lens".into(),
            recs.iter().map(|x| json!(x.prompt_len)).collect(),
        );
        m.insert(
            "output_lens".into(),
            recs.iter().map(|x| json!(ok_out(x))).collect(),
        );
        m.insert(
            "ttfts".into(),
            recs.iter().map(|x| json!(secs(x.ttft()))).collect(),
        );
        m.insert(
            "itls".into(),
            recs.iter()
                .map(|x| json!(x.itl.iter().map(|d| d.as_secs_f64()).collect::<Vec<f64>>()))
                .collect(),
        );
        m.insert(
            "start_times".into(),
            recs.iter().map(|x| json!(x.sent.as_secs_f64())).collect(),
        );
        m.insert(
            "generated_texts".into(),
            recs.iter().map(|x| json!(x.generated_text)).collect(),
        );
        m.insert(
            "errors".into(),
            recs.iter()
                .map(|x| json!(x.error.as_ref().map(|e| e.message.as_str()).unwrap_or("")))
                .collect(),
        );
    }
    m.insert(
        "latencies".into(),
        recs.iter().map(|x| json!(secs(x.latency()))).collect(),
    );
    m.insert(
        "queue_times".into(),
        recs.iter()
            .map(|x| json!(x.queue_time().as_secs_f64()))
            .collect(),
    );
    m.insert(
        "max_output_tokens_per_s".into(),
        json!(r.summary.max_output_tokens_per_s),
    );
    m.insert(
        "max_concurrent_requests".into(),
        json!(r.summary.max_concurrent_requests),
    );
    m.insert("rtfx".into(), json!(0.0));
}

/// `mean_<m>_ms`, `median_<m>_ms`, `std_<m>_ms`, `p<P>_<m>_ms`.
fn stats(m: &mut Map<String, Value>, key: &str, d: &Distribution) {
    m.insert(format!("mean_{key}_ms"), json!(d.mean_ms));
    m.insert(format!("median_{key}_ms"), json!(d.median_ms));
    m.insert(format!("std_{key}_ms"), json!(d.std_ms));
    for (p, v) in &d.percentiles_ms {
        m.insert(format!("{}_{key}_ms", percentile_key(*p)), json!(v));
    }
}

fn dist(d: &Distribution) -> Value {
    let mut o = Map::new();
    o.insert("count".into(), json!(d.count));
    o.insert("mean_ms".into(), json!(d.mean_ms));
    o.insert("median_ms".into(), json!(d.median_ms));
    o.insert("std_ms".into(), json!(d.std_ms));
    o.insert("max_ms".into(), json!(d.max_ms));
    for (p, v) in &d.percentiles_ms {
        o.insert(format!("{}_ms", percentile_key(*p)), json!(v));
    }
    Value::Object(o)
}

fn kneecap(r: &RunResult, detailed: bool) -> Value {
    let k = &r.kneecap;
    let s = &r.summary;
    let mut v = json!({
        "schema_version": 1,
        "version": k.version,
        "target": k.target,
        "simulated": k.simulated,
        "sim_preset": k.sim_preset,
        "endpoint": k.endpoint,
        "dataset": k.dataset,
        "arrival": k.arrival,
        "seed": k.seed,
        "duration_bound_s": k.duration_bound_s,
        "interrupted": k.interrupted,
        "started_at": k.started_at,
        "warmups_ok": k.warmups_ok.map(|(ok, n)| json!({"ok": ok, "sent": n})),
        "dispatch_lateness": dist(&s.lateness),
        "ttft_from_due": dist(&s.ttft_from_due),
        "e2el_from_due": dist(&s.e2el_from_due),
        "e2el": dist(&s.e2el),
        "error_rate": if s.completed + s.failed == 0 { 0.0 } else { s.failed as f64 / (s.completed + s.failed) as f64 },
        "errors_by_kind": s.errors_by_kind,
        "first_errors": k.first_errors,
        "generator": k.generator.as_ref().map(|g| json!({
            "limited": g.health.limited,
            "reasons": g.health.reasons,
            "warnings": g.health.warnings,
            "lateness_judged": g.lateness_judged,
            "lateness_p99_ms": g.health.lateness_p99_ms,
            "lateness_bound_ms": g.health.lateness_bound_ms,
            "cpu_busy_fraction": g.cpu_busy_fraction,
            "runtime_lag_p99_ms": g.runtime_lag_p99_ms,
        })),
    });
    if let Some(s) = &k.shard {
        v["shard"] = super::shard::run_block(&s.id, &s.part);
        // What the merged result must show, as this shard was asked to.
        v["shard"]["percentiles"] = json!(r.percentiles);
        let metrics: Vec<&str> = r.percentile_metrics.iter().map(|m| m.key()).collect();
        v["shard"]["percentile_metrics"] = json!(metrics);
    }
    if let Some(m) = &k.merged {
        v["merged"] = m.clone();
    }
    if detailed {
        let due: Vec<f64> = r.records.iter().map(|x| x.due.as_secs_f64()).collect();
        let kinds: Vec<Value> = r
            .records
            .iter()
            .map(|x| json!(x.error.as_ref().map(|e| e.kind.as_str())))
            .collect();
        v["due_times"] = json!(due);
        v["error_kinds"] = json!(kinds);
        // The server's own per-request timings (llama.cpp), null where absent.
        if r.records.iter().any(|x| x.server_timings.is_some()) {
            let timings: Vec<Value> = r
                .records
                .iter()
                .map(|x| {
                    x.server_timings.as_deref().map(|t| {
                        json!({
                            "prompt_n": t.prompt_n,
                            "prompt_ms": t.prompt_ms,
                            "predicted_n": t.predicted_n,
                            "predicted_ms": t.predicted_ms,
                        })
                    })
                })
                .map(|t| t.unwrap_or(Value::Null))
                .collect();
            v["server_timings"] = json!(timings);
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::record::Timings;
    use crate::metrics::RequestRecord;

    fn result(records: Vec<RequestRecord>) -> RunResult {
        RunResult {
            date: "20261201-120000".into(),
            backend: "openai".into(),
            label: None,
            model_id: "m".into(),
            tokenizer_id: None,
            num_prompts: records.len(),
            metadata: vec![],
            request_rate: 1.0,
            burstiness: 1.0,
            max_concurrency: None,
            ramp_up: None,
            summary: Default::default(),
            percentile_metrics: vec![],
            percentiles: vec![],
            records,
            kneecap: Default::default(),
        }
    }

    #[test]
    fn detailed_json_keeps_the_servers_own_timings_per_request() {
        let timed = RequestRecord {
            server_timings: Some(Box::new(Timings {
                prompt_n: Some(64),
                prompt_ms: Some(310.5),
                predicted_n: Some(32),
                predicted_ms: Some(340.0),
            })),
            ..Default::default()
        };
        let r = result(vec![timed, RequestRecord::default()]);
        let v = render(&r, true);
        let t = &v["kneecap"]["server_timings"];
        assert_eq!(t[0]["predicted_n"], 32);
        assert_eq!(t[0]["predicted_ms"], 340.0);
        assert_eq!(t[0]["prompt_ms"], 310.5);
        assert!(t[1].is_null(), "a request without timings holds null");
        // Not detailed, or no server timings at all: no key.
        assert!(render(&r, false)["kneecap"].get("server_timings").is_none());
        let plain = result(vec![RequestRecord::default()]);
        assert!(render(&plain, true)["kneecap"]
            .get("server_timings")
            .is_none());
    }
}

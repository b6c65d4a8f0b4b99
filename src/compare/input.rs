//! Lenient loading of a saved result: a kneecap sweep JSON or a vLLM-style run
//! JSON (kneecap's or vLLM's own, read as [`RunJson`] like `kneecap merge`
//! reads it). PURE: text in, [`Input`] out; reading the file happens in the
//! command layer.
//!
//! Leniency, because old vLLM files are not strict JSON: bare `Infinity`,
//! `-Infinity` and `NaN` tokens become `"inf"`, `"-inf"` and `null`; a key
//! with a stray trailing colon (`"request_goodput:"`) loses it; in a sweep,
//! missing keys take their defaults, as does a `null` where a number belongs;
//! in a run, a float the file lacks (or holds as `null`) stays absent and a
//! missing count is 0 (see [`crate::result::json::lenient`]);
//! `request_rate` may be a number or `"inf"`; a JSON-lines file
//! (`--append-result`) yields its last object.

use super::stats::Sample;
use crate::client::scrape::QueueSample;
use crate::result::json::RunJson;
use crate::result::sweep::{SloOutcomeRow, StepResult, SweepResult};
use serde_json::{Map, Value};

/// What a result file holds.
#[derive(Debug, Clone)]
pub enum Input {
    /// A `kneecap sweep` result.
    Sweep(Box<SweepResult>),
    /// A single-load-level run (`kneecap run` / `vllm bench serve`).
    Run(Box<RunData>),
}

impl Input {
    /// `sweep` or `run`, for messages.
    pub fn kind(&self) -> &'static str {
        match self {
            Input::Sweep(_) => "sweep",
            Input::Run(_) => "run",
        }
    }
}

/// A run result reduced to what reports and comparisons use.
#[derive(Debug, Clone, Default)]
pub struct RunData {
    /// Every numeric top-level value, in file order (`"inf"` → infinity).
    pub scalars: Vec<(String, f64)>,
    /// Every string top-level value (`backend`, `model_id`, `label`, `date`...).
    pub texts: Vec<(String, String)>,
    /// Per-request E2E latency of successful requests, seconds.
    pub latencies_s: Option<Vec<f64>>,
    /// Per-request TTFT of successful requests, seconds (`--save-detailed`).
    pub ttfts_s: Option<Vec<f64>>,
    /// The inter-token latencies of each successful request, seconds.
    pub itls_s: Option<Vec<Vec<f64>>>,
}

impl RunData {
    /// A numeric value by key.
    pub fn get(&self, key: &str) -> Option<f64> {
        self.scalars.iter().find(|(k, _)| k == key).map(|(_, v)| *v)
    }

    /// A text value by key.
    pub fn text(&self, key: &str) -> Option<&str> {
        self.texts
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// Every saved value (seconds) of a latency metric, ITLs flattened as
    /// vLLM does for its ITL stats.
    pub fn values(&self, metric: &str) -> Option<Vec<f64>> {
        match metric {
            "e2el" => self.latencies_s.clone(),
            "ttft" => self.ttfts_s.clone(),
            "itl" => self.itls_s.as_ref().map(|g| g.concat()),
            _ => None,
        }
    }

    /// The saved values of a latency metric in milliseconds, grouped by
    /// request for the bootstrap.
    pub fn sample_ms(&self, metric: &str) -> Option<Sample> {
        let ms = |v: &[f64]| v.iter().map(|x| x * 1000.0).collect::<Vec<f64>>();
        match metric {
            "e2el" => self
                .latencies_s
                .as_deref()
                .map(|v| Sample::independent(&ms(v))),
            "ttft" => self.ttfts_s.as_deref().map(|v| Sample::independent(&ms(v))),
            "itl" => self.itls_s.as_ref().map(|g| {
                let g: Vec<Vec<f64>> = g.iter().map(|r| ms(r)).collect();
                Sample::grouped(&g)
            }),
            _ => None,
        }
    }
}

/// Parse the text of a result file. The error says what is wrong with the
/// content; the caller prefixes the file name.
pub fn parse(text: &str) -> Result<Input, String> {
    let cleaned = replace_non_finite(text);
    let value = parse_value(&cleaned)?;
    let Value::Object(obj) = value else {
        return Err("not a JSON object (expected a kneecap sweep or a run result)".into());
    };
    let obj = strip_key_colons(obj);
    if crate::result::sweep::is_sweep(&obj) {
        return sweep(obj).map(|s| Input::Sweep(Box::new(s)));
    }
    if obj.contains_key("completed") || obj.contains_key("request_throughput") {
        return run(obj).map(|r| Input::Run(Box::new(r)));
    }
    Err(
        "unknown shape: neither a kneecap sweep (\"kind\": \"kneecap_sweep\") \
         nor a run result (no \"completed\" or \"request_throughput\" key)"
            .into(),
    )
}

/// One JSON value, or the last of several JSON lines.
fn parse_value(text: &str) -> Result<Value, String> {
    match serde_json::from_str::<Value>(text) {
        Ok(v) => Ok(v),
        Err(first) => {
            let values: Result<Vec<Value>, _> = serde_json::Deserializer::from_str(text)
                .into_iter()
                .collect();
            match values {
                Ok(vs) if vs.len() > 1 => Ok(vs.into_iter().next_back().unwrap_or_default()),
                _ if text.trim().is_empty() => Err("empty file, not JSON".into()),
                _ => Err(format!("not valid JSON ({first})")),
            }
        }
    }
}

/// Turn Python's bare `Infinity` / `-Infinity` / `NaN` (outside strings)
/// into `"inf"` / `"-inf"` / `null`.
pub fn replace_non_finite(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let (mut in_string, mut escaped) = (false, false);
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        if in_string {
            out.push(c);
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '"' => in_string = false,
                _ => {}
            }
            rest = &rest[c.len_utf8()..];
            continue;
        }
        let replaced = [
            ("-Infinity", "\"-inf\""),
            ("Infinity", "\"inf\""),
            ("NaN", "null"),
        ]
        .into_iter()
        .find(|(token, _)| rest.starts_with(token));
        if let Some((token, with)) = replaced {
            out.push_str(with);
            rest = &rest[token.len()..];
            continue;
        }
        in_string = c == '"';
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

/// `"request_goodput:"` → `"request_goodput"` (old vLLM wrote the colon).
fn strip_key_colons(obj: Map<String, Value>) -> Map<String, Value> {
    obj.into_iter()
        .map(|(k, v)| (k.trim_end_matches(':').trim().to_string(), v))
        .collect()
}

/// Missing keys take their defaults, and `null` where a number belongs (a
/// NaN when written) becomes the default too: the file is laid over a
/// default sweep whose arrays hold one default element as the template.
fn sweep(obj: Map<String, Value>) -> Result<SweepResult, String> {
    let step = StepResult {
        slo_outcomes: vec![SloOutcomeRow::default()],
        queue: vec![QueueSample::default()],
        ..Default::default()
    };
    let template = SweepResult {
        steps: vec![step],
        ..Default::default()
    };
    let template = serde_json::to_value(template).map_err(|e| e.to_string())?;
    serde_json::from_value(overlay(&template, Value::Object(obj)))
        .map_err(|e| format!("a kneecap sweep, but not one this version can read ({e})"))
}

/// `file` laid over `template`: objects merge key by key, each array element
/// is laid over the template array's first element, `null` keeps the
/// template's non-null value.
fn overlay(template: &Value, file: Value) -> Value {
    match (template, file) {
        (Value::Object(t), Value::Object(f)) => {
            let Value::Object(mut out) = bare(template) else {
                return Value::Null;
            };
            for (k, v) in f {
                let merged = match t.get(&k) {
                    Some(tv) => overlay(tv, v),
                    None => v,
                };
                out.insert(k, merged);
            }
            Value::Object(out)
        }
        (Value::Array(t), Value::Array(f)) => match t.first() {
            Some(element) => Value::Array(f.into_iter().map(|v| overlay(element, v)).collect()),
            None => Value::Array(f),
        },
        (t, Value::Null) => bare(t),
        (_, f) => f,
    }
}

/// The template as a default value: its arrays emptied (their one element
/// is only a template, not data).
fn bare(template: &Value) -> Value {
    match template {
        Value::Array(_) => Value::Array(vec![]),
        Value::Object(t) => Value::Object(t.iter().map(|(k, v)| (k.clone(), bare(v))).collect()),
        t => t.clone(),
    }
}

/// A run file read as the one run JSON type, [`RunJson`], then reduced.
fn run(obj: Map<String, Value>) -> Result<RunData, String> {
    let json: RunJson = serde_json::from_value(Value::Object(obj))
        .map_err(|e| format!("a run result, but not one this version can read ({e})"))?;
    let mut data = RunData::default();
    top_level(&json, &mut data);
    gpu_scalars(&json, &mut data);
    // Which requests failed: vLLM's `errors` (non-empty = failed).
    let failed: Option<Vec<bool>> = json
        .detailed
        .errors
        .as_ref()
        .map(|e| e.iter().map(|m| !m.is_empty()).collect());
    let failed = failed.as_deref();
    data.latencies_s = seconds(json.latencies.as_deref(), failed);
    data.ttfts_s = seconds(json.detailed.ttfts.as_deref(), failed);
    data.itls_s = per_request(json.detailed.itls.as_deref(), failed);
    Ok(data)
}

/// Into `data`: `kneecap.gpu`'s energy per output token and per request
/// and mean power (`--gpu-metrics-url`), as `gpu_*` scalars.
fn gpu_scalars(json: &RunJson, data: &mut RunData) {
    let Some(g) = json.kneecap.as_ref().and_then(|k| k.gpu.as_ref()) else {
        return;
    };
    let values = [
        ("gpu_joules_per_output_token", g.joules_per_output_token),
        ("gpu_joules_per_request", g.joules_per_request),
        ("gpu_mean_power_w", Some(g.mean_power_w)),
    ];
    for (k, v) in values {
        if let Some(v) = v {
            data.scalars.push((k.into(), v));
        }
    }
}

/// Into `data`: the top-level numbers (`"inf"` → infinity) and non-empty
/// strings of the typed file, in its key order; what the file does not hold
/// (NaN, `null`) is left out.
fn top_level(json: &RunJson, data: &mut RunData) {
    let Ok(Value::Object(obj)) = serde_json::to_value(json) else {
        return;
    };
    for (k, v) in obj {
        match v {
            Value::Number(n) => data.scalars.extend(n.as_f64().map(|x| (k, x))),
            Value::String(s) if s == "inf" => data.scalars.push((k, f64::INFINITY)),
            Value::String(s) if !s.is_empty() => data.texts.push((k, s)),
            _ => {}
        }
    }
}

fn is_failed(failed: Option<&[bool]>, i: usize) -> bool {
    failed.and_then(|f| f.get(i)).copied().unwrap_or(false)
}

/// Per-request seconds of successful requests. Failed requests hold 0 in
/// vLLM's arrays, so non-positive and non-finite values are dropped too.
fn seconds(v: Option<&[f64]>, failed: Option<&[bool]>) -> Option<Vec<f64>> {
    Some(
        v?.iter()
            .enumerate()
            .filter(|(i, x)| !is_failed(failed, *i) && x.is_finite() && **x > 0.0)
            .map(|(_, x)| *x)
            .collect(),
    )
}

/// `itls` is a list of per-request lists; keep the successful ones.
fn per_request(v: Option<&[Vec<f64>]>, failed: Option<&[bool]>) -> Option<Vec<Vec<f64>>> {
    Some(
        v?.iter()
            .enumerate()
            .filter(|(i, _)| !is_failed(failed, *i))
            .map(|(_, itls)| {
                itls.iter()
                    .copied()
                    .filter(|x| x.is_finite() && *x >= 0.0)
                    .collect()
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shape of an old `vllm bench serve` result: Python's json.dump.
    const VLLM_OLD: &str = r#"{"date": "20240101-000000", "backend": "vllm",
        "model_id": "m", "num_prompts": 3, "request_rate": Infinity,
        "burstiness": 1.0, "max_concurrency": null, "duration": 2.0,
        "completed": 2, "total_input_tokens": 30, "total_output_tokens": 20,
        "request_throughput": 1.0, "request_goodput:": 0.5,
        "output_throughput": 10.0, "total_token_throughput": 25.0,
        "input_lens": [10, 10, 10], "output_lens": [10, 10, 0],
        "ttfts": [0.1, 0.2, 0.0], "itls": [[0.01, 0.02], [0.03], []],
        "latencies": [1.0, 2.0, 0.0], "errors": ["", "", "boom"],
        "mean_ttft_ms": 150.0, "median_ttft_ms": 150.0, "std_ttft_ms": NaN,
        "p99_ttft_ms": 199.0, "label": "has Infinity and NaN inside"}"#;

    #[test]
    fn old_vllm_file_with_infinity_nan_and_stray_colon_loads() {
        let Input::Run(r) = parse(VLLM_OLD).unwrap() else {
            panic!("expected a run")
        };
        assert_eq!(r.get("request_rate"), Some(f64::INFINITY));
        assert_eq!(r.get("request_goodput"), Some(0.5));
        assert_eq!(r.get("std_ttft_ms"), None);
        assert_eq!(r.text("label"), Some("has Infinity and NaN inside"));
        assert_eq!(r.latencies_s.as_deref(), Some(&[1.0, 2.0][..]));
        assert_eq!(r.ttfts_s.as_deref(), Some(&[0.1, 0.2][..]));
        assert_eq!(r.values("itl"), Some(vec![0.01, 0.02, 0.03]));
        assert_eq!(
            r.itls_s.map(|g| g.len()),
            Some(2),
            "the failed request is dropped"
        );
    }

    #[test]
    fn a_runs_gpu_block_gives_its_energy_per_token_to_compare() {
        let g = r#"{"source": "counter", "gpus": 2, "samples": 9, "duration_s": 8.0,
            "mean_power_w": 500.0, "peak_power_w": 700.0, "energy_j": 4000.0,
            "joules_per_output_token": 0.25, "joules_per_request": 40.0}"#;
        let text = VLLM_OLD.replacen('{', &format!("{{\"kneecap\": {{\"gpu\": {g}}},"), 1);
        let Input::Run(a) = parse(&text).unwrap() else {
            panic!("expected a run")
        };
        assert_eq!(a.get("gpu_joules_per_output_token"), Some(0.25));
        assert_eq!(a.get("gpu_mean_power_w"), Some(500.0));
        let Input::Run(b) = parse(&text.replace("0.25", "0.3")).unwrap() else {
            panic!("expected a run")
        };
        let c = crate::compare::runs::compare("a", &a, "b", &b);
        let row = c
            .rows
            .iter()
            .find(|r| r.metric == "gpu_joules_per_output_token")
            .unwrap();
        assert_eq!((row.baseline, row.candidate), (Some(0.25), Some(0.3)));
        assert!((row.change_pct.unwrap() - 20.0).abs() < 1e-9);
        let Input::Run(plain) = parse(VLLM_OLD).unwrap() else {
            panic!("expected a run")
        };
        let c = crate::compare::runs::compare("a", &plain, "b", &plain);
        assert!(c.rows.iter().all(|r| !r.metric.starts_with("gpu_")));
    }

    #[test]
    fn tokens_inside_strings_and_escapes_are_left_alone() {
        let s = r#"{"a": "x\"NaN", "b": -Infinity, "c": [NaN]}"#;
        assert_eq!(
            replace_non_finite(s),
            r#"{"a": "x\"NaN", "b": "-inf", "c": [null]}"#
        );
    }

    #[test]
    fn missing_arrays_are_absent_not_empty() {
        let Input::Run(r) = parse(r#"{"completed": 5, "request_rate": "inf"}"#).unwrap() else {
            panic!("expected a run")
        };
        assert!(r.latencies_s.is_none() && r.ttfts_s.is_none());
        assert_eq!(r.get("request_rate"), Some(f64::INFINITY));
    }

    #[test]
    fn json_lines_yield_the_last_object() {
        let Input::Run(r) = parse("{\"completed\": 1}\n{\"completed\": 2}\n").unwrap() else {
            panic!("expected a run")
        };
        assert_eq!(r.get("completed"), Some(2.0));
    }

    #[test]
    fn unknown_shapes_and_non_json_are_errors() {
        assert!(parse("hello").unwrap_err().contains("not valid JSON"));
        assert!(parse("[1, 2]").unwrap_err().contains("not a JSON object"));
        assert!(parse(r#"{"x": 1}"#).unwrap_err().contains("unknown shape"));
        assert!(parse("").unwrap_err().contains("empty"));
    }

    #[test]
    fn a_hand_written_sweep_with_missing_keys_and_nulls_loads() {
        let text = r#"{"kind": "kneecap_sweep", "mode": "rate",
            "knee": {"last_pass": 8, "first_fail": 16},
            "steps": [{"load": 8, "verdict": "pass", "ttft_ms": {"count": 5, "p99": NaN},
                       "slo_outcomes": [{"slo": "p99_ttft_ms<=500"}]}]}"#;
        let Input::Sweep(s) = parse(text).unwrap() else {
            panic!("expected a sweep")
        };
        assert_eq!(s.knee.last_pass, Some(8.0));
        assert_eq!(s.knee.goodput_at_knee, None, "absent options stay None");
        let step = &s.steps[0];
        assert_eq!((step.ttft_ms.count, step.ttft_ms.p99), (5, 0.0));
        assert_eq!(step.slo_outcomes[0].slo, "p99_ttft_ms<=500");
        assert!(step.queue.is_empty(), "template elements are not invented");
    }

    #[test]
    fn a_sweep_of_the_wrong_types_is_an_error() {
        let e = parse(r#"{"kind": "kneecap_sweep", "steps": "none"}"#).unwrap_err();
        assert!(e.contains("kneecap sweep"), "{e}");
    }

    #[test]
    fn sweep_kind_is_detected() {
        let mut s = crate::result::fixture::sweep_with(&[4.0], &[8.0]);
        s.kind = "kneecap_sweep".into();
        let text = serde_json::to_string(&s).unwrap();
        assert!(matches!(parse(&text).unwrap(), Input::Sweep(_)));
    }
}

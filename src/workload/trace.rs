//! Trace files for replay: vLLM's `timed_trace` JSONL (one request per line:
//! `timestamp`, `input_length`, `output_length`, `hash_ids`, or the names the
//! `--timed-trace-label-*` flags give) and the Azure LLM inference trace CSV
//! (`TIMESTAMP,ContextTokens,GeneratedTokens`), parsed into [`TraceRow`]s.
//!
//! Timestamps are in seconds after `--timed-trace-sec-multiplier` (0.001 for
//! Mooncake traces, whose timestamps are milliseconds). A `timed_trace` row's
//! timestamp is its offset from the start of the run, as vLLM uses it; an
//! Azure row's is its time since the file's first request. Rows are put in
//! timestamp order (stably) so they can be released in order.
//!
//! Pure: parses file contents handed to it; no I/O. Every error is one line
//! naming the file, the line and the field.

use serde_json::Value;

/// The JSON field names of a `timed_trace` row (vLLM's defaults).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceLabels {
    pub timestamp: String,
    pub input_length: String,
    pub output_length: String,
    pub hash_ids: String,
}

impl Default for TraceLabels {
    fn default() -> Self {
        Self {
            timestamp: "timestamp".into(),
            input_length: "input_length".into(),
            output_length: "output_length".into(),
            hash_ids: "hash_ids".into(),
        }
    }
}

/// One request of a trace.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceRow {
    /// 1-based line in the file (for messages).
    pub line: usize,
    /// Seconds (multiplier applied).
    pub timestamp: f64,
    pub input_len: u32,
    pub output_len: u32,
    /// Block ids of the prompt, `chunk size` tokens each; equal ids are equal
    /// blocks. `None` when the format has none (Azure): every block is the
    /// row's own.
    pub hash_ids: Option<Vec<u64>>,
}

/// Which format a trace file is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TraceFormat {
    /// vLLM's `timed_trace` JSONL.
    Jsonl,
    /// The Azure LLM inference trace CSV.
    AzureCsv,
}

/// The format of `contents`: a first line that names the Azure columns is a
/// CSV, anything else is read as JSONL.
pub fn detect(contents: &str) -> TraceFormat {
    let first = contents
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("");
    if first.contains("ContextTokens") && first.contains("GeneratedTokens") {
        TraceFormat::AzureCsv
    } else {
        TraceFormat::Jsonl
    }
}

/// Parse a trace file's contents (either format), multiply timestamps by
/// `sec_multiplier`, and sort rows by timestamp. `origin` names the file.
pub fn parse(
    origin: &str,
    contents: &str,
    labels: &TraceLabels,
    sec_multiplier: f64,
) -> Result<Vec<TraceRow>, String> {
    let mut rows = match detect(contents) {
        TraceFormat::Jsonl => parse_jsonl(origin, contents, labels)?,
        TraceFormat::AzureCsv => parse_azure(origin, contents)?,
    };
    if rows.is_empty() {
        return Err(format!(
            "trace file '{origin}' has no requests (expected one JSON object per line, or an Azure trace CSV)"
        ));
    }
    for r in &mut rows {
        r.timestamp *= sec_multiplier;
    }
    rows.sort_by(|a, b| a.timestamp.total_cmp(&b.timestamp));
    Ok(rows)
}

/// `timed_trace` JSONL: one object per non-empty line.
fn parse_jsonl(
    origin: &str,
    contents: &str,
    labels: &TraceLabels,
) -> Result<Vec<TraceRow>, String> {
    let mut rows = Vec::new();
    for (i, text) in contents.lines().enumerate() {
        if text.trim().is_empty() {
            continue;
        }
        let line = i + 1;
        let at = |msg: String| format!("{origin}:{line}: {msg}");
        let v: Value = serde_json::from_str(text).map_err(|e| {
            at(format!(
                "not a JSON object ({e}); a timed_trace file has one object per line"
            ))
        })?;
        let Some(obj) = v.as_object() else {
            return Err(at(
                "not a JSON object; a timed_trace file has one object per line".into(),
            ));
        };
        let field = |name: &str, flag: &str| {
            obj.get(name).ok_or_else(|| {
                let keys: Vec<&str> = obj.keys().map(String::as_str).collect();
                at(format!(
                    "field '{name}' is missing (the row has: {}); name the field with --timed-trace-label-{flag}",
                    keys.join(", ")
                ))
            })
        };
        let timestamp = seconds(field(&labels.timestamp, "timestamp")?)
            .map_err(|e| at(format!("field '{}' {e}", labels.timestamp)))?;
        let input_len = count(field(&labels.input_length, "input-length")?, 1)
            .map_err(|e| at(format!("field '{}' {e}", labels.input_length)))?;
        let output_len = count(field(&labels.output_length, "output-length")?, 1)
            .map_err(|e| at(format!("field '{}' {e}", labels.output_length)))?;
        let hash_ids = match obj.get(&labels.hash_ids) {
            None | Some(Value::Null) => Vec::new(),
            Some(v) => ids(v).map_err(|e| at(format!("field '{}' {e}", labels.hash_ids)))?,
        };
        rows.push(TraceRow {
            line,
            timestamp,
            input_len,
            output_len,
            hash_ids: Some(hash_ids),
        });
    }
    Ok(rows)
}

/// A timestamp: a finite, non-negative number (or a string holding one).
fn seconds(v: &Value) -> Result<f64, String> {
    let x = match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse::<f64>().ok(),
        _ => None,
    };
    match x {
        Some(x) if x.is_finite() && x >= 0.0 => Ok(x),
        _ => Err(format!("must be a non-negative number of seconds, not {v}")),
    }
}

/// A token count of at least `min`.
fn count(v: &Value, min: u64) -> Result<u32, String> {
    match v.as_u64().and_then(|n| u32::try_from(n).ok()) {
        Some(n) if u64::from(n) >= min => Ok(n),
        _ => Err(format!(
            "must be a whole number of tokens, at least {min}, not {v}"
        )),
    }
}

/// A list of integer block ids.
fn ids(v: &Value) -> Result<Vec<u64>, String> {
    let Some(list) = v.as_array() else {
        return Err(format!("must be a list of integers, not {v}"));
    };
    list.iter()
        .map(|x| {
            x.as_u64()
                .or_else(|| x.as_i64().map(|i| i as u64))
                .ok_or_else(|| format!("must be a list of integers, but holds {x}"))
        })
        .collect()
}

/// The Azure LLM inference trace CSV: `TIMESTAMP` (`YYYY-MM-DD HH:MM:SS.fffffff`,
/// or plain seconds), `ContextTokens`, `GeneratedTokens`. Timestamps become
/// seconds since the earliest row.
fn parse_azure(origin: &str, contents: &str) -> Result<Vec<TraceRow>, String> {
    let mut lines = contents
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty());
    let Some((_, header)) = lines.next() else {
        return Ok(Vec::new());
    };
    let header: Vec<&str> = header.split(',').map(str::trim).collect();
    let column = |name: &str| {
        header.iter().position(|h| *h == name).ok_or_else(|| {
            format!(
                "{origin}:1: no '{name}' column (header: {}); an Azure trace CSV has TIMESTAMP,ContextTokens,GeneratedTokens",
                header.join(",")
            )
        })
    };
    let (ts, ctx, gen) = (
        column("TIMESTAMP")?,
        column("ContextTokens")?,
        column("GeneratedTokens")?,
    );
    let mut rows = Vec::new();
    for (i, text) in lines {
        let line = i + 1;
        let cells: Vec<&str> = text.split(',').map(str::trim).collect();
        let cell = |c: usize, name: &str| {
            cells
                .get(c)
                .copied()
                .ok_or_else(|| format!("{origin}:{line}: no '{name}' cell ({} cells)", cells.len()))
        };
        let timestamp = azure_seconds(cell(ts, "TIMESTAMP")?).ok_or_else(|| {
            format!("{origin}:{line}: field 'TIMESTAMP' is not a date-time (YYYY-MM-DD HH:MM:SS.fff) or a number of seconds")
        })?;
        let tokens = |c: usize, name: &str| -> Result<u32, String> {
            let v = cell(c, name)?;
            match v.parse::<u32>() {
                Ok(n) if n >= 1 => Ok(n),
                _ => Err(format!("{origin}:{line}: field '{name}' must be a whole number of tokens, at least 1, not '{v}'")),
            }
        };
        rows.push(TraceRow {
            line,
            timestamp,
            input_len: tokens(ctx, "ContextTokens")?,
            output_len: tokens(gen, "GeneratedTokens")?,
            hash_ids: None,
        });
    }
    let first = rows
        .iter()
        .map(|r| r.timestamp)
        .fold(f64::INFINITY, f64::min);
    for r in &mut rows {
        r.timestamp -= first;
    }
    Ok(rows)
}

/// Seconds since 1970 of `YYYY-MM-DD HH:MM:SS[.fraction]` (UTC, any number
/// of fraction digits), or a plain number of seconds.
fn azure_seconds(s: &str) -> Option<f64> {
    if let Ok(x) = s.parse::<f64>() {
        return (x.is_finite() && x >= 0.0).then_some(x);
    }
    let (date, time) = s.split_once([' ', 'T'])?;
    let mut d = date.splitn(3, '-').map(|p| p.parse::<i64>().ok());
    let (y, m, day) = (d.next()??, d.next()??, d.next()??);
    let mut t = time.splitn(3, ':');
    let (h, min) = (
        t.next()?.parse::<i64>().ok()?,
        t.next()?.parse::<i64>().ok()?,
    );
    let sec: f64 = t.next()?.parse().ok()?;
    let valid =
        (1..=12).contains(&m) && (1..=31).contains(&day) && h < 24 && min < 60 && sec < 61.0;
    valid.then(|| (days_from_civil(y, m, day) * 86_400 + h * 3600 + min * 60) as f64 + sec)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's
/// `days_from_civil` algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
#[path = "trace_tests.rs"]
mod tests;

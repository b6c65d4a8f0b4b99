//! ShardBlock: what one shard of a distributed run writes so that `kneecap
//! merge` can recombine it exactly — identity (index, count, workload
//! fingerprint, seed), timing (start lateness, wall-clock window), additive
//! counters and the latency histograms of [`crate::metrics::hist`]. Plain
//! data and its JSON form; no I/O.

use crate::metrics::hist::RunHists;
use crate::metrics::stats::{self, GoodputSlo, TokenTotals};
use crate::metrics::RequestRecord;
use crate::shard::{Shard, StartAt};
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// Version of the shard block; `kneecap merge` refuses others.
pub const SHARD_SCHEMA: u32 = 1;

/// Counters that add across shards.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ShardCounters {
    /// Requests this shard was due to send (in the window, for a sweep step).
    pub planned: u64,
    pub completed: u64,
    pub failed: u64,
    pub total_input_tokens: u64,
    pub total_output_tokens: u64,
    /// Pooling runs: Σ input sequences of the successful requests (0, and
    /// absent from the file, for generation).
    pub total_input_sequences: u64,
    /// Successful requests meeting every `--goodput` SLO (when configured).
    pub good: Option<u64>,
    pub errors_by_kind: BTreeMap<String, u64>,
    /// Peak requests in flight on this shard; summed, an upper bound of the whole.
    pub max_concurrent_requests: u64,
    /// Peak output tokens/s on this shard; summed, an upper bound of the whole.
    pub max_output_tokens_per_s: f64,
}

impl ShardCounters {
    /// Count `records` (all of them: the caller picks the window).
    pub fn from_records(records: &[RequestRecord], goodput: Option<&GoodputSlo>) -> Self {
        let tokens = TokenTotals::of(records);
        let completed = stats::successful(records).count() as u64;
        ShardCounters {
            planned: records.len() as u64,
            completed,
            failed: records.len() as u64 - completed,
            total_input_tokens: tokens.input,
            total_output_tokens: tokens.output,
            total_input_sequences: tokens.sequences,
            good: goodput.map(|slo| {
                stats::successful(records)
                    .filter(|r| stats::meets_slo(r, slo))
                    .count() as u64
            }),
            errors_by_kind: stats::errors_by_kind(records),
            max_concurrent_requests: stats::max_concurrent_requests(records) as u64,
            max_output_tokens_per_s: stats::max_output_tokens_per_s(records),
        }
    }

    /// Add `other` into `self`.
    pub fn add(&mut self, other: &ShardCounters) {
        self.planned += other.planned;
        self.completed += other.completed;
        self.failed += other.failed;
        self.total_input_tokens += other.total_input_tokens;
        self.total_output_tokens += other.total_output_tokens;
        self.total_input_sequences += other.total_input_sequences;
        self.good = match (self.good, other.good) {
            (Some(a), Some(b)) => Some(a + b),
            _ => None,
        };
        for (k, v) in &other.errors_by_kind {
            *self.errors_by_kind.entry(k.clone()).or_insert(0) += v;
        }
        self.max_concurrent_requests += other.max_concurrent_requests;
        self.max_output_tokens_per_s += other.max_output_tokens_per_s;
    }

    fn to_json(&self) -> Value {
        let mut v = json!({
            "planned": self.planned,
            "completed": self.completed,
            "failed": self.failed,
            "total_input_tokens": self.total_input_tokens,
            "total_output_tokens": self.total_output_tokens,
            "good": self.good,
            "errors_by_kind": self.errors_by_kind,
            "max_concurrent_requests": self.max_concurrent_requests,
            "max_output_tokens_per_s": self.max_output_tokens_per_s,
        });
        if self.total_input_sequences > 0 {
            v["total_input_sequences"] = self.total_input_sequences.into();
        }
        v
    }

    fn from_json(v: &Value) -> Result<Self, String> {
        let u = |k: &str| {
            v.get(k)
                .and_then(Value::as_u64)
                .ok_or_else(|| format!("counter `{k}` is missing"))
        };
        Ok(ShardCounters {
            planned: u("planned")?,
            completed: u("completed")?,
            failed: u("failed")?,
            total_input_tokens: u("total_input_tokens")?,
            total_output_tokens: u("total_output_tokens")?,
            total_input_sequences: v
                .get("total_input_sequences")
                .and_then(Value::as_u64)
                .unwrap_or(0),
            good: v.get("good").and_then(Value::as_u64),
            errors_by_kind: v
                .get("errors_by_kind")
                .and_then(Value::as_object)
                .map(|m| {
                    m.iter()
                        .map(|(k, n)| (k.clone(), n.as_u64().unwrap_or(0)))
                        .collect()
                })
                .unwrap_or_default(),
            max_concurrent_requests: u("max_concurrent_requests")?,
            max_output_tokens_per_s: v
                .get("max_output_tokens_per_s")
                .and_then(Value::as_f64)
                .unwrap_or(0.0),
        })
    }
}

/// Who a shard is and when it ran.
#[derive(Debug, Clone, PartialEq)]
pub struct ShardIdentity {
    pub shard: Shard,
    /// [`crate::shard::fingerprint`] of the workload (no shard index in it).
    pub fingerprint: String,
    pub seed: u64,
    /// The common `--start-at`, if one was given.
    pub start_at: Option<StartAt>,
}

/// Measurements of one run or one sweep step on one shard.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ShardPart {
    /// Actual start minus `--start-at`, ms (negative = early); `None` without `--start-at`.
    pub start_lateness_ms: Option<f64>,
    /// Wall-clock window the part covers, Unix seconds.
    pub window_start_unix_s: f64,
    pub window_end_unix_s: f64,
    pub counters: ShardCounters,
    pub hists: RunHists,
    /// The generator fell behind on this shard.
    pub generator_limited: bool,
    /// Stopped by a signal.
    pub interrupted: bool,
}

impl ShardIdentity {
    /// JSON of the identity fields.
    pub fn to_json(&self) -> Value {
        json!({
            "schema": SHARD_SCHEMA,
            "index": self.shard.index,
            "count": self.shard.count,
            "fingerprint": self.fingerprint,
            "seed": self.seed,
            "start_at": self.start_at.map(|s| s.rfc3339()),
            "start_at_unix_ns": self.start_at.map(|s| s.0.to_string()),
        })
    }

    /// Read [`ShardIdentity::to_json`]'s form.
    pub fn from_json(v: &Value) -> Result<Self, String> {
        let schema = v.get("schema").and_then(Value::as_u64).unwrap_or(0);
        if schema != u64::from(SHARD_SCHEMA) {
            return Err(format!(
                "shard schema {schema} is not {SHARD_SCHEMA} (written by another kneecap version)"
            ));
        }
        let u = |k: &str| {
            v.get(k)
                .and_then(Value::as_u64)
                .ok_or_else(|| format!("shard field `{k}` is missing"))
        };
        Ok(ShardIdentity {
            shard: Shard {
                index: u("index")? as usize,
                count: u("count")? as usize,
            },
            fingerprint: v
                .get("fingerprint")
                .and_then(Value::as_str)
                .ok_or("shard field `fingerprint` is missing")?
                .to_string(),
            seed: u("seed")?,
            start_at: v
                .get("start_at_unix_ns")
                .and_then(Value::as_str)
                .and_then(|s| s.parse().ok())
                .map(StartAt),
        })
    }
}

impl ShardPart {
    /// JSON of the measurements (histograms as V2+DEFLATE base64).
    pub fn to_json(&self) -> Value {
        let hists = self
            .hists
            .to_json()
            .unwrap_or_else(|e| json!({ "error": e.to_string() }));
        json!({
            "start_lateness_ms": self.start_lateness_ms,
            "window_start_unix_s": self.window_start_unix_s,
            "window_end_unix_s": self.window_end_unix_s,
            "generator_limited": self.generator_limited,
            "interrupted": self.interrupted,
            "counters": self.counters.to_json(),
            "histograms": hists,
        })
    }

    /// Read [`ShardPart::to_json`]'s form.
    pub fn from_json(v: &Value) -> Result<Self, String> {
        let f = |k: &str| v.get(k).and_then(Value::as_f64);
        let b = |k: &str| v.get(k).and_then(Value::as_bool).unwrap_or(false);
        Ok(ShardPart {
            start_lateness_ms: f("start_lateness_ms"),
            window_start_unix_s: f("window_start_unix_s")
                .ok_or("`window_start_unix_s` is missing")?,
            window_end_unix_s: f("window_end_unix_s").ok_or("`window_end_unix_s` is missing")?,
            counters: ShardCounters::from_json(v.get("counters").ok_or("`counters` is missing")?)?,
            hists: RunHists::from_json(v.get("histograms").ok_or("`histograms` is missing")?)?,
            generator_limited: b("generator_limited"),
            interrupted: b("interrupted"),
        })
    }
}

/// A shard's run: who it is and what it measured.
#[derive(Debug, Clone, PartialEq)]
pub struct ShardRun {
    pub id: ShardIdentity,
    pub part: ShardPart,
}

/// The `"kneecap"."shard"` object of a run: identity plus one part.
pub fn run_block(id: &ShardIdentity, part: &ShardPart) -> Value {
    let mut v = id.to_json();
    if let (Value::Object(m), Value::Object(p)) = (&mut v, part.to_json()) {
        m.extend(p);
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::{ErrorKind, RequestError};
    use std::time::Duration;

    fn rec(ttft_ms: u64, ok: bool) -> RequestRecord {
        let ms = Duration::from_millis;
        RequestRecord {
            sent: ms(1),
            first_token: Some(ms(1 + ttft_ms)),
            last_token: Some(ms(50 + ttft_ms)),
            itl: vec![ms(49)],
            prompt_len: 10,
            output_tokens: 2,
            error: (!ok).then(|| RequestError {
                kind: ErrorKind::Timeout,
                status: None,
                message: "t".into(),
            }),
            ..Default::default()
        }
    }

    #[test]
    fn a_run_block_round_trips_and_counters_add() {
        let records = vec![rec(10, true), rec(20, true), rec(5, false)];
        let slo = GoodputSlo {
            ttft_ms: Some(15.0),
            ..Default::default()
        };
        let part = ShardPart {
            start_lateness_ms: Some(1.5),
            window_start_unix_s: 100.0,
            window_end_unix_s: 102.0,
            counters: ShardCounters::from_records(&records, Some(&slo)),
            hists: RunHists::from_records(&records),
            ..Default::default()
        };
        let id = ShardIdentity {
            shard: Shard { index: 1, count: 3 },
            fingerprint: "00ff".into(),
            seed: 7,
            start_at: Some(StartAt(1_700_000_000_123_456_789)),
        };
        let v = run_block(&id, &part);
        assert_eq!(ShardIdentity::from_json(&v).unwrap(), id);
        assert_eq!(ShardPart::from_json(&v).unwrap(), part);
        assert_eq!((part.counters.completed, part.counters.failed), (2, 1));
        assert_eq!(part.counters.good, Some(1));
        let mut sum = part.counters.clone();
        sum.add(&part.counters);
        assert_eq!(sum.planned, 6);
        assert_eq!(sum.errors_by_kind.get("timeout"), Some(&2));
    }

    #[test]
    fn pooling_input_sequences_add_up_and_generation_files_do_not_carry_them() {
        let pooled = |n: u32| RequestRecord {
            input_sequences: n,
            ..rec(5, true)
        };
        let mut a = ShardCounters::from_records(&[pooled(4), pooled(2)], None);
        let b = ShardCounters::from_records(&[pooled(3)], None);
        a.add(&b);
        assert_eq!(a.total_input_sequences, 9);
        let back = ShardCounters::from_json(&a.to_json()).unwrap();
        assert_eq!(back, a);
        let generation = ShardCounters::from_records(&[rec(5, true)], None);
        assert!(generation.to_json().get("total_input_sequences").is_none());
    }
}

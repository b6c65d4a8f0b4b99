//! ShardBlock: what one shard of a distributed run writes so that `kneecap
//! merge` can recombine it exactly — identity (index, count, workload
//! fingerprint, seed), timing (start lateness, wall-clock window), additive
//! counters and the latency histograms of [`crate::metrics::hist`]. Plain
//! serde data that adds up ([`ShardPart::add`]); no I/O. The blocks of a
//! sharded sweep are in [`super::shard_sweep`].

use crate::metrics::hist::RunHists;
use crate::metrics::stats::{self, GoodputSlo, TokenTotals};
use crate::metrics::RequestRecord;
use crate::shard::{Shard, StartAt};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Version of the shard block; `kneecap merge` refuses others.
pub const SHARD_SCHEMA: u32 = 1;

/// Counters that add across shards. Field order is the file's key order.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ShardCounters {
    /// Requests this shard was due to send (in the window, for a sweep step).
    pub planned: u64,
    pub completed: u64,
    pub failed: u64,
    pub total_input_tokens: u64,
    pub total_output_tokens: u64,
    /// Successful requests meeting every `--goodput` SLO (when configured).
    pub good: Option<u64>,
    #[serde(default)]
    pub errors_by_kind: BTreeMap<String, u64>,
    /// Peak requests in flight on this shard; summed, an upper bound of the whole.
    pub max_concurrent_requests: u64,
    /// Peak output tokens/s on this shard; summed, an upper bound of the whole.
    #[serde(default)]
    pub max_output_tokens_per_s: f64,
    /// Pooling runs: Σ input sequences of the successful requests (0, and
    /// absent from the file, for generation).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub total_input_sequences: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
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
}

/// Who a shard is and when it ran. Written as [`IdentityJson`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(into = "IdentityJson", try_from = "IdentityJson")]
pub struct ShardIdentity {
    pub shard: Shard,
    /// The workload's fingerprint (`crate::config::run_fingerprint`; no shard index in it).
    pub fingerprint: String,
    pub seed: u64,
    /// The common `--start-at`, if one was given.
    pub start_at: Option<StartAt>,
}

/// [`ShardIdentity`] as the file holds it: the schema, and the start both
/// as RFC 3339 (to read) and as Unix nanoseconds in a string (exact; JSON
/// numbers lose integers above 2^53).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct IdentityJson {
    #[serde(default)]
    schema: u32,
    index: usize,
    count: usize,
    fingerprint: String,
    seed: u64,
    #[serde(default)]
    start_at: Option<String>,
    #[serde(default)]
    start_at_unix_ns: Option<String>,
}

impl From<ShardIdentity> for IdentityJson {
    fn from(id: ShardIdentity) -> Self {
        IdentityJson {
            schema: SHARD_SCHEMA,
            index: id.shard.index,
            count: id.shard.count,
            fingerprint: id.fingerprint,
            seed: id.seed,
            start_at: id.start_at.map(|s| s.rfc3339()),
            start_at_unix_ns: id.start_at.map(|s| s.0.to_string()),
        }
    }
}

impl TryFrom<IdentityJson> for ShardIdentity {
    type Error = String;

    fn try_from(v: IdentityJson) -> Result<Self, String> {
        if v.schema != SHARD_SCHEMA {
            return Err(format!(
                "shard schema {} is not {SHARD_SCHEMA} (written by another kneecap version)",
                v.schema
            ));
        }
        Ok(ShardIdentity {
            shard: Shard {
                index: v.index,
                count: v.count,
            },
            fingerprint: v.fingerprint,
            seed: v.seed,
            start_at: v.start_at_unix_ns.and_then(|s| s.parse().ok()).map(StartAt),
        })
    }
}

/// Measurements of one run or one sweep step on one shard. Field order is
/// the file's key order.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ShardPart {
    /// Actual start minus `--start-at`, ms (negative = early); `None` without `--start-at`.
    #[serde(default)]
    pub start_lateness_ms: Option<f64>,
    /// Wall-clock window the part covers, Unix seconds.
    pub window_start_unix_s: f64,
    pub window_end_unix_s: f64,
    /// The generator fell behind on this shard.
    #[serde(default)]
    pub generator_limited: bool,
    /// Stopped by a signal.
    #[serde(default)]
    pub interrupted: bool,
    pub counters: ShardCounters,
    /// The latency histograms (V2+DEFLATE base64, see [`RunHists`]).
    #[serde(rename = "histograms")]
    pub hists: RunHists,
}

impl ShardPart {
    /// Add `other` into `self`: counters and histograms add; the window is
    /// the earliest start to the latest end; flags OR together; start
    /// lateness keeps the worst (largest absolute) value.
    pub fn add(&mut self, other: &ShardPart) -> Result<(), String> {
        self.counters.add(&other.counters);
        self.hists.merge(&other.hists).map_err(|e| e.to_string())?;
        self.window_start_unix_s = self.window_start_unix_s.min(other.window_start_unix_s);
        self.window_end_unix_s = self.window_end_unix_s.max(other.window_end_unix_s);
        self.generator_limited |= other.generator_limited;
        self.interrupted |= other.interrupted;
        self.start_lateness_ms = match (self.start_lateness_ms, other.start_lateness_ms) {
            (Some(a), Some(b)) if b.abs() > a.abs() => Some(b),
            (None, b) => b,
            (a, _) => a,
        };
        Ok(())
    }

    /// The sum of `parts` ([`ShardPart::add`]); an error when there are none.
    pub fn sum<'a>(parts: impl IntoIterator<Item = &'a ShardPart>) -> Result<ShardPart, String> {
        let mut parts = parts.into_iter();
        let mut out = parts.next().ok_or("no shard parts to combine")?.clone();
        for p in parts {
            out.add(p)?;
        }
        Ok(out)
    }
}

/// A shard's run: who it is and what it measured (`"kneecap"."shard"`:
/// the identity's keys, then the part's).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShardRun {
    #[serde(flatten)]
    pub id: ShardIdentity,
    #[serde(flatten)]
    pub part: ShardPart,
}

/// `kneecap.merged`: which shards a `kneecap merge` result came from, over
/// which window, and how well they started together.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct MergedBlock {
    pub shards: usize,
    pub fingerprint: String,
    pub seed: u64,
    /// The shard files, as given, in shard order.
    pub files: Vec<String>,
    /// The common `--start-at` (RFC 3339), if one was given.
    pub start_at: Option<String>,
    /// Each shard's start lateness, ms.
    pub start_lateness_ms: Vec<Option<f64>>,
    pub window_start_unix_s: f64,
    pub window_end_unix_s: f64,
    /// Requests the shards were due to send, all together.
    pub planned: u64,
    /// How the merged numbers were computed.
    pub notes: Vec<String>,
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

    fn a_part() -> ShardPart {
        let records = vec![rec(10, true), rec(20, true), rec(5, false)];
        let slo = GoodputSlo {
            ttft_ms: Some(15.0),
            ..Default::default()
        };
        ShardPart {
            start_lateness_ms: Some(1.5),
            window_start_unix_s: 100.0,
            window_end_unix_s: 102.0,
            counters: ShardCounters::from_records(&records, Some(&slo)),
            hists: RunHists::from_records(&records),
            ..Default::default()
        }
    }

    #[test]
    fn a_run_block_round_trips_in_its_key_order_and_counters_add() {
        let part = a_part();
        let id = ShardIdentity {
            shard: Shard { index: 1, count: 3 },
            fingerprint: "00ff".into(),
            seed: 7,
            start_at: Some(StartAt(1_700_000_000_123_456_789)),
        };
        let run = ShardRun {
            id,
            part: part.clone(),
        };
        let text = serde_json::to_string(&run).unwrap();
        let keys: Vec<&str> = text
            .split("\":")
            .filter_map(|k| k.rsplit('"').next())
            .take(14)
            .collect();
        assert_eq!(
            keys,
            [
                "schema",
                "index",
                "count",
                "fingerprint",
                "seed",
                "start_at",
                "start_at_unix_ns",
                "start_lateness_ms",
                "window_start_unix_s",
                "window_end_unix_s",
                "generator_limited",
                "interrupted",
                "counters",
                "planned"
            ]
        );
        assert!(
            text.contains(r#""start_at_unix_ns":"1700000000123456789""#),
            "{text}"
        );
        let back: ShardRun = serde_json::from_str(&text).unwrap();
        assert_eq!(back, run);
        assert_eq!((part.counters.completed, part.counters.failed), (2, 1));
        assert_eq!(part.counters.good, Some(1));
        let mut sum = part.counters.clone();
        sum.add(&part.counters);
        assert_eq!(sum.planned, 6);
        assert_eq!(sum.errors_by_kind.get("timeout"), Some(&2));
    }

    #[test]
    fn another_schema_is_refused_by_name() {
        let text = r#"{"schema":2,"index":0,"count":1,"fingerprint":"f","seed":1}"#;
        let err = serde_json::from_str::<ShardIdentity>(text).unwrap_err();
        assert!(err.to_string().contains("shard schema 2 is not 1"), "{err}");
    }

    #[test]
    fn parts_add_over_the_common_window() {
        let a = ShardPart {
            window_start_unix_s: 10.0,
            window_end_unix_s: 20.0,
            start_lateness_ms: Some(-3.0),
            ..a_part()
        };
        let b = ShardPart {
            window_start_unix_s: 10.5,
            window_end_unix_s: 21.0,
            start_lateness_ms: Some(2.0),
            generator_limited: true,
            ..a_part()
        };
        let c = ShardPart::sum([&a, &b]).unwrap();
        assert_eq!((c.window_start_unix_s, c.window_end_unix_s), (10.0, 21.0));
        assert_eq!(c.start_lateness_ms, Some(-3.0));
        assert!(c.generator_limited);
        assert_eq!((c.counters.planned, c.counters.good), (6, Some(2)));
        assert_eq!(c.hists.ttft.count(), 4);
        assert!(ShardPart::sum([]).is_err());
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
        let text = serde_json::to_string(&a).unwrap();
        let back: ShardCounters = serde_json::from_str(&text).unwrap();
        assert_eq!(back, a);
        let generation = ShardCounters::from_records(&[rec(5, true)], None);
        let text = serde_json::to_string(&generation).unwrap();
        assert!(!text.contains("total_input_sequences"), "{text}");
    }
}

//! What the probes saw, reduced from request records to the quantities the
//! fits need: token arrival times, the decoding batch over a window, the
//! decoders' gaps around an injected prompt, tokens held in flight. Pure:
//! records and gauge samples are passed in, times are offsets from a level's
//! start.

use crate::metrics::stats::{mean, median};
use crate::metrics::{ErrorKind, RequestRecord};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// One reading of the server's gauges during a level.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct GaugeSample {
    /// Seconds from the level's start.
    pub t_s: f64,
    /// Requests in the running batch.
    pub running: Option<f64>,
    /// KV-cache usage, 0..=1.
    pub kv_usage: Option<f64>,
    /// The preemption counter.
    pub preemptions: Option<f64>,
}

/// When each token of a record arrived (first token, then one per ITL gap).
pub fn token_times(r: &RequestRecord) -> Vec<Duration> {
    let Some(first) = r.first_token else {
        return Vec::new();
    };
    let mut out = Vec::with_capacity(r.itl.len() + 1);
    out.push(first);
    let mut t = first;
    for gap in &r.itl {
        t += *gap;
        out.push(t);
    }
    out
}

/// Whether the record was cut by the level's end (it was still streaming).
fn cut(r: &RequestRecord) -> bool {
    r.error
        .as_ref()
        .is_some_and(|e| e.kind == ErrorKind::Cancelled)
}

/// A closed-loop level of short prompts and long outputs, over its steady
/// window (from when the decoding batch first reached 90% of its peak to
/// the level's end).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DecodeLevel {
    /// Streams offered.
    pub concurrency: usize,
    /// Output tokens each request asked for.
    pub output_tokens: u32,
    /// The window's start (from the level's start) and length, seconds.
    pub start_s: f64,
    pub window_s: f64,
    /// Mean requests receiving tokens over the window (the decoding batch
    /// as the client sees it).
    pub streaming: f64,
    /// Token gaps that fell inside the window, their mean and median, s.
    pub gaps: usize,
    pub mean_gap_s: f64,
    pub median_gap_s: f64,
    /// Prompt tokens whose first token came inside the window, per second:
    /// the prefill work the decode steps shared.
    pub prefill_tokens_per_s: f64,
    /// The mean context of the window's gaps: the tokens the sequence
    /// attended over for the gap's token (its prompt and what came before).
    pub mean_context: f64,
    /// The window's gaps during which no request waited for its first
    /// token, when there were any.
    pub clean: Option<CleanGaps>,
    /// The running gauge's mean and peak over the window, when scraped.
    pub running_mean: Option<f64>,
    pub running_max: Option<f64>,
    /// Preemptions counted during the level, when the server exports them.
    pub preemptions: Option<f64>,
    /// Peak KV usage seen, when reported.
    pub kv_usage_max: Option<f64>,
    /// The window's gaps the host stalled ([`StallGaps`]).
    pub stalls: StallGaps,
    /// Requests that failed (not counting those cut at the end).
    pub failed: usize,
}

/// A level's gaps over [`STALL_OVER`] times its median: steps the host
/// stalled (a decode step's own cost scatters far less), and their summed
/// excess over the median, s.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct StallGaps {
    pub gaps: usize,
    pub excess_s: f64,
}

/// A gap this many times its level's median is a stalled step.
pub const STALL_OVER: f64 = 2.0;

impl StallGaps {
    /// The stalled gaps among `sorted` (ascending), against `median`.
    fn of(sorted: &[f64], median: f64) -> Self {
        let over = &sorted[sorted.partition_point(|&g| g <= STALL_OVER * median)..];
        Self {
            gaps: over.len(),
            excess_s: over.iter().map(|g| g - median).sum(),
        }
    }
}

/// The gaps of a level during which no request of the level waited for its
/// first token: plain decode steps, with no prompt computed beside them
/// (whatever the server's way of mixing prefill into its steps).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CleanGaps {
    pub gaps: usize,
    pub median_gap_s: f64,
    /// The mean decoding batch over them (requests streaming), and their
    /// mean context.
    pub batch: f64,
    pub context: f64,
}

/// Each record's streaming interval `[first token, last token]` (to `end`
/// for one cut while streaming).
fn streaming_spans(records: &[RequestRecord], end: Duration) -> Vec<(Duration, Duration)> {
    records
        .iter()
        .filter_map(|r| {
            let first = r.first_token?;
            let last = if cut(r) { end } else { r.last_token? };
            Some((first, last.max(first)))
        })
        .collect()
}

/// Mean number of spans covering `[a, b]`.
fn mean_cover(spans: &[(Duration, Duration)], a: Duration, b: Duration) -> f64 {
    let width = b.saturating_sub(a).as_secs_f64();
    if width <= 0.0 {
        return 0.0;
    }
    let covered: f64 = spans
        .iter()
        .map(|&(s, e)| e.min(b).saturating_sub(s.max(a)).as_secs_f64())
        .sum();
    covered / width
}

/// The window's start: the first time the decoding batch reached 90% of its
/// peak (sampled at every first token).
fn steady_start(spans: &[(Duration, Duration)]) -> Option<Duration> {
    let mut starts: Vec<Duration> = spans.iter().map(|s| s.0).collect();
    starts.sort();
    let count = |t: Duration| spans.iter().filter(|s| s.0 <= t && t < s.1).count();
    let peak = starts.iter().map(|&t| count(t)).max()?;
    starts
        .into_iter()
        .find(|&t| count(t) as f64 >= 0.9 * peak as f64)
}

/// The gaps inside `[a, end]` that overlap no record's wait for its first
/// token (`[sent, first token]`, to `end` when none came).
fn clean_gaps(
    records: &[RequestRecord],
    spans: &[(Duration, Duration)],
    a: Duration,
    end: Duration,
) -> Option<CleanGaps> {
    let mut waits: Vec<(Duration, Duration)> = records
        .iter()
        .map(|r| (r.sent, r.first_token.unwrap_or(end)))
        .collect();
    waits.sort();
    // The latest end among the waits that started up to each one.
    let reach: Vec<Duration> = waits
        .iter()
        .scan(Duration::ZERO, |m, w| {
            *m = (*m).max(w.1);
            Some(*m)
        })
        .collect();
    let waiting = |t0: Duration, t1: Duration| {
        let n = waits.partition_point(|w| w.0 < t1);
        n > 0 && reach[n - 1] > t0
    };
    let (mut gaps, mut batch, mut context) = (Vec::new(), 0.0, 0.0);
    for r in records {
        for (i, w) in token_times(r).windows(2).enumerate() {
            if w[0] >= a && w[1] <= end && !waiting(w[0], w[1]) {
                gaps.push((w[1] - w[0]).as_secs_f64());
                batch += mean_cover(spans, w[0], w[1]);
                context += f64::from(r.prompt_len) + (i + 1) as f64;
            }
        }
    }
    let n = gaps.len() as f64;
    gaps.sort_by(f64::total_cmp);
    (!gaps.is_empty()).then(|| CleanGaps {
        gaps: gaps.len(),
        median_gap_s: median(&gaps),
        batch: batch / n,
        context: context / n,
    })
}

/// Summarizes one decode level that ran from 0 to `end`; `None` when no
/// gap fell in its window.
pub fn decode_level(
    concurrency: usize,
    output_tokens: u32,
    records: &[RequestRecord],
    gauges: &[GaugeSample],
    end: Duration,
) -> Option<DecodeLevel> {
    let spans = streaming_spans(records, end);
    let a = steady_start(&spans)?;
    level_from(concurrency, output_tokens, records, gauges, (a, end))
}

/// [`decode_level`] over the window `[a, end]` given.
pub fn level_from(
    concurrency: usize,
    output_tokens: u32,
    records: &[RequestRecord],
    gauges: &[GaugeSample],
    (a, end): (Duration, Duration),
) -> Option<DecodeLevel> {
    let spans = streaming_spans(records, end);
    let window = end.saturating_sub(a);
    let mut gaps: Vec<f64> = Vec::new();
    let mut context = 0.0;
    for r in records {
        for (i, w) in token_times(r).windows(2).enumerate() {
            if w[0] >= a && w[1] <= end {
                gaps.push((w[1] - w[0]).as_secs_f64());
                context += f64::from(r.prompt_len) + (i + 1) as f64;
            }
        }
    }
    if gaps.is_empty() || window.is_zero() {
        return None;
    }
    let prompt_tokens: f64 = records
        .iter()
        .filter(|r| r.first_token.is_some_and(|f| f > a && f <= end))
        .map(|r| f64::from(r.prompt_len))
        .sum();
    let mean_context = context / gaps.len() as f64;
    let in_window: Vec<&GaugeSample> = gauges
        .iter()
        .filter(|g| g.t_s >= a.as_secs_f64() && g.t_s <= end.as_secs_f64())
        .collect();
    let running: Vec<f64> = in_window.iter().filter_map(|g| g.running).collect();
    let preempt: Vec<f64> = gauges.iter().filter_map(|g| g.preemptions).collect();
    let mean_gap_s = mean(&gaps);
    gaps.sort_by(f64::total_cmp);
    let median_gap_s = median(&gaps);
    Some(DecodeLevel {
        concurrency,
        output_tokens,
        start_s: a.as_secs_f64(),
        window_s: window.as_secs_f64(),
        streaming: mean_cover(&spans, a, end),
        gaps: gaps.len(),
        mean_gap_s,
        median_gap_s,
        prefill_tokens_per_s: prompt_tokens / window.as_secs_f64(),
        mean_context,
        clean: clean_gaps(records, &spans, a, end),
        running_mean: (!running.is_empty()).then(|| mean(&running)),
        running_max: running.iter().copied().reduce(f64::max),
        preemptions: match (preempt.first(), preempt.last()) {
            (Some(a), Some(b)) => Some(b - a),
            _ => None,
        },
        kv_usage_max: gauges.iter().filter_map(|g| g.kv_usage).reduce(f64::max),
        stalls: StallGaps::of(&gaps, median_gap_s),
        failed: records
            .iter()
            .filter(|r| r.error.is_some() && !cut(r))
            .count(),
    })
}

/// Tokens in flight at `t` as the client sees them: every streaming
/// request's prompt plus the tokens it has received; and how many requests
/// that is.
pub fn tokens_in_flight(records: &[RequestRecord], t: Duration) -> (f64, usize) {
    let mut tokens = 0.0;
    let mut streams = 0;
    for r in records {
        let times = token_times(r);
        let got = times.iter().filter(|&&x| x <= t).count();
        let done = !cut(r) && times.last().is_some_and(|&l| l <= t);
        if got > 0 && !done {
            tokens += f64::from(r.prompt_len) + got as f64;
            streams += 1;
        }
    }
    (tokens, streams)
}

/// One KV reading against the tokens in flight.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct KvPoint {
    /// Tokens whose KV is computed: each streaming request's prompt and
    /// received tokens but the last (a sampled token's KV is computed in the
    /// next step), as a server reads its gauge between steps (vLLM, the
    /// built-in simulator).
    pub tokens: f64,
    /// Tokens the next step will hold (the last received ones too): what a
    /// server that reads its gauge after scheduling would count.
    pub scheduled: f64,
    /// KV usage, 0..=1.
    pub usage: f64,
}

/// A [`KvPoint`] at every gauge sample that reported usage inside
/// `[from, end]`.
pub fn kv_points(
    records: &[RequestRecord],
    gauges: &[GaugeSample],
    from: Duration,
    end: Duration,
) -> Vec<KvPoint> {
    gauges
        .iter()
        .filter(|g| g.t_s >= from.as_secs_f64() && g.t_s <= end.as_secs_f64())
        .filter_map(|g| {
            let (held, streams) = tokens_in_flight(records, Duration::from_secs_f64(g.t_s));
            Some(KvPoint {
                usage: g.kv_usage?,
                tokens: held - streams as f64,
                scheduled: held,
            })
        })
        .collect()
}

/// The mean [`KvPoint`] over a level's scrapes: one point per level.
/// Averaging first keeps the scrapes' timing error (a scrape is stamped when
/// it returns, after the server read its gauge) out of the fit's x, where
/// it would flatten the slope and inflate the capacity.
pub fn kv_level_point(
    records: &[RequestRecord],
    gauges: &[GaugeSample],
    from: Duration,
    end: Duration,
) -> Option<KvPoint> {
    let points = kv_points(records, gauges, from, end);
    let n = points.len() as f64;
    let avg = |f: fn(&KvPoint) -> f64| points.iter().map(f).sum::<f64>() / n;
    (!points.is_empty()).then(|| KvPoint {
        tokens: avg(|p| p.tokens),
        scheduled: avg(|p| p.scheduled),
        usage: avg(|p| p.usage),
    })
}

#[cfg(test)]
#[path = "observe_tests.rs"]
mod tests;

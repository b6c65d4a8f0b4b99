//! The live state model: what the engine's observer reported (totals since
//! the start, a rolling window of the current step, the server's recent
//! gauges) and the [`View`] a dashboard frame or a scrape is drawn from.
//! Pure: every time is passed in, as an offset from the live origin.

use super::buckets::{Buckets, LATENESS_BOUNDS, REQUEST_BOUNDS, TOKEN_BOUNDS};
use crate::client::scrape::QueueSample;
use crate::metrics::stats::percentile;
use crate::metrics::RequestRecord;
use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

/// How many of the command's own lines the dashboard shows.
pub const NOTES_SHOWN: usize = 3;

/// The rolling window the dashboard's rates and percentiles cover.
pub const WINDOW: Duration = Duration::from_secs(10);
/// At most this many samples per metric in the window (memory bound).
const MAX_SAMPLES: usize = 20_000;
/// Server gauge readings kept for the sparklines.
pub const GAUGE_POINTS: usize = 120;

/// A latency the dashboard shows a row for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Latency {
    Ttft,
    Tpot,
    Itl,
    E2el,
}

impl Latency {
    pub const ALL: [Latency; 4] = [Latency::Ttft, Latency::Tpot, Latency::Itl, Latency::E2el];

    pub fn label(self) -> &'static str {
        match self {
            Latency::Ttft => "TTFT",
            Latency::Tpot => "TPOT",
            Latency::Itl => "ITL",
            Latency::E2el => "E2EL",
        }
    }
}

/// One SLO line drawn against a latency row.
#[derive(Debug, Clone, PartialEq)]
pub struct SloLine {
    pub metric: Latency,
    /// The percentile compared (`None`: the mean).
    pub percentile: Option<f64>,
    pub threshold_ms: f64,
    /// How the user wrote it, e.g. `p99_ttft_ms<=500`.
    pub text: String,
}

/// What is running: a run, or one sweep step.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Phase {
    /// The sweep step's index (`None` for `kneecap run`).
    pub step: Option<usize>,
    /// The offered load, in `unit`.
    pub load: Option<f64>,
    pub unit: String,
    /// When it began, from the live origin.
    pub started_at: Duration,
    /// How long it is planned to last (releases), when known.
    pub planned: Option<Duration>,
}

/// Counts since the start (never reset: Prometheus counters).
#[derive(Debug, Clone, PartialEq)]
pub struct Totals {
    pub released: u64,
    pub succeeded: u64,
    /// Failed requests by error class (`ErrorKind::as_str`).
    pub failed: BTreeMap<&'static str, u64>,
    pub output_tokens: u64,
    pub ttft: Buckets,
    pub tpot: Buckets,
    pub itl: Buckets,
    pub e2el: Buckets,
    pub lateness: Buckets,
}

impl Default for Totals {
    fn default() -> Self {
        Totals {
            released: 0,
            succeeded: 0,
            failed: BTreeMap::new(),
            output_tokens: 0,
            ttft: Buckets::new(REQUEST_BOUNDS),
            tpot: Buckets::new(TOKEN_BOUNDS),
            itl: Buckets::new(TOKEN_BOUNDS),
            e2el: Buckets::new(REQUEST_BOUNDS),
            lateness: Buckets::new(LATENESS_BOUNDS),
        }
    }
}

impl Totals {
    pub fn failed_total(&self) -> u64 {
        self.failed.values().sum()
    }
}

/// Timestamped samples (offset in the phase, value in ms), oldest first.
#[derive(Debug, Clone, Default)]
struct Samples(VecDeque<(Duration, f64)>);

impl Samples {
    fn push(&mut self, at: Duration, ms: f64) {
        self.0.push_back((at, ms));
        if self.0.len() > MAX_SAMPLES {
            self.0.pop_front();
        }
    }

    /// The values at or after `from`, sorted.
    fn sorted_since(&self, from: Duration) -> Vec<f64> {
        let mut v: Vec<f64> = self
            .0
            .iter()
            .filter(|(t, _)| *t >= from)
            .map(|(_, ms)| *ms)
            .collect();
        v.sort_by(f64::total_cmp);
        v
    }

    fn count_since(&self, from: Duration) -> usize {
        self.0.iter().filter(|(t, _)| *t >= from).count()
    }

    fn prune_before(&mut self, from: Duration) {
        while self.0.front().is_some_and(|(t, _)| *t < from) {
            self.0.pop_front();
        }
    }
}

/// The current phase's rolling window (reset when a step begins).
#[derive(Debug, Clone, Default)]
struct Recent {
    releases: Samples,
    successes: Samples,
    latency: BTreeMap<Latency, Samples>,
    lateness: Samples,
    released: u64,
    finished: u64,
}

/// Everything the live views are drawn from.
#[derive(Debug, Clone, Default)]
pub struct LiveState {
    /// `kneecap run` or `kneecap sweep`.
    pub command: String,
    pub slos: Vec<SloLine>,
    pub phase: Phase,
    pub totals: Totals,
    recent: Recent,
    gauges: VecDeque<QueueSample>,
    /// kneecap's own CPU use over the last tick, as a share of all cores.
    pub cpu_busy: Option<f64>,
    /// kneecap's CPU seconds since it started.
    pub cpu_seconds: Option<f64>,
    /// The newest lines the command printed while the dashboard held the
    /// terminal (a sweep's step verdicts), newest last.
    notes: VecDeque<String>,
}

impl LiveState {
    pub fn new(command: &str, slos: Vec<SloLine>) -> Self {
        LiveState {
            command: command.into(),
            slos,
            ..LiveState::default()
        }
    }

    /// A line the command would have printed; the view keeps the newest
    /// [`NOTES_SHOWN`].
    pub fn note(&mut self, line: String) {
        if self.notes.len() == NOTES_SHOWN {
            self.notes.pop_front();
        }
        self.notes.push_back(line);
    }

    /// A new phase (the run, or the next sweep step) begins.
    pub fn begin(&mut self, phase: Phase) {
        self.phase = phase;
        self.recent = Recent::default();
    }

    /// A request due at `due` (offset in the phase) was released.
    pub fn released(&mut self, due: Duration) {
        self.totals.released += 1;
        self.recent.released += 1;
        self.recent.releases.push(due, 0.0);
    }

    /// A request finished or failed; its record is final.
    pub fn finished(&mut self, r: &RequestRecord) {
        self.recent.finished += 1;
        let end = [r.first_token, r.last_token]
            .into_iter()
            .flatten()
            .fold(r.sent, Duration::max);
        let lateness = r.lateness();
        self.totals.lateness.observe(lateness.as_secs_f64());
        self.recent.lateness.push(end, ms(lateness));
        if let Some(e) = &r.error {
            *self.totals.failed.entry(e.kind.as_str()).or_default() += 1;
            return;
        }
        self.totals.succeeded += 1;
        self.totals.output_tokens += u64::from(r.output_tokens);
        self.recent.successes.push(end, 0.0);
        for (metric, values) in latencies(r) {
            let hist = match metric {
                Latency::Ttft => &mut self.totals.ttft,
                Latency::Tpot => &mut self.totals.tpot,
                Latency::Itl => &mut self.totals.itl,
                Latency::E2el => &mut self.totals.e2el,
            };
            let window = self.recent.latency.entry(metric).or_default();
            for v in values {
                hist.observe(v.as_secs_f64());
                window.push(end, ms(v));
            }
        }
    }

    /// One reading of the server's gauges.
    pub fn gauge(&mut self, sample: QueueSample) {
        self.gauges.push_back(sample);
        if self.gauges.len() > GAUGE_POINTS {
            self.gauges.pop_front();
        }
    }

    /// Drop window samples older than [`WINDOW`] before `now` (from the live
    /// origin), so a long step holds one window, not its whole history.
    pub fn prune(&mut self, now: Duration) {
        let from = self.window_start(now);
        let r = &mut self.recent;
        for s in [&mut r.releases, &mut r.successes, &mut r.lateness] {
            s.prune_before(from);
        }
        for s in r.latency.values_mut() {
            s.prune_before(from);
        }
    }

    /// Requests released and not yet finished in this phase.
    pub fn in_flight(&self) -> u64 {
        self.recent.released.saturating_sub(self.recent.finished)
    }

    fn window_start(&self, now: Duration) -> Duration {
        self.elapsed(now).saturating_sub(WINDOW)
    }

    fn elapsed(&self, now: Duration) -> Duration {
        now.saturating_sub(self.phase.started_at)
    }

    /// What a frame shows at `now` (from the live origin).
    pub fn view(&self, now: Duration) -> View {
        let elapsed = self.elapsed(now);
        let from = self.window_start(now);
        let span = elapsed.min(WINDOW).as_secs_f64();
        let rate = |s: &Samples| {
            if span > 0.0 {
                s.count_since(from) as f64 / span
            } else {
                0.0
            }
        };
        let rows = Latency::ALL
            .iter()
            .map(|&m| self.latency_row(m, from))
            .collect();
        let lateness = self.recent.lateness.sorted_since(from);
        let series = |f: fn(&QueueSample) -> Option<f64>| -> Vec<Option<f64>> {
            self.gauges.iter().map(f).collect()
        };
        View {
            command: self.command.clone(),
            phase: self.phase.clone(),
            elapsed,
            left: self.phase.planned.map(|p| p.saturating_sub(elapsed)),
            offered_rate: rate(&self.recent.releases),
            achieved_rate: rate(&self.recent.successes),
            in_flight: self.in_flight(),
            released: self.totals.released,
            succeeded: self.totals.succeeded,
            failed: self.totals.failed_total(),
            latency: rows,
            waiting: series(|s| s.waiting),
            running: series(|s| s.running),
            kv_usage: series(|s| s.kv_cache_usage),
            errors: self
                .totals
                .failed
                .iter()
                .map(|(k, v)| (k.to_string(), *v))
                .collect(),
            lateness_p99_ms: (!lateness.is_empty()).then(|| percentile(&lateness, 99.0)),
            cpu_busy: self.cpu_busy,
            notes: self.notes.iter().cloned().collect(),
        }
    }

    fn latency_row(&self, metric: Latency, from: Duration) -> LatencyRow {
        let sorted = self
            .recent
            .latency
            .get(&metric)
            .map(|s| s.sorted_since(from))
            .unwrap_or_default();
        let at = |p: f64| (!sorted.is_empty()).then(|| percentile(&sorted, p));
        let mean = (!sorted.is_empty()).then(|| sorted.iter().sum::<f64>() / sorted.len() as f64);
        let slos = self
            .slos
            .iter()
            .filter(|s| s.metric == metric)
            .map(|s| {
                let observed = match s.percentile {
                    Some(p) => at(p),
                    None => mean,
                };
                SloCheck {
                    text: s.text.clone(),
                    threshold_ms: s.threshold_ms,
                    observed_ms: observed,
                    over: observed.is_some_and(|o| o > s.threshold_ms),
                }
            })
            .collect();
        LatencyRow {
            metric,
            samples: sorted.len(),
            p50_ms: at(50.0),
            p99_ms: at(99.0),
            slos,
        }
    }
}

/// The request's latencies, vLLM's definitions: TTFT and E2EL from `sent`,
/// TPOT over the tokens after the first, every ITL gap.
fn latencies(r: &RequestRecord) -> Vec<(Latency, Vec<Duration>)> {
    let mut out = Vec::with_capacity(4);
    if let Some(t) = r.ttft() {
        out.push((Latency::Ttft, vec![t]));
    }
    if let Some(e) = r.latency() {
        out.push((Latency::E2el, vec![e]));
        // Usage may be resolved only after the run: count the chunks then.
        let tokens = if r.output_tokens > 0 {
            r.output_tokens as usize
        } else {
            r.itl.len() + 1
        };
        if let (Some(t), true) = (r.ttft(), tokens > 1) {
            out.push((
                Latency::Tpot,
                vec![e.saturating_sub(t) / (tokens as u32 - 1)],
            ));
        }
    }
    if !r.itl.is_empty() {
        out.push((Latency::Itl, r.itl.clone()));
    }
    out
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// One frame's worth of numbers.
#[derive(Debug, Clone, PartialEq)]
pub struct View {
    pub command: String,
    pub phase: Phase,
    pub elapsed: Duration,
    /// Planned time left in this phase.
    pub left: Option<Duration>,
    /// Releases per second over the window.
    pub offered_rate: f64,
    /// Successful completions per second over the window.
    pub achieved_rate: f64,
    pub in_flight: u64,
    pub released: u64,
    pub succeeded: u64,
    pub failed: u64,
    pub latency: Vec<LatencyRow>,
    pub waiting: Vec<Option<f64>>,
    pub running: Vec<Option<f64>>,
    /// KV-cache usage, 0..1.
    pub kv_usage: Vec<Option<f64>>,
    pub errors: Vec<(String, u64)>,
    pub lateness_p99_ms: Option<f64>,
    pub cpu_busy: Option<f64>,
    /// The command's newest lines (oldest first).
    pub notes: Vec<String>,
}

/// A latency's rolling percentiles and its SLO lines.
#[derive(Debug, Clone, PartialEq)]
pub struct LatencyRow {
    pub metric: Latency,
    pub samples: usize,
    pub p50_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    pub slos: Vec<SloCheck>,
}

/// An SLO line against the window's value.
#[derive(Debug, Clone, PartialEq)]
pub struct SloCheck {
    pub text: String,
    pub threshold_ms: f64,
    pub observed_ms: Option<f64>,
    pub over: bool,
}

#[cfg(test)]
#[path = "state_tests.rs"]
pub(crate) mod tests;

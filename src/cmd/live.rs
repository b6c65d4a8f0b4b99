//! The live view's I/O: pick the UI (`--ui`, or whether stdout is a
//! terminal), observe each level through a [`crate::live::Aggregator`], tick
//! the server's gauges and kneecap's CPU into it, draw the dashboard on its
//! own thread, and serve `--metrics-listen`. Nothing here runs on a
//! request's timing path: the engine only calls the aggregator from its
//! collecting task.

use crate::config::{LiveConfig, UiMode};
use crate::engine::{self, probe};
use crate::live::state::{Latency, LiveState, Phase, SloLine};
use crate::live::{Aggregator, Tee};
use crate::sweep::slo::{Slo, SloMetric, SloStat};
use anyhow::{Context, Result};
use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// How often the server's gauges and kneecap's CPU are read.
const TICK_EVERY: Duration = Duration::from_secs(1);

/// The UI a run gets: `--ui`, else the dashboard when stdout is a terminal.
pub fn resolve_ui(cfg: &LiveConfig) -> UiMode {
    match cfg.ui {
        Some(UiMode::Dashboard) if !std::io::stdout().is_terminal() => UiMode::Plain,
        Some(ui) => ui,
        None if std::io::stdout().is_terminal() => UiMode::Dashboard,
        None => UiMode::Plain,
    }
}

/// The sweep's SLOs as lines on the dashboard's latency rows (TTFO and
/// any other metric without a row are left out).
pub fn slo_lines(slos: &[Slo]) -> Vec<SloLine> {
    slos.iter()
        .filter_map(|s| {
            let metric = match s.metric {
                SloMetric::Ttft => Latency::Ttft,
                SloMetric::Tpot => Latency::Tpot,
                SloMetric::Itl => Latency::Itl,
                SloMetric::E2el => Latency::E2el,
                SloMetric::Ttfo => return None,
            };
            let percentile = match s.stat {
                SloStat::Mean => None,
                SloStat::Median => Some(50.0),
                SloStat::Percentile(p) => Some(p),
                SloStat::Attainment(share) => Some(share * 100.0),
            };
            Some(SloLine {
                metric,
                percentile,
                threshold_ms: s.threshold_ms,
                text: s.to_string(),
            })
        })
        .collect()
}

/// What the live view needs to start.
pub struct LiveStart<'a> {
    pub cfg: &'a LiveConfig,
    pub ui: UiMode,
    /// `kneecap run` or `kneecap sweep`.
    pub command: &'a str,
    pub slos: Vec<SloLine>,
    /// The server's Prometheus endpoint, for its queue gauges.
    pub server_metrics: Option<String>,
}

/// A running live view (dashboard and/or exporter). Dropping it stops the
/// dashboard and gives the terminal back.
pub struct Live {
    agg: Arc<Aggregator>,
    origin: Instant,
    stop: watch::Sender<bool>,
    stop_frames: Arc<AtomicBool>,
    frames: Option<std::thread::JoinHandle<()>>,
    linger: Duration,
    exporting: bool,
    dashboard: bool,
    /// Lines said while the dashboard held the terminal, printed when it
    /// gives the terminal back.
    held: std::sync::Mutex<Vec<String>>,
}

impl Live {
    /// Start what `--ui` and `--metrics-listen` ask for; `None` when neither
    /// the dashboard nor the exporter is wanted.
    pub async fn start(s: LiveStart<'_>) -> Result<Option<Live>> {
        let dashboard = s.ui == UiMode::Dashboard;
        if !dashboard && s.cfg.metrics_listen.is_none() {
            return Ok(None);
        }
        let agg = Arc::new(Aggregator::new(LiveState::new(s.command, s.slos)));
        let origin = Instant::now();
        let (stop, stop_rx) = watch::channel(false);
        if let Some(addr) = s.cfg.metrics_listen {
            let bound = super::live_serve::serve(addr, agg.clone(), origin, stop_rx.clone())
                .await
                .with_context(|| {
                    format!("--metrics-listen {addr}: cannot listen there (pick a free port, or 0 for any)")
                })?;
            eprintln!("kneecap: serving kneecap's own metrics at http://{bound}/metrics");
        }
        tokio::spawn(tick(agg.clone(), s.server_metrics, stop_rx));
        Ok(Some(Live {
            agg,
            origin,
            stop,
            stop_frames: Arc::new(AtomicBool::new(false)),
            frames: None,
            linger: s.cfg.metrics_linger,
            exporting: s.cfg.metrics_listen.is_some(),
            dashboard,
            held: Default::default(),
        }))
    }

    /// Take over the terminal with the dashboard (when `--ui` asked for it);
    /// call once the start-up lines are printed.
    pub fn show_dashboard(&mut self) -> Result<()> {
        if self.dashboard && self.frames.is_none() {
            let stop = self.stop_frames.clone();
            self.frames = Some(super::live_serve::frames(
                self.agg.clone(),
                self.origin,
                stop,
            )?);
        }
        Ok(())
    }

    /// A new phase begins now: the run, or sweep step `step` at `load`.
    pub fn begin(
        &self,
        step: Option<usize>,
        load: Option<f64>,
        unit: &str,
        planned: Option<Duration>,
    ) {
        let phase = Phase {
            step,
            load,
            unit: unit.into(),
            started_at: self.origin.elapsed(),
            planned,
        };
        self.agg.post(move |s| s.begin(phase));
    }

    /// The watch a level runs with: the aggregator, beside any observer it had.
    pub fn observe(&self, watch: Option<engine::Watch>) -> Option<engine::Watch> {
        let mine: Arc<dyn engine::Observer> = self.agg.clone();
        Some(match watch {
            Some(w) => engine::Watch {
                observer: Arc::new(Tee(w.observer.clone(), mine)),
                ..w
            },
            None => engine::Watch {
                observer: mine,
                // Never signalled: a plain level ends its releases on its own.
                end_releases: watch::channel(false).1,
                drain: Duration::ZERO,
            },
        })
    }

    /// Print a line on stderr, or, while the dashboard holds the terminal,
    /// show it in the dashboard and print it once the terminal is given back
    /// (a line printed over the frame would be drawn over).
    pub fn say(&self, line: String) {
        if self.frames.is_none() {
            eprintln!("{line}");
            return;
        }
        let shown = line.clone();
        self.agg.post(move |s| s.note(shown));
        if let Ok(mut held) = self.held.lock() {
            held.push(line);
        }
    }

    /// Give the terminal back (call before printing the summary), then print
    /// the lines said meanwhile.
    pub fn close_dashboard(&mut self) {
        self.stop_frames.store(true, Ordering::Relaxed);
        if let Some(t) = self.frames.take() {
            t.thread().unpark();
            let _ = t.join();
        }
        if let Ok(mut held) = self.held.lock() {
            for line in held.drain(..) {
                eprintln!("{line}");
            }
        }
    }

    /// Stop: the dashboard at once, the exporter after `--metrics-linger`.
    pub async fn finish(mut self) {
        self.close_dashboard();
        if self.exporting && !self.linger.is_zero() {
            eprintln!(
                "kneecap: metrics stay up for {:?} (--metrics-linger)",
                self.linger
            );
            tokio::time::sleep(self.linger).await;
        }
        let _ = self.stop.send(true);
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        self.close_dashboard();
        let _ = self.stop.send(true);
    }
}

/// Read the server's gauges and kneecap's CPU into the state every tick.
async fn tick(agg: Arc<Aggregator>, metrics: Option<String>, mut stop: watch::Receiver<bool>) {
    let scraper = metrics.and_then(|url| crate::client::scrape::Scraper::new(&url).ok());
    let mut every = tokio::time::interval(TICK_EVERY);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let (mut cpu0, mut t0) = (probe::process_cpu_time(), Instant::now());
    loop {
        tokio::select! {
            _ = every.tick() => {}
            _ = stop.changed() => return,
        }
        let cpu = probe::process_cpu_time();
        let busy = cpu0
            .zip(cpu)
            .and_then(|(a, b)| probe::cpu_busy_fraction(a, b, t0.elapsed()));
        (cpu0, t0) = (cpu, Instant::now());
        agg.post(move |s| {
            s.cpu_busy = busy;
            s.cpu_seconds = cpu.map(|c| c.as_secs_f64());
        });
        if let Some(sample) = match &scraper {
            Some(s) => s.sample().await,
            None => None,
        } {
            agg.post(move |s| s.gauge(sample.1));
        }
    }
}

//! GPU power and energy over a run or a sweep step: the `--gpu-metrics-url`
//! hosts checked once at the start ([`GpuHosts::connect`]: a host that does
//! not answer, or answers without DCGM's names, is refused in one line),
//! then sampled every `--gpu-sample-interval` from the start of a run or
//! step to its end ([`GpuProbe`]); the samples become a
//! [`GpuStats`](crate::result::GpuStats) (`result::gpu`). A scrape failing
//! mid-run leaves its sample out and is counted (`failed_samples`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};

use crate::client::scrape::Scraper;
use crate::client::scrape_gpu::{parse_dcgm, ENERGY, FB_USED, POWER, UTIL};
use crate::config::GpuMetricsConfig;
use crate::result::gpu::{GpuSample, GpuStats};

/// The GPU hosts to sample, each checked to answer with DCGM's names.
#[derive(Clone)]
pub(crate) struct GpuHosts {
    scrapers: Arc<Vec<Scraper>>,
    /// The URLs, in flag order (the stats' `hosts`).
    urls: Arc<Vec<String>>,
    every: Duration,
}

impl GpuHosts {
    /// Scrapes every host once: `None` without `--gpu-metrics-url`; an error
    /// naming the flag and URL when one does not answer or has no DCGM name.
    pub(crate) async fn connect(cfg: Option<&GpuMetricsConfig>) -> Result<Option<Self>> {
        let Some(cfg) = cfg else {
            return Ok(None);
        };
        let mut scrapers = Vec::with_capacity(cfg.urls.len());
        for url in &cfg.urls {
            let s = Scraper::new(url)?;
            let Some(body) = s.body().await else {
                bail!("--gpu-metrics-url {url}: no answer (is the DCGM exporter running there? dcgm-exporter serves http://HOST:9400/metrics)");
            };
            if parse_dcgm(&body).is_none() {
                bail!("--gpu-metrics-url {url}: the answer has none of {POWER}, {UTIL}, {FB_USED}, {ENERGY} (point it at a DCGM exporter's /metrics)");
            }
            scrapers.push(s);
        }
        Ok(Some(Self {
            scrapers: Arc::new(scrapers),
            urls: Arc::new(cfg.urls.clone()),
            every: cfg.every,
        }))
    }

    /// Starts sampling now, until [`GpuProbe::finish`].
    pub(crate) fn start(&self) -> GpuProbe {
        let (stop, rx) = tokio::sync::watch::channel(false);
        let hosts = self.clone();
        let urls = self.urls.to_vec();
        let task = tokio::spawn(async move { hosts.sample_until(rx).await });
        GpuProbe { stop, task, urls }
    }

    /// One sample of every host, `t_s` after `t0`.
    async fn sample(&self, t0: Instant) -> GpuSample {
        let mut readings = Vec::with_capacity(self.scrapers.len());
        for s in self.scrapers.iter() {
            readings.push(s.gpu().await);
        }
        GpuSample {
            t_s: t0.elapsed().as_secs_f64(),
            hosts: readings,
        }
    }

    /// Samples now, every `every`, and once more when `stop` turns true.
    async fn sample_until(self, mut stop: tokio::sync::watch::Receiver<bool>) -> Vec<GpuSample> {
        let t0 = Instant::now();
        let mut out = vec![self.sample(t0).await];
        let mut tick =
            tokio::time::interval_at(tokio::time::Instant::now() + self.every, self.every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => out.push(self.sample(t0).await),
                _ = stop.changed() => break,
            }
        }
        out.push(self.sample(t0).await);
        out
    }
}

/// Sampling in progress over a run or a step.
pub(crate) struct GpuProbe {
    stop: tokio::sync::watch::Sender<bool>,
    task: tokio::task::JoinHandle<Vec<GpuSample>>,
    urls: Vec<String>,
}

impl GpuProbe {
    /// Stops sampling (one last sample now) and sums up (`None`: fewer than
    /// two samples in which every host answered), naming the hosts.
    pub(crate) async fn finish(self) -> Option<GpuStats> {
        let _ = self.stop.send(true);
        let samples = self.task.await.ok()?;
        let stats = GpuStats::from_samples(&samples)?;
        Some(GpuStats {
            hosts: self.urls,
            ..stats
        })
    }
}

/// Starts a probe when there are hosts to sample.
pub(crate) fn start(hosts: Option<&GpuHosts>) -> Option<GpuProbe> {
    hosts.map(GpuHosts::start)
}

/// Finishes a probe started by [`start`].
pub(crate) async fn finish(probe: Option<GpuProbe>) -> Option<GpuStats> {
    probe?.finish().await
}

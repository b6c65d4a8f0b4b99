//! The GPUs' power and energy over a run or a sweep step (`kneecap.gpu` in
//! a run's JSON, `steps[].gpu` in a sweep's): mean and peak power summed
//! over every GPU of every `--gpu-metrics-url` host, mean utilisation, peak
//! memory, the energy spent and joules per output token and per request.
//! Built from DCGM samples taken through the run ([`GpuStats::from_samples`]).

use serde::{Deserialize, Serialize};

use crate::client::scrape_gpu::HostGpus;

/// How [`GpuStats::energy_j`] was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EnergySource {
    /// The delta of `DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION` between the first
    /// and the last sample, every GPU exporting it (exact).
    Counter,
    /// The summed power samples integrated over time (trapezoid rule).
    PowerSamples,
}

/// One moment's telemetry: every host's GPUs (`None`: that host's scrape
/// failed), `t_s` seconds after the first.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuSample {
    /// Seconds since the run's (or step's) first sample.
    pub t_s: f64,
    /// One entry per `--gpu-metrics-url`, in flag order.
    pub hosts: Vec<Option<HostGpus>>,
}

/// The GPUs over a run or a step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuStats {
    /// `counter` (the energy counter's delta, exact) or `power_samples`
    /// (power integrated by the trapezoid rule).
    pub source: EnergySource,
    /// GPUs seen, over every host.
    pub gpus: u32,
    /// The `--gpu-metrics-url` hosts scraped, in flag order: which GPUs
    /// these are (`kneecap merge` adds blocks of distinct hosts and keeps
    /// one reading of the same hosts). Empty in files from older versions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<String>,
    /// Samples in which every host answered.
    pub samples: u32,
    /// Samples in which some host did not answer (left out).
    #[serde(default)]
    pub failed_samples: u32,
    /// From the first sample to the last, seconds.
    pub duration_s: f64,
    /// Energy over `duration_s` divided by it, W (summed over GPUs).
    pub mean_power_w: f64,
    /// The highest summed power sample, W.
    pub peak_power_w: f64,
    /// Mean over samples and GPUs of `DCGM_FI_DEV_GPU_UTIL`, %.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean_util_pct: Option<f64>,
    /// The highest summed `DCGM_FI_DEV_FB_USED`, MiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_memory_mib: Option<f64>,
    /// Energy spent over `duration_s`, J.
    pub energy_j: f64,
    /// `energy_j` over the output tokens of the run or step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub joules_per_output_token: Option<f64>,
    /// `energy_j` over its completed requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub joules_per_request: Option<f64>,
    /// The output tokens `joules_per_output_token` divides by.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<u64>,
    /// The completed requests `joules_per_request` divides by.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_requests: Option<u64>,
}

/// The complete samples: time and every GPU's gauges, hosts flattened.
type Complete = Vec<(f64, Vec<crate::client::scrape_gpu::GpuGauges>)>;

impl GpuStats {
    /// The stats of `samples` (in time order): `None` without two complete
    /// samples carrying power (a single moment has no energy).
    pub fn from_samples(samples: &[GpuSample]) -> Option<Self> {
        let complete: Complete = samples
            .iter()
            .filter_map(|s| {
                let gpus = s.hosts.iter().try_fold(Vec::new(), |mut all, h| {
                    all.extend(h.as_ref()?.values().copied());
                    Some(all)
                })?;
                Some((s.t_s, gpus))
            })
            .filter(|(_, g)| !g.is_empty() && g.iter().all(|g| g.power_w.is_some()))
            .collect();
        let (first, last) = (complete.first()?, complete.last()?);
        let duration_s = last.0 - first.0;
        if complete.len() < 2 || duration_s <= 0.0 {
            return None;
        }
        let power: Vec<(f64, f64)> = complete
            .iter()
            .map(|(t, g)| (*t, g.iter().filter_map(|g| g.power_w).sum()))
            .collect();
        let (source, energy_j) = match counter_delta_j(&first.1, &last.1) {
            Some(j) => (EnergySource::Counter, j),
            None => (EnergySource::PowerSamples, trapezoid(&power)),
        };
        Some(Self {
            source,
            gpus: first.1.len() as u32,
            hosts: Vec::new(),
            samples: complete.len() as u32,
            failed_samples: (samples.len() - complete.len()) as u32,
            duration_s,
            mean_power_w: energy_j / duration_s,
            peak_power_w: power.iter().map(|p| p.1).fold(f64::MIN, f64::max),
            mean_util_pct: mean_util(&complete),
            peak_memory_mib: peak_memory(&complete),
            energy_j,
            joules_per_output_token: None,
            joules_per_request: None,
            output_tokens: None,
            completed_requests: None,
        })
    }

    /// These stats with the work they paid for: joules per output token and
    /// per completed request (left out when there was none), and the counts.
    pub fn with_work(mut self, output_tokens: u64, completed: u64) -> Self {
        let per = |n: u64| (n > 0).then(|| self.energy_j / n as f64);
        self.joules_per_output_token = per(output_tokens);
        self.joules_per_request = per(completed);
        self.output_tokens = Some(output_tokens);
        self.completed_requests = Some(completed);
        self
    }

    /// These stats with no work attached (energy and power only).
    pub fn without_work(self) -> Self {
        Self {
            joules_per_output_token: None,
            joules_per_request: None,
            output_tokens: None,
            completed_requests: None,
            ..self
        }
    }

    /// The output tokens and completed requests recorded by
    /// [`GpuStats::with_work`] (`None`: none recorded).
    pub fn work(&self) -> Option<(u64, u64)> {
        Some((self.output_tokens?, self.completed_requests?))
    }

    /// The stats of two sets of distinct GPUs over the same load (shards
    /// scraping disjoint hosts): energy, mean power (each over its own
    /// window), GPUs, samples and peak memory add; the peak power is the sum
    /// of the peaks — an upper bound, the peaks need not coincide; the
    /// utilisation is the GPU-weighted mean; the duration the longer; the
    /// source `counter` only when both are. Utilisation and memory only
    /// when both have them. No work: the caller divides by the whole's
    /// ([`GpuStats::with_work`]).
    pub fn add(&self, other: &Self) -> Self {
        let both = |a: Option<f64>, b: Option<f64>| Some((a?, b?));
        let (ga, gb) = (f64::from(self.gpus), f64::from(other.gpus));
        Self {
            source: match (self.source, other.source) {
                (EnergySource::Counter, EnergySource::Counter) => EnergySource::Counter,
                _ => EnergySource::PowerSamples,
            },
            gpus: self.gpus + other.gpus,
            hosts: self.hosts.iter().chain(&other.hosts).cloned().collect(),
            samples: self.samples + other.samples,
            failed_samples: self.failed_samples + other.failed_samples,
            duration_s: self.duration_s.max(other.duration_s),
            mean_power_w: self.mean_power_w + other.mean_power_w,
            peak_power_w: self.peak_power_w + other.peak_power_w,
            mean_util_pct: both(self.mean_util_pct, other.mean_util_pct)
                .map(|(a, b)| (a * ga + b * gb) / (ga + gb).max(1.0)),
            peak_memory_mib: both(self.peak_memory_mib, other.peak_memory_mib).map(|(a, b)| a + b),
            energy_j: self.energy_j + other.energy_j,
            ..self.clone().without_work()
        }
    }
}

/// The energy counters' summed delta, J: only when every GPU exports the
/// counter at both ends, the GPUs are the same, and none went backwards.
fn counter_delta_j(
    first: &[crate::client::scrape_gpu::GpuGauges],
    last: &[crate::client::scrape_gpu::GpuGauges],
) -> Option<f64> {
    if first.len() != last.len() {
        return None;
    }
    let mut mj = 0.0;
    for (a, b) in first.iter().zip(last) {
        let d = b.energy_mj? - a.energy_mj?;
        if d < 0.0 {
            return None;
        }
        mj += d;
    }
    Some(mj / 1000.0)
}

/// `∫ p dt` over `(t, p)` points by the trapezoid rule, J.
pub fn trapezoid(points: &[(f64, f64)]) -> f64 {
    points
        .windows(2)
        .map(|w| (w[1].0 - w[0].0) * (w[0].1 + w[1].1) / 2.0)
        .sum()
}

fn mean_util(complete: &Complete) -> Option<f64> {
    let utils: Vec<f64> = complete
        .iter()
        .flat_map(|(_, g)| g.iter().filter_map(|g| g.util_pct))
        .collect();
    (!utils.is_empty()).then(|| utils.iter().sum::<f64>() / utils.len() as f64)
}

fn peak_memory(complete: &Complete) -> Option<f64> {
    complete
        .iter()
        .filter(|(_, g)| g.iter().any(|g| g.fb_used_mib.is_some()))
        .map(|(_, g)| g.iter().filter_map(|g| g.fb_used_mib).sum::<f64>())
        .reduce(f64::max)
}

#[cfg(test)]
#[path = "gpu_tests.rs"]
mod tests;

//! The GPU telemetry flags of `run` (and `bench serve`) and `sweep`:
//! `--gpu-metrics-url` and `--gpu-sample-interval`, and `kneecap sim`'s
//! `--gpu-watts-idle`/`--gpu-watts-busy` (syntax only).

use clap::Args;

use super::duration::parse_duration;

/// The GPU telemetry kneecap scrapes beside a run or each sweep step.
#[derive(Debug, Clone, Args, Default)]
pub struct GpuArgs {
    /// Scrape an NVIDIA DCGM exporter (or any Prometheus text with its
    /// names) through the run and each sweep step, and report mean and peak
    /// power, utilisation, memory, energy, and joules per output token and
    /// per request. Repeat once per GPU host (sums over hosts and GPUs).
    /// Reads DCGM_FI_DEV_POWER_USAGE (W), DCGM_FI_DEV_GPU_UTIL (%),
    /// DCGM_FI_DEV_FB_USED (MiB) and DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION
    /// (mJ): energy is the counter's delta when every GPU exports it, else
    /// the power samples integrated over time. A URL without a path gets
    /// /metrics (dcgm-exporter: http://HOST:9400/metrics).
    #[arg(long, value_name = "URL", help_heading = "GPU")]
    pub gpu_metrics_url: Vec<String>,
    /// How often to sample --gpu-metrics-url.
    #[arg(long, default_value = "1s", value_parser = parse_duration, help_heading = "GPU")]
    pub gpu_sample_interval: std::time::Duration,
}

/// The help heading of the simulator's GPU flags.
const SIM_GPU: &str = "GPU gauges";

/// The simulator's DCGM GPU gauges (`kneecap sim` only).
#[derive(Debug, Clone, Default, Args)]
pub struct SimGpuArgs {
    /// Serve NVIDIA DCGM gauges for one simulated GPU on /metrics
    /// (DCGM_FI_DEV_POWER_USAGE, _GPU_UTIL, _TOTAL_ENERGY_CONSUMPTION): W
    /// drawn with no batch step running. During a batch step the GPU draws
    /// idle + (busy - idle) x occupancy, occupancy = the step's sequences /
    /// --max-num-seqs; the energy counter is that power's exact integral
    /// and utilisation the share of time a batch step runs.
    #[arg(long, value_name = "W", requires = "gpu_watts_busy", help_heading = SIM_GPU)]
    pub gpu_watts_idle: Option<f64>,
    /// W drawn while a full batch (--max-num-seqs sequences) runs.
    #[arg(long, value_name = "W", requires = "gpu_watts_idle", help_heading = SIM_GPU)]
    pub gpu_watts_busy: Option<f64>,
}

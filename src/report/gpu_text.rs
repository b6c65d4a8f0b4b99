//! The GPUs' power and energy in words (`--gpu-metrics-url`): a run's block
//! under vLLM's summary, the sweep table's `W` and `J/tok` columns and
//! caption (only when some step measured them), and the knee's energy line.

use std::fmt::Write as _;

use super::numbers::{load_label, num};
use crate::result::sweep::{StepResult, SweepResult};
use crate::result::{gpu::EnergySource, GpuStats};

/// The run's block: power, utilisation, memory, energy and its source,
/// joules per output token and per request.
pub fn run_block(g: &GpuStats) -> String {
    let mut out = format!("{}\n", super::console::centered("GPU Power", '-', 50));
    let mut line = |label: &str, v: String| {
        let _ = writeln!(out, "{label:<40} {v:<10}");
    };
    line("GPUs:", g.gpus.to_string());
    line("Mean power (W):", format!("{:.2}", g.mean_power_w));
    line("Peak power (W):", format!("{:.2}", g.peak_power_w));
    if let Some(u) = g.mean_util_pct {
        line("Mean GPU utilisation (%):", format!("{u:.2}"));
    }
    if let Some(m) = g.peak_memory_mib {
        line("Peak GPU memory (MiB):", format!("{m:.0}"));
    }
    line(
        &format!("Energy (J, {}):", source(g.source)),
        format!("{:.2}", g.energy_j),
    );
    if let Some(j) = g.joules_per_output_token {
        line("Energy per output token (J):", format!("{j:.4}"));
    }
    if let Some(j) = g.joules_per_request {
        line("Energy per request (J):", format!("{j:.2}"));
    }
    if g.failed_samples > 0 {
        line(
            "GPU samples missed (left out):",
            g.failed_samples.to_string(),
        );
    }
    out
}

/// How the energy was found, in words.
pub fn source(s: EnergySource) -> &'static str {
    match s {
        EnergySource::Counter => "energy counter",
        EnergySource::PowerSamples => "power samples",
    }
}

/// True when some step measured the GPUs.
pub fn has_gpu_columns(r: &SweepResult) -> bool {
    r.steps.iter().any(|s| s.gpu.is_some())
}

/// Adds `W` (mean power) and `J/tok` before the last three columns when
/// some step measured them.
pub fn add_columns(r: &SweepResult, heads: &mut Vec<String>, rows: &mut [Vec<String>]) {
    if !has_gpu_columns(r) {
        return;
    }
    let at = heads.len() - 3;
    heads.splice(at..at, ["W".to_string(), "J/tok".to_string()]);
    for (cells, s) in rows.iter_mut().zip(r.steps_by_load()) {
        let g = s.gpu.as_ref();
        let w = g.map_or("-".into(), |g| num(g.mean_power_w, 0));
        let j = g
            .and_then(|g| g.joules_per_output_token)
            .map_or("-".into(), |j| num(j, 3));
        cells.splice(at..at, [w, j]);
    }
}

/// The caption's words for the two columns (empty without them).
pub fn caption(r: &SweepResult) -> &'static str {
    if has_gpu_columns(r) {
        "; W = mean GPU power (all GPUs); J/tok = GPU energy per output token"
    } else {
        ""
    }
}

/// "energy at the knee: 0.412 J per output token (1234 W) at 12 req/s".
pub fn knee_line(r: &SweepResult) -> Option<String> {
    let j = r.knee.energy_per_token_j?;
    let load = r.knee.last_pass?;
    let w = knee_step(r)?.gpu.as_ref()?.mean_power_w;
    Some(format!(
        "energy at the knee: {} J per output token ({} W) at {} {}",
        num(j, 3),
        num(w, 0),
        load_label(load),
        r.load_unit()
    ))
}

fn knee_step(r: &SweepResult) -> Option<&StepResult> {
    r.steps.iter().find(|s| Some(s.load) == r.knee.last_pass)
}

/// A step line's GPU part: ", 350 W, 0.412 J/tok" (empty without).
pub fn step_part(s: &StepResult) -> String {
    match &s.gpu {
        Some(g) => match g.joules_per_output_token {
            Some(j) => format!(", {} W, {} J/tok", num(g.mean_power_w, 0), num(j, 3)),
            None => format!(", {} W", num(g.mean_power_w, 0)),
        },
        None => String::new(),
    }
}

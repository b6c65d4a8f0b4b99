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
    let mut out = format!("{}\n", super::numbers::centered("GPU Power", '-', 50));
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::result::fixture::sweep_with;
    use crate::result::gpu::{GpuSample, GpuStats};

    /// A step's GPU stats at `watts` constant for 10 s over `tokens`.
    fn gpu(watts: f64, tokens: u64) -> GpuStats {
        let at = |t_s: f64| GpuSample {
            t_s,
            hosts: vec![Some(
                [(
                    "0".to_string(),
                    crate::client::scrape_gpu::GpuGauges {
                        power_w: Some(watts),
                        ..Default::default()
                    },
                )]
                .into(),
            )],
        };
        GpuStats::from_samples(&[at(0.0), at(10.0)])
            .unwrap()
            .with_work(tokens, 10)
    }

    fn measured() -> SweepResult {
        let mut r = sweep_with(&[10.0, 20.0], &[30.0]);
        for (s, (w, tok)) in r
            .steps
            .iter_mut()
            .zip([(150.0, 2000), (250.0, 5000), (400.0, 4000)])
        {
            s.gpu = Some(gpu(w, tok));
        }
        r.knee.energy_per_token_j = Some(0.5);
        r
    }

    #[test]
    fn the_table_has_w_and_j_per_token_only_when_measured() {
        let plain = sweep_with(&[10.0, 20.0], &[30.0]);
        let (heads, _) = super::super::table::columns(&plain);
        assert!(!heads.iter().any(|h| h == "W" || h == "J/tok"));
        assert_eq!(caption(&plain), "");
        assert_eq!(knee_line(&plain), None);
        let r = measured();
        let (heads, rows) = super::super::table::columns(&r);
        let w = heads.iter().position(|h| h == "W").unwrap();
        assert_eq!(heads[w + 1], "J/tok");
        // 2500 J over 5000 tokens at 20 req/s; 4000 J over 4000 past it.
        assert_eq!(
            (rows[1][w].as_str(), rows[1][w + 1].as_str()),
            ("250", "0.500")
        );
        assert_eq!(rows[2][w + 1], "1.000");
        assert!(
            super::super::table::units_caption(&r).contains("J/tok = GPU energy per output token")
        );
        assert_eq!(
            knee_line(&r).unwrap(),
            "energy at the knee: 0.500 J per output token (250 W) at 20.0 req/s"
        );
        assert_eq!(step_part(&r.steps[0]), ", 150 W, 0.750 J/tok");
    }

    #[test]
    fn the_html_draws_power_against_load_only_when_measured() {
        let title = "GPU power (all GPUs) vs offered load";
        assert!(!super::super::html::render(&sweep_with(&[10.0], &[20.0])).contains(title));
        assert!(super::super::html::render(&measured()).contains(title));
    }

    #[test]
    fn the_run_block_names_the_energy_source() {
        let b = run_block(&gpu(200.0, 4000));
        assert!(b.contains("GPU Power"), "{b}");
        assert!(
            b.contains(&format!(
                "{:<40} {:<10}",
                "Energy (J, power samples):", "2000.00"
            )),
            "{b}"
        );
        assert!(
            b.contains(&format!(
                "{:<40} {:<10}",
                "Energy per output token (J):", "0.5000"
            )),
            "{b}"
        );
        assert!(
            b.contains(&format!(
                "{:<40} {:<10}",
                "Energy per request (J):", "200.00"
            )),
            "{b}"
        );
    }
}

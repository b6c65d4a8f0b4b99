//! GPU telemetry in a Prometheus text body, under NVIDIA DCGM exporter's
//! names: `DCGM_FI_DEV_POWER_USAGE` (W), `DCGM_FI_DEV_GPU_UTIL` (%),
//! `DCGM_FI_DEV_FB_USED` (MiB) and `DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION`
//! (mJ since boot, a counter), one series per GPU told apart by its `gpu`
//! label (else `UUID`, else one unlabelled GPU). Pure.

use std::collections::BTreeMap;

use super::prom_text::parse_sample_line;

/// `DCGM_FI_DEV_POWER_USAGE`: the GPU's power draw, watts.
pub const POWER: &str = "DCGM_FI_DEV_POWER_USAGE";
/// `DCGM_FI_DEV_GPU_UTIL`: the GPU's utilisation, percent.
pub const UTIL: &str = "DCGM_FI_DEV_GPU_UTIL";
/// `DCGM_FI_DEV_FB_USED`: framebuffer memory used, MiB.
pub const FB_USED: &str = "DCGM_FI_DEV_FB_USED";
/// `DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION`: energy since boot, millijoules.
pub const ENERGY: &str = "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION";

/// One GPU's telemetry at one moment (each field `None` when not exported).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct GpuGauges {
    /// Power draw, W.
    pub power_w: Option<f64>,
    /// Utilisation, %.
    pub util_pct: Option<f64>,
    /// Framebuffer memory used, MiB.
    pub fb_used_mib: Option<f64>,
    /// Energy counter, mJ.
    pub energy_mj: Option<f64>,
}

/// Every GPU of one host at one moment, by its `gpu` label.
pub type HostGpus = BTreeMap<String, GpuGauges>;

/// The DCGM gauges in `text`, one entry per GPU; `None` when the body has
/// none of the four names (not a DCGM exporter).
pub fn parse_dcgm(text: &str) -> Option<HostGpus> {
    let mut gpus = HostGpus::new();
    for line in text.lines() {
        let Some((name, v)) = parse_sample_line(line) else {
            continue;
        };
        if !v.is_finite() {
            continue;
        }
        if ![POWER, UTIL, FB_USED, ENERGY].contains(&name) {
            continue;
        }
        let g = gpus.entry(gpu_key(line)).or_default();
        *slot(g, name) = Some(v);
    }
    (!gpus.is_empty()).then_some(gpus)
}

/// The field of `g` that metric `name` (one of the four) fills.
fn slot<'a>(g: &'a mut GpuGauges, name: &str) -> &'a mut Option<f64> {
    match name {
        POWER => &mut g.power_w,
        UTIL => &mut g.util_pct,
        FB_USED => &mut g.fb_used_mib,
        _ => &mut g.energy_mj,
    }
}

/// Which GPU a sample line is about: its `gpu` label, else its `UUID`,
/// else the empty string (one GPU).
fn gpu_key(line: &str) -> String {
    label(line, "gpu")
        .or_else(|| label(line, "UUID"))
        .unwrap_or_default()
        .to_string()
}

/// The value of label `key` in a sample line's label block (DCGM's values
/// carry no escaped quotes).
fn label<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let block = &line[line.find('{')?..line.find('}')?];
    let mut at = 0;
    while let Some(i) = block[at..].find(&format!("{key}=\"")) {
        let start = at + i;
        let before = block[..start].chars().last();
        let value_at = start + key.len() + 2;
        if matches!(before, Some('{' | ',' | ' ')) {
            let rest = &block[value_at..];
            return Some(&rest[..rest.find('"')?]);
        }
        at = value_at;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two GPUs as dcgm-exporter writes them (labels and HELP lines).
    const TWO: &str = "# HELP DCGM_FI_DEV_POWER_USAGE Power draw (in W).
# TYPE DCGM_FI_DEV_POWER_USAGE gauge
DCGM_FI_DEV_POWER_USAGE{gpu=\"0\",UUID=\"GPU-a\",device=\"nvidia0\",modelName=\"NVIDIA H100\",Hostname=\"h\"} 312.5
DCGM_FI_DEV_POWER_USAGE{gpu=\"1\",UUID=\"GPU-b\",device=\"nvidia1\",modelName=\"NVIDIA H100\",Hostname=\"h\"} 95.25
# TYPE DCGM_FI_DEV_GPU_UTIL gauge
DCGM_FI_DEV_GPU_UTIL{gpu=\"0\",UUID=\"GPU-a\"} 87
DCGM_FI_DEV_GPU_UTIL{gpu=\"1\",UUID=\"GPU-b\"} 3
DCGM_FI_DEV_FB_USED{gpu=\"0\",UUID=\"GPU-a\"} 70123
DCGM_FI_DEV_FB_USED{gpu=\"1\",UUID=\"GPU-b\"} 512
DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{gpu=\"0\",UUID=\"GPU-a\"} 123456789
DCGM_FI_DEV_SM_CLOCK{gpu=\"0\",UUID=\"GPU-a\"} 1980
";

    #[test]
    fn two_gpus_are_told_apart_by_their_gpu_label() {
        let gpus = parse_dcgm(TWO).unwrap();
        assert_eq!(gpus.len(), 2);
        assert_eq!(
            gpus["0"],
            GpuGauges {
                power_w: Some(312.5),
                util_pct: Some(87.0),
                fb_used_mib: Some(70123.0),
                energy_mj: Some(123_456_789.0),
            }
        );
        assert_eq!(gpus["1"].power_w, Some(95.25));
        assert_eq!(gpus["1"].energy_mj, None, "GPU 1 exports no counter");
    }

    #[test]
    fn uuid_or_no_label_name_the_gpu() {
        let text = "DCGM_FI_DEV_POWER_USAGE{UUID=\"GPU-x\",pci_gpu=\"7\"} 10\nDCGM_FI_DEV_POWER_USAGE{UUID=\"GPU-y\"} 20\n";
        let gpus = parse_dcgm(text).unwrap();
        let keys: Vec<&str> = gpus.keys().map(String::as_str).collect();
        assert_eq!(keys, ["GPU-x", "GPU-y"], "pci_gpu is not the gpu label");
        let one = parse_dcgm("DCGM_FI_DEV_POWER_USAGE 250\n").unwrap();
        assert_eq!(one[""].power_w, Some(250.0));
    }

    #[test]
    fn a_body_without_dcgm_names_gives_nothing() {
        assert_eq!(parse_dcgm("vllm:num_requests_running 1\n"), None);
        assert_eq!(parse_dcgm("# TYPE DCGM_FI_DEV_POWER_USAGE gauge\n"), None);
        assert_eq!(parse_dcgm(""), None);
        assert_eq!(parse_dcgm("DCGM_FI_DEV_POWER_USAGE{gpu=\"0\"} NaN\n"), None);
    }
}

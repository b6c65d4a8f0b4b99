//! The workload fingerprint of a [`RunConfig`]: what shards of one load must
//! agree on before `kneecap merge` adds them up. Pure.

use super::RunConfig;
use crate::shard::fingerprint;
use crate::workload::dataset::DatasetKind;

/// The fingerprint of everything that defines a run's workload: dataset,
/// lengths, seed, arrival, rate, burstiness, concurrency (the total, not the
/// share), endpoint, model, prompt count / duration, goodput SLOs, and
/// `extra` (a sweep adds its SLOs and steps). Never the shard index, the
/// server address or output options.
pub fn run_fingerprint(cfg: &RunConfig, model: &str, extra: &[(&str, String)]) -> String {
    let l = &cfg.load;
    let mut parts: Vec<(&str, String)> = vec![
        ("dataset", dataset_identity(&cfg.dataset.kind)),
        ("num_prompts", cfg.dataset.num_prompts.to_string()),
        ("disable_shuffle", cfg.dataset.disable_shuffle.to_string()),
        ("seed", l.seed.to_string()),
        ("arrival", format!("{:?}", l.arrival)),
        ("request_rate", l.request_rate.to_string()),
        ("burstiness", l.burstiness.to_string()),
        ("max_concurrency", format!("{:?}", l.max_concurrency)),
        ("duration", format!("{:?}", l.duration)),
        ("ramp_up", format!("{:?}", l.ramp_up)),
        ("endpoint", cfg.endpoint.clone()),
        ("model", model.to_string()),
        ("goodput", format!("{:?}", cfg.stats.goodput)),
        ("body", format!("{:?}", cfg.body.sampling)),
    ];
    parts.extend(extra.iter().cloned());
    fingerprint(&parts)
}

/// The dataset's settings with file paths reduced to their file names (shards
/// on different machines may keep the file in different folders).
fn dataset_identity(kind: &DatasetKind) -> String {
    let name = |p: &std::path::Path| {
        p.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    };
    match kind {
        DatasetKind::ShareGpt { path, output_len } => {
            format!("sharegpt {} {output_len:?}", name(path))
        }
        DatasetKind::Custom { path, output_len } => format!("custom {} {output_len}", name(path)),
        other => format!("{other:?}"),
    }
}

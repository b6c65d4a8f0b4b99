//! Applying `--shard` / `--start-at` to a run: which releases and prompts this
//! shard sends, the workload fingerprint of a [`RunConfig`], and waiting for
//! the common start. The selection is the pure logic of [`super`]; the only
//! I/O here is [`wait_until`] (reads the wall clock and sleeps).

use super::{fingerprint, Shard, StartAt};
use crate::config::RunConfig;
use crate::engine::Releases;
use crate::workload::dataset::DatasetKind;
use crate::workload::RequestSpec;
use anyhow::Result;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A shard's releases, and the global request number of each local one.
pub struct ShardLoad {
    pub releases: Releases,
    /// Prompts reordered so that local request k uses global prompt `globals[k]`.
    pub specs: Arc<Vec<RequestSpec>>,
    /// Global request number of local request k (`None`: a closed loop,
    /// where it is [`Shard::closed_loop_index`]).
    pub globals: Option<Vec<usize>>,
}

/// Keep this shard's part of the global `releases` (see the [`super`] docs).
pub fn select(
    shard: Shard,
    seed: u64,
    releases: Releases,
    specs: &Arc<Vec<RequestSpec>>,
) -> ShardLoad {
    match releases {
        Releases::Scheduled(offsets) => {
            let (globals, mine) = shard.select(seed, &offsets);
            ShardLoad {
                releases: Releases::Scheduled(mine),
                specs: Arc::new(super::reorder(specs, &globals)),
                globals: Some(globals),
            }
        }
        Releases::ClosedFor(d) => {
            let globals: Vec<usize> = (0..specs.len().max(1))
                .map(|k| shard.closed_loop_index(k))
                .collect();
            ShardLoad {
                releases: Releases::ClosedFor(d),
                specs: Arc::new(super::reorder(specs, &globals)),
                globals: None,
            }
        }
    }
}

/// Give records their global request numbers back.
pub fn renumber(
    shard: Shard,
    records: &mut [crate::metrics::RequestRecord],
    globals: Option<&[usize]>,
) {
    for r in records.iter_mut() {
        r.index = match globals {
            Some(g) => g.get(r.index).copied().unwrap_or(r.index),
            None => shard.closed_loop_index(r.index),
        };
    }
}

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

/// Now as a [`StartAt`] (wall clock).
pub fn now() -> StartAt {
    let ns = match SystemTime::now().duration_since(UNIX_EPOCH) {
        Ok(d) => d.as_nanos() as i128,
        Err(e) => -(e.duration().as_nanos() as i128),
    };
    StartAt(ns)
}

/// Sleep until `start` (checked by [`super::wait_for_start`] first).
pub async fn wait_until(start: StartAt) -> Result<()> {
    let wait = super::wait_for_start(start, now()).map_err(anyhow::Error::msg)?;
    if !wait.is_zero() {
        eprintln!(
            "kneecap: waiting {:.1} s for --start-at {}",
            wait.as_secs_f64(),
            start.rfc3339()
        );
    }
    // Sleep most of the way on the timer, then re-read the wall clock: the
    // start is a wall-clock instant shared with other machines.
    tokio::time::sleep(wait.saturating_sub(Duration::from_millis(5))).await;
    loop {
        let left = start.0 - now().0;
        if left <= 0 {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_nanos(left as u64)).await;
    }
}

/// Wall-clock time as Unix seconds.
pub fn unix_s(t: SystemTime) -> f64 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => d.as_secs_f64(),
        Err(e) => -e.duration().as_secs_f64(),
    }
}

/// Sleep until a sweep step's slot (see [`super::step_starts`]). Returns how
/// far (ms) the slot was already past when the shard got to it — the previous
/// step overran its slot — or `None` when the shard was on time and waited.
pub async fn wait_for_slot(slot: StartAt) -> Option<f64> {
    let behind = now().0 - slot.0;
    if behind > 0 {
        return Some(behind as f64 / 1e6);
    }
    tokio::time::sleep(
        Duration::from_nanos((-behind) as u64).saturating_sub(Duration::from_millis(5)),
    )
    .await;
    loop {
        let left = slot.0 - now().0;
        if left <= 0 {
            return None;
        }
        tokio::time::sleep(Duration::from_nanos(left as u64)).await;
    }
}

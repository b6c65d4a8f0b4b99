//! Applying `--shard` to a load: which releases and prompts this shard sends,
//! and the global request numbers its records get back. PURE: the selection
//! logic of [`super`] applied to the engine's [`Releases`]; waiting for the
//! common start (the wall clock) is the command layer's.

use super::Shard;
use crate::engine::Releases;
use crate::workload::RequestSpec;
use std::sync::Arc;

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

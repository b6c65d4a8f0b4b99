//! The blocks of a sharded sweep: what `kneecap sweep --shard i/N` writes
//! beside its result ([`SweepIdentity`]) and beside each step
//! ([`StepShard`]), and what `kneecap merge` writes beside the merged sweep
//! ([`MergedSweep`]). Typed serde data: the command layer fills them, the
//! merge reads their fields and adds them up ([`StepShard::add`]). Field
//! order is the file's key order.

use super::evidence::{Attainment, Steadiness};
use super::shard::{ShardIdentity, ShardPart};
use serde::{Deserialize, Serialize};

/// A shard's sweep (`shard`): its identity, then the wall-clock slot of each
/// step (seconds from `--start-at`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepIdentity {
    #[serde(flatten)]
    pub id: ShardIdentity,
    #[serde(default)]
    pub slots_s: Vec<f64>,
}

/// A shard's step (`steps[k].shard`): the step's counters and histograms
/// over its window ([`ShardPart`]), its slot, the steady-state inputs and the
/// exact counts of each goodput-form SLO (aligned with the sweep's SLOs,
/// `null` for the others).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepShard {
    #[serde(flatten)]
    pub part: ShardPart,
    /// When the step's slot began, Unix seconds.
    #[serde(default)]
    pub slot_start_unix_s: f64,
    /// How late the shard reached the slot (its previous step overran), ms.
    #[serde(default)]
    pub overran_slot_ms: Option<f64>,
    pub steadiness: Steadiness,
    #[serde(default)]
    pub slo_attainment: Vec<Option<Attainment>>,
}

impl StepShard {
    /// Add another shard's block of the same step: the parts add
    /// ([`ShardPart::add`]) and so do the goodput-form counts (an SLO keeps
    /// counts only while every shard has them). The steadiness inputs do not
    /// add field by field: `sweep::steady::combine` weighs them.
    pub fn add(&mut self, other: &StepShard) -> Result<(), String> {
        self.part.add(&other.part)?;
        let n = self.slo_attainment.len().max(other.slo_attainment.len());
        self.slo_attainment.resize(n, None);
        for (i, mine) in self.slo_attainment.iter_mut().enumerate() {
            *mine = match (*mine, other.slo_attainment.get(i).copied().flatten()) {
                (Some(mut a), Some(b)) => {
                    a.add(&b);
                    Some(a)
                }
                _ => None,
            };
        }
        Ok(())
    }

    /// The sum of `blocks` ([`StepShard::add`]; the first block's slot and
    /// steadiness are kept); an error when there are none.
    pub fn sum<'a>(blocks: impl IntoIterator<Item = &'a StepShard>) -> Result<StepShard, String> {
        let mut blocks = blocks.into_iter();
        let mut out = blocks.next().ok_or("no shard blocks to add")?.clone();
        for b in blocks {
            out.add(b)?;
        }
        Ok(out)
    }
}

/// How one step of a merged sweep lined up across the shards.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct StepAlignment {
    pub load: f64,
    /// Each shard's start lateness against the slot, ms.
    pub start_lateness_ms: Vec<Option<f64>>,
    /// Each shard's overrun of the slot, ms (`null`: on time).
    pub overran_slot_ms: Vec<Option<f64>>,
    /// The merged window, Unix seconds.
    pub window_start_unix_s: f64,
    pub window_end_unix_s: f64,
}

/// A merged sharded sweep (`merged`): which shards, and how well each step's
/// slots lined up.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct MergedSweep {
    pub shards: usize,
    pub fingerprint: String,
    pub seed: u64,
    /// The shard files, as given, in shard order.
    pub files: Vec<String>,
    /// The common `--start-at` (RFC 3339), if one was given.
    pub start_at: Option<String>,
    pub steps: Vec<StepAlignment>,
    /// How the merged numbers were computed.
    pub notes: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shard::{Shard, StartAt};

    fn block(planned: u64, attained: Option<(u64, u64)>) -> StepShard {
        let mut part = ShardPart::default();
        part.counters.planned = planned;
        StepShard {
            part,
            slot_start_unix_s: 5.0,
            overran_slot_ms: None,
            steadiness: Steadiness::default(),
            slo_attainment: vec![
                None,
                attained.map(|(samples, met)| Attainment { samples, met }),
            ],
        }
    }

    #[test]
    fn step_blocks_add_their_counters_and_attainment_while_every_shard_has_it() {
        let mut a = block(10, Some((10, 9)));
        a.add(&block(12, Some((12, 12)))).unwrap();
        assert_eq!(a.part.counters.planned, 22);
        assert_eq!(
            a.slo_attainment,
            vec![
                None,
                Some(Attainment {
                    samples: 22,
                    met: 21
                })
            ]
        );
        a.add(&block(1, None)).unwrap();
        assert_eq!(a.slo_attainment, vec![None, None]);
    }

    #[test]
    fn a_step_block_is_the_parts_keys_then_the_slot_steadiness_and_attainment() {
        let text = serde_json::to_string(&block(3, None)).unwrap();
        let at = |key: &str| text.find(&format!("\"{key}\":")).expect(key);
        assert!(at("start_lateness_ms") < at("histograms"), "{text}");
        assert!(at("histograms") < at("slot_start_unix_s"), "{text}");
        assert!(at("slot_start_unix_s") < at("overran_slot_ms"), "{text}");
        assert!(at("overran_slot_ms") < at("steadiness"), "{text}");
        assert!(at("steadiness") < at("slo_attainment"), "{text}");
        let back: StepShard = serde_json::from_str(&text).unwrap();
        assert_eq!(back, block(3, None));
    }

    #[test]
    fn a_sweep_identity_ends_with_its_slots() {
        let id = SweepIdentity {
            id: ShardIdentity {
                shard: Shard { index: 0, count: 2 },
                fingerprint: "f".into(),
                seed: 3,
                start_at: Some(StartAt(1_000_000_000)),
            },
            slots_s: vec![0.0, 12.5],
        };
        let text = serde_json::to_string(&id).unwrap();
        assert!(
            text.ends_with(r#""start_at_unix_ns":"1000000000","slots_s":[0.0,12.5]}"#),
            "{text}"
        );
        assert_eq!(serde_json::from_str::<SweepIdentity>(&text).unwrap(), id);
    }
}

//! The GPUs' power and energy across shards (`kneecap.gpu`, `steps[].gpu`):
//! a block describes the GPUs of the `--gpu-metrics-url` hosts it scraped
//! (`hosts`). Shards that scraped the same hosts each measured the same
//! GPUs over (nearly) the same time: one reading, the widest, is kept.
//! Shards that scraped disjoint hosts measured different GPUs: the blocks
//! add ([`GpuStats::add`]). Anything else gives no block and says why.
//! Either way joules per token and per request divide by the whole load's
//! work. PURE.

use std::collections::BTreeSet;

use crate::result::GpuStats;

/// The merged result's note when some GPU block was merged.
pub const NOTE: &str = "gpu: shards that scraped the same --gpu-metrics-url hosts measured the same GPUs, so the widest window's energy is kept (not a sum); shards of disjoint hosts add (energy, mean power, GPUs; peak power is the sum of the peaks, an upper bound); joules per token and per request divide by every shard's work";

/// The merged block, with joules per token and per request over `work`
/// (output tokens, completed requests; `None`: left out). `Ok(None)` when
/// no shard measured GPUs; `Err` (one line, for the notes) when some did
/// and the blocks cannot be combined: a shard without a block, a block
/// that does not name its hosts, or host sets that overlap unequally.
pub fn merged(
    blocks: &[Option<&GpuStats>],
    work: Option<(u64, u64)>,
) -> Result<Option<GpuStats>, String> {
    if blocks.iter().all(Option::is_none) {
        return Ok(None);
    }
    let Some(all) = blocks.iter().copied().collect::<Option<Vec<&GpuStats>>>() else {
        let missing = blocks.iter().filter(|b| b.is_none()).count();
        return Err(format!(
            "gpu: {missing} of {} shards have no GPU block (no --gpu-metrics-url, or too few samples answered), so the GPUs' energy is not known for the whole load: no merged GPU block",
            blocks.len()
        ));
    };
    if all.iter().any(|b| b.hosts.is_empty()) {
        return Err("gpu: a shard's GPU block does not name its hosts (written by an older kneecap), so whether the shards measured the same GPUs is unknown: no merged GPU block".into());
    }
    let sets: Vec<BTreeSet<&str>> = all
        .iter()
        .map(|b| b.hosts.iter().map(String::as_str).collect())
        .collect();
    let block = if sets.iter().all(|s| *s == sets[0]) {
        all.iter()
            .copied()
            .max_by(|a, b| a.duration_s.total_cmp(&b.duration_s))
            .map(|b| b.clone().without_work())
    } else if pairwise_disjoint(&sets) {
        all.split_first()
            .map(|(first, rest)| rest.iter().fold((*first).clone(), |sum, b| sum.add(b)))
    } else {
        return Err("gpu: the shards' --gpu-metrics-url host sets overlap without being equal (neither one measurement of the same GPUs nor a sum over distinct ones): no merged GPU block".into());
    };
    Ok(block.map(|b| match work {
        Some((tokens, requests)) => b.with_work(tokens, requests),
        None => b.without_work(),
    }))
}

/// The merged notes that say why a GPU block was left out: every note of
/// this module's but [`NOTE`] (each starts with "gpu: "; a sweep's names its
/// steps after it). The command prints them on stderr, so a merge that lost
/// the energy figures says so where it is run, not only in the JSON.
pub fn refusals(notes: &[String]) -> impl Iterator<Item = &str> {
    notes
        .iter()
        .map(String::as_str)
        .filter(|n| *n != NOTE && n.starts_with("gpu: "))
}

/// The summed work every block recorded ([`GpuStats::work`]); `None` when
/// some block has none.
pub fn recorded_work(blocks: &[Option<&GpuStats>]) -> Option<(u64, u64)> {
    blocks.iter().try_fold((0, 0), |(t, r), b| {
        let (bt, br) = b.as_ref()?.work()?;
        Some((t + bt, r + br))
    })
}

fn pairwise_disjoint(sets: &[BTreeSet<&str>]) -> bool {
    sets.iter()
        .enumerate()
        .all(|(i, a)| sets[i + 1..].iter().all(|b| a.is_disjoint(b)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::result::gpu::EnergySource;

    /// A block of `gpus` GPUs at `hosts`, `energy_j` over `duration_s`.
    fn block(hosts: &[&str], gpus: u32, energy_j: f64, duration_s: f64) -> GpuStats {
        GpuStats {
            source: EnergySource::Counter,
            gpus,
            hosts: hosts.iter().map(|h| h.to_string()).collect(),
            samples: 10,
            failed_samples: 1,
            duration_s,
            mean_power_w: energy_j / duration_s,
            peak_power_w: 2.0 * energy_j / duration_s,
            mean_util_pct: Some(50.0),
            peak_memory_mib: Some(1000.0),
            energy_j,
            joules_per_output_token: None,
            joules_per_request: None,
            output_tokens: None,
            completed_requests: None,
        }
    }

    #[test]
    fn shards_of_the_same_gpus_keep_the_widest_reading_over_all_the_work() {
        let a = block(&["http://g:9400/metrics"], 2, 3000.0, 10.0).with_work(1000, 10);
        let b = block(&["http://g:9400/metrics"], 2, 3300.0, 11.0).with_work(500, 5);
        let c = block(&["http://g:9400/metrics"], 2, 3100.0, 10.5).with_work(1500, 15);
        let work = recorded_work(&[Some(&a), Some(&b), Some(&c)]);
        assert_eq!(work, Some((3000, 30)));
        let got = merged(&[Some(&a), Some(&b), Some(&c)], work)
            .unwrap()
            .unwrap();
        // b's reading (11 s): 3300 J, not 9400 J; over 3000 tokens and 30 requests.
        assert_eq!((got.energy_j, got.duration_s, got.gpus), (3300.0, 11.0, 2));
        assert_eq!(got.mean_power_w, 300.0);
        assert_eq!(got.joules_per_output_token, Some(1.1));
        assert_eq!(got.joules_per_request, Some(110.0));
        assert_eq!(got.work(), Some((3000, 30)));
    }

    #[test]
    fn host_order_does_not_matter_for_the_same_gpus() {
        let a = block(&["http://a", "http://b"], 2, 100.0, 1.0);
        let b = block(&["http://b", "http://a"], 2, 120.0, 2.0);
        let got = merged(&[Some(&a), Some(&b)], None).unwrap().unwrap();
        assert_eq!((got.energy_j, got.gpus), (120.0, 2));
        assert_eq!(got.joules_per_output_token, None);
    }

    #[test]
    fn shards_of_distinct_gpus_add_up() {
        // 1 GPU: 2000 J over 10 s (200 W, peak 400 W, util 50 %, 1000 MiB);
        // 3 GPUs: 9000 J over 12 s (750 W, peak 1500 W, util 90 %, 1000 MiB).
        let a = block(&["http://a"], 1, 2000.0, 10.0).with_work(400, 4);
        let mut b = block(&["http://b"], 3, 9000.0, 12.0).with_work(700, 7);
        b.mean_util_pct = Some(90.0);
        b.source = EnergySource::PowerSamples;
        let got = merged(&[Some(&a), Some(&b)], Some((1100, 11)))
            .unwrap()
            .unwrap();
        assert_eq!(got.energy_j, 11_000.0);
        assert_eq!(got.mean_power_w, 950.0);
        assert_eq!(got.peak_power_w, 1900.0, "sum of the peaks");
        assert_eq!((got.gpus, got.samples, got.failed_samples), (4, 20, 2));
        assert_eq!(got.duration_s, 12.0);
        assert_eq!(got.mean_util_pct, Some(80.0), "(50·1 + 90·3) / 4");
        assert_eq!(got.peak_memory_mib, Some(2000.0));
        assert_eq!(got.source, EnergySource::PowerSamples);
        assert_eq!(got.hosts, ["http://a", "http://b"]);
        assert_eq!(got.joules_per_output_token, Some(10.0), "11000 J / 1100");
        assert_eq!(got.joules_per_request, Some(1000.0));
    }

    #[test]
    fn counters_on_every_shard_stay_a_counter() {
        let (a, b) = (
            block(&["http://a"], 1, 1.0, 1.0),
            block(&["http://b"], 1, 1.0, 1.0),
        );
        let got = merged(&[Some(&a), Some(&b)], None).unwrap().unwrap();
        assert_eq!(got.source, EnergySource::Counter);
    }

    #[test]
    fn mixed_shards_give_no_block_and_say_why() {
        let a = block(&["http://a"], 1, 100.0, 1.0);
        let b = block(&["http://b"], 1, 100.0, 1.0);
        let ab = block(&["http://a", "http://b"], 2, 200.0, 1.0);
        let old = block(&[], 1, 100.0, 1.0);
        let err = merged(&[Some(&a), None], None).unwrap_err();
        assert!(
            err.starts_with("gpu: 1 of 2 shards have no GPU block"),
            "{err}"
        );
        let err = merged(&[Some(&a), Some(&ab), Some(&b)], None).unwrap_err();
        assert!(err.contains("overlap without being equal"), "{err}");
        let err = merged(&[Some(&old), Some(&old)], None).unwrap_err();
        assert!(err.contains("does not name its hosts"), "{err}");
        assert_eq!(merged(&[None, None], Some((1, 1))), Ok(None));
        assert_eq!(recorded_work(&[Some(&a)]), None);
    }

    #[test]
    fn refusals_are_the_gpu_notes_that_left_a_block_out() {
        let notes: Vec<String> = [
            "shards were aligned on their common window",
            NOTE,
            "gpu: 1 of 2 shards have no GPU block (no --gpu-metrics-url, or too few samples answered), so ...",
            "gpu: the shards' --gpu-metrics-url host sets overlap ... (steps at load 10, 20)",
        ]
        .map(String::from)
        .to_vec();
        let got: Vec<&str> = refusals(&notes).collect();
        assert_eq!(got, [notes[2].as_str(), notes[3].as_str()]);
    }
}

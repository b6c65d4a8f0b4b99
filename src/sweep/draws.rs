//! The seeds of a sweep's per-step prompt draws: step `k`'s dataset seed
//! and a calibration probe level's, derived from `--seed` with a well-mixed
//! hash (SplitMix64, [`crate::shard::splitmix64`]: the mix that assigns
//! a sharded load's arrivals), so every step draws its own prompts, a sweep stays
//! reproducible, and every shard of a sharded sweep draws the same ones.
//!
//! Step 0 keeps `--seed` itself, so a one-step sweep sends `kneecap run`'s
//! prompts. Later steps must not use `seed + k`: the arrival schedule of
//! step `k` is already seeded with `seed + k`, and a neighbouring run's
//! `--seed` would then replay another run's steps. The probe levels draw
//! from their own stream, so the probe never warms a server's prefix cache
//! with the steps' prompts.
//!
//! Pure: arithmetic only.

use crate::shard::splitmix64;

/// Which kind of draw a seed is for; each kind is its own stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stream {
    Step = 1,
    Probe = 2,
}

/// Step `step`'s dataset seed: `seed` for step 0, a SplitMix64 mix of the
/// seed and the step's index for every later one.
pub fn step_seed(seed: u64, step: usize) -> u64 {
    match step {
        0 => seed,
        k => mix(seed, Stream::Step, k as u64),
    }
}

/// The dataset seed of calibration probe level `level` (never a step's).
pub fn probe_seed(seed: u64, level: usize) -> u64 {
    mix(seed, Stream::Probe, level as u64)
}

/// A 64-bit hash of (`seed`, `stream`, `index`): each input goes through
/// the SplitMix64 finaliser before the next is folded in, so neighbouring
/// seeds and indices land far apart.
fn mix(seed: u64, stream: Stream, index: u64) -> u64 {
    splitmix64(seed ^ splitmix64((stream as u64) ^ splitmix64(index)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn step_zero_keeps_the_runs_seed_and_the_rest_are_reproducible() {
        for seed in [0, 1, 7, u64::MAX] {
            assert_eq!(step_seed(seed, 0), seed);
            assert_eq!(step_seed(seed, 3), step_seed(seed, 3));
            assert_ne!(step_seed(seed, 1), seed);
        }
    }

    #[test]
    fn no_two_draws_of_neighbouring_seeds_share_a_seed() {
        // Steps and probe levels of 64 neighbouring --seed values: every
        // draw gets its own seed, and none is another run's --seed (which
        // seed + k would be: run 0's step 1 = run 1's step 0).
        let mut seen = HashSet::new();
        for seed in 0..64u64 {
            for k in 0..64 {
                let s = step_seed(seed, k);
                assert!(seen.insert(s), "step seed {s} of ({seed}, {k}) repeats");
                if k > 0 {
                    assert!(
                        s >= 1 << 16,
                        "step ({seed}, {k}) lands on a small --seed: {s}"
                    );
                }
            }
            for level in 0..16 {
                let p = probe_seed(seed, level);
                assert!(seen.insert(p), "probe seed of ({seed}, {level}) repeats");
            }
        }
    }

    #[test]
    fn the_derived_seeds_are_well_mixed() {
        // Neighbouring steps differ in about half their bits (a plain
        // seed + k differs in one or two).
        let flips: Vec<u32> = (1..200)
            .map(|k| (step_seed(42, k) ^ step_seed(42, k + 1)).count_ones())
            .collect();
        let mean = flips.iter().sum::<u32>() as f64 / flips.len() as f64;
        assert!((28.0..36.0).contains(&mean), "mean bit flips {mean}");
        assert!(flips.iter().all(|&f| f >= 12), "{flips:?}");
    }
}

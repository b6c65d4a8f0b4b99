//! Shard: how one load is split across N processes (`--shard i/N`) and how
//! they agree on a common start (`--start-at`). Owns the arrival selection,
//! the concurrency split, the workload fingerprint, the start-time rules and
//! the sweep's wall-clock step slots. PURE: the current time is passed in;
//! nothing here reads a clock, sleeps or touches a socket. [`apply`] applies
//! the selection to the engine's releases; the command layer waits for the
//! common start.
//!
//! **Selection.** Every shard builds the same seeded *global* schedule and
//! keeps arrival `j` when `splitmix64(seed ⊕ splitmix64(j)) mod N = i`. The
//! union over shards is the global schedule whatever N is, each arrival goes
//! to exactly one shard, and because the choice is a hash (independent of the
//! gaps) each shard's own stream is a random thinning of the global one — a
//! thinned Poisson process is Poisson at rate λ/N. Prompt `j` is the same
//! whichever shard sends it.
//!
//! **Concurrency.** A closed loop of C streams gives shard i `⌊C/N⌋`, plus one
//! when `i < C mod N`; a shard that would get 0 streams is an error.
//!
//! **Sweep slots** (the rule for sharded sweeps; [`step_starts`] computes it,
//! `kneecap sweep --shard` follows it). Step k starts at
//! `start_at + Σ_{j<k} slot_j`, where `slot_j = step length + drain +`
//! [`SLOT_MARGIN`]. The slots are fixed in advance from the step timing, so
//! every shard runs step k in the same wall-clock window even if one finishes
//! a step early; a shard that overruns a slot starts the next step late and
//! records that lateness.
pub mod apply;

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// How far in the future `--start-at` may be.
pub const MAX_START_AHEAD: Duration = Duration::from_secs(3600);
/// How far in the past `--start-at` may already be when a shard is ready.
pub const MAX_START_PAST: Duration = Duration::from_secs(5);
/// Slack added to every sweep step slot (connection teardown, judging, saving).
pub const SLOT_MARGIN: Duration = Duration::from_secs(2);

/// This process's share: shard `index` of `count`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    pub index: usize,
    pub count: usize,
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl FromStr for Shard {
    type Err = String;

    /// `i/N` with `0 ≤ i < N`; the message names `--shard`.
    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || {
            format!("--shard: '{s}' should be INDEX/COUNT with 0 ≤ INDEX < COUNT, e.g. 0/4 (indices start at 0)")
        };
        let (i, n) = s.trim().split_once('/').ok_or_else(bad)?;
        let index: usize = i.trim().parse().map_err(|_| bad())?;
        let count: usize = n.trim().parse().map_err(|_| bad())?;
        if count == 0 || index >= count {
            return Err(bad());
        }
        Ok(Shard { index, count })
    }
}

/// SplitMix64's finaliser: a fast, well-mixed 64-bit hash.
pub fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The shard (0..count) that sends global arrival `j`.
pub fn owner(seed: u64, j: usize, count: usize) -> usize {
    (splitmix64(seed ^ splitmix64(j as u64)) % count.max(1) as u64) as usize
}

impl Shard {
    /// The whole load in one process.
    pub const WHOLE: Shard = Shard { index: 0, count: 1 };

    /// True when this shard sends global arrival `j`.
    pub fn keeps(&self, seed: u64, j: usize) -> bool {
        owner(seed, j, self.count) == self.index
    }

    /// This shard's arrivals of a global schedule: (global indices, offsets).
    pub fn select(&self, seed: u64, offsets: &[Duration]) -> (Vec<usize>, Vec<Duration>) {
        offsets
            .iter()
            .enumerate()
            .filter(|(j, _)| self.keeps(seed, *j))
            .map(|(j, d)| (j, *d))
            .unzip()
    }

    /// This shard's part of `total` closed-loop streams (see the module docs).
    pub fn concurrency(&self, total: usize, flag: &str) -> Result<usize, String> {
        let share = total / self.count + usize::from(self.index < total % self.count);
        if share == 0 {
            return Err(format!(
                "{flag} {total} split over {} shards leaves shard {self} with no stream; use at least {} or fewer shards",
                self.count, self.count
            ));
        }
        Ok(share)
    }

    /// Global request numbers of a shard's closed loop: local request k is
    /// global `k·N + i`, so shards cycle through different prompts.
    pub fn closed_loop_index(&self, k: usize) -> usize {
        k * self.count + self.index
    }
}

/// Reorder `specs` so that local request k uses global prompt `globals[k]`
/// (modulo the dataset length, as the engine does).
pub fn reorder<T: Clone>(specs: &[T], globals: &[usize]) -> Vec<T> {
    if specs.is_empty() {
        return Vec::new();
    }
    globals
        .iter()
        .map(|&g| specs[g % specs.len()].clone())
        .collect()
}

/// A stable hash of everything that defines the workload, as 16 hex digits
/// (64-bit FNV-1a over `key=value` lines). Shards of one load have the same
/// fingerprint; the shard index is never part of it.
pub fn fingerprint(parts: &[(&str, String)]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for (k, v) in parts {
        for b in k.bytes().chain([b'=']).chain(v.bytes()).chain([b'\n']) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    format!("{h:016x}")
}

/// A `--start-at` instant, nanoseconds since the Unix epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct StartAt(pub i128);

impl StartAt {
    /// Seconds since the epoch (for JSON).
    pub fn unix_s(self) -> f64 {
        self.0 as f64 / 1e9
    }

    /// RFC 3339 in UTC with milliseconds.
    pub fn rfc3339(self) -> String {
        let secs = self.0.div_euclid(1_000_000_000) as i64;
        let nanos = self.0.rem_euclid(1_000_000_000) as u32;
        chrono::DateTime::from_timestamp(secs, nanos)
            .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
            .unwrap_or_else(|| format!("{}s", self.unix_s()))
    }
}

impl FromStr for StartAt {
    type Err = String;

    /// RFC 3339 (`2026-05-01T12:00:00Z`) or Unix seconds (`1777636800`, `1777636800.5`).
    fn from_str(s: &str) -> Result<Self, String> {
        let t = s.trim();
        if let Some(ns) = unix_seconds_ns(t) {
            return Ok(StartAt(ns));
        }
        chrono::DateTime::parse_from_rfc3339(t)
            .ok()
            .and_then(|d| d.timestamp_nanos_opt())
            .map(|ns| StartAt(i128::from(ns)))
            .ok_or_else(|| {
                format!("--start-at: '{s}' is neither RFC 3339 (2026-05-01T12:00:00Z) nor Unix seconds (1777636800)")
            })
    }
}

/// `SECONDS[.FRACTION]` as nanoseconds, exactly (no float rounding).
fn unix_seconds_ns(t: &str) -> Option<i128> {
    let (whole, frac) = t.split_once('.').unwrap_or((t, ""));
    let all_digits = |x: &str| x.bytes().all(|b| b.is_ascii_digit());
    if whole.is_empty()
        || whole.len() > 11
        || frac.len() > 9
        || !all_digits(whole)
        || !all_digits(frac)
    {
        return None;
    }
    let secs: i128 = whole.parse().ok()?;
    let nanos: i128 = format!("{frac:0<9}").parse().ok()?;
    Some(secs * 1_000_000_000 + nanos)
}

/// How long to wait from `now` for `start`, or why the start is unusable.
/// Up to [`MAX_START_PAST`] late is accepted (wait 0; the lateness is recorded).
pub fn wait_for_start(start: StartAt, now: StartAt) -> Result<Duration, String> {
    let ahead = start.0 - now.0;
    if ahead > MAX_START_AHEAD.as_nanos() as i128 {
        return Err(format!(
            "--start-at {} is {:.0} s away, more than the {} s allowed; give a start a few seconds to minutes ahead",
            start.rfc3339(),
            ahead as f64 / 1e9,
            MAX_START_AHEAD.as_secs()
        ));
    }
    if -ahead > MAX_START_PAST.as_nanos() as i128 {
        return Err(format!(
            "--start-at {} was {:.1} s ago (more than {} s): this shard would start late and skew the combined load; pick a later start",
            start.rfc3339(),
            -ahead as f64 / 1e9,
            MAX_START_PAST.as_secs()
        ));
    }
    Ok(Duration::from_nanos(ahead.max(0) as u64))
}

/// Offsets from `--start-at` at which each sweep step starts (module docs).
pub fn step_starts(lengths: &[Duration], drain: Duration) -> Vec<Duration> {
    lengths
        .iter()
        .scan(Duration::ZERO, |at, len| {
            let start = *at;
            *at += *len + drain + SLOT_MARGIN;
            Some(start)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedule::{offsets, Arrival};
    use rand::{rngs::StdRng, SeedableRng};

    fn poisson(n: usize, rate: f64, seed: u64) -> Vec<Duration> {
        let arrival = Arrival::Gamma {
            rate,
            burstiness: 1.0,
        };
        offsets(n, &arrival, &mut StdRng::seed_from_u64(seed))
    }

    #[test]
    fn shard_specs_parse_and_name_the_flag_when_wrong() {
        assert_eq!("2/5".parse(), Ok(Shard { index: 2, count: 5 }));
        for bad in ["5/5", "1/0", "a/3", "3", "-1/3", ""] {
            let err = bad.parse::<Shard>().unwrap_err();
            assert!(err.starts_with("--shard:"), "{bad}: {err}");
        }
    }

    #[test]
    fn the_union_of_all_shards_is_the_global_schedule_for_every_n() {
        let global = poisson(3000, 50.0, 9);
        for n in 1..=5 {
            let mut union: Vec<(usize, Duration)> = Vec::new();
            for i in 0..n {
                let (g, d) = Shard { index: i, count: n }.select(9, &global);
                union.extend(g.into_iter().zip(d));
            }
            union.sort();
            let want: Vec<(usize, Duration)> = global.iter().copied().enumerate().collect();
            assert_eq!(union, want, "N = {n}");
        }
    }

    #[test]
    fn each_shard_gets_about_one_nth() {
        let global = poisson(20_000, 100.0, 4);
        for n in 2..=5 {
            for i in 0..n {
                let k = Shard { index: i, count: n }.select(4, &global).0.len() as f64;
                let want = 20_000.0 / n as f64;
                // Binomial: 5 standard deviations.
                let sd = (20_000.0 * (1.0 / n as f64) * (1.0 - 1.0 / n as f64)).sqrt();
                assert!((k - want).abs() < 5.0 * sd, "shard {i}/{n}: {k} vs {want}");
            }
        }
    }

    #[test]
    fn a_shards_gaps_are_exponential_at_rate_lambda_over_n() {
        // Thinning a Poisson stream by an independent hash keeps it Poisson:
        // gaps have mean N/λ and coefficient of variation 1, and
        // P(gap > mean) = e^-1.
        let (rate, n) = (100.0, 4);
        let global = poisson(40_000, rate, 21);
        let (_, mine) = Shard { index: 1, count: n }.select(21, &global);
        let gaps: Vec<f64> = mine
            .windows(2)
            .map(|w| (w[1] - w[0]).as_secs_f64())
            .collect();
        let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
        let var = gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / gaps.len() as f64;
        let cv = var.sqrt() / mean;
        let above = gaps.iter().filter(|&&g| g > mean).count() as f64 / gaps.len() as f64;
        assert!(
            (mean - n as f64 / rate).abs() < 0.03 * n as f64 / rate,
            "mean {mean}"
        );
        assert!((cv - 1.0).abs() < 0.05, "cv {cv}");
        assert!(
            (above - (-1.0f64).exp()).abs() < 0.02,
            "P(gap > mean) {above}"
        );
    }

    #[test]
    fn concurrency_splits_evenly_with_the_remainder_first() {
        let shares: Vec<usize> = (0..4)
            .map(|i| {
                Shard { index: i, count: 4 }
                    .concurrency(10, "--max-concurrency")
                    .unwrap()
            })
            .collect();
        assert_eq!(shares, vec![3, 3, 2, 2]);
        let err = Shard { index: 3, count: 4 }
            .concurrency(3, "--max-concurrency")
            .unwrap_err();
        assert!(
            err.contains("--max-concurrency 3") && err.contains("3/4"),
            "{err}"
        );
    }

    #[test]
    fn fingerprint_changes_with_any_part() {
        let base = vec![("seed", "1".to_string()), ("rate", "10".to_string())];
        let a = fingerprint(&base);
        assert_eq!(a, fingerprint(&base));
        assert_ne!(
            a,
            fingerprint(&[("seed", "2".into()), ("rate", "10".into())])
        );
        assert_ne!(
            a,
            fingerprint(&[("seed", "1".into()), ("rate", "100".into())])
        );
        assert_eq!(a.len(), 16);
    }

    #[test]
    fn start_at_accepts_rfc3339_and_unix_seconds() {
        let a: StartAt = "2026-05-01T12:00:00Z".parse().unwrap();
        let b: StartAt = "1777636800".parse().unwrap();
        assert_eq!(a, b);
        assert_eq!(a.rfc3339(), "2026-05-01T12:00:00.000Z");
        let c: StartAt = "1777636800.25".parse().unwrap();
        assert_eq!(c.0 - a.0, 250_000_000);
        assert!("tomorrow"
            .parse::<StartAt>()
            .unwrap_err()
            .contains("--start-at"));
    }

    #[test]
    fn start_times_too_far_ahead_or_already_past_are_refused() {
        let now = StartAt(1_000_000_000_000_000_000);
        let at = |s: f64| StartAt(now.0 + (s * 1e9) as i128);
        assert_eq!(
            wait_for_start(at(2.5), now),
            Ok(Duration::from_millis(2500))
        );
        assert_eq!(wait_for_start(at(-1.0), now), Ok(Duration::ZERO));
        assert!(wait_for_start(at(3601.0), now)
            .unwrap_err()
            .contains("3600 s"));
        assert!(wait_for_start(at(-6.0), now).unwrap_err().contains("ago"));
    }

    #[test]
    fn sweep_steps_get_fixed_slots() {
        let s = step_starts(
            &[
                Duration::from_secs(10),
                Duration::from_secs(20),
                Duration::from_secs(5),
            ],
            Duration::from_secs(3),
        );
        assert_eq!(
            s,
            vec![
                Duration::ZERO,
                Duration::from_secs(15),
                Duration::from_secs(40)
            ]
        );
    }
}

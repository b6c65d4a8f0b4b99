//! The text of vLLM's four `--random-mm-*` flags to [`MmParams`] fields:
//! `--random-mm-bucket-config` is a Python dict literal with tuple keys
//! (`{(256, 256, 1): 0.5, (720, 1280, 1): 0.5}`), `--random-mm-limit-mm-per-prompt`
//! a JSON object (`{"image": 255, "video": 1}`). Every error names its flag.
//!
//! [`MmParams`]: super::random_mm::MmParams

use std::collections::BTreeMap;

use anyhow::{anyhow, bail};

use super::random_mm::Bucket;

/// vLLM's default `--random-mm-bucket-config`.
pub const DEFAULT_BUCKETS: &str = "{(256, 256, 1): 0.5, (720, 1280, 1): 0.5, (720, 1280, 16): 0.0}";
/// vLLM's default `--random-mm-limit-mm-per-prompt`.
pub const DEFAULT_LIMITS: &str = r#"{"image": 255, "video": 1}"#;

const BUCKETS_FLAG: &str = "--random-mm-bucket-config";
const LIMITS_FLAG: &str = "--random-mm-limit-mm-per-prompt";

/// `--random-mm-base-items-per-request`: a whole number ≥ 0.
pub fn parse_base_items(s: &str) -> anyhow::Result<u32> {
    s.trim().parse().map_err(|_| {
        anyhow!("--random-mm-base-items-per-request: '{s}' is not a whole number ≥ 0 (e.g. 1)")
    })
}

/// `--random-mm-num-mm-items-range-ratio`: a number in [0, 1].
pub fn parse_range_ratio(s: &str) -> anyhow::Result<f64> {
    match s.trim().parse::<f64>() {
        Ok(r) if (0.0..=1.0).contains(&r) => Ok(r),
        _ => bail!(
            "--random-mm-num-mm-items-range-ratio: '{s}' must be a number in [0, 1], e.g. 0.5"
        ),
    }
}

/// `--random-mm-limit-mm-per-prompt`: `{"modality": count, ...}`, counts ≥ 0.
pub fn parse_limits(s: &str) -> anyhow::Result<BTreeMap<String, u32>> {
    let raw: BTreeMap<String, serde_json::Number> = serde_json::from_str(s).map_err(|_| {
        anyhow!("{LIMITS_FLAG}: '{s}' is not a JSON object of counts like {DEFAULT_LIMITS}")
    })?;
    raw.into_iter()
        .map(|(k, v)| {
            let n = v
                .as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .ok_or_else(|| anyhow!("{LIMITS_FLAG}: \"{k}\": {v} must be a whole number ≥ 0"))?;
            Ok((k, n))
        })
        .collect()
}

/// `--random-mm-bucket-config`: `{(height, width, num_frames): probability, ...}`
/// (a later duplicate key wins, as in a Python dict). Probabilities must be
/// ≥ 0 with a positive sum; zero ones are dropped by the generator.
pub fn parse_buckets(s: &str) -> anyhow::Result<Vec<Bucket>> {
    let bad = |why: &str| anyhow!("{BUCKETS_FLAG}: '{s}': {why}; write it like {DEFAULT_BUCKETS}");
    let body = s
        .trim()
        .strip_prefix('{')
        .and_then(|r| r.strip_suffix('}'))
        .ok_or_else(|| bad("not a {...} dict"))?;
    let mut buckets: Vec<Bucket> = Vec::new();
    let mut rest = body.trim();
    while !rest.is_empty() {
        let open = rest
            .strip_prefix('(')
            .ok_or_else(|| bad("a key is not a (h, w, frames) tuple"))?;
        let (tuple, after) = open
            .split_once(')')
            .ok_or_else(|| bad("a tuple is not closed"))?;
        let dims: Vec<u32> = tuple
            .split(',')
            .map(|v| v.trim().parse::<u32>())
            .collect::<Result<_, _>>()
            .map_err(|_| bad("tuple values must be whole numbers ≥ 0"))?;
        let [height, width, frames] = dims[..] else {
            bail!(bad(
                "each key has three values: (height, width, num_frames)"
            ));
        };
        let after = after
            .trim_start()
            .strip_prefix(':')
            .ok_or_else(|| bad("a key has no ': probability'"))?;
        let (value, next) = after.split_once(',').unwrap_or((after, ""));
        let prob: f64 = value
            .trim()
            .parse()
            .map_err(|_| bad("a probability is not a number"))?;
        if !(prob.is_finite() && prob >= 0.0) {
            bail!(
                "{BUCKETS_FLAG}: probability {prob} of ({height}, {width}, {frames}) must be ≥ 0"
            );
        }
        if height == 0 || width == 0 || frames == 0 {
            bail!(
                "{BUCKETS_FLAG}: ({height}, {width}, {frames}): sizes and num_frames must be ≥ 1"
            );
        }
        buckets.retain(|b| (b.height, b.width, b.frames) != (height, width, frames));
        buckets.push(Bucket {
            height,
            width,
            frames,
            prob,
        });
        rest = next.trim();
    }
    if buckets.iter().map(|b| b.prob).sum::<f64>() <= 0.0 {
        bail!("{BUCKETS_FLAG}: '{s}' has no bucket with a probability above 0");
    }
    Ok(buckets)
}

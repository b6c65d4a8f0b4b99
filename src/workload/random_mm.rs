//! The `random-mm` dataset: the `random` dataset's text prompts, each
//! followed by synthetic images, as `vllm bench serve --dataset-name
//! random-mm` (vLLM's `RandomMultiModalDataset`) builds them.
//!
//! Per request: a number of items drawn uniformly from the integers
//! `[floor(n(1−r)), ceil(n(1+r))]` (`n` = `--random-mm-base-items-per-request`,
//! `r` = `--random-mm-num-mm-items-range-ratio`), the top clamped to the sum
//! of the limits (`--random-mm-limit-mm-per-prompt`) of the modalities in the
//! bucket config; each item's (height, width, num_frames) drawn from
//! `--random-mm-bucket-config` (zero-probability buckets dropped, the rest
//! renormalised); a modality at its limit has its buckets removed and the
//! rest renormalised. Images are uniform random RGB pixels as JPEG data URLs
//! ([`super::jpeg_stripes`]). Video buckets (num_frames > 1) with a
//! probability above 0 are refused, as vLLM does ("only images for now").
//!
//! Pure: parameters and a seeded RNG in, requests out; no I/O.

use std::collections::BTreeMap;

use anyhow::bail;
use rand::rngs::StdRng;
use rand::Rng;

use super::jpeg_stripes::StripePool;
use super::media::{ImageUrl, MediaPrompt};
use super::random::{self, RandomParams};
use super::tokenizer::TokenCounter;
use super::{Prompt, RequestSpec};

/// One `--random-mm-bucket-config` entry.
#[derive(Debug, Clone, PartialEq)]
pub struct Bucket {
    pub height: u32,
    pub width: u32,
    /// 1 = an image; more = a video of that many frames.
    pub frames: u32,
    pub prob: f64,
}

impl Bucket {
    /// vLLM's modality name for the bucket.
    pub fn modality(&self) -> &'static str {
        if self.frames > 1 {
            "video"
        } else {
            "image"
        }
    }
}

/// Parameters of random-mm (vLLM flag names).
#[derive(Debug, Clone, PartialEq)]
pub struct MmParams {
    /// The text prompts' `--random-*` flags.
    pub text: RandomParams,
    /// `--random-mm-base-items-per-request`.
    pub base_items: u32,
    /// `--random-mm-num-mm-items-range-ratio`, in [0, 1].
    pub range_ratio: f64,
    /// `--random-mm-limit-mm-per-prompt`.
    pub limits: BTreeMap<String, u32>,
    /// `--random-mm-bucket-config`, as given (zero probabilities included).
    pub buckets: Vec<Bucket>,
}

impl MmParams {
    /// The buckets with a probability above 0, checked: images only, and
    /// each modality named in the limits.
    pub fn live_buckets(&self) -> anyhow::Result<Vec<Bucket>> {
        let live: Vec<Bucket> = self
            .buckets
            .iter()
            .filter(|b| b.prob > 0.0)
            .cloned()
            .collect();
        if live.is_empty() {
            bail!("--random-mm-bucket-config has no bucket with a probability above 0");
        }
        for b in &live {
            if b.frames > 1 {
                bail!(
                    "--random-mm-bucket-config: ({}, {}, {}) is a video bucket (num_frames > 1); \
                     random-mm sends images only (as vLLM's): give it probability 0",
                    b.height,
                    b.width,
                    b.frames
                );
            }
            if !self.limits.contains_key(b.modality()) {
                bail!(
                    "--random-mm-limit-mm-per-prompt has no \"{}\" limit for bucket ({}, {}, {}); add one, e.g. {{\"{}\": 4}}",
                    b.modality(), b.height, b.width, b.frames, b.modality()
                );
            }
        }
        Ok(live)
    }

    /// Items per request: `[floor(n(1−r)), ceil(n(1+r))]`, the top clamped to
    /// the sum of the limits of the live buckets' modalities.
    pub fn item_range(&self, live: &[Bucket]) -> anyhow::Result<(u32, u32)> {
        if !(0.0..=1.0).contains(&self.range_ratio) {
            bail!("--random-mm-num-mm-items-range-ratio must be in [0, 1]");
        }
        let n = f64::from(self.base_items);
        let mut modalities: Vec<&str> = live.iter().map(Bucket::modality).collect();
        modalities.dedup();
        let cap: u32 = modalities.iter().filter_map(|m| self.limits.get(*m)).sum();
        let lo = (n * (1.0 - self.range_ratio)).floor() as u32;
        let hi = ((n * (1.0 + self.range_ratio)).ceil() as u32).min(cap);
        if lo > hi {
            bail!(
                "--random-mm-base-items-per-request {} (range ratio {}) needs at least {lo} items, but \
                 --random-mm-limit-mm-per-prompt allows {cap}; raise the limit or lower the items",
                self.base_items, self.range_ratio
            );
        }
        Ok((lo, hi))
    }
}

/// Generate `n` requests: random text prompts (as [`random::generate`] with
/// chat text) with their images.
pub fn generate(
    params: &MmParams,
    n: usize,
    tokenizer: Option<&TokenCounter>,
    rng: &mut StdRng,
) -> anyhow::Result<Vec<RequestSpec>> {
    let live = params.live_buckets()?;
    let (lo, hi) = params.item_range(&live)?;
    let text = random::generate(&params.text, n, tokenizer, true, rng)?.requests;
    let pools: Vec<StripePool> = live
        .iter()
        .map(|b| StripePool::new(b.height, b.width, rng))
        .collect::<anyhow::Result<_>>()?;
    let requests = text
        .into_iter()
        .map(|spec| {
            let count = rng.random_range(lo..=hi);
            let picks = draw_buckets(&live, &params.limits, count, rng);
            let images: Vec<ImageUrl> = picks.iter().map(|&k| pools[k].image(rng)).collect();
            with_images(spec, images)
        })
        .collect();
    Ok(requests)
}

/// The bucket of each of a request's `count` items (indices into `live`):
/// drawn by probability; a modality at its limit leaves the draw, the
/// rest renormalised. Fewer than `count` when every modality is full.
pub fn draw_buckets(
    live: &[Bucket],
    limits: &BTreeMap<String, u32>,
    count: u32,
    rng: &mut StdRng,
) -> Vec<usize> {
    let mut used: BTreeMap<&str, u32> = BTreeMap::new();
    let mut open: Vec<bool> = live
        .iter()
        .map(|b| limits.get(b.modality()).is_some_and(|l| *l > 0))
        .collect();
    let mut picks = Vec::with_capacity(count as usize);
    while picks.len() < count as usize {
        let total: f64 = live
            .iter()
            .zip(&open)
            .filter(|(_, o)| **o)
            .map(|(b, _)| b.prob)
            .sum();
        if total <= 0.0 {
            break;
        }
        let mut x = rng.random::<f64>() * total;
        let k = (0..live.len())
            .filter(|&k| open[k])
            .find(|&k| {
                x -= live[k].prob;
                x < 0.0
            })
            .or_else(|| (0..live.len()).rev().find(|&k| open[k]))
            .unwrap_or(0);
        let modality = live[k].modality();
        let n = used.entry(modality).or_insert(0);
        *n += 1;
        picks.push(k);
        if *n >= limits.get(modality).copied().unwrap_or(0) {
            for (o, b) in open.iter_mut().zip(live) {
                *o &= b.modality() != modality;
            }
        }
    }
    picks
}

/// A text request with `images` after its text (a plain text request when
/// there are none).
fn with_images(spec: RequestSpec, images: Vec<ImageUrl>) -> RequestSpec {
    if images.is_empty() {
        return spec;
    }
    let text = match spec.prompt {
        Prompt::Text(t) => t,
        other => {
            return RequestSpec {
                prompt: other,
                ..spec
            }
        }
    };
    RequestSpec {
        prompt: Prompt::Media(MediaPrompt { text, images }),
        ..spec
    }
}

#[cfg(test)]
#[path = "random_mm_tests.rs"]
mod tests;

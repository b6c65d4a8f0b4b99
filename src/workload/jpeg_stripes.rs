//! random-mm's images: random-pixel JPEGs (quality 75, 4:2:0, as PIL's
//! defaults), every one different, made without encoding each one.
//!
//! vLLM encodes a fresh random image per item. That costs about 16 ms for a
//! 720×1280 image here (8.3 s and 442 MB of base64 for vLLM's default 1000
//! prompts, half of them 720×1280), so instead, per image size, [`POOL`]
//! random images are encoded once with a restart marker after every row of
//! 16×16 blocks (MCUs). Each row between markers decodes on its own, so an
//! image is assembled by taking every row from a randomly chosen pool
//! member: `POOL^rows` distinct images (8^45 for 720×1280), so a server's
//! multimodal cache, which hashes pixels, never sees one twice. Each row's
//! bytes are padded with `0xFF` fill bytes (allowed before any JPEG marker)
//! to a multiple of 3, so their base64 texts concatenate: an image is a list
//! of shared base64 pieces and costs no encoding at all.
//!
//! Pure: the pixels come from the caller's seeded RNG; no I/O.

use std::sync::Arc;

use anyhow::{bail, Context};
use base64::Engine;
use rand::rngs::StdRng;
use rand::Rng;

use super::media::ImageUrl;

/// Random images encoded per size; rows are drawn from them.
pub const POOL: usize = 8;
/// PIL's default JPEG quality (what vLLM's `image.save(format="JPEG")` uses).
pub const QUALITY: u8 = 75;
/// Rows of pixels per MCU with 4:2:0 subsampling.
const MCU: u32 = 16;
/// The data URL's prefix.
pub const PREFIX: &str = "data:image/jpeg;base64,";

/// The encoded rows of one image size.
#[derive(Debug, Clone)]
pub struct StripePool {
    pub height: u32,
    pub width: u32,
    /// The data URL prefix and the JPEG header (SOI … SOS), in base64.
    head: [Arc<str>; 2],
    /// `rows[r][p]`: MCU row `r` of pool image `p` (its restart marker, or
    /// the end-of-image marker for the last row, included), in base64.
    rows: Vec<Vec<Arc<str>>>,
}

impl StripePool {
    /// Encode [`POOL`] random `height`×`width` images with `rng`'s pixels.
    pub fn new(height: u32, width: u32, rng: &mut StdRng) -> anyhow::Result<Self> {
        let (h, w) = (dim(height)?, dim(width)?);
        let n_rows = height.div_ceil(MCU) as usize;
        let mut rows = vec![Vec::with_capacity(POOL); n_rows];
        let mut head = None;
        for _ in 0..POOL {
            let jpeg = encode_random(h, w, rng)?;
            let (header, segments) = split(&jpeg)?;
            if segments.len() != n_rows {
                bail!(
                    "JPEG {height}x{width}: {} restart segments, expected {n_rows}",
                    segments.len()
                );
            }
            head.get_or_insert_with(|| b64(&header));
            for (row, seg) in rows.iter_mut().zip(segments) {
                row.push(b64(&seg));
            }
        }
        let head = head.context("no image encoded")?;
        Ok(Self {
            height,
            width,
            head: [Arc::from(PREFIX), head],
            rows,
        })
    }

    /// A new image: each row from a random pool member.
    pub fn image(&self, rng: &mut StdRng) -> ImageUrl {
        let mut pieces = Vec::with_capacity(self.rows.len() + 2);
        pieces.extend(self.head.iter().cloned());
        for row in &self.rows {
            pieces.push(row[rng.random_range(0..row.len())].clone());
        }
        ImageUrl::from_pieces(pieces)
    }
}

/// A side length as the encoder takes it.
fn dim(v: u32) -> anyhow::Result<u16> {
    u16::try_from(v)
        .ok()
        .filter(|v| *v > 0)
        .with_context(|| format!("image side {v} must be in 1..=65535 pixels"))
}

/// One JPEG of uniform random RGB pixels, a restart marker after every MCU row.
fn encode_random(h: u16, w: u16, rng: &mut StdRng) -> anyhow::Result<Vec<u8>> {
    let mut pixels = vec![0u8; usize::from(h) * usize::from(w) * 3];
    rng.fill(&mut pixels[..]);
    let mut out = Vec::new();
    let mut enc = jpeg_encoder::Encoder::new(&mut out, QUALITY);
    enc.set_sampling_factor(jpeg_encoder::SamplingFactor::F_2_2);
    enc.set_restart_interval(w.div_ceil(MCU as u16));
    enc.encode(&pixels, w, h, jpeg_encoder::ColorType::Rgb)
        .context("encoding a JPEG")?;
    Ok(out)
}

/// Split a baseline JPEG into its header (SOI … SOS) and its restart
/// segments, each padded with `0xFF` fill bytes before its marker to a
/// multiple of 3 bytes (the last one, ending in EOI, is not padded).
pub fn split(jpeg: &[u8]) -> anyhow::Result<(Vec<u8>, Vec<Vec<u8>>)> {
    let sos = find_sos(jpeg)?;
    let len = usize::from(u16::from_be_bytes([jpeg[sos + 2], jpeg[sos + 3]]));
    let scan = sos + 2 + len;
    let mut header = jpeg[..sos].to_vec();
    pad_before(&mut header, scan - sos);
    header.extend_from_slice(&jpeg[sos..scan]);
    let mut segments = Vec::new();
    let (mut start, mut i) = (scan, scan);
    while i + 1 < jpeg.len() {
        let (a, b) = (jpeg[i], jpeg[i + 1]);
        if a != 0xFF || b == 0x00 || b == 0xFF {
            i += if a == 0xFF && b == 0x00 { 2 } else { 1 };
            continue;
        }
        let mut seg = jpeg[start..i].to_vec();
        if b == 0xD9 {
            seg.extend_from_slice(&[0xFF, 0xD9]);
            segments.push(seg);
            return Ok((header, segments));
        }
        if !(0xD0..=0xD7).contains(&b) {
            bail!("unexpected JPEG marker 0xFF{b:02X} in the scan");
        }
        pad_before(&mut seg, 2);
        seg.extend_from_slice(&[0xFF, b]);
        segments.push(seg);
        i += 2;
        start = i;
    }
    bail!("JPEG without an end-of-image marker")
}

/// Fill bytes so that `bytes` plus the `tail` bytes still to come is a
/// multiple of 3 long.
fn pad_before(bytes: &mut Vec<u8>, tail: usize) {
    let fill = (3 - (bytes.len() + tail) % 3) % 3;
    bytes.extend(std::iter::repeat_n(0xFF, fill));
}

/// Offset of the start-of-scan marker, walking the header's segments.
fn find_sos(jpeg: &[u8]) -> anyhow::Result<usize> {
    let mut i = 2; // after SOI
    while i + 4 <= jpeg.len() {
        if jpeg[i] != 0xFF {
            bail!("malformed JPEG header at byte {i}");
        }
        if jpeg[i + 1] == 0xDA {
            return Ok(i);
        }
        i += 2 + usize::from(u16::from_be_bytes([jpeg[i + 2], jpeg[i + 3]]));
    }
    bail!("JPEG without a start-of-scan marker")
}

fn b64(bytes: &[u8]) -> Arc<str> {
    Arc::from(base64::engine::general_purpose::STANDARD.encode(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::dataset::dataset_rng;

    fn decode(url: &ImageUrl) -> Vec<u8> {
        let s = url.to_string();
        let b = s.strip_prefix(PREFIX).expect("a JPEG data URL");
        base64::engine::general_purpose::STANDARD
            .decode(b)
            .expect("the pieces concatenate to valid base64")
    }

    #[test]
    fn images_are_whole_jpegs_of_the_size_and_all_different() {
        let mut rng = dataset_rng(1);
        let pool = StripePool::new(50, 70, &mut rng).unwrap();
        let a = decode(&pool.image(&mut rng));
        let b = decode(&pool.image(&mut rng));
        assert_ne!(a, b, "two draws gave the same image");
        for jpeg in [&a, &b] {
            assert_eq!(&jpeg[..2], &[0xFF, 0xD8]);
            assert_eq!(&jpeg[jpeg.len() - 2..], &[0xFF, 0xD9]);
            // 50 rows of pixels = 4 MCU rows: 3 restart markers, in order.
            let rst: Vec<u8> = jpeg
                .windows(2)
                .filter(|w| w[0] == 0xFF && (0xD0..=0xD7).contains(&w[1]))
                .map(|w| w[1])
                .collect();
            assert_eq!(rst, vec![0xD0, 0xD1, 0xD2]);
            assert_eq!(size(jpeg), (50, 70));
        }
    }

    /// (height, width) from the SOF0 segment.
    fn size(jpeg: &[u8]) -> (u16, u16) {
        let i = jpeg
            .windows(2)
            .position(|w| w == [0xFF, 0xC0])
            .expect("SOF0");
        let be = |k: usize| u16::from_be_bytes([jpeg[k], jpeg[k + 1]]);
        (be(i + 5), be(i + 7))
    }

    #[test]
    fn a_split_jpeg_rejoins_to_the_same_scan() {
        let mut rng = dataset_rng(2);
        let jpeg = encode_random(33, 17, &mut rng).unwrap();
        let (header, segments) = split(&jpeg).unwrap();
        assert_eq!(segments.len(), 3);
        let strip = |v: &[u8]| -> Vec<u8> {
            // drop fill bytes (0xFF followed by 0xFF)
            let mut out = Vec::new();
            for (k, &b) in v.iter().enumerate() {
                if !(b == 0xFF && v.get(k + 1) == Some(&0xFF)) {
                    out.push(b);
                }
            }
            out
        };
        let mut joined = header.clone();
        segments.iter().for_each(|s| joined.extend_from_slice(s));
        assert_eq!(strip(&joined), jpeg);
        assert!(header.len() % 3 == 0);
        assert!(segments[..2].iter().all(|s| s.len() % 3 == 0));
    }

    #[test]
    fn the_same_seed_gives_the_same_images() {
        let one = |seed| {
            let mut rng = dataset_rng(seed);
            let pool = StripePool::new(20, 20, &mut rng).unwrap();
            pool.image(&mut rng).to_string()
        };
        assert_eq!(one(5), one(5));
        assert_ne!(one(5), one(6));
    }
}

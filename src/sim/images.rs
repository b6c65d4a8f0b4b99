//! What an image costs the simulator: `image_url` parts of chat requests are
//! charged as prompt tokens by Qwen2-VL's rule, one token per 28×28 pixels
//! (14-pixel patches merged 2×2): `ceil(height/28) · ceil(width/28)`, so a
//! 224×224 image is 64 tokens and a 720×1280 one 1196. The size is read from
//! the header of a base64 `data:` URL (JPEG, PNG or GIF). An image whose size
//! cannot be read (an `http(s)` URL, which the simulator does not fetch, or
//! another format) costs [`UNKNOWN_IMAGE_TOKENS`], a 448×448 image's.
//!
//! The tokens enter the prompt's block hashes with a hash of the URL, so the
//! same image at the same place is a prefix-cache hit, as in vLLM (which
//! hashes the pixels). Pure: text in, numbers out.

use base64::Engine;
use serde_json::Value;

use super::api_error::ApiError;
use super::blocks::BlockHasher;

/// Pixels per token along each side.
pub const PIXELS_PER_TOKEN_SIDE: u32 = 28;
/// Tokens of an image whose size cannot be read (448×448).
pub const UNKNOWN_IMAGE_TOKENS: u32 = 256;

/// Images seen in one request and the prompt tokens they were charged.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ImageCharge {
    pub images: u32,
    pub tokens: u32,
}

impl ImageCharge {
    /// Charge the `image_url` content part `part` into `h`.
    pub fn add_part(&mut self, part: &Value, h: &mut BlockHasher) -> Result<(), ApiError> {
        let url = match part.get("image_url") {
            Some(Value::String(s)) => s.as_str(),
            Some(obj) => obj.get("url").and_then(Value::as_str).unwrap_or(""),
            None => "",
        };
        if url.is_empty() {
            return Err(ApiError::bad_request(
                "an image_url part needs {\"image_url\": {\"url\": ...}}",
            ));
        }
        let tokens = tokens_for(url);
        let id = url_hash(url);
        (0..u64::from(tokens)).for_each(|k| h.push_token(id.wrapping_add(k)));
        self.images += 1;
        self.tokens = self.tokens.saturating_add(tokens);
        Ok(())
    }
}

/// The tokens of the image at `url` (see the module docs).
pub fn tokens_for(url: &str) -> u32 {
    match image_size(url) {
        Some((h, w)) => h.div_ceil(PIXELS_PER_TOKEN_SIDE) * w.div_ceil(PIXELS_PER_TOKEN_SIDE),
        None => UNKNOWN_IMAGE_TOKENS,
    }
}

/// (height, width) from a base64 data URL's image header.
pub fn image_size(url: &str) -> Option<(u32, u32)> {
    let (head, data) = url.strip_prefix("data:")?.split_once(',')?;
    if !head.ends_with(";base64") {
        return None;
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(data.trim())
        .ok()?;
    jpeg_size(&bytes)
        .or_else(|| png_size(&bytes))
        .or_else(|| gif_size(&bytes))
}

/// A JPEG's size from its first start-of-frame segment.
fn jpeg_size(b: &[u8]) -> Option<(u32, u32)> {
    if b.get(..2)? != [0xFF, 0xD8] {
        return None;
    }
    let mut i = 2;
    while i + 9 <= b.len() {
        if b[i] != 0xFF {
            return None;
        }
        let m = b[i + 1];
        if m == 0xFF {
            i += 1; // fill byte
            continue;
        }
        let len = usize::from(u16::from_be_bytes([b[i + 2], b[i + 3]]));
        let sof = (0xC0..=0xCF).contains(&m) && !matches!(m, 0xC4 | 0xC8 | 0xCC);
        if sof {
            let be = |k: usize| u32::from(u16::from_be_bytes([b[k], b[k + 1]]));
            return Some((be(i + 5), be(i + 7)));
        }
        i += 2 + len;
    }
    None
}

/// A PNG's size from its IHDR chunk.
fn png_size(b: &[u8]) -> Option<(u32, u32)> {
    if b.get(..8)? != b"\x89PNG\r\n\x1a\n" || b.get(12..16)? != b"IHDR" {
        return None;
    }
    let be = |k: usize| Some(u32::from_be_bytes(b.get(k..k + 4)?.try_into().ok()?));
    Some((be(20)?, be(16)?))
}

/// A GIF's size from its logical screen descriptor.
fn gif_size(b: &[u8]) -> Option<(u32, u32)> {
    if !b.starts_with(b"GIF8") {
        return None;
    }
    let le = |k: usize| {
        Some(u32::from(u16::from_le_bytes(
            b.get(k..k + 2)?.try_into().ok()?,
        )))
    };
    Some((le(8)?, le(6)?))
}

/// A 64-bit hash of the URL's bytes, 8 at a time.
fn url_hash(url: &str) -> u64 {
    url.as_bytes()
        .chunks(8)
        .fold(0x9E37_79B9_7F4A_7C15, |h, c| {
            let mut word = [0u8; 8];
            word[..c.len()].copy_from_slice(c);
            (h ^ u64::from_le_bytes(word))
                .wrapping_mul(0x0000_0100_0000_01b3)
                .rotate_left(23)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data_url(mime: &str, bytes: &[u8]) -> String {
        let b64 = base64::engine::general_purpose::STANDARD.encode(bytes);
        format!("data:{mime};base64,{b64}")
    }

    #[test]
    fn tokens_follow_the_28_pixel_rule_from_real_headers() {
        let mut jpeg = Vec::new();
        let pixels = vec![128u8; 224 * 300 * 3];
        jpeg_encoder::Encoder::new(&mut jpeg, 75)
            .encode(&pixels, 300, 224, jpeg_encoder::ColorType::Rgb)
            .unwrap();
        let url = data_url("image/jpeg", &jpeg);
        assert_eq!(image_size(&url), Some((224, 300)));
        assert_eq!(tokens_for(&url), 8 * 11);
        let mut png = b"\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR".to_vec();
        png.extend_from_slice(&57u32.to_be_bytes()); // width
        png.extend_from_slice(&29u32.to_be_bytes()); // height
        assert_eq!(tokens_for(&data_url("image/png", &png)), 2 * 3);
        let gif = b"GIF89a\x38\x00\x1c\x00";
        // 0x38 = 56 wide, 0x1c = 28 high: 1 row of 2 tokens.
        assert_eq!(tokens_for(&data_url("image/gif", gif)), 2);
    }

    #[test]
    fn unreadable_images_cost_the_fixed_amount() {
        assert_eq!(
            tokens_for("https://example.com/cat.jpg"),
            UNKNOWN_IMAGE_TOKENS
        );
        assert_eq!(
            tokens_for(&data_url("image/webp", b"RIFF....")),
            UNKNOWN_IMAGE_TOKENS
        );
        assert_eq!(
            tokens_for("data:image/jpeg;base64,%%%"),
            UNKNOWN_IMAGE_TOKENS
        );
    }
}

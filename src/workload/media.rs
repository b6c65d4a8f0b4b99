//! Images a request carries (random-mm, custom rows with `images`): the URL
//! of each `image_url` part, held as shared pieces so that cloning a request
//! or sending it again copies no image bytes.

use std::fmt;
use std::sync::Arc;

/// One `image_url` part's URL: a `data:` URL, or an `http(s)://` URL sent as
/// is. Held as pieces written one after the other (random-mm's JPEGs are
/// assembled from shared base64 stripes, see [`super::jpeg_stripes`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageUrl {
    pieces: Arc<[Arc<str>]>,
}

impl ImageUrl {
    /// A URL in one piece.
    pub fn whole(url: impl Into<Arc<str>>) -> Self {
        Self {
            pieces: Arc::from(vec![url.into()]),
        }
    }

    /// A URL made of `pieces`, concatenated.
    pub fn from_pieces(pieces: Vec<Arc<str>>) -> Self {
        Self {
            pieces: Arc::from(pieces),
        }
    }

    /// Bytes of the whole URL.
    pub fn len(&self) -> usize {
        self.pieces.iter().map(|p| p.len()).sum()
    }

    /// Whether the URL is empty (never, for a URL the workload made).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl fmt::Display for ImageUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.pieces.iter().try_for_each(|p| f.write_str(p))
    }
}

/// A text prompt followed by images: one chat user message whose content is
/// the text part, then one `image_url` part per image (vLLM's order).
#[derive(Debug, Clone, PartialEq)]
pub struct MediaPrompt {
    pub text: String,
    pub images: Vec<ImageUrl>,
}

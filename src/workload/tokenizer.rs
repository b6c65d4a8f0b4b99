//! Tokenizer: a Hugging Face `tokenizer.json` read from a local path (nothing
//! is downloaded), wrapped for the few things kneecap needs: counting prompt
//! tokens, encode/decode round trips for the random dataset, and the set of
//! special token ids that random prompts must avoid.
//!
//! This module does no network I/O and never fetches a tokenizer from a hub:
//! the user points kneecap at a file (or a model directory holding one).
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, Context};
use tokenizers::{PostProcessor, Tokenizer};

/// File name looked up when [`TokenCounter::from_path`] is given a directory.
pub const TOKENIZER_FILE: &str = "tokenizer.json";

/// A loaded tokenizer.
pub struct TokenCounter {
    inner: Tokenizer,
    /// Where it was loaded from (for messages).
    path: PathBuf,
    /// Ids of added tokens flagged `special` (BOS/EOS, chat markers, …).
    special_ids: BTreeSet<u32>,
}

impl std::fmt::Debug for TokenCounter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenCounter")
            .field("path", &self.path)
            .field("vocab_size", &self.vocab_size())
            .field("n_special_ids", &self.special_ids.len())
            .finish()
    }
}

impl TokenCounter {
    /// Load `tokenizer.json` (or a directory containing one).
    ///
    /// Errors name the path and say what to pass instead; nothing is downloaded.
    pub fn from_path(path: &Path) -> anyhow::Result<Self> {
        let file = if path.is_dir() {
            let file = path.join(TOKENIZER_FILE);
            if !file.is_file() {
                return Err(anyhow!(
                    "tokenizer directory '{}' has no {TOKENIZER_FILE}; pass the path of a Hugging Face \
                     tokenizer.json or of a model directory that contains one (kneecap never downloads tokenizers)",
                    path.display()
                ));
            }
            file
        } else if path.is_file() {
            path.to_path_buf()
        } else {
            return Err(anyhow!(
                "tokenizer '{}' does not exist; pass the path of a Hugging Face tokenizer.json or of a \
                 model directory that contains one (kneecap never downloads tokenizers)",
                path.display()
            ));
        };
        let bytes = std::fs::read(&file)
            .with_context(|| format!("cannot read tokenizer file '{}'", file.display()))?;
        let inner = Tokenizer::from_bytes(&bytes).map_err(|e| {
            anyhow!(
                "'{}' is not a valid Hugging Face tokenizer.json ({e}); point the tokenizer option at the \
                 tokenizer.json of the served model",
                file.display()
            )
        })?;
        Ok(Self::from_tokenizer(inner, file))
    }

    /// Wrap an already-built tokenizer; `path` is only used in messages.
    pub fn from_tokenizer(inner: Tokenizer, path: PathBuf) -> Self {
        let special_ids = inner
            .get_added_tokens_decoder()
            .iter()
            .filter(|(_, token)| token.special)
            .map(|(id, _)| *id)
            .collect();
        Self {
            inner,
            path,
            special_ids,
        }
    }

    /// The file this tokenizer was loaded from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Number of tokens in `text`, without special tokens.
    ///
    /// Returns 0 if the tokenizer fails on the input (it does not for valid UTF-8
    /// with the BPE/WordPiece/Unigram models in practice); the server's
    /// `usage.prompt_tokens` is authoritative anyway.
    pub fn count(&self, text: &str) -> u32 {
        u32::try_from(self.encode(text).len()).unwrap_or(u32::MAX)
    }

    /// Token ids of `text`, without special tokens (empty on tokenizer failure).
    pub fn encode(&self, text: &str) -> Vec<u32> {
        self.inner
            .encode_fast(text, false)
            .map(|enc| enc.get_ids().to_vec())
            .unwrap_or_default()
    }

    /// Text of `ids`, keeping special tokens (like `transformers`' default
    /// `decode`); empty on tokenizer failure.
    pub fn decode(&self, ids: &[u32]) -> String {
        self.inner.decode(ids, false).unwrap_or_default()
    }

    /// Size of the base vocabulary, without tokens added on top of it (what
    /// `transformers` calls `tokenizer.vocab_size`).
    pub fn vocab_size(&self) -> u32 {
        u32::try_from(self.inner.get_vocab_size(false)).unwrap_or(u32::MAX)
    }

    /// How many special tokens the post-processor adds to a single sequence
    /// (e.g. 1 for a tokenizer that prepends BOS; 0 for SmolLM2).
    pub fn num_special_tokens_to_add(&self) -> u32 {
        self.inner.get_post_processor().map_or(0, |pp| {
            u32::try_from(pp.added_tokens(false)).unwrap_or(u32::MAX)
        })
    }

    /// Ids of the special tokens (to exclude from random prompts).
    pub fn special_ids(&self) -> &BTreeSet<u32> {
        &self.special_ids
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The SmolLM2-135M tokenizer shipped in `tests/data` (Apache-2.0).
    pub(crate) fn smollm2() -> TokenCounter {
        let path =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/smollm2-135m-tokenizer.json");
        TokenCounter::from_path(&path).expect("test tokenizer loads")
    }

    #[test]
    fn smollm2_has_expected_vocab_and_specials() {
        let tok = smollm2();
        assert_eq!(tok.vocab_size(), 49152);
        assert_eq!(tok.num_special_tokens_to_add(), 0);
        assert!(tok.special_ids().contains(&0), "<|endoftext|> is special");
        assert!(tok.special_ids().contains(&1) && tok.special_ids().contains(&2));
        assert!(tok.special_ids().iter().all(|id| *id < 49152));
    }

    #[test]
    fn counts_and_round_trips_a_known_sentence() {
        let tok = smollm2();
        let text = "The quick brown fox jumps over the lazy dog.";
        let ids = tok.encode(text);
        assert_eq!(tok.count(text), ids.len() as u32);
        assert_eq!(tok.count(text), 10);
        assert_eq!(tok.decode(&ids), text);
        assert_eq!(tok.count(""), 0);
    }

    #[test]
    fn loads_from_a_directory_holding_tokenizer_json() {
        let dir = tempfile::tempdir().unwrap();
        let src =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/smollm2-135m-tokenizer.json");
        std::fs::copy(&src, dir.path().join(TOKENIZER_FILE)).unwrap();
        let tok = TokenCounter::from_path(dir.path()).unwrap();
        assert_eq!(tok.vocab_size(), 49152);
    }

    #[test]
    fn missing_path_error_names_the_path() {
        let err = TokenCounter::from_path(Path::new("/nonexistent/kneecap-tok.json")).unwrap_err();
        let msg = format!("{err:#}");
        assert!(msg.contains("/nonexistent/kneecap-tok.json"), "{msg}");
        assert!(msg.contains("never downloads"), "{msg}");
    }

    #[test]
    fn directory_without_tokenizer_json_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let msg = format!("{:#}", TokenCounter::from_path(dir.path()).unwrap_err());
        assert!(msg.contains(&dir.path().display().to_string()), "{msg}");
        assert!(msg.contains("tokenizer.json"), "{msg}");
    }

    #[test]
    fn invalid_json_error_names_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("bad-tokenizer.json");
        std::fs::write(&file, "{\"not\": \"a tokenizer\"}").unwrap();
        let msg = format!("{:#}", TokenCounter::from_path(&file).unwrap_err());
        assert!(msg.contains("bad-tokenizer.json"), "{msg}");
        assert!(msg.contains("not a valid"), "{msg}");
    }
}

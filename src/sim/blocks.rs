//! Prompt block hashes: how the simulator recognises a prompt prefix it has
//! seen before, for its prefix cache ([`super::prefix`]).
//!
//! The simulator has no vocabulary, so it tokenizes with kneecap's toy
//! tokenizer ([`super::api::count_text_tokens`]): every run of alphanumeric
//! characters is one token per started 6 characters, every other
//! non-whitespace character is one token, whitespace is free. A token-id
//! prompt's tokens are its ids. Each token gets a 64-bit value (its
//! characters folded, or its id), and the prompt's tokens are cut into blocks
//! of [`BLOCK_TOKENS`] (vLLM's default KV block size). The hash of block `i`
//! is a chained hash of *every* token up to the end of that block, so two
//! prompts share block `i`'s hash exactly when their first `16·(i+1)` tokens
//! are equal, which is what makes a KV block reusable. Only full blocks are
//! hashed (a trailing partial block is never shared, as in vLLM). Chat
//! messages also mix their role into the chain (it is not counted as a
//! token), so equal text under different roles does not match.
//!
//! Pure: text in, numbers out.

/// Tokens per KV block (vLLM's default `--block-size`).
pub const BLOCK_TOKENS: u32 = 16;

/// The hashes of a prompt's full blocks of `block_tokens` (a multiple of
/// [`BLOCK_TOKENS`]) from those of its [`BLOCK_TOKENS`]-token blocks: the
/// chain hash at the end of every k-th one, which covers every token up to
/// there, so two prompts share a long block exactly when they share its
/// tokens and every token before them.
pub fn coarser_blocks(blocks: Vec<u64>, block_tokens: u32) -> Vec<u64> {
    let k = (block_tokens / BLOCK_TOKENS).max(1) as usize;
    if k == 1 {
        return blocks;
    }
    blocks.into_iter().skip(k - 1).step_by(k).collect()
}

/// Where the chain starts (an arbitrary constant: "kvblocks" in ASCII).
const CHAIN_SEED: u64 = 0x6b76_626c_6f63_6b73;

/// Counts a prompt's tokens and hashes its full blocks as they go by.
#[derive(Debug, Clone)]
pub struct BlockHasher {
    tokens: u32,
    chain: u64,
    blocks: Vec<u64>,
}

impl Default for BlockHasher {
    fn default() -> Self {
        Self {
            tokens: 0,
            chain: CHAIN_SEED,
            blocks: Vec::new(),
        }
    }
}

impl BlockHasher {
    /// An empty prompt.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds one token whose value is `token`.
    pub fn push_token(&mut self, token: u64) {
        self.chain = splitmix64(self.chain ^ token);
        self.tokens = self.tokens.saturating_add(1);
        if self.tokens % BLOCK_TOKENS == 0 {
            self.blocks.push(self.chain);
        }
    }

    /// Mixes `tag` (e.g. a chat role) into the chain without adding a token.
    pub fn mix(&mut self, tag: &str) {
        self.chain = splitmix64(self.chain ^ fold(tag.chars()).rotate_left(29));
    }

    /// Adds the tokens of `text` (the toy tokenizer, see the module docs).
    pub fn push_text(&mut self, text: &str) {
        let mut run = 0u32;
        let mut word: Option<u64> = None;
        for ch in text.chars() {
            if ch.is_alphanumeric() {
                if run % 6 == 0 {
                    if let Some(w) = word.take() {
                        self.push_token(w);
                    }
                    word = Some(FOLD_SEED);
                }
                run += 1;
                word = word.map(|w| fold_char(w, ch));
            } else {
                run = 0;
                if let Some(w) = word.take() {
                    self.push_token(w);
                }
                if !ch.is_whitespace() {
                    self.push_token(fold_char(FOLD_SEED, ch));
                }
            }
        }
        if let Some(w) = word {
            self.push_token(w);
        }
    }

    /// Tokens so far.
    pub fn tokens(&self) -> u32 {
        self.tokens
    }

    /// The token count and the hashes of the full blocks, in order.
    pub fn finish(self) -> (u32, Vec<u64>) {
        (self.tokens, self.blocks)
    }
}

const FOLD_SEED: u64 = 0xcbf2_9ce4_8422_2325;

fn fold_char(h: u64, ch: char) -> u64 {
    (h ^ u64::from(ch)).wrapping_mul(0x0000_0100_0000_01b3)
}

fn fold(chars: impl Iterator<Item = char>) -> u64 {
    chars.fold(FOLD_SEED, fold_char)
}

/// SplitMix64 finaliser: a fast, well-mixed 64-bit hash.
pub(crate) fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Output length of a request sent without `ignore_eos`: uniform on
/// `1..=max_tokens`, drawn from a SplitMix64 hash of `(seed, request_index)` so
/// the same request gets the same length whatever the arrival order.
pub fn sampled_output_len(seed: u64, request_index: u64, max_tokens: u32) -> u32 {
    if max_tokens <= 1 {
        return 1;
    }
    let h = splitmix64(seed ^ splitmix64(request_index));
    1 + (h % u64::from(max_tokens)) as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::api::count_text_tokens;

    fn text_blocks(text: &str) -> (u32, Vec<u64>) {
        let mut h = BlockHasher::new();
        h.push_text(text);
        h.finish()
    }

    #[test]
    fn counts_tokens_exactly_as_the_toy_tokenizer() {
        for text in [
            "",
            "hello world",
            "Hello, world!",
            "abcdefghijklm",
            "  a  b\n",
            "naïve café — 12345678 tokens; ok?",
        ] {
            assert_eq!(text_blocks(text).0, count_text_tokens(text), "{text:?}");
        }
    }

    #[test]
    fn equal_leading_blocks_hash_equal_and_a_changed_token_changes_every_later_block() {
        let words: Vec<String> = (0..64).map(|i| format!("w{i}")).collect();
        let a = words.join(" ");
        let mut changed = words;
        changed[20] = "zz".into(); // token 21: inside block 1 (tokens 16..32)
        let b = changed.join(" ");
        let (na, ba) = text_blocks(&a);
        let (nb, bb) = text_blocks(&b);
        assert_eq!((na, nb), (64, 64));
        assert_eq!((ba.len(), bb.len()), (4, 4));
        assert_eq!(ba[0], bb[0]);
        assert!(ba[1..].iter().zip(&bb[1..]).all(|(x, y)| x != y));
    }

    #[test]
    fn only_full_blocks_are_hashed() {
        let mut h = BlockHasher::new();
        (0..47).for_each(|i| h.push_token(i));
        assert_eq!(h.finish().1.len(), 2);
    }

    #[test]
    fn a_role_tag_changes_the_chain_but_not_the_count() {
        let mut a = BlockHasher::new();
        let mut b = BlockHasher::new();
        a.mix("user");
        b.mix("system");
        (0..16).for_each(|i| {
            a.push_token(i);
            b.push_token(i);
        });
        let (na, ba) = a.finish();
        let (nb, bb) = b.finish();
        assert_eq!(na, nb);
        assert_ne!(ba, bb);
    }
}

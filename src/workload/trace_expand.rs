//! Trace rows → requests, so a trace's prefix reuse reproduces on the server:
//! each hash id stands for one block of `--timed-trace-chunk-hash-size`
//! tokens, and equal ids expand to identical tokens (and, for text APIs,
//! identical bytes).
//!
//! vLLM's rule for a row: walk its ids in order, each giving `chunk` tokens
//! (or the rest of `input_length` when fewer are left, a block keyed by its id
//! *and* size), until `input_length` tokens are made. A row whose ids cannot
//! cover its `input_length` gets a shorter prompt, as in vLLM; [`Expanded`]
//! counts such rows so the command layer can warn. Rows without ids (the
//! Azure trace) get blocks of their own, shared with no other row.
//!
//! A block's tokens are drawn from the tokenizer's non-special vocabulary (or
//! [`SAFE_TOKEN_IDS`] without one) by an RNG seeded from `--seed`, a `salt`
//! and the block's key, so the same trace and seed always give the same
//! prompts, and a different salt (a sweep's next step) gives prompts with
//! the same sharing structure that share nothing with the last ones.
//! Completions get token ids; chat and the other text APIs get each block
//! decoded (or, without a tokenizer, common English words) and concatenated.
//!
//! Pure: rows, parameters and an optional tokenizer in; no I/O.

use std::collections::HashMap;
use std::sync::Arc;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::random::{COMMON_WORDS, SAFE_TOKEN_IDS};
use super::tokenizer::TokenCounter;
use super::trace::TraceRow;
use super::{Prompt, RequestSpec};

/// How rows become prompts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExpandParams {
    /// Tokens per hash id (vLLM's default 16; Mooncake traces need 512).
    pub chunk_size: u32,
    pub seed: u64,
    /// Mixed into every block's key: a different salt, unrelated prompts.
    pub salt: u64,
    /// Text prompts (every API but `/v1/completions`).
    pub chat: bool,
}

/// Rows whose ids could not cover their `input_length`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShortRows {
    pub rows: usize,
    /// The first such row: its line, the tokens its ids made, the tokens asked for.
    pub first_line: usize,
    pub covered: u32,
    pub wanted: u32,
}

/// The requests of a trace, in row order.
#[derive(Debug, Clone, PartialEq)]
pub struct Expanded {
    pub requests: Vec<RequestSpec>,
    pub short: Option<ShortRows>,
}

/// Which block: a trace's hash id, or block `j` of a row that has none.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum BlockKey {
    Shared(u64),
    Own { line: usize, j: u32 },
}

/// Expand `rows` into requests (see the module docs).
pub fn expand(rows: &[TraceRow], p: &ExpandParams, tokenizer: Option<&TokenCounter>) -> Expanded {
    let mut blocks = Blocks::new(p, tokenizer);
    let mut short: Option<ShortRows> = None;
    let mut requests = Vec::with_capacity(rows.len());
    for (index, row) in rows.iter().enumerate() {
        let keys = block_keys(row, p.chunk_size);
        let covered: u32 = keys.iter().map(|(_, size)| size).sum();
        if covered < row.input_len {
            let s = short.get_or_insert(ShortRows {
                rows: 0,
                first_line: row.line,
                covered,
                wanted: row.input_len,
            });
            s.rows += 1;
        }
        requests.push(RequestSpec {
            index,
            prompt: blocks.prompt(&keys),
            prompt_len: covered,
            output_len: row.output_len,
        });
    }
    Expanded { requests, short }
}

/// The blocks of one row with their sizes, vLLM's walk.
fn block_keys(row: &TraceRow, chunk: u32) -> Vec<(BlockKey, u32)> {
    let chunk = chunk.max(1);
    let mut left = row.input_len;
    let mut out = Vec::new();
    let mut j = 0u32;
    let mut next = || -> Option<BlockKey> {
        let key = match &row.hash_ids {
            Some(ids) => ids.get(j as usize).copied().map(BlockKey::Shared),
            None => Some(BlockKey::Own { line: row.line, j }),
        };
        j += 1;
        key
    };
    while left > 0 {
        let Some(key) = next() else { break };
        let size = chunk.min(left);
        out.push((key, size));
        left -= size;
    }
    out
}

/// Memoized block contents for one expansion.
struct Blocks<'a> {
    p: ExpandParams,
    tokenizer: Option<&'a TokenCounter>,
    vocab: Vec<u32>,
    tokens: HashMap<(BlockKey, u32), Arc<[u32]>>,
    texts: HashMap<(BlockKey, u32), Arc<str>>,
}

impl<'a> Blocks<'a> {
    fn new(p: &ExpandParams, tokenizer: Option<&'a TokenCounter>) -> Self {
        let vocab = match tokenizer {
            Some(t) => (0..t.vocab_size())
                .filter(|id| !t.special_ids().contains(id))
                .collect(),
            None => SAFE_TOKEN_IDS.collect(),
        };
        Self {
            p: *p,
            tokenizer,
            vocab,
            tokens: HashMap::new(),
            texts: HashMap::new(),
        }
    }

    fn prompt(&mut self, keys: &[(BlockKey, u32)]) -> Prompt {
        if self.p.chat {
            let mut text = String::new();
            for &(key, size) in keys {
                let block = self.text(key, size);
                if self.tokenizer.is_none() && !text.is_empty() {
                    text.push(' ');
                }
                text.push_str(&block);
            }
            Prompt::Text(text)
        } else {
            let mut ids = Vec::new();
            for &(key, size) in keys {
                ids.extend_from_slice(&self.tokens(key, size));
            }
            Prompt::Tokens(ids)
        }
    }

    fn tokens(&mut self, key: BlockKey, size: u32) -> Arc<[u32]> {
        let (p, vocab) = (&self.p, &self.vocab);
        self.tokens
            .entry((key, size))
            .or_insert_with(|| {
                let mut rng = StdRng::seed_from_u64(block_seed(p, key, size));
                (0..size)
                    .map(|_| vocab[rng.random_range(0..vocab.len())])
                    .collect()
            })
            .clone()
    }

    fn text(&mut self, key: BlockKey, size: u32) -> Arc<str> {
        if let Some(t) = self.texts.get(&(key, size)) {
            return t.clone();
        }
        let ids = self.tokens(key, size);
        let text: Arc<str> = match self.tokenizer {
            Some(t) => t.decode(&ids).into(),
            None => ids
                .iter()
                .map(|id| COMMON_WORDS[*id as usize % COMMON_WORDS.len()])
                .collect::<Vec<_>>()
                .join(" ")
                .into(),
        };
        self.texts.insert((key, size), text.clone());
        text
    }
}

/// The RNG seed of one block: seed, salt, key and size mixed (SplitMix64
/// finalizer after each part, so nearby ids give unrelated seeds).
fn block_seed(p: &ExpandParams, key: BlockKey, size: u32) -> u64 {
    let (tag, a, b) = match key {
        BlockKey::Shared(id) => (1u64, id, 0u64),
        BlockKey::Own { line, j } => (2u64, line as u64, u64::from(j)),
    };
    [p.seed, p.salt, tag, a, b, u64::from(size)]
        .iter()
        .fold(0x9e37_79b9_7f4a_7c15, |h, x| mix(h ^ x))
}

fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

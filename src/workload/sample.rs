//! What the dataset generators share, below them all: the sampling options
//! of the file-based datasets ([`SampleOptions`]), shuffling and vLLM's
//! oversampling with the dataset's seeded RNG, prompt token counts (a
//! tokenizer's, or an estimate) and text requests. Pure: no I/O.

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::Rng;

use super::tokenizer::TokenCounter;
use super::{Prompt, RequestSpec};

/// The sampling options shared by the file-based datasets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SampleOptions {
    /// How many requests to produce (`custom`: 0 = all rows).
    pub num_prompts: usize,
    /// Keep file order instead of shuffling with the seed.
    pub disable_shuffle: bool,
    /// Return fewer than `num_prompts` requests rather than duplicating samples.
    pub no_oversample: bool,
}

/// Client-side token estimate used when no tokenizer is given: one token per
/// 4 characters (Unicode scalar values), rounded up — the usual rule of thumb
/// for English text with GPT-style BPE tokenizers.
///
/// It is only an estimate (code, numbers and non-Latin scripts tokenize
/// denser); the server's `usage.prompt_tokens` overrides it in the results.
pub fn estimate_tokens(text: &str) -> u32 {
    let chars = text.chars().count();
    u32::try_from(chars.div_ceil(4)).unwrap_or(u32::MAX)
}

/// Tokens in `text` as vLLM counts a dataset prompt: `len(tokenizer(text).input_ids)`,
/// i.e. including the specials the post-processor adds (BOS, …). Without a
/// tokenizer: [`estimate_tokens`].
pub(crate) fn prompt_tokens(text: &str, tokenizer: Option<&TokenCounter>) -> u32 {
    match tokenizer {
        Some(tok) => tok
            .count(text)
            .saturating_add(tok.num_special_tokens_to_add()),
        None => estimate_tokens(text),
    }
}

/// Shuffle with the dataset RNG unless `--disable-shuffle`.
pub(crate) fn maybe_shuffle<T>(items: &mut [T], opts: &SampleOptions, rng: &mut StdRng) {
    if !opts.disable_shuffle {
        items.shuffle(rng);
    }
}

/// Like vLLM: when fewer than `num_prompts` samples were taken, append copies
/// of randomly chosen ones (seeded) until there are `num_prompts`, unless
/// `--no-oversample`. Then number the requests in order.
pub(crate) fn finish(
    mut requests: Vec<RequestSpec>,
    num_prompts: usize,
    no_oversample: bool,
    rng: &mut StdRng,
) -> Vec<RequestSpec> {
    let n_original = requests.len();
    if !no_oversample && n_original > 0 && n_original < num_prompts {
        for _ in n_original..num_prompts {
            let pick = requests[rng.random_range(0..n_original)].clone();
            requests.push(pick);
        }
    }
    for (index, request) in requests.iter_mut().enumerate() {
        request.index = index;
    }
    requests
}

/// A text request (index assigned later by [`finish`]).
pub(crate) fn text_request(prompt: String, prompt_len: u32, output_len: u32) -> RequestSpec {
    RequestSpec {
        index: 0,
        prompt: Prompt::Text(prompt),
        prompt_len,
        output_len,
    }
}

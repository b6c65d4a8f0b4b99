//! The `random` dataset: synthetic prompts of a chosen token length, as
//! `vllm bench serve --dataset-name random` builds them.
//!
//! Pure: takes the parameters, an optional tokenizer and a seeded RNG; no I/O.
//!
//! With a tokenizer the algorithm is vLLM's: lengths drawn uniformly from
//! `[floor((L−n_special)(1−r)), ceil((L−n_special)(1+r))]` (input) and
//! `[max(1, floor(O(1−r))), max(1, ceil(O(1+r)))]` (output); a random offset per
//! request; a run of non-special vocabulary ids after one shared random prefix;
//! then decode → encode, truncating or padding with random ids and retrying up
//! to 10 times until the text re-encodes to the target length (vLLM issue
//! #10847, PRs #17408/#24937). The prompt is sent as text, like vLLM, and
//! `prompt_len` is the length the final text re-encodes to.
//!
//! Without a tokenizer there is no way to know what text makes N tokens, so:
//! completions get token ids (`Prompt::Tokens`, exact length), and chat gets
//! plain English words, about one token each ([`COMMON_WORDS`]).
use std::ops::RangeInclusive;

use anyhow::bail;
use rand::rngs::StdRng;
use rand::Rng;

use super::sample::{finish, text_request};
use super::tokenizer::TokenCounter;
use super::{Prompt, RequestSpec};

/// Retries of the decode → encode adjustment, as in vLLM.
pub const MAX_RETRIES: u32 = 10;

/// Token ids used for prompts when no tokenizer is given (completions only).
///
/// Every common vocabulary has more than 20,000 entries (GPT-2 50,257; Llama 2
/// 32,000; Mistral 32,768; SmolLM2 49,152; Llama 3 128,256; Qwen 151,936), and
/// the first ~1,000 ids are where most of them keep special, control, reserved
/// and byte-fallback tokens; ids in between are ordinary sub-words.
pub const SAFE_TOKEN_IDS: std::ops::Range<u32> = 1_000..20_000;

/// Words for chat prompts without a tokenizer: common English words that are a
/// single token (with their leading space) in GPT-2/Llama-3/SmolLM2-style BPE
/// vocabularies, so N words ≈ N tokens.
#[rustfmt::skip]
pub const COMMON_WORDS: &[&str] = &[
    "the", "of", "and", "to", "in", "is", "that", "for", "it", "as", "was", "with", "be", "by",
    "on", "not", "he", "this", "are", "or", "his", "from", "at", "which", "but", "have", "an",
    "had", "they", "you", "were", "their", "one", "all", "we", "can", "her", "has", "there", "been",
    "if", "more", "when", "will", "would", "who", "so", "no", "time", "people", "water", "house",
    "world", "day", "year", "work", "school", "city", "book", "music", "river", "light", "small",
    "large", "good", "new", "old", "long", "great", "little", "right", "high", "different", "early",
    "young", "important", "public", "open", "green", "red", "blue", "black", "white", "local",
    "short", "hand", "part", "place", "case", "point", "home", "state", "family", "story", "group",
    "country", "problem", "friend", "game", "tree", "road", "table", "window", "garden", "morning",
    "night", "summer", "winter", "make", "take", "see", "know", "think", "look", "want", "give",
    "use", "find", "tell", "ask", "call", "try", "leave", "keep", "help", "start", "show", "play",
    "run", "move", "live", "write", "read", "learn", "change", "follow",
];

/// Parameters of the random dataset (vLLM flag names).
#[derive(Debug, Clone, PartialEq)]
pub struct RandomParams {
    /// `--random-input-len`.
    pub input_len: u32,
    /// `--random-output-len`.
    pub output_len: u32,
    /// `--random-range-ratio` for the input length, in [0, 1).
    pub range_ratio_input: f64,
    /// `--random-range-ratio` for the output length, in [0, 1).
    pub range_ratio_output: f64,
    /// `--random-prefix-len`: tokens of one random prefix shared by all prompts.
    pub prefix_len: u32,
}

/// The generated requests plus how well the decode → encode adjustment did.
#[derive(Debug, Clone, PartialEq)]
pub struct RandomWorkload {
    pub requests: Vec<RequestSpec>,
    /// Prompts whose text does not re-encode to the sampled target length
    /// after [`MAX_RETRIES`] rounds (always 0 without a tokenizer).
    pub n_length_mismatch: usize,
    /// Sum over prompts of (re-encoded length − target length).
    pub total_token_mismatch: i64,
}

/// Input-length range (before the prefix) for `n_special` server-added tokens.
///
/// Computed in `f64` exactly as vLLM does in Python, float quirks included
/// (`ceil(100 × 1.1)` is 111), so both tools draw from the same range.
pub fn input_len_range(params: &RandomParams, n_special: u32) -> RangeInclusive<u32> {
    let real = f64::from(params.input_len.saturating_sub(n_special));
    let r = params.range_ratio_input;
    ((real * (1.0 - r)).floor() as u32)..=((real * (1.0 + r)).ceil() as u32)
}

/// Output-length range (never below 1).
pub fn output_len_range(params: &RandomParams) -> RangeInclusive<u32> {
    let out = f64::from(params.output_len);
    let r = params.range_ratio_output;
    let low = ((out * (1.0 - r)).floor() as u32).max(1);
    let high = ((out * (1.0 + r)).ceil() as u32).max(1);
    low..=high
}

/// Generate `n` random requests. `chat` selects text prompts when there is no
/// tokenizer (with one, prompts are always text).
pub fn generate(
    params: &RandomParams,
    n: usize,
    tokenizer: Option<&TokenCounter>,
    chat: bool,
    rng: &mut StdRng,
) -> anyhow::Result<RandomWorkload> {
    validate(params, tokenizer)?;
    let n_special = tokenizer.map_or(0, TokenCounter::num_special_tokens_to_add);
    let in_range = input_len_range(params, n_special);
    let out_range = output_len_range(params);
    let input_lens: Vec<u32> = (0..n).map(|_| rng.random_range(in_range.clone())).collect();
    let output_lens: Vec<u32> = (0..n)
        .map(|_| rng.random_range(out_range.clone()))
        .collect();
    match tokenizer {
        Some(tok) => with_tokenizer(params, tok, &input_lens, &output_lens, rng),
        None => {
            let requests = if chat {
                word_prompts(params, &input_lens, &output_lens, rng)
            } else {
                token_id_prompts(params, &input_lens, &output_lens, rng)
            };
            Ok(RandomWorkload {
                requests,
                n_length_mismatch: 0,
                total_token_mismatch: 0,
            })
        }
    }
}

fn validate(params: &RandomParams, tokenizer: Option<&TokenCounter>) -> anyhow::Result<()> {
    for (name, r) in [
        ("input", params.range_ratio_input),
        ("output", params.range_ratio_output),
    ] {
        if !(0.0..1.0).contains(&r) {
            bail!("--random-range-ratio ({name}) is {r}; it must be in [0, 1), e.g. 0.1");
        }
    }
    let n_special = tokenizer.map_or(0, TokenCounter::num_special_tokens_to_add);
    let min_input = *input_len_range(params, n_special).start();
    if u64::from(params.prefix_len) + u64::from(min_input) < 1 {
        bail!(
            "--random-input-len {} with --random-range-ratio {} and --random-prefix-len {} can give empty \
             prompts (the tokenizer adds {n_special} special token(s) itself); raise --random-input-len \
             or --random-prefix-len",
            params.input_len,
            params.range_ratio_input,
            params.prefix_len
        );
    }
    Ok(())
}

/// vLLM's algorithm (see the module docs).
fn with_tokenizer(
    params: &RandomParams,
    tok: &TokenCounter,
    input_lens: &[u32],
    output_lens: &[u32],
    rng: &mut StdRng,
) -> anyhow::Result<RandomWorkload> {
    let vocab = tok.vocab_size();
    let allowed = allowed_ids(tok)?;
    let offsets: Vec<usize> = input_lens
        .iter()
        .map(|_| rng.random_range(0..vocab) as usize)
        .collect();
    let prefix: Vec<u32> = (0..params.prefix_len)
        .map(|_| allowed[rng.random_range(0..allowed.len())])
        .collect();
    let mut workload = RandomWorkload {
        requests: Vec::with_capacity(input_lens.len()),
        n_length_mismatch: 0,
        total_token_mismatch: 0,
    };
    for (i, (&input_len, &output_len)) in input_lens.iter().zip(output_lens).enumerate() {
        let mut ids = prefix.clone();
        ids.extend((0..input_len as usize).map(|k| allowed[(offsets[i] + i + k) % allowed.len()]));
        let target = params.prefix_len as usize + input_len as usize;
        let (text, final_len) = decode_to_target_len(tok, ids, target, &allowed, rng);
        if final_len != target {
            workload.n_length_mismatch += 1;
            workload.total_token_mismatch += final_len as i64 - target as i64;
        }
        let prompt_len = u32::try_from(final_len).unwrap_or(u32::MAX);
        workload
            .requests
            .push(text_request(text, prompt_len, output_len));
    }
    workload.requests = finish(workload.requests, 0, true, rng);
    Ok(workload)
}

/// The vocabulary ids random prompts may use: every id but the special ones.
pub(crate) fn allowed_ids(tok: &TokenCounter) -> anyhow::Result<Vec<u32>> {
    let allowed: Vec<u32> = (0..tok.vocab_size())
        .filter(|id| !tok.special_ids().contains(id))
        .collect();
    if allowed.is_empty() {
        bail!(
            "tokenizer '{}' has no non-special tokens to build random prompts from",
            tok.path().display()
        );
    }
    Ok(allowed)
}

/// vLLM's `generate_token_sequence` without a prefix: `len` ids
/// `allowed[(offset + index + k) mod |allowed|]`, then decode → encode
/// adjusted ([`decode_to_target_len`]). Returns the text and the length it
/// re-encodes to.
pub(crate) fn walk_text(
    tok: &TokenCounter,
    allowed: &[u32],
    len: u32,
    offset: usize,
    index: usize,
    rng: &mut StdRng,
) -> (String, u32) {
    let ids: Vec<u32> = (0..len as usize)
        .map(|k| allowed[(offset + index + k) % allowed.len()])
        .collect();
    let (text, n) = decode_to_target_len(tok, ids, len as usize, allowed, rng);
    (text, u32::try_from(n).unwrap_or(u32::MAX))
}

/// `len` random [`COMMON_WORDS`] joined by spaces (a text of about `len`
/// tokens when there is no tokenizer).
pub(crate) fn random_words(len: u32, rng: &mut StdRng) -> String {
    (0..len)
        .map(|_| COMMON_WORDS[rng.random_range(0..COMMON_WORDS.len())])
        .collect::<Vec<_>>()
        .join(" ")
}

/// Decode `ids`, re-encode, and truncate / pad with random allowed ids until the
/// text re-encodes to `target` tokens or [`MAX_RETRIES`] rounds have passed.
/// Returns the text and the length it re-encodes to.
///
/// vLLM pads with ids drawn from the whole vocabulary; we draw from the
/// non-special ones, so no special token can be smuggled into a prompt.
fn decode_to_target_len(
    tok: &TokenCounter,
    mut ids: Vec<u32>,
    target: usize,
    allowed: &[u32],
    rng: &mut StdRng,
) -> (String, usize) {
    let mut retries_left = MAX_RETRIES;
    loop {
        let text = tok.decode(&ids);
        ids = tok.encode(&text);
        if retries_left == 0 || ids.len() == target {
            return (text, ids.len());
        }
        if ids.len() < target {
            let missing = target - ids.len();
            ids.extend((0..missing).map(|_| allowed[rng.random_range(0..allowed.len())]));
        } else {
            ids.truncate(target);
        }
        retries_left -= 1;
    }
}

/// Completions without a tokenizer: random ids from [`SAFE_TOKEN_IDS`] after a
/// shared prefix; `prompt_len` is exact.
fn token_id_prompts(
    params: &RandomParams,
    input_lens: &[u32],
    output_lens: &[u32],
    rng: &mut StdRng,
) -> Vec<RequestSpec> {
    let prefix: Vec<u32> = (0..params.prefix_len)
        .map(|_| rng.random_range(SAFE_TOKEN_IDS))
        .collect();
    let requests = input_lens
        .iter()
        .zip(output_lens)
        .map(|(&input_len, &output_len)| {
            let mut ids = prefix.clone();
            ids.extend((0..input_len).map(|_| rng.random_range(SAFE_TOKEN_IDS)));
            RequestSpec {
                index: 0,
                prompt_len: u32::try_from(ids.len()).unwrap_or(u32::MAX),
                prompt: Prompt::Tokens(ids),
                output_len,
            }
        })
        .collect();
    finish(requests, 0, true, rng)
}

/// Chat without a tokenizer: space-separated [`COMMON_WORDS`] after a shared
/// prefix of words. `prompt_len` is the word count: an approximation (about one
/// token per word; the chat template adds more), which the server's
/// `usage.prompt_tokens` overrides.
fn word_prompts(
    params: &RandomParams,
    input_lens: &[u32],
    output_lens: &[u32],
    rng: &mut StdRng,
) -> Vec<RequestSpec> {
    let pick = |rng: &mut StdRng| COMMON_WORDS[rng.random_range(0..COMMON_WORDS.len())];
    let prefix: Vec<&str> = (0..params.prefix_len).map(|_| pick(rng)).collect();
    let requests = input_lens
        .iter()
        .zip(output_lens)
        .map(|(&input_len, &output_len)| {
            let mut words = prefix.clone();
            words.extend((0..input_len).map(|_| pick(rng)));
            let prompt_len = u32::try_from(words.len()).unwrap_or(u32::MAX);
            text_request(words.join(" "), prompt_len, output_len)
        })
        .collect();
    finish(requests, 0, true, rng)
}

#[cfg(test)]
#[path = "random_tests.rs"]
mod tests;

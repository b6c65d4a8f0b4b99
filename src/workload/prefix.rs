//! The `prefix_repetition` dataset: prompts that share one of a few long
//! prefixes, as `vllm bench serve --dataset-name prefix_repetition` builds
//! them, to exercise a server's prefix cache.
//!
//! `--prefix-repetition-num-prefixes` random prefixes of
//! `--prefix-repetition-prefix-len` tokens; each request is one prefix
//! followed by its own random suffix of `--prefix-repetition-suffix-len`
//! tokens and asks for `--prefix-repetition-output-len` tokens. Each prefix
//! gets `num_prompts / num_prefixes` requests (the remainder goes to the first
//! prefixes, so exactly `num_prompts` come out), then the order is shuffled
//! with the seed (unless `--disable-shuffle`).
//!
//! Prompt forms follow [`super::random`]: with a tokenizer, random non-special
//! ids decoded to text (the prefix is decoded once, so every request with it
//! starts with the same bytes); without one, completions get token ids and
//! chat gets common English words (about one token each).
//!
//! Pure: the parameters, an optional tokenizer and a seeded RNG; no I/O.

use anyhow::bail;
use rand::rngs::StdRng;
use rand::Rng;

use super::random::{COMMON_WORDS, SAFE_TOKEN_IDS};
use super::sample::{finish, maybe_shuffle, text_request, SampleOptions};
use super::tokenizer::TokenCounter;
use super::{Prompt, RequestSpec};

/// `prefix_repetition`'s options (vLLM's defaults: 256, 256, 10, 128).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PrefixParams {
    /// `--prefix-repetition-prefix-len`.
    pub prefix_len: u32,
    /// `--prefix-repetition-suffix-len`.
    pub suffix_len: u32,
    /// `--prefix-repetition-num-prefixes`.
    pub num_prefixes: u32,
    /// `--prefix-repetition-output-len`.
    pub output_len: u32,
}

/// Builds `opts.num_prompts` requests (see the module docs).
pub fn generate(
    params: &PrefixParams,
    opts: &SampleOptions,
    tokenizer: Option<&TokenCounter>,
    chat: bool,
    rng: &mut StdRng,
) -> anyhow::Result<Vec<RequestSpec>> {
    if params.num_prefixes == 0 {
        bail!("--prefix-repetition-num-prefixes must be at least 1");
    }
    if params.prefix_len + params.suffix_len == 0 {
        bail!("--prefix-repetition-prefix-len and --prefix-repetition-suffix-len are both 0: prompts would be empty");
    }
    if params.output_len == 0 {
        bail!("--prefix-repetition-output-len must be at least 1");
    }
    let n = opts.num_prompts;
    let k = params.num_prefixes as usize;
    let mut requests = Vec::with_capacity(n);
    let source = Source::new(tokenizer, chat)?;
    for p in 0..k {
        let count = n / k + usize::from(p < n % k);
        if count == 0 {
            break;
        }
        let prefix = source.draw(params.prefix_len, rng);
        for _ in 0..count {
            let suffix = source.draw(params.suffix_len, rng);
            requests.push(source.request(&prefix, &suffix, params.output_len));
        }
    }
    maybe_shuffle(&mut requests, opts, rng);
    Ok(finish(requests, 0, true, rng))
}

/// Where random tokens come from and how they become a prompt.
enum Source<'a> {
    Tokenizer {
        tok: &'a TokenCounter,
        allowed: Vec<u32>,
    },
    Ids,
    Words,
}

impl<'a> Source<'a> {
    fn new(tokenizer: Option<&'a TokenCounter>, chat: bool) -> anyhow::Result<Self> {
        Ok(match tokenizer {
            Some(tok) => {
                let allowed: Vec<u32> = (0..tok.vocab_size())
                    .filter(|id| !tok.special_ids().contains(id))
                    .collect();
                if allowed.is_empty() {
                    bail!(
                        "tokenizer '{}' has no non-special tokens to build prompts from",
                        tok.path().display()
                    );
                }
                Source::Tokenizer { tok, allowed }
            }
            None if chat => Source::Words,
            None => Source::Ids,
        })
    }

    /// `len` random token ids (word indexes for [`Source::Words`]).
    fn draw(&self, len: u32, rng: &mut StdRng) -> Vec<u32> {
        (0..len)
            .map(|_| match self {
                Source::Tokenizer { allowed, .. } => allowed[rng.random_range(0..allowed.len())],
                Source::Ids => rng.random_range(SAFE_TOKEN_IDS),
                Source::Words => rng.random_range(0..COMMON_WORDS.len() as u32),
            })
            .collect()
    }

    fn request(&self, prefix: &[u32], suffix: &[u32], output_len: u32) -> RequestSpec {
        let len = u32::try_from(prefix.len() + suffix.len()).unwrap_or(u32::MAX);
        match self {
            Source::Tokenizer { tok, .. } => {
                let mut text = tok.decode(prefix);
                text.push_str(&tok.decode(suffix));
                let n = tok.count(&text);
                text_request(text, n, output_len)
            }
            Source::Ids => RequestSpec {
                index: 0,
                prompt: Prompt::Tokens(prefix.iter().chain(suffix).copied().collect()),
                prompt_len: len,
                output_len,
            },
            Source::Words => {
                let words: Vec<&str> = prefix
                    .iter()
                    .chain(suffix)
                    .map(|&i| COMMON_WORDS[i as usize])
                    .collect();
                text_request(words.join(" "), len, output_len)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::dataset::dataset_rng;

    fn opts(n: usize) -> SampleOptions {
        SampleOptions {
            num_prompts: n,
            disable_shuffle: false,
            no_oversample: false,
        }
    }

    fn params() -> PrefixParams {
        PrefixParams {
            prefix_len: 20,
            suffix_len: 5,
            num_prefixes: 3,
            output_len: 7,
        }
    }

    fn ids(r: &RequestSpec) -> &[u32] {
        match &r.prompt {
            Prompt::Tokens(t) => t,
            _ => panic!("expected token ids"),
        }
    }

    #[test]
    fn requests_share_one_of_k_prefixes_and_differ_after_it() {
        let reqs = generate(&params(), &opts(10), None, false, &mut dataset_rng(1)).unwrap();
        assert_eq!(reqs.len(), 10);
        assert!(reqs.iter().all(|r| r.prompt_len == 25 && r.output_len == 7));
        let mut prefixes: Vec<&[u32]> = reqs.iter().map(|r| &ids(r)[..20]).collect();
        prefixes.sort();
        let mut counts: Vec<usize> = prefixes.chunk_by(|a, b| a == b).map(<[_]>::len).collect();
        counts.sort();
        assert_eq!(counts, vec![3, 3, 4]);
        let mut suffixes: Vec<&[u32]> = reqs.iter().map(|r| &ids(r)[20..]).collect();
        suffixes.sort();
        suffixes.dedup();
        assert_eq!(suffixes.len(), 10);
    }

    #[test]
    fn chat_prompts_are_words_with_a_shared_leading_text() {
        let p = PrefixParams {
            num_prefixes: 1,
            ..params()
        };
        let reqs = generate(&p, &opts(4), None, true, &mut dataset_rng(2)).unwrap();
        let texts: Vec<String> = reqs
            .iter()
            .map(|r| match &r.prompt {
                Prompt::Text(t) => t.split(' ').take(20).collect::<Vec<_>>().join(" "),
                _ => panic!("chat needs text"),
            })
            .collect();
        assert!(texts.iter().all(|t| *t == texts[0]));
    }

    #[test]
    fn same_seed_same_prompts_and_zero_prefixes_is_refused() {
        let a = generate(&params(), &opts(6), None, false, &mut dataset_rng(3)).unwrap();
        let b = generate(&params(), &opts(6), None, false, &mut dataset_rng(3)).unwrap();
        assert_eq!(a, b);
        let bad = PrefixParams {
            num_prefixes: 0,
            ..params()
        };
        let err = generate(&bad, &opts(6), None, false, &mut dataset_rng(3)).unwrap_err();
        assert!(err.to_string().contains("--prefix-repetition-num-prefixes"));
    }
}

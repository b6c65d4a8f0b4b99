//! The `random-rerank` dataset and `--random-batch-size`: synthetic inputs
//! for pooling backends, as `vllm bench serve` builds them.
//!
//! `random-rerank` (vLLM's `RandomDatasetForReranking`) makes one query and
//! `--num-prompts` documents, then groups the documents `--random-batch-size`
//! at a time: each request is `[query, doc, doc, ...]` (a rerank request's
//! query and documents; an embeddings request's list of inputs), so there are
//! ceil(N / batch) requests, all with the same query. Lengths, for an input
//! length L (`--random-input-len`) and the tokenizer's n special tokens:
//!
//! - reranker (default): one separator token per pair, so the query's target
//!   is `L/2 − 1` (integer division) and each document's `L − q − 1`, where q
//!   is the query's sampled length; a request's `prompt_len` counts the query
//!   and separator once per document: `(q + 1) × docs + Σ doc`. Every pair is
//!   then about L tokens.
//! - `--no-reranker` (an embedding model scoring pairs): no separator; the
//!   query's target is L and each document's L; the first input of the first
//!   batch is the query, so the run has N − 1 documents in batches of
//!   `batch − 1` (vLLM's arithmetic), and `prompt_len` is `q + Σ doc`.
//!
//! Each target t is drawn uniformly from `[floor((t − n)(1 − r)),
//! ceil((t − n)(1 + r))]` with the input `--random-range-ratio` r (vLLM's
//! `get_sampling_params`). With a tokenizer the texts are vLLM's
//! vocabulary walks (see [`super::random`]); without one, random
//! [`super::random::COMMON_WORDS`], about one token each. Pure, seeded.
use anyhow::{bail, Result};
use rand::rngs::StdRng;
use rand::Rng;

use super::random::{allowed_ids, random_words, walk_text};
use super::tokenizer::TokenCounter;
use super::{Prompt, RequestSpec};

/// `random-rerank`'s options (vLLM flag names).
#[derive(Debug, Clone, PartialEq)]
pub struct RerankParams {
    /// `--random-input-len`: tokens of one query–document pair.
    pub input_len: u32,
    /// The input `--random-range-ratio`, in [0, 1).
    pub range_ratio: f64,
    /// `--random-batch-size`: documents per request (at least 1).
    pub batch_size: usize,
    /// Not `--no-reranker`: a cross-encoder with a separator per pair.
    pub reranker: bool,
}

/// vLLM's length draw for target `t`: uniform on
/// `[floor((t − n)(1 − r)), ceil((t − n)(1 + r))]`.
fn draw(t: u32, n_special: u32, r: f64, rng: &mut StdRng) -> u32 {
    let real = f64::from(t.saturating_sub(n_special));
    let low = (real * (1.0 - r)).floor() as u32;
    let high = (real * (1.0 + r)).ceil() as u32;
    rng.random_range(low..=high.max(low))
}

/// Build the requests (module docs). `num_prompts` counts documents.
pub fn generate(
    p: &RerankParams,
    num_prompts: usize,
    tokenizer: Option<&TokenCounter>,
    rng: &mut StdRng,
) -> Result<Vec<RequestSpec>> {
    let sep = u32::from(p.reranker);
    let n_special = tokenizer.map_or(0, TokenCounter::num_special_tokens_to_add);
    let (mut n_docs, mut batch) = (num_prompts, p.batch_size.max(1));
    let query_target = if p.reranker {
        (p.input_len / 2).saturating_sub(sep)
    } else {
        if n_docs < 2 || batch < 2 {
            bail!(
                "--no-reranker needs --num-prompts and --random-batch-size of at least 2 \
                 (the first input of each request is the query, as in vLLM)"
            );
        }
        n_docs -= 1;
        batch -= 1;
        p.input_len
    };
    let query_len = draw(query_target, n_special, p.range_ratio, rng);
    let doc_target = if p.reranker {
        p.input_len.saturating_sub(query_len).saturating_sub(sep)
    } else {
        p.input_len
    };
    let doc_lens: Vec<u32> = (0..n_docs)
        .map(|_| draw(doc_target, n_special, p.range_ratio, rng))
        .collect();
    let (query, query_len, docs) = match tokenizer {
        Some(tok) => {
            let allowed = allowed_ids(tok)?;
            let vocab = tok.vocab_size().max(1);
            let text = |len: u32, index: usize, rng: &mut StdRng| {
                let offset = rng.random_range(0..vocab) as usize;
                walk_text(tok, &allowed, len, offset, index, rng)
            };
            let (q, q_len) = text(query_len, 0, rng);
            let docs: Vec<(String, u32)> = doc_lens
                .iter()
                .enumerate()
                .map(|(i, &len)| text(len, i + 1, rng))
                .collect();
            (q, q_len, docs)
        }
        None => {
            let q = random_words(query_len, rng);
            let docs = doc_lens
                .iter()
                .map(|&len| (random_words(len, rng), len))
                .collect();
            (q, query_len, docs)
        }
    };
    Ok(docs
        .chunks(batch)
        .enumerate()
        .map(|(index, chunk)| {
            let docs_len: u32 = chunk.iter().map(|(_, n)| *n).sum();
            let query_part = if p.reranker {
                (query_len + sep) * chunk.len() as u32
            } else {
                query_len
            };
            let mut texts = Vec::with_capacity(chunk.len() + 1);
            texts.push(query.clone());
            texts.extend(chunk.iter().map(|(t, _)| t.clone()));
            RequestSpec {
                index,
                prompt: Prompt::Batch(texts),
                prompt_len: query_part + docs_len,
                output_len: 0,
            }
        })
        .collect())
}

/// `--random-batch-size` on the `random` dataset for pooling backends
/// (vLLM: "embedding benchmarks only"): consecutive prompts grouped `batch`
/// at a time into one request whose input is their list; its `prompt_len`
/// is their sum. `batch` 1 leaves the requests as they are.
pub fn batch_prompts(requests: Vec<RequestSpec>, batch: usize) -> Vec<RequestSpec> {
    if batch <= 1 {
        return requests;
    }
    requests
        .chunks(batch)
        .enumerate()
        .map(|(index, chunk)| RequestSpec {
            index,
            prompt: Prompt::Batch(
                chunk
                    .iter()
                    .map(|r| match &r.prompt {
                        Prompt::Text(t) => t.clone(),
                        Prompt::Media(m) => m.text.clone(),
                        Prompt::Batch(ts) => ts.join(" "),
                        Prompt::Chat(ms) => ms
                            .iter()
                            .map(|m| m.content.as_str())
                            .collect::<Vec<_>>()
                            .join(" "),
                        Prompt::Tokens(ids) => {
                            ids.iter().map(u32::to_string).collect::<Vec<_>>().join(" ")
                        }
                    })
                    .collect(),
            ),
            prompt_len: chunk.iter().map(|r| r.prompt_len).sum(),
            output_len: chunk.first().map_or(0, |r| r.output_len),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::dataset::dataset_rng;

    fn params(input_len: u32, batch_size: usize, reranker: bool) -> RerankParams {
        RerankParams {
            input_len,
            range_ratio: 0.0,
            batch_size,
            reranker,
        }
    }

    fn texts(r: &RequestSpec) -> &[String] {
        match &r.prompt {
            Prompt::Batch(t) => t,
            other => panic!("not a batch: {other:?}"),
        }
    }

    fn words(s: &str) -> u32 {
        s.split(' ').count() as u32
    }

    #[test]
    fn reranker_pairs_are_input_len_tokens_with_one_separator() {
        // L = 100: query 100/2 − 1 = 49 tokens, documents 100 − 49 − 1 = 50;
        // 10 documents in batches of 4 → 3 requests of 4, 4 and 2 documents;
        // prompt_len = (49 + 1) × docs + 50 × docs = 100 × docs.
        let reqs = generate(&params(100, 4, true), 10, None, &mut dataset_rng(0)).unwrap();
        assert_eq!(reqs.len(), 3);
        let docs: Vec<usize> = reqs.iter().map(|r| texts(r).len() - 1).collect();
        assert_eq!(docs, [4, 4, 2]);
        let lens: Vec<u32> = reqs.iter().map(|r| r.prompt_len).collect();
        assert_eq!(lens, [400, 400, 200]);
        let query = &texts(&reqs[0])[0];
        assert_eq!(words(query), 49);
        assert!(
            reqs.iter().all(|r| &texts(r)[0] == query),
            "one shared query"
        );
        assert!(reqs
            .iter()
            .all(|r| texts(r)[1..].iter().all(|d| words(d) == 50)));
        assert_eq!(reqs.iter().map(|r| r.index).collect::<Vec<_>>(), [0, 1, 2]);
        assert!(reqs.iter().all(|r| r.output_len == 0));
    }

    #[test]
    fn odd_input_len_and_batch_one() {
        // L = 7: query 7/2 − 1 = 2, documents 7 − 2 − 1 = 4; batch 1 → one
        // request per document, prompt_len (2 + 1) + 4 = 7.
        let reqs = generate(&params(7, 1, true), 3, None, &mut dataset_rng(1)).unwrap();
        assert_eq!(reqs.len(), 3);
        assert!(reqs
            .iter()
            .all(|r| r.prompt_len == 7 && texts(r).len() == 2));
    }

    #[test]
    fn no_reranker_takes_one_input_for_the_query() {
        // --no-reranker, L = 16, N = 7, batch 3: query 16, N − 1 = 6
        // documents of 16 in batches of 3 − 1 = 2 → 3 requests of
        // [query, doc, doc], prompt_len 16 + 2 × 16 = 48.
        let reqs = generate(&params(16, 3, false), 7, None, &mut dataset_rng(2)).unwrap();
        assert_eq!(reqs.len(), 3);
        assert!(reqs
            .iter()
            .all(|r| texts(r).len() == 3 && r.prompt_len == 48));
        let e = generate(&params(16, 1, false), 7, None, &mut dataset_rng(2)).unwrap_err();
        assert!(e.to_string().contains("--random-batch-size"), "{e}");
    }

    #[test]
    fn range_ratio_bounds_the_lengths() {
        // r = 0.5, L = 40: query target 19 → [9, 29]; each document's target
        // is 40 − q − 1 ≥ 10 → within [floor(0.5 t), ceil(1.5 t)].
        let p = RerankParams {
            range_ratio: 0.5,
            ..params(40, 1, true)
        };
        let reqs = generate(&p, 50, None, &mut dataset_rng(3)).unwrap();
        let q = words(&texts(&reqs[0])[0]);
        assert!((9..=29).contains(&q), "{q}");
        let t = 40 - q - 1;
        for r in &reqs {
            let d = words(&texts(r)[1]);
            assert!(d >= t / 2 && d <= (t * 3).div_ceil(2), "{d} for target {t}");
            assert_eq!(r.prompt_len, q + 1 + d);
        }
    }

    #[test]
    fn batching_groups_prompts_and_sums_their_lengths() {
        let reqs: Vec<RequestSpec> = (0..5)
            .map(|i| RequestSpec {
                index: i,
                prompt: Prompt::Text(format!("p{i}")),
                prompt_len: 10 + i as u32,
                output_len: 8,
            })
            .collect();
        let b = batch_prompts(reqs.clone(), 2);
        assert_eq!(b.len(), 3);
        assert_eq!(texts(&b[0]), ["p0", "p1"]);
        assert_eq!(texts(&b[2]), ["p4"]);
        assert_eq!(
            b.iter().map(|r| r.prompt_len).collect::<Vec<_>>(),
            [21, 25, 14]
        );
        assert_eq!(batch_prompts(reqs.clone(), 1), reqs);
    }
}

//! Workload: what each request asks for (prompt, expected lengths), built from a dataset
//! (random, random-mm, random-rerank, ShareGPT, BurstGPT, custom, prefix_repetition,
//! timed_trace, sonnet, hf),
//! and the multi-turn sessions built from them ([`session`]).
//!
//! Owns [`RequestSpec`] and the dataset generators. No network I/O here; file
//! reading happens only in [`dataset::load`] at the edge.

pub mod burstgpt;
pub mod custom;
pub mod custom_images;
pub mod dataset;
pub mod hf;
pub mod hf_edit;
pub mod hf_files;
pub mod jpeg_stripes;
pub mod media;
pub mod mt19937;
pub mod prefix;
pub mod random;
pub mod random_mm;
pub mod random_mm_flags;
pub mod rerank;
pub mod sample;
pub mod session;
pub mod session_files;
pub mod sharegpt;
pub mod sonnet;
pub mod tokenizer;
pub mod trace;
pub mod trace_expand;

/// The prompt of one request, as it goes on the wire.
#[derive(Debug, Clone, PartialEq)]
pub enum Prompt {
    /// Plain text (completions `prompt` string, or chat user message content).
    Text(String),
    /// Token ids (completions only: `prompt: [ids]`).
    Tokens(Vec<u32>),
    /// Several texts in one request (pooling backends): a batched embeddings
    /// or pooling `input` (`--random-batch-size`), or a rerank query followed
    /// by its documents (`random-rerank`).
    Batch(Vec<String>),
    /// A conversation (chat only): every message of a session so far, the
    /// server's earlier answers included (see [`session`]).
    Chat(Vec<session::ChatMessage>),
    /// A text with images after it (chat only: random-mm, custom rows with
    /// `images`); see [`media`].
    Media(media::MediaPrompt),
}

/// One request of the workload. `index` is its position in the dataset order.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestSpec {
    pub index: usize,
    pub prompt: Prompt,
    /// Expected prompt tokens as counted by the client (0 when unknown); the
    /// server's `usage.prompt_tokens` overrides it, as vLLM does.
    pub prompt_len: u32,
    /// `max_tokens` / `max_completion_tokens` to request.
    pub output_len: u32,
}

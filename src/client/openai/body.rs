//! Request bodies in vLLM `bench serve`'s exact shape (key order, `max_tokens`
//! vs `max_completion_tokens`, `stream_options`, `--extra-body` merged last).
//! Serialized straight from borrowed parts, so a long prompt is never copied
//! before it is encoded. Sans-IO.

use serde::ser::{SerializeMap, Serializer};
use serde::Serialize;
use serde_json::Value;
use std::borrow::Cow;

use super::Api;
use crate::workload::media::{ImageUrl, MediaPrompt};
use crate::workload::session::ChatMessage;
use crate::workload::Prompt;

/// Per-run body settings (everything but prompt and length).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct BodyOptions {
    /// `model`: the served model name.
    pub model: String,
    /// Send `ignore_eos: true` (vLLM extension; exact output lengths).
    pub ignore_eos: bool,
    /// Sampling keys given on the command line, already as JSON values
    /// (temperature, top_p, top_k, min_p, frequency_penalty, presence_penalty,
    /// repetition_penalty), in that order; only the ones the user set.
    pub sampling: Vec<(String, serde_json::Value)>,
    /// `--logprobs` (completions sends `logprobs: null` when absent).
    pub logprobs: Option<u32>,
    /// `--extra-body`, merged last (wins over everything). A `null` value
    /// removes the key instead (see [`request_body`]).
    pub extra_body: Option<serde_json::Map<String, serde_json::Value>>,
    /// `--lora-modules`: each request's `model` becomes one of these adapters.
    pub lora: Option<LoraPlan>,
}

/// vLLM's `--lora-modules` with `--lora-assignment`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LoraPlan {
    /// Adapter names (at least one).
    pub names: Vec<String>,
    /// `round-robin`: request k gets `names[k % n]`; otherwise a seeded
    /// random choice per request (vLLM's default, `random`).
    pub round_robin: bool,
    /// Seed of the random choice (`--seed`).
    pub seed: u64,
}

impl LoraPlan {
    /// The adapter for request `index` (pure: the same seed gives the same choice).
    pub fn name_for(&self, index: usize) -> &str {
        let n = self.names.len().max(1);
        let k = if self.round_robin {
            index % n
        } else {
            (splitmix64(self.seed ^ (index as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)) % n as u64)
                as usize
        };
        self.names.get(k).map_or("", String::as_str)
    }
}

/// SplitMix64's finalizer: a well-mixed 64-bit hash of `x`.
fn splitmix64(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// Serialize the streaming request body for one request.
///
/// Keys and their order follow vLLM's client (reference §5.1, §5.2):
///
/// - completions: `model`, `prompt`, `repetition_penalty: 1.0`, `max_tokens`,
///   `logprobs`, `stream`, `stream_options`, `ignore_eos` (only when set);
/// - chat: `model`, `messages` (one user message whose content is one text
///   part, then one `image_url` part per image of a [`Prompt::Media`]),
///   `max_completion_tokens`, `stream`, `stream_options`, `ignore_eos`
///   (only when set);
///
/// then the sampling keys, then `extra_body`. A key that is already present is
/// replaced where it stands (as Python's `dict.update` does), so a sampling
/// `repetition_penalty` replaces the default and `extra_body` wins over all.
///
/// One deliberate difference: an `extra_body` value of `null` *removes* the
/// key, where vLLM would send `null`. OpenAI-compatible servers read `null` as
/// "not set" anyway, and this is the switch vLLM lacks for gateways that
/// reject `stream_options` outright (reference §7.3 item 20):
/// `--extra-body '{"stream_options": null}'`.
///
/// A [`Prompt::Tokens`] on chat (the workload should never produce one) is sent
/// as its ids joined by single spaces, as text.
pub fn request_body(api: Api, opts: &BodyOptions, prompt: &Prompt, max_tokens: u32) -> Vec<u8> {
    request_body_for(api, opts, prompt, max_tokens, 0)
}

/// [`request_body`] for request number `index`, whose `model` is its LoRA
/// adapter when `--lora-modules` is given.
pub fn request_body_for(
    api: Api,
    opts: &BodyOptions,
    prompt: &Prompt,
    max_tokens: u32,
    index: usize,
) -> Vec<u8> {
    let chat_text: Cow<'_, str>;
    let mut fields: Vec<(&str, Field<'_>)> = Vec::with_capacity(
        9 + opts.sampling.len() + opts.extra_body.as_ref().map_or(0, |m| m.len()),
    );
    let model = match &opts.lora {
        Some(plan) if !plan.names.is_empty() => plan.name_for(index),
        _ => opts.model.as_str(),
    };
    fields.push(("model", Field::Str(model)));
    if api.is_pooling() {
        return pooling_body(api, opts, prompt, fields);
    }
    match api {
        Api::Completions => {
            fields.push(("prompt", prompt_field(prompt)));
            fields.push(("repetition_penalty", Field::F64(1.0)));
            fields.push(("max_tokens", Field::U32(max_tokens)));
            fields.push(("logprobs", Field::OptU32(opts.logprobs)));
        }
        Api::Chat => {
            if let Prompt::Chat(messages) = prompt {
                fields.push(("messages", Field::Messages(messages)));
            } else if let Prompt::Media(media) = prompt {
                fields.push(("messages", Field::MediaMessage(media)));
            } else {
                chat_text = prompt_text(prompt);
                fields.push(("messages", Field::UserMessage(chat_text.as_ref())));
            }
            fields.push(("max_completion_tokens", Field::U32(max_tokens)));
        }
        Api::Responses => {
            chat_text = prompt_text(prompt);
            let text = chat_text.as_ref();
            fields.push(("input", Field::Str(text)));
            fields.push(("max_output_tokens", Field::U32(max_tokens)));
            fields.push(("stream", Field::Bool(true)));
            // vLLM's client: a stored response would grow the server's heap.
            fields.push(("store", Field::Bool(false)));
        }
        Api::Embeddings | Api::Rerank | Api::Pooling => {}
    }
    if api != Api::Responses {
        // The Responses API has no stream_options: usage comes with response.completed.
        fields.push(("stream", Field::Bool(true)));
        fields.push(("stream_options", Field::IncludeUsage));
    }
    if opts.ignore_eos {
        fields.push(("ignore_eos", Field::Bool(true)));
    }
    for (key, value) in &opts.sampling {
        upsert(&mut fields, key, Field::Json(value));
    }
    merge_extra_body(&mut fields, opts);
    encode(&fields)
}

/// `--extra-body`, merged last: a key already present is replaced where it
/// stands, a `null` value removes the key.
fn merge_extra_body<'a>(fields: &mut Vec<(&'a str, Field<'a>)>, opts: &'a BodyOptions) {
    if let Some(extra) = &opts.extra_body {
        for (key, value) in extra {
            if value.is_null() {
                fields.retain(|(k, _)| k != key);
            } else {
                upsert(fields, key, Field::Json(value));
            }
        }
    }
}

fn encode(fields: &[(&str, Field<'_>)]) -> Vec<u8> {
    // Cannot fail: string keys only, and none of the values has a fallible
    // `Serialize` (a `serde_json::Value` holds no NaN or infinity).
    serde_json::to_vec(&Body(fields)).unwrap_or_default()
}

/// The body of a pooling request, keys in vLLM's order (its
/// `endpoint_request_func.py`): `truncate_prompt_tokens: -1` always (vLLM:
/// "many embedding models have short context length"); no sampling keys.
///
/// - embeddings: `model`, `input`, `truncate_prompt_tokens`, `ignore_eos`
///   (only when set), then `--extra-body`;
/// - pooling: `model`, `truncate_prompt_tokens`, `input`, `ignore_eos`, then
///   `--extra-body`;
/// - rerank: `model`, `query` (the prompt's first text), `documents` (the
///   rest), `truncate_prompt_tokens`. vLLM merges neither `ignore_eos` nor
///   `--extra-body` into a rerank body, and neither does kneecap.
fn pooling_body<'a>(
    api: Api,
    opts: &'a BodyOptions,
    prompt: &'a Prompt,
    mut fields: Vec<(&'a str, Field<'a>)>,
) -> Vec<u8> {
    match api {
        Api::Rerank => {
            let (query, documents): (&str, &[String]) = match prompt {
                Prompt::Batch(texts) => match texts.split_first() {
                    Some((q, docs)) => (q.as_str(), docs),
                    None => ("", &[]),
                },
                Prompt::Text(text) => (text.as_str(), &[]),
                Prompt::Media(m) => (m.text.as_str(), &[]),
                Prompt::Tokens(_) | Prompt::Chat(_) => ("", &[]),
            };
            fields.push(("query", Field::Str(query)));
            fields.push(("documents", Field::Texts(documents)));
            fields.push(("truncate_prompt_tokens", Field::I64(-1)));
            return encode(&fields);
        }
        Api::Pooling => {
            fields.push(("truncate_prompt_tokens", Field::I64(-1)));
            fields.push(("input", prompt_field(prompt)));
        }
        _ => {
            fields.push(("input", prompt_field(prompt)));
            fields.push(("truncate_prompt_tokens", Field::I64(-1)));
        }
    }
    if opts.ignore_eos {
        fields.push(("ignore_eos", Field::Bool(true)));
    }
    merge_extra_body(&mut fields, opts);
    encode(&fields)
}

/// A prompt as a JSON value: a string, a list of ids, or a list of strings
/// (a media prompt's images go only into chat messages).
fn prompt_field(prompt: &Prompt) -> Field<'_> {
    match prompt {
        Prompt::Text(text) => Field::Str(text),
        Prompt::Media(m) => Field::Str(&m.text),
        Prompt::Chat(messages) => Field::Joined(messages),
        Prompt::Tokens(ids) => Field::Tokens(ids),
        Prompt::Batch(texts) => Field::Texts(texts),
    }
}

/// A prompt as one text (chat and Responses take a single message).
fn prompt_text(prompt: &Prompt) -> Cow<'_, str> {
    match prompt {
        Prompt::Text(text) => Cow::Borrowed(text),
        Prompt::Media(m) => Cow::Borrowed(&m.text),
        Prompt::Tokens(ids) => Cow::Owned(join_ids(ids)),
        Prompt::Batch(texts) => Cow::Owned(texts.join("\n")),
        Prompt::Chat(messages) => Cow::Owned(joined(messages)),
    }
}

/// How many inputs a request carries (vLLM's `num_input_sequences`): the
/// documents of a rerank request, the list length of a batched pooling
/// input, else 1.
pub fn input_sequences(api: Api, prompt: &Prompt) -> u32 {
    let n = match prompt {
        Prompt::Batch(texts) if api == Api::Rerank => texts.len().saturating_sub(1),
        Prompt::Batch(texts) => texts.len(),
        Prompt::Text(_) | Prompt::Tokens(_) | Prompt::Chat(_) | Prompt::Media(_) => 1,
    };
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// Replace `key`'s value in place, or append it.
fn upsert<'a>(fields: &mut Vec<(&'a str, Field<'a>)>, key: &'a str, value: Field<'a>) {
    match fields.iter_mut().find(|(k, _)| *k == key) {
        Some(slot) => slot.1 = value,
        None => fields.push((key, value)),
    }
}

/// Token ids as text, for the (unexpected) token prompt on chat.
fn join_ids(ids: &[u32]) -> String {
    let mut out = String::with_capacity(ids.len() * 6);
    for (i, id) in ids.iter().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        out.push_str(&id.to_string());
    }
    out
}

/// An ordered JSON object of borrowed values.
struct Body<'a>(&'a [(&'a str, Field<'a>)]);

/// One body value, borrowed from the options or the prompt.
enum Field<'a> {
    Str(&'a str),
    Tokens(&'a [u32]),
    Texts(&'a [String]),
    I64(i64),
    U32(u32),
    OptU32(Option<u32>),
    F64(f64),
    Bool(bool),
    /// `{"include_usage": true}`.
    IncludeUsage,
    /// `[{"role":"user","content":[{"type":"text","text": ..}]}]`.
    UserMessage(&'a str),
    /// The same, then `{"type":"image_url","image_url":{"url": ..}}` per image.
    MediaMessage(&'a MediaPrompt),
    /// A session's history: `[{"role": .., "content": ..}, ..]`.
    Messages(&'a [ChatMessage]),
    /// A session's history as one text (a non-chat API).
    Joined(&'a [ChatMessage]),
    Json(&'a Value),
}

impl Serialize for Body<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (key, value) in self.0 {
            map.serialize_entry(key, value)?;
        }
        map.end()
    }
}

impl Serialize for Field<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Field::Str(s) => serializer.serialize_str(s),
            Field::Tokens(ids) => ids.serialize(serializer),
            Field::Texts(texts) => texts.serialize(serializer),
            Field::I64(n) => serializer.serialize_i64(*n),
            Field::U32(n) => serializer.serialize_u32(*n),
            Field::OptU32(n) => n.serialize(serializer),
            Field::F64(x) => serializer.serialize_f64(*x),
            Field::Bool(b) => serializer.serialize_bool(*b),
            Field::IncludeUsage => {
                let mut map = serializer.serialize_map(Some(1))?;
                map.serialize_entry("include_usage", &true)?;
                map.end()
            }
            Field::UserMessage(text) => [Message {
                role: "user",
                content: [TextPart { kind: "text", text }],
            }]
            .serialize(serializer),
            Field::MediaMessage(media) => [MediaMessage {
                role: "user",
                content: MediaParts(media),
            }]
            .serialize(serializer),
            Field::Messages(messages) => {
                serializer.collect_seq(messages.iter().map(|m| PlainMessage {
                    role: m.role.as_str(),
                    content: &m.content,
                }))
            }
            Field::Joined(messages) => serializer.serialize_str(&joined(messages)),
            Field::Json(value) => value.serialize(serializer),
        }
    }
}

/// A chat message with one content part.
#[derive(Serialize)]
struct Message<'a> {
    role: &'static str,
    content: [TextPart<'a>; 1],
}

/// A chat message whose content is a text part and image parts.
#[derive(Serialize)]
struct MediaMessage<'a> {
    role: &'static str,
    content: MediaParts<'a>,
}

/// The text part, then one image part per image.
struct MediaParts<'a>(&'a MediaPrompt);

impl Serialize for MediaParts<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        let mut seq = serializer.serialize_seq(Some(1 + self.0.images.len()))?;
        seq.serialize_element(&TextPart {
            kind: "text",
            text: &self.0.text,
        })?;
        for url in &self.0.images {
            seq.serialize_element(&ImagePart {
                kind: "image_url",
                image_url: UrlField { url },
            })?;
        }
        seq.end()
    }
}

/// A `{"type":"image_url","image_url":{"url":..}}` content part.
#[derive(Serialize)]
struct ImagePart<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    image_url: UrlField<'a>,
}

/// `{"url": ..}`, written piece by piece (no copy of the image).
struct UrlField<'a> {
    url: &'a ImageUrl,
}

impl Serialize for UrlField<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        struct Url<'a>(&'a ImageUrl);
        impl Serialize for Url<'_> {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.collect_str(self.0)
            }
        }
        let mut map = serializer.serialize_map(Some(1))?;
        map.serialize_entry("url", &Url(self.url))?;
        map.end()
    }
}

/// A chat message whose content is a plain string.
#[derive(Serialize)]
struct PlainMessage<'a> {
    role: &'static str,
    content: &'a str,
}

/// A conversation's contents, one message a line.
fn joined(messages: &[ChatMessage]) -> String {
    let parts: Vec<&str> = messages.iter().map(|m| m.content.as_str()).collect();
    parts.join("\n")
}

/// A `{"type":"text","text":..}` content part.
#[derive(Serialize)]
struct TextPart<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    text: &'a str,
}

#[cfg(test)]
#[path = "body_media_tests.rs"]
mod media_tests;

//! The OpenAI-compatible wire format of the simulator: request parsing and
//! validation, the toy tokenizer, and the JSON bodies of responses and SSE chunks.
//!
//! Pure: bytes and values in, strings out; no clock, no I/O. Chunks follow
//! what vLLM sends (key order included); unknown request fields are ignored.

use serde_json::Value;

use super::api_error::ApiError;
use super::blocks::BlockHasher;
use super::images::ImageCharge;

/// Which endpoint a request came in on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    /// `POST /v1/completions`.
    Completions,
    /// `POST /v1/chat/completions`.
    Chat,
    /// `POST /v1/responses` (OpenAI Responses API; see [`super::responses`]).
    Responses,
}

/// Which delta field carries a chat stream's reasoning text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ReasoningField {
    /// `delta.reasoning`: vLLM since its `reasoning_content` → `reasoning`
    /// rename (vLLM PR #27752; the old name was removed in PR #33402).
    #[default]
    Reasoning,
    /// `delta.reasoning_content`: DeepSeek's API, llama.cpp's `llama-server`.
    ReasoningContent,
}

impl ReasoningField {
    /// The JSON key.
    pub fn key(self) -> &'static str {
        match self {
            ReasoningField::Reasoning => "reasoning",
            ReasoningField::ReasoningContent => "reasoning_content",
        }
    }
}

/// A validated generation request.
#[derive(Debug, Clone, PartialEq)]
pub struct GenRequest {
    /// The endpoint it came in on.
    pub endpoint: Endpoint,
    /// Prompt length in tokens (token-id list length, or [`count_text_tokens`]).
    pub prompt_tokens: u32,
    /// Chained hashes of the prompt's full KV blocks (see [`super::blocks`]).
    pub prompt_blocks: Vec<u64>,
    /// `max_tokens` (or chat `max_completion_tokens`).
    pub max_tokens: u32,
    /// `stream`.
    pub stream: bool,
    /// `stream_options.include_usage`.
    pub include_usage: bool,
    /// `ignore_eos`: produce exactly `max_tokens`.
    pub ignore_eos: bool,
    /// Images in the messages and the prompt tokens they count for
    /// (included in `prompt_tokens`; see [`super::images`]).
    pub images: ImageCharge,
}

/// Counts tokens in `text` with kneecap's toy tokenizer: every run of
/// alphanumeric characters is one token per started 6 characters, every other
/// non-whitespace character is one token, whitespace is free. Close to real
/// BPE counts for English prose (~1.3 tokens per word), no vocabulary needed.
pub fn count_text_tokens(text: &str) -> u32 {
    let mut n = 0u32;
    let mut run = 0u32;
    for ch in text.chars() {
        if ch.is_alphanumeric() {
            if run % 6 == 0 {
                n = n.saturating_add(1);
            }
            run += 1;
        } else {
            run = 0;
            if !ch.is_whitespace() {
                n = n.saturating_add(1);
            }
        }
    }
    n
}

/// Parses and validates a request body; `max_model_len` bounds prompt + output.
pub fn parse_request(
    endpoint: Endpoint,
    body: &[u8],
    max_model_len: u32,
) -> Result<GenRequest, ApiError> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("invalid JSON body: {e}")))?;
    let Some(obj) = value.as_object() else {
        return Err(ApiError::bad_request("request body must be a JSON object"));
    };
    let mut hasher = BlockHasher::new();
    let mut images = ImageCharge::default();
    match endpoint {
        Endpoint::Completions => completion_prompt_tokens(obj.get("prompt"), &mut hasher)?,
        Endpoint::Chat => chat_prompt_tokens(obj.get("messages"), &mut hasher, &mut images)?,
        Endpoint::Responses => match obj.get("input") {
            Some(Value::String(s)) => hasher.push_text(s),
            Some(items @ Value::Array(_)) => {
                chat_prompt_tokens(Some(items), &mut hasher, &mut images)?
            }
            _ => {
                return Err(ApiError::bad_request(
                    "missing field `input` (a string or a list of messages)",
                ))
            }
        },
    }
    let (prompt_tokens, prompt_blocks) = hasher.finish();
    if prompt_tokens == 0 {
        return Err(ApiError::bad_request("the prompt is empty"));
    }
    if prompt_tokens >= max_model_len {
        return Err(ApiError::bad_request(format!(
            "This model's maximum context length is {max_model_len} tokens. However, your request has {prompt_tokens} input tokens."
        )));
    }
    let max_field = match endpoint {
        Endpoint::Chat if obj.contains_key("max_completion_tokens") => "max_completion_tokens",
        Endpoint::Responses => "max_output_tokens",
        _ => "max_tokens",
    };
    let max_tokens = match obj.get(max_field) {
        None | Some(Value::Null) => match endpoint {
            Endpoint::Completions => 16.min(max_model_len - prompt_tokens),
            Endpoint::Chat | Endpoint::Responses => max_model_len - prompt_tokens,
        },
        Some(v) => positive_u32(v, max_field)?,
    };
    if u64::from(prompt_tokens) + u64::from(max_tokens) > u64::from(max_model_len) {
        return Err(ApiError::bad_request(format!(
            "This model's maximum context length is {max_model_len} tokens. However, you requested {} tokens ({prompt_tokens} in the messages, {max_tokens} in the completion). Please reduce the length of the messages or completion.",
            u64::from(prompt_tokens) + u64::from(max_tokens)
        )));
    }
    let flag = |key: &str| match obj.get(key) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(other) => Err(ApiError::bad_request(format!(
            "`{key}` must be a boolean, got {other}"
        ))),
    };
    // The Responses API always reports usage (in `response.completed`).
    let include_usage = endpoint == Endpoint::Responses
        || obj
            .get("stream_options")
            .and_then(|o| o.get("include_usage"))
            .and_then(Value::as_bool)
            .unwrap_or(false);
    Ok(GenRequest {
        endpoint,
        prompt_tokens,
        prompt_blocks,
        max_tokens,
        stream: flag("stream")?,
        include_usage,
        ignore_eos: flag("ignore_eos")?,
        images,
    })
}

fn positive_u32(v: &Value, field: &str) -> Result<u32, ApiError> {
    match v.as_u64() {
        Some(n) if n >= 1 => u32::try_from(n)
            .map_err(|_| ApiError::bad_request(format!("{field} is too large: {n}"))),
        _ => Err(ApiError::bad_request(format!(
            "{field} must be a positive integer, got {v}"
        ))),
    }
}

/// `prompt`: a string, a token-id list, or a one-element list of either.
fn completion_prompt_tokens(prompt: Option<&Value>, h: &mut BlockHasher) -> Result<(), ApiError> {
    match prompt {
        None | Some(Value::Null) => Err(ApiError::bad_request("missing field `prompt`")),
        Some(Value::String(s)) => {
            h.push_text(s);
            Ok(())
        }
        Some(Value::Array(items)) => {
            if items.iter().all(Value::is_u64) {
                if u32::try_from(items.len()).is_err() {
                    return Err(ApiError::bad_request("the prompt is too long"));
                }
                items
                    .iter()
                    .filter_map(Value::as_u64)
                    .for_each(|id| h.push_token(id));
                return Ok(());
            }
            match items.as_slice() {
                [one @ (Value::String(_) | Value::Array(_))] => {
                    completion_prompt_tokens(Some(one), h)
                }
                _ => Err(ApiError::bad_request(
                    "`prompt` must be a string, a list of token ids, or a single-element batch",
                )),
            }
        }
        Some(other) => Err(ApiError::bad_request(format!(
            "`prompt` must be a string or a list of token ids, got {other}"
        ))),
    }
}

/// `messages`: a non-empty list; `content` a string or a list of parts whose
/// `text` parts are counted, and `image_url` parts charged into `images`
/// (other parts count nothing).
fn chat_prompt_tokens(
    messages: Option<&Value>,
    h: &mut BlockHasher,
    images: &mut ImageCharge,
) -> Result<(), ApiError> {
    let Some(Value::Array(messages)) = messages else {
        return Err(ApiError::bad_request(
            "missing field `messages` (a list of {role, content})",
        ));
    };
    if messages.is_empty() {
        return Err(ApiError::bad_request("`messages` must not be empty"));
    }
    for m in messages {
        h.mix(m.get("role").and_then(Value::as_str).unwrap_or(""));
        match m.get("content") {
            Some(Value::String(s)) => h.push_text(s),
            Some(Value::Array(parts)) => {
                for p in parts {
                    if p.get("type").and_then(Value::as_str) == Some("image_url") {
                        images.add_part(p, h)?;
                    } else if let Some(t) = p.get("text").and_then(Value::as_str) {
                        h.push_text(t);
                    }
                }
            }
            None | Some(Value::Null) => {}
            Some(other) => {
                return Err(ApiError::bad_request(format!(
                    "message `content` must be a string or a list of parts, got {other}"
                )))
            }
        }
    }
    Ok(())
}

/// Text of output token `index` (1-based): a short word with a leading space.
pub fn token_text(index: u32) -> &'static str {
    const WORDS: [&str; 8] = [
        " tok", " sim", " the", " knee", " of", " a", " batch", " token",
    ];
    WORDS[(index as usize).wrapping_sub(1) % WORDS.len()]
}

/// The fields every chunk or response of one request shares.
#[derive(Debug, Clone)]
pub struct ResponseIds {
    /// The endpoint.
    pub endpoint: Endpoint,
    /// `cmpl-…` / `chatcmpl-…` / `resp_…`.
    pub id: String,
    /// Unix seconds.
    pub created: u64,
    /// The served model name, already JSON-escaped with its quotes.
    pub model_json: String,
}

impl ResponseIds {
    /// Ids for request number `n`.
    pub fn new(endpoint: Endpoint, n: u64, created: u64, model: &str) -> Self {
        let prefix = match endpoint {
            Endpoint::Completions => "cmpl-",
            Endpoint::Chat => "chatcmpl-",
            Endpoint::Responses => "resp_",
        };
        Self {
            endpoint,
            id: format!("{prefix}sim{n:016x}"),
            created,
            model_json: Value::String(model.to_owned()).to_string(),
        }
    }

    fn head(&self, object: &str) -> String {
        format!(
            r#"{{"id":"{}","object":"{object}","created":{},"model":{}"#,
            self.id, self.created, self.model_json
        )
    }

    /// One SSE event carrying token `text`; `finish` sets `finish_reason`;
    /// `usage_null` adds `"usage":null` (sent when usage was requested).
    pub fn chunk_event(&self, text: &str, finish: Option<&str>, usage_null: bool) -> String {
        let finish = finish.map_or("null".to_owned(), |f| format!("\"{f}\""));
        let usage = if usage_null { r#","usage":null"# } else { "" };
        match self.endpoint {
            Endpoint::Responses => self.responses_delta_event(text, false, 0),
            Endpoint::Completions => format!(
                "data: {},\"choices\":[{{\"index\":0,\"text\":\"{text}\",\"logprobs\":null,\"finish_reason\":{finish},\"stop_reason\":null}}]{usage}}}\n\n",
                self.head("text_completion")
            ),
            Endpoint::Chat => format!(
                "data: {},\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"{text}\"}},\"logprobs\":null,\"finish_reason\":{finish}}}]{usage}}}\n\n",
                self.head("chat.completion.chunk")
            ),
        }
    }

    /// One chat SSE event carrying reasoning `text` in `field` (no `content`).
    /// Completions have no reasoning field (vLLM separates reasoning on chat
    /// only), so there reasoning text is a plain [`Self::chunk_event`].
    pub fn reasoning_event(
        &self,
        field: ReasoningField,
        text: &str,
        finish: Option<&str>,
        usage_null: bool,
    ) -> String {
        match self.endpoint {
            Endpoint::Completions => return self.chunk_event(text, finish, usage_null),
            Endpoint::Responses => return self.responses_delta_event(text, true, 0),
            Endpoint::Chat => {}
        }
        let finish = finish.map_or("null".to_owned(), |f| format!("\"{f}\""));
        let usage = if usage_null { r#","usage":null"# } else { "" };
        format!(
            "data: {},\"choices\":[{{\"index\":0,\"delta\":{{\"{}\":\"{text}\"}},\"logprobs\":null,\"finish_reason\":{finish}}}]{usage}}}\n\n",
            self.head("chat.completion.chunk"),
            field.key()
        )
    }

    /// The final usage-only chunk of a request that reasoned for `reasoning`
    /// of its `completion` tokens (`completion_tokens_details.reasoning_tokens`).
    pub fn usage_event_reasoning(&self, prompt: u32, completion: u32, reasoning: u32) -> String {
        if self.endpoint == Endpoint::Responses {
            return self.responses_completed_event(prompt, completion, reasoning, completion + 1);
        }
        if reasoning == 0 {
            return self.usage_event(prompt, completion);
        }
        let usage = usage_json(prompt, completion);
        let usage = usage.strip_suffix('}').unwrap_or(&usage);
        format!(
            "data: {},\"choices\":[],\"usage\":{usage},\"completion_tokens_details\":{{\"reasoning_tokens\":{reasoning}}}}}}}\n\n",
            self.head(self.chunk_object()),
        )
    }

    /// The chat role chunk `delta: {role: assistant, content: ""}`.
    pub fn role_event(&self, usage_null: bool) -> String {
        let usage = if usage_null { r#","usage":null"# } else { "" };
        format!(
            "data: {},\"choices\":[{{\"index\":0,\"delta\":{{\"role\":\"assistant\",\"content\":\"\"}},\"logprobs\":null,\"finish_reason\":null}}]{usage}}}\n\n",
            self.head("chat.completion.chunk")
        )
    }

    fn chunk_object(&self) -> &'static str {
        match self.endpoint {
            Endpoint::Completions => "text_completion",
            Endpoint::Chat => "chat.completion.chunk",
            Endpoint::Responses => "response",
        }
    }

    /// The final usage-only chunk (`choices: []`).
    pub fn usage_event(&self, prompt: u32, completion: u32) -> String {
        if self.endpoint == Endpoint::Responses {
            return self.responses_completed_event(prompt, completion, 0, completion + 1);
        }
        format!(
            "data: {},\"choices\":[],\"usage\":{}}}\n\n",
            self.head(self.chunk_object()),
            usage_json(prompt, completion)
        )
    }

    /// The whole non-streaming response body.
    pub fn full_response(&self, text: &str, finish: &str, prompt: u32, completion: u32) -> String {
        let usage = usage_json(prompt, completion);
        match self.endpoint {
            Endpoint::Responses => self.responses_full(text, prompt, completion),
            Endpoint::Completions => format!(
                "{},\"choices\":[{{\"index\":0,\"text\":\"{text}\",\"logprobs\":null,\"finish_reason\":\"{finish}\",\"stop_reason\":null}}],\"usage\":{usage}}}",
                self.head("text_completion")
            ),
            Endpoint::Chat => format!(
                "{},\"choices\":[{{\"index\":0,\"message\":{{\"role\":\"assistant\",\"content\":\"{text}\"}},\"logprobs\":null,\"finish_reason\":\"{finish}\"}}],\"usage\":{usage}}}",
                self.head("chat.completion")
            ),
        }
    }
}

fn usage_json(prompt: u32, completion: u32) -> String {
    format!(
        r#"{{"prompt_tokens":{prompt},"total_tokens":{},"completion_tokens":{completion}}}"#,
        u64::from(prompt) + u64::from(completion)
    )
}

/// The SSE terminator.
pub const DONE_EVENT: &str = "data: [DONE]\n\n";

#[cfg(test)]
#[path = "api_tests.rs"]
mod tests;

//! The answers of the pooling APIs (not streamed): `/v1/embeddings` and
//! vLLM's `/pooling` (`{"data": [...], "usage": {...}}`) and vLLM's
//! `/v1/rerank` (`{"results": [...], "usage": {...}}`). Only what the
//! metrics need is read: that the answer is one, its `usage.prompt_tokens`,
//! or its error. The vectors are skipped without being built. Sans-IO.

use super::chunk::{preview, ErrorMessage, LooseNum, LooseStr, NO_MESSAGE};
use super::Api;
use serde::de::{Deserializer, IgnoredAny, SeqAccess, Visitor};
use serde::Deserialize;
use std::fmt;

/// What a pooling answer said.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PoolingReply {
    /// `usage.prompt_tokens`, when sent.
    pub prompt_tokens: Option<u32>,
}

/// Why a pooling answer is not one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PoolingError {
    /// Not the endpoint's JSON answer (a `protocol` failure).
    Malformed(String),
    /// An error object (`{"error": ..}` or vLLM's `{"object": "error", ..}`).
    Server(String),
}

/// Parse a whole pooling answer for `api`: a JSON object holding `data`
/// (embeddings, pooling) or `results` (rerank) as a list.
pub fn parse_pooling_response(api: Api, body: &[u8]) -> Result<PoolingReply, PoolingError> {
    if body.trim_ascii_start().first() != Some(&b'{') {
        return Err(PoolingError::Malformed(format!(
            "the answer is not a JSON object: {}",
            preview(body)
        )));
    }
    let raw: RawPooling<'_> = serde_json::from_slice(body)
        .map_err(|e| PoolingError::Malformed(format!("invalid JSON answer: {e}")))?;
    if let Some(ErrorMessage(m)) = raw.error {
        return Err(PoolingError::Server(m.into_owned()));
    }
    if raw.object.and_then(|o| o.0).as_deref() == Some("error") {
        let m = raw.message.and_then(|m| m.0);
        return Err(PoolingError::Server(
            m.map_or_else(|| NO_MESSAGE.to_owned(), |m| m.into_owned()),
        ));
    }
    let (key, list) = match api {
        Api::Rerank => ("results", raw.results),
        _ => ("data", raw.data),
    };
    if list != Some(IsList(true)) {
        return Err(PoolingError::Malformed(format!(
            "the answer has no `{key}` list: {}",
            preview(body)
        )));
    }
    Ok(PoolingReply {
        prompt_tokens: raw.usage.and_then(|u| u.prompt_tokens.as_u32()),
    })
}

#[derive(Deserialize)]
struct RawPooling<'a> {
    #[serde(default)]
    data: Option<IsList>,
    #[serde(default)]
    results: Option<IsList>,
    #[serde(default)]
    usage: Option<RawUsage>,
    #[serde(default, borrow)]
    error: Option<ErrorMessage<'a>>,
    #[serde(default, borrow)]
    object: Option<LooseStr<'a>>,
    #[serde(default, borrow)]
    message: Option<LooseStr<'a>>,
}

#[derive(Deserialize)]
struct RawUsage {
    #[serde(default)]
    prompt_tokens: LooseNum,
}

/// Whether a value is a JSON list (its elements are skipped, not built).
#[derive(Debug, PartialEq, Eq)]
struct IsList(bool);

impl<'de> Deserialize<'de> for IsList {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ListVisitor;
        impl<'de> Visitor<'de> for ListVisitor {
            type Value = IsList;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<IsList, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(IsList(true))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<IsList, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(IsList(false))
            }
            fn visit_bool<E>(self, _: bool) -> Result<IsList, E> {
                Ok(IsList(false))
            }
            fn visit_i64<E>(self, _: i64) -> Result<IsList, E> {
                Ok(IsList(false))
            }
            fn visit_u64<E>(self, _: u64) -> Result<IsList, E> {
                Ok(IsList(false))
            }
            fn visit_f64<E>(self, _: f64) -> Result<IsList, E> {
                Ok(IsList(false))
            }
            fn visit_str<E>(self, _: &str) -> Result<IsList, E> {
                Ok(IsList(false))
            }
            fn visit_unit<E>(self) -> Result<IsList, E> {
                Ok(IsList(false))
            }
        }
        deserializer.deserialize_any(ListVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(api: Api, body: &str) -> Result<PoolingReply, PoolingError> {
        parse_pooling_response(api, body.as_bytes())
    }

    #[test]
    fn answers_give_their_prompt_tokens() {
        let emb = r#"{"id":"embd-1","object":"list","created":1,"model":"m","data":[{"index":0,"object":"embedding","embedding":[0.1,-0.2]}],"usage":{"prompt_tokens":7,"total_tokens":7,"completion_tokens":0,"prompt_tokens_details":null}}"#;
        assert_eq!(parse(Api::Embeddings, emb).unwrap().prompt_tokens, Some(7));
        assert_eq!(parse(Api::Pooling, emb).unwrap().prompt_tokens, Some(7));
        let rerank = r#"{"id":"rerank-1","model":"m","usage":{"prompt_tokens":30,"total_tokens":30},"results":[{"index":1,"document":{"text":"b"},"relevance_score":0.9}]}"#;
        assert_eq!(parse(Api::Rerank, rerank).unwrap().prompt_tokens, Some(30));
        // No usage: still an answer, with no prompt count (vLLM then counts 0).
        let bare = r#"{"data":[]}"#;
        assert_eq!(parse(Api::Embeddings, bare).unwrap().prompt_tokens, None);
    }

    #[test]
    fn malformed_answers_are_protocol_errors_never_panics() {
        for (api, body) in [
            (Api::Embeddings, ""),
            (Api::Embeddings, "not json"),
            (Api::Embeddings, "[1,2]"),
            (Api::Embeddings, r#"{"data": [1, 2"#),
            (Api::Embeddings, r#"{"data": "x"}"#),
            (Api::Embeddings, r#"{"usage": {"prompt_tokens": 3}}"#),
            (Api::Rerank, r#"{"data": []}"#),
            (Api::Pooling, r#"{"data": {"a": 1}}"#),
        ] {
            match parse(api, body) {
                Err(PoolingError::Malformed(m)) => assert!(!m.contains('\n'), "{m}"),
                other => panic!("{body:?} gave {other:?}"),
            }
        }
    }

    #[test]
    fn error_objects_are_server_errors() {
        let e = parse(
            Api::Embeddings,
            r#"{"error":{"message":"too long","type":"BadRequestError"}}"#,
        );
        assert_eq!(e, Err(PoolingError::Server("too long".into())));
        let e = parse(
            Api::Rerank,
            r#"{"object":"error","message":"no reranker","code":400}"#,
        );
        assert_eq!(e, Err(PoolingError::Server("no reranker".into())));
    }
}

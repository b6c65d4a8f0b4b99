//! The pooling APIs as the simulator serves them: `POST /v1/embeddings`,
//! vLLM's `POST /pooling` and `POST /v1/rerank` (also `/rerank`, `/v2/rerank`).
//! Request parsing (each input's token count with the toy tokenizer) and the
//! answer bodies, shaped as vLLM's (`embd-…` / `pool-…` lists with `usage`,
//! rerank `results` sorted by score). Not streamed.
//!
//! Cost model: every input is its own prefill-only sequence in the engine
//! (vLLM runs each input of a batch, and each query–document pair of a
//! rerank request, as a request of its own); a sequence finishes at the end
//! of the step that completes its prefill, paying `per_prefill_token` for
//! each of its tokens like any prompt, and the answer leaves when the last
//! one finishes. Pure: values in, strings out.

use serde_json::Value;

use super::api::count_text_tokens;
use super::api_error::ApiError;

/// Which pooling endpoint a request came in on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PoolEndpoint {
    /// `POST /v1/embeddings`.
    Embeddings,
    /// `POST /pooling`.
    Pooling,
    /// `POST /v1/rerank` (`/rerank`, `/v2/rerank`).
    Rerank,
}

impl PoolEndpoint {
    /// The endpoint's name in the server log.
    pub fn name(self) -> &'static str {
        match self {
            PoolEndpoint::Embeddings => "embeddings",
            PoolEndpoint::Pooling => "pooling",
            PoolEndpoint::Rerank => "rerank",
        }
    }
}

/// A validated pooling request.
#[derive(Debug, Clone, PartialEq)]
pub struct PoolRequest {
    /// The endpoint it came in on.
    pub endpoint: PoolEndpoint,
    /// Token count of each sequence the engine runs (an input, or a rerank
    /// query–document pair with its separator), after truncation.
    pub inputs: Vec<u32>,
    /// Rerank: the documents (echoed in the answer).
    pub documents: Vec<String>,
}

impl PoolRequest {
    /// Σ tokens: the answer's `usage.prompt_tokens`.
    pub fn prompt_tokens(&self) -> u32 {
        self.inputs.iter().fold(0u32, |a, &n| a.saturating_add(n))
    }
}

/// Parses and validates a pooling request body. `truncate_prompt_tokens`
/// -1 caps each sequence at `max_model_len` (vLLM's meaning), k > 0 at k;
/// without it a sequence of `max_model_len` tokens or more is refused.
pub fn parse_pool_request(
    endpoint: PoolEndpoint,
    body: &[u8],
    max_model_len: u32,
) -> Result<PoolRequest, ApiError> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("invalid JSON body: {e}")))?;
    let Some(obj) = value.as_object() else {
        return Err(ApiError::bad_request("request body must be a JSON object"));
    };
    let (inputs, documents) = match endpoint {
        PoolEndpoint::Rerank => rerank_inputs(obj)?,
        PoolEndpoint::Embeddings | PoolEndpoint::Pooling => {
            (input_counts(obj.get("input"))?, Vec::new())
        }
    };
    let cap = match obj.get("truncate_prompt_tokens") {
        None | Some(Value::Null) => None,
        Some(v) => match v.as_i64() {
            Some(-1) => Some(max_model_len),
            Some(k) if k > 0 => Some(u32::try_from(k).unwrap_or(u32::MAX).min(max_model_len)),
            _ => {
                return Err(ApiError::bad_request(format!(
                    "truncate_prompt_tokens must be -1 or a positive integer, got {v}"
                )))
            }
        },
    };
    let mut out = Vec::with_capacity(inputs.len());
    for n in inputs {
        let n = n.max(1);
        match cap {
            Some(c) => out.push(n.min(c)),
            None if n >= max_model_len => {
                return Err(ApiError::bad_request(format!(
                    "This model's maximum context length is {max_model_len} tokens. However, an input has {n} tokens."
                )))
            }
            None => out.push(n),
        }
    }
    Ok(PoolRequest {
        endpoint,
        inputs: out,
        documents,
    })
}

/// `input`: a string, a list of strings, a token-id list, or a list of
/// token-id lists; one count per input.
fn input_counts(input: Option<&Value>) -> Result<Vec<u32>, ApiError> {
    let one = |v: &Value| -> Option<u32> {
        match v {
            Value::String(s) => Some(count_text_tokens(s)),
            Value::Array(ids) if ids.iter().all(Value::is_u64) => {
                Some(u32::try_from(ids.len()).unwrap_or(u32::MAX))
            }
            _ => None,
        }
    };
    let bad = || {
        ApiError::bad_request(
            "`input` must be a string, a list of strings, a list of token ids or a list of those",
        )
    };
    match input {
        None | Some(Value::Null) => Err(ApiError::bad_request("missing field `input`")),
        Some(Value::Array(items)) if items.is_empty() => {
            Err(ApiError::bad_request("`input` must not be empty"))
        }
        Some(Value::Array(items)) if items.iter().all(Value::is_u64) => {
            Ok(vec![u32::try_from(items.len()).unwrap_or(u32::MAX)])
        }
        Some(Value::Array(items)) => items.iter().map(|v| one(v).ok_or_else(bad)).collect(),
        Some(v) => Ok(vec![one(v).ok_or_else(bad)?]),
    }
}

/// Rerank: `query` (a string) and `documents` (a non-empty list of strings
/// or `{"text": ..}` objects); one sequence per pair: query + document + 1
/// separator.
fn rerank_inputs(
    obj: &serde_json::Map<String, Value>,
) -> Result<(Vec<u32>, Vec<String>), ApiError> {
    let Some(Value::String(query)) = obj.get("query") else {
        return Err(ApiError::bad_request("missing field `query` (a string)"));
    };
    let docs: Vec<String> = match obj.get("documents") {
        Some(Value::Array(items)) if !items.is_empty() => items
            .iter()
            .map(|d| match d {
                Value::String(s) => Some(s.clone()),
                Value::Object(o) => o.get("text").and_then(Value::as_str).map(str::to_owned),
                _ => None,
            })
            .collect::<Option<_>>()
            .ok_or_else(|| {
                ApiError::bad_request("`documents` must be strings or {\"text\": ..} objects")
            })?,
        _ => {
            return Err(ApiError::bad_request(
                "missing field `documents` (a non-empty list)",
            ))
        }
    };
    let q = count_text_tokens(query);
    let inputs = docs
        .iter()
        .map(|d| q.saturating_add(count_text_tokens(d)).saturating_add(1))
        .collect();
    Ok((inputs, docs))
}

/// Length of the simulated embedding vectors.
pub const EMBEDDING_DIM: usize = 16;

/// The answer body of request `id` (`created` in Unix seconds; `model_json`
/// the served name already JSON-quoted).
pub fn pool_response(req: &PoolRequest, id: u64, created: u64, model_json: &str) -> String {
    let prompt = req.prompt_tokens();
    match req.endpoint {
        PoolEndpoint::Rerank => {
            let mut scored: Vec<(usize, f64)> = (0..req.documents.len())
                .map(|i| (i, score(id, i)))
                .collect();
            scored.sort_by(|a, b| b.1.total_cmp(&a.1));
            let results: Vec<String> = scored
                .iter()
                .map(|&(i, s)| {
                    format!(
                        "{{\"index\":{i},\"document\":{{\"text\":{}}},\"relevance_score\":{s:.6}}}",
                        Value::String(req.documents[i].clone())
                    )
                })
                .collect();
            format!(
                "{{\"id\":\"rerank-sim{id:016x}\",\"model\":{model_json},\"usage\":{{\"prompt_tokens\":{prompt},\"total_tokens\":{prompt}}},\"results\":[{}]}}",
                results.join(",")
            )
        }
        PoolEndpoint::Embeddings | PoolEndpoint::Pooling => {
            let (prefix, object, key) = match req.endpoint {
                PoolEndpoint::Pooling => ("pool", "pooling", "data"),
                _ => ("embd", "embedding", "embedding"),
            };
            let data: Vec<String> = (0..req.inputs.len())
                .map(|i| {
                    let v: Vec<String> = (0..EMBEDDING_DIM)
                        .map(|k| format!("{:.6}", score(id, i * EMBEDDING_DIM + k) - 0.5))
                        .collect();
                    format!(
                        "{{\"index\":{i},\"object\":\"{object}\",\"{key}\":[{}]}}",
                        v.join(",")
                    )
                })
                .collect();
            format!(
                "{{\"id\":\"{prefix}-sim{id:016x}\",\"object\":\"list\",\"created\":{created},\"model\":{model_json},\"data\":[{}],\"usage\":{{\"prompt_tokens\":{prompt},\"total_tokens\":{prompt},\"completion_tokens\":0,\"prompt_tokens_details\":null}}}}",
                data.join(",")
            )
        }
    }
}

/// A deterministic value in [0, 1) for request `id`, item `k`.
fn score(id: u64, k: usize) -> f64 {
    let h = super::blocks::splitmix64(id ^ super::blocks::splitmix64(k as u64));
    (h >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(endpoint: PoolEndpoint, body: &str) -> Result<PoolRequest, ApiError> {
        parse_pool_request(endpoint, body.as_bytes(), 100)
    }

    #[test]
    fn inputs_are_counted_one_sequence_each() {
        let r = parse(
            PoolEndpoint::Embeddings,
            r#"{"model":"m","input":"the knee of a curve"}"#,
        )
        .unwrap();
        assert_eq!(r.inputs, [5]);
        let r = parse(
            PoolEndpoint::Embeddings,
            r#"{"input":["a b","c d e"],"truncate_prompt_tokens":-1}"#,
        )
        .unwrap();
        assert_eq!((r.inputs.clone(), r.prompt_tokens()), (vec![2, 3], 5));
        let r = parse(PoolEndpoint::Pooling, r#"{"input":[1,2,3,4]}"#).unwrap();
        assert_eq!(r.inputs, [4]);
        let r = parse(PoolEndpoint::Pooling, r#"{"input":[[1,2],[3]]}"#).unwrap();
        assert_eq!(r.inputs, [2, 1]);
        // Query 2 tokens, documents 1 and 3: pairs 2 + 1 + 1 and 2 + 3 + 1.
        let r = parse(
            PoolEndpoint::Rerank,
            r#"{"query":"q w","documents":["a","b c d"]}"#,
        )
        .unwrap();
        assert_eq!(r.inputs, [4, 6]);
        assert_eq!(r.documents, ["a", "b c d"]);
    }

    #[test]
    fn truncation_follows_truncate_prompt_tokens() {
        let long = format!(r#"{{"input":"{}"}}"#, "w ".repeat(150));
        assert_eq!(
            parse(PoolEndpoint::Embeddings, &long).unwrap_err().status,
            400
        );
        let capped = format!(
            r#"{{"input":"{}","truncate_prompt_tokens":-1}}"#,
            "w ".repeat(150)
        );
        assert_eq!(
            parse(PoolEndpoint::Embeddings, &capped).unwrap().inputs,
            [100]
        );
        let k = format!(
            r#"{{"input":"{}","truncate_prompt_tokens":7}}"#,
            "w ".repeat(150)
        );
        assert_eq!(parse(PoolEndpoint::Embeddings, &k).unwrap().inputs, [7]);
    }

    #[test]
    fn bad_requests_are_400s() {
        for (e, body) in [
            (PoolEndpoint::Embeddings, "nope"),
            (PoolEndpoint::Embeddings, r#"{"model":"m"}"#),
            (PoolEndpoint::Embeddings, r#"{"input":[]}"#),
            (PoolEndpoint::Embeddings, r#"{"input":[{"a":1}]}"#),
            (PoolEndpoint::Rerank, r#"{"query":"q"}"#),
            (PoolEndpoint::Rerank, r#"{"query":"q","documents":[]}"#),
            (PoolEndpoint::Rerank, r#"{"documents":["a"]}"#),
            (
                PoolEndpoint::Embeddings,
                r#"{"input":"a","truncate_prompt_tokens":0}"#,
            ),
        ] {
            assert_eq!(parse(e, body).unwrap_err().status, 400, "{body}");
        }
    }

    #[test]
    fn answers_are_valid_json_in_vllms_shape() {
        let r = parse(PoolEndpoint::Embeddings, r#"{"input":["a b","c"]}"#).unwrap();
        let v: Value = serde_json::from_str(&pool_response(&r, 3, 9, "\"m\"")).unwrap();
        assert_eq!(v["object"], "list");
        assert_eq!(v["data"][1]["index"], 1);
        assert_eq!(
            v["data"][0]["embedding"].as_array().unwrap().len(),
            EMBEDDING_DIM
        );
        assert_eq!(v["usage"]["prompt_tokens"], 3);
        let r = parse(PoolEndpoint::Pooling, r#"{"input":"a"}"#).unwrap();
        let v: Value = serde_json::from_str(&pool_response(&r, 3, 9, "\"m\"")).unwrap();
        assert_eq!(v["data"][0]["object"], "pooling");
        assert!(v["data"][0]["data"].is_array());
        let r = parse(
            PoolEndpoint::Rerank,
            r#"{"query":"q","documents":["a \"x\"","b","c"]}"#,
        )
        .unwrap();
        let v: Value = serde_json::from_str(&pool_response(&r, 3, 9, "\"m\"")).unwrap();
        let results = v["results"].as_array().unwrap();
        assert_eq!(results.len(), 3);
        let scores: Vec<f64> = results
            .iter()
            .map(|r| r["relevance_score"].as_f64().unwrap())
            .collect();
        assert!(scores.windows(2).all(|w| w[0] >= w[1]), "{scores:?}");
        assert_eq!(v["usage"]["prompt_tokens"], r.prompt_tokens());
        assert!(results.iter().any(|r| r["document"]["text"] == "a \"x\""));
    }
}

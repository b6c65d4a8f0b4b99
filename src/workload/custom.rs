//! The `custom` dataset: a JSONL file with one `{"prompt": "...", "output_tokens": N}`
//! object per line, as in `vllm bench serve --dataset-name custom`; a row
//! may add `"images": [...]` (paths or URLs, see [`super::custom_images`]).
//!
//! Pure: [`parse`] takes the file contents, [`sample`] a seeded RNG; no I/O.
//!
//! No chat template is applied: the prompt is sent as raw text, as vLLM does
//! with `--skip-chat-template` (kneecap has no Jinja engine; a chat endpoint
//! applies the server's own template anyway).
use anyhow::bail;
use rand::rngs::StdRng;
use serde_json::Value;

use super::media::{ImageUrl, MediaPrompt};
use super::sample::{finish, maybe_shuffle, prompt_tokens, text_request, SampleOptions};
use super::tokenizer::TokenCounter;
use super::{Prompt, RequestSpec};

/// `--custom-output-len` value meaning "use each row's `output_tokens`".
pub const OUTPUT_LEN_FROM_FILE: i64 = -1;

/// One row of the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CustomRow {
    /// 1-based line number in the file (for messages).
    pub line: usize,
    pub prompt: String,
    pub output_tokens: Option<u32>,
    /// `images`: as written until [`super::custom_images::resolve`] turns
    /// each into the URL to send.
    pub images: Vec<String>,
}

/// Parse JSONL contents; blank lines are skipped. `origin` (the file name) is
/// used in error messages, which also give the line number.
pub fn parse(origin: &str, contents: &str) -> anyhow::Result<Vec<CustomRow>> {
    let mut rows = Vec::new();
    for (i, text) in contents.lines().enumerate() {
        let line = i + 1;
        if text.trim().is_empty() {
            continue;
        }
        let value: Value = serde_json::from_str(text).map_err(|e| {
            anyhow::anyhow!(
                "{origin}:{line}: not valid JSON ({e}); a custom dataset is JSONL: one {{\"prompt\": \"...\", \
                 \"output_tokens\": N}} object per line"
            )
        })?;
        let Value::Object(obj) = value else {
            bail!(
                "{origin}:{line}: expected a JSON object like {{\"prompt\": \"...\"}}, found {}; a custom \
                 dataset is JSONL, not a JSON list",
                kind(&value)
            );
        };
        let prompt = match obj.get("prompt") {
            Some(Value::String(s)) => s.clone(),
            Some(other) => bail!(
                "{origin}:{line}: \"prompt\" must be a string, found {}",
                kind(other)
            ),
            None => bail!(
                "{origin}:{line}: missing \"prompt\"; every line needs {{\"prompt\": \"...\"}}"
            ),
        };
        let output_tokens = match obj.get("output_tokens") {
            None | Some(Value::Null) => None,
            Some(v) => Some(positive_int(v).ok_or_else(|| {
                anyhow::anyhow!(
                    "{origin}:{line}: \"output_tokens\" must be a positive integer, found {v}"
                )
            })?),
        };
        let images = images(origin, line, obj.get("images"))?;
        rows.push(CustomRow {
            line,
            prompt,
            output_tokens,
            images,
        });
    }
    if rows.is_empty() {
        bail!("dataset file '{origin}' is empty; expected one {{\"prompt\": \"...\"}} JSON object per line");
    }
    Ok(rows)
}

/// Shuffle (unless disabled), take `num_prompts` rows (0: all), oversample
/// (unless disabled). `output_len` is `--custom-output-len`: a positive token
/// count, or [`OUTPUT_LEN_FROM_FILE`] to use each row's `output_tokens`.
///
/// `prompt_len` counts the raw prompt like vLLM (`len(tokenizer(prompt).input_ids)`),
/// or is an estimate ([`super::sample::estimate_tokens`]) without a tokenizer.
pub fn sample(
    origin: &str,
    mut rows: Vec<CustomRow>,
    output_len: i64,
    opts: &SampleOptions,
    tokenizer: Option<&TokenCounter>,
    rng: &mut StdRng,
) -> anyhow::Result<Vec<RequestSpec>> {
    let fixed = match output_len {
        OUTPUT_LEN_FROM_FILE => None,
        n => Some(u32::try_from(n).ok().filter(|n| *n > 0).ok_or_else(|| {
            anyhow::anyhow!("--custom-output-len is {n}; use a positive token count, or -1 to read output_tokens from '{origin}'")
        })?),
    };
    if fixed.is_none() {
        if let Some(row) = rows.iter().find(|r| r.output_tokens.is_none()) {
            bail!(
                "{origin}:{}: missing \"output_tokens\", needed because --custom-output-len is -1; add it to \
                 every line or pass a fixed --custom-output-len",
                row.line
            );
        }
    }
    maybe_shuffle(&mut rows, opts, rng);
    let num_prompts = if opts.num_prompts == 0 {
        rows.len()
    } else {
        opts.num_prompts
    };
    let requests = rows
        .into_iter()
        .take(num_prompts)
        .map(|row| {
            let prompt_len = prompt_tokens(&row.prompt, tokenizer);
            let out = fixed.or(row.output_tokens).unwrap_or(1);
            if row.images.is_empty() {
                return text_request(row.prompt, prompt_len, out);
            }
            let images = row.images.into_iter().map(ImageUrl::whole).collect();
            RequestSpec {
                index: 0,
                prompt: Prompt::Media(MediaPrompt {
                    text: row.prompt,
                    images,
                }),
                prompt_len,
                output_len: out,
            }
        })
        .collect();
    Ok(finish(requests, num_prompts, opts.no_oversample, rng))
}

/// A row's optional `images`: a list of strings.
fn images(origin: &str, line: usize, v: Option<&Value>) -> anyhow::Result<Vec<String>> {
    let items = match v {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(items)) => items,
        Some(other) => bail!(
            "{origin}:{line}: \"images\" must be a list of image paths or URLs, found {}",
            kind(other)
        ),
    };
    items
        .iter()
        .enumerate()
        .map(|(k, item)| match item {
            Value::String(s) if !s.trim().is_empty() => Ok(s.clone()),
            other => bail!(
                "{origin}:{line}: \"images\"[{k}] must be an image path, an http(s) URL or a data URL, found {}",
                if other.is_string() { "an empty string" } else { kind(other) }
            ),
        })
        .collect()
}

/// A JSON number that is a whole number in 1..=u32::MAX (`12` or `12.0`).
fn positive_int(v: &Value) -> Option<u32> {
    if let Some(n) = v.as_u64() {
        return u32::try_from(n).ok().filter(|n| *n > 0);
    }
    let f = v.as_f64()?;
    (f.fract() == 0.0 && f >= 1.0 && f <= f64::from(u32::MAX)).then_some(f as u32)
}

/// A short name for a JSON value's type.
fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::dataset::dataset_rng;
    use crate::workload::tokenizer::tests::smollm2;
    use crate::workload::Prompt;

    const ROWS: &str = "{\"prompt\": \"Summarise the plot of Hamlet.\", \"output_tokens\": 120}\n\
                        \n\
                        {\"prompt\": \"Translate 'good morning' to French.\", \"output_tokens\": 10}\n\
                        {\"prompt\": \"List three prime numbers.\", \"output_tokens\": 20.0, \"extra\": true}\n";

    fn opts(num_prompts: usize, disable_shuffle: bool, no_oversample: bool) -> SampleOptions {
        SampleOptions {
            num_prompts,
            disable_shuffle,
            no_oversample,
        }
    }

    #[test]
    fn parses_rows_with_line_numbers() {
        let rows = parse("c.jsonl", ROWS).unwrap();
        assert_eq!(
            rows.iter().map(|r| r.line).collect::<Vec<_>>(),
            vec![1, 3, 4]
        );
        assert_eq!(rows[2].output_tokens, Some(20));
    }

    #[test]
    fn output_tokens_from_file_or_fixed() {
        let rows = parse("c.jsonl", ROWS).unwrap();
        let reqs = sample(
            "c.jsonl",
            rows.clone(),
            -1,
            &opts(0, true, false),
            None,
            &mut dataset_rng(0),
        )
        .unwrap();
        assert_eq!(
            reqs.iter().map(|r| r.output_len).collect::<Vec<_>>(),
            vec![120, 10, 20]
        );
        assert!(matches!(&reqs[0].prompt, Prompt::Text(t) if t == "Summarise the plot of Hamlet."));
        let reqs = sample(
            "c.jsonl",
            rows,
            256,
            &opts(0, true, false),
            None,
            &mut dataset_rng(0),
        )
        .unwrap();
        assert!(reqs.iter().all(|r| r.output_len == 256));
    }

    #[test]
    fn num_prompts_zero_takes_all_and_more_oversamples() {
        let rows = parse("c.jsonl", ROWS).unwrap();
        let all = sample(
            "c",
            rows.clone(),
            8,
            &opts(0, false, false),
            None,
            &mut dataset_rng(0),
        )
        .unwrap();
        assert_eq!(all.len(), 3);
        let two = sample(
            "c",
            rows.clone(),
            8,
            &opts(2, false, false),
            None,
            &mut dataset_rng(0),
        )
        .unwrap();
        assert_eq!(two.len(), 2);
        let seven = sample(
            "c",
            rows.clone(),
            8,
            &opts(7, false, false),
            None,
            &mut dataset_rng(0),
        )
        .unwrap();
        assert_eq!(seven.len(), 7);
        assert!(seven.iter().enumerate().all(|(i, r)| r.index == i));
        let capped = sample(
            "c",
            rows,
            8,
            &opts(7, false, true),
            None,
            &mut dataset_rng(0),
        )
        .unwrap();
        assert_eq!(capped.len(), 3);
    }

    #[test]
    fn shuffle_is_seeded() {
        let jsonl: String = (0..30)
            .map(|i| format!("{{\"prompt\": \"prompt number {i}\"}}\n"))
            .collect();
        let rows = parse("c", &jsonl).unwrap();
        let a = sample(
            "c",
            rows.clone(),
            8,
            &opts(0, false, false),
            None,
            &mut dataset_rng(4),
        )
        .unwrap();
        let b = sample(
            "c",
            rows.clone(),
            8,
            &opts(0, false, false),
            None,
            &mut dataset_rng(4),
        )
        .unwrap();
        let kept = sample(
            "c",
            rows,
            8,
            &opts(0, true, false),
            None,
            &mut dataset_rng(4),
        )
        .unwrap();
        assert_eq!(a, b);
        assert_ne!(a, kept);
        assert!(matches!(&kept[0].prompt, Prompt::Text(t) if t == "prompt number 0"));
    }

    #[test]
    fn prompt_len_uses_tokenizer_or_estimate() {
        let rows = parse("c.jsonl", ROWS).unwrap();
        let tok = smollm2();
        let reqs = sample(
            "c",
            rows.clone(),
            8,
            &opts(0, true, false),
            Some(&tok),
            &mut dataset_rng(0),
        )
        .unwrap();
        assert_eq!(
            reqs[0].prompt_len,
            tok.count("Summarise the plot of Hamlet.")
        );
        let reqs = sample(
            "c",
            rows,
            8,
            &opts(0, true, false),
            None,
            &mut dataset_rng(0),
        )
        .unwrap();
        assert_eq!(reqs[0].prompt_len, 8, "29 chars / 4, rounded up");
    }

    #[test]
    fn parse_errors_name_file_and_line() {
        let cases = [
            ("", "c.jsonl", "empty"),
            ("\n\n", "c.jsonl", "empty"),
            (
                "{\"prompt\": \"ok\"}\n{\"prompt\": \"broken\"\n",
                "c.jsonl:2",
                "not valid JSON",
            ),
            (
                "[{\"prompt\": \"a list\"}]\n",
                "c.jsonl:1",
                "not a JSON list",
            ),
            (
                "{\"prompt\": \"ok\"}\n\n{\"text\": \"no prompt\"}\n",
                "c.jsonl:3",
                "missing \"prompt\"",
            ),
            ("{\"prompt\": 42}\n", "c.jsonl:1", "must be a string"),
            (
                "{\"prompt\": \"x\", \"output_tokens\": -3}\n",
                "c.jsonl:1",
                "positive integer",
            ),
            (
                "{\"prompt\": \"x\", \"output_tokens\": \"ten\"}\n",
                "c.jsonl:1",
                "positive integer",
            ),
            (
                "{\"prompt\": \"x\", \"images\": \"a.png\"}\n",
                "c.jsonl:1: \"images\"",
                "must be a list",
            ),
            (
                "{\"prompt\": \"x\"}\n{\"prompt\": \"y\", \"images\": [\"a.png\", 3]}\n",
                "c.jsonl:2: \"images\"[1]",
                "found a number",
            ),
            (
                "{\"prompt\": \"x\", \"images\": [\" \"]}\n",
                "c.jsonl:1: \"images\"[0]",
                "found an empty string",
            ),
        ];
        for (contents, place, needle) in cases {
            let msg = parse("c.jsonl", contents).unwrap_err().to_string();
            assert!(msg.contains(place), "{place:?} not in {msg}");
            assert!(msg.contains(needle), "{needle:?} not in {msg}");
        }
    }

    #[test]
    fn missing_output_tokens_with_minus_one_names_the_line() {
        let rows = parse(
            "c.jsonl",
            "{\"prompt\": \"a\", \"output_tokens\": 5}\n{\"prompt\": \"b\"}\n",
        )
        .unwrap();
        let msg = sample(
            "c.jsonl",
            rows.clone(),
            -1,
            &opts(0, false, false),
            None,
            &mut dataset_rng(0),
        )
        .unwrap_err()
        .to_string();
        assert!(
            msg.contains("c.jsonl:2") && msg.contains("output_tokens"),
            "{msg}"
        );
        let msg = sample(
            "c.jsonl",
            rows,
            0,
            &opts(0, false, false),
            None,
            &mut dataset_rng(0),
        )
        .unwrap_err()
        .to_string();
        assert!(
            msg.contains("--custom-output-len") && msg.contains("c.jsonl"),
            "{msg}"
        );
    }
}

//! The `sharegpt` dataset: the first two turns of ShareGPT-format
//! conversations become (prompt, reference completion), as in
//! `vllm bench serve --dataset-name sharegpt`.
//!
//! Pure: [`parse`] takes the file contents, [`sample`] a seeded RNG; no I/O.
//! The file is a JSON list of `{"id": .., "conversations": [{"from": .., "value": ..}, ..]}`.
use anyhow::{anyhow, bail};
use rand::rngs::StdRng;
use serde::Deserialize;

use super::sample::{finish, maybe_shuffle, prompt_tokens, text_request, SampleOptions};
use super::tokenizer::TokenCounter;
use super::RequestSpec;

/// vLLM's `is_valid_sequence` limits: prompt and output at least this long …
pub const MIN_LEN: u32 = 4;
/// … prompt at most this long …
pub const MAX_PROMPT_LEN: u32 = 1024;
/// … and prompt + output at most this long.
pub const MAX_TOTAL_LEN: u32 = 2048;

/// What the file should look like (for error messages).
const EXPECTED_SHAPE: &str =
    "expected a JSON list of {\"conversations\": [{\"from\": \"human\", \"value\": \"...\"}, {\"from\": \"gpt\", \"value\": \"...\"}]} objects";

/// A usable conversation: its first turn and the reply to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conversation {
    /// Position of the entry in the file (0-based).
    pub entry: usize,
    pub prompt: String,
    pub reference: String,
}

#[derive(Deserialize)]
struct Entry {
    #[serde(default)]
    conversations: Option<Vec<Turn>>,
}

#[derive(Deserialize)]
struct Turn {
    value: String,
}

/// Parse a ShareGPT file, keeping entries with at least two turns, in file order.
/// `origin` (the file name) is used in error messages.
pub fn parse(origin: &str, contents: &str) -> anyhow::Result<Vec<Conversation>> {
    if contents.trim().is_empty() {
        bail!("dataset file '{origin}' is empty; {EXPECTED_SHAPE}");
    }
    let entries: Vec<Entry> = serde_json::from_str(contents).map_err(|e| {
        use serde_json::error::Category;
        match e.classify() {
            Category::Syntax | Category::Eof | Category::Io => anyhow!(
                "dataset file '{origin}' is not valid JSON (line {}, column {}: {e}); {EXPECTED_SHAPE}",
                e.line(),
                e.column()
            ),
            Category::Data => anyhow!(
                "dataset file '{origin}' is not in ShareGPT format at line {}, column {} ({e}); {EXPECTED_SHAPE}",
                e.line(),
                e.column()
            ),
        }
    })?;
    let n_entries = entries.len();
    let conversations: Vec<Conversation> = entries
        .into_iter()
        .enumerate()
        .filter_map(|(entry, e)| {
            let mut turns = e.conversations?.into_iter();
            let prompt = turns.next()?.value;
            let reference = turns.next()?.value;
            Some(Conversation {
                entry,
                prompt,
                reference,
            })
        })
        .collect();
    if conversations.is_empty() {
        bail!(
            "dataset file '{origin}' has no conversation with at least two turns ({n_entries} entries read); \
             {EXPECTED_SHAPE}"
        );
    }
    Ok(conversations)
}

/// vLLM's length filter. `output_overridden` skips the minimum-output check.
pub fn is_valid(prompt_len: u32, output_len: u32, output_overridden: bool) -> bool {
    let too_short = prompt_len < MIN_LEN || (!output_overridden && output_len < MIN_LEN);
    let too_long =
        prompt_len > MAX_PROMPT_LEN || prompt_len.saturating_add(output_len) > MAX_TOTAL_LEN;
    !(too_short || too_long)
}

/// Shuffle (unless disabled), take the first `num_prompts` conversations that
/// pass [`is_valid`], then oversample (unless disabled) up to `num_prompts`.
///
/// Lengths count tokens like vLLM (`len(tokenizer(text).input_ids)`, specials
/// included). Without a tokenizer they are estimates
/// ([`super::sample::estimate_tokens`]) used for the filters and
/// `max_tokens`; the server's usage overrides the prompt count in results.
/// `output_len` is `--sharegpt-output-len` (None: the reference's length).
pub fn sample(
    origin: &str,
    mut conversations: Vec<Conversation>,
    output_len: Option<u32>,
    opts: &SampleOptions,
    tokenizer: Option<&TokenCounter>,
    rng: &mut StdRng,
) -> anyhow::Result<Vec<RequestSpec>> {
    maybe_shuffle(&mut conversations, opts, rng);
    let n_available = conversations.len();
    let mut requests = Vec::new();
    for conv in conversations {
        if requests.len() >= opts.num_prompts {
            break;
        }
        let prompt_len = prompt_tokens(&conv.prompt, tokenizer);
        let out_len = output_len.unwrap_or_else(|| prompt_tokens(&conv.reference, tokenizer));
        if is_valid(prompt_len, out_len, output_len.is_some()) {
            requests.push(text_request(conv.prompt, prompt_len, out_len));
        }
    }
    if requests.is_empty() && opts.num_prompts > 0 {
        bail!(
            "no conversation in dataset file '{origin}' passes the length filters ({n_available} with two \
             turns; prompt must be {MIN_LEN}..={MAX_PROMPT_LEN} tokens, reply at least {MIN_LEN}, both at most \
             {MAX_TOTAL_LEN}); use a file with longer or shorter conversations, or set --sharegpt-output-len"
        );
    }
    Ok(finish(requests, opts.num_prompts, opts.no_oversample, rng))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::dataset::dataset_rng;
    use crate::workload::tokenizer::tests::smollm2;
    use crate::workload::Prompt;

    const SAMPLE: &str = r#"[
      {"id": "a", "conversations": [
        {"from": "human", "value": "How do I boil an egg so that the yolk stays soft?"},
        {"from": "gpt", "value": "Put the egg in boiling water for about six minutes, then cool it in cold water."}]},
      {"id": "b", "conversations": [{"from": "human", "value": "Only one turn here, so it is skipped."}]},
      {"id": "c", "conversations": [
        {"from": "human", "value": "Hi"},
        {"from": "gpt", "value": "Hello! How can I help you today with anything at all?"}]},
      {"id": "d", "conversations": [
        {"from": "human", "value": "Explain what a hash map is in one paragraph, please."},
        {"from": "gpt", "value": "Ok."}]},
      {"id": "e", "conversations": [
        {"from": "human", "value": "What is the capital city of Australia, and why not Sydney?"},
        {"from": "gpt", "value": "Canberra. It was chosen as a compromise between Sydney and Melbourne."},
        {"from": "human", "value": "Thanks!"}]},
      {"conversations": [
        {"from": "human", "value": "Write a haiku about the first snow of the winter."},
        {"from": "gpt", "value": "Quiet flakes descend, the garden forgets its paths, morning holds its breath."}]}
    ]"#;

    fn opts(num_prompts: usize, disable_shuffle: bool, no_oversample: bool) -> SampleOptions {
        SampleOptions {
            num_prompts,
            disable_shuffle,
            no_oversample,
        }
    }

    fn prompts(reqs: &[RequestSpec]) -> Vec<String> {
        reqs.iter()
            .map(|r| match &r.prompt {
                Prompt::Text(t) => t.clone(),
                _ => panic!("sharegpt prompts are text"),
            })
            .collect()
    }

    #[test]
    fn parse_keeps_entries_with_two_turns() {
        let convs = parse("sample.json", SAMPLE).unwrap();
        assert_eq!(
            convs.iter().map(|c| c.entry).collect::<Vec<_>>(),
            vec![0, 2, 3, 4, 5]
        );
        assert!(convs[3].reference.starts_with("Canberra"));
    }

    #[test]
    fn filters_short_prompts_and_replies_in_file_order() {
        let convs = parse("sample.json", SAMPLE).unwrap();
        let reqs = sample(
            "sample.json",
            convs,
            None,
            &opts(10, true, true),
            None,
            &mut dataset_rng(0),
        )
        .unwrap();
        // "Hi" (prompt < 4) and "Ok." (reply < 4) are dropped.
        let p = prompts(&reqs);
        assert_eq!(p.len(), 3);
        assert!(p[0].starts_with("How do I boil"));
        assert!(p[1].starts_with("What is the capital"));
        assert!(p[2].starts_with("Write a haiku"));
        assert!(reqs.iter().enumerate().all(|(i, r)| r.index == i));
    }

    #[test]
    fn output_len_override_skips_min_output_check() {
        let convs = parse("sample.json", SAMPLE).unwrap();
        let reqs = sample(
            "sample.json",
            convs,
            Some(2),
            &opts(10, true, true),
            None,
            &mut dataset_rng(0),
        )
        .unwrap();
        assert_eq!(reqs.len(), 4, "the \"Ok.\" reply now passes");
        assert!(reqs.iter().all(|r| r.output_len == 2));
    }

    #[test]
    fn long_prompts_are_dropped() {
        let long = "word ".repeat(2000);
        let json = format!(
            r#"[{{"conversations":[{{"value":"{long}"}},{{"value":"a fine reply to it"}}]}},
               {{"conversations":[{{"value":"a short prompt here"}},{{"value":"{long}"}}]}},
               {{"conversations":[{{"value":"a short prompt here"}},{{"value":"a short reply here"}}]}}]"#
        );
        let convs = parse("long.json", &json).unwrap();
        let reqs = sample(
            "long.json",
            convs,
            None,
            &opts(5, true, true),
            None,
            &mut dataset_rng(0),
        )
        .unwrap();
        assert_eq!(reqs.len(), 1);
    }

    #[test]
    fn shuffle_is_seeded_and_oversampling_fills_up() {
        let convs = parse("sample.json", SAMPLE).unwrap();
        let a = sample(
            "s",
            convs.clone(),
            None,
            &opts(3, false, false),
            None,
            &mut dataset_rng(1),
        )
        .unwrap();
        let b = sample(
            "s",
            convs.clone(),
            None,
            &opts(3, false, false),
            None,
            &mut dataset_rng(1),
        )
        .unwrap();
        assert_eq!(a, b);
        let orders: std::collections::BTreeSet<Vec<String>> = (0..20)
            .map(|seed| {
                let r = sample(
                    "s",
                    convs.clone(),
                    None,
                    &opts(3, false, false),
                    None,
                    &mut dataset_rng(seed),
                );
                prompts(&r.unwrap())
            })
            .collect();
        assert!(orders.len() > 1, "different seeds give different orders");
        let many = sample(
            "s",
            convs.clone(),
            None,
            &opts(10, false, false),
            None,
            &mut dataset_rng(2),
        )
        .unwrap();
        assert_eq!(many.len(), 10);
        let distinct: std::collections::BTreeSet<String> = prompts(&many).into_iter().collect();
        assert_eq!(
            distinct.len(),
            3,
            "oversampled copies of the 3 valid conversations"
        );
        let few = sample(
            "s",
            convs,
            None,
            &opts(10, false, true),
            None,
            &mut dataset_rng(2),
        )
        .unwrap();
        assert_eq!(few.len(), 3);
    }

    #[test]
    fn with_tokenizer_lengths_are_token_counts() {
        let tok = smollm2();
        let convs = parse("sample.json", SAMPLE).unwrap();
        let reqs = sample(
            "s",
            convs.clone(),
            None,
            &opts(10, true, true),
            Some(&tok),
            &mut dataset_rng(0),
        )
        .unwrap();
        assert_eq!(reqs.len(), 3);
        let first = &convs[0];
        assert_eq!(reqs[0].prompt_len, tok.count(&first.prompt));
        assert_eq!(reqs[0].output_len, tok.count(&first.reference));
    }

    #[test]
    fn errors_name_the_file() {
        let cases = [
            ("", "empty"),
            ("   \n", "empty"),
            ("[{\"conversations\": [", "not valid JSON"),
            ("{\"conversations\": []}", "not in ShareGPT format"),
            (
                "[{\"conversations\": [{\"value\": 3}, {\"value\": \"x\"}]}]",
                "line 1",
            ),
            (
                "[{\"conversations\": [{\"value\": \"only one\"}]}]",
                "at least two turns",
            ),
            ("[]", "at least two turns"),
        ];
        for (contents, needle) in cases {
            let msg = parse("my-data.json", contents).unwrap_err().to_string();
            assert!(msg.contains("my-data.json"), "{msg}");
            assert!(msg.contains(needle), "{needle:?} not in {msg}");
        }
        let convs = parse(
            "my-data.json",
            r#"[{"conversations":[{"value":"Hi"},{"value":"Hello"}]}]"#,
        )
        .unwrap();
        let msg = sample(
            "my-data.json",
            convs,
            None,
            &opts(5, true, false),
            None,
            &mut dataset_rng(0),
        )
        .unwrap_err()
        .to_string();
        assert!(
            msg.contains("my-data.json") && msg.contains("length filters"),
            "{msg}"
        );
    }

    #[test]
    fn shipped_sample_file_loads() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/data/sharegpt-sample.json");
        let contents = std::fs::read_to_string(path).unwrap();
        let convs = parse(path, &contents).unwrap();
        assert!(convs.len() >= 35, "{}", convs.len());
        let tok = smollm2();
        let reqs = sample(
            path,
            convs.clone(),
            None,
            &opts(1000, false, true),
            Some(&tok),
            &mut dataset_rng(0),
        )
        .unwrap();
        assert!(
            reqs.len() >= 30,
            "most sample conversations pass the filters: {}",
            reqs.len()
        );
        let est = sample(
            path,
            convs,
            None,
            &opts(1000, false, true),
            None,
            &mut dataset_rng(0),
        )
        .unwrap();
        assert!(est.len() >= 30, "{}", est.len());
    }
}

//! Sessions from files: every turn of a ShareGPT conversation, or a JSONL
//! file with one `{"messages": [{"role": .., "content": ..}, ..]}` per line.
//!
//! User turns become the session's turns; the file's own answers are never
//! sent (the server's answers replace them) and only set each turn's output
//! length. Pure: takes file contents and a seeded RNG.

use anyhow::{anyhow, bail};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use serde_json::Value;

use super::session::{with_think_times, SessionSpec, ThinkTime, TurnSpec};

/// Output length of a turn whose answer the file does not give.
pub const DEFAULT_OUTPUT_LEN: u32 = 128;

/// One conversation of the file: each user message with the answer the file
/// gives to it (if any).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileConversation {
    pub turns: Vec<(String, Option<String>)>,
}

/// How sessions are drawn from a file's conversations.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FileSessionOptions {
    /// Sessions wanted (conversations are reused when the file has fewer).
    pub sessions: usize,
    /// `--sharegpt-output-len` / `--custom-output-len`: every turn asks for this.
    pub output_len: Option<u32>,
    /// `--multi-turn-min-turns`: conversations with fewer user turns are skipped.
    pub min_turns: u32,
    /// `--multi-turn-max-turns`: later turns are dropped (`None`: all turns).
    pub max_turns: Option<u32>,
    /// `--disable-shuffle`: file order instead of a seeded shuffle.
    pub disable_shuffle: bool,
    pub think: ThinkTime,
}

/// Parse a ShareGPT JSON file keeping all turns: `human`/`user` turns are
/// user messages, `gpt`/`assistant`/`chatgpt`/`bard`/`bing` ones answers,
/// `system` ones are skipped.
pub fn parse_sharegpt(origin: &str, contents: &str) -> anyhow::Result<Vec<FileConversation>> {
    let entries: Vec<Value> = serde_json::from_str(contents).map_err(|e| {
        anyhow!(
            "dataset file '{origin}' is not a ShareGPT JSON list (line {}, column {}: {e}); \
             expected [{{\"conversations\": [{{\"from\": \"human\", \"value\": \"...\"}}, ..]}}, ..]",
            e.line(),
            e.column()
        )
    })?;
    let mut out = Vec::new();
    for entry in &entries {
        let Some(Value::Array(turns)) = entry.get("conversations") else {
            continue;
        };
        let said = turns.iter().filter_map(|t| {
            let who = t.get("from")?.as_str()?;
            Some((who, t.get("value")?.as_str()?))
        });
        push_conversation(&mut out, said);
    }
    if out.is_empty() {
        bail!(
            "dataset file '{origin}' has no conversation with a human turn ({} entries read)",
            entries.len()
        );
    }
    Ok(out)
}

/// Parse a JSONL file of `{"messages": [{"role": "user", "content": ".."}, ..]}`
/// lines; errors name the file, the line and the field.
pub fn parse_jsonl(origin: &str, contents: &str) -> anyhow::Result<Vec<FileConversation>> {
    let mut out = Vec::new();
    for (i, text) in contents.lines().enumerate() {
        let line = i + 1;
        if text.trim().is_empty() {
            continue;
        }
        let value: Value = serde_json::from_str(text).map_err(|e| {
            anyhow!("{origin}:{line}: not valid JSON ({e}); a multi-turn custom dataset has one {{\"messages\": [..]}} object per line")
        })?;
        let Some(Value::Array(messages)) = value.get("messages") else {
            bail!("{origin}:{line}: missing \"messages\" (a list of {{\"role\", \"content\"}}); a multi-turn custom dataset has one {{\"messages\": [..]}} object per line");
        };
        let mut said = Vec::with_capacity(messages.len());
        for (k, m) in messages.iter().enumerate() {
            let role = m.get("role").and_then(Value::as_str);
            let content = m.get("content").and_then(Value::as_str);
            let (Some(role), Some(content)) = (role, content) else {
                bail!("{origin}:{line}: messages[{k}] needs a string \"role\" and a string \"content\"");
            };
            said.push((role, content));
        }
        let before = out.len();
        push_conversation(&mut out, said.into_iter());
        if out.len() == before {
            bail!("{origin}:{line}: \"messages\" has no message with role \"user\"");
        }
    }
    if out.is_empty() {
        bail!("dataset file '{origin}' has no conversation; one {{\"messages\": [..]}} object per line");
    }
    Ok(out)
}

/// Fold (speaker, text) pairs into user turns with their answers.
fn push_conversation<'a>(
    out: &mut Vec<FileConversation>,
    said: impl Iterator<Item = (&'a str, &'a str)>,
) {
    let mut turns: Vec<(String, Option<String>)> = Vec::new();
    for (who, text) in said {
        match who {
            "human" | "user" => turns.push((text.to_string(), None)),
            "system" => {}
            _ => {
                if let Some(last) = turns.last_mut().filter(|t| t.1.is_none()) {
                    last.1 = Some(text.to_string());
                }
            }
        }
    }
    if !turns.is_empty() {
        out.push(FileConversation { turns });
    }
}

/// The conversations with at least `min_turns` user turns: the ones
/// sessions are drawn from (they repeat after this many).
pub fn usable(conversations: &[FileConversation], min_turns: u32) -> Vec<&FileConversation> {
    conversations
        .iter()
        .filter(|c| c.turns.len() >= min_turns as usize)
        .collect()
}

/// Draw `opts.sessions` sessions from the conversations; `count` gives a
/// text's tokens (a tokenizer, or the 4-characters-per-token estimate).
pub fn sessions(
    origin: &str,
    conversations: &[FileConversation],
    opts: &FileSessionOptions,
    count: &dyn Fn(&str) -> u32,
    rng: &mut StdRng,
) -> anyhow::Result<Vec<SessionSpec>> {
    let mut usable = usable(conversations, opts.min_turns);
    if usable.is_empty() {
        bail!(
            "dataset file '{origin}': no conversation has --multi-turn-min-turns {} user turns; lower it",
            opts.min_turns
        );
    }
    if !opts.disable_shuffle {
        usable.shuffle(rng);
    }
    let keep = opts.max_turns.map_or(usize::MAX, |m| m as usize);
    let mut out = Vec::with_capacity(opts.sessions);
    for k in 0..opts.sessions {
        let conv = usable[k % usable.len()];
        let turns = conv
            .turns
            .iter()
            .take(keep)
            .map(|(user, answer)| TurnSpec {
                user: user.clone(),
                input_len: count(user),
                output_len: opts.output_len.unwrap_or_else(|| {
                    answer
                        .as_deref()
                        .map_or(DEFAULT_OUTPUT_LEN, |a| count(a).max(1))
                }),
            })
            .collect();
        out.push(with_think_times(turns, opts.think, rng));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use std::time::Duration;

    fn words(s: &str) -> u32 {
        s.split_whitespace().count() as u32
    }

    fn opts(sessions: usize) -> FileSessionOptions {
        FileSessionOptions {
            sessions,
            output_len: None,
            min_turns: 1,
            max_turns: None,
            disable_shuffle: true,
            think: ThinkTime::Fixed(Duration::ZERO),
        }
    }

    #[test]
    fn sharegpt_keeps_every_human_turn_and_sizes_answers_from_the_gpt_turns() {
        let file = r#"[{"conversations": [
            {"from": "system", "value": "be brief"},
            {"from": "human", "value": "one two"},
            {"from": "gpt", "value": "a b c d e"},
            {"from": "human", "value": "three"},
            {"from": "gpt", "value": "f g"},
            {"from": "human", "value": "four five six"}]},
            {"conversations": [{"from": "gpt", "value": "orphan"}]}]"#;
        let convs = parse_sharegpt("sg.json", file).unwrap();
        assert_eq!(convs.len(), 1, "an entry without a human turn is skipped");
        let got = sessions(
            "sg.json",
            &convs,
            &opts(2),
            &words,
            &mut StdRng::seed_from_u64(1),
        )
        .unwrap();
        let s = &got[0];
        let shape: Vec<(&str, u32, u32)> = s
            .turns
            .iter()
            .map(|t| (t.user.as_str(), t.input_len, t.output_len))
            .collect();
        assert_eq!(
            shape,
            [
                ("one two", 2, 5),
                ("three", 1, 2),
                ("four five six", 3, DEFAULT_OUTPUT_LEN)
            ]
        );
        assert_eq!(s.think.len(), 2);
        assert_eq!(got[1], got[0], "reused when the file has fewer");
    }

    #[test]
    fn turn_limits_cap_and_filter_conversations() {
        let file = "{\"messages\": [{\"role\": \"user\", \"content\": \"a\"}, {\"role\": \"assistant\", \"content\": \"b\"}, {\"role\": \"user\", \"content\": \"c\"}]}\n\n{\"messages\": [{\"role\": \"user\", \"content\": \"solo\"}]}\n";
        let convs = parse_jsonl("c.jsonl", file).unwrap();
        assert_eq!(convs.len(), 2);
        let mut o = opts(3);
        o.min_turns = 2;
        o.output_len = Some(9);
        let got = sessions("c.jsonl", &convs, &o, &words, &mut StdRng::seed_from_u64(1)).unwrap();
        assert!(got
            .iter()
            .all(|s| s.turns.len() == 2 && s.turns[1].user == "c"));
        assert!(got.iter().flat_map(|s| &s.turns).all(|t| t.output_len == 9));
        o.max_turns = Some(1);
        let capped =
            sessions("c.jsonl", &convs, &o, &words, &mut StdRng::seed_from_u64(1)).unwrap();
        assert!(capped
            .iter()
            .all(|s| s.turns.len() == 1 && s.think.is_empty()));
        o.min_turns = 3;
        let err = sessions("c.jsonl", &convs, &o, &words, &mut StdRng::seed_from_u64(1));
        assert!(err
            .unwrap_err()
            .to_string()
            .contains("--multi-turn-min-turns 3"));
    }

    #[test]
    fn malformed_jsonl_names_file_line_and_field() {
        let bad = "{\"messages\": [{\"role\": \"user\", \"content\": \"a\"}]}\n{\"messages\": [{\"role\": \"user\"}]}\n";
        let err = parse_jsonl("c.jsonl", bad).unwrap_err().to_string();
        assert!(err.starts_with("c.jsonl:2: messages[0]"), "{err}");
        let err = parse_jsonl("c.jsonl", "{\"prompt\": \"x\"}")
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("c.jsonl:1: missing \"messages\""), "{err}");
        let err = parse_jsonl("c.jsonl", "[1,").unwrap_err().to_string();
        assert!(err.starts_with("c.jsonl:1: not valid JSON"), "{err}");
    }
}

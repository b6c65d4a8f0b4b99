//! The `burstgpt` dataset: request and response lengths from the BurstGPT
//! trace (a CSV), as `vllm bench serve --dataset-name burstgpt` uses it.
//!
//! vLLM's semantics, kept exactly:
//! - rows whose `Model` column is `GPT-4` and whose `Response tokens` is
//!   greater than 0 (an empty or non-numeric cell is not);
//! - `--num-prompts` of them drawn as `DataFrame.sample(n, random_state=seed)`
//!   draws them (with replacement when more are asked for than there are),
//!   so the same `--seed` picks the same rows in the same order (see
//!   [`super::mt19937`]); `--disable-shuffle` and `--no-oversample` do not
//!   apply, as in vLLM;
//! - the **third and fourth columns** (by position, whatever their names; in
//!   the BurstGPT files `Request tokens` and `Response tokens`) are the input
//!   and output lengths;
//! - request `i`'s prompt is the token ids `(i + j) mod vocab` for `j` below
//!   its input length, decoded with the tokenizer; `prompt_len` is the input
//!   length, not re-counted after decoding (a sweep step's own draw shifts
//!   `i` past the earlier steps', [`Draw::first`]). The trace's timestamps
//!   are not used for arrivals.
//!
//! Without a tokenizer the ids come from [`SAFE_TOKEN_IDS`] in the same
//! `(i + j)` walk (completions get them as ids); text backends get
//! [`COMMON_WORDS`] in that walk, about one token each.
//!
//! Pure: parses file contents handed to it; no I/O.
use anyhow::{anyhow, bail, Result};

use super::random::{COMMON_WORDS, SAFE_TOKEN_IDS};
use super::tokenizer::TokenCounter;
use super::{Prompt, RequestSpec};

/// Input and output lengths of one kept trace row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BurstRow {
    pub input_len: u32,
    pub output_len: u32,
}

/// The kept rows of a BurstGPT CSV (`Model == "GPT-4"`, `Response tokens > 0`),
/// in file order. Errors name `origin` and the line.
pub fn parse(origin: &str, contents: &str) -> Result<Vec<BurstRow>> {
    let mut lines = contents
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty());
    let Some((_, header)) = lines.next() else {
        bail!("BurstGPT file '{origin}' is empty (expected a CSV with a header line)");
    };
    let header = split_csv(header);
    let column = |name: &str| {
        header.iter().position(|h| h.trim() == name).ok_or_else(|| {
            anyhow!(
                "BurstGPT file '{origin}' has no '{name}' column (header: {}); --dataset-name burstgpt \
                 needs the BurstGPT CSV (Timestamp,Model,Request tokens,Response tokens,...)",
                header.join(",")
            )
        })
    };
    let (model, response) = (column("Model")?, column("Response tokens")?);
    if header.len() < 4 {
        bail!(
            "BurstGPT file '{origin}' has {} columns; the 3rd and 4th give the lengths",
            header.len()
        );
    }
    let mut rows = Vec::new();
    for (n, line) in lines {
        let cells = split_csv(line);
        let cell = |k: usize| cells.get(k).map_or("", |c| c.trim());
        if cell(model) != "GPT-4" || number(cell(response)).is_none_or(|v| v <= 0.0) {
            continue;
        }
        let len = |k: usize| {
            number(cell(k))
                .filter(|v| *v >= 0.0)
                .map(|v| v.trunc().min(f64::from(u32::MAX)) as u32)
                .ok_or_else(|| {
                    anyhow!(
                        "BurstGPT file '{origin}' line {}: column {} is '{}', not a token count",
                        n + 1,
                        k + 1,
                        cell(k)
                    )
                })
        };
        rows.push(BurstRow {
            input_len: len(2)?,
            output_len: len(3)?,
        });
    }
    Ok(rows)
}

/// A numeric cell (pandas reads `12` and `12.0` alike); empty or text is `None`.
fn number(cell: &str) -> Option<f64> {
    cell.parse::<f64>().ok().filter(|v| v.is_finite())
}

/// One CSV line into cells: commas separate, double quotes enclose a cell
/// (`""` inside is a quote).
fn split_csv(line: &str) -> Vec<String> {
    let mut cells = Vec::new();
    let mut cell = String::new();
    let mut quoted = false;
    let mut chars = line.trim_end_matches('\r').chars().peekable();
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                cell.push('"');
                chars.next();
            }
            ('"', _) => quoted = !quoted,
            (',', false) => cells.push(std::mem::take(&mut cell)),
            _ => cell.push(c),
        }
    }
    cells.push(cell);
    cells
}

/// How many requests to draw, with which seed, numbered from where.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Draw {
    pub num_prompts: usize,
    pub seed: u64,
    /// Request `i`'s prompt walk starts at `first + i` (0 as vLLM: a sweep
    /// step shifts it past the earlier steps' prompts).
    pub first: usize,
}

/// `num_prompts` requests from the kept rows, as vLLM samples and builds
/// them (module docs). `text`: the backend takes text prompts.
pub fn sample(
    origin: &str,
    rows: &[BurstRow],
    draw: Draw,
    tokenizer: Option<&TokenCounter>,
    text: bool,
) -> Result<Vec<RequestSpec>> {
    let Draw {
        num_prompts,
        seed,
        first,
    } = draw;
    if rows.is_empty() {
        bail!(
            "BurstGPT file '{origin}' has no row with Model GPT-4 and Response tokens > 0 (the rows vLLM uses)"
        );
    }
    // pandas takes the seed as a 32-bit NumPy seed.
    let picks = super::mt19937::pandas_sample(rows.len(), num_prompts, seed as u32);
    Ok(picks
        .iter()
        .enumerate()
        .map(|(i, &row)| {
            let BurstRow {
                input_len,
                output_len,
            } = rows[row];
            RequestSpec {
                index: i,
                prompt: prompt(first + i, input_len, tokenizer, text),
                prompt_len: input_len,
                output_len,
            }
        })
        .collect())
}

/// How many different prompts the walk gives: request `i`'s and request
/// `i` + this many's open with the same tokens.
pub fn distinct_prompts(tokenizer: Option<&TokenCounter>, text: bool) -> usize {
    match tokenizer {
        Some(tok) => tok.vocab_size() as usize,
        None if text => COMMON_WORDS.len(),
        None => (SAFE_TOKEN_IDS.end - SAFE_TOKEN_IDS.start) as usize,
    }
}

/// Request `i`'s prompt of `len` tokens: ids `(i + j) mod vocab`.
fn prompt(i: usize, len: u32, tokenizer: Option<&TokenCounter>, text: bool) -> Prompt {
    let walk = |modulus: usize| (0..len as usize).map(move |j| (i + j) % modulus.max(1));
    match tokenizer {
        Some(tok) => {
            let ids: Vec<u32> = walk(tok.vocab_size() as usize)
                .map(|id| id as u32)
                .collect();
            Prompt::Text(tok.decode(&ids))
        }
        None if text => Prompt::Text(
            walk(COMMON_WORDS.len())
                .map(|k| COMMON_WORDS[k])
                .collect::<Vec<_>>()
                .join(" "),
        ),
        None => {
            let span = (SAFE_TOKEN_IDS.end - SAFE_TOKEN_IDS.start) as usize;
            Prompt::Tokens(
                walk(span)
                    .map(|k| SAFE_TOKEN_IDS.start + k as u32)
                    .collect(),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CSV: &str = "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n\
        5,ChatGPT,472,18,490,Conversation log\n\
        45,GPT-4,1087,230,1317,Conversation log\n\
        118,GPT-4,417,0,417,Conversation log\n\
        134,GPT-4,2360,24,2384,API log\n\
        140,\"GPT-4\",12.0,7,19,\"API, log\"\n\
        141,GPT-4,5,,5,API log\n";

    #[test]
    fn keeps_gpt4_rows_with_a_response_and_reads_columns_three_and_four() {
        let rows = parse("t.csv", CSV).unwrap();
        let lens: Vec<(u32, u32)> = rows.iter().map(|r| (r.input_len, r.output_len)).collect();
        // ChatGPT, the 0-token response and the empty one are dropped.
        assert_eq!(lens, [(1087, 230), (2360, 24), (12, 7)]);
    }

    #[test]
    fn rows_are_drawn_as_pandas_draws_them() {
        let rows = parse("t.csv", CSV).unwrap();
        // vLLM's filter and DataFrame.sample(n, random_state=0) on this CSV
        // (pandas 3.1.1): n=2 takes positions [2, 1]; n=5 > 3 rows draws
        // with replacement: [0, 1, 0, 1, 1].
        let got = sample("t.csv", &rows, draw(2), None, false).unwrap();
        let lens: Vec<(u32, u32)> = got.iter().map(|r| (r.prompt_len, r.output_len)).collect();
        assert_eq!(lens, [(12, 7), (2360, 24)]);
        let got = sample("t.csv", &rows, draw(5), None, true).unwrap();
        let inputs: Vec<u32> = got.iter().map(|r| r.prompt_len).collect();
        assert_eq!(inputs, [1087, 2360, 1087, 2360, 2360]);
        assert!(got.iter().enumerate().all(|(i, r)| r.index == i));
    }

    fn draw(num_prompts: usize) -> Draw {
        Draw {
            num_prompts,
            seed: 0,
            first: 0,
        }
    }

    #[test]
    fn prompts_walk_i_plus_j() {
        let rows = [BurstRow {
            input_len: 3,
            output_len: 2,
        }];
        let got = sample("t.csv", &rows, draw(2), None, false).unwrap();
        assert_eq!(got[0].prompt, Prompt::Tokens(vec![1000, 1001, 1002]));
        assert_eq!(got[1].prompt, Prompt::Tokens(vec![1001, 1002, 1003]));
        let got = sample("t.csv", &rows, draw(2), None, true).unwrap();
        assert_eq!(got[1].prompt, Prompt::Text("of and to".into()));
        assert_eq!((got[1].prompt_len, got[1].output_len), (3, 2));
        // A later draw's walk starts past the first one's.
        let shifted = Draw {
            first: 5,
            ..draw(2)
        };
        let got = sample("t.csv", &rows, shifted, None, false).unwrap();
        assert_eq!(got[0].prompt, Prompt::Tokens(vec![1005, 1006, 1007]));
        assert_eq!(got[1].index, 1, "numbered within the draw");
    }

    #[test]
    fn with_a_tokenizer_prompts_are_decoded_as_transformers_decodes_them() {
        // transformers' PreTrainedTokenizerFast(tokenizer_file=...).decode of
        // [(i + j) % 49152 for j in range(n)] (special tokens kept, as vLLM).
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data/smollm2-135m-tokenizer.json");
        let tok = TokenCounter::from_path(&path).unwrap();
        assert_eq!(tok.vocab_size(), 49152);
        let rows = [
            BurstRow {
                input_len: 5,
                output_len: 1,
            },
            BurstRow {
                input_len: 4,
                output_len: 1,
            },
            BurstRow {
                input_len: 6,
                output_len: 1,
            },
        ];
        let prompt = |i: usize, len: u32| super::prompt(i, len, Some(&tok), true);
        assert_eq!(
            prompt(0, 5),
            Prompt::Text("<|endoftext|><|im_start|><|im_end|><repo_name><reponame>".into())
        );
        assert_eq!(
            prompt(3, 4),
            Prompt::Text("<repo_name><reponame><file_sep><filename>".into())
        );
        assert_eq!(
            prompt(1000, 6),
            Prompt::Text("() loc\", return\n\n   ized".into())
        );
        // prompt_len is the row's input length, not a re-count.
        let got = sample("t.csv", &rows, draw(3), Some(&tok), false).unwrap();
        assert!(got.iter().all(|r| matches!(r.prompt, Prompt::Text(_))));
        let mut sorted: Vec<u32> = got.iter().map(|r| r.prompt_len).collect();
        sorted.sort_unstable();
        assert_eq!(sorted, [4, 5, 6]);
    }

    #[test]
    fn errors_name_the_file_and_what_is_wrong() {
        let e = parse("x.csv", "a,b,c,d\n1,2,3,4\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("x.csv") && e.contains("'Model'"), "{e}");
        let e = parse(
            "x.csv",
            "Timestamp,Model,Request tokens,Response tokens\n1,GPT-4,many,4\n",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("line 2") && e.contains("'many'"), "{e}");
        let none = parse(
            "x.csv",
            "Timestamp,Model,Request tokens,Response tokens\n1,GPT-3,1,4\n",
        )
        .unwrap();
        let e = sample("x.csv", &none, draw(1), None, true)
            .unwrap_err()
            .to_string();
        assert!(e.contains("no row with Model GPT-4"), "{e}");
    }
}

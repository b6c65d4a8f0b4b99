//! The `sonnet` dataset (vLLM's, deprecated there but still accepted): a
//! text file of poem lines; each prompt asks the model to pick lines from a
//! list that opens with the file's first lines (a prefix every prompt shares)
//! and goes on with lines drawn at random (seeded, with replacement).
//!
//! vLLM's rules, kept here: the average line length and the base prompt's
//! length are counted in tokens; the number of lines is
//! `round((input_len - base) / avg)` (the prefix the same with
//! `prefix_len`, Python's half-to-even rounding); a drawn prompt longer than
//! `--sonnet-input-len` is thrown away and drawn again; there is no
//! oversampling. One difference: vLLM counts (and, for a completions
//! backend, sends) the prompt inside the model's chat template. kneecap has
//! no template engine (a tokenizer.json carries no template), so it sends
//! and counts the plain text on every backend — what vLLM sends to
//! `openai-chat`, where the server applies its own template. Lengths are
//! counted with `--tokenizer` when given, else with the estimate every
//! dataset uses ([`super::sample::estimate_tokens`], 4 characters a token).
//!
//! Pure: takes the file's contents and a seeded RNG; no I/O.

use anyhow::bail;
use rand::rngs::StdRng;
use rand::Rng;

use super::sample::{finish, prompt_tokens, text_request};
use super::tokenizer::TokenCounter;
use super::RequestSpec;

/// The instruction every sonnet prompt opens with (vLLM's wording).
pub const BASE_PROMPT: &str = "Pick as many lines as you can from these poem lines:\n";

/// `--sonnet-input-len`, `--sonnet-output-len`, `--sonnet-prefix-len`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SonnetParams {
    pub input_len: u32,
    pub output_len: u32,
    pub prefix_len: u32,
}

impl Default for SonnetParams {
    /// vLLM's defaults: 550 input, 150 output, 200 prefix tokens.
    fn default() -> Self {
        Self {
            input_len: 550,
            output_len: 150,
            prefix_len: 200,
        }
    }
}

/// How the prompts are put together, from the file and the lengths.
#[derive(Debug, Clone, PartialEq)]
pub struct SonnetPlan {
    /// Tokens of [`BASE_PROMPT`].
    pub base_len: u32,
    /// Mean tokens of one line.
    pub avg_line_len: f64,
    /// Lines in each prompt, the prefix included.
    pub input_lines: usize,
    /// The file's first lines every prompt starts with.
    pub prefix_lines: usize,
}

/// Draws per wanted prompt before giving up: vLLM loops until enough
/// prompts fit, which never ends when none can.
const DRAWS_PER_PROMPT: usize = 100;

/// The file's lines, each with its line ending (Python's `readlines`;
/// `\r\n` read as `\n`).
pub fn lines(contents: &str) -> Vec<String> {
    contents
        .replace("\r\n", "\n")
        .split_inclusive('\n')
        .map(str::to_owned)
        .collect()
}

/// Python's `round`: to the nearest integer, halves to the even one.
fn round_half_even(x: f64) -> i64 {
    x.round_ties_even() as i64
}

/// Lengths and line counts for `lines` (vLLM's arithmetic).
pub fn plan(
    origin: &str,
    lines: &[String],
    params: &SonnetParams,
    tokenizer: Option<&TokenCounter>,
) -> anyhow::Result<SonnetPlan> {
    if lines.is_empty() {
        bail!("dataset file '{origin}' is empty; --dataset-name sonnet needs a text file of poem lines");
    }
    let total: u64 = lines
        .iter()
        .map(|l| u64::from(prompt_tokens(l, tokenizer)))
        .sum();
    let avg_line_len = total as f64 / lines.len() as f64;
    if avg_line_len <= 0.0 {
        bail!(
            "dataset file '{origin}' has only empty lines; --dataset-name sonnet needs poem lines"
        );
    }
    let base_len = prompt_tokens(BASE_PROMPT, tokenizer);
    if params.input_len <= base_len {
        bail!(
            "--sonnet-input-len {} must be more than the base prompt's {base_len} tokens",
            params.input_len
        );
    }
    let lines_for = |len: u32| {
        round_half_even((f64::from(len) - f64::from(base_len)) / avg_line_len).max(0) as usize
    };
    Ok(SonnetPlan {
        base_len,
        avg_line_len,
        input_lines: lines_for(params.input_len),
        prefix_lines: lines_for(params.prefix_len).min(lines.len()),
    })
}

/// `num_prompts` prompts of the file `origin` whose `contents` are poem
/// lines. Prompts longer than `input_len` tokens are drawn again; after
/// `DRAWS_PER_PROMPT` draws per prompt without enough, an error says so.
pub fn generate(
    origin: &str,
    contents: &str,
    params: &SonnetParams,
    num_prompts: usize,
    tokenizer: Option<&TokenCounter>,
    rng: &mut StdRng,
) -> anyhow::Result<Vec<RequestSpec>> {
    let lines = lines(contents);
    let plan = plan(origin, &lines, params, tokenizer)?;
    let prefix: String = lines[..plan.prefix_lines].concat();
    let extra = plan.input_lines.saturating_sub(plan.prefix_lines);
    let max_draws = num_prompts.saturating_mul(DRAWS_PER_PROMPT).max(1000);
    let mut requests = Vec::with_capacity(num_prompts);
    let mut draws = 0;
    while requests.len() < num_prompts {
        if draws == max_draws {
            bail!(
                "--dataset-name sonnet: {} of {num_prompts} prompts fit in --sonnet-input-len {} after \
                 {draws} draws ({} lines of about {:.1} tokens from '{origin}'); raise --sonnet-input-len",
                requests.len(),
                params.input_len,
                plan.input_lines.max(plan.prefix_lines),
                plan.avg_line_len
            );
        }
        draws += 1;
        let mut prompt = format!("{BASE_PROMPT}{prefix}");
        for _ in 0..extra {
            prompt.push_str(&lines[rng.random_range(0..lines.len())]);
        }
        let prompt_len = prompt_tokens(&prompt, tokenizer);
        if prompt_len <= params.input_len {
            requests.push(text_request(prompt, prompt_len, params.output_len));
        }
    }
    Ok(finish(requests, num_prompts, true, rng))
}

#[cfg(test)]
#[path = "sonnet_tests.rs"]
mod tests;

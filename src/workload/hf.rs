//! The `hf` dataset read from local files: which Hugging Face dataset ids
//! kneecap knows ([`HfSet`], vLLM's per-set rules: the columns a prompt is
//! built from, the default output length, the split, the length filter), the
//! parsing of their rows from JSON or JSONL text ([`parse`]) and the sampling
//! ([`sample`]). Image, video and audio sets are refused by [`lookup`] in
//! one line.
//!
//! Like vLLM: rows are shuffled with the seed (unless `--disable-shuffle`),
//! the first `--num-prompts` that pass the set's filter are taken, then
//! oversampled. Unlike vLLM, no chat template is applied (InstructCoder and
//! MT-Bench prompts go as plain text, as with `--skip-chat-template`; MLPerf's
//! system prompt and question as two paragraphs of one text): kneecap has
//! no template engine.
//!
//! Pure: file contents in, requests out; the files are read by
//! [`super::dataset`].

use anyhow::{anyhow, bail};
use rand::rngs::StdRng;
use serde_json::Value;

use super::hf_edit;
use super::sample::{finish, maybe_shuffle, prompt_tokens, text_request, SampleOptions};
use super::tokenizer::TokenCounter;
use super::RequestSpec;

/// A text set kneecap builds prompts for, by vLLM's rules.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum HfSet {
    /// `Aeala/ShareGPT_Vicuna_unfiltered`: `conversations[0].value` is the
    /// prompt, `conversations[1].value` the reference reply.
    ShareGpt,
    /// `likaixin/InstructCoder`: `input`, a blank line, `instruction` and an
    /// ask for code only.
    InstructCoder,
    /// `philschmid/mt-bench`: the first of `turns`.
    MtBench,
    /// `AI-MO/*`: `problem`, with `solution` as the reference.
    Aimo,
    /// `mgoin/mlperf-inference-llama*-data`: `system_prompt` and
    /// `question` (vLLM sends them as a system and a user message through
    /// the chat template; here one text, the two joined by a blank line),
    /// with `output` as the reference. Its length filter applies even to
    /// a fixed `--hf-output-len`, as in vLLM.
    MlPerf,
    /// `zed-industries/zeta`: `events` and `input` in the next-edit
    /// instruction ([`hf_edit::zeta_prompt`]); the output is `output` from its
    /// editable-region marker on. vLLM ignores `--hf-output-len` here and
    /// filters nothing; so does kneecap.
    Zeta,
    /// `vdaita/edit_5k_char`, `vdaita/edit_10k_char`: `code` and
    /// `change_request` in the edit instruction ([`hf_edit::blazedit_prompt`]), rows
    /// whose `norm_distance` is within `--blazedit-min-distance` ..
    /// `--blazedit-max-distance` (0..1 by default); 4000 tokens out.
    Blazedit {
        min_distance: f64,
        max_distance: f64,
    },
}

/// Blazedit with vLLM's default distance range (every row).
const BLAZEDIT: HfSet = HfSet::Blazedit {
    min_distance: 0.0,
    max_distance: 1.0,
};

/// The ids of the sets kneecap reads, each with its set.
pub const SUPPORTED: [(&str, HfSet); 11] = [
    ("Aeala/ShareGPT_Vicuna_unfiltered", HfSet::ShareGpt),
    ("likaixin/InstructCoder", HfSet::InstructCoder),
    ("philschmid/mt-bench", HfSet::MtBench),
    ("AI-MO/aimo-validation-aime", HfSet::Aimo),
    ("AI-MO/NuminaMath-1.5", HfSet::Aimo),
    ("AI-MO/NuminaMath-CoT", HfSet::Aimo),
    ("mgoin/mlperf-inference-llama2-data", HfSet::MlPerf),
    ("mgoin/mlperf-inference-llama3.1-data", HfSet::MlPerf),
    ("zed-industries/zeta", HfSet::Zeta),
    ("vdaita/edit_5k_char", BLAZEDIT),
    ("vdaita/edit_10k_char", BLAZEDIT),
];

/// vLLM's sets with images, video or audio: refused (text only here).
const MEDIA: [&str; 11] = [
    "lmarena-ai/VisionArena-Chat",
    "lmarena-ai/vision-arena-bench-v0.1",
    "yale-nlp/MMVU",
    "lmms-lab/LLaVA-OneVision-Data",
    "Lin-Chen/MMStar",
    "openslr/librispeech_asr",
    "facebook/voxpopuli",
    "LIUM/tedlium",
    "edinburghcstr/ami",
    "speechcolab/gigaspeech",
    "kensho/spgispeech",
];

/// The supported ids, comma-separated (for messages).
pub fn supported_list() -> String {
    SUPPORTED.map(|(id, _)| id).join(", ")
}

/// The set of the Hugging Face id `id`; refusals say what to do instead.
pub fn lookup(id: &str) -> anyhow::Result<HfSet> {
    if let Some((_, set)) = SUPPORTED.iter().find(|(known, _)| *known == id) {
        return Ok(*set);
    }
    if MEDIA.contains(&id) {
        bail!(
            "--hf-name {id}: an image, video or audio set; kneecap's hf reads text sets only ({}); \
             for images use --dataset-name random-mm, or custom rows with \"images\"",
            supported_list()
        );
    }
    bail!(
        "--hf-name {id}: not a dataset vLLM's hf reads as text; use one of {}",
        supported_list()
    )
}

impl HfSet {
    /// vLLM's output length when `--hf-output-len` is not given; `None`:
    /// the reference answer's token count.
    pub fn default_output_len(self) -> Option<u32> {
        match self {
            HfSet::InstructCoder => Some(200),
            HfSet::MtBench => Some(256),
            HfSet::Blazedit { .. } => Some(4000),
            HfSet::ShareGpt | HfSet::Aimo | HfSet::MlPerf | HfSet::Zeta => None,
        }
    }

    /// The split vLLM loads whatever `--hf-split` says (`None`: the flag's).
    pub fn forced_split(self) -> Option<&'static str> {
        match self {
            HfSet::ShareGpt => None,
            _ => Some("train"),
        }
    }

    /// vLLM's length filter when the output length is the reference's:
    /// (most prompt tokens, most prompt + output tokens); both at least 4.
    fn limits(self) -> (u32, u32) {
        match self {
            HfSet::Aimo => (2048, 32000),
            _ => (1024, 2048),
        }
    }

    /// Blazedit with the distance range of `--blazedit-min-distance` and
    /// `--blazedit-max-distance` (each `None`: vLLM's default, 0 and 1);
    /// the other sets as they are.
    pub fn with_distances(self, min: Option<f64>, max: Option<f64>) -> Self {
        match self {
            HfSet::Blazedit {
                min_distance,
                max_distance,
            } => HfSet::Blazedit {
                min_distance: min.unwrap_or(min_distance),
                max_distance: max.unwrap_or(max_distance),
            },
            other => other,
        }
    }

    /// Whether vLLM's length filter applies to a row: MLPerf filters every
    /// row, zeta none, the others the rows whose output length is the
    /// reference's (`fixed`: the output length is not).
    fn filters(self, fixed: bool) -> bool {
        match self {
            HfSet::MlPerf => true,
            HfSet::Zeta => false,
            _ => !fixed,
        }
    }

    /// The output length the set takes: `--hf-output-len`, else its
    /// default; `None`: the reference's. Zeta always takes the reference's.
    fn fixed_output_len(self, flag: Option<u32>) -> Option<u32> {
        match self {
            HfSet::Zeta => None,
            _ => flag.or(self.default_output_len()),
        }
    }
}

/// Shortest prompt and reference kept when lengths come from the reference.
const MIN_LEN: u32 = 4;

/// One usable row: its prompt and, for the sets that have one, the
/// reference answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HfRow {
    pub prompt: String,
    pub reference: Option<String>,
}

/// The rows of one file (`origin`), a JSON array or JSONL, as `set` reads
/// them. ShareGPT rows with fewer than two turns are skipped (vLLM's
/// filter); a row without a field the set needs is an error naming the file,
/// line and field.
pub fn parse(set: HfSet, origin: &str, contents: &str) -> anyhow::Result<Vec<HfRow>> {
    let mut rows = Vec::new();
    for (line, text) in records(contents) {
        let v: Value = serde_json::from_str(text).map_err(|e| {
            anyhow!(
                "{origin}:{}: not valid JSON ({e}); hf files are JSON arrays or JSONL, one row per object",
                line + e.line() - 1
            )
        })?;
        if let Some(row) = row(set, &v).map_err(|field| anyhow!("{origin}:{line}: {field}"))? {
            rows.push(row);
        }
    }
    Ok(rows)
}

/// What `set` takes from one row; `Err` says which field is missing.
fn row(set: HfSet, v: &Value) -> Result<Option<HfRow>, String> {
    let s = |field: &str| -> Result<String, String> {
        v.get(field)
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| format!("field \"{field}\" missing or not a string"))
    };
    Ok(Some(match set {
        HfSet::ShareGpt => match sharegpt(v)? {
            Some(row) => row,
            None => return Ok(None),
        },
        HfSet::InstructCoder => HfRow {
            prompt: format!(
                "{}\n\n{} Just output the code, do not include any explanation.",
                s("input")?,
                s("instruction")?
            ),
            reference: None,
        },
        HfSet::MtBench => HfRow {
            prompt: v
                .get("turns")
                .and_then(|t| t.get(0))
                .and_then(Value::as_str)
                .map(str::to_owned)
                .ok_or("field \"turns[0]\" missing or not a string")?,
            reference: None,
        },
        HfSet::Aimo => HfRow {
            prompt: s("problem")?,
            reference: Some(s("solution")?),
        },
        HfSet::Zeta => HfRow {
            prompt: hf_edit::zeta_prompt(&s("events")?, &s("input")?),
            reference: Some(hf_edit::zeta_expected(&s("output")?).to_owned()),
        },
        HfSet::Blazedit {
            min_distance,
            max_distance,
        } => {
            let distance = v
                .get("norm_distance")
                .and_then(Value::as_f64)
                .ok_or("field \"norm_distance\" missing or not a number")?;
            if distance < min_distance || distance > max_distance {
                return Ok(None);
            }
            HfRow {
                prompt: hf_edit::blazedit_prompt(&s("code")?, &s("change_request")?),
                reference: None,
            }
        }
        HfSet::MlPerf => HfRow {
            prompt: format!("{}\n\n{}", s("system_prompt")?, s("question")?),
            reference: Some(s("output")?),
        },
    }))
}

/// ShareGPT's first two turns; `None` for a row with fewer (vLLM skips it).
fn sharegpt(v: &Value) -> Result<Option<HfRow>, String> {
    let turns = v
        .get("conversations")
        .and_then(Value::as_array)
        .ok_or("field \"conversations\" missing or not a list")?;
    if turns.len() < 2 {
        return Ok(None);
    }
    let value = |i: usize| {
        turns[i]
            .get("value")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or(format!(
                "field \"conversations[{i}].value\" missing or not a string"
            ))
    };
    Ok(Some(HfRow {
        prompt: value(0)?,
        reference: Some(value(1)?),
    }))
}

/// Each record of a JSON array or JSONL text with the 1-based line it starts
/// on (blank JSONL lines skipped).
fn records(contents: &str) -> Vec<(usize, &str)> {
    if contents.trim_start().starts_with('[') {
        return array_elements(contents);
    }
    contents
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| (i + 1, l))
        .collect()
}

/// The top-level elements of a JSON array, each with its starting line. An
/// unbalanced text yields what was closed and the rest as one element (its
/// parse then reports the error).
fn array_elements(text: &str) -> Vec<(usize, &str)> {
    let (mut out, mut depth, mut line) = (Vec::new(), 0usize, 1usize);
    let (mut in_str, mut escaped, mut start) = (false, false, None::<(usize, usize)>);
    for (i, c) in text.char_indices() {
        if c == '\n' {
            line += 1;
        }
        if in_str {
            (escaped, in_str) = match (escaped, c) {
                (true, _) => (false, true),
                (false, '\\') => (true, true),
                (false, '"') => (false, false),
                _ => (false, true),
            };
            continue;
        }
        match c {
            '[' | '{' if depth == 0 => depth = 1,
            ',' | ']' | '}' if depth == 1 => {
                if let Some((at, l)) = start.take() {
                    out.push((l, text[at..i].trim_end()));
                }
                if c != ',' {
                    depth = 0;
                }
            }
            _ if depth == 1 && start.is_none() && !c.is_whitespace() => {
                start = Some((i, line));
                depth += usize::from(c == '[' || c == '{');
                in_str = c == '"';
            }
            '[' | '{' => depth += 1,
            ']' | '}' => depth = depth.saturating_sub(1),
            '"' => in_str = true,
            _ => {}
        }
    }
    if let Some((at, l)) = start {
        out.push((l, &text[at..]));
    }
    out
}

/// Shuffle (unless disabled), take the first `num_prompts` rows passing the
/// filter, oversample. `output_len`: `--hf-output-len` (or `--output-len`).
pub fn sample(
    set: HfSet,
    origin: &str,
    mut rows: Vec<HfRow>,
    output_len: Option<u32>,
    opts: &SampleOptions,
    tokenizer: Option<&TokenCounter>,
    rng: &mut StdRng,
) -> anyhow::Result<Vec<RequestSpec>> {
    let fixed = set.fixed_output_len(output_len);
    let (max_prompt, max_total) = set.limits();
    let n_rows = rows.len();
    maybe_shuffle(&mut rows, opts, rng);
    let mut requests = Vec::new();
    for row in rows {
        if requests.len() >= opts.num_prompts {
            break;
        }
        let prompt_len = prompt_tokens(&row.prompt, tokenizer);
        let out = match (fixed, &row.reference) {
            (Some(n), _) => n,
            (None, Some(r)) => reference_tokens(set, r, tokenizer),
            (None, None) => no_output_len(set)?,
        };
        let filtered = set.filters(fixed.is_some());
        let short = prompt_len < MIN_LEN || out < MIN_LEN;
        if filtered && (short || prompt_len > max_prompt || prompt_len + out > max_total) {
            continue;
        }
        requests.push(text_request(row.prompt, prompt_len, out));
    }
    if let (
        0,
        HfSet::Blazedit {
            min_distance,
            max_distance,
        },
    ) = (n_rows, set)
    {
        bail!(
            "no row of '{origin}' has a norm_distance within {min_distance}..={max_distance} \
             (--blazedit-min-distance, --blazedit-max-distance)"
        );
    }
    if requests.is_empty() && opts.num_prompts > 0 {
        bail!(
            "no row of '{origin}' passes the length filter ({n_rows} rows; prompt {MIN_LEN}..={max_prompt} tokens, \
             reference at least {MIN_LEN}, together at most {max_total}){}",
            if set.filters(true) {
                ", which this set applies to every row, as vLLM does"
            } else {
                "; set --hf-output-len to skip it"
            }
        );
    }
    Ok(finish(requests, opts.num_prompts, opts.no_oversample, rng))
}

/// The reference answer's tokens, as vLLM counts them: with the tokenizer's
/// special tokens, except for MLPerf (without).
fn reference_tokens(set: HfSet, text: &str, tokenizer: Option<&TokenCounter>) -> u32 {
    match (set, tokenizer) {
        (HfSet::MlPerf, Some(tok)) => tok.count(text),
        _ => prompt_tokens(text, tokenizer),
    }
}

/// A set with neither a default output length nor a reference (none today).
fn no_output_len(set: HfSet) -> anyhow::Result<u32> {
    bail!("hf set {set:?} has no output length: pass --hf-output-len")
}

#[cfg(test)]
#[path = "hf_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "hf_edit_tests.rs"]
mod edit_tests;

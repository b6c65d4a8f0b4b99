//! Building a `--multi-turn` workload: synthetic sessions from the random
//! dataset (opening turns of `--random-input-len`, later ones of
//! `--per-turn-input-len`), or every turn of a ShareGPT file or a JSONL file
//! of conversations (read here, parsed by `workload::session_files`).

use crate::config::{RunConfig, SessionConfig};
use crate::workload::dataset::{self, dataset_rng, DatasetConfig, DatasetKind};
use crate::workload::sample::estimate_tokens;
use crate::workload::session::{self, SessionSpec};
use crate::workload::session_files::{self, FileSessionOptions};
use crate::workload::tokenizer::TokenCounter;
use crate::workload::{Prompt, RequestSpec};
use anyhow::{anyhow, bail, Result};
use std::path::Path;

/// Salt for the draws of turn counts and think times (apart from the prompts').
const SESSION_SEED_SALT: u64 = 0x7365_7373_696f_6e73;

/// The planned sessions of a run.
pub fn build(
    cfg: &RunConfig,
    sc: &SessionConfig,
    tokenizer: Option<&TokenCounter>,
) -> Result<Vec<SessionSpec>> {
    Ok(draw(cfg, sc, cfg.load.num_prompts.max(1), tokenizer)?.0)
}

/// `n` sessions drawn as a run draws its own (the first `k` of them are a
/// run's with `--num-prompts k`), and for a file how many of its
/// conversations are usable: the sessions repeat after that many.
pub fn draw(
    cfg: &RunConfig,
    sc: &SessionConfig,
    n: usize,
    tokenizer: Option<&TokenCounter>,
) -> Result<(Vec<SessionSpec>, Option<usize>)> {
    let mut rng = dataset_rng(cfg.dataset.seed ^ SESSION_SEED_SALT);
    let count = |text: &str| match tokenizer {
        Some(t) => t.count(text),
        None => estimate_tokens(text),
    };
    let file_opts = |output_len: Option<u32>| FileSessionOptions {
        sessions: n,
        output_len,
        min_turns: sc.min_turns.max(1),
        max_turns: sc.max_turns,
        disable_shuffle: cfg.dataset.disable_shuffle,
        think: sc.params.think,
    };
    let (origin, convs, output_len) = match &cfg.dataset.kind {
        DatasetKind::Random { .. } => {
            return Ok((synthetic(&cfg.dataset, sc, n, tokenizer, &mut rng)?, None))
        }
        DatasetKind::ShareGpt { path, output_len } => {
            let (origin, text) = read(path)?;
            let convs = session_files::parse_sharegpt(&origin, &text)?;
            (origin, convs, *output_len)
        }
        DatasetKind::Custom { path, output_len } => {
            let (origin, text) = read(path)?;
            let convs = session_files::parse_jsonl(&origin, &text)?;
            let fixed = u32::try_from(*output_len).ok().filter(|&l| l > 0);
            (origin, convs, fixed)
        }
        _ => bail!("--multi-turn takes --dataset-name random, sharegpt or custom"),
    };
    let opts = file_opts(output_len);
    let sessions = session_files::sessions(&origin, &convs, &opts, &count, &mut rng)?;
    let usable = session_files::usable(&convs, opts.min_turns).len();
    Ok((sessions, Some(usable)))
}

/// Opening turns as the random dataset makes them; later turns the same
/// with `--per-turn-input-len` (and another seed, so they differ).
fn synthetic(
    ds: &DatasetConfig,
    sc: &SessionConfig,
    n: usize,
    tokenizer: Option<&TokenCounter>,
    rng: &mut rand::rngs::StdRng,
) -> Result<Vec<SessionSpec>> {
    let first = dataset::load(
        &DatasetConfig {
            num_prompts: n,
            ..ds.clone()
        },
        tokenizer,
    )?;
    let mut later_cfg = DatasetConfig {
        num_prompts: n * (sc.params.turns.max as usize).saturating_sub(1).max(1),
        seed: ds.seed.wrapping_add(1),
        ..ds.clone()
    };
    if let DatasetKind::Random {
        input_len,
        prefix_len,
        ..
    } = &mut later_cfg.kind
    {
        if sc.per_turn_input_len > 0 {
            *input_len = sc.per_turn_input_len;
        }
        // The shared prefix opens a conversation; later turns add only their own text.
        *prefix_len = 0;
    }
    let later = dataset::load(&later_cfg, tokenizer)?;
    Ok(session::synthetic(&first, &later, &sc.params, rng))
}

/// The opening turn of each session as a single request (the ready check
/// and warm-ups send the first one).
pub fn first_turns(sessions: &[SessionSpec]) -> Vec<RequestSpec> {
    sessions
        .iter()
        .enumerate()
        .filter_map(|(index, s)| {
            let t = s.turns.first()?;
            Some(RequestSpec {
                index,
                prompt: Prompt::Text(t.user.clone()),
                prompt_len: t.input_len,
                output_len: t.output_len,
            })
        })
        .collect()
}

fn read(path: &Path) -> Result<(String, String)> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        anyhow!(
            "cannot read dataset file '{}': {e}; check --dataset-path",
            path.display()
        )
    })?;
    Ok((path.display().to_string(), text))
}

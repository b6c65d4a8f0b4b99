//! Each sweep step's prompts. By default every step draws its own, so a
//! server's prefix cache (on by default in vLLM, and large) holds nothing a
//! step sends, as with fresh production traffic; `--reuse-prompts` sends the
//! first step's prompts at every step (a warm-cache benchmark).
//!
//! What "its own" means per workload:
//! - synthetic datasets (random, random-rerank, prefix_repetition) and
//!   BurstGPT are drawn again with the step's seed
//!   ([`crate::sweep::draws::step_seed`]; step 0 keeps `--seed`, so a
//!   one-step sweep sends `kneecap run`'s prompts). A shared prefix
//!   (`--random-prefix-len`, prefix_repetition's prefixes) is the designed
//!   sharing *within* a step: each step draws its own, and the step's
//!   warm-up window absorbs the one miss per prefix;
//! - sonnet prompts are drawn again with the step's seed (random poem
//!   lines after the `--sonnet-prefix-len` lines every prompt shares, the
//!   designed sharing, not warned);
//! - a dataset file (ShareGPT, custom, a local `hf` dataset) is shuffled
//!   once with `--seed`, and
//!   step `k` takes the `k`-th window of `--num-prompts` prompts: no two
//!   steps share a prompt until the file runs out, which is warned once;
//! - `--multi-turn` sessions: synthetic ones are drawn again with the
//!   step's seed, a file's take successive windows as above; the history
//!   each turn resends is the designed sharing, kept;
//! - a trace's hash ids are expanded with the step's own salt, so the
//!   sharing the trace designed is kept within a step and nothing carries
//!   over from an earlier one (a trace-speed sweep, `super::trace`, did so
//!   already).
//!
//! The calibration probe's levels draw from their own stream (or the
//! windows after the steps'), so the probe never warms the cache with a
//! step's prompts. All draws depend on `--seed` and the step's index only,
//! so every shard of a sharded sweep sends the same prompts per step.

use super::Ctx;
use crate::cmd::prepare::Prepared;
use crate::cmd::sessions;
use crate::config::sweep::SweepConfig;
use crate::result::sweep::{PromptDraw, StepPrompts, StepResult};
use crate::sweep::draws::{probe_seed, step_seed};
use crate::sweep::knee::SearchPlan;
use crate::workload::dataset::{self, DatasetConfig, DatasetKind, HfConfig};
use crate::workload::session::SessionSpec;
use crate::workload::trace_expand::{self, ExpandParams};
use crate::workload::{burstgpt, RequestSpec};
use anyhow::Result;
use std::sync::Arc;

/// Windows of a dataset file kept for the calibration probe after the steps'.
const PROBE_WINDOWS: usize = 4;
/// Hits a workload without designed sharing may show before its step is
/// warned: fresh random prompts hit nothing, and vLLM's random walk (with a
/// tokenizer) collides by chance on about one prompt in |vocab| / N.
const HIT_ALLOWANCE: f64 = 0.05;
/// Prompt tokens per request a chat template's shared head may add to the
/// hits (a system header: one or two 16-token KV blocks).
const TEMPLATE_TOKENS: f64 = 32.0;

/// One step's (or probe level's) prompts and how they were chosen.
pub(crate) struct Drawn {
    pub(crate) specs: Arc<Vec<RequestSpec>>,
    /// `--multi-turn`: the sessions (`specs` holds their opening turns).
    pub(crate) sessions: Option<Arc<Vec<SessionSpec>>>,
    pub(crate) row: StepPrompts,
}

/// A step's draw or a probe level's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Which {
    Step(usize),
    Probe(usize),
}

/// Where the prompts of every step come from.
enum Source {
    /// `--reuse-prompts`: the prepared prompts every time.
    Reused,
    /// Drawn again with the step's seed.
    Seeded,
    /// A trace's rows expanded with the step's salt.
    Trace,
    /// Successive windows of a dataset file's shuffled prompts.
    Window(Arc<Vec<RequestSpec>>),
    /// Successive windows of a file's sessions.
    SessionWindow(Arc<Vec<SessionSpec>>),
}

/// The sweep's prompt source, set up once before the first step.
pub(crate) struct Prompts {
    source: Source,
    /// Prompts (or sessions) per step: what the first step sends.
    per_step: usize,
    /// Steps the sweep may run (the windows a file is cut into).
    steps: usize,
    /// Distinct prompts the dataset can give, when it can run out.
    distinct: Option<usize>,
    /// Why the workload shares prefixes by design (no hit-rate warning).
    sharing: Option<&'static str>,
}

impl Prompts {
    /// The source for `cfg`'s workload, and the one-line warning when the
    /// dataset cannot give every step prompts of its own.
    pub(crate) fn new(cfg: &SweepConfig, p: &Prepared) -> Result<(Self, Option<String>)> {
        let (steps, at_most) = match &cfg.plan {
            SearchPlan::List(loads) => (loads.len().max(1), ""),
            SearchPlan::Auto { max_steps, .. } => ((*max_steps).max(1), "at most "),
        };
        let per_step = p
            .sessions
            .as_ref()
            .map_or(p.specs.len(), |s| s.len())
            .max(1);
        let windows = per_step * (steps + PROBE_WINDOWS);
        let ds = &cfg.run.dataset;
        let (source, distinct, what) = match (&ds.kind, &cfg.run.sessions) {
            _ if cfg.reuse_prompts => (Source::Reused, None, String::new()),
            _ if p.trace.is_some() => (Source::Trace, None, String::new()),
            (DatasetKind::ShareGpt { path, .. } | DatasetKind::Custom { path, .. }, Some(sc)) => {
                let tok = p.tokenizer.as_ref();
                let (pool, usable) = sessions::draw(&cfg.run, sc, windows, tok)?;
                let what = format!("'{}' (its conversations)", path.display());
                let distinct = usable.unwrap_or(pool.len());
                (Source::SessionWindow(Arc::new(pool)), Some(distinct), what)
            }
            (DatasetKind::ShareGpt { path, .. } | DatasetKind::Custom { path, .. }, None)
            | (DatasetKind::Hf(HfConfig { path, .. }), None) => {
                let pool = dataset::load(&file_pool(ds, windows), p.tokenizer.as_ref())?;
                let (distinct, what) = (pool.len(), format!("'{}'", path.display()));
                (Source::Window(Arc::new(pool)), Some(distinct), what)
            }
            (DatasetKind::BurstGpt { .. }, _) => {
                let walks = burstgpt::distinct_prompts(p.tokenizer.as_ref(), ds.chat);
                let what = "the BurstGPT prompt walk".to_string();
                (Source::Seeded, Some(walks), what)
            }
            _ => (Source::Seeded, None, String::new()),
        };
        let prompts = Prompts {
            source,
            per_step,
            steps,
            distinct,
            sharing: designed_sharing(cfg, p),
        };
        let warning = distinct.and_then(|d| repeat_warning(&what, d, per_step, steps, at_most));
        Ok((prompts, warning))
    }

    /// The index a trace-speed step expands its trace with (0 for every
    /// step with `--reuse-prompts`).
    pub(crate) fn trace_index(&self, step: usize) -> usize {
        match self.source {
            Source::Reused => 0,
            _ => step,
        }
    }

    /// Step `k`'s hit-rate warning: a workload with no designed sharing
    /// whose step the server served more than a few percent of from its
    /// prefix cache; `sent` is how many requests the step sent.
    pub(crate) fn hit_warning(&self, step: &StepResult, sent: usize) -> Option<String> {
        if self.sharing.is_some() {
            return None;
        }
        let rate = step.prefix_cache.as_ref()?.hit_rate?;
        let bound = hit_bound(step.mean_input_tokens);
        if rate <= bound {
            return None;
        }
        let cause = if sent > self.per_step {
            format!(
                "the step sent {sent} requests over {} prompts, so it resent its own; raise --num-prompts above {sent}",
                self.per_step
            )
        } else if step.prompts.is_some_and(|p| p.draw == PromptDraw::Repeated) {
            "the dataset ran out, and this step repeats prompts an earlier step sent".into()
        } else {
            "another client may be sending the same prompts, or the dataset's prompts share prefixes".into()
        };
        Some(format!(
            "prefix-cache hit rate {:.1}% on prompts with no designed sharing (above the {:.1}% fresh prompts and a chat template explain): the server skipped that share of the prefill, so TTFT and the knee look better than fresh traffic would; {cause}",
            rate * 100.0,
            bound * 100.0
        ))
    }
}

/// Step `k`'s (or a probe level's) prompts.
pub(crate) fn draw(ctx: &Ctx<'_>, which: Which) -> Drawn {
    match try_draw(ctx, which) {
        Ok(d) => d,
        Err(e) => {
            // Cannot happen for a workload that was prepared (the same
            // config with another seed), but a sweep must not stop on it.
            super::say(
                ctx,
                format!("kneecap sweep: warning: drawing prompts for {which:?} failed ({e:#}); it sends the first step's"),
            );
            prepared(&ctx.prepared, PromptDraw::Reused, ctx.cfg.run.dataset.seed)
        }
    }
}

fn try_draw(ctx: &Ctx<'_>, which: Which) -> Result<Drawn> {
    let (p, prompts, ds) = (&ctx.prepared, &ctx.prompts, &ctx.cfg.run.dataset);
    let seed = match which {
        Which::Step(k) => step_seed(ds.seed, k),
        Which::Probe(j) => probe_seed(ds.seed, j),
    };
    let first_step = which == Which::Step(0);
    Ok(match &prompts.source {
        Source::Reused => prepared(p, PromptDraw::Reused, ds.seed),
        _ if first_step => {
            let mut d = prepared(p, PromptDraw::Fresh, ds.seed);
            if matches!(prompts.source, Source::Window(_) | Source::SessionWindow(_)) {
                d.row.first_row = Some(0);
            }
            if matches!(prompts.source, Source::Trace) {
                d.row.trace_salt = Some(0);
            }
            d
        }
        Source::Seeded => seeded(ctx, which, seed)?,
        Source::Trace => trace(p, ds, which, seed),
        Source::Window(pool) => {
            let (start, draw) = prompts.window(which);
            let specs = (0..prompts.per_step)
                .map(|j| {
                    let mut spec = pool[(start + j) % pool.len()].clone();
                    spec.index = j;
                    spec
                })
                .collect();
            windowed(Arc::new(specs), None, draw, ds.seed, start)
        }
        Source::SessionWindow(pool) => {
            let (start, draw) = prompts.window(which);
            let picked: Vec<SessionSpec> = (0..prompts.per_step)
                .map(|j| pool[(start + j) % pool.len()].clone())
                .collect();
            let specs = Arc::new(sessions::first_turns(&picked));
            windowed(specs, Some(Arc::new(picked)), draw, ds.seed, start)
        }
    })
}

impl Prompts {
    /// Where `which`'s window starts in the pool, and whether it reaches
    /// past the dataset's distinct prompts into an earlier step's.
    fn window(&self, which: Which) -> (usize, PromptDraw) {
        let slot = match which {
            Which::Step(k) => k,
            Which::Probe(j) => self.steps + j % PROBE_WINDOWS,
        };
        let distinct = self.distinct.unwrap_or(usize::MAX).max(1);
        ((slot * self.per_step) % distinct, self.step_draw(which))
    }

    /// `Repeated` for a later step whose prompts reach past the dataset's
    /// distinct ones into an earlier step's.
    fn step_draw(&self, which: Which) -> PromptDraw {
        match (which, self.distinct) {
            (Which::Step(k), Some(d)) if k > 0 && (k + 1).saturating_mul(self.per_step) > d => {
                PromptDraw::Repeated
            }
            _ => PromptDraw::Fresh,
        }
    }

    /// The prompts row of trace-speed step `k` ([`super::trace`] expands
    /// the trace itself, with [`Prompts::trace_index`]).
    pub(crate) fn trace_speed_row(&self, seed: u64, k: usize) -> StepPrompts {
        let draw = match self.source {
            Source::Reused => PromptDraw::Reused,
            _ => PromptDraw::Fresh,
        };
        StepPrompts {
            draw,
            seed,
            first_row: None,
            trace_salt: Some(super::trace::salt(self.trace_index(k), 0)),
        }
    }
}

/// The prepared prompts (the first step's).
fn prepared(p: &Prepared, draw: PromptDraw, seed: u64) -> Drawn {
    Drawn {
        specs: p.specs.clone(),
        sessions: p.sessions.clone(),
        row: StepPrompts {
            draw,
            seed,
            first_row: None,
            trace_salt: None,
        },
    }
}

fn windowed(
    specs: Arc<Vec<RequestSpec>>,
    sessions: Option<Arc<Vec<SessionSpec>>>,
    draw: PromptDraw,
    seed: u64,
    start: usize,
) -> Drawn {
    Drawn {
        specs,
        sessions,
        row: StepPrompts {
            draw,
            seed,
            first_row: Some(start),
            trace_salt: None,
        },
    }
}

/// The workload drawn again with `seed` (BurstGPT's walk shifted past the
/// earlier steps').
fn seeded(ctx: &Ctx<'_>, which: Which, seed: u64) -> Result<Drawn> {
    let (cfg, p) = (&ctx.cfg.run, &ctx.prepared);
    let mut run = cfg.clone();
    run.dataset.seed = seed;
    let tok = p.tokenizer.as_ref();
    let (specs, sessions) = match &cfg.sessions {
        Some(sc) => {
            let (s, _) = sessions::draw(&run, sc, cfg.load.num_prompts.max(1), tok)?;
            (sessions::first_turns(&s), Some(Arc::new(s)))
        }
        None => {
            let slot = match which {
                Which::Step(k) => k,
                Which::Probe(j) => ctx.prompts.steps + j,
            };
            let first = slot * ctx.prompts.per_step;
            (dataset::load_at(&run.dataset, first, tok)?, None)
        }
    };
    Ok(Drawn {
        specs: Arc::new(specs),
        sessions,
        row: StepPrompts {
            draw: ctx.prompts.step_draw(which),
            seed,
            first_row: None,
            trace_salt: None,
        },
    })
}

/// The trace's rows expanded with `which`'s salt.
fn trace(p: &Prepared, ds: &DatasetConfig, which: Which, seed: u64) -> Drawn {
    let salt = match which {
        Which::Step(k) => super::trace::salt(k, 0),
        Which::Probe(j) => (1 << 63) | j as u64,
    };
    let rows = p.trace.as_deref().map_or(&[][..], |t| &t.rows[..]);
    let params = ExpandParams {
        chunk_size: p.trace.as_deref().map_or(1, |t| t.chunk_size),
        seed: ds.seed,
        salt,
        chat: ds.chat,
    };
    let specs = trace_expand::expand(rows, &params, p.tokenizer.as_ref()).requests;
    Drawn {
        specs: Arc::new(specs),
        sessions: None,
        row: StepPrompts {
            draw: PromptDraw::Fresh,
            seed,
            first_row: None,
            trace_salt: Some(salt),
        },
    }
}

/// A dataset file's first `n` distinct prompts in its shuffled order (the
/// order `kneecap run` takes its first `--num-prompts` from).
fn file_pool(ds: &DatasetConfig, n: usize) -> DatasetConfig {
    let all_rows = matches!(ds.kind, DatasetKind::Custom { .. }) && ds.num_prompts == 0;
    DatasetConfig {
        num_prompts: if all_rows { 0 } else { n },
        no_oversample: true,
        ..ds.clone()
    }
}

/// Why `cfg`'s workload shares prefixes by design, if it does.
fn designed_sharing(cfg: &SweepConfig, p: &Prepared) -> Option<&'static str> {
    if cfg.reuse_prompts {
        return Some("--reuse-prompts");
    }
    if cfg.run.sessions.is_some() {
        return Some("sessions resend their history");
    }
    if p.trace.is_some() {
        return Some("the trace's hash ids");
    }
    match cfg.run.dataset.kind {
        DatasetKind::Random { prefix_len, .. } if prefix_len > 0 => Some("--random-prefix-len"),
        DatasetKind::PrefixRepetition(_) => Some("prefix_repetition"),
        DatasetKind::Sonnet { params, .. } if params.prefix_len > 0 => Some("--sonnet-prefix-len"),
        _ => None,
    }
}

/// The hit rate above which a step without designed sharing is warned:
/// [`HIT_ALLOWANCE`] plus a chat template's head ([`TEMPLATE_TOKENS`]) over
/// the mean prompt.
pub(crate) fn hit_bound(mean_input_tokens: f64) -> f64 {
    let template = if mean_input_tokens > 0.0 {
        TEMPLATE_TOKENS / mean_input_tokens
    } else {
        0.0
    };
    (HIT_ALLOWANCE + template).min(1.0)
}

/// The warning for a dataset of `distinct` prompts, `per_step` a step,
/// over `steps` steps: how many of them repeat an earlier step's prompts.
pub(crate) fn repeat_warning(
    what: &str,
    distinct: usize,
    per_step: usize,
    steps: usize,
    at_most: &str,
) -> Option<String> {
    let fresh = (distinct / per_step.max(1)).max(1);
    if fresh >= steps {
        return None;
    }
    Some(format!(
        "kneecap sweep: warning: {what} gives {distinct} distinct prompts and each step sends up to {per_step}: \
         {} of the {at_most}{steps} steps (from step {} on) repeat prompts an earlier step sent, which a server's \
         prefix cache may serve; a larger dataset or a smaller --num-prompts gives every step its own",
        steps - fresh,
        fresh + 1
    ))
}

#[cfg(test)]
#[path = "prompts_tests.rs"]
mod tests;

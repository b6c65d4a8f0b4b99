//! A trace-speed sweep step: the trace replayed from its first request at
//! `speed` times its recorded pace, looped when the step outlasts it. Each
//! step (and each loop of it) expands the trace's hash ids with its own salt,
//! so the prefix sharing *within* the trace is kept while nothing is left in
//! the server's cache from an earlier step or loop.

use super::Ctx;
use crate::engine::Releases;
use crate::schedule;
use crate::workload::dataset::TraceWorkload;
use crate::workload::trace_expand::{self, ExpandParams};
use crate::workload::RequestSpec;
use anyhow::{bail, Result};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

/// The trace of a trace-speed sweep, and its recorded rate (req/s).
pub(crate) fn replayed<'a>(ctx: &'a Ctx<'_>) -> Result<(&'a TraceWorkload, f64)> {
    let Some(trace) = ctx.prepared.trace.as_deref() else {
        bail!("a trace-speed sweep needs --dataset-name timed_trace");
    };
    let Some(rate) = trace.mean_rate() else {
        bail!("the trace needs at least two requests at different timestamps to set a speed (check --dataset-path and --num-prompts)");
    };
    Ok((trace, rate))
}

/// Step `index`'s releases at `speed` until `length`, and the prompts they
/// use in release order.
pub(crate) fn step_level(
    ctx: &Ctx<'_>,
    trace: &TraceWorkload,
    index: usize,
    speed: f64,
    length: Duration,
) -> (Releases, Arc<Vec<RequestSpec>>) {
    let plan = schedule::trace_loop_until(&trace.timestamps, speed, length);
    let mut passes: HashMap<u32, Vec<RequestSpec>> = HashMap::new();
    let mut specs = Vec::with_capacity(plan.len());
    for (k, r) in plan.iter().enumerate() {
        let pass = passes.entry(r.pass).or_insert_with(|| {
            let params = ExpandParams {
                chunk_size: trace.chunk_size,
                seed: ctx.cfg.run.dataset.seed,
                salt: salt(index, r.pass),
                chat: ctx.cfg.run.dataset.chat,
            };
            let tokenizer = ctx.prepared.tokenizer.as_ref();
            trace_expand::expand(&trace.rows, &params, tokenizer).requests
        });
        let mut spec = pass[r.row].clone();
        spec.index = k;
        specs.push(spec);
    }
    let due = plan.iter().map(|r| r.due).collect();
    (Releases::Scheduled(due), Arc::new(specs))
}

/// Salt of step `index`, loop `pass`: never 0, which `kneecap run` uses.
pub(super) fn salt(index: usize, pass: u32) -> u64 {
    ((index as u64 + 1) << 32) | u64::from(pass)
}

//! Merging the sweep JSONs of a sharded `kneecap sweep` into one
//! [`SweepResult`] — the type a single-process sweep writes, so the merged JSON,
//! the console table, the HTML and `kneecap report` render it the same way.
//! PURE: works on parsed results.
//!
//! Per step: the shards' blocks add up
//! ([`crate::result::shard_sweep::StepShard::add`]); every SLO is
//! re-evaluated on the merged histograms ([`crate::sweep::slo_hist`]); the
//! failed requests the shards counted in their windows are +∞ samples, as in
//! a single process (a failed request is a miss); the
//! steady-state check is the single-process one applied to the summed flows
//! ([`crate::sweep::combine_steadiness`]) plus the server's queue trend (the
//! gauge is the server's, the same on every shard: the lowest shard with a
//! series is used); the step is generator-limited if any shard's generator
//! was (named). [`crate::sweep::judge`] gives the verdict and the pure knee
//! logic runs on the merged verdicts. The verdict and the step row come from
//! the same judge as a live step ([`crate::sweep::step::judge_step`]). A step that started after its slot on
//! some shard carries a warning naming it. The steps' GPU blocks merge by
//! [`super::gpu`]'s rule, over the work the shards' blocks recorded, so the
//! knee's energy per token is read from the merged step as in one process.
use super::gpu;
use super::server::{self, Reading, ServerBlock};
use super::{check_set, ShardFile};
use crate::metrics::health::{self, GeneratorHealth};
use crate::metrics::hist::{LatencyHist, RunHists};
use crate::metrics::stats::Distribution;
use crate::metrics::KNEECAP_PERCENTILES;
use crate::result::evidence::Attainment;
use crate::result::shard::ShardPart;
use crate::result::shard_sweep::{MergedSweep, StepAlignment, StepShard};
use crate::result::sweep::{StepPrompts, StepResult, SweepResult, Verdict};
use crate::result::GpuStats;
use crate::sweep::knee::StepPoint;
use crate::sweep::rows::finish;
use crate::sweep::slo::SloOutcome;
use crate::sweep::slo_hist::evaluate_hist;
use crate::sweep::step::{judge_step, Judged, StepCounts, StepDists, StepEvidence};
use crate::sweep::{steady, Slo};
use std::collections::BTreeMap;
use std::time::Duration;

/// One shard's sweep result, parsed.
#[derive(Debug, Clone)]
pub struct SweepShard {
    pub file: ShardFile,
    pub result: SweepResult,
}

/// Parse a shard's sweep; the error names the file.
pub fn read(name: &str, result: SweepResult) -> Result<SweepShard, String> {
    let block = result.shard.as_ref().ok_or_else(|| {
        format!("{name}: a sweep without a `shard` block — it was not written by `kneecap sweep --shard i/N`")
    })?;
    Ok(SweepShard {
        file: ShardFile {
            name: name.to_string(),
            id: block.id.clone(),
        },
        result,
    })
}

/// A shard's step block; the error names the file and the step.
fn step_block<'a>(name: &str, k: usize, step: &'a StepResult) -> Result<&'a StepShard, String> {
    step.shard
        .as_ref()
        .ok_or_else(|| format!("{name}: step {k} (load {}): no `shard` block", step.load))
}

/// Check the set and merge it into one sweep.
pub fn merge(mut shards: Vec<SweepShard>) -> Result<SweepResult, String> {
    let files: Vec<ShardFile> = shards.iter().map(|s| s.file.clone()).collect();
    check_set(&files)?;
    shards.sort_by_key(|s| s.file.id.shard.index);
    let slos = shards[0]
        .result
        .slos
        .iter()
        .map(|s| s.parse::<Slo>())
        .collect::<Result<Vec<Slo>, String>>()?;
    let n_steps = shards
        .iter()
        .map(|s| s.result.steps.len())
        .min()
        .unwrap_or(0);
    let mut merged = SweepResult {
        steps: Vec::new(),
        shard: None,
        interrupted: shards
            .iter()
            .any(|s| s.result.interrupted || s.result.steps.len() != n_steps),
        ..shards[0].result.clone()
    };
    let mut history: Vec<StepPoint> = Vec::new();
    let mut alignment = Vec::new();
    let mut gpu_notes = GpuNotes::default();
    for k in 0..n_steps {
        let steps: Vec<(&SweepShard, &StepResult)> =
            shards.iter().map(|s| (s, &s.result.steps[k])).collect();
        let (mut judged, aligned) = merge_step(&slos, &merged, k, &steps)?;
        judged.row.gpu = gpu_block(&steps, &mut gpu_notes);
        alignment.push(aligned);
        if judged.row.verdict == Verdict::Interrupted {
            merged.steps.push(judged.row);
            merged.interrupted = true;
            break;
        }
        history.push(judged.point);
        merged.steps.push(judged.row);
    }
    finish(&mut merged, &history);
    merged.complete = !merged.interrupted && shards.iter().all(|s| s.result.complete);
    merged.merged = Some(merged_block(&shards, alignment, gpu_notes.lines()));
    Ok(merged)
}

/// Why some steps have no merged GPU block (each reason with its steps'
/// loads), and whether some step has one.
#[derive(Default)]
struct GpuNotes {
    some_merged: bool,
    refused: BTreeMap<String, Vec<f64>>,
}

impl GpuNotes {
    /// The notes' lines: [`gpu::NOTE`] when some step has a block, then each
    /// reason once, naming its steps.
    fn lines(self) -> Vec<String> {
        let refused = self.refused.into_iter().map(|(why, loads)| {
            let loads: Vec<String> = loads.iter().map(|l| format!("{l}")).collect();
            format!("{why} (steps at load {})", loads.join(", "))
        });
        self.some_merged
            .then(|| gpu::NOTE.to_string())
            .into_iter()
            .chain(refused)
            .collect()
    }
}

/// The step's GPU block merged by [`gpu::merged`]'s rule, per token and per
/// request over the work every shard's block recorded (the whole step's, as
/// in one process); a refusal is noted in `notes`.
fn gpu_block(steps: &[(&SweepShard, &StepResult)], notes: &mut GpuNotes) -> Option<GpuStats> {
    let blocks: Vec<Option<&GpuStats>> = steps.iter().map(|(_, st)| st.gpu.as_ref()).collect();
    match gpu::merged(&blocks, gpu::recorded_work(&blocks)) {
        Ok(g) => {
            notes.some_merged |= g.is_some();
            g
        }
        Err(why) => {
            notes.refused.entry(why).or_default().push(steps[0].1.load);
            None
        }
    }
}

/// Merge step `k` of every shard; also returns its alignment record.
fn merge_step(
    slos: &[Slo],
    sweep: &SweepResult,
    k: usize,
    steps: &[(&SweepShard, &StepResult)],
) -> Result<(Judged, StepAlignment), String> {
    let first = steps[0].1;
    let mut blocks = Vec::new();
    for (s, step) in steps {
        if step.load != first.load {
            return Err(format!(
                "{}: step {k} is load {} but {} ran {}: the shards ran different step lists",
                s.file.name, step.load, steps[0].0.file.name, first.load
            ));
        }
        blocks.push(step_block(&s.file.name, k, step)?);
    }
    let total = StepShard::sum(blocks.iter().copied())?;
    let evidence = evidence(slos, steps, &blocks, &total);
    let mut judged = judge_step(evidence, sweep.max_error_rate);
    judged.row.prompts = agreed_prompts(k, steps)?;
    judged.row.prefix_cache_reset = steps.iter().any(|(_, st)| st.prefix_cache_reset);
    judged.row.prefix_cache = server_block(steps, |st| st.prefix_cache.as_ref());
    judged.row.spec_decode = server_block(steps, |st| st.spec_decode.as_ref());
    let aligned = StepAlignment {
        load: first.load,
        start_lateness_ms: blocks.iter().map(|b| b.part.start_lateness_ms).collect(),
        overran_slot_ms: blocks.iter().map(|b| b.overran_slot_ms).collect(),
        window_start_unix_s: total.part.window_start_unix_s,
        window_end_unix_s: total.part.window_end_unix_s,
    };
    Ok((judged, aligned))
}

/// A block the server counted over each shard's step, merged by
/// [`server::merged`]'s rule.
fn server_block<T: ServerBlock>(
    steps: &[(&SweepShard, &StepResult)],
    block: impl Fn(&StepResult) -> Option<&T>,
) -> Option<T> {
    let readings: Vec<Reading<'_, T>> = steps
        .iter()
        .map(|(s, st)| Reading {
            target: &s.result.workload.target,
            window_s: st.window_end_s - st.window_start_s,
            block: block(st),
        })
        .collect();
    server::merged(&readings)
}

/// The prompts every shard drew for step `k`: the same, or the shards ran
/// different workloads.
fn agreed_prompts(
    k: usize,
    steps: &[(&SweepShard, &StepResult)],
) -> Result<Option<StepPrompts>, String> {
    let (first_shard, first) = (steps[0].0, steps[0].1.prompts);
    for (s, step) in steps {
        if step.prompts != first {
            return Err(format!(
                "{}: step {k} drew other prompts than {} ({:?} against {:?}): give every shard the same --seed and --reuse-prompts",
                s.file.name, first_shard.file.name, step.prompts, first
            ));
        }
    }
    Ok(first)
}

/// The merged step's evidence: counters add, distributions come from the
/// merged histograms, SLOs are re-evaluated on them, steadiness is the
/// single-process check on the summed flows, the queue is the server's.
fn evidence(
    slos: &[Slo],
    steps: &[(&SweepShard, &StepResult)],
    blocks: &[&StepShard],
    total: &StepShard,
) -> StepEvidence {
    let first = steps[0].1;
    let span = first.window_end_s - first.window_start_s;
    let parts: Vec<steady::Steadiness> = blocks.iter().map(|b| b.steadiness.clone()).collect();
    let steadiness = steady::combine(&parts, span, &steady::SteadyThresholds::default());
    let with_queue = steps
        .iter()
        .map(|(_, st)| *st)
        .find(|st| st.queue_source.is_some());
    let h = &total.part.hists;
    let d = |x: &LatencyHist| x.distribution(&KNEECAP_PERCENTILES);
    let lateness = d(&h.lateness);
    StepEvidence {
        load: first.load,
        window: (
            Duration::from_secs_f64(first.window_start_s.max(0.0)),
            Duration::from_secs_f64(first.window_end_s.max(0.0)),
        ),
        counts: counts(steps, &total.part, span),
        slo_outcomes: outcomes(slos, &total.slo_attainment, h, total.part.counters.failed),
        steadiness,
        queue: with_queue.map(|st| st.queue.clone()).unwrap_or_default(),
        queue_source: with_queue.and_then(|st| st.queue_source.clone()),
        generator: merged_generator(steps, &lateness),
        cpu_busy_fraction: max_of(steps.iter().map(|(_, st)| st.generator.cpu_busy_fraction)),
        event_loop_lag_p99_ms: max_of(
            steps
                .iter()
                .map(|(_, st)| st.generator.event_loop_lag_p99_ms),
        ),
        dists: StepDists {
            ttft: d(&h.ttft),
            tpot: d(&h.tpot),
            itl: d(&h.itl),
            e2el: d(&h.e2el),
            ttft_from_due: d(&h.ttft_from_due),
            lateness,
        },
        extra_warnings: late_slot_warnings(steps, blocks),
        interrupted: total.part.interrupted
            || steps
                .iter()
                .any(|(_, st)| st.verdict == Verdict::Interrupted),
        // Sharded steps run their set length: no adaptive decision to merge.
        confidence: None,
        ended_early: false,
        twin_prior: None,
    }
}

/// Every SLO re-evaluated on the merged histograms; goodput-form SLOs from
/// the shards' exact attainment counts (summed, `attained`) when every shard
/// has them. The window's failed requests (summed over the shards) are +∞
/// samples, as in a single process.
fn outcomes(
    slos: &[Slo],
    attained: &[Option<Attainment>],
    h: &RunHists,
    failures: u64,
) -> Vec<SloOutcome> {
    slos.iter()
        .enumerate()
        .map(|(i, slo)| evaluate_hist(slo, h, attained.get(i).copied().flatten(), failures))
        .collect()
}

/// The summed counters as the step's counts and rates over its window.
fn counts(steps: &[(&SweepShard, &StepResult)], total: &ShardPart, span: f64) -> StepCounts {
    let c = &total.counters;
    let per_s = |x: f64| if span > 0.0 { x / span } else { 0.0 };
    StepCounts {
        n_requests: c.planned as usize,
        completed: c.completed as usize,
        failed: c.failed as usize,
        goodput: per_s(c.good.unwrap_or(c.completed) as f64),
        output_token_rate: per_s(c.total_output_tokens as f64),
        mean_input_tokens: ratio(c.total_input_tokens, c.completed),
        mean_output_tokens: ratio(c.total_output_tokens, c.completed),
        errors_by_kind: c.errors_by_kind.clone(),
        first_errors: steps
            .iter()
            .flat_map(|(_, st)| st.first_errors.iter().cloned())
            .take(5)
            .collect(),
    }
}

/// A shard that started the step after its slot (its previous step overran).
fn late_slot_warnings(steps: &[(&SweepShard, &StepResult)], blocks: &[&StepShard]) -> Vec<String> {
    steps
        .iter()
        .zip(blocks)
        .filter_map(|((s, _), b)| {
            b.overran_slot_ms.map(|ms| format!(
                "shard {} started this step {ms:.0} ms after its slot (its previous step overran): the combined load at the step's start was low",
                s.file.id.shard
            ))
        })
        .collect()
}

/// Limited if any shard's generator was, each reason named by its shard.
fn merged_generator(
    steps: &[(&SweepShard, &StepResult)],
    lateness: &Distribution,
) -> GeneratorHealth {
    let mut g = GeneratorHealth {
        lateness_p99_ms: health::p99_ms(lateness),
        ..GeneratorHealth::default()
    };
    for (s, st) in steps {
        let id = s.file.id.shard;
        if st.generator.limited {
            g.limited = true;
            if st.generator.reasons.is_empty() {
                g.reasons
                    .push(format!("shard {id}: the load generator fell behind"));
            }
            g.reasons.extend(
                st.generator
                    .reasons
                    .iter()
                    .map(|r| format!("shard {id}: {r}")),
            );
        }
    }
    g
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

fn max_of(it: impl Iterator<Item = Option<f64>>) -> Option<f64> {
    it.flatten().reduce(f64::max)
}

/// `merged`: which shards, and how well each step's slots lined up.
fn merged_block(
    shards: &[SweepShard],
    steps: Vec<StepAlignment>,
    gpu_notes: Vec<String>,
) -> MergedSweep {
    let id = &shards[0].file.id;
    MergedSweep {
        shards: id.shard.count,
        fingerprint: id.fingerprint.clone(),
        seed: id.seed,
        files: shards.iter().map(|s| s.file.name.clone()).collect(),
        start_at: id.start_at.map(|s| s.rfc3339()),
        steps,
        notes: [
            "percentiles are read from the merged HdrHistograms (µs, 3 significant digits), never averaged across shards",
            "SLOs, steadiness and the knee are judged on the merged step data; goodput-form SLOs from exact summed counts",
            "rates divide by the step's measurement window, which every shard ran in the same wall-clock slot",
        ]
        .map(String::from)
        .into_iter()
        .chain([server::NOTE.to_string()])
        .chain(gpu_notes)
        .collect(),
    }
}

#[cfg(test)]
#[path = "sweep_tests.rs"]
mod tests;

//! The mixed level's probe ([`crate::twin::mixed`]): a full batch of
//! closed-loop streams, released over a ramp, prompts arriving all the while.

use super::probes::Probe;
use crate::engine::Releases;
use crate::twin::mixed::{MixedObs, MixedPlan};
use crate::twin::observe::level_from;
use anyhow::Result;
use std::time::Instant;

impl Probe<'_> {
    /// Runs `plan`; what the level saw, `None` when its window held no gap.
    pub(super) async fn mixed(&mut self, plan: &MixedPlan) -> Result<Option<MixedObs>> {
        let mut specs = self.specs(plan.prompt, 1, plan.outputs.len())?;
        for (s, &out) in specs.iter_mut().zip(&plan.outputs) {
            s.output_len = out;
        }
        // The first `streams` on the ramp; the rest as soon as a stream ends.
        let last = plan.ramp.last().copied().unwrap_or_default();
        let offsets = (0..specs.len())
            .map(|i| plan.ramp.get(i).copied().unwrap_or(last))
            .collect();
        let t = Instant::now();
        let (r, gauges) = self
            .level(
                Releases::Scheduled(offsets),
                specs,
                Some(plan.streams),
                plan.length,
                true,
            )
            .await?;
        let detail = format!(
            "{} streams in a closed loop, {}-token prompts, 16-48-token outputs",
            plan.streams, plan.prompt
        );
        self.summary("mixed", &r, t.elapsed(), detail);
        // The engine is busy from the ramp's end: its steps tile the rest.
        let window = (last, plan.length);
        let level = level_from(plan.streams, 32, &r, &gauges, window);
        Ok(level.map(|level| MixedObs {
            prompt_tokens: plan.prompt,
            level,
        }))
    }
}

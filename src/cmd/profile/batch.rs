//! The prefill_batch probe: levels of a blocker and a burst of prompts sent
//! while it computes ([`crate::twin::prefill_batch`]).

use super::Probe;
use crate::engine::Releases;
use crate::twin::prefill_batch::{self, BatchPlan, BatchSample};
use anyhow::Result;
use std::time::{Duration, Instant};

impl Probe<'_> {
    /// Levels of a blocker then a burst of prompts sent together, whole and
    /// split in turn, within `share`: the steps they show.
    pub(in crate::cmd::profile) async fn prefill_batch(
        &mut self,
        plan: &BatchPlan,
        share: Duration,
    ) -> Result<Vec<BatchSample>> {
        let (t, until) = (Instant::now(), Instant::now() + share);
        let (mut all, mut samples, mut levels) = (Vec::new(), Vec::new(), 0);
        for i in 0.. {
            let left = until.saturating_duration_since(Instant::now());
            if left < plan.length.min(share / 2) {
                break;
            }
            let (k, n) = plan.burst(i);
            let mut specs = self.specs(plan.tokens, 1, 1)?;
            specs.extend(self.specs(n, 1, k as usize)?);
            let mut offsets = vec![Duration::ZERO];
            offsets.extend(std::iter::repeat_n(plan.send_at, k as usize));
            let releases = Releases::Scheduled(offsets);
            let (r, _) = self
                .level(releases, specs, None, plan.length.min(left), false)
                .await?;
            samples.extend(prefill_batch::observe(&r));
            all.extend(r);
            levels += 1;
        }
        let detail = format!(
            "{levels} levels of a {n}-token prompt, then 1 x {n}, {k} x {m} or {h} x {m} tokens sent while it computes; {} computed in one step",
            samples.len(),
            n = plan.tokens,
            k = plan.split,
            h = plan.split / 2,
            m = plan.tokens / plan.split,
        );
        self.summary("prefill_batch", &all, t.elapsed(), detail);
        Ok(samples)
    }
}

//! A step's end in the engine model: its tokens leave, the prompt blocks of
//! prefills that completed enter the prefix cache, finished sequences
//! retire. Pure.

use super::speculate::speculate;
use super::{Engine, Event, EventKind, Seq};

impl Engine {
    /// Emits the step's tokens, caches the prompt blocks of sequences whose
    /// prefill just completed, and retires finished sequences.
    pub(super) fn complete_batch_step(&mut self, events: &mut Vec<Event>) {
        let mut finished = Vec::new();
        let mut i = 0;
        while i < self.running.len() {
            let seq = &mut self.running[i];
            if seq.batch_tokens == 0 || seq.in_prefill() {
                i += 1;
                continue;
            }
            if !seq.batch_decodes {
                let held = seq.held as usize;
                let owned = seq.blocks.len() - held;
                self.cache.acquire(&seq.blocks[held..]);
                self.kv_private -= (owned as u64) * u64::from(self.params.block_tokens);
                seq.held = seq.blocks.len() as u32;
                if seq.generated == 0 {
                    self.counters.prompt_tokens += u64::from(seq.prompt_tokens);
                }
            }
            let emitted = match (self.spec, seq.batch_decodes) {
                (Some(spec), true) => {
                    let (emitted, rollback) = speculate(spec, seq, &mut self.counters.spec, events);
                    self.kv_private -= u64::from(rollback);
                    emitted
                }
                _ => 1,
            };
            seq.generated += emitted;
            if !seq.pooling {
                self.counters.generation_tokens += u64::from(emitted);
            }
            i = self.report_token(i, events, &mut finished);
        }
        for seq in finished {
            self.free_seq(&seq);
        }
    }

    /// Reports running sequence `i`'s newest token; a finished sequence
    /// leaves the batch for `finished` (the caller frees it). Returns the
    /// next index to visit.
    pub(super) fn report_token(
        &mut self,
        i: usize,
        events: &mut Vec<Event>,
        finished: &mut Vec<Seq>,
    ) -> usize {
        let seq = &self.running[i];
        let last = seq.generated >= seq.target_tokens;
        let index = seq.generated;
        events.push(Event {
            id: seq.id,
            kind: EventKind::Token { index, last },
        });
        if !last {
            return i + 1;
        }
        self.counters.n_finished += 1;
        finished.push(self.running.remove(i));
        i
    }
}

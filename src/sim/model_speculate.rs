//! A decoding sequence's speculative draft verified within a step: what the
//! engine counts, reports and gives back of it ([`crate::sim::spec`]). Pure.

use super::{Event, EventKind};
use crate::sim::spec::SpecDecode;

/// A decoding sequence's draft, verified ([`crate::sim::spec`]): counts it,
/// reports it, and gives the tokens it emits and the KV slots of its
/// rejected drafts (and of tokens past its target), which it gives back.
pub(super) fn speculate(
    (spec, seed): (SpecDecode, u64),
    seq: &mut super::Seq,
    counters: &mut crate::sim::spec::SpecCounters,
    events: &mut Vec<Event>,
) -> (u32, u32) {
    let drafts = seq.batch_tokens - 1;
    if drafts == 0 {
        return (1, 0);
    }
    let accepted = spec.accepted(seed, seq.id, seq.generated, drafts);
    counters.observe(drafts, accepted);
    events.push(Event {
        id: seq.id,
        kind: EventKind::Drafted { drafts, accepted },
    });
    let emitted = (1 + accepted).min(seq.target_tokens - seq.generated);
    let rollback = seq.batch_tokens - emitted;
    seq.computed -= rollback;
    (emitted, rollback)
}

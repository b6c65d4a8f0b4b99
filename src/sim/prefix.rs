//! The engine model's prefix cache: KV blocks keyed by their chained hash
//! ([`super::blocks`]), shared by every running sequence whose prompt starts
//! with them, kept after their last user finishes and evicted least recently
//! used first when the KV budget needs the room (vLLM's automatic prefix
//! caching, at block granularity).
//!
//! A block is *referenced* while some running sequence holds it, and
//! *evictable* once none does. Referenced blocks count as used KV; evictable
//! ones occupy free KV until [`PrefixCache::evict_lru`] reclaims them, as
//! vLLM's free-block queue does. When a sequence lets its blocks go, the last
//! block is queued for eviction first (vLLM frees a request's blocks in
//! reverse), so a partly evicted prefix keeps its head.
//!
//! Pure: no clock (recency is an insertion counter), no I/O.

use std::collections::{BTreeMap, HashMap};

#[derive(Debug, Clone, Copy)]
struct Entry {
    refs: u32,
    /// Position in the eviction queue while `refs == 0`.
    tick: u64,
}

/// Cached blocks, their reference counts and the LRU queue of evictable ones.
#[derive(Debug, Clone, Default)]
pub struct PrefixCache {
    entries: HashMap<u64, Entry>,
    /// Evictable blocks, oldest release first.
    lru: BTreeMap<u64, u64>,
    next_tick: u64,
    referenced: u64,
}

/// What [`PrefixCache::lookup`] found for a prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Hit {
    /// Leading blocks of the prompt that are cached.
    pub blocks: usize,
    /// How many of them are evictable now (acquiring them makes them used KV).
    pub revived: usize,
}

impl PrefixCache {
    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    /// The longest cached prefix of `blocks`, at most `max_blocks` long.
    pub fn lookup(&self, blocks: &[u64], max_blocks: usize) -> Hit {
        let mut hit = Hit::default();
        for h in blocks.iter().take(max_blocks) {
            let Some(e) = self.entries.get(h) else {
                break;
            };
            hit.blocks += 1;
            hit.revived += usize::from(e.refs == 0);
        }
        hit
    }

    /// Takes a reference on each of `blocks`, inserting the missing ones.
    /// Returns how many were already cached.
    pub fn acquire(&mut self, blocks: &[u64]) -> usize {
        let mut present = 0;
        for &h in blocks {
            match self.entries.get_mut(&h) {
                Some(e) => {
                    present += 1;
                    if e.refs == 0 {
                        self.lru.remove(&e.tick);
                        self.referenced += 1;
                    }
                    e.refs += 1;
                }
                None => {
                    self.entries.insert(h, Entry { refs: 1, tick: 0 });
                    self.referenced += 1;
                }
            }
        }
        present
    }

    /// Drops one reference on each of `blocks`; a block nobody holds any
    /// more becomes evictable (the last block first).
    pub fn release(&mut self, blocks: &[u64]) {
        for h in blocks.iter().rev() {
            let Some(e) = self.entries.get_mut(h) else {
                continue;
            };
            e.refs = e.refs.saturating_sub(1);
            if e.refs == 0 {
                e.tick = self.next_tick;
                self.lru.insert(self.next_tick, *h);
                self.next_tick += 1;
                self.referenced -= 1;
            }
        }
    }

    /// Evicts the least recently released evictable block; false if none.
    pub fn evict_lru(&mut self) -> bool {
        let Some((_, h)) = self.lru.pop_first() else {
            return false;
        };
        self.entries.remove(&h);
        true
    }

    /// Drops every block nobody holds (vLLM's `reset_prefix_cache`; blocks
    /// running sequences hold stay until they finish).
    pub fn drop_evictable(&mut self) {
        for h in std::mem::take(&mut self.lru).into_values() {
            self.entries.remove(&h);
        }
    }

    /// Blocks some running sequence holds.
    pub fn referenced(&self) -> u64 {
        self.referenced
    }

    /// Blocks nobody holds (reclaimable).
    pub fn evictable(&self) -> u64 {
        self.lru.len() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookup_finds_the_longest_cached_prefix_only() {
        let mut c = PrefixCache::new();
        c.acquire(&[1, 2, 3]);
        assert_eq!(
            c.lookup(&[1, 2, 9, 3], 10),
            Hit {
                blocks: 2,
                revived: 0
            }
        );
        assert_eq!(c.lookup(&[1, 2, 3], 1).blocks, 1);
        assert_eq!(c.lookup(&[7, 1], 10).blocks, 0);
    }

    #[test]
    fn released_blocks_stay_cached_until_evicted_tail_first() {
        let mut c = PrefixCache::new();
        c.acquire(&[1, 2, 3]);
        c.acquire(&[1, 2]);
        assert_eq!(c.referenced(), 3);
        c.release(&[1, 2, 3]);
        // Block 3 lost its only holder; 1 and 2 are still held.
        assert_eq!((c.referenced(), c.evictable()), (2, 1));
        c.release(&[1, 2]);
        assert_eq!((c.referenced(), c.evictable()), (0, 3));
        assert_eq!(c.lookup(&[1, 2, 3], 10).revived, 3);
        assert!(c.evict_lru()); // 3 was released first
        assert_eq!(c.lookup(&[1, 2, 3], 10).blocks, 2);
        assert!(c.evict_lru()); // then 2 (released in reverse: 2 before 1)
        assert_eq!(c.lookup(&[1, 2, 3], 10).blocks, 1);
    }

    #[test]
    fn dropping_the_evictable_blocks_keeps_the_held_ones() {
        let mut c = PrefixCache::new();
        c.acquire(&[1, 2, 3]);
        c.acquire(&[1]);
        c.release(&[1, 2, 3]);
        assert_eq!((c.referenced(), c.evictable()), (1, 2));
        c.drop_evictable();
        assert_eq!((c.referenced(), c.evictable()), (1, 0));
        assert_eq!(c.lookup(&[1, 2, 3], 10).blocks, 1, "1 is still held");
        assert!(!c.evict_lru());
        c.release(&[1]);
        assert_eq!(c.evictable(), 1, "the held block is cached when let go");
    }

    #[test]
    fn acquiring_an_evictable_block_takes_it_off_the_queue() {
        let mut c = PrefixCache::new();
        c.acquire(&[5]);
        c.release(&[5]);
        assert_eq!(c.acquire(&[5, 6]), 1);
        assert_eq!((c.referenced(), c.evictable()), (2, 0));
        assert!(!c.evict_lru());
    }
}

//! The samples of one CPU profile, counted per distinct stack within a byte limit: a stack first
//! seen once the limit is reached is counted as dropped, so a long profile of a busy process
//! cannot grow without bound (it says how much it dropped instead).

use std::collections::HashMap;

/// What one distinct stack costs beyond its addresses: the boxed slice's pointer and length, the
/// count, and the hash table's slot and control byte, rounded up.
const ENTRY_OVERHEAD: usize = 48;

/// Samples per stack (interrupted address first).
#[derive(Debug)]
pub(super) struct Stacks {
    counts: HashMap<Box<[usize]>, u64>,
    bytes: usize,
    limit: usize,
    /// Samples whose stack did not fit.
    pub(super) dropped: u64,
}

impl Stacks {
    /// At most `limit` bytes of stacks.
    pub(super) fn new(limit: usize) -> Self {
        Stacks {
            counts: HashMap::new(),
            bytes: 0,
            limit,
            dropped: 0,
        }
    }

    /// Counts one sample of `frames`.
    pub(super) fn add(&mut self, frames: &[usize]) {
        if let Some(count) = self.counts.get_mut(frames) {
            *count += 1;
            return;
        }
        let cost = std::mem::size_of_val(frames) + ENTRY_OVERHEAD;
        if self.bytes + cost > self.limit {
            self.dropped += 1;
            return;
        }
        self.bytes += cost;
        self.counts.insert(frames.into(), 1);
    }

    /// Each distinct stack and its samples.
    pub(super) fn iter(&self) -> impl Iterator<Item = (&[usize], u64)> {
        self.counts.iter().map(|(stack, count)| (&**stack, *count))
    }

    /// The bytes the stacks are counted as holding.
    #[cfg(test)]
    pub(super) fn bytes(&self) -> usize {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeated_stacks_are_counted_and_new_ones_past_the_limit_dropped() {
        let mut stacks = Stacks::new(2 * (3 * 8 + ENTRY_OVERHEAD));
        for _ in 0..5 {
            stacks.add(&[1, 2, 3]);
        }
        stacks.add(&[4, 5, 6]);
        stacks.add(&[7, 8, 9]);
        stacks.add(&[4, 5, 6]);
        assert_eq!(stacks.dropped, 1, "the third distinct stack did not fit");
        let mut seen: Vec<_> = stacks.iter().map(|(s, n)| (s.to_vec(), n)).collect();
        seen.sort();
        assert_eq!(seen, vec![(vec![1, 2, 3], 5), (vec![4, 5, 6], 2)]);
        assert!(stacks.bytes() <= 2 * (3 * 8 + ENTRY_OVERHEAD));
    }
}

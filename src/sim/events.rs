//! The engine's event queue: a 4-ary min-heap keyed by (time in ns, sequence number).
//!
//! Every key is distinct (the sequence number is), so the order events come out in is fully
//! determined by their keys: the same order as any other priority queue over the same keys,
//! such as the `BinaryHeap` of `Reverse((ns, seq, event))` this replaces. A key is one `u128`
//! (time in the high half), so a comparison is one wide compare; four children per node halve
//! the depth of a binary heap, and a node's children lie next to each other in memory.
//!
//! One more event may wait beside the heap: the next of a stream whose events are due one at
//! a time (the open loop's arrivals, each scheduled when the one before it comes). It keeps
//! its key and is compared with the heap's top at every pop, so the order is the same as if it
//! were in the heap, without the two sifts through the whole depth an arrival costs there (it
//! is nearly always the soonest event).

/// Children per node.
const ARITY: usize = 4;

/// A min-heap of events by (ns, seq); see the [module docs](self).
#[derive(Debug)]
pub(crate) struct EventQueue<E> {
    heap: Vec<(u128, E)>,
    /// The stream's next event, kept beside the heap (see the [module docs](self)).
    next: Option<(u128, E)>,
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        EventQueue {
            heap: Vec::new(),
            next: None,
        }
    }
}

/// An event's key: time in the high half, sequence number in the low.
#[inline]
fn key(ns: u64, seq: u64) -> u128 {
    (u128::from(ns) << 64) | u128::from(seq)
}

impl<E: Copy> EventQueue<E> {
    /// Whether no event is waiting.
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.heap.is_empty() && self.next.is_none()
    }

    /// The time of the next event, ns, without taking it.
    #[inline]
    pub(crate) fn peek_ns(&self) -> Option<u64> {
        let top = self.heap.first().map(|e| e.0);
        let soonest = match (top, self.next.map(|e| e.0)) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        soonest.map(|k| (k >> 64) as u64)
    }

    /// Adds the stream's next event at `ns` (see the [module docs](self)): it comes out in
    /// the same order as if it had been [pushed](Self::push). At most one waits at a time; a
    /// second one before the first is taken goes into the heap.
    #[inline]
    pub(crate) fn push_next(&mut self, ns: u64, seq: u64, event: E) {
        if self.next.is_some() {
            self.push(ns, seq, event);
        } else {
            self.next = Some((key(ns, seq), event));
        }
    }

    /// Adds an event at `ns`; `seq` must differ from every other key's at the same `ns`.
    #[inline]
    pub(crate) fn push(&mut self, ns: u64, seq: u64, event: E) {
        let key = key(ns, seq);
        let mut i = self.heap.len();
        self.heap.push((key, event));
        // Sift up: move parents down into the hole until the parent is smaller.
        while i > 0 {
            let parent = (i - 1) / ARITY;
            if self.heap[parent].0 <= key {
                break;
            }
            self.heap[i] = self.heap[parent];
            i = parent;
        }
        self.heap[i] = (key, event);
    }

    /// Takes the event with the smallest (ns, seq), as (ns, event).
    #[inline]
    pub(crate) fn pop(&mut self) -> Option<(u64, E)> {
        if let Some((k, ev)) = self.next {
            if self.heap.first().is_none_or(|top| k < top.0) {
                self.next = None;
                return Some(((k >> 64) as u64, ev));
            }
        }
        let last = self.heap.pop()?;
        if self.heap.is_empty() {
            return Some(((last.0 >> 64) as u64, last.1));
        }
        let top = self.heap[0];
        // Sift the last element down from the root: the smallest child moves up into the
        // hole while it is smaller than the element.
        let n = self.heap.len();
        let mut i = 0;
        loop {
            let first = ARITY * i + 1;
            let (best, best_key) = if first + ARITY <= n {
                // A full set of children (the usual case): a tournament of three comparisons.
                let c = &self.heap[first..first + ARITY];
                let (a, ka) = if c[1].0 < c[0].0 {
                    (1, c[1].0)
                } else {
                    (0, c[0].0)
                };
                let (b, kb) = if c[3].0 < c[2].0 {
                    (3, c[3].0)
                } else {
                    (2, c[2].0)
                };
                if kb < ka {
                    (first + b, kb)
                } else {
                    (first + a, ka)
                }
            } else if first < n {
                let mut best = first;
                let mut best_key = self.heap[first].0;
                for (c, e) in self.heap.iter().enumerate().take(n).skip(first + 1) {
                    if e.0 < best_key {
                        best = c;
                        best_key = e.0;
                    }
                }
                (best, best_key)
            } else {
                break;
            };
            if best_key >= last.0 {
                break;
            }
            self.heap[i] = self.heap[best];
            i = best;
        }
        self.heap[i] = last;
        Some(((top.0 >> 64) as u64, top.1))
    }
}

/// Seconds on the event clock as its whole nanoseconds: the nearest, saturating at 0 and at
/// the clock's end (NaN is 0). Times compared as the event queue orders them compare so.
#[inline]
pub(crate) fn secs_to_ns(s: f64) -> u64 {
    round_ns(s * 1e9)
}

/// `x.round() as u64` (halves away from zero, saturating) without the library call `round` is
/// on this target: for `0 <= x < 2^52` the truncation and the fraction `x - trunc(x)` are
/// exact, so comparing the fraction with one half decides exactly as rounding does; larger
/// values are integers already (or infinite), and anything else takes `round` itself.
#[inline]
pub(crate) fn round_ns(x: f64) -> u64 {
    const EXACT: f64 = 4_503_599_627_370_496.0; // 2^52
    if (0.0..EXACT).contains(&x) {
        let whole = x as u64;
        if x - whole as f64 >= 0.5 {
            whole + 1
        } else {
            whole
        }
    } else if x >= EXACT {
        x as u64
    } else {
        x.round() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;

    proptest! {
        #![proptest_config(crate::proptest_seed::config(256))]

        /// Any interleaving of pushes and pops comes out as from the binary heap it replaces.
        #[test]
        fn pops_in_the_binary_heaps_order(ops in proptest::collection::vec((0u64..50, 0u8..3), 1..400)) {
            let mut q = EventQueue::default();
            let mut h = BinaryHeap::new();
            let mut seq = 0u64;
            for (ns, op) in ops {
                if op == 0 {
                    let want = h.pop().map(|Reverse((ns, _, ev)): Reverse<(u64, u64, u32)>| (ns, ev));
                    prop_assert_eq!(q.pop(), want);
                } else {
                    seq += 1;
                    // Both kinds of push, the stream's beside the heap or in it.
                    if op == 1 {
                        q.push(ns, seq, seq as u32);
                    } else {
                        q.push_next(ns, seq, seq as u32);
                    }
                    h.push(Reverse((ns, seq, seq as u32)));
                }
                prop_assert_eq!(q.is_empty(), h.is_empty());
                prop_assert_eq!(q.peek_ns(), h.peek().map(|Reverse((ns, _, _))| *ns));
            }
            while let Some(Reverse((ns, _, ev))) = h.pop() {
                prop_assert_eq!(q.pop(), Some((ns, ev)));
            }
            prop_assert_eq!(q.pop(), None);
        }
    }

    #[test]
    fn rounds_the_edges_as_round_does() {
        for x in [
            0.0,
            -0.0,
            0.5,
            0.499_999_999_999_999_94,
            1.5,
            2.5,
            4_503_599_627_370_495.5,
            4_503_599_627_370_496.0,
            9_007_199_254_740_993.0,
            1e300,
            f64::INFINITY,
            f64::NAN,
            -0.4,
            -3.7,
        ] {
            assert_eq!(round_ns(x), x.round() as u64, "{x}");
        }
    }

    proptest! {
        #![proptest_config(crate::proptest_seed::config(256))]

        #[test]
        fn rounds_as_round_does(x in 0.0f64..1e13, k in 0u64..1_000_000_000) {
            prop_assert_eq!(round_ns(x), x.round() as u64);
            let t = k as f64 / 1e9 * 1e9;
            prop_assert_eq!(round_ns(t), t.round() as u64);
            let h = k as f64 + 0.5;
            prop_assert_eq!(round_ns(h), h.round() as u64);
        }
    }
}

//! Weighted draws: an incrementally maintained sum tree for "eligible = all", a linear pick for
//! explicit subsets, and the deterministic argmax.
//!
//! The sum tree is the classic complete binary tree over leaf weights (as in a Fenwick tree, but
//! with explicit internal nodes so a sample is a single root-to-leaf descent): updating one leaf
//! and sampling are both O(log n). Internal nodes are recomputed from their children rather than
//! adjusted by deltas, so floating-point error never accumulates over millions of updates.

/// Leaves per block: a block's weights share one 64-byte cache line, and the binary tree stops
/// at block sums, so the last three levels of a plain binary tree (three dependent cache
/// misses per descent on large trees) become one line read and a short scan.
const BLOCK: usize = 8;

/// A sum tree over `f64` leaf weights: a complete binary tree over blocks of [`BLOCK`] leaves.
#[derive(Debug, Clone, Default)]
pub(crate) struct SumTree {
    /// Number of leaves the tree can hold (a power of two, at least [`BLOCK`], or 0).
    width: usize,
    /// The leaf weights, in whole blocks, up to the last block ever written: the blocks past it
    /// (up to `width`) are all zero and take no memory, which on a fleet just past a power of
    /// two saves up to half the leaves. Their sums are zero in the nodes as well, so the tree,
    /// its sums and its draws are those of the full width.
    leaves: Vec<f64>,
    /// `nodes[1]` is the root; block `b`'s sum lives at `nodes[blocks + b]`, `blocks` being
    /// `width / BLOCK`. `nodes[0]` is unused.
    nodes: Vec<f64>,
}

impl SumTree {
    /// The sum of all leaves.
    #[inline]
    pub(crate) fn total(&self) -> f64 {
        if self.width == 0 {
            0.0
        } else {
            self.nodes[1]
        }
    }

    /// The weight of leaf `i` (0 for leaves beyond the current width).
    #[inline]
    pub(crate) fn get(&self, i: usize) -> f64 {
        self.leaves.get(i).copied().unwrap_or(0.0)
    }

    #[inline]
    fn blocks(&self) -> usize {
        self.width / BLOCK
    }

    /// A block's sum, always in the same (pairwise) order, so an update and a rebuild agree
    /// bit for bit; pairwise, the additions form three dependent steps instead of seven. The
    /// block must be stored.
    #[inline]
    fn block_sum(&self, b: usize) -> f64 {
        let l = &self.leaves[b * BLOCK..(b + 1) * BLOCK];
        ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]))
    }

    /// Makes room for at least `len` leaves, keeping existing weights.
    pub(crate) fn reserve_leaves(&mut self, len: usize) {
        if len <= self.width {
            return;
        }
        let new_width = len.next_power_of_two().max(BLOCK);
        self.width = new_width;
        // With one block the root is the block's own slot: `nodes[1]`.
        self.nodes = vec![0.0; 2 * self.blocks().max(1)];
        self.rebuild();
    }

    /// Stores leaves up to leaf `i`'s block (zeros), growing by at least a sixteenth when the
    /// vector is full, as the candidate tables do.
    #[cold]
    #[inline(never)]
    fn store_through(&mut self, i: usize) {
        let need = (i / BLOCK + 1) * BLOCK;
        if need > self.leaves.capacity() {
            let len = self.leaves.len();
            self.leaves
                .reserve_exact((need - len).max(len / 16).min(self.width - len));
        }
        self.leaves.resize(need, 0.0);
    }

    /// Sets leaf `i` to `w` and repairs the path to the root. O(log n).
    #[inline]
    pub(crate) fn set(&mut self, i: usize, w: f64) {
        debug_assert!(
            w.is_finite() && w >= 0.0,
            "leaf weight must be finite and >= 0"
        );
        if i >= self.width {
            self.reserve_leaves(i + 1);
        }
        if self.get(i) == w {
            return;
        }
        if i >= self.leaves.len() {
            self.store_through(i);
        }
        self.leaves[i] = w;
        let b = i / BLOCK;
        let mut sum = self.block_sum(b);
        let mut n = self.blocks() + b;
        if self.blocks() == 1 {
            self.nodes[1] = sum;
            return;
        }
        self.nodes[n] = sum;
        // The running sum stays in a register: each level adds the sibling, loaded from memory,
        // instead of reloading the node just stored (a store-to-load chain per level).
        // Addition commutes exactly, so the nodes equal a from-children recompute bit for bit.
        while n > 1 {
            sum += self.nodes[n ^ 1];
            n >>= 1;
            self.nodes[n] = sum;
        }
    }

    /// Sets a leaf without repairing its ancestors; call [`SumTree::rebuild`] afterwards.
    #[inline]
    pub(crate) fn set_deferred(&mut self, i: usize, w: f64) {
        if i >= self.width {
            self.reserve_leaves(i + 1);
        }
        if i >= self.leaves.len() {
            if w == 0.0 {
                return;
            }
            self.store_through(i);
        }
        self.leaves[i] = w;
    }

    /// Recomputes every block sum and internal node from the leaves. O(n).
    pub(crate) fn rebuild(&mut self) {
        let blocks = self.blocks();
        if blocks == 0 {
            return;
        }
        let stored = self.leaves.len() / BLOCK;
        if blocks == 1 {
            self.nodes[1] = if stored == 1 { self.block_sum(0) } else { 0.0 };
            return;
        }
        for b in 0..blocks {
            self.nodes[blocks + b] = if b < stored { self.block_sum(b) } else { 0.0 };
        }
        for n in (1..blocks).rev() {
            self.nodes[n] = self.nodes[2 * n] + self.nodes[2 * n + 1];
        }
    }

    /// Finds the leaf whose cumulative range contains `u`, for `u` in `[0, total)`.
    ///
    /// Returns `None` only when the tree is empty (total 0). Rounding at range edges can never
    /// select a zero-weight leaf: the descent only enters subtrees with positive mass, and the
    /// scan inside a block only stops at a positive leaf.
    #[inline]
    pub(crate) fn sample(&self, mut u: f64) -> Option<usize> {
        if self.width == 0 || self.nodes[1] <= 0.0 {
            return None;
        }
        let blocks = self.blocks();
        let mut n = 1;
        while n < blocks {
            // The nodes three levels down from `n` share one cache line (8n to 8n + 7): read
            // it now, so on a tree larger than the cache its miss overlaps the two levels in
            // between instead of following them.
            std::hint::black_box(self.nodes.get(8 * n).copied());
            if 4 * n >= blocks {
                // Two levels above the blocks: the leaf lines of the four blocks below, two
                // adjacent pairs.
                let b0 = 4 * n - blocks;
                std::hint::black_box((
                    self.leaves.get(b0 * BLOCK).copied(),
                    self.leaves.get((b0 + 2) * BLOCK).copied(),
                ));
            }
            let left = self.nodes[2 * n];
            let right = self.nodes[2 * n + 1];
            // Branch-free step: the direction is a coin flip the predictor cannot learn. `u`
            // is reduced by exactly `left` going right and unchanged going left, chosen by a
            // mask, so the next comparison waits for one subtraction (computed beside this
            // one), not for a conversion, a product and a subtraction after it.
            let right_side = !((u < left && left > 0.0) || right <= 0.0);
            u = select(right_side, u - left, u);
            n = 2 * n + right_side as usize;
        }
        let b = if blocks == 1 { 0 } else { n - blocks };
        let base = b * BLOCK;
        let block: &[f64; BLOCK] = self.leaves[base..base + BLOCK]
            .try_into()
            .expect("a block is BLOCK leaves");
        pick_block(block, u).map(|j| base + j)
    }
}

/// Picks an index with probability proportional to `weights[i]`, given a uniform `u` in `[0, 1)`.
///
/// O(k). Returns `None` when every weight is zero. Zero-weight entries are never chosen, even
/// when rounding pushes the running sum past the total.
pub(crate) fn pick_linear(weights: &[f64], u: f64) -> Option<usize> {
    let total: f64 = weights.iter().sum();
    if total <= 0.0 || !total.is_finite() {
        return None;
    }
    pick_linear_from(weights, u * total)
}

/// The entry whose cumulative range contains `target` (in `[0, sum)`); past the end by
/// rounding, the last positive entry. Zero-weight entries are never chosen.
#[inline]
pub(crate) fn pick_linear_from(weights: &[f64], mut target: f64) -> Option<usize> {
    let mut last_positive = None;
    for (i, &w) in weights.iter().enumerate() {
        if w > 0.0 {
            if target < w {
                return Some(i);
            }
            target -= w;
            last_positive = Some(i);
        }
    }
    last_positive
}

/// `a` if `take_a`, else `b`, without a branch (a mask over the bits).
#[inline(always)]
fn select(take_a: bool, a: f64, b: f64) -> f64 {
    let mask = u64::from(take_a).wrapping_neg();
    f64::from_bits((a.to_bits() & mask) | (b.to_bits() & !mask))
}

/// [`pick_linear_from`] over one block, without a branch on the weights: where the pick
/// stops within the block is as random as the descent's directions. The running target is
/// the same sequence of subtractions (subtracting a zero weight leaves it unchanged), every
/// comparison is made, and the first hit is found in a bit mask.
///
/// `target` is not negative (a descent only ever subtracts what it is at least): then the
/// running target stays at or above 0 up to the first hit, so a zero weight, which it is never
/// below, needs no test of its own there. The positive weights are only looked for when
/// nothing was hit (rounding past the block's sum).
#[inline]
fn pick_block(weights: &[f64; BLOCK], target: f64) -> Option<usize> {
    debug_assert!(
        target >= 0.0 || target.is_nan(),
        "a block's target is not negative"
    );
    let mut t = target;
    let mut hits = 0u32;
    for (i, &w) in weights.iter().enumerate() {
        hits |= u32::from(t < w) << i;
        t -= w;
    }
    if hits != 0 {
        Some(hits.trailing_zeros() as usize)
    } else {
        weights.iter().rposition(|&w| w > 0.0)
    }
}

/// The position in `keys` of the most probable candidate (`probs` in the same order), ties
/// going to the one added first: what a deterministic draw takes.
pub(crate) fn most_probable(slots: &[super::Slot], keys: &[u32], probs: &[f64]) -> Option<usize> {
    let order: Vec<u64> = keys.iter().map(|&i| slots[i as usize].added_seq).collect();
    argmax_by_order(probs, &order)
}

/// The index of the largest value; ties go to the smallest `order` key (the candidate that was
/// added first). Returns `None` for an empty slice.
pub(crate) fn argmax_by_order(values: &[f64], order: &[u64]) -> Option<usize> {
    let mut best: Option<usize> = None;
    for i in 0..values.len() {
        best = match best {
            None => Some(i),
            Some(b) if values[i] > values[b] || (values[i] == values[b] && order[i] < order[b]) => {
                Some(i)
            }
            keep => keep,
        };
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The descent as it was written before: the step taken by a product with the direction.
    fn sample_multiplying(t: &SumTree, mut u: f64) -> Option<usize> {
        if t.width == 0 || t.nodes[1] <= 0.0 {
            return None;
        }
        let blocks = t.blocks();
        let mut n = 1;
        while n < blocks {
            let left = t.nodes[2 * n];
            let right = t.nodes[2 * n + 1];
            let right_side = !((u < left && left > 0.0) || right <= 0.0) as usize;
            u -= left * right_side as f64;
            n = 2 * n + right_side;
        }
        let b = if blocks == 1 { 0 } else { n - blocks };
        let base = b * BLOCK;
        pick_linear_from(&t.leaves[base..base + BLOCK], u).map(|j| base + j)
    }

    /// A roll at the total (rounding can bring one there) goes to the last leaf with weight,
    /// never down into a subtree with none.
    #[test]
    fn a_roll_at_the_total_stays_out_of_empty_subtrees() {
        let mut t = SumTree::default();
        t.reserve_leaves(4 * BLOCK);
        t.set(0, 1.0);
        t.set(1, 2.0);
        assert_eq!(t.sample(t.total()), Some(1));
        assert_eq!(t.sample(t.total() * (1.0 + f64::EPSILON)), Some(1));
    }

    #[test]
    fn sample_respects_boundaries() {
        let mut t = SumTree::default();
        t.set(0, 1.0);
        t.set(1, 0.0);
        t.set(2, 3.0);
        assert_eq!(t.total(), 4.0);
        assert_eq!(t.sample(0.0), Some(0));
        assert_eq!(t.sample(0.999), Some(0));
        assert_eq!(t.sample(1.0), Some(2));
        assert_eq!(t.sample(3.999), Some(2));
        // Past the end by rounding: still a positive leaf.
        assert_eq!(t.sample(4.5), Some(2));
    }

    #[test]
    fn empty_tree_samples_nothing() {
        let t = SumTree::default();
        assert_eq!(t.sample(0.0), None);
        let mut t = SumTree::default();
        t.set(5, 0.0);
        assert_eq!(t.sample(0.0), None);
    }

    #[test]
    fn argmax_ties_go_to_oldest() {
        assert_eq!(argmax_by_order(&[1.0, 3.0, 3.0], &[0, 7, 2]), Some(2));
        assert_eq!(argmax_by_order(&[], &[]), None);
    }

    proptest! {
        #![proptest_config(crate::proptest_seed::config(256))]

        #[test]
        fn tree_total_matches_sum(ws in proptest::collection::vec(0.0f64..100.0, 1..200), updates in proptest::collection::vec((0usize..200, 0.0f64..100.0), 0..100)) {
            let mut t = SumTree::default();
            let mut plain = vec![0.0; 200];
            for (i, w) in ws.iter().enumerate() { t.set(i, *w); plain[i] = *w; }
            for (i, w) in updates { t.set(i, w); plain[i] = w; }
            let sum: f64 = plain.iter().sum();
            prop_assert!((t.total() - sum).abs() <= 1e-9 * sum.max(1.0));
            for u in [0.0, 0.25, 0.5, 0.75, 0.999_999] {
                if let Some(i) = t.sample(u * t.total()) {
                    prop_assert!(plain[i] > 0.0);
                }
            }
        }

        #[test]
        fn sample_lands_in_the_leafs_cumulative_range(ws in proptest::collection::vec(prop_oneof![Just(0.0), 0.0f64..10.0], 1..300), us in proptest::collection::vec(0.0f64..1.0, 1..20)) {
            let mut t = SumTree::default();
            for (i, w) in ws.iter().enumerate() { t.set(i, *w); }
            let total: f64 = ws.iter().sum();
            for u in us {
                let target = u * t.total();
                match t.sample(target) {
                    None => prop_assert!(total == 0.0),
                    Some(i) => {
                        prop_assert!(ws[i] > 0.0);
                        let below: f64 = ws[..i].iter().sum();
                        let eps = 1e-9 * total.max(1.0);
                        prop_assert!(below - eps <= target && target < below + ws[i] + eps,
                            "leaf {i} covers [{below}, {}) but the target is {target}", below + ws[i]);
                    }
                }
            }
        }

        #[test]
        fn the_block_pick_is_the_linear_pick(ws in proptest::array::uniform8(prop_oneof![Just(0.0), 0.0f64..10.0, 1e-300f64..1e-290]), u in 0.0f64..1.2) {
            let total: f64 = ws.iter().sum();
            for target in [u * total, u, 0.0, total] {
                prop_assert_eq!(pick_block(&ws, target), pick_linear_from(&ws, target));
            }
        }

        #[test]
        fn the_descent_is_the_multiplying_one(ws in proptest::collection::vec(prop_oneof![Just(0.0), 0.0f64..10.0], 1..600), us in proptest::collection::vec(0.0f64..1.0, 1..20)) {
            let mut t = SumTree::default();
            for (i, w) in ws.iter().enumerate() { t.set(i, *w); }
            for u in us {
                let target = u * t.total();
                prop_assert_eq!(t.sample(target), sample_multiplying(&t, target));
            }
        }

        #[test]
        fn linear_pick_never_picks_zero(ws in proptest::collection::vec(prop_oneof![Just(0.0), 0.0f64..10.0], 1..50), u in 0.0f64..1.0) {
            if let Some(i) = pick_linear(&ws, u) { prop_assert!(ws[i] > 0.0); }
        }
    }
}

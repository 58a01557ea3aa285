//! Cassandra's dynamic snitch, as absim's `ds` strategy models it.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use rand::rngs::SmallRng;
use rand::RngExt;

use super::{min_by_score, PickState, Picker};
use crate::core::Outcome;
use crate::sim::policy::{Cand, World};

/// Samples a reservoir keeps (Cassandra's `WINDOW_SIZE`).
const WINDOW: usize = 100;
/// Forward-decay rate per second (Cassandra's `ALPHA`): newer samples are kept preferentially.
const ALPHA: f64 = 0.75;
/// Scores are recomputed this often (Cassandra's `dynamic_snitch_update_interval_in_ms`).
const UPDATE_S: f64 = 0.1;
/// Every sample is dropped this often (`dynamic_snitch_reset_interval_in_ms`, 10 minutes).
const RESET_S: f64 = 600.0;

/// A kept sample: its log priority and its value.
#[derive(Clone, Copy, Debug)]
struct Kept(f64, f64);

impl PartialEq for Kept {
    fn eq(&self, o: &Self) -> bool {
        self.0.total_cmp(&o.0) == Ordering::Equal
    }
}
impl Eq for Kept {}
impl PartialOrd for Kept {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Kept {
    // Reversed, so the heap's top is the lowest priority (the one to evict).
    fn cmp(&self, o: &Self) -> Ordering {
        o.0.total_cmp(&self.0)
    }
}

/// The metrics library's `ExponentiallyDecayingSample` (forward decay, Cormode et al.): each
/// sample gets priority `exp(alpha * (t - landmark)) / u` with `u` uniform in (0, 1]; the
/// `WINDOW` highest priorities are kept. Priorities are kept as logarithms, so no rescaling is
/// needed however long the run.
#[derive(Clone, Debug, Default)]
struct Reservoir {
    kept: BinaryHeap<Kept>,
}

impl Reservoir {
    fn update(&mut self, value: f64, t: f64, rng: &mut SmallRng) {
        let u: f64 = 1.0 - rng.random::<f64>();
        let priority = ALPHA * t - u.ln();
        if self.kept.len() < WINDOW {
            self.kept.push(Kept(priority, value));
        } else if self.kept.peek().is_some_and(|low| low.0 < priority) {
            self.kept.pop();
            self.kept.push(Kept(priority, value));
        }
    }

    /// The snapshot's median (unweighted, interpolated as the metrics library's `Snapshot`
    /// does); 0 with no sample.
    fn median(&self, scratch: &mut Vec<f64>) -> f64 {
        scratch.clear();
        scratch.extend(self.kept.iter().map(|k| k.1));
        if scratch.is_empty() {
            return 0.0;
        }
        scratch.sort_by(f64::total_cmp);
        let n = scratch.len();
        let pos = 0.5 * (n as f64 + 1.0);
        if pos < 1.0 {
            return scratch[0];
        }
        if pos >= n as f64 {
            return scratch[n - 1];
        }
        let lower = scratch[pos as usize - 1];
        let upper = scratch[pos as usize];
        lower + (pos - pos.floor()) * (upper - lower)
    }
}

/// Cassandra's `DynamicEndpointSnitch` as absim's `ds` strategy adapts it (the baseline the C3
/// paper compares against): every response time, failures included at the time they took
/// (Cassandra records an expired request at its timeout), goes into the replica's decaying
/// reservoir. Every 100 ms each replica's score becomes
/// `median / max median + penalty / max penalty`, where the penalty is the time since the
/// replica last answered, capped at the update interval (absim's stand-in for Cassandra's
/// severity). A request goes to the allowed replica with the lowest score (absim's badness
/// threshold of 0). Every 10 minutes the reservoirs are emptied, as Cassandra's reset does.
#[derive(Debug)]
pub(crate) struct DynamicSnitch {
    samples: Vec<Reservoir>,
    /// When each replica last answered, seconds (0 before its first answer, as absim's
    /// `lastSeen`).
    last_seen: Vec<f64>,
    scores: Vec<f64>,
    next_update: f64,
    next_reset: f64,
    rng: SmallRng,
    scratch: Vec<f64>,
}

impl DynamicSnitch {
    pub(crate) fn new(rng: SmallRng) -> Self {
        DynamicSnitch {
            samples: Vec::new(),
            last_seen: Vec::new(),
            scores: Vec::new(),
            next_update: UPDATE_S,
            next_reset: RESET_S,
            rng,
            scratch: Vec::new(),
        }
    }

    fn grow(&mut self, c: Cand) {
        let n = c as usize + 1;
        if self.samples.len() < n {
            self.samples.resize_with(n, Default::default);
            self.last_seen.resize(n, 0.0);
            self.scores.resize(n, 0.0);
        }
    }

    /// Runs the periodic work due by `now`. Scores only change at update times; between two
    /// updates no sample can arrive without this being called first, so computing once for the
    /// last update time due gives the scores every earlier update would have ended with.
    fn advance(&mut self, now: f64) {
        while self.next_reset <= now {
            if self.next_update <= self.next_reset {
                let at = self.last_update_before(self.next_reset);
                self.update_scores(at);
            }
            for r in &mut self.samples {
                r.kept.clear();
            }
            self.next_reset += RESET_S;
        }
        if self.next_update <= now {
            let at = self.last_update_before(now);
            self.update_scores(at);
        }
    }

    /// The last update time at or before `t` (and moves `next_update` past it).
    fn last_update_before(&mut self, t: f64) -> f64 {
        let k = ((t - self.next_update) / UPDATE_S).floor().max(0.0);
        let at = self.next_update + k * UPDATE_S;
        self.next_update = at + UPDATE_S;
        at
    }

    fn update_scores(&mut self, at: f64) {
        let mut medians = Vec::with_capacity(self.samples.len());
        for r in &self.samples {
            medians.push(r.median(&mut self.scratch));
        }
        let max_latency = medians
            .iter()
            .copied()
            .filter(|&m| m > 1.0)
            .fold(1.0, f64::max);
        let update_ms = UPDATE_S * 1000.0;
        let penalties: Vec<f64> = self
            .last_seen
            .iter()
            .map(|&seen| ((at - seen) * 1000.0).min(update_ms))
            .collect();
        let max_penalty = if penalties.iter().any(|&p| p > 1.0) {
            penalties.iter().copied().fold(0.0, f64::max)
        } else {
            1.0
        };
        for (i, score) in self.scores.iter_mut().enumerate() {
            *score = medians[i] / max_latency + penalties[i] / max_penalty;
        }
    }
}

impl Picker for DynamicSnitch {
    fn pick(&mut self, s: &[Cand], st: &PickState<'_>, _: &World<'_>, rng: &mut SmallRng) -> Cand {
        self.advance(st.now);
        let scores = &self.scores;
        min_by_score(s, rng, |c| scores.get(c as usize).copied().unwrap_or(0.0))
    }

    fn outcome(&mut self, cand: Cand, _outcome: &Outcome, elapsed_s: f64, now: f64) {
        self.advance(now);
        self.grow(cand);
        let i = cand as usize;
        self.samples[i].update(elapsed_s * 1000.0, now, &mut self.rng);
        self.last_seen[i] = now;
    }
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;

    use super::*;

    #[test]
    fn the_reservoir_keeps_the_window_and_prefers_recent_samples() {
        let mut rng = SmallRng::seed_from_u64(1);
        let mut r = Reservoir::default();
        let mut scratch = Vec::new();
        assert_eq!(r.median(&mut scratch), 0.0);
        for i in 0..1000 {
            r.update(10.0, i as f64 * 0.001, &mut rng);
        }
        // Ten seconds later the old 10 ms samples are all but gone.
        for i in 0..1000 {
            r.update(50.0, 10.0 + i as f64 * 0.001, &mut rng);
        }
        // Cassandra's reservoir holds 100 samples.
        assert_eq!(r.kept.len(), 100);
        assert_eq!(r.median(&mut scratch), 50.0);
    }

    #[test]
    fn scores_are_the_latency_share_plus_the_silence_penalty() {
        let mut ds = DynamicSnitch::new(SmallRng::seed_from_u64(2));
        let ok = Outcome::failure(crate::core::FailureClass::Timeout);
        for k in 0..20 {
            let t = 0.001 * k as f64;
            ds.outcome(0, &ok, 0.010, t);
            ds.outcome(1, &ok, 0.040, t);
        }
        ds.advance(0.1);
        // At 100 ms both answered 81 ms ago (the max penalty): 10/40 + 1 and 40/40 + 1.
        assert!((ds.scores[0] - 1.25).abs() < 1e-9, "{:?}", ds.scores);
        assert!((ds.scores[1] - 2.0).abs() < 1e-9, "{:?}", ds.scores);
        // Scores do not move between updates.
        ds.outcome(1, &ok, 0.001, 0.15);
        assert!((ds.scores[1] - 2.0).abs() < 1e-9);
    }

    #[test]
    fn the_median_interpolates_between_the_middle_samples() {
        let mut rng = SmallRng::seed_from_u64(4);
        let mut r = Reservoir::default();
        r.update(10.0, 0.0, &mut rng);
        r.update(20.0, 0.0, &mut rng);
        // Position 0.5 x (2 + 1) = 1.5: halfway between the first and the second.
        assert_eq!(r.median(&mut Vec::new()), 15.0);
        r.update(40.0, 0.0, &mut rng);
        assert_eq!(r.median(&mut Vec::new()), 20.0);
    }

    #[test]
    fn the_silence_penalty_is_capped_at_the_update_interval() {
        let mut ds = DynamicSnitch::new(SmallRng::seed_from_u64(5));
        let ok = Outcome::success();
        ds.outcome(0, &ok, 0.010, 0.01);
        ds.outcome(1, &ok, 0.010, 0.25);
        // The update at 0.3 s: replica 0 silent for 290 ms counts 100 ms, the maximum;
        // replica 1, 50 ms.
        ds.advance(0.35);
        assert!((ds.scores[0] - 2.0).abs() < 1e-9, "{:?}", ds.scores);
        assert!((ds.scores[1] - 1.5).abs() < 1e-9, "{:?}", ds.scores);
    }

    #[test]
    fn every_ten_minutes_the_reservoirs_are_emptied() {
        let mut ds = DynamicSnitch::new(SmallRng::seed_from_u64(3));
        let ok = Outcome::success();
        for k in 0..50 {
            ds.outcome(0, &ok, 0.010, k as f64);
        }
        ds.outcome(0, &ok, 0.010, 599.0);
        assert_eq!(ds.samples[0].kept.len(), 51);
        // Past 600 s only what came since is kept.
        ds.outcome(0, &ok, 0.030, 600.5);
        assert_eq!(ds.samples[0].kept.len(), 1);
        assert_eq!(ds.samples[0].median(&mut Vec::new()), 30.0);
    }
}

//! Whether a candidate slows down under concurrency, learned from its own attempts.
//!
//! Each timed attempt carries how many attempts the candidate had in flight when it was granted
//! (`k`, itself included) and how long it took (`x = ln(time)`). A queueing server answers
//! slower the more it holds: `x` grows with `k`. The time is taken as it is, not as a ratio to
//! the candidate's time estimate: the estimate follows the times, which follow the queue, so
//! a ratio would hide most of the slope (`docs/tuning.md`, "The load fit reads times as they
//! are"). A provider whose latency is its own (a retrieval from a remote peer) shows no such
//! slope. The fit is a least-squares slope of `x` on `ln(k)` over moving averages (an
//! elasticity); the evidence is how far that slope stands above its own noise, so a candidate
//! that merely varies is not mistaken for one that queues.
//!
//! The evidence gates the load component ([`crate::score::Config`]'s `load`), alongside the
//! evidence of overload errors: work piled on a candidate that copes with it costs nothing,
//! while one whose answers slow as its queue grows is spread like any load-aware balancer would.
//!
//! The same concurrencies say whether a candidate's overload failures follow its load. A
//! server past its capacity sheds when it is busy: its overload failures come at a higher
//! concurrency than its attempts on the whole. One that sheds a steady share at any load (a
//! quota's 503s, a flaky dependency) sheds as often alone as busy, and holding it to one
//! attempt in flight would not spare it a single failure ([`LoadFit::overload_follows_load`]).

use serde::{Deserialize, Serialize};

/// Weight of the newest attempt in the fit's averages (after a warm-up): about 1,000 attempts of
/// memory.
const FIT_ALPHA: f32 = 0.002;
/// An elasticity of this much above its noise (twice the attempts in flight, 40 % slower)
/// counts as full evidence.
const FULL_SLOPE: f32 = 0.5;
/// Attempts after which `1 / n` is surely below [`FIT_ALPHA`] (twice its inverse).
const WARM: u32 = 1_000;
/// Standard errors the slope must clear before any of it counts.
const SIGNIFICANCE: f32 = 2.0;
/// Per attempt, the share of the evidence kept when the fit shows less.
const EVIDENCE_KEEP: f32 = 0.99995;
/// The largest elasticity [`LoadFit::time_factor`] uses (a queue well past its servers
/// shows about 1).
const MAX_ELASTICITY: f64 = 1.5;
/// Below this variance of `ln(n)` the slope is not estimated (nothing varied).
const MIN_K_VAR: f32 = 0.01;
/// The steepest growth of the shed share with concurrency [`LoadFit::shed_at`] reads (a
/// power of the attempts in flight): a few sheds at a concurrency barely above the usual one
/// would otherwise read as a wall.
const MAX_SHED_SLOPE: f64 = 20.0;
/// Standard errors by which the overload failures' mean concurrency must exceed the
/// attempts' for them to follow the load.
const SHED_SIGNIFICANCE: f32 = 2.0;

/// The moving averages of the fit, per candidate. A snapshot keeps it
/// ([`CandidateSnapshot::load_fit`](crate::snapshot::CandidateSnapshot::load_fit)); its fields
/// are the fit's own and are read back only by this crate.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoadFit {
    /// Mean log concurrency at grant (`ln k`, 0 for one attempt in flight).
    k: f32,
    /// Mean log time (natural log of milliseconds).
    x: f32,
    /// Covariance of the two.
    kx: f32,
    /// Variance of the log concurrency.
    kk: f32,
    /// Variance of the log time.
    xx: f32,
    /// Attempts seen (saturating), for the warm-up.
    n: u32,
    /// The evidence as of the last attempt, in `[0, 1]`.
    evidence: f32,
    /// Share of overload failures among the outcomes of granted attempts (moving average of
    /// the fit's memory).
    shed: f32,
    /// Moving average of `ln(k)` times 1 for an overload failure, 0 otherwise: `shed_k / shed`
    /// is the mean concurrency (its logarithm) at which the candidate sheds.
    shed_k: f32,
}

/// Weight of the newest sample in the fit's moving averages, the `count`-th (from 1): a plain
/// mean while `1 / count` is above [`FIT_ALPHA`], then `FIT_ALPHA`.
#[inline]
fn weight(count: u64) -> f32 {
    // Once warm, 1 / count is below the floor: no division.
    if count > u64::from(WARM) {
        FIT_ALPHA
    } else {
        FIT_ALPHA.max(1.0 / count.max(1) as f32)
    }
}

/// `ln(k)`, 0 for one attempt in flight (or none).
#[inline]
fn ln_k(k: u32) -> f32 {
    if k <= 1 {
        0.0
    } else {
        (k as f32).ln()
    }
}

impl LoadFit {
    /// Adds an attempt granted at concurrency `k` that took `time_ms`.
    #[inline]
    pub(crate) fn observe(&mut self, k: u32, time_ms: f64) {
        let x = time_ms.max(1e-3).ln() as f32;
        if !x.is_finite() {
            return;
        }
        // One attempt in flight is the common case, and ln(1) is exactly 0.
        let k = ln_k(k);
        self.n = self.n.saturating_add(1);
        let a = weight(u64::from(self.n));
        let dk = k - self.k;
        let dx = x - self.x;
        self.k += a * dk;
        self.x += a * dx;
        // West's weighted update: the new means times the old deviations.
        self.kk = (1.0 - a) * (self.kk + a * dk * dk);
        self.xx = (1.0 - a) * (self.xx + a * dx * dx);
        self.kx = (1.0 - a) * (self.kx + a * dk * dx);
        // Queueing is what a server is, not a passing mood: once seen, the evidence fades
        // only over many thousands of attempts, so balancing it away does not switch it off.
        // Both are finite and in [0, 1]: a plain comparison.
        let kept = self.evidence * EVIDENCE_KEEP;
        let now = self.compute();
        self.evidence = if now > kept { now } else { kept };
        // Faded to nothing (without this, `f32` would stop at a subnormal above 0).
        if self.evidence < crate::score::observe::EVIDENCE_GONE {
            self.evidence = 0.0;
        }
    }

    /// The fitted slope less [`SIGNIFICANCE`] standard errors; `None` before the fit has
    /// data (too few attempts, or a concurrency that never varied).
    #[inline]
    fn slope_above_noise(&self) -> Option<f32> {
        if self.kk < MIN_K_VAR || self.n < 10 {
            return None;
        }
        let slope = self.kx / self.kk;
        let resid = (self.xx - slope * self.kx).max(0.0);
        // Effective samples of the moving averages: about 2 / alpha once warm.
        let n_eff = (self.n as f32).min(2.0 / FIT_ALPHA - 1.0);
        let se = (resid / (n_eff * self.kk)).sqrt();
        Some(slope - SIGNIFICANCE * se)
    }

    #[inline]
    fn compute(&self) -> f32 {
        let Some(b) = self.slope_above_noise() else {
            return 0.0;
        };
        let e = b / FULL_SLOPE;
        if e.is_finite() {
            e.clamp(0.0, 1.0)
        } else {
            0.0
        }
    }

    /// How much slower than its average an attempt granted at concurrency `next` (itself
    /// included) is expected to be: `(next / K)^b`, with `K` the geometric mean concurrency
    /// its times were measured at and `b` the fitted elasticity less two standard errors
    /// (0 when the fit shows nothing beyond its noise). 1 before the fit has data.
    #[inline]
    pub(crate) fn time_factor(&self, next: u32) -> f64 {
        // The evidence is at least the present slope's share above its noise: 0 means no
        // slope now either (the usual case, and no arithmetic).
        if self.evidence <= 0.0 {
            return 1.0;
        }
        let Some(b) = self.slope_above_noise() else {
            return 1.0;
        };
        let b = f64::from(b).clamp(0.0, MAX_ELASTICITY);
        if b.is_nan() || b <= 0.0 {
            return 1.0;
        }
        let k = if next <= 1 { 0.0 } else { f64::from(next).ln() };
        (b * (k - f64::from(self.k))).exp().clamp(1.0 / 8.0, 8.0)
    }

    /// Adds the outcome of any attempt granted at concurrency `k` (itself included): whether
    /// it was an overload failure. `outcomes` is the candidate's count of outcomes, this one
    /// included, for the warm-up (a plain mean until the moving averages take over).
    #[inline]
    pub(crate) fn observe_shed(&mut self, k: u32, overload: bool, outcomes: u64) {
        let a = weight(outcomes);
        if overload {
            self.shed += a * (1.0 - self.shed);
            self.shed_k += a * (ln_k(k) - self.shed_k);
        } else {
            // No logarithm for the usual outcome: both averages only fade.
            self.shed -= a * self.shed;
            self.shed_k -= a * self.shed_k;
        }
    }

    /// Whether the candidate's overload failures follow its load: their mean concurrency
    /// (log) exceeds that of its timed attempts by more than [`SHED_SIGNIFICANCE`] standard
    /// errors, however few the failures in memory. A few failures have a wide standard error,
    /// so they follow the load only if they came at a concurrency well above the usual one:
    /// a failure or two at the usual concurrency is a trickle until more show otherwise.
    /// (Presuming that they follow the load until five are held let a fast server's first
    /// background failure hold it to one attempt in flight; its attempts then came at a lower
    /// concurrency than its old failures, which seemed to confirm it.) `true` with nothing to
    /// compare (no overload failure in memory). `outcomes` as for
    /// [`LoadFit::observe_shed`].
    #[inline]
    pub(crate) fn overload_follows_load(&self, outcomes: u64) -> bool {
        // Overload failures in memory: the share times the averages' effective count.
        let held = self.shed * (outcomes as f32).min(2.0 / FIT_ALPHA - 1.0);
        let excess = self.shed_k / self.shed - self.k;
        let se = (self.kk.max(0.0) / held).sqrt();
        // NaN (nothing to compare with) reads as following.
        excess > SHED_SIGNIFICANCE * se || excess.is_nan() || se.is_nan()
    }

    /// The share of an attempt granted at concurrency `next` (itself included) expected to
    /// end as an overload failure, for a candidate whose failures follow its load: the share in
    /// memory tilted by how far `next` lies from the attempts' mean concurrency, on a log
    /// scale, at the rate the failures' own mean concurrency says. If the chance of a shed
    /// grows as `k^b` and `ln k` is spread normally around its mean `m` with variance `v`,
    /// the sheds' mean log concurrency is `m + b v`, so `b = (m_shed - m) / v`, and the share
    /// at `next` is `shed * exp(b (ln next - m) - b^2 v / 2)`. `None` without sheds in memory
    /// or before the concurrency has varied.
    pub(crate) fn shed_at(&self, next: u32) -> Option<f64> {
        if self.shed.is_nan() || self.shed <= 0.0 || self.kk < MIN_K_VAR || self.n < 10 {
            return None;
        }
        let shed = f64::from(self.shed);
        let m = f64::from(self.k);
        let v = f64::from(self.kk);
        let b = ((f64::from(self.shed_k) / shed - m) / v).clamp(0.0, MAX_SHED_SLOPE);
        let p = shed * (b * (f64::from(ln_k(next)) - m) - 0.5 * b * b * v).exp();
        p.is_finite().then(|| p.clamp(0.0, 1.0))
    }

    /// How strongly the candidate's time grows with its concurrency, in `[0, 1]`.
    #[inline]
    pub(crate) fn evidence(&self) -> f32 {
        self.evidence
    }

    /// Whether any attempt was fitted (a fit that saw none is not worth keeping).
    pub(crate) fn is_empty(&self) -> bool {
        *self == LoadFit::default()
    }

    /// The first field a fit read from a file could not have reached by fitting: not finite,
    /// a mean logarithm or a variance below 0, a share outside `[0, 1]`.
    pub(crate) fn problem(&self) -> Option<(&'static str, &'static str)> {
        let finite = [
            ("k", self.k),
            ("x", self.x),
            ("kx", self.kx),
            ("kk", self.kk),
            ("xx", self.xx),
            ("evidence", self.evidence),
            ("shed", self.shed),
            ("shed_k", self.shed_k),
        ];
        if let Some((field, _)) = finite.iter().find(|(_, v)| !v.is_finite()) {
            return Some((field, "must be a finite number"));
        }
        let non_negative = [
            ("k", self.k),
            ("kk", self.kk),
            ("xx", self.xx),
            ("shed_k", self.shed_k),
        ];
        if let Some((field, _)) = non_negative.iter().find(|(_, v)| *v < 0.0) {
            return Some((field, "must not be negative"));
        }
        let share = [("evidence", self.evidence), ("shed", self.shed)];
        if let Some((field, _)) = share.iter().find(|(_, v)| !(0.0..=1.0).contains(v)) {
            return Some((field, "must be in [0, 1]"));
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::{RngExt, SeedableRng};

    #[test]
    fn a_queueing_candidate_shows_evidence_and_a_steady_one_does_not() {
        let mut rng = SmallRng::seed_from_u64(3);
        let (mut queue, mut steady) = (LoadFit::default(), LoadFit::default());
        for _ in 0..2000 {
            let k: u32 = rng.random_range(1..16);
            let noise = rng.random_range(0.7..1.3);
            // 4 servers: past 4 in flight the time grows with the queue.
            let q = 10.0 * (k as f64 / 4.0).max(1.0) * noise;
            queue.observe(k, q);
            steady.observe(k, 10.0 * noise * rng.random_range(0.5..2.0));
        }
        assert!(queue.evidence() > 0.5, "{queue:?}");
        assert!(steady.evidence() < 0.05, "{steady:?}");
    }

    /// Evidence that fades ends at 0, not at a subnormal `f32` the fading cannot move.
    #[test]
    fn faded_evidence_reaches_zero() {
        let mut rng = SmallRng::seed_from_u64(4);
        let mut fit = LoadFit::default();
        for _ in 0..2000 {
            let k: u32 = rng.random_range(1..16);
            fit.observe(k, 10.0 * (k as f64 / 4.0).max(1.0));
        }
        assert!(fit.evidence() > 0.5);
        // Then the time no longer depends on the load: the evidence fades by the keep factor.
        for _ in 0..400_000 {
            let k: u32 = rng.random_range(1..16);
            fit.observe(k, 10.0);
        }
        assert_eq!(fit.evidence(), 0.0, "{fit:?}");
    }

    /// Feeds `n` attempts at concurrencies uniform in 1..=8: served ones timed, and overload
    /// failures with probability `shed(k)`.
    fn shedding(n: u64, shed: impl Fn(u32) -> f64, seed: u64) -> LoadFit {
        let mut rng = SmallRng::seed_from_u64(seed);
        let mut f = LoadFit::default();
        for i in 1..=n {
            let k: u32 = rng.random_range(1..=8);
            let overload = rng.random_bool(shed(k));
            if !overload {
                f.observe(k, 20.0 * rng.random_range(0.5..2.0));
            }
            f.observe_shed(k, overload, i);
        }
        f
    }

    #[test]
    fn overload_failures_past_a_capacity_follow_the_load_and_a_steady_share_does_not() {
        for seed in 1..=5 {
            // Past 4 in flight each extra attempt sheds 20 % (and 1 % at any load).
            let capacity = shedding(5_000, |k| 0.01 + 0.2 * k.saturating_sub(4) as f64, seed);
            assert!(
                capacity.overload_follows_load(5_000),
                "{seed}: {capacity:?}"
            );
            // 2 % at any concurrency.
            let steady = shedding(5_000, |_| 0.02, seed);
            assert!(!steady.overload_follows_load(5_000), "{seed}: {steady:?}");
        }
    }

    #[test]
    fn the_shed_share_is_read_at_the_concurrency_of_the_next_grant() {
        for seed in 1..=5 {
            // Past 4 in flight each extra attempt sheds 20 %: none below, 80 % at 8.
            let capacity = shedding(5_000, |k| 0.2 * k.saturating_sub(4) as f64, seed);
            let at = |k| capacity.shed_at(k).unwrap();
            assert!(at(2) < 0.05, "{seed}: {}", at(2));
            assert!(at(4) < at(6) && at(6) < at(8), "{seed}: {capacity:?}");
            assert!(at(8) > 0.4, "{seed}: {}", at(8));
            // A steady 2 % at any concurrency reads about 2 % everywhere.
            let steady = shedding(5_000, |_| 0.02, seed);
            for k in [1, 4, 8] {
                let p = steady.shed_at(k).unwrap();
                assert!((0.005..0.05).contains(&p), "{seed} {k}: {p}");
            }
        }
        // Nothing to read without sheds, or before the concurrency has varied.
        assert_eq!(shedding(2_000, |_| 0.0, 1).shed_at(4), None);
        let mut one_level = LoadFit::default();
        for i in 1..=100 {
            one_level.observe(3, 20.0);
            one_level.observe_shed(3, i % 10 == 0, i);
        }
        assert_eq!(one_level.shed_at(4), None);
    }

    #[test]
    fn a_few_overload_failures_follow_the_load_only_well_above_the_usual_concurrency() {
        // 0.1 % at any load: a few failures in the averages' memory, at the concurrencies
        // the attempts come at. Each seed's handful reads as a trickle.
        for seed in 1..=5 {
            let rare = shedding(5_000, |_| 0.001, seed);
            assert!(!rare.overload_follows_load(5_000), "{seed}: {rare:?}");
        }
        // A server that works alone and sheds the one time it is given three: a single
        // failure far above its usual concurrency is enough.
        let mut alone = LoadFit::default();
        for i in 1..=500u64 {
            alone.observe(1 + u32::from(i % 10 == 0), 20.0);
            alone.observe_shed(1 + u32::from(i % 10 == 0), false, i);
        }
        alone.observe_shed(3, true, 501);
        assert!(alone.overload_follows_load(501), "{alone:?}");
        // The same failure at its usual concurrency is not.
        let mut usual = alone;
        usual.shed = 0.0;
        usual.shed_k = 0.0;
        usual.observe_shed(1, true, 502);
        assert!(!usual.overload_follows_load(502), "{usual:?}");
        // None at all, and a fresh fit: nothing to compare with.
        assert!(shedding(100, |_| 0.0, 3).overload_follows_load(100));
        assert!(LoadFit::default().overload_follows_load(0));
        // Only overload failures, never a timed attempt: nothing to compare them with.
        let mut f = LoadFit::default();
        for i in 1..=100 {
            f.observe_shed(3, true, i);
        }
        assert!(f.overload_follows_load(100), "{f:?}");
    }

    #[test]
    fn nothing_varied_means_no_evidence() {
        let mut f = LoadFit::default();
        for i in 0..100 {
            f.observe(1, 10.0 + i as f64);
        }
        assert_eq!(f.evidence(), 0.0);
        f.observe(3, f64::NAN);
        f.observe(3, f64::INFINITY);
        assert!(f.evidence().is_finite());
    }

    #[test]
    fn the_time_factor_follows_the_queue_and_stays_near_1_without_one() {
        let mut rng = SmallRng::seed_from_u64(5);
        let (mut queue, mut steady) = (LoadFit::default(), LoadFit::default());
        assert_eq!(queue.time_factor(8), 1.0);
        for _ in 0..2000 {
            let k: u32 = rng.random_range(1..16);
            let noise = rng.random_range(0.8..1.2);
            queue.observe(k, 10.0 * (k as f64 / 4.0).max(1.0) * noise);
            steady.observe(k, 10.0 * noise * rng.random_range(0.5..2.0));
        }
        // Slower than its average at a deep queue, faster when idle, monotone in between.
        let f: Vec<f64> = [1, 2, 4, 8, 16, 1000]
            .iter()
            .map(|&k| queue.time_factor(k))
            .collect();
        assert!(f[0] < 1.0 && f[4] > 1.5, "{f:?}");
        assert!(f.windows(2).all(|w| w[0] <= w[1]), "{f:?}");
        assert!(f.iter().all(|&x| (1.0 / 8.0..=8.0).contains(&x)), "{f:?}");
        // A time that does not follow the concurrency moves it by noise alone.
        for k in [1, 4, 16] {
            let f = steady.time_factor(k);
            assert!((f - 1.0).abs() < 0.03, "{f} {steady:?}");
        }
    }
}

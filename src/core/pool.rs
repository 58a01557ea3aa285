//! What the coarse refresh learns about the fleet as a whole for pooled estimates and the
//! probe schedule (see `ema.pooling` and `ema.probe_s`).

use super::Core;
use crate::score::{ScoreContext, StatsView};

/// The newest overload failure's weight in [`Pool::observe_shed`]'s average, once warm.
const SHED_ALPHA: f64 = 0.02;

/// Scheduled probes take at most this share of the draws: on a large fleet the probe period
/// stretches to `candidates / (PROBE_SHARE * decisions per second)`.
const PROBE_SHARE: f64 = 0.01;
/// How far above the noise the candidates' spread of relative times must be before any of it
/// counts: Cochran's `Q` over `k` candidates must exceed its expectation under no spread,
/// `k - 1`, by `NOISE_MARGIN` of its standard deviations, `sqrt(2 (k - 1))` (a spread that
/// noise alone exceeds about one time in forty).
const NOISE_MARGIN: f64 = 2.0;

/// The fleet-wide inputs of pooling and probing, recomputed by each coarse refresh.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Pool {
    /// Spread of the candidates' true times per success beyond noise (squared log ratios).
    pub(crate) spread: f64,
    /// The mean over candidates of `ln(time per success)` (NaN: none known).
    pub(crate) center: f64,
    /// The spread beyond noise of the candidates' success averages, and their center (NaN:
    /// none known), which a last attempt's draw reads (`last_attempt.failure_cost`).
    pub(crate) success_spread: f64,
    pub(crate) success_center: f64,
    /// The all-candidate averages as of the last refresh: with pooling, every candidate is
    /// scored against this one reference until the next refresh, so one rescored after an
    /// outcome is not compared with a reference its peers never saw.
    pub(crate) overall: Option<crate::score::Overall>,
    /// The scheduled probe periods: the budget shared by every live candidate, and the
    /// record probes' shared by the idle ones with a good record (`ema.record_probes`).
    pub(crate) probes: crate::score::ProbePeriods,
    /// How much the fleet queues: the mean over live candidates of their evidence that they
    /// slow under concurrency. It gates the load component for every candidate alike, so
    /// one whose fit was misled by a passing degradation is not held apart from the rest.
    pub(crate) queueing: f32,
    /// Whether a live candidate sheds with its load (overload failures that follow it, as of
    /// the last refresh): only then does a last attempt's draw weigh sheds
    /// (`last_attempt.shed_cost`), and leave the tree.
    pub(crate) shedding: bool,
    /// The load component's powers of `queueing`, worked out when it is.
    pub(crate) queueing_powers: crate::score::LoadPowers,
    /// What `load.fleet_relative` counts attempts in flight against: the mean attempts in
    /// flight per live candidate raised to `queueing` ([`crate::score::fleet_scale`]).
    pub(crate) load_scale: f64,
    /// When a failing candidate last answered (virtual seconds; -inf: never, or heal probes
    /// off): every other failing candidate last sampled before is due a probe.
    pub(crate) heal_at_s: f64,
    /// The deadline advice's multiple of a first-byte average as of the last refresh
    /// ([`crate::score::DeadlineConfig`]: from the fleet's spread and its queueing); NaN
    /// before the first, when the advice goes by `factor`.
    pub(crate) deadline_multiple: f64,
    /// The last heal not yet applied: it takes effect at the next refresh (`heal_at_s`).
    heal_next_s: f64,
    decisions: u64,
    /// When the pool was last recomputed (virtual seconds): where the decision rate is
    /// measured from, and the time probes are judged at
    /// ([`crate::score::ScoreContext::probe_at_s`]).
    pub(crate) at_s: f64,
    rate: f64,
    /// The share of overload failures whose requests went on to another attempt (a moving
    /// average, the first ones a plain mean), which sets `load.shed_relief` in force; 1 until
    /// one is seen.
    shed_retried: f64,
    sheds: u32,
}

impl Default for Pool {
    fn default() -> Self {
        Pool {
            spread: 0.0,
            center: f64::NAN,
            success_spread: 0.0,
            success_center: f64::NAN,
            overall: None,
            probes: crate::score::ProbePeriods::default(),
            queueing: 0.0,
            shedding: false,
            queueing_powers: crate::score::LoadPowers::new(0.0),
            load_scale: 1.0,
            heal_at_s: f64::NEG_INFINITY,
            deadline_multiple: f64::NAN,
            heal_next_s: f64::NEG_INFINITY,
            decisions: 0,
            at_s: 0.0,
            rate: 0.0,
            shed_retried: 1.0,
            sheds: 0,
        }
    }
}

impl Pool {
    /// The rates a snapshot keeps (`None` before any was measured).
    pub(crate) fn rates(&self) -> Option<crate::snapshot::RatesSnapshot> {
        (self.rate > 0.0 || self.sheds > 0).then_some(crate::snapshot::RatesSnapshot {
            decisions_per_s: self.rate,
            sheds_retried: self.shed_retried,
            sheds: self.sheds,
        })
    }

    /// Puts back the rates of a snapshot (checked); the next coarse refresh applies them.
    pub(crate) fn restore_rates(&mut self, r: &crate::snapshot::RatesSnapshot) {
        self.rate = r.decisions_per_s;
        self.shed_retried = r.sheds_retried;
        self.sheds = r.sheds;
    }

    /// Counts an overload failure whose request `retried` (went on to another attempt) or not.
    pub(crate) fn observe_shed(&mut self, retried: bool) {
        self.sheds = self.sheds.saturating_add(1);
        let a = (1.0 / f64::from(self.sheds)).max(SHED_ALPHA);
        self.shed_retried += a * (f64::from(u8::from(retried)) - self.shed_retried);
    }

    /// The variance of a success average whose newest outcome weighs `weight`
    /// ([`crate::score::ScoreModel::success_weight`]) for a candidate as likely to succeed as
    /// the fleet's center `center`.
    #[inline]
    pub(crate) fn success_noise(center: f64, weight: f64) -> f64 {
        let c = center.clamp(0.02, 0.98);
        weight / (2.0 - weight) * c * (1.0 - c)
    }

    /// A success average `success` whose newest outcome weighs `weight`, pulled toward the
    /// fleet's center by its noise against the spread the candidates really show (as their
    /// time estimates are pooled): a difference within noise counts for nothing.
    #[inline]
    pub(crate) fn shrunk_success(&self, success: f64, weight: f64) -> f64 {
        let c = self.success_center;
        if !c.is_finite() {
            return success;
        }
        let v = Pool::success_noise(c, weight);
        let t = self.success_spread;
        let keep = if t > 0.0 { t / (t + v) } else { 0.0 };
        c + (success - c) * keep
    }

    /// A failing candidate answered at `now_s`: with heal probes on (`ema.heal_probes`, with
    /// scheduled probes), the others failing with it are probed from the next refresh on.
    /// Failures that come together (a network partition, a shared dependency, a deploy) tend
    /// to heal together, and a shunned candidate's own probes may be tens of seconds apart.
    pub(crate) fn healed(&mut self, now_s: f64, config: &crate::score::Config) {
        let ema = &config.ema;
        if ema.heal_probes && ema.drift > 0.0 && ema.probe_s > 0.0 {
            self.heal_next_s = now_s;
        }
    }
}

impl Core {
    /// Recomputes the pool after a coarse refresh. O(n).
    pub(crate) fn refresh_pool(&mut self) {
        let ema = &self.model.config().ema;
        let now_s = self.clock.now_s;
        // Whether a probe is due is judged at refreshes only (at `at_s`, set below): every leaf
        // of the trees and every evaluated draw see the same answer until the next one.
        self.pool.heal_at_s = self.pool.heal_next_s;
        // Decisions per second, smoothed over a few refreshes.
        let dt = now_s - self.pool.at_s;
        if dt > 0.0 {
            let r = (self.out.counters.decisions - self.pool.decisions) as f64 / dt;
            self.pool.rate = if self.pool.rate > 0.0 {
                self.pool.rate + 0.3 * (r - self.pool.rate)
            } else {
                r
            };
            self.pool.decisions = self.out.counters.decisions;
        }
        // The clock only moves forward: without time passed, `at_s` is `now_s` already.
        self.pool.at_s = now_s;
        let probe_s = (ema.drift > 0.0 && ema.probe_s > 0.0).then_some(ema.probe_s);
        let budget = PROBE_SHARE * self.pool.rate;
        // `count` candidates sharing the budget: each is due every `count / budget` seconds,
        // at least `probe_s`.
        let period = |p: f64, count: usize| {
            if budget > 0.0 {
                p.max(count as f64 / budget)
            } else {
                f64::INFINITY
            }
        };
        self.pool.probes.fleet_s =
            probe_s.map_or(f64::INFINITY, |p| period(p, self.fleet.live_count));
        // Record probes: the candidates with a good record idle for longer than `probe_s`.
        let record_s = probe_s.filter(|_| ema.record_probes);
        let (mut live, mut q, mut idle_record) = (0usize, 0.0f64, 0usize);
        let mut shedding = false;
        for (idx, fit) in self.fleet.load_fit.iter().enumerate() {
            let slot = &self.fleet.slots[idx];
            if slot.live {
                live += 1;
                q += f64::from(fit.evidence());
                shedding = shedding || super::scoring::sheds_with_load(slot, fit);
                if let Some(p) = record_s {
                    let stats = &slot.stats;
                    if stats.last_sample_s().is_some_and(|l| now_s - l > p)
                        && crate::score::good_record(stats.attempts(), stats.successes())
                    {
                        idle_record += 1;
                    }
                }
            }
        }
        self.pool.probes.record_s =
            record_s.map_or(f64::INFINITY, |p| period(p, idle_record.max(1)));
        let queueing = if live > 0 {
            (q / live as f64) as f32
        } else {
            0.0
        };
        self.pool.queueing = queueing;
        self.pool.shedding = shedding;
        self.pool.queueing_powers = crate::score::LoadPowers::new(f64::from(queueing));
        self.pool.load_scale =
            crate::score::fleet_scale(self.attempts.in_flight(), self.fleet.live_count, queueing);
        self.pool.deadline_multiple = self
            .model
            .config()
            .deadline
            .multiple(self.fleet.overall.ttfb_spread, self.pool.queueing);
        // The floor in force: the config's, less where it would reach each candidate too
        // rarely to bring one back (`floor_period_s`) at this decision rate, and the shed
        // relief at the share of sheds retried; the same for the arms and shadows that draw
        // with a config of their own.
        let (rate, live, retried) = (
            self.pool.rate,
            self.fleet.live_count,
            self.pool.shed_retried,
        );
        self.model.set_in_force(rate, live, retried);
        super::arms::set_in_force(&mut self.arms, &mut self.shadows, rate, live, retried);
        if self.model.last_attempt_rate().is_some() {
            self.refresh_success_pool();
        }
        if !self.model.pooling() {
            self.pool.spread = 0.0;
            self.pool.center = f64::NAN;
            self.pool.overall = None;
            return;
        }
        self.pool.overall = Some(self.fleet.overall);
        // The spread beyond noise and the center, as a random-effects meta-analysis finds
        // them (DerSimonian and Laird): each candidate's `ln(time per success)` weighed by the
        // precision of its estimate, so one that has just changed, or whose times are
        // heavy-tailed, neither makes identical candidates look different nor hides a real
        // difference among the steady ones. Sums are taken around the previous center, and the
        // center weighs each estimate by `1 / (var + spread)` with the previous spread.
        let c0 = if self.pool.center.is_finite() {
            self.pool.center
        } else {
            0.0
        };
        let prev_spread = self.pool.spread;
        let mut sums = SpreadSums::default();
        let ctx: ScoreContext = self.pool_context();
        for (idx, slot) in self.fleet.slots.iter().enumerate() {
            if !slot.live {
                continue;
            }
            // With remote evidence, the candidate's terms as it is scored: prior included.
            let terms = match self
                .share
                .as_ref()
                .and_then(|_| self.blended(idx, &slot.stats.unpack()))
            {
                Some(b) => self
                    .model
                    .pooled_deviation(&b, &ctx)
                    .map(|d| (d.raw, d.var)),
                None => self.model.pooled_terms(&slot.stats, &ctx),
            };
            if let Some((raw, var)) = terms {
                sums.add(raw - c0, var, prev_spread);
            }
        }
        (self.pool.spread, self.pool.center) = sums.spread_and_center_at(c0);
    }

    /// The success averages' spread and center, as the time estimates' above: each average's
    /// noise is that of the fleet's center as an average of as many outcomes as it weighs.
    fn refresh_success_pool(&mut self) {
        let c0 = self.pool.success_center;
        let c0 = if c0.is_finite() { c0 } else { 0.5 };
        let prev_spread = self.pool.success_spread;
        let mut sums = SpreadSums::default();
        for slot in self.fleet.slots.iter().filter(|s| s.live) {
            let Some(s) = slot.stats.success() else {
                continue;
            };
            let weight = self.model.success_weight(slot.stats.attempts());
            let v = Pool::success_noise(c0, weight);
            sums.add(s - c0, v, prev_spread);
        }
        (self.pool.success_spread, self.pool.success_center) = sums.spread_and_center_at(c0);
    }

    /// A context with what [`crate::score::ScoreModel::pooled_deviation`] reads.
    fn pool_context(&self) -> ScoreContext {
        ScoreContext {
            overall: self.fleet.overall,
            now_s: self.clock.now_s,
            bucket: self.clock.bucket(),
            stake_total: self.fleet.stake_total,
            in_flight: 0,
            limit: u32::MAX,
            pending_ms: 0.0,
            spread: self.pool.spread,
            center: self.pool.center,
            probes: self.pool.probes,
            probe_at_s: self.pool.at_s,
            queueing: 0.0,
            load_scale: 1.0,
            own_queueing: 0.0,
            overload_follows_load: true,
            queue_time: 1.0,
            heal_at_s: self.pool.heal_at_s,
        }
    }
}

/// The running sums of one coarse refresh's pooling pass: DerSimonian and Laird's estimate of
/// the spread between candidates beyond the noise of their estimates, and the center.
#[derive(Clone, Copy, Debug, Default)]
struct SpreadSums {
    k: usize,
    /// Sums of the precision weights `w = 1 / var`, `w y`, `w y^2` and `w^2`.
    w: f64,
    wy: f64,
    wy2: f64,
    w2: f64,
    /// Sums of the random-effects weights `u = 1 / (var + spread)` and `u y`.
    u: f64,
    uy: f64,
}

/// Estimates are taken as at least this uncertain (squared natural-log units), so that one
/// read as exact does not outweigh the rest of the fleet.
const MIN_ESTIMATE_VAR: f64 = 1e-4;

impl SpreadSums {
    /// One candidate: `y` its `ln(time per success)` less a reference, `var` its estimate's
    /// variance, `spread` the spread of the previous refresh.
    fn add(&mut self, y: f64, var: f64, spread: f64) {
        if !(y.is_finite() && var.is_finite()) {
            return;
        }
        let v = var.max(MIN_ESTIMATE_VAR);
        let w = 1.0 / v;
        self.k += 1;
        self.w += w;
        self.wy += w * y;
        self.wy2 += w * y * y;
        self.w2 += w * w;
        let u = 1.0 / (v + spread.max(0.0));
        self.u += u;
        self.uy += u * y;
    }

    /// The spread beyond noise (0 unless Cochran's `Q` exceeds its expectation by the
    /// margin) and the center (relative to the reference), or `None` for fewer than two
    /// candidates.
    fn spread_and_center(&self) -> Option<(f64, f64)> {
        if self.k < 2 {
            return None;
        }
        let df = (self.k - 1) as f64;
        let q = (self.wy2 - self.wy * self.wy / self.w).max(0.0);
        let c = self.w - self.w2 / self.w;
        let excess = q - df - NOISE_MARGIN * (2.0 * df).sqrt();
        let spread = if c > 0.0 { (excess / c).max(0.0) } else { 0.0 };
        let center = self.uy / self.u;
        (spread.is_finite() && center.is_finite()).then_some((spread, center))
    }

    /// [`SpreadSums::spread_and_center`] with the center back on the scale of the values
    /// (`reference` added back), or no spread and no center (NaN).
    fn spread_and_center_at(&self, reference: f64) -> (f64, f64) {
        self.spread_and_center()
            .map_or((0.0, f64::NAN), |(s, c)| (s, reference + c))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn estimate(ys: &[(f64, f64)]) -> (f64, f64) {
        let mut s = SpreadSums::default();
        for &(y, v) in ys {
            s.add(y, v, 0.0);
        }
        s.spread_and_center().unwrap()
    }

    #[test]
    fn identical_candidates_show_no_spread_even_with_one_uncertain_outlier() {
        // Twenty steady estimates within their noise, and one that has just changed: far off,
        // but with the variance of a single sample.
        let mut ys: Vec<(f64, f64)> = (0..20)
            .map(|i| (0.05 * ((i % 5) as f64 - 2.0), 0.01))
            .collect();
        ys.push((-2.5, 1.0));
        let (spread, center) = estimate(&ys);
        assert_eq!(spread, 0.0);
        assert!(center.abs() < 0.01, "{center}");
        // The unweighted estimate the pool used before would have read a spread of about 0.3
        // (the outlier's 6.25 over 21 candidates, less the mean variance).
    }

    #[test]
    fn a_clear_difference_among_steady_estimates_is_seen() {
        // Two classes a factor 2 apart (ln 2 = 0.69), each estimate within 0.1.
        let ys: Vec<(f64, f64)> = (0..10)
            .map(|i| (if i < 5 { 0.0 } else { 0.69 }, 0.01))
            .collect();
        let (spread, _) = estimate(&ys);
        // The true spread is 0.345^2 = 0.119.
        assert!((0.07..0.13).contains(&spread), "{spread}");
    }

    /// The relief in force after a core saw `n` sheds whose requests did `next`.
    fn relief_after_sheds(n: u32, next: crate::Next) -> f64 {
        use rand::{rngs::SmallRng, SeedableRng};
        use std::time::{Duration, Instant};

        use crate::core::Event;
        use crate::{CandidateInfo, Config, FailureClass, Outcome, Request};

        let t0 = Instant::now();
        let mut rng = SmallRng::seed_from_u64(1);
        let mut core = Core::new(Config::default(), t0).unwrap();
        core.add_candidate(CandidateInfo::new("a"), t0, &mut rng)
            .unwrap();
        for i in 0..n {
            let at = t0 + Duration::from_millis(u64::from(i));
            core.ready(Request::any(), at, &mut rng).unwrap();
            let attempt = std::iter::from_fn(|| core.poll_event())
                .find_map(|e| match e {
                    Event::Granted(g) => Some(g.attempt),
                    _ => None,
                })
                .unwrap();
            core.outcome(attempt, Outcome::Failure(FailureClass::Overload), at)
                .unwrap();
            core.done(attempt, next, at, &mut rng).unwrap();
        }
        core.tick(t0 + Duration::from_secs(1), &mut rng);
        core.model.shed_relief_in_force()
    }

    #[test]
    fn sheds_that_end_their_requests_take_the_relief_away() {
        assert_eq!(relief_after_sheds(0, crate::Next::Finish), 1.0);
        assert_eq!(relief_after_sheds(40, crate::Next::Retry), 1.0);
        assert_eq!(relief_after_sheds(40, crate::Next::Finish), 0.0);
    }

    #[test]
    fn the_share_of_sheds_retried_is_a_plain_mean_at_first() {
        let mut pool = Pool::default();
        for retried in [true, false, false, true] {
            pool.observe_shed(retried);
        }
        assert!((pool.shed_retried - 0.5).abs() < 1e-12);
        // Later ones weigh SHED_ALPHA each.
        for _ in 0..1000 {
            pool.observe_shed(false);
        }
        assert!(pool.shed_retried < 1e-6, "{}", pool.shed_retried);
    }

    #[test]
    fn too_few_or_hostile_inputs_give_nothing_or_finite_figures() {
        assert!(SpreadSums::default().spread_and_center().is_none());
        let mut s = SpreadSums::default();
        s.add(1.0, 0.1, 0.0);
        assert!(s.spread_and_center().is_none());
        s.add(f64::NAN, 0.1, 0.0);
        s.add(1.0, f64::INFINITY, 0.0);
        assert!(s.spread_and_center().is_none());
        s.add(3.0, 0.0, 0.0);
        let (spread, center) = s.spread_and_center().unwrap();
        assert!(spread.is_finite() && center.is_finite());
    }
}

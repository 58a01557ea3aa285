//! What the coarse refresh learns about the fleet as a whole for pooled estimates and the
//! probe schedule (see `ema.pooling` and `ema.probe_s`).

use super::Core;
use crate::score::ScoreContext;

/// Scheduled probes take at most this share of the draws: on a large fleet the probe period
/// stretches to `candidates / (PROBE_SHARE * decisions per second)`.
const PROBE_SHARE: f64 = 0.01;
/// How far above the noise the candidates' spread of relative times must be before any of it
/// counts: `1 + NOISE_MARGIN * sqrt(2 / k)` times the mean estimate variance over `k`
/// candidates (a spread that noise alone exceeds about one time in forty).
const NOISE_MARGIN: f64 = 2.0;

/// The fleet-wide inputs of pooling and probing, recomputed by each coarse refresh.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Pool {
    /// Spread of the candidates' true times per success beyond noise (squared log ratios).
    pub(crate) spread: f64,
    /// The mean over candidates of `ln(time per success)` (NaN: none known).
    pub(crate) center: f64,
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
    /// When a failing candidate last answered (virtual seconds; -inf: never, or heal probes
    /// off): every other failing candidate last sampled before is due a probe.
    pub(crate) heal_at_s: f64,
    /// The last heal not yet applied: it takes effect at the next refresh (`heal_at_s`).
    heal_next_s: f64,
    decisions: u64,
    /// When the pool was last recomputed (virtual seconds): where the decision rate is
    /// measured from, and the time probes are judged at
    /// ([`crate::score::ScoreContext::probe_at_s`]).
    pub(crate) at_s: f64,
    rate: f64,
}

impl Default for Pool {
    fn default() -> Self {
        Pool {
            spread: 0.0,
            center: f64::NAN,
            overall: None,
            probes: crate::score::ProbePeriods::default(),
            queueing: 0.0,
            heal_at_s: f64::NEG_INFINITY,
            heal_next_s: f64::NEG_INFINITY,
            decisions: 0,
            at_s: 0.0,
            rate: 0.0,
        }
    }
}

impl Pool {
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
        for (idx, fit) in self.fleet.load_fit.iter().enumerate() {
            let slot = &self.fleet.slots[idx];
            if slot.live {
                live += 1;
                q += f64::from(fit.evidence());
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
        self.pool.queueing = if live > 0 {
            (q / live as f64) as f32
        } else {
            0.0
        };
        if !self.model.pooling() {
            self.pool.spread = 0.0;
            self.pool.center = f64::NAN;
            self.pool.overall = None;
            return;
        }
        self.pool.overall = Some(self.fleet.overall);
        let (mut k, mut sum, mut sum_d2, mut sum_var) = (0usize, 0.0, 0.0, 0.0);
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
                k += 1;
                sum += raw;
                sum_d2 += raw * raw;
                sum_var += var;
            }
        }
        if k >= 2 {
            let k = k as f64;
            let center = sum / k;
            let noise = (1.0 + NOISE_MARGIN * (2.0 / k).sqrt()) * sum_var / k;
            // The spread around the center: what the candidates differ by, less the noise.
            self.pool.spread = (sum_d2 / k - center * center - noise).max(0.0);
            self.pool.center = center;
        } else {
            self.pool.spread = 0.0;
            self.pool.center = f64::NAN;
        }
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
            queue_time: 1.0,
            heal_at_s: self.pool.heal_at_s,
        }
    }
}

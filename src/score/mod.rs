//! The scoring model: from static info and learned statistics to draw weights.
//!
//! Each candidate gets components in `[0, 1]` (higher is better):
//!
//! | component | formula |
//! |---|---|
//! | `success` | EMA of 1/0 per counted attempt, optimistic prior, decays toward the prior |
//! | `connect`, `ttfb` | `exp(-x / overall)` against the all-candidate EMA; no data: `x = overall` |
//! | `bandwidth` | `1 - exp(-x / overall)` (higher bandwidth scores higher) |
//! | `overload` | `1 - errors / total` over the bucketed window; 1 until `min_samples` |
//! | `load` | `1 - in_flight / limit` (`1 / (1 + in_flight)` without a limit, in flight counted against the fleet's mean where it queues: `load.fleet_relative`); with `load_gate`, only in proportion to the candidate's overload evidence |
//! | `stake` | stake share (of all candidates in `sum` mode, of the drawn set in `mixture`) |
//! | `price` | `exp(-price / exp_factor)` |
//! | `tags` | weighted share of the configured tags the candidate has |
//! | `uniform` | 1 (exploration) |
//! | `feedback` | `exp(-r)`, `r` the expected completion from what the server reports (queue, service time) and this coordinator's attempts in flight, in average service times; `exp(-1)` without reports |
//!
//! In [`Mode::Sum`] (lassie) the weight is `(sum of w_k * c_k)^exponent`, times
//! `time_to_success^time_exponent` when that is above 0, and the probability is proportional
//! to it, and times `exp(feedback.exponent * (1 - r))` for a candidate whose server reports
//! (see [`FeedbackConfig`]). In [`Mode::Mixture`] (Livepeer) the probability is
//! `sum over k of w_k * c_k / (sum of c_k over the drawn set)` with the weights normalised to
//! sum to 1. Either way a `floor` share of every draw is spread uniformly, so every candidate in
//! the drawn set keeps at least `floor / n`.
//!
//! The core keeps one sum tree per *channel* (the sum-mode score, each mixture component, the
//! uniform floor); a draw picks a channel by its mass, then a candidate inside it. That makes
//! both modes exact O(log n) draws.

mod channels;
mod components;
mod config;
mod context;
mod deadline;
mod evidence;
mod feedback;
mod last_attempt;
mod load;
mod load_fit;
mod load_gate;
mod observe;
mod pooling;
mod power;
mod presets;
mod prior;
mod probes;
mod share;
mod stats;
#[cfg(test)]
mod tests;
mod unseen;
mod variants;

pub use crate::error::{ConfigError, Problem};
pub use components::{Components, Weights};
pub use config::{
    Arm, AttemptTime, Config, EjectionConfig, EmaConfig, Mode, PerfConfig, PriceConfig, Shadow,
    WindowConfig, PRESETS,
};
pub use deadline::DeadlineConfig;
pub(crate) use feedback::FeedbackBook;
pub use feedback::FeedbackConfig;
pub use last_attempt::LastAttemptConfig;
pub use load_fit::LoadFit;
pub use load_gate::LoadConfig;
pub(crate) use load_gate::{fleet_scale, LoadPowers};
use power::Power;
pub(crate) use prior::{Pooled, RemoteEvidence};
use probes::probe_due;
pub(crate) use probes::{good_record, ProbePeriods};
pub use share::ShareConfig;
pub use stats::{ErrorWindow, Overall, Stats};
pub(crate) use stats::{PackedStats, StatsView, MAX_TIME_S};
pub use unseen::{UnseenConfig, UnseenPrior};
pub use variants::{MAX_ARMS, MAX_SHADOWS};

use crate::vocab::CandidateInfo;
pub(crate) use channels::{Channel, ChannelKind};
use components::{BANDWIDTH, CONNECT, TIME_TO_SUCCESS};
pub(crate) use context::{FleetState, ScoreContext};

/// The parts of a candidate's score that move only with its info or the config, computed
/// once so scoring never reads the (cold) info.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct Fixed {
    /// The tag component.
    pub(crate) tags: f64,
    /// The raw stake (its share needs the all-candidate total, which moves).
    pub(crate) stake: f64,
    /// The price component.
    pub(crate) price: f64,
}

/// The components a candidate's statistics decide, as of its last full refresh. The others
/// (load, stake, price, tags, uniform) follow from the slot and are rebuilt on read by
/// [`ScoreModel::assemble`], so the core caches 48 bytes per candidate instead of 88.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[repr(C)]
pub(crate) struct Learned {
    success: f64,
    connect: f64,
    ttfb: f64,
    bandwidth: f64,
    overload: f64,
    time_to_success: f64,
}

impl Learned {
    /// Its last field (the core reads it to bring the line in early).
    #[inline]
    pub(crate) fn last(&self) -> f64 {
        self.time_to_success
    }
}

/// A validated config turned into the channel layout and scoring rules.
#[derive(Clone, Debug)]
pub struct ScoreModel {
    config: Config,
    /// `config.exponent`, classified once for the hot path.
    power: Power,
    /// `time_exponent`, when above 0.
    time_power: Option<Power>,
    /// `feedback.exponent`, when above 0.
    feedback_exponent: Option<f64>,
    channels: Vec<Channel>,
    /// The floor in force ([`ScoreModel::floor`]).
    floor: f64,
    tag_total: f64,
    /// Per component index: no channel reads it (weight 0), so an outcome's refresh may keep
    /// its last value and the coarse refresh alone recomputes it.
    unused: [bool; components::COUNT],
    /// The weight of each component ([`Config::component_weights`]).
    weights: [f64; components::COUNT],
    /// The load component's powers for a new candidate's evidence ([`LoadPowers::ramp`]).
    ramp_powers: Vec<LoadPowers>,
    /// `load.shed_relief` in force ([`ScoreModel::set_shed_retried`]).
    shed_relief: f64,
    /// Whether attempts in flight are counted against the fleet's mean: `load.fleet_relative`
    /// with the gate and its queueing evidence on, read once for the hot path.
    fleet_relative: bool,
}

impl ScoreModel {
    /// Validates the config and lays out the channels.
    pub fn new(config: Config) -> Result<Self, ConfigError> {
        config.validate()?;
        let tag_total: f64 = config.tag_weights.values().sum();
        let comp_weights = config.component_weights();
        let floor = config.floor.clamp(0.0, 1.0);
        let mut channels = Vec::new();
        channels::lay_out(config.mode, &comp_weights, floor, &mut channels);
        let mut unused = comp_weights.map(|w| w <= 0.0);
        if config.mode == Mode::Sum && config.time_exponent > 0.0 {
            unused[TIME_TO_SUCCESS] = false;
        }
        Ok(ScoreModel {
            ramp_powers: LoadPowers::ramp(config.load.unknown_samples),
            unused,
            weights: comp_weights,
            power: Power::of(config.exponent),
            time_power: (config.time_exponent > 0.0).then(|| Power::of(config.time_exponent)),
            feedback_exponent: (config.feedback.exponent > 0.0).then_some(config.feedback.exponent),
            shed_relief: config.load.shed_relief,
            fleet_relative: config.load.fleet_relative
                && config.load.queueing
                && config.load.gate > 0.0,
            config,
            floor,
            channels,
            tag_total,
        })
    }

    /// The config this model was built from.
    pub fn config(&self) -> &Config {
        &self.config
    }

    pub(crate) fn channels(&self) -> &[Channel] {
        &self.channels
    }

    /// The floor in force: the config's, or less where [`Config::floor_period_s`] says it
    /// cannot reach each candidate often enough ([`channels::floor_in_force`]).
    pub(crate) fn floor(&self) -> f64 {
        self.floor
    }

    /// Sets what the coordinator's state puts in force: the floor for `decisions_per_s` draws a
    /// second over `live` candidates, from this config's `floor` and `floor_period_s`
    /// ([`channels::floor_in_force`]; the channels keep their layout), and `load.shed_relief`
    /// at `shed_retried` ([`ScoreModel::set_shed_retried`]).
    pub(crate) fn set_in_force(&mut self, decisions_per_s: f64, live: usize, shed_retried: f64) {
        self.set_shed_retried(shed_retried);
        let c = &self.config;
        // At most the config's floor (validated into [0, 1]), which a floor of 1 keeps.
        let floor = channels::floor_in_force(c.floor, c.floor_period_s, decisions_per_s, live);
        if floor != self.floor {
            self.floor = floor;
            channels::lay_out(self.config.mode, &self.weights, floor, &mut self.channels);
        }
    }

    /// Index of the uniform channel (always the last).
    pub(crate) fn uniform_channel(&self) -> usize {
        self.channels.len() - 1
    }

    /// The tag component of a candidate (constant until its info changes).
    pub(crate) fn tag_component(&self, info: &CandidateInfo) -> f64 {
        if self.tag_total <= 0.0 {
            return 0.0;
        }
        let have: f64 = self
            .config
            .tag_weights
            .iter()
            .filter(|(t, _)| info.tags.iter().any(|x| x == *t))
            .map(|(_, w)| *w)
            .sum();
        have / self.tag_total
    }

    /// The fixed parts of a candidate's score.
    pub(crate) fn fixed(&self, info: &CandidateInfo) -> Fixed {
        Fixed {
            tags: self.tag_component(info),
            stake: info.stake,
            price: (-info.price / self.config.price.exp_factor).exp(),
        }
    }

    #[inline]
    fn decay_factor<S: StatsView>(&self, stats: &S, now_s: f64) -> f64 {
        // Without a half-life the statistics are not read at all.
        let Some(h) = self.config.ema.half_life_s else {
            return 1.0;
        };
        match stats.last_sample_s() {
            // 2^-x, written with exp2: the same value as 0.5^x at a fraction of pow's cost.
            Some(last) if now_s > last => (-(now_s - last) / h).exp2(),
            _ => 1.0,
        }
    }

    /// Computes every component. All outputs are finite and in `[0, 1]`.
    pub(crate) fn components(
        &self,
        fixed: &Fixed,
        stats: &Stats,
        ctx: &ScoreContext,
    ) -> Components {
        let learned = self.learned(stats, ctx, None);
        let load = self.load_component(
            ctx.in_flight,
            ctx.limit,
            stats.attempts,
            stats.overload_evidence,
            ctx.overload_follows_load,
            ctx.queueing,
            ctx.load_scale,
            ctx.own_queueing,
            None,
        );
        let probe = probe_due(
            ctx.in_flight,
            stats.last_sample_s,
            stats.success,
            stats.consecutive_failures,
            ctx.probe_at_s,
            ctx.probes.for_counts(stats.attempts, stats.successes),
            ctx.heal_at_s,
        );
        let timed = self.queue_timed(&learned, ctx.queueing, ctx.queue_time);
        let learned = timed.as_ref().unwrap_or(&learned);
        self.assemble_parts(learned, fixed, ctx.stake_total, load, probe, None)
    }

    /// The components a candidate's statistics decide (what the core caches per candidate),
    /// each finite and in `[0, 1]`. Those no channel reads are taken from `previous` when given
    /// instead of computed (each is an `exp`): an outcome's refresh passes the cached ones.
    pub(crate) fn learned<S: StatsView>(
        &self,
        stats: &S,
        ctx: &ScoreContext,
        previous: Option<&Learned>,
    ) -> Learned {
        let kept = |k: usize| previous.filter(|_| self.unused[k]);
        let decay = self.decay_factor(stats, ctx.now_s);
        let prior = self.config.ema.success_prior;
        let success = match stats.success() {
            Some(s) => prior + (s - prior) * decay,
            None => prior,
        };
        let relative = |own: Option<f64>, overall: Option<f64>, higher_better: bool| -> f64 {
            let (Some(x), Some(o)) = (own, overall) else {
                return if higher_better {
                    1.0 - (-1.0f64).exp()
                } else {
                    (-1.0f64).exp()
                };
            };
            // lassie: an average of 0 (all samples under a millisecond) is read as 1, so the
            // curve keeps a finite scale.
            let o = if o > 0.0 { o } else { 1.0 };
            let x = o + (x - o) * decay;
            let ratio = x / o;
            if higher_better {
                1.0 - (-ratio).exp()
            } else {
                (-ratio).exp()
            }
        };
        let connect = match kept(CONNECT) {
            Some(p) => p.connect,
            None => relative(stats.connect_ms(), ctx.overall.connect_ms, false),
        };
        let ttfb = relative(stats.ttfb_ms(), ctx.overall.ttfb_ms, false);
        let bandwidth = match kept(BANDWIDTH) {
            Some(p) => p.bandwidth,
            None => relative(stats.bandwidth_bps(), ctx.overall.bandwidth_bps, true),
        };
        let win = &self.config.window;
        let (errors, total) = stats.window().counts(ctx.bucket, win.buckets as usize);
        let mut overload = if total < win.min_samples || total == 0 {
            1.0
        } else {
            1.0 - errors as f64 / total as f64
        };
        // Where the fleet queues, sheds that follow the load and that requests retry are the
        // load component's to charge (`load.shed_relief`).
        if overload < 1.0 && ctx.overload_follows_load {
            let relief = self.shed_relief * self.queueing_share(ctx.queueing);
            if relief > 0.0 {
                overload = overload.powf(1.0 - relief);
            }
        }
        // What a try costs until a first byte arrives, failures included, per success. A try
        // costs at least a millisecond (the averages' convention): a candidate that fails
        // instantly and never succeeds is not free per success, it is hopeless.
        let mut per_success = stats.attempt_ms().map(|t| per_success(t.max(1.0), success));
        match (per_success, self.pooled_deviation(stats, ctx)) {
            (Some(ps), Some(d)) => per_success = Some(ps * (d.shrunk - d.raw).exp()),
            // Never sampled: what the sampled candidates are worth (`[unseen]`).
            (None, _) => per_success = self.unseen_per_success(ctx),
            _ => {}
        }
        // A candidate that queues is slower now because of the work it holds, which the load
        // component counts as it changes; its time, learned from attempts that finished, lags
        // behind its queue and would only make the draw chase it. Its deviation from the
        // average counts for less, down to a third for a plain queue.
        let overall_attempt_ms = ctx.attempt_reference_ms();
        if let (Some(ps), Some(o)) = (per_success, overall_attempt_ms) {
            let q = self.queueing_share(ctx.queueing);
            if q > 0.0 {
                let damp = 1.0 - QUEUE_DAMPING * q;
                per_success = Some(o * (1.0 + (ps / o - 1.0) * damp).max(0.0));
            }
        }
        let mut time_to_success = relative(per_success, overall_attempt_ms, false);
        // A candidate that has failed its last `HOPELESS_FAILURES` attempts without ever
        // answering is hopeless, whatever the fleet's reference time says. Its own instant
        // refusals pull that reference (an average over every outcome) down to a millisecond
        // and back as refreshes come and go: read against it, a server refusing every
        // connection swung between weight 0 and a tiny weight that is not 0, and in the
        // second state it took every request arriving while the others sat at their limits
        // (see `core::hold`). Before the fleet's first refresh there is no reference at all.
        if stats.never_answered() && stats.failures_in_a_row() >= HOPELESS_FAILURES {
            time_to_success = 0.0;
        }
        if ctx.pending_ms > 0.0 {
            time_to_success = time_to_success.min(Self::censored_time(
                self.silent_ms(ctx.pending_ms, stats.last_answer_s(), ctx),
                stats.attempt_ms(),
                overall_attempt_ms,
                success,
                decay,
            ));
        }
        Learned {
            success: unit(success),
            connect: unit(connect),
            ttfb: unit(ttfb),
            bandwidth: unit(bandwidth),
            overload: unit(overload),
            time_to_success: unit(time_to_success),
        }
    }

    /// How long a candidate with an attempt running `pending_ms` has gone without showing it
    /// is alive, as far as the fleet queues: in a fleet whose latencies are the servers' own,
    /// that age; where the fleet shows queueing ([`ScoreContext::queueing`]), the time since
    /// the candidate's last outcome instead, if shorter and that outcome was an answer
    /// (`last_answer_s`; a failure, such as a timeout, says nothing of a queue moving).
    ///
    /// A queueing server that keeps answering is not hanging: its oldest attempt waits behind
    /// the others, and the answers teach its estimate as they come. Read as a censored sample,
    /// that attempt would charge each busy server on every refresh, and the draw would swing
    /// from server to server (herding). Where latency is the servers' own, a slow server goes
    /// on answering the attempts granted before it slowed, and its oldest attempt's age is the
    /// first sign of the change.
    #[inline]
    fn silent_ms(&self, pending_ms: f64, last_answer_s: Option<f64>, ctx: &ScoreContext) -> f64 {
        let Some(last) = last_answer_s else {
            return pending_ms;
        };
        let q = self.queueing_share(ctx.queueing);
        if q <= 0.0 {
            return pending_ms;
        }
        // An answer this very instant (an outcome's own scoring) reads as no silence at all,
        // whatever the evidence: the candidate is alive now. At a refresh the silence is
        // above 0, and the mix moves smoothly with `q`.
        let silent = pending_ms.min((ctx.now_s - last).max(0.0) * 1000.0);
        // On the ratio scale the times live on: the age to the power 1 - q, times the silence
        // to the power q.
        pending_ms.powf(1.0 - q) * silent.powf(q)
    }

    /// The time component an attempt still running without a first byte allows: it is a
    /// censored sample, its time to a result at least its age. Once that age passes what a try
    /// is expected to take, the candidate is charged as if a try took that long, seconds before
    /// a timeout says so (the peak of latency-aware balancers). 1 (no bound) otherwise. Out of
    /// line: most outcomes leave no other attempt running.
    #[cold]
    #[inline(never)]
    fn censored_time(
        pending_ms: f64,
        attempt_ms: Option<f64>,
        overall_ms: Option<f64>, // floored at 1 ms by the caller
        success: f64,
        decay: f64,
    ) -> f64 {
        let Some(o) = overall_ms else {
            return 1.0;
        };
        let expected = attempt_ms.map_or(o, |t| o + (t - o) * decay);
        if pending_ms > expected {
            (-per_success(pending_ms, success) / o).exp()
        } else {
            1.0
        }
    }

    /// Every component from the cached learned ones and the slot's current state: the same
    /// values [`ScoreModel::components`] gives for them. `feedback`: the candidate's expected
    /// completion from its server's reports ([`FeedbackBook::relative`]), `None` without any.
    /// `follows_load`: whether its overload failures follow its load
    /// ([`LoadFit::overload_follows_load`]); `own_queueing`: its [`LoadFit::evidence`].
    #[inline]
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn assemble(
        &self,
        learned: &Learned,
        fixed: &Fixed,
        in_flight: u32,
        limit: u32,
        stats: &PackedStats,
        fleet: &FleetState,
        feedback: Option<f64>,
        queue_time: f64,
        follows_load: bool,
        own_queueing: f32,
    ) -> Components {
        let load = self.load_component(
            in_flight,
            limit,
            stats.attempts(),
            stats.overload_evidence(),
            follows_load,
            fleet.queueing,
            fleet.load_scale,
            own_queueing,
            Some(fleet.queueing_powers),
        );
        let probe = probe_due(
            in_flight,
            stats.last_sample_s(),
            stats.success(),
            stats.consecutive_failures(),
            fleet.probe_at_s,
            fleet.probes.for_counts(stats.attempts(), stats.successes()),
            fleet.heal_at_s,
        );
        let timed = self.queue_timed(learned, fleet.queueing, queue_time);
        let learned = timed.as_ref().unwrap_or(learned);
        self.assemble_parts(learned, fixed, fleet.stake_total, load, probe, feedback)
    }

    #[inline]
    fn assemble_parts(
        &self,
        learned: &Learned,
        fixed: &Fixed,
        stake_total: f64,
        load: f64,
        probe: bool,
        feedback: Option<f64>,
    ) -> Components {
        let stake = if stake_total > 0.0 {
            fixed.stake / stake_total
        } else {
            0.0
        };
        Components {
            success: learned.success,
            connect: learned.connect,
            ttfb: learned.ttfb,
            bandwidth: learned.bandwidth,
            overload: learned.overload,
            load,
            stake: unit(stake),
            price: unit(fixed.price),
            tags: unit(fixed.tags),
            uniform: 1.0,
            // A probe is due: drawn as if its time were average until a try is granted.
            time_to_success: if probe {
                learned.time_to_success.max(AVERAGE_TIME)
            } else {
                learned.time_to_success
            },
            // A probe goes by the same rule: a shunned candidate's last reports are old.
            feedback: match feedback {
                None => AVERAGE_TIME,
                Some(_) if probe => feedback::component(feedback).max(AVERAGE_TIME),
                Some(_) => feedback::component(feedback),
            },
        }
    }

    /// The weighted sum of components (before the exponent).
    #[inline]
    pub fn score(&self, c: &Components) -> f64 {
        let values = c.values();
        // In index order, the same additions one after another; a fixed count, unrolled.
        let mut s = self.weights[0] * values[0];
        for (w, v) in self.weights[1..].iter().zip(&values[1..]) {
            s += w * v;
        }
        if s > 0.0 && s < f64::INFINITY {
            s
        } else {
            0.0
        }
    }

    /// The leaf value of one channel for a drawable candidate.
    #[inline]
    pub(crate) fn channel_value(&self, ch: ChannelKind, c: &Components) -> f64 {
        let v = match ch {
            ChannelKind::SumScore => {
                let w = self.power.apply(self.score(c));
                // time_to_success is exp(-r) (r: expected time to a success against the
                // average), so the factor is exp(-k r): a candidate twice as slow to a
                // success loses the same share whatever the other components add up to,
                // which a term of the sum, drowned by constant components, cannot do.
                let w = match self.time_power {
                    Some(k) => w * k.apply(c.time_to_success),
                    None => w,
                };
                // The same for the expected completion the servers' reports give; exactly
                // 1 for a candidate that never reported.
                match self.feedback_exponent {
                    Some(k) if c.feedback != AVERAGE_TIME => w * feedback::factor(c.feedback, k),
                    _ => w,
                }
            }
            // Stake is a share of all live candidates; the channel total re-normalises it over
            // the drawn set, since s_i / sum(s_j) does not depend on what it was a share of.
            // Below the normal range (a few bits left, shares that need not sum to 1): 0.
            ChannelKind::Component(k) => match self.power.apply(c.entries()[k].1) {
                v if v < f64::MIN_POSITIVE => 0.0,
                v => v,
            },
            ChannelKind::Uniform => 1.0,
        };
        if v > 0.0 && v < f64::INFINITY {
            v
        } else {
            0.0
        }
    }

    /// How far the fleet's queueing evidence counts in the time component, in `[0, 1]`: all
    /// of it with `load.gate > 0` and `load.queueing`, none otherwise.
    #[inline]
    fn queueing_share(&self, queueing: f32) -> f64 {
        let load = &self.config.load;
        if load.queueing && load.gate > 0.0 {
            f64::from(queueing).clamp(0.0, 1.0)
        } else {
            0.0
        }
    }

    /// The learned components with the time to success read at the concurrency of the moment:
    /// a queueing candidate's learned time is its average; `queue_time` says how much slower
    /// its next attempt is expected to be ([`LoadFit::time_factor`]), so `exp(-r)` becomes
    /// `exp(-r * queue_time)`, counted as far as the fleet shows queueing. `None` when that
    /// changes nothing (no queueing, or a factor of 1): the learned ones stand as they are.
    #[inline]
    fn queue_timed(&self, learned: &Learned, queueing: f32, queue_time: f64) -> Option<Learned> {
        let q = self.queueing_share(queueing);
        if queue_time == 1.0 || q <= 0.0 {
            return None;
        }
        let f = 1.0 + q * (queue_time - 1.0);
        Some(Learned {
            time_to_success: unit(learned.time_to_success.powf(f)),
            ..*learned
        })
    }
}

/// How much of a fully queueing candidate's time deviation the draw ignores.
const QUEUE_DAMPING: f64 = 2.0 / 3.0;

/// The time component of a candidate at the average: `exp(-1)`.
const AVERAGE_TIME: f64 = 0.367_879_441_171_442_33;

/// Below this success EMA the expected time to a success stops growing (a dead candidate is
/// already scored near zero; dividing by ~0 would only overflow).
const MIN_SUCCESS_FOR_TIME: f64 = 0.01;

/// Failures in a row that make a candidate hopeless (time component 0) when it never
/// answered, and failing past hope for the wait when it did (`core::hold`): a candidate that
/// succeeds even half the time shows such a streak less than once in a million tries
/// (0.5^20), so bad luck is not mistaken for a dead server.
pub(crate) const HOPELESS_FAILURES: u32 = 20;

/// Expected time spent per success: a try's time over the success rate (floored, see
/// [`MIN_SUCCESS_FOR_TIME`]).
#[inline]
pub(crate) fn per_success(time_ms: f64, success: f64) -> f64 {
    time_ms / success.max(MIN_SUCCESS_FOR_TIME)
}

/// A component as the draw may use it: finite and in `[0, 1]` (`+ 0.0` turns -0.0, where an
/// empty float sum starts, into 0.0 for display).
#[inline]
fn unit(x: f64) -> f64 {
    // In plain comparisons: -0.0 passes the first one and leaves as 0.0.
    if x >= 0.0 {
        if x <= 1.0 {
            x + 0.0
        } else if x < f64::INFINITY {
            1.0
        } else {
            0.0
        }
    } else {
        0.0
    }
}

//! The load component and its gate: which candidates pay for the work they hold.
//!
//! A load-aware balancer spreads work by attempts in flight, and so piles traffic on a server
//! that fails fast (it holds none). Here the in-flight penalty counts only for a candidate with
//! evidence that load hurts it: overload failures that follow its load, a fleet that queues
//! ([`super::LoadFit`]), or too few outcomes to know.

use serde::{Deserialize, Serialize};

use super::{unit, ScoreModel};
use crate::error::Problem;

/// Which candidates the load component applies to: all of them, or only those with evidence
/// that they degrade under load.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LoadConfig {
    /// The load component counts for a candidate as far as `g = min(1, gate * overload
    /// evidence)` says, the evidence being the share of its recent outcomes that were overload
    /// failures ([`super::Stats::overload_evidence`]): the component is `f ^ g` for the plain
    /// load component `f`, so it is 1 however busy a candidate without evidence is, and `g`
    /// is the elasticity of the component to the attempts in flight. 0: the load component
    /// counts for every candidate.
    pub gate: f64,
    /// With `gate` on, a candidate with fewer outcomes than this counts its load with the
    /// share of the outcomes it lacks as its elasticity: work does not pile on a candidate
    /// before anything is known.
    pub unknown_samples: u32,
    /// With `gate` on, the load component also counts, for every candidate alike, as far as
    /// the fleet shows queueing: the mean over candidates of how far each one's time grows
    /// with its attempts in flight, beyond noise ([`super::LoadFit`]). A fleet of queueing
    /// servers is then spread by load like any load-aware balancer would; one whose latency
    /// is its own is not. `false`: overload evidence alone.
    pub queueing: bool,
    /// With `gate` on: a candidate whose overload failures do not follow its load (they come
    /// at no higher concurrency than its other attempts, [`super::LoadFit`]) has this share
    /// taken off its overload evidence. A server that sheds a steady share at any load (a
    /// quota's 503s) is then not held to one attempt in flight, which would not spare it a
    /// single failure, while one failing outright with overload errors still is. In `[0, 1]`;
    /// 0: every overload failure counts alike.
    pub background_overload: f64,
    /// With `gate` and `queueing` on: how far a candidate's own queueing evidence counts
    /// where it is above the fleet's. The queueing evidence of its load component is then
    /// `q + own_queueing * q * (own - q)` for fleet evidence `q` and its own `own`: a server
    /// whose queue grows with its load pays for it in full where the whole fleet queues, while
    /// in a fleet of servers whose latency is their own (a small `q`), a candidate whose own
    /// evidence is spurious (a degraded server slows and gathers attempts at once) gains almost
    /// nothing. In `[0, 1]`; 0: every candidate counts the fleet's evidence alike.
    pub own_queueing: f64,
    /// With `gate` and `queueing` on: how far a candidate whose overload failures follow its
    /// load is spared the overload component where the fleet queues and requests retry their
    /// sheds. The component becomes `overload ^ (1 - shed_relief * q * r)` for the fleet's
    /// queueing evidence `q` and the share `r` of overload failures whose requests went on to
    /// another attempt (learned from `done`: `Next::Retry` or `Next::Keep` against
    /// `Next::Finish`). In a queueing fleet a server that sheds past its capacity already has
    /// its load counted in full by the load component; the overload window, which remembers
    /// its sheds for `window.buckets` seconds while its queue drains in milliseconds, would
    /// charge it a second time and send its traffic to a server that queues without limit and
    /// never sheds. A shed that ends its request is an error, which the window is there to
    /// count, so without retries nothing changes. A fleet whose latencies are the servers' own
    /// (`q` = 0) is not touched, nor is a server whose overload failures come at any load. In
    /// `[0, 1]`; 0: the overload component counts alike in every fleet.
    pub shed_relief: f64,
    /// With `gate` and `queueing` on: the attempts in flight are counted against the fleet's
    /// mean as far as the fleet queues. The load component becomes `1 / (1 + n / m ^ q)` for
    /// `n` in flight, `m` the mean attempts in flight per live candidate (at least 1, as of
    /// the last coarse refresh) and `q` the fleet's queueing evidence. Near saturation a
    /// queueing fleet holds tens of attempts at every server, where `1 / (1 + n)` no longer
    /// tells 20 from 40 and the draw goes wherever the lagging averages look best of the
    /// moment; against the mean, a server holding twice the fleet's mean weighs as one holding
    /// two does against one. Below one attempt per candidate, or without queueing evidence,
    /// nothing changes; a per-candidate limit (`1 - n / limit`) is counted as it is.
    /// `false`: the attempts in flight are counted as they are.
    pub fleet_relative: bool,
}

impl Default for LoadConfig {
    fn default() -> Self {
        Self::DEFAULT
    }
}

impl LoadConfig {
    /// The project's default (`Config::default().load`).
    pub const DEFAULT: LoadConfig = LoadConfig {
        gate: 1000.0,
        unknown_samples: 5,
        queueing: true,
        background_overload: 0.05,
        own_queueing: 0.0,
        shed_relief: 1.0,
        fleet_relative: true,
    };

    /// The load component applies to every candidate (lassie, Livepeer).
    pub const ALWAYS: LoadConfig = LoadConfig {
        gate: 0.0,
        unknown_samples: 0,
        queueing: false,
        background_overload: 0.0,
        own_queueing: 0.0,
        shed_relief: 0.0,
        fleet_relative: false,
    };

    /// Adds what is wrong with the section beyond the checks every number gets.
    pub(super) fn check(&self, problems: &mut Vec<Problem>) {
        for (path, share) in [
            ("load.background_overload", self.background_overload),
            ("load.own_queueing", self.own_queueing),
            ("load.shed_relief", self.shed_relief),
        ] {
            if !(0.0..=1.0).contains(&share) {
                problems.push(Problem::new(
                    path,
                    format!("must be a share between 0 and 1 (got {share})"),
                ));
            }
        }
    }
}

impl ScoreModel {
    /// Sets `load.shed_relief` in force from the share of overload failures whose requests
    /// went on to another attempt (`retried`, in `[0, 1]`): a shed its request retries costs
    /// a moment, one that ends its request is an error, which the overload component is
    /// there to count.
    pub(crate) fn set_shed_retried(&mut self, retried: f64) {
        self.shed_relief = self.config.load.shed_relief * retried.clamp(0.0, 1.0);
    }

    /// `load.shed_relief` in force.
    #[cfg(test)]
    pub(crate) fn shed_relief_in_force(&self) -> f64 {
        self.shed_relief
    }

    /// The load component alone (it is the only one a grant or a release moves).
    ///
    /// With `load.gate` on, the in-flight penalty counts only as far as the candidate's
    /// evidence goes: work piled on a candidate that has never answered "overloaded" costs
    /// nothing, so a fast candidate that copes with concurrency keeps its traffic. The
    /// evidence `g` is an elasticity, `f ^ g` for the plain component `f`, not a ceiling
    /// (`1 - g (1 - f)` would never fall below `1 - g`): a candidate with partial evidence
    /// (a fleet that queues in part) still loses its share as its queue grows without bound,
    /// where a ceiling would leave an unbounded queue that never sheds more weight than a
    /// candidate with a short one and a trace of overload failures.
    /// `follows_load`: whether its overload failures follow its load
    /// ([`super::LoadFit::overload_follows_load`]); if not, `load.background_overload` of
    /// its evidence is discounted. `queueing`: the fleet's queueing evidence; `own_queueing`:
    /// the candidate's own ([`super::LoadFit::evidence`]), counted as `load.own_queueing` says.
    /// `fleet_powers`: the powers of the fleet's queueing evidence, if the caller keeps them.
    /// `load_scale`: the fleet's mean attempts in flight per candidate raised to its
    /// queueing evidence ([`fleet_scale`]), which `load.fleet_relative` counts them against.
    #[inline]
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn load_component(
        &self,
        in_flight: u32,
        limit: u32,
        attempts: u64,
        overload_evidence: f32,
        follows_load: bool,
        queueing: f32,
        load_scale: f64,
        own_queueing: f32,
        fleet_powers: Option<&LoadPowers>,
    ) -> f64 {
        // Counted against the fleet's mean only with the gate and its queueing evidence on:
        // the scale is 1 below one attempt per candidate or without queueing.
        let scale = if self.fleet_relative { load_scale } else { 1.0 };
        let mut load = if limit == u32::MAX {
            // Nothing in flight, the usual state after a release: 1 / 1 without the division.
            if in_flight == 0 {
                1.0
            } else if scale > 1.0 {
                1.0 / (1.0 + in_flight as f64 / scale)
            } else {
                1.0 / (1.0 + in_flight as f64)
            }
        } else {
            1.0 - in_flight as f64 / limit.max(1) as f64
        };
        let gate = &self.config.load;
        if gate.gate > 0.0 {
            // Past `unknown_samples` attempts the ratio is at least 1 and the term is 0: the
            // same value without the division.
            let unknown = if gate.unknown_samples > 0 && attempts < u64::from(gate.unknown_samples)
            {
                (1.0 - attempts as f64 / gate.unknown_samples as f64).max(0.0)
            } else {
                0.0
            };
            let queueing = if gate.queueing {
                let q = f64::from(queueing);
                let excess = (f64::from(own_queueing) - q).max(0.0);
                q + gate.own_queueing * q * excess
            } else {
                0.0
            };
            let shed = if follows_load {
                f64::from(overload_evidence)
            } else {
                (f64::from(overload_evidence) - gate.background_overload).max(0.0)
            };
            let evidence = (gate.gate * shed).max(unknown).max(queueing).min(1.0);
            // Full or no evidence, the usual cases: no power to take. Nor for an idle
            // candidate (most of a large fleet at each coarse refresh): 1 to any power is
            // exactly 1 (IEEE 754 `pow(+1, y)`), so the call is skipped without moving a bit.
            if evidence <= 0.0 {
                load = 1.0;
            } else if evidence < 1.0 && load != 1.0 {
                // Most powers taken are of a few loads (one to eight in flight, no limit) to
                // the fleet's queueing evidence or a new candidate's: those come from tables
                // worked out with the same call, so the value is the same to the bit.
                // The tables hold the loads of whole attempts in flight, not of scaled ones.
                let tabled = if limit == u32::MAX && scale <= 1.0 {
                    fleet_powers
                        .and_then(|p| p.get(in_flight, evidence))
                        .or_else(|| {
                            let row = usize::try_from(attempts).ok()?;
                            self.ramp_powers.get(row)?.get(in_flight, evidence)
                        })
                } else {
                    None
                };
                load = tabled.unwrap_or_else(|| load.max(0.0).powf(evidence));
            }
        }
        unit(load)
    }
}

/// What `load.fleet_relative` counts attempts in flight against: the mean attempts in flight
/// per live candidate, at least 1, raised to the fleet's queueing evidence `queueing` (in
/// `[0, 1]`). 1 for a fleet below one attempt per candidate or without queueing evidence.
pub(crate) fn fleet_scale(in_flight: u32, live: usize, queueing: f32) -> f64 {
    let mean = f64::from(in_flight) / live.max(1) as f64;
    let q = f64::from(queueing).clamp(0.0, 1.0);
    if mean > 1.0 && q > 0.0 {
        mean.powf(q)
    } else {
        1.0
    }
}

/// The most in flight a [`LoadPowers`] table covers.
const POWERS_UP_TO: usize = 8;

/// The unlimited load component's powers `(1 / (1 + k)) ^ e` for `k` of 1 to
/// [`POWERS_UP_TO`] in flight, for one evidence `e`: the powers most draws take, since
/// the evidence is usually the fleet's queueing evidence (the same for every candidate until
/// the next refresh) or a new candidate's (one per outcome count below
/// `load.unknown_samples`). Each entry is worked out by the very expression the load
/// component uses, so a value read from the table is the one it would compute.
#[derive(Clone, Copy, Debug)]
pub(crate) struct LoadPowers {
    evidence: f64,
    by_in_flight: [f64; POWERS_UP_TO],
}

impl LoadPowers {
    /// The table for evidence `evidence`.
    pub(crate) fn new(evidence: f64) -> Self {
        let by_in_flight = std::array::from_fn(|i| {
            let load = 1.0 / (1.0 + (i + 1) as f64);
            load.max(0.0).powf(evidence)
        });
        LoadPowers {
            evidence,
            by_in_flight,
        }
    }

    /// The tables of a new candidate's evidence, one per outcome count below `unknown`
    /// (the gate's `unknown_samples`; at most 16 of them).
    pub(crate) fn ramp(unknown: u32) -> Vec<Self> {
        (0..unknown.min(16))
            .map(|a| LoadPowers::new((1.0 - f64::from(a) / f64::from(unknown)).max(0.0)))
            .collect()
    }

    /// `(1 / (1 + in_flight)) ^ evidence` if this table holds it.
    #[inline]
    pub(super) fn get(&self, in_flight: u32, evidence: f64) -> Option<f64> {
        if evidence != self.evidence {
            return None;
        }
        let i = (in_flight as usize).checked_sub(1)?;
        self.by_in_flight.get(i).copied()
    }
}

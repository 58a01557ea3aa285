//! The `[share]` section: how evidence other coordinators send (digests) is merged as a prior.

use serde::{Deserialize, Serialize};

use crate::error::Problem;

/// How remote evidence (digests from other coordinators, see `crate::digest`) is weighed.
///
/// Remote evidence is a **prior**: for each candidate the senders' averages are pooled,
/// weighted by their sample counts, and blended with the local averages. The blend is a convex
/// combination of the local value and values a local outcome could have reported, so no digest
/// moves a candidate's weight outside what a stream of local outcomes could reach; and the
/// prior's weight is capped at `max_prior_samples`, so once a coordinator has that many fresh
/// samples of its own, its evidence counts at least as much as everything it heard.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ShareConfig {
    /// What one remote sample counts for, in local samples (in `[0, 1]`; 0 ignores digests).
    pub remote_weight: f64,
    /// The most the pooled remote evidence on one candidate may weigh, in local samples. The
    /// outcomes senders saw since their previous digests count one sample each and take this
    /// first; the senders' averages fill the rest.
    pub max_prior_samples: f64,
    /// A sender is heard for this many seconds before its evidence is used (a new or
    /// restarted sender, or a stream of made-up names, moves nothing at first).
    pub blackout_s: f64,
    /// Remote evidence whose newest sample is older than this many seconds is dropped; a
    /// coordinator also leaves out of its own digests candidates it has not sampled for as
    /// long.
    pub expiry_s: f64,
    /// The weight of local evidence halves every this many seconds since its last sample, so
    /// fresh remote evidence takes over from stale local evidence.
    pub local_half_life_s: f64,
    /// At most one digest per sender per this many seconds is applied; more are rejected.
    pub min_interval_s: f64,
    /// Most entries one digest may carry.
    pub max_entries: usize,
    /// Most senders remembered at once; a digest from one more is rejected.
    pub max_senders: usize,
    /// The largest sample count an entry may claim.
    pub max_samples: u64,
}

impl Default for ShareConfig {
    /// Remote samples count half (`remote_weight` 0.5) up to 8 samples in all, a 1 s blackout
    /// for new senders, a 10 min expiry, local evidence halving every 2 s, one digest per
    /// sender per 0.5 s, at most 10,000 entries and 1,000 senders.
    fn default() -> Self {
        ShareConfig {
            remote_weight: 0.5,
            max_prior_samples: 8.0,
            blackout_s: 1.0,
            expiry_s: 600.0,
            local_half_life_s: 2.0,
            min_interval_s: 0.5,
            max_entries: 10_000,
            max_senders: 1_000,
            max_samples: 1_000_000_000,
        }
    }
}

impl ShareConfig {
    /// Adds a problem for each unusable field (paths under `share.`).
    pub(crate) fn check(&self, problems: &mut Vec<Problem>) {
        let mut finite = |path: &str, v: f64, min: f64, strict: bool| {
            let ok = v.is_finite() && if strict { v > min } else { v >= min };
            if !ok {
                let bound = if strict { ">" } else { ">=" };
                problems.push(Problem::new(
                    &format!("share.{path}"),
                    format!("must be a finite number {bound} {min}, got {v}"),
                ));
            }
        };
        finite("max_prior_samples", self.max_prior_samples, 0.0, false);
        finite("blackout_s", self.blackout_s, 0.0, false);
        finite("expiry_s", self.expiry_s, 0.0, true);
        finite("local_half_life_s", self.local_half_life_s, 0.0, true);
        finite("min_interval_s", self.min_interval_s, 0.0, false);
        if !(self.remote_weight >= 0.0 && self.remote_weight <= 1.0) {
            problems.push(Problem::new(
                "share.remote_weight",
                format!(
                    "must be in [0, 1] (a remote sample never counts more than a local one), got {}",
                    self.remote_weight
                ),
            ));
        }
        for (path, v) in [
            ("max_entries", self.max_entries as u64),
            ("max_senders", self.max_senders as u64),
            ("max_samples", self.max_samples),
        ] {
            if v == 0 {
                problems.push(Problem::new(&format!("share.{path}"), "must be at least 1"));
            }
        }
    }
}

//! The checks of a snapshot read from a file or handed in.

use super::{Snapshot, SNAPSHOT_VERSION};
use crate::error::Error;
use crate::score::{LoadFit, Stats};

impl Snapshot {
    /// Checks the version and that every number is finite and not negative, and every
    /// candidate's info is valid.
    pub fn validate(&self) -> Result<(), Error> {
        if self.version != SNAPSHOT_VERSION {
            return Err(Error::InvalidSnapshot(format!(
                "version {} is not supported (this build reads {SNAPSHOT_VERSION})",
                self.version
            )));
        }
        let check = |what: String, v: Option<f64>| -> Result<(), Error> {
            match v {
                Some(x) if !(x.is_finite() && x >= 0.0) => Err(Error::InvalidSnapshot(format!(
                    "{what} = {x}: must be finite and not negative"
                ))),
                _ => Ok(()),
            }
        };
        check("overall.connect_ms".into(), self.overall.connect_ms)?;
        check("overall.ttfb_ms".into(), self.overall.ttfb_ms)?;
        check("overall.bandwidth_bps".into(), self.overall.bandwidth_bps)?;
        check("overall.attempt_ms".into(), self.overall.attempt_ms)?;
        check("overall.ttfb_spread".into(), self.overall.ttfb_spread)?;
        check("feedback_reference_ms".into(), self.feedback_reference_ms)?;
        if let Some(r) = &self.rates {
            check("rates.decisions_per_s".into(), Some(r.decisions_per_s))?;
            if !(0.0..=1.0).contains(&r.sheds_retried) {
                return Err(Error::InvalidSnapshot(format!(
                    "rates.sheds_retried = {}: must be in [0, 1]",
                    r.sheds_retried
                )));
            }
        }
        let mut seen = std::collections::HashSet::new();
        for c in &self.candidates {
            c.info.validate()?;
            let id = &c.info.id;
            if !seen.insert(id) {
                return Err(Error::InvalidSnapshot(format!(
                    "{id} appears twice; a snapshot has one entry per candidate"
                )));
            }
            if let Some(l) = &c.limit {
                l.check(&format!("{id}.limit"))
                    .map_err(Error::InvalidSnapshot)?;
            }
            let s = &c.stats;
            // The statistics a core holds are checked as `Core::add_with_stats` checks them;
            // the ages and the window are the snapshot's own form.
            let held = Stats {
                success: s.success,
                connect_ms: s.connect_ms,
                ttfb_ms: s.ttfb_ms,
                bandwidth_bps: s.bandwidth_bps,
                attempt_ms: s.attempt_ms,
                attempts: s.attempts,
                successes: s.successes,
                overload_evidence: s.overload_evidence,
                attempt_var: s.attempt_var,
                attempt_noise: s.attempt_noise,
                attempt_lag: s.attempt_lag,
                ..Stats::default()
            };
            if let Some((field, problem)) = held.problem() {
                return Err(Error::InvalidSnapshot(format!("{id}.{field} {problem}")));
            }
            if let Some((field, problem)) = c.load_fit.as_ref().and_then(LoadFit::problem) {
                return Err(Error::InvalidSnapshot(format!(
                    "{id}.load_fit.{field} {problem}"
                )));
            }
            if let Some(f) = &c.feedback {
                check(format!("{id}.feedback.queue"), Some(f.queue))?;
                check(format!("{id}.feedback.service_ms"), Some(f.service_ms))?;
                for (field, v) in [("queue", f.queue), ("service_ms", f.service_ms)] {
                    if v > f64::from(f32::MAX) {
                        return Err(Error::InvalidSnapshot(format!(
                            "{id}.feedback.{field} = {v}: too large to keep"
                        )));
                    }
                }
            }
            check(format!("{id}.last_sample_age_s"), s.last_sample_age_s)?;
            check(format!("{id}.ejected_for_s"), s.ejected_for_s)?;
            if let Some(&(errors, total)) = s.window.iter().find(|(e, t)| e > t) {
                return Err(Error::InvalidSnapshot(format!(
                    "{id}.window has a bucket with {errors} overload errors of {total} outcomes; \
                     each bucket is [errors, outcomes] with errors at most outcomes"
                )));
            }
        }
        Ok(())
    }
}

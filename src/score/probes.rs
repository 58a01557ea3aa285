//! When an idle candidate is due a probe: the scheduled period, the record probes'
//! shorter one for candidates with a good record, and heal probes (`ema.probe_s`,
//! `ema.record_probes`, `ema.heal_probes`).

use super::evidence;

/// Attempts before a candidate's record can count as good ([`good_record`]).
const RECORD_MIN_ATTEMPTS: u64 = 10;

/// Whether a candidate's record is good enough for the record probes (`ema.record_probes`):
/// at least [`RECORD_MIN_ATTEMPTS`] attempts, 80 % or more of them successes. The counts are
/// the candidate's whole history, so a server that served well stays worth returning to
/// after a long outage; what the probes cost is bounded by their budget, not by this.
#[inline]
pub(crate) fn good_record(attempts: u64, successes: u64) -> bool {
    attempts >= RECORD_MIN_ATTEMPTS && successes.saturating_mul(5) >= attempts.saturating_mul(4)
}

/// The scheduled probe periods, as of the last coarse refresh (`ema.probe_s`,
/// `ema.record_probes`): a candidate idle and unsampled for longer than its period is drawn as
/// if its time were average.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct ProbePeriods {
    /// Every candidate's period, seconds (infinite: no scheduled probes).
    pub(crate) fleet_s: f64,
    /// The period of a candidate with a good record ([`good_record`]) when shorter, seconds
    /// (infinite: off).
    pub(crate) record_s: f64,
}

impl Default for ProbePeriods {
    fn default() -> Self {
        ProbePeriods {
            fleet_s: f64::INFINITY,
            record_s: f64::INFINITY,
        }
    }
}

impl ProbePeriods {
    /// The period a candidate with these counts is due at: the record period when its record
    /// is good and that period is shorter, else the fleet-wide one.
    #[inline]
    pub(crate) fn for_counts(&self, attempts: u64, successes: u64) -> f64 {
        if self.record_s < self.fleet_s && good_record(attempts, successes) {
            self.record_s
        } else {
            self.fleet_s
        }
    }
}

/// Whether a probe is due for an idle candidate (a candidate never sampled is drawn as
/// unknown anyway): a scheduled one, its last sample older than `after` seconds; or a heal
/// probe, the candidate failing (`evidence::failing`) and another failing candidate having
/// answered after its last sample (`heal_at_s`).
#[inline]
pub(super) fn probe_due(
    in_flight: u32,
    last_sample_s: Option<f64>,
    success: Option<f64>,
    consecutive_failures: u32,
    now_s: f64,
    after: f64,
    heal_at_s: f64,
) -> bool {
    in_flight == 0
        && last_sample_s.is_some_and(|l| {
            now_s - l > after || (l < heal_at_s && evidence::failing(success, consecutive_failures))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_good_record_needs_ten_attempts_and_four_successes_in_five() {
        assert!(!good_record(9, 9));
        assert!(good_record(10, 8));
        assert!(!good_record(10, 7));
        assert!(good_record(1000, 800));
        assert!(!good_record(1000, 799));
        // Saturating counts stay comparable.
        assert!(good_record(u64::MAX, u64::MAX));
    }

    #[test]
    fn the_record_period_applies_to_good_records_when_shorter() {
        let probe_after = |attempts, successes, fleet_s, record_s| {
            ProbePeriods { fleet_s, record_s }.for_counts(attempts, successes)
        };
        assert_eq!(probe_after(100, 95, 10.0, 1.5), 1.5);
        assert_eq!(probe_after(100, 50, 10.0, 1.5), 10.0);
        assert_eq!(probe_after(5, 5, 10.0, 1.5), 10.0);
        // Off (infinite) or longer: the fleet-wide period.
        assert_eq!(probe_after(100, 95, 10.0, f64::INFINITY), 10.0);
        assert_eq!(probe_after(100, 95, 2.0, 3.0), 2.0);
    }

    #[test]
    fn a_probe_is_due_only_when_idle_and_quiet_for_the_period() {
        let due = |in_flight, last, now, after| {
            probe_due(
                in_flight,
                last,
                Some(0.99),
                0,
                now,
                after,
                f64::NEG_INFINITY,
            )
        };
        assert!(due(0, Some(0.0), 2.0, 1.5));
        assert!(!due(0, Some(1.0), 2.0, 1.5));
        assert!(!due(1, Some(0.0), 2.0, 1.5));
        // Never sampled: the unseen rule draws it, not the probes.
        assert!(!due(0, None, 100.0, 1.5));
    }
}

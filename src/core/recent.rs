//! The recent outcomes the fleet reports on a candidate, and the change test that drops
//! those from before a sharp fall in its success rate.

/// How strongly the outcomes senders report must favour "the success rate halved" over "it
/// is what it was" (a log-likelihood ratio: 20 to 1) before the outcomes from before the
/// change are forgotten.
pub(super) const CHANGE_EVIDENCE: f64 = 3.0;

/// The outcomes senders saw since their previous digests (attempts and successes, each
/// counting one), pooled over senders and decaying with `share.local_half_life_s`.
///
/// Bad news counts at once, good news slowly: a CUSUM test on the arriving outcomes against
/// the pooled success rate watches for that rate halving. When the test fires (two failures
/// in a row on a candidate that rarely fails, for instance), the outcomes from before the rise
/// are dropped and the pooled rate is that of the outcomes since. A recovery has no such
/// shortcut: failures fade with the half-life.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct RecentOutcomes {
    attempts: f64,
    successes: f64,
    /// As of this time, seconds on this core's clock.
    at_s: f64,
    /// The CUSUM statistic (log-likelihood ratio of "halved" against "unchanged"), >= 0.
    drop: f64,
    /// The outcomes since the statistic last left 0 (attempts, successes), decaying alike.
    run: (f64, f64),
}

impl RecentOutcomes {
    /// Adds `attempts` outcomes, `successes` of them successes, seen at `now_s`.
    pub(super) fn add(&mut self, attempts: f64, successes: f64, now_s: f64, half_life_s: f64) {
        let decay = (-(now_s - self.at_s).max(0.0) / half_life_s).exp2();
        self.attempts *= decay;
        self.successes *= decay;
        self.run = (self.run.0 * decay, self.run.1 * decay);
        self.at_s = now_s;
        // The pooled rate so far (one success and one failure as a prior), and half of it.
        let p0 = (self.successes + 1.0) / (self.attempts + 2.0);
        let p1 = 0.5 * p0;
        let failures = (attempts - successes).max(0.0);
        let step = successes * (p1 / p0).ln() + failures * ((1.0 - p1) / (1.0 - p0)).ln();
        if self.drop <= 0.0 {
            self.run = (0.0, 0.0);
        }
        self.drop = (self.drop + step).max(0.0);
        if self.drop > 0.0 {
            self.run = (self.run.0 + attempts, self.run.1 + successes);
        }
        self.attempts += attempts;
        self.successes += successes;
        if self.drop > CHANGE_EVIDENCE {
            (self.attempts, self.successes) = self.run;
            self.drop = 0.0;
            self.run = (0.0, 0.0);
        }
    }

    /// (attempts, successes, as of) for the pooling.
    pub(super) fn as_tuple(&self) -> (f64, f64, f64) {
        (self.attempts, self.successes, self.at_s)
    }
}

/// One step of the change test: the log-likelihood ratio of "the success rate halved"
/// against "it is `p0`" for one outcome.
pub(super) fn change_step(p0: f64, success: bool) -> f64 {
    let p0 = p0.clamp(0.01, 0.99);
    if success {
        0.5f64.ln()
    } else {
        ((1.0 - 0.5 * p0) / (1.0 - p0)).ln()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// After the change test fires, the next success is added to the outcomes since the
    /// change (the statistic restarts from 0); it does not fire again.
    #[test]
    fn the_change_test_restarts_after_it_fires() {
        let mut r = RecentOutcomes::default();
        r.add(100.0, 99.0, 0.0, 1e9);
        r.add(5.0, 0.0, 0.0, 1e9);
        assert_eq!(
            r.as_tuple(),
            (5.0, 0.0, 0.0),
            "the outcomes before the fall are dropped"
        );
        r.add(1.0, 1.0, 0.0, 1e9);
        assert_eq!(r.as_tuple(), (6.0, 1.0, 0.0));
    }

    /// A rise of the statistic that falls back to 0 is forgotten: when it fires later, only
    /// the outcomes since it last left 0 are kept.
    #[test]
    fn a_rise_that_fell_back_is_not_kept_in_the_run() {
        let mut r = RecentOutcomes::default();
        r.add(100.0, 90.0, 0.0, 1e9);
        r.add(1.0, 0.0, 0.0, 1e9);
        for _ in 0..3 {
            r.add(1.0, 1.0, 0.0, 1e9);
        }
        r.add(1.0, 0.0, 0.0, 1e9);
        r.add(1.0, 0.0, 0.0, 1e9);
        assert_eq!(r.as_tuple(), (2.0, 0.0, 0.0));
    }
}

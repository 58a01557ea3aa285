//! Re-measuring the no-load latency when a window under load lowered it (see the module docs
//! of [`super`], *No-load latency*).

use super::{AdaptiveConfig, Check, Estimator, MAX_PROBE_WAIT};

/// A window whose mean lowers the no-load latency re-measures it when it ran at this many
/// attempts in flight on average or more ([`Estimator::remeasure`]).
pub(super) const REMEASURE_K: f64 = 2.0;

/// After a re-measuring cut, the share of the fall in proportion to the concurrency that the
/// latency must show for the window before to count as queued ([`Estimator::remeasured`]).
const REMEASURE_FALL: f64 = 0.25;

impl Estimator {
    /// The no-load latency was just lowered to the mean `m` of a window that ran at `k` in
    /// flight on average: a base first learned from slow answers (a cold start, a warm-up)
    /// and then from windows at a limit far past the capacity would hold their queueing, and
    /// at a limit that stays full no light-load answer ever corrects it. The limit is cut to
    /// half the concurrency the window ran at, for one window, which re-measures
    /// ([`Estimator::remeasured`]).
    pub(super) fn remeasure(&mut self, config: &AdaptiveConfig, m: f64, k: f64, now_s: f64) {
        // Half the concurrency the window ran at (a limit the workload does not fill would
        // not lower it).
        let target = (k.min(self.limit) / 2.0).max(f64::from(config.min));
        if target >= self.limit {
            return;
        }
        self.check = Some(Check {
            limit: self.limit,
            mean_ms: m,
            k,
            remeasure: true,
        });
        self.slow_start = false;
        self.resumed = false;
        self.last_cut_s = now_s;
        self.last_change_s = now_s;
        self.after_cut(MAX_PROBE_WAIT);
        self.limit = target;
        self.window.cap = Some(self.limit());
    }

    /// The window after a re-measuring cut (mean `m` at `k` in flight). Queueing comes down
    /// with the concurrency, in proportion once it is all queueing: if the latency fell by at
    /// least [`REMEASURE_FALL`] of that proportional fall, the window before held queueing,
    /// this window's mean is the new estimate, and (while the concurrency is at least
    /// [`REMEASURE_K`]) the next halving re-measures again; if it fell less, nothing was
    /// queued at the concurrency before: the cut is undone, and the limit grows from there by
    /// probes as usual. A sequence ends one halving past the capacity and undoes that one.
    pub(super) fn remeasured(
        &mut self,
        config: &AdaptiveConfig,
        c: Check,
        m: f64,
        k: f64,
        now_s: f64,
    ) {
        let in_proportion = c.mean_ms * (1.0 - k / c.k);
        if k >= c.k || in_proportion <= 0.0 {
            // The cut did not lower the concurrency (too few attempts to fill it): no test.
            self.limit = c.limit;
            return;
        }
        if (c.mean_ms - m) / in_proportion >= REMEASURE_FALL {
            self.no_load_ms = Some(m);
            if k >= REMEASURE_K {
                self.remeasure(config, m, k, now_s);
            }
        } else {
            self.limit = c.limit;
            self.no_load_ms = Some(m.min(c.mean_ms));
        }
    }
}

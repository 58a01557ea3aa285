//! Turning learned statistics into an epoch-free [`Snapshot`] and back.

use std::time::{Duration, Instant};

use rand::Rng;

use super::Core;
use crate::error::Error;
use crate::score::{ErrorWindow, PackedStats, Stats};
use crate::snapshot::{
    CandidateSnapshot, FeedbackSnapshot, Snapshot, StatsSnapshot, SNAPSHOT_VERSION,
};

/// Rounds a duration to the microsecond. Restoring turns an age back into a time
/// (`now - age`) and the next snapshot subtracts again; on raw floats that round trip can move
/// the last bit, on whole microseconds it gives the same value back, so a snapshot survives a
/// restore and a new snapshot unchanged.
/// The longest age or remaining ejection a restore sets, seconds: half the span a core's
/// times may have.
const MAX_SPAN_S: f64 = crate::score::MAX_TIME_S / 2.0;

fn micros(s: f64) -> f64 {
    (s * 1e6).round() / 1e6
}

impl Core {
    /// What the core has learned, with every time stored relative to now, so it can be loaded
    /// by a core with another epoch (after a restart).
    pub fn snapshot(&self) -> Snapshot {
        let now_s = self.clock.now_s;
        let bucket = self.bucket();
        let buckets = self.model.config().window.buckets as usize;
        let candidates = self
            .candidates()
            .filter(|v| !v.removed)
            .map(|v| {
                let idx = self.fleet.index_of(&v.info.id).map(|i| i as usize);
                let st = v.stats;
                CandidateSnapshot {
                    info: v.info.clone(),
                    stats: StatsSnapshot {
                        success: st.success,
                        connect_ms: st.connect_ms,
                        ttfb_ms: st.ttfb_ms,
                        bandwidth_bps: st.bandwidth_bps,
                        attempt_ms: st.attempt_ms,
                        last_sample_age_s: st.last_sample_s.map(|t| micros((now_s - t).max(0.0))),
                        window: st.window.relative(bucket, buckets),
                        consecutive_failures: st.consecutive_failures,
                        ejections: st.ejections,
                        ejected_for_s: st
                            .ejected_until_s
                            .map(|u| micros(u - now_s))
                            .filter(|r| *r > 0.0),
                        attempts: st.attempts,
                        successes: st.successes,
                        overload_evidence: st.overload_evidence,
                        attempt_var: st.attempt_var,
                        attempt_noise: st.attempt_noise,
                        attempt_surprise: st.attempt_surprise,
                        attempt_lag: st.attempt_lag,
                    },
                    limit: v.adaptive,
                    load_fit: idx
                        .map(|i| self.fleet.load_fit[i])
                        .filter(|f| !f.is_empty()),
                    feedback: idx.and_then(|i| self.fleet.feedback.saved(i)).map(
                        |(queue, service_ms)| FeedbackSnapshot {
                            queue: f64::from(queue),
                            service_ms: f64::from(service_ms),
                        },
                    ),
                }
            })
            .collect();
        Snapshot {
            version: SNAPSHOT_VERSION,
            saved_at_unix_ms: None,
            overall: self.fleet.overall,
            feedback_reference_ms: self.fleet.feedback.reference(),
            rates: self.pool.rates(),
            candidates,
        }
    }

    /// Loads a snapshot: unknown candidates are added with their statistics; known ones get
    /// the snapshot's statistics (their static info is kept). Checks every number first and
    /// changes nothing if one is unusable.
    pub fn restore<R: Rng + ?Sized>(
        &mut self,
        snapshot: &Snapshot,
        now: Instant,
        rng: &mut R,
    ) -> Result<(), Error> {
        self.restore_after(snapshot, Duration::ZERO, now, rng)
    }

    /// [`Core::restore`] of a snapshot taken `downtime` ago (the process was down meanwhile:
    /// [`Snapshot::downtime`] reads it from the snapshot's stamp): the statistics are as old as
    /// they are, so evidence that ages by time has aged, ejections have run on, and the
    /// overload windows have moved on by as many buckets.
    pub fn restore_after<R: Rng + ?Sized>(
        &mut self,
        snapshot: &Snapshot,
        downtime: Duration,
        now: Instant,
        rng: &mut R,
    ) -> Result<(), Error> {
        snapshot.validate()?;
        self.advance(now);
        let now_s = self.clock.now_s;
        // Ages and remaining ejections are kept within half the range a core's times may
        // span (about 16 years): older is as old, and a stamp from a clock that was never set
        // (1970) cannot push a time out of range halfway through the restore.
        let down_s = downtime.as_secs_f64().min(MAX_SPAN_S);
        let bucket = self.bucket();
        let config = self.model.config();
        let buckets = config.window.buckets as usize;
        // The windows end `moved` buckets ago (all of them gone past the window's length).
        let moved = (down_s / config.window.bucket_s).min(u32::MAX as f64) as u64;
        let window_end = bucket.saturating_sub(moved.min(buckets as u64));
        self.fleet.overall = snapshot.overall;
        if let Some(ms) = snapshot.feedback_reference_ms {
            self.fleet.feedback.restore_reference(ms);
        }
        if let Some(r) = &snapshot.rates {
            self.pool.restore_rates(r);
        }
        // A snapshot without the answers' count reads as warmed up (serde's default), which
        // only holds for a spread it saved: with none, the spread is learned afresh.
        if self.fleet.overall.ttfb_spread.is_none() {
            self.fleet.overall.ttfb_spread_answers = 0;
        }
        for c in &snapshot.candidates {
            let s = &c.stats;
            let stats = Stats {
                success: s.success,
                connect_ms: s.connect_ms,
                ttfb_ms: s.ttfb_ms,
                bandwidth_bps: s.bandwidth_bps,
                attempt_ms: s.attempt_ms,
                last_sample_s: s
                    .last_sample_age_s
                    .map(|a| now_s - (a + down_s).min(MAX_SPAN_S)),
                window: if moved >= buckets as u64 {
                    ErrorWindow::from_relative(&[], bucket, buckets)
                } else {
                    ErrorWindow::from_relative(&s.window, window_end, buckets)
                },
                consecutive_failures: s.consecutive_failures,
                ejections: s.ejections,
                ejected_until_s: s
                    .ejected_for_s
                    .map(|r| r.min(MAX_SPAN_S) - down_s)
                    .filter(|r| *r > 0.0)
                    .map(|r| now_s + r),
                attempts: s.attempts,
                successes: s.successes,
                overload_evidence: s.overload_evidence,
                attempt_var: s.attempt_var,
                attempt_noise: s.attempt_noise,
                attempt_surprise: s.attempt_surprise,
                attempt_lag: s.attempt_lag,
            };
            let idx = match self.fleet.index_of(&c.info.id) {
                Some(idx) => {
                    self.fleet.slots[idx as usize].stats = PackedStats::pack(&stats);
                    idx as usize
                }
                None => {
                    self.add_with_stats(c.info.clone(), stats, now, rng)?;
                    self.fleet
                        .index_of(&c.info.id)
                        .ok_or_else(|| Error::UnknownCandidate(c.info.id.clone()))?
                        as usize
                }
            };
            if let Some(l) = &c.limit {
                self.limit_restore(idx, l);
            }
            if let Some(fit) = c.load_fit {
                self.fleet.load_fit[idx] = fit;
            }
            if let Some(f) = c.feedback {
                self.fleet
                    .feedback
                    .restore(idx, f.queue as f32, f.service_ms as f32);
            }
            self.refresh_leaf(idx);
        }
        self.cap_restored_ejections(now_s);
        self.dirty = true;
        self.pump(rng);
        Ok(())
    }

    /// Holds the ejections a restore brought back to `ejection.max_share` of the live
    /// candidates, as an ejection at run time is held: the ones ending last stay, the others
    /// end now. (A restore into a smaller fleet, or one whose snapshot ejected more than the
    /// config allows, would otherwise leave more of the fleet ejected than the cap.)
    fn cap_restored_ejections(&mut self, now_s: f64) {
        let ejection = &self.model.config().ejection;
        if !ejection.enabled {
            return;
        }
        let cap = (ejection.max_share * self.fleet.live_count as f64).floor() as usize;
        let mut ejected: Vec<(f64, usize)> = self
            .fleet
            .slots
            .iter()
            .enumerate()
            .filter(|(_, s)| s.live)
            .filter_map(|(i, s)| {
                s.stats
                    .ejected_until_s()
                    .filter(|&u| u > now_s)
                    .map(|u| (u, i))
            })
            .collect();
        if ejected.len() <= cap {
            return;
        }
        ejected.sort_unstable_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        for &(_, idx) in &ejected[cap..] {
            let slot = &mut self.fleet.slots[idx];
            let mut stats = slot.stats.unpack();
            stats.ejected_until_s = None;
            slot.stats = PackedStats::pack(&stats);
            self.refresh_leaf(idx);
        }
    }
}

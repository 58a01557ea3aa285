//! Sharing with other coordinators: the digest this core publishes and the remote evidence it
//! merges as a prior (see [`crate::digest`] and [`ShareConfig`](crate::score::ShareConfig)).
//!
//! The state lives apart from the slots (boxed, `None` until a digest is applied or an
//! identity set), so a core that does not share pays one pointer test per full refresh.

use std::collections::BTreeMap;

#[allow(clippy::wildcard_imports)]
use super::*;
use crate::digest::{Applied, CandidateDigest, Digest, DigestError};
use crate::score::{Pooled, RemoteEvidence, StatsView};
use recent::{change_step, RecentOutcomes, CHANGE_EVIDENCE};
use scoring::Scoring;

/// What the core remembers of one sender.
#[derive(Debug, Clone)]
struct Sender {
    /// Its index in the evidence lists.
    index: u32,
    /// The last sequence number applied.
    last_seq: u64,
    /// The round of the last digest applied (its `seq` when whole), and whether a part.
    round: (u64, bool),
    /// When its last digest was applied, seconds on this core's clock.
    last_applied_s: f64,
    /// When the first digest of its last round was applied: flood control counts from it,
    /// so a round's parts applied late here do not hold back the next round.
    round_opened_s: f64,
    /// When it was first heard (its blackout ends `share.blackout_s` later).
    first_heard_s: f64,
}

/// One sender's last report on a slot's candidate.
#[derive(Debug, Clone)]
struct Report {
    sender: u32,
    /// The round of the digest it came in.
    round: u64,
    evidence: RemoteEvidence,
}

/// The reports on one slot, for the candidate of generation `gen`, and their pooled form as of
/// the last refresh.
#[derive(Debug, Clone, Default)]
struct SlotReports {
    gen: u32,
    reports: Vec<Report>,
    pooled: Option<Pooled>,
    /// Outcomes the senders saw since their previous digests.
    recent: RecentOutcomes,
    /// Listed in [`ShareState::changed`].
    queued: bool,
    /// The pooled form is out of date from this time on (a report expires, a blackout ends)
    /// or at once (a report came): the next refresh pools again.
    pooled_until_s: f64,
}

/// The sharing state of a core.
#[derive(Debug, Clone, Default)]
pub(crate) struct ShareState {
    /// This core's name in its digests.
    name: String,
    /// Added to the milliseconds since the epoch to make a digest's sequence number.
    seq_base: u64,
    /// The last digest [`Core::take_digest`] made: (its sequence number, its time).
    last_taken: Option<(u64, f64)>,
    /// Per slot, the change test on this core's own outcomes (the statistic, >= 0).
    local_drop: Vec<f32>,
    /// When the test last fired, seconds on this core's clock, if no digest was taken since.
    urgent_s: Option<f64>,
    senders: BTreeMap<String, Sender>,
    /// Per sender index, when its blackout ends (infinite: forgotten).
    usable_from_s: Vec<f64>,
    free_indices: Vec<u32>,
    by_slot: Vec<SlotReports>,
    /// Slots whose reports changed since the last refresh (each listed once: `queued`).
    changed: Vec<u32>,
}

impl ShareState {
    /// The reports on slot `idx` (generation `gen`) usable at `now_s`: past their sender's
    /// blackout and not expired.
    fn usable(
        &self,
        idx: usize,
        gen: u32,
        now_s: f64,
        expiry_s: f64,
    ) -> impl Iterator<Item = &RemoteEvidence> + '_ {
        let reports = match self.by_slot.get(idx) {
            Some(r) if r.gen == gen => r.reports.as_slice(),
            _ => &[],
        };
        reports
            .iter()
            .filter(move |r| {
                self.usable_from_s
                    .get(r.sender as usize)
                    .is_some_and(|&from| now_s >= from)
                    && now_s - r.evidence.sample_s <= expiry_s
            })
            .map(|r| &r.evidence)
    }

    /// When the pooled form of `reports` goes out of date: the first expiry or blackout end
    /// after `now_s`.
    fn pooled_until(&self, reports: &[Report], now_s: f64, expiry_s: f64) -> f64 {
        let mut until = f64::INFINITY;
        for r in reports {
            match self.usable_from_s.get(r.sender as usize) {
                Some(&from) if from <= now_s => {}
                from => until = until.min(from.copied().unwrap_or(f64::INFINITY)),
            }
            let ends = r.evidence.sample_s + expiry_s;
            if ends >= now_s {
                until = until.min(ends);
            }
        }
        until
    }
}

impl Core {
    /// Forgets the senders silent for `expiry_s` and pools again every slot's reports whose
    /// pooled form is out of date (full refresh).
    pub(super) fn refresh_share(&mut self) {
        let Some(share) = self.share.as_deref_mut() else {
            return;
        };
        let now_s = self.clock.now_s;
        let expiry_s = self.model.config().share.expiry_s;
        // A sender that fell silent is forgotten here too, not only when another is heard.
        forget_silent(share, now_s, expiry_s);
        for &idx in &share.changed {
            if let Some(slot) = share.by_slot.get_mut(idx as usize) {
                slot.queued = false;
            }
        }
        share.changed.clear();
        for idx in 0..share.by_slot.len() {
            let slot = &share.by_slot[idx];
            if slot.pooled_until_s > now_s || slot.reports.is_empty() && slot.pooled.is_none() {
                continue;
            }
            let gen = self.fleet.slots.get(idx).map_or(u32::MAX, |s| s.gen);
            let slot = &share.by_slot[idx];
            let recent = slot.recent.as_tuple();
            let pooled = self
                .model
                .pool(share.usable(idx, gen, now_s, expiry_s), recent);
            let until = share.pooled_until(&share.by_slot[idx].reports, now_s, expiry_s);
            let slot = &mut share.by_slot[idx];
            slot.pooled = pooled;
            slot.pooled_until_s = until;
        }
    }

    /// Names this core in its digests, numbered `seq_base` plus the ms since the core's epoch
    /// (a driver whose process may restart numbers them from the wall clock instead, with
    /// [`Core::set_share_identity_at`], so the others do not take them for replays).
    pub fn set_share_identity(&mut self, name: impl Into<String>, seq_base: u64) {
        let share = self.share.get_or_insert_with(Box::default);
        share.name = name.into();
        share.seq_base = seq_base;
    }

    /// [`Core::set_share_identity`] numbered on a clock that runs across restarts: `at_ms`
    /// (the wall-clock ms) at `now`, plus the ms since, whatever this core's age; a process
    /// that replaces it later numbers its digests after this one's.
    pub fn set_share_identity_at(&mut self, name: impl Into<String>, now: Instant, at_ms: u64) {
        let age_ms = (self.clock.seconds_at(now) * 1000.0) as u64;
        self.set_share_identity(name, at_ms.saturating_sub(age_ms));
    }

    /// The name and sequence base a core built at `now` to replace this one (a restart in the
    /// same process) takes so its digests carry on under this one's name and are numbered
    /// after every digest this one made: `None` if this core has no name.
    #[cfg(feature = "actor")]
    pub(crate) fn share_identity_after(&self, now: Instant) -> Option<(String, u64)> {
        let s = self.share.as_deref().filter(|s| !s.name.is_empty())?;
        let made = s
            .seq_base
            .saturating_add((self.clock.seconds_at(now) * 1000.0) as u64);
        let taken = s.last_taken.map_or(0, |(seq, _)| seq);
        Some((s.name.clone(), made.max(taken).saturating_add(1)))
    }

    /// The digest of what this core has learned: one entry per live candidate whose newest
    /// local sample is at most `share.expiry_s` old (remote evidence is never passed on). Its
    /// sender is the name set with [`Core::set_share_identity`] (empty until then, which
    /// receivers turn away).
    pub fn digest(&self, now: Instant) -> Digest {
        self.digest_since(now, None)
    }

    /// [`Core::digest`] with only the candidates sampled after `since` (`None`: every fresh
    /// one). Receivers keep a sender's last report on a candidate until it expires, so a
    /// driver that sends every period may send only what changed since its previous digest,
    /// and a full one now and then for coordinators that joined meanwhile.
    pub fn digest_since(&self, now: Instant, since: Option<Instant>) -> Digest {
        let since_s = since.map(|s| s.saturating_duration_since(self.clock.epoch).as_secs_f64());
        self.build_digest(now, since_s)
    }

    /// The digest to publish now: [`Core::digest`] (with `changed_only`, only the candidates
    /// sampled since the previous digest taken), numbered after that previous one
    /// ([`Digest::prev_seq`]), so a receiver that missed it knows the outcomes since its last
    /// report may be older than one period. A driver that publishes every digest it takes
    /// (and drops one it cannot publish, as a lost copy) should use this one.
    pub fn take_digest(&mut self, now: Instant, changed_only: bool) -> Digest {
        let last = self.share.as_deref().and_then(|s| s.last_taken);
        let mut digest = self.build_digest(now, last.filter(|_| changed_only).map(|l| l.1));
        let at_s = self.clock.seconds_at(now);
        // A sequence number is never reused, even for two digests taken in one millisecond,
        // and never 0, which a first digest names as its previous one.
        digest.seq = digest.seq.max(last.map_or(0, |l| l.0).saturating_add(1));
        digest.prev_seq = Some(last.map_or(0, |l| l.0));
        let share = self.share.get_or_insert_with(Box::default);
        share.last_taken = Some((digest.seq, at_s));
        share.urgent_s = None;
        digest
    }

    /// Whether this core saw a sharp change in its own outcomes on some candidate since the
    /// last [`Core::take_digest`]: the change test of `docs/fleet.md` fired on them (a failure
    /// on a candidate that rarely fails, two in a row on one that fails one time in ten).
    /// A driver may publish at once instead of waiting for the period, as long as the others
    /// still take it (`share.min_interval_s` after the previous digest).
    pub fn digest_urgent(&self) -> bool {
        self.share.as_deref().is_some_and(|s| s.urgent_s.is_some())
    }

    /// Feeds one of this core's own outcomes on slot `idx` to the change test (the outcome
    /// path calls it before the statistics take the outcome, only when this core shares).
    #[cold]
    #[inline(never)]
    pub(super) fn watch_local_outcome(&mut self, idx: usize, success: bool) {
        let prior = self.model.config().ema.success_prior;
        let p0 = self
            .fleet
            .slots
            .get(idx)
            .map_or(prior, |s| s.stats.success().unwrap_or(prior));
        let now_s = self.clock.now_s;
        let Some(share) = self.share.as_deref_mut() else {
            return;
        };
        if share.local_drop.len() <= idx {
            share
                .local_drop
                .resize(self.fleet.slots.len().max(idx + 1), 0.0);
        }
        let drop = (f64::from(share.local_drop[idx]) + change_step(p0, success)).max(0.0);
        if drop > CHANGE_EVIDENCE {
            share.local_drop[idx] = 0.0;
            share.urgent_s = Some(now_s);
        } else {
            share.local_drop[idx] = drop as f32;
        }
    }

    /// Learns the fleet's first-byte spread (the deadline advice's multiple) from an answer
    /// on slot `idx` that this core has no first byte of its own for yet, against the others'
    /// pooled average of it (the outcome path calls it before the statistics take the
    /// outcome, only when this core shares). A coordinator among many, each drawing a few of
    /// many candidates, seldom answers twice on one; without this its spread, and so its
    /// deadlines, would wait for that.
    #[cold]
    #[inline(never)]
    pub(super) fn learn_spread_from_prior(&mut self, idx: usize, outcome: &Outcome) {
        let Outcome::Success(s) = outcome else {
            return;
        };
        let (Some(ttfb_ms), Some(slot)) = (s.ttfb_ms, self.fleet.slots.get(idx)) else {
            return;
        };
        let local = slot.stats.unpack();
        if local.ttfb_ms.is_some() {
            return;
        }
        let Some(average_ms) = self.blended(idx, &local).and_then(|b| b.ttfb_ms) else {
            return;
        };
        let o = &mut self.fleet.overall;
        self.model.config().deadline.learn_spread(
            &mut o.ttfb_spread,
            &mut o.ttfb_spread_answers,
            ttfb_ms,
            average_ms,
        );
    }

    fn build_digest(&self, now: Instant, since_s: Option<f64>) -> Digest {
        let now_s = self.clock.seconds_at(now);
        let cfg = self.model.config();
        let buckets = cfg.window.buckets as usize;
        let bucket = fleet::BUCKET_BASE + (now_s / cfg.window.bucket_s) as u64;
        let mut entries = Vec::new();
        for (idx, slot) in self.fleet.slots.iter().enumerate() {
            if !slot.live {
                continue;
            }
            let Some(last) = slot.stats.last_sample_s() else {
                continue;
            };
            let age_s = (now_s - last).max(0.0);
            if age_s > cfg.share.expiry_s || since_s.is_some_and(|s| last <= s) {
                continue;
            }
            let s = slot.stats.unpack();
            let (errors, total) = s.window.counts(bucket, buckets);
            let finite = |x: Option<f64>| x.filter(|v| v.is_finite() && *v >= 0.0);
            entries.push(CandidateDigest {
                id: self.fleet.infos[idx].id.clone(),
                success: s.success.unwrap_or(cfg.ema.success_prior).clamp(0.0, 1.0),
                attempt_ms: finite(s.attempt_ms).map(|t| t.min(crate::digest::MAX_TIME_MS)),
                attempt_var: f64::from(s.attempt_var).clamp(0.0, crate::digest::MAX_VARIANCE),
                ttfb_ms: finite(s.ttfb_ms).map(|t| t.min(crate::digest::MAX_TIME_MS)),
                connect_ms: finite(s.connect_ms).map(|t| t.min(crate::digest::MAX_TIME_MS)),
                bandwidth_bps: finite(s.bandwidth_bps)
                    .map(|b| b.min(crate::digest::MAX_BANDWIDTH_BPS)),
                overload_errors: errors.min(total),
                overload_total: total,
                samples: s.attempts,
                successes: s.successes.min(s.attempts),
                age_s,
            });
        }
        let (name, base) = self
            .share
            .as_deref()
            .map_or((String::new(), 0), |s| (s.name.clone(), s.seq_base));
        Digest {
            sender: name,
            seq: base.saturating_add((now_s * 1000.0) as u64),
            prev_seq: None,
            part: None,
            entries,
        }
    }

    /// [`Core::apply_digest`] after checking that the digest names `from`, the sender the
    /// transport vouches for.
    pub fn apply_digest_from(
        &mut self,
        now: Instant,
        from: &str,
        digest: &Digest,
    ) -> Result<Applied, DigestError> {
        digest.check_sender(from)?;
        self.apply_digest(now, digest)
    }

    /// Merges another coordinator's digest as a prior. The whole digest is turned away (with
    /// the reason) when sharing is off, its sender is empty or this core's own name, it has too
    /// many entries, it is not newer than the last one applied from its sender, it comes sooner
    /// than `share.min_interval_s` after that one, or one sender too many would be remembered.
    /// Otherwise each entry is checked on its own; entries turned away are counted in the
    /// answer, the others replace the sender's last report on their candidate.
    ///
    /// The weights move at the next call that grants ([`Core::tick`], `ready`, `done`): a
    /// driver applying a round of digests calls `tick` once after them, and pays one refresh
    /// for the round.
    pub fn apply_digest(&mut self, now: Instant, digest: &Digest) -> Result<Applied, DigestError> {
        let cfg = self.model.config().share.clone();
        if cfg.remote_weight <= 0.0 {
            return Err(DigestError::SharingOff);
        }
        digest.check(&cfg)?;
        self.advance(now);
        let now_s = self.clock.now_s;
        let share = self.share.get_or_insert_with(Box::default);
        if digest.sender == share.name {
            return Err(DigestError::OwnSender(digest.sender.clone()));
        }
        forget_silent(share, now_s, cfg.expiry_s);
        // The outcomes since the sender's previous report on a candidate happened since its
        // previous digest only if that digest was applied here (or the sender does not say
        // which one it was). Otherwise a lost or refused copy hides when they happened, and
        // they are left to the sender's averages. Around a digest split into parts, only
        // the report on the candidate tells: it must come from the previous round.
        let last = share.senders.get(&digest.sender).map(|s| s.round);
        let round = digest.part.map_or(digest.seq, |p| p.round);
        let by_report = digest.part.is_some() || last.is_some_and(|l| l.1);
        // The later parts of the round last applied are not too soon.
        let later_part = digest.part.is_some() && last == Some((round, true));
        let contiguous = match (digest.prev_seq, last) {
            (None, _) => true,
            (Some(prev), Some(l)) => prev == l.0,
            (Some(_), None) => false,
        };
        let index = match share.senders.get(&digest.sender) {
            Some(s) if digest.seq <= s.last_seq => {
                return Err(DigestError::Replayed {
                    sender: digest.sender.clone(),
                    seq: digest.seq,
                    last: s.last_seq,
                });
            }
            Some(s) if now_s - s.round_opened_s < cfg.min_interval_s && !later_part => {
                return Err(DigestError::TooSoon {
                    sender: digest.sender.clone(),
                    since_s: now_s - s.round_opened_s,
                    min_s: cfg.min_interval_s,
                });
            }
            Some(s) => s.index,
            None if share.senders.len() >= cfg.max_senders => {
                return Err(DigestError::TooManySenders(digest.sender.clone()));
            }
            None => {
                let index = share.free_indices.pop().unwrap_or_else(|| {
                    share.usable_from_s.push(f64::INFINITY);
                    share.usable_from_s.len() as u32 - 1
                });
                share.usable_from_s[index as usize] = now_s + cfg.blackout_s;
                share.senders.insert(
                    digest.sender.clone(),
                    Sender {
                        index,
                        last_seq: 0,
                        round: (0, false),
                        last_applied_s: f64::NEG_INFINITY,
                        round_opened_s: f64::NEG_INFINITY,
                        first_heard_s: now_s,
                    },
                );
                index
            }
        };
        if let Some(s) = share.senders.get_mut(&digest.sender) {
            s.last_seq = digest.seq;
            s.round = (round, digest.part.is_some());
            s.last_applied_s = now_s;
            if !later_part {
                s.round_opened_s = now_s;
            }
        }
        if share.by_slot.len() < self.fleet.slots.len() {
            share
                .by_slot
                .resize_with(self.fleet.slots.len(), SlotReports::default);
        }
        let memory = (1.0 / self.model.config().ema.alpha).ceil();
        let mut applied = Applied::default();
        let mut seen = std::collections::HashSet::with_capacity(digest.entries.len());
        for e in &digest.entries {
            if let Err(err) = e.check(&cfg) {
                applied.reject(err);
                continue;
            }
            let Some(idx) = self.fleet.index_of(&e.id) else {
                applied.reject(DigestError::UnknownCandidate(e.id.clone()));
                continue;
            };
            let idx = idx as usize;
            if !seen.insert(idx) {
                applied.reject(DigestError::DuplicateEntry(e.id.clone()));
                continue;
            }
            let gen = self.fleet.slots[idx].gen;
            let nan = |x: Option<f64>| x.unwrap_or(f64::NAN);
            let evidence = RemoteEvidence {
                success: e.success,
                attempt_ms: nan(e.attempt_ms),
                attempt_var: e.attempt_var,
                ttfb_ms: nan(e.ttfb_ms),
                connect_ms: nan(e.connect_ms),
                bandwidth_bps: nan(e.bandwidth_bps),
                overload: (e.overload_errors, e.overload_total),
                samples: e.samples,
                successes: e.successes,
                sample_s: now_s - e.age_s,
            };
            let slot = &mut share.by_slot[idx];
            if slot.gen != gen {
                slot.gen = gen;
                slot.reports.clear();
                slot.pooled = None;
                slot.recent = RecentOutcomes::default();
            }
            match slot.reports.iter_mut().find(|r| r.sender == index) {
                Some(r) if digest.part.is_some() && r.round == round => {
                    // Already in an earlier part of this round.
                    applied.reject(DigestError::DuplicateEntry(e.id.clone()));
                    continue;
                }
                Some(r) => {
                    let contiguous = match digest.prev_seq {
                        Some(prev) if by_report => r.round == prev,
                        _ => contiguous,
                    };
                    // The outcomes since the sender's previous digest (none if its totals went
                    // back: it restarted), at most an average's memory of them per digest.
                    let (da, ds) = (
                        evidence.samples.checked_sub(r.evidence.samples),
                        evidence.successes.checked_sub(r.evidence.successes),
                    );
                    if let (true, Some(da), Some(ds)) = (contiguous, da, ds) {
                        if da > 0 && ds <= da {
                            let (da, ds) = (da as f64, ds as f64);
                            let cap = memory.min(da) / da;
                            slot.recent
                                .add(da * cap, ds * cap, now_s, cfg.local_half_life_s);
                        }
                    }
                    r.evidence = evidence;
                    r.round = round;
                }
                None => slot.reports.push(Report {
                    sender: index,
                    round,
                    evidence,
                }),
            }
            slot.pooled_until_s = f64::NEG_INFINITY;
            if !slot.queued {
                slot.queued = true;
                share.changed.push(idx as u32);
            }
            applied.applied += 1;
        }
        Ok(applied)
    }

    /// Pools again and rescores the candidates digests reported on since the last refresh
    /// (the next pump calls it): a round of digests costs a refresh of the candidates it
    /// names, not of the whole fleet. The fleet's center and spread move at the next coarse
    /// refresh.
    #[inline]
    pub(super) fn refresh_digested(&mut self) {
        if self.share.as_deref().is_some_and(|s| !s.changed.is_empty()) {
            self.refresh_changed_slots();
        }
    }

    #[cold]
    #[inline(never)]
    fn refresh_changed_slots(&mut self) {
        let Some(share) = self.share.as_deref_mut() else {
            return;
        };
        let changed = std::mem::take(&mut share.changed);
        let now_s = self.clock.now_s;
        let expiry_s = self.model.config().share.expiry_s;
        for &idx in &changed {
            let idx = idx as usize;
            let gen = self.fleet.slots.get(idx).map_or(u32::MAX, |s| s.gen);
            let slot = &share.by_slot[idx];
            let pooled = self.model.pool(
                share.usable(idx, gen, now_s, expiry_s),
                slot.recent.as_tuple(),
            );
            let until = share.pooled_until(&slot.reports, now_s, expiry_s);
            let slot = &mut share.by_slot[idx];
            slot.pooled = pooled;
            slot.pooled_until_s = until;
            slot.queued = false;
        }
        for &idx in &changed {
            if (idx as usize) < self.fleet.slots.len() {
                self.refresh_slot(idx as usize, fleet::Refresh::Full);
            }
        }
        let mut changed = changed;
        changed.clear();
        if let Some(share) = self.share.as_deref_mut() {
            share.changed = changed;
        }
    }

    /// Senders heard from (digests applied), with the time each was first heard, seconds on
    /// this core's clock.
    pub fn share_senders(&self) -> Vec<(String, f64)> {
        self.share.as_deref().map_or_else(Vec::new, |s| {
            s.senders
                .iter()
                .map(|(name, s)| (name.clone(), s.first_heard_s))
                .collect()
        })
    }

    /// Slot `idx`'s statistics with the remote evidence on it blended in, if there is any
    /// usable (the refresh scores these instead of the local statistics alone).
    pub(super) fn blended(&self, idx: usize, local: &Stats) -> Option<Stats> {
        self.scoring().blended(idx, local)
    }
}

impl Scoring<'_> {
    /// [`Core::blended`], from the parts scoring reads (the deadline advice reads it too).
    pub(super) fn blended(&self, idx: usize, local: &Stats) -> Option<Stats> {
        let share = self.share?;
        let slot = share.by_slot.get(idx)?;
        if slot.gen != self.fleet.slots[idx].gen {
            return None;
        }
        let fresh;
        let pooled = if slot.pooled_until_s > self.clock.now_s {
            slot.pooled.as_ref()?
        } else {
            // Out of date and not yet pooled again (an outcome between a digest and the next
            // full refresh): pool this one now.
            let expiry_s = self.model.config().share.expiry_s;
            let recent = slot.recent.as_tuple();
            fresh = self.model.pool(
                share.usable(idx, slot.gen, self.clock.now_s, expiry_s),
                recent,
            )?;
            &fresh
        };
        self.model
            .blend(local, pooled, self.clock.now_s, self.clock.bucket())
    }
}

/// Forgets the senders not heard for `expiry_s` (their reports can no longer be used) and
/// drops their reports, so memory stays bounded by the live senders. A live sender's expired
/// reports stay until it reports on the candidate again (they are not pooled meanwhile).
fn forget_silent(share: &mut ShareState, now_s: f64, expiry_s: f64) {
    let gone: Vec<(String, u32)> = share
        .senders
        .iter()
        .filter(|(_, s)| now_s - s.last_applied_s > expiry_s)
        .map(|(n, s)| (n.clone(), s.index))
        .collect();
    if gone.is_empty() {
        return;
    }
    for (name, index) in &gone {
        share.senders.remove(name);
        share.usable_from_s[*index as usize] = f64::INFINITY;
        share.free_indices.push(*index);
    }
    for slot in &mut share.by_slot {
        slot.reports
            .retain(|r| !gone.iter().any(|(_, i)| *i == r.sender));
    }
}

//! Attempts: outcomes, releases, and the lease and deadline clock.

#[allow(clippy::wildcard_imports)]
use super::*;
use crate::score::AttemptTime;

/// A release this close to the advised deadline (a share of it: the clock's rounding) counts
/// as past it.
const ADVICE_TOLERANCE: f64 = 1.0 - 1e-9;

impl Core {
    /// Reports what happened in an attempt; updates the statistics. Only the first report of
    /// an attempt counts ([`Error::DuplicateOutcome`] for the rest).
    ///
    /// Returns what the attempt belonged to (request, candidate, arm), for a driver's metrics
    /// or logs. (Before, this returned `()`; code that only checks the result is unchanged.)
    #[inline]
    pub fn outcome(
        &mut self,
        id: AttemptId,
        outcome: Outcome,
        now: Instant,
    ) -> Result<Reported, Error> {
        outcome.validate()?;
        let a = self.attempts.index(id)?;
        if self.attempts[a].reported {
            return Err(Error::DuplicateOutcome(id));
        }
        self.advance(now);
        self.attempts[a].reported = true;
        self.attempts[a].shed = matches!(outcome, Outcome::Failure(FailureClass::Overload));
        let att = self.attempts[a];
        let idx = att.key.idx as usize;
        let elapsed_ms = (self.clock.now_s - att.granted_s).max(0.0) * 1000.0;
        if att.key.gen == self.fleet.slots[idx].gen {
            if let Some(t) = ScoreModel::time_sample(&outcome, Some(elapsed_ms)) {
                self.fleet.load_fit[idx].observe(att.concurrency, t);
            }
            self.observe_shed(idx, att.concurrency, &outcome);
            if self.model.config().adaptive.enabled {
                self.limit_observe(&att, &outcome, Some(elapsed_ms));
            }
            if let Outcome::Success(Success {
                feedback: Some(report),
                ..
            }) = &outcome
            {
                let cfg = self.model.config();
                let alpha = cfg.ema.overall_alpha;
                self.fleet
                    .feedback
                    .observe(idx, report, &cfg.feedback, alpha);
            }
        }
        self.apply_outcome(idx, &outcome, Some(elapsed_ms));
        let ridx = att.request as usize;
        let r = &mut self.requests[ridx];
        if matches!(outcome, Outcome::Failure(FailureClass::Timeout)) {
            r.timed_out = true;
        }
        Ok(Reported {
            request: RequestId::new(att.request, r.gen),
            candidate: self.fleet.infos[idx].id.clone(),
            arm: att.arm.map(usize::from),
        })
    }

    /// Says an attempt has its first byte (the outcome may follow much later, at the end of
    /// a transfer). Optional: until an attempt reports either, its age counts as evidence that
    /// the candidate is slow to answer (see `weights.time_to_success`), and without this call
    /// a long transfer counts as such until its outcome. With `ema.attempt_time =
    /// "completion"` the attempt's time runs to its outcome, and this call changes nothing.
    pub fn first_byte(&mut self, id: AttemptId) -> Result<(), Error> {
        let a = self.attempts.index(id)?;
        // Counted to completion, a transfer still running is a try still running.
        if self.model.config().ema.attempt_time == AttemptTime::FirstByte {
            self.attempts[a].answered = true;
        }
        Ok(())
    }

    /// Tells slot `idx`'s load fit whether an attempt granted at `concurrency` ended in an
    /// overload failure ([`crate::score::LoadFit::observe_shed`]); called before
    /// `apply_outcome` counts the outcome.
    #[inline]
    fn observe_shed(&mut self, idx: usize, concurrency: u32, outcome: &Outcome) {
        let outcomes = self.fleet.slots[idx].stats.attempts() + 1;
        let overload = matches!(outcome, Outcome::Failure(FailureClass::Overload));
        self.fleet.load_fit[idx].observe_shed(concurrency, overload, outcomes);
    }

    #[inline]
    pub(super) fn apply_outcome(&mut self, idx: usize, outcome: &Outcome, elapsed_ms: Option<f64>) {
        if self.share.is_some() {
            // A core that shares watches its own outcomes for a sharp change (out of line).
            self.watch_local_outcome(idx, matches!(outcome, Outcome::Success(_)));
            self.learn_spread_from_prior(idx, outcome);
        }
        let bucket = self.bucket();
        let now_s = self.clock.now_s;
        let slot = &mut self.fleet.slots[idx];
        // The statistics are updated in place, packed.
        let observed = self.model.observe_packed(
            &mut slot.stats,
            &mut self.fleet.overall,
            outcome,
            elapsed_ms,
            now_s,
            bucket,
        );
        if observed.recovered {
            self.pool.healed(now_s, self.model.config());
        }
        if observed.eject {
            let cap =
                (self.model.config().ejection.max_share * self.fleet.live_count as f64).floor();
            if (self.fleet.ejected_count as f64) < cap && slot.live {
                self.model.eject_packed(&mut slot.stats, now_s);
                self.out.counters.ejections += 1;
            }
        }
        if observed.recovered {
            self.heal_seen();
        }
        self.refresh_after_outcome(idx);
    }

    /// Releases an attempt's slot and says what the request does next.
    ///
    /// An attempt released with neither a report nor a first byte once the deadline advised
    /// with its grant ([`Grant::deadline_ms`]) has passed counts as a timeout: its caller gave
    /// up as advised without saying so (a permit dropped by a timeout around the whole call).
    /// Released sooner, or without advice, an unreported attempt leaves no trace.
    pub fn done<R: Rng + ?Sized>(
        &mut self,
        id: AttemptId,
        next: Next,
        now: Instant,
        rng: &mut R,
    ) -> Result<(), Error> {
        let a = self.attempts.index(id)?;
        self.advance(now);
        let att = self.attempts[a];
        // Given up on as advised, without a word (see above): the timeout it was.
        if !att.reported
            && !att.answered
            && (self.clock.now_s - att.granted_s) * 1000.0 >= att.advised_ms * ADVICE_TOLERANCE
        {
            self.time_out_unreported(a);
            self.out.counters.dropped_past_advice += 1;
            let idx = att.key.idx as usize;
            self.out.push(Event::TimedOut(Reported {
                request: RequestId::new(att.request, self.requests[att.request as usize].gen),
                candidate: self.fleet.infos[idx].id.clone(),
                arm: att.arm.map(usize::from),
            }));
        }
        self.release_attempt(a);
        let ridx = att.request;
        let next = if self.requests[ridx as usize].closed.is_some() {
            Next::Finish
        } else {
            next
        };
        if att.shed {
            self.pool.observe_shed(next != Next::Finish);
        }
        match next {
            Next::Finish => {
                self.drop_pending(ridx);
                self.requests[ridx as usize].keep_open = false;
            }
            Next::Retry | Next::Keep => {
                let r = &mut self.requests[ridx as usize];
                // The slot still holds the candidate's info: only an add reuses a slot.
                let id = &self.fleet.infos[att.key.idx as usize].id;
                r.extras.get_or_insert_with(Default::default).exclude(
                    Some(att.key),
                    id,
                    &mut self.excluding,
                );
                if next == Next::Keep {
                    r.keep_open = true;
                } else if r.pending + r.in_flight < r.parallelism {
                    r.pending += 1;
                    // It has exclusions now: it moves from the fast queue to the general one.
                    if r.queued == Queued::Fast {
                        self.queue.remove(r, ridx);
                    }
                    if self.fleet.has_eligible(self.requests[ridx as usize].set()) {
                        self.enqueue(ridx);
                    } else {
                        self.reject(ridx, Rejection::NoEligibleCandidate);
                    }
                }
            }
        }
        self.maybe_retire(ridx, CloseReason::Finished);
        self.pump(rng);
        Ok(())
    }

    /// Counts attempt `a`, which ends with no report, as a timeout after the time it ran:
    /// the lease taking it back, or its caller dropping it past its advised deadline.
    fn time_out_unreported(&mut self, a: usize) {
        let att = self.attempts[a];
        let timeout = Outcome::Failure(FailureClass::Timeout);
        let idx = att.key.idx as usize;
        if att.key.gen == self.fleet.slots[idx].gen {
            self.limit_observe(&att, &timeout, None);
            self.observe_shed(idx, att.concurrency, &timeout);
        }
        let elapsed_ms = (self.clock.now_s - att.granted_s) * 1000.0;
        self.apply_outcome(idx, &timeout, Some(elapsed_ms));
        // As a reported timeout: the request's next attempts are not advised.
        self.requests[att.request as usize].timed_out = true;
    }

    #[inline]
    pub(super) fn release_attempt(&mut self, a: usize) {
        let att = self.attempts.finish(a);
        let idx = att.key.idx as usize;
        self.fleet.slots[idx].in_flight -= 1;
        if self.fleet.slots[idx].live {
            self.limit_released(idx);
            self.refresh_load(idx);
        } else if self.fleet.slots[idx].in_flight == 0 {
            self.fleet.draining.remove(&self.fleet.infos[idx].id);
            self.fleet.free_slots.push(idx as u32);
        }
        self.requests[att.request as usize].in_flight -= 1;
    }

    /// Advances time: rejects requests past their deadline, reclaims attempts past the lease,
    /// refreshes scores when due, and grants what it can.
    pub fn tick<R: Rng + ?Sized>(&mut self, now: Instant, rng: &mut R) {
        self.advance(now);
        let now_ns = self.clock.now_ns;
        // A rejection takes the request, and its deadline, out of the queue.
        while let Some(idx) = self.queue.due(now_ns) {
            self.reject(idx, Rejection::DeadlinePassed);
        }
        if let Some(lease) = self.limits.max_attempt_s {
            let cutoff = self.clock.now_s - lease;
            // Oldest first, and only those past their lease.
            while let Some(a) = self.attempts.next_expired(cutoff) {
                let att = self.attempts[a];
                let req_gen = self.requests[att.request as usize].gen;
                if !att.reported {
                    self.time_out_unreported(a);
                }
                let candidate = self.fleet.infos[att.key.idx as usize].id.clone();
                self.release_attempt(a);
                self.out.counters.reclaimed += 1;
                self.out.push(Event::Reclaimed {
                    request: RequestId::new(att.request, req_gen),
                    attempt: AttemptId::new(a as u32, att.gen),
                    candidate,
                });
                self.maybe_retire(att.request, CloseReason::Reclaimed);
            }
        }
        if self.clock.now_s >= self.clock.next_refresh_s {
            self.dirty = true;
        }
        self.pump(rng);
    }

    /// The driver was stopped for `paused` (its process or machine paused or suspended: it
    /// saw its timer fire that late): the attempts running leave that time out of their
    /// elapsed times and leases, so the pause is neither measured as their candidates'
    /// latency nor reclaimed as their timeout. Call it before the call that follows the pause
    /// (which brings `now`); no grant time moves past `now`. Counted in
    /// [`Counters::pauses`](super::Counters::pauses). The actor calls it when a call finds the
    /// clock more than two seconds past both its timer's due time and its previous call to the
    /// core; a driver that calls the core at its own times has no such evidence and need not
    /// call it.
    pub fn driver_paused(&mut self, paused: std::time::Duration, now: Instant) {
        self.advance(now);
        if paused.is_zero() || self.attempts.in_flight() == 0 {
            return;
        }
        let (by_s, now_s) = (paused.as_secs_f64(), self.clock.now_s);
        self.attempts.shift_grants(by_s, now_s);
        self.adaptive.skip_pause(by_s, now_s);
        self.out.counters.pauses += 1;
    }

    /// The earliest deadline among waiting requests (for the driver's timer).
    pub fn next_deadline(&self) -> Option<Instant> {
        self.queue
            .first_deadline()
            .map(|d| self.clock.instant_at(d))
    }

    /// When the core next needs [`Core::tick`]: the earliest waiting deadline, the end of the
    /// oldest attempt's lease ([`Limits::max_attempt_s`]), the next periodic refresh (every
    /// `refresh_ms` of the config, a large fleet's stretched once it settles, up to
    /// [`Config::refresh_period_s`]) or the next scan of the attempts still running between
    /// two such refreshes (every `refresh_ms`), whichever comes first. Both also end
    /// ejections. A driver keeps one timer armed at this instant and reads it again after
    /// every call, since any call may move it.
    pub fn next_wakeup(&self) -> Instant {
        let refresh_s = self.clock.next_refresh_s.min(self.clock.next_scan_s);
        let refresh_ns = (refresh_s * 1e9).ceil() as u64;
        let due_ns = self
            .timed_due_ns()
            .map_or(refresh_ns, |d| d.min(refresh_ns));
        self.instant_after(due_ns)
    }

    /// The part of [`Core::next_wakeup`] that decides something at a set instant: the
    /// earliest waiting deadline or the end of the oldest attempt's lease, without the
    /// periodic refresh (`None`: neither). The simulator calls [`Core::tick`] then, as the
    /// actor's timer does.
    #[cfg_attr(not(feature = "sim"), allow(dead_code))]
    pub(crate) fn next_timed_wakeup(&self) -> Option<Instant> {
        self.timed_due_ns().map(|d| self.instant_after(d))
    }

    /// Nanoseconds since the epoch of the earliest waiting deadline or lease end. The
    /// float-to-integer cast saturates.
    fn timed_due_ns(&self) -> Option<u64> {
        // The oldest attempt's lease.
        let lease_ns = match (self.limits.max_attempt_s, self.attempts.oldest_grant_s()) {
            (Some(lease), Some(granted_s)) => Some(((granted_s + lease) * 1e9).ceil() as u64),
            _ => None,
        };
        match (self.queue.first_deadline(), lease_ns) {
            (Some(d), Some(l)) => Some(d.min(l)),
            (d, l) => d.or(l),
        }
    }

    /// The instant just after `due_ns` nanoseconds since the epoch: the ceilings and the
    /// microsecond after them make sure a `tick` at the instant returned finds the work due,
    /// whatever the rounding between seconds and nanoseconds.
    fn instant_after(&self, due_ns: u64) -> Instant {
        const MARGIN_NS: u64 = 1_000;
        let after = std::time::Duration::from_nanos(due_ns.saturating_add(MARGIN_NS));
        // Past what an `Instant` can hold (a refresh period of centuries): a year is as good.
        self.clock
            .epoch
            .checked_add(after)
            .unwrap_or_else(|| self.clock.epoch + std::time::Duration::from_secs(365 * 86_400))
    }
}

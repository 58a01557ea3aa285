//! The request lifecycle: arrival, asking again, finishing, cancelling, rejection and
//! retirement, and the wait queue the requests stand in.

#[allow(clippy::wildcard_imports)]
use super::*;

impl Core {
    /// A request arrives. Returns its id; its grant or rejection comes as an [`Event`].
    ///
    /// Errors (nothing is queued) for malformed requests: parallelism 0 or above
    /// `max_parallelism`, an empty eligible set, an unknown candidate in the eligible set, an
    /// eligible set naming fewer distinct candidates than the parallelism.
    pub fn ready<R: Rng + ?Sized>(
        &mut self,
        request: Request,
        now: Instant,
        rng: &mut R,
    ) -> Result<RequestId, Error> {
        request.validate()?;
        if request.parallelism > self.limits.max_parallelism {
            return Err(Error::InvalidRequest(format!(
                "parallelism {} exceeds max_parallelism {}",
                request.parallelism, self.limits.max_parallelism
            )));
        }
        let eligible = match &request.eligible {
            Eligible::All => None,
            Eligible::Only(ids) => {
                let mut keys = Vec::with_capacity(ids.len());
                for id in ids {
                    let k = self
                        .fleet
                        .key_of(id)
                        .ok_or_else(|| Error::UnknownCandidate(id.clone()))?;
                    if !keys.contains(&k) {
                        keys.push(k);
                    }
                }
                // Parallel attempts go to different candidates: more than the list names can
                // never all run.
                if (keys.len() as u64) < u64::from(request.parallelism) {
                    return Err(Error::InvalidRequest(format!(
                        "parallelism {} exceeds the {} distinct eligible candidates named",
                        request.parallelism,
                        keys.len()
                    )));
                }
                Some(keys)
            }
        };
        self.advance(now);
        // Most requests exclude nothing, need nothing and may use any candidate: no extras
        // then. Exclusions are kept by id as well, those no candidate has yet included, so
        // they hold for a candidate added under one later.
        let extras = if eligible.is_none()
            && request.exclude.is_empty()
            && request.capabilities.is_empty()
        {
            None
        } else {
            let mut x = Extras {
                eligible,
                caps: request.capabilities,
                ..Extras::default()
            };
            for id in &request.exclude {
                x.exclude(self.fleet.key_of(id), id, &mut self.excluding);
            }
            Some(Box::new(x))
        };
        let deadline_ns = self.clock.deadline_ns(request.deadline);
        let (idx, gen) = self.new_request_slot();
        let seq = self.queue.next_seq();
        let arm = self.assign_arm(request.key.as_deref(), rng);
        self.requests[idx as usize] = ReqSlot {
            gen,
            active: true,
            queued: Queued::No,
            keep_open: false,
            closed: None,
            pending: 0,
            in_flight: 0,
            parallelism: request.parallelism,
            seq,
            arrival_s: self.clock.now_s,
            deadline_ns,
            arm,
            attempts_left: request.attempts.map_or(NO_BUDGET, |n| {
                u16::try_from(n).unwrap_or(NO_BUDGET - 1).min(NO_BUDGET - 1)
            }),
            timed_out: false,
            extras,
        };
        let id = RequestId::new(idx, gen);
        if !self.fleet.has_eligible(self.requests[idx as usize].set()) {
            self.reject(idx, Rejection::NoEligibleCandidate);
            return Ok(id);
        }
        if deadline_ns <= self.clock.now_ns {
            self.reject(idx, Rejection::DeadlinePassed);
            return Ok(id);
        }
        self.requests[idx as usize].pending = request.parallelism;
        self.enqueue(idx);
        self.pump(rng);
        // `max_waiting` bounds the queue: a request granted at once never waited in it.
        let r = &self.requests[idx as usize];
        if r.active
            && r.gen == gen
            && r.queued != Queued::No
            && self.queue.len() > self.limits.max_waiting
        {
            self.reject(idx, Rejection::QueueFull);
        }
        Ok(id)
    }

    /// A free request slot (or a new one) and its next generation.
    #[inline]
    fn new_request_slot(&mut self) -> (u32, u32) {
        match self.free_requests.pop() {
            Some(i) => (i, self.requests[i as usize].gen.wrapping_add(1)),
            None => {
                let gen = self.first_request_gen;
                self.requests.push(ReqSlot {
                    gen,
                    ..ReqSlot::default()
                });
                (self.requests.len() as u32 - 1, gen)
            }
        }
    }

    /// Hands out request ids none of which `earlier` gave (a core replacing it after a
    /// restart): a caller still holding an id of the earlier core is told the request is
    /// unknown instead of reaching another caller's request with the same id. Call it on a
    /// core with no request yet.
    pub fn continue_request_ids(&mut self, earlier: &Core) {
        let last = earlier
            .requests
            .iter()
            .map(|r| r.gen)
            .chain([earlier.first_request_gen])
            .max()
            .unwrap_or(0);
        self.first_request_gen = self.first_request_gen.max(last.saturating_add(1));
    }

    /// Takes over an attempt a caller already runs on `candidate`, one this core did not grant
    /// (an earlier core's, before a restart): from now it holds a slot of the candidate and
    /// of the global limit until its [`Core::done`], whatever the limits (it is running
    /// already, so a limit it goes past only keeps the next grants back), and its outcome is
    /// learned as any other. It belongs to a request of its own that asks for nothing more:
    /// its `done` ends it (`Retry` and `Keep` are taken as `Finish`). Its lease
    /// ([`Limits::max_attempt_s`]) runs from now; `reported` says its outcome was given
    /// already (to the earlier core), so a lease that runs out counts no timeout for it.
    ///
    /// No event is told of the grant. Errors with [`Error::UnknownCandidate`] for a candidate
    /// this core does not have (then nothing is booked).
    pub fn carry(
        &mut self,
        candidate: &CandidateId,
        reported: bool,
        now: Instant,
    ) -> Result<AttemptId, Error> {
        let key = self
            .fleet
            .key_of(candidate)
            .ok_or_else(|| Error::UnknownCandidate(candidate.clone()))?;
        self.advance(now);
        let (idx, gen) = self.new_request_slot();
        let seq = self.queue.next_seq();
        self.requests[idx as usize] = ReqSlot {
            gen,
            active: true,
            closed: Some(CloseReason::Finished),
            parallelism: 1,
            seq,
            arrival_s: self.clock.now_s,
            deadline_ns: self.clock.deadline_ns(None),
            attempts_left: NO_BUDGET,
            ..ReqSlot::default()
        };
        let attempt = self.book(key, idx, None);
        self.requests[idx as usize].in_flight = 1;
        if reported {
            let a = attempt.index();
            self.attempts[a].reported = true;
        }
        self.out.counters.carried += 1;
        Ok(attempt)
    }

    pub(super) fn request_index(&self, id: RequestId) -> Result<u32, Error> {
        match self.requests.get(id.index()) {
            Some(r) if r.active && r.gen == id.generation() => Ok(id.index() as u32),
            _ => Err(Error::UnknownRequest(id)),
        }
    }

    /// Asks for one more attempt for an open request, excluding every candidate it tried.
    pub fn reask<R: Rng + ?Sized>(
        &mut self,
        id: RequestId,
        now: Instant,
        rng: &mut R,
    ) -> Result<(), Error> {
        let idx = self.request_index(id)?;
        self.advance(now);
        let r = &self.requests[idx as usize];
        if r.closed.is_some() {
            return Err(Error::InvalidRequest(format!(
                "request {id} was cancelled or rejected; make a new one"
            )));
        }
        if r.pending + r.in_flight >= r.parallelism {
            return Err(Error::InvalidRequest(format!(
                "request {id} already has {} attempts running or asked for (parallelism {})",
                r.pending + r.in_flight,
                r.parallelism
            )));
        }
        self.requests[idx as usize].pending += 1;
        if !self.fleet.has_eligible(self.requests[idx as usize].set()) {
            self.reject(idx, Rejection::NoEligibleCandidate);
            return Ok(());
        }
        self.enqueue(idx);
        self.pump(rng);
        Ok(())
    }

    /// The request is complete: its waiting asks are dropped (no event), and it ends once its
    /// running attempts are done.
    pub fn finish(&mut self, id: RequestId) -> Result<(), Error> {
        let idx = self.request_index(id)?;
        self.drop_pending(idx);
        self.requests[idx as usize].keep_open = false;
        self.maybe_retire(idx, CloseReason::Finished);
        Ok(())
    }

    /// Cancels a request: its waiting asks are rejected with [`Rejection::Cancelled`] (no event
    /// when nothing waits); its running attempts run to their end, and a later `Retry` for
    /// them finishes the request instead of asking again.
    pub fn cancel(&mut self, id: RequestId, now: Instant) -> Result<(), Error> {
        let idx = self.request_index(id)?;
        self.advance(now);
        let r = &mut self.requests[idx as usize];
        r.keep_open = false;
        r.closed.get_or_insert(CloseReason::Cancelled);
        if r.pending > 0 {
            // Someone waits for an answer: tell them.
            self.reject(idx, Rejection::Cancelled);
        } else {
            self.maybe_retire(idx, CloseReason::Cancelled);
        }
        Ok(())
    }

    #[inline]
    pub(super) fn enqueue(&mut self, idx: u32) {
        self.queue.push(&mut self.requests[idx as usize], idx);
    }

    /// Takes a request out of the queue and drops its pending asks.
    #[inline]
    pub(super) fn drop_pending(&mut self, idx: u32) {
        let r = &mut self.requests[idx as usize];
        self.queue.remove(r, idx);
        r.pending = 0;
    }

    pub(super) fn reject(&mut self, idx: u32, reason: Rejection) {
        self.drop_pending(idx);
        let r = &mut self.requests[idx as usize];
        r.keep_open = false;
        // The first reason sticks: a request cancelled or rejected once stays so.
        r.closed.get_or_insert(CloseReason::Rejected(reason));
        let id = RequestId::new(idx, r.gen);
        self.out.counters.rejections[Rejection::ALL
            .iter()
            .position(|x| *x == reason)
            .unwrap_or(0)] += 1;
        self.out.push(Event::Rejected {
            request: id,
            reason,
        });
        self.maybe_retire(idx, CloseReason::Finished);
    }

    /// Retires the request if nothing of it waits, runs or is kept open; `ended` says why
    /// when it was neither cancelled nor rejected (told as [`Event::Closed`] when asked for).
    #[inline]
    pub(super) fn maybe_retire(&mut self, idx: u32, ended: CloseReason) {
        let r = &mut self.requests[idx as usize];
        if r.active && r.pending == 0 && r.in_flight == 0 && !r.keep_open {
            r.active = false;
            if let Some(x) = r.extras.take() {
                for id in &x.excluded_ids {
                    unexclude(&mut self.excluding, id);
                }
            }
            self.free_requests.push(idx);
            let request = RequestId::new(idx, r.gen);
            let reason = r.closed.unwrap_or(ended);
            self.out.closed(request, reason);
        }
    }

    /// Rejects waiting requests that no longer have any candidate they may use.
    pub(super) fn reject_ineligible(&mut self) {
        // What could serve the parked requests changed: they are checked with the rest.
        self.queue.wake_all(&mut self.requests);
        let mut doomed: Vec<u32> = self
            .queue
            .general(0, u64::MAX)
            .map(|(_, idx)| idx)
            .filter(|&idx| !self.fleet.has_eligible(self.requests[idx as usize].set()))
            .collect();
        if !self.fleet.has_eligible(DrawSet::ALL) {
            doomed.extend(self.queue.fast(&self.requests));
        }
        for idx in doomed {
            self.reject(idx, Rejection::NoEligibleCandidate);
        }
    }
}

/// One open request fewer excludes `id`.
fn unexclude(excluding: &mut HashMap<CandidateId, u32>, id: &CandidateId) {
    if let Some(n) = excluding.get_mut(id) {
        *n -= 1;
        if *n == 0 {
            excluding.remove(id);
        }
    }
}

//! Output and read-only queries: events, records, explanations, views and invariants.

#[allow(clippy::wildcard_imports)]
use super::*;
use crate::decision::FilterNote;

impl Core {
    /// The next event, oldest first.
    #[inline]
    pub fn poll_event(&mut self) -> Option<Event> {
        self.out.poll()
    }

    /// Whether a request's end is told as [`Event::Closed`] (off by default). A driver that
    /// keeps something per request turns it on and forgets the request at that event, instead
    /// of following the request's transitions itself.
    pub fn set_close_events(&mut self, on: bool) {
        self.out.set_close_events(on);
    }

    /// Records a share of decisions (0 = none, the default; 1 = every decision; a rate
    /// outside `[0, 1]` is clamped to it, and one that is not a finite number records none).
    /// Sampling is a deterministic accumulator (no random number), and a recorded draw picks
    /// with the same probabilities as an unrecorded one, so recording never changes how often
    /// each candidate wins. It does change the sequence of winners of a seeded run: a recorded
    /// draw evaluates its candidates in full and reads the random numbers differently from a
    /// draw from the sum tree. Without the `decision-records` feature (on by default) nothing
    /// is ever recorded.
    pub fn set_record_rate(&mut self, rate: f64) {
        self.out.set_record_rate(rate);
    }

    /// The next decision record, oldest first.
    pub fn poll_record(&mut self) -> Option<DecisionRecord> {
        self.out.poll_record()
    }

    /// What a draw for `request` would do now, without granting anything: every candidate in
    /// the drawn set with components and probability, filters and fallbacks, and the winner a
    /// deterministic draw would take (otherwise the most probable candidate).
    ///
    /// With A/B arms, a request with a key ([`Request::with_key`]) is explained under its
    /// key's arm, as it would be drawn; one without a key is assigned an arm at random when
    /// it arrives, so it is explained under the top-level config (`arm` is `None`). When no
    /// candidate could take an attempt, the reason is [`DecisionReason::NoCandidate`] and the
    /// filters say what kept each candidate out.
    pub fn explain(&mut self, request: &Request, now: Instant) -> Result<DecisionRecord, Error> {
        request.validate()?;
        self.advance(now);
        self.refresh_due();
        let eligible = match &request.eligible {
            Eligible::All => None,
            Eligible::Only(ids) => Some(
                ids.iter()
                    .map(|id| {
                        self.fleet
                            .key_of(id)
                            .ok_or_else(|| Error::UnknownCandidate(id.clone()))
                    })
                    .collect::<Result<Vec<_>, _>>()?,
            ),
        };
        let exclude: Vec<Key> = request
            .exclude
            .iter()
            .filter_map(|id| self.fleet.key_of(id))
            .collect();
        let set = DrawSet {
            eligible: eligible.as_deref(),
            exclude: &exclude,
            caps: &request.capabilities,
            last: request.attempts == Some(1),
        };
        let arm = request
            .key
            .as_deref()
            .filter(|_| !self.arms.is_empty())
            .map(|k| self.arm_of_key(k) as usize);
        let model = arm.and_then(|a| self.arms.get(a)?.model.as_ref());
        // A query, not a draw: its own scratch space, so the draws' stays untouched.
        let mut ev = Evaluation::default();
        self.scoring()
            .evaluate_with(model, set, &mut ev, Detail::FilterNotes);
        if ev.keys.is_empty() {
            self.note_nothing_eligible(set, &mut ev);
        }
        let candidates = self.scoring().considered_with(model, &ev);
        // Ties go to the earliest added, as in a deterministic draw.
        let best = draw::most_probable(&self.fleet.slots, &ev.keys, &ev.probs)
            .map(|j| (candidates[j].id.clone(), candidates[j].probability));
        let deterministic = model
            .map_or(self.model.config(), |m| m.config())
            .deterministic;
        let record = DecisionRecord {
            time_s: self.clock.now_s,
            request: RequestId::new(u32::MAX, 0),
            attempt: None,
            reason: if candidates.is_empty() {
                DecisionReason::NoCandidate
            } else if deterministic {
                DecisionReason::Deterministic
            } else if !ev.fallbacks.is_empty() {
                DecisionReason::Fallback
            } else if candidates.len() == 1 {
                DecisionReason::OnlyChoice
            } else {
                DecisionReason::Draw
            },
            candidates,
            filters: ev.filters.clone(),
            fallbacks: ev.fallbacks.clone(),
            roll: None,
            winner: best.as_ref().map(|b| b.0.clone()),
            winner_probability: best.map(|b| b.1).unwrap_or(0.0),
            arm: arm.and_then(|a| self.arms.get(a)).map(|a| a.name.clone()),
            shadows: Vec::new(),
        };
        Ok(record)
    }

    /// Filter notes for an explanation whose drawn set came out empty: which candidates in
    /// the request's reach were excluded by it, lack a capability it requires, or are at
    /// their in-flight limit (a strict price limit has its own note already).
    fn note_nothing_eligible(&self, set: DrawSet<'_>, ev: &mut Evaluation) {
        let mut excluded = Vec::new();
        let mut lacking = Vec::new();
        let mut busy = Vec::new();
        for (i, s) in self.fleet.in_reach(set).filter(|(_, s)| s.usable) {
            let id = self.fleet.infos[i as usize].id.clone();
            if Fleet::excluded(set.exclude, i, s.gen) {
                excluded.push(id);
            } else if !self.fleet.caps_ok(i, set.caps) {
                lacking.push(id);
            } else if !s.available {
                busy.push(id);
            }
        }
        let caps = set.caps.join(", ");
        for (filter, removed, why) in [
            ("exclude", excluded, "excluded by the request".to_string()),
            (
                "capabilities",
                lacking,
                format!("lacks a required capability ({caps})"),
            ),
            ("limit", busy, "at its in-flight limit".to_string()),
        ] {
            if !removed.is_empty() {
                ev.filters.push(FilterNote {
                    filter: filter.to_string(),
                    removed,
                    why,
                });
            }
        }
        if ev.filters.is_empty() {
            ev.filters.push(FilterNote {
                filter: "candidates".to_string(),
                removed: Vec::new(),
                why: "no live candidate in the request's reach".to_string(),
            });
        }
    }

    /// Each candidate's probability of winning a draw for `request` now.
    pub fn probabilities(
        &mut self,
        request: &Request,
        now: Instant,
    ) -> Result<Vec<(CandidateId, f64)>, Error> {
        Ok(self
            .explain(request, now)?
            .candidates
            .into_iter()
            .map(|c| (c.id, c.probability))
            .collect())
    }

    /// Probability of `id` in the O(log n) tree for an unrestricted request (0 if it is not
    /// drawable); the tree path's own arithmetic, for checking it against [`Core::explain`].
    pub fn tree_probability(&self, id: &CandidateId) -> f64 {
        match self.fleet.index_of(id) {
            Some(idx) if self.fleet.slots[idx as usize].in_tree => {
                self.leaf_probability(idx as usize)
            }
            _ => 0.0,
        }
    }

    /// One candidate.
    pub fn candidate(&self, id: &CandidateId) -> Option<CandidateView<'_>> {
        self.fleet.index_of(id).map(|i| self.view(i as usize))
    }

    pub(super) fn view(&self, i: usize) -> CandidateView<'_> {
        let s = &self.fleet.slots[i];
        CandidateView {
            info: &self.fleet.infos[i],
            stats: s.stats.unpack(),
            components: self.components_of(i),
            in_flight: s.in_flight,
            limit: self.limit_of(s),
            ejected: s.ejected,
            removed: !s.live,
            adaptive: self.limit_state(i),
            limited: self.limited_count(i),
        }
    }

    /// Every candidate, including removed ones whose attempts are still running, in the order
    /// they were added.
    pub fn candidates(&self) -> impl Iterator<Item = CandidateView<'_>> + '_ {
        let mut order: Vec<usize> = (0..self.fleet.slots.len())
            .filter(|&i| self.fleet.slots[i].live || self.fleet.slots[i].in_flight > 0)
            .collect();
        order.sort_by_key(|&i| self.fleet.slots[i].added_seq);
        order.into_iter().map(|i| self.view(i))
    }

    /// Number of live candidates.
    pub fn candidate_count(&self) -> usize {
        self.fleet.live_count
    }

    /// Whether a request still exists (waiting, running, or kept open). Once false, every call
    /// naming it is refused with [`Error::UnknownRequest`].
    pub fn is_open(&self, id: RequestId) -> bool {
        self.request_index(id).is_ok()
    }

    /// Whether `id` is open and not closed (cancelled, rejected, carried over a restart):
    /// whether [`Next::Retry`](crate::Next::Retry) on its attempt would ask again. The actor
    /// asks it.
    #[cfg(feature = "actor")]
    pub(crate) fn takes_retry(&self, id: RequestId) -> bool {
        matches!(self.request_index(id), Ok(i) if self.requests[i as usize].closed.is_none())
    }

    /// Requests waiting for a slot.
    pub fn waiting(&self) -> usize {
        self.queue.len()
    }

    /// Attempts in flight.
    pub fn in_flight(&self) -> u32 {
        self.attempts.in_flight()
    }

    /// Open requests (waiting or running).
    pub fn open_requests(&self) -> usize {
        self.requests.len() - self.free_requests.len()
    }

    /// The limits in force.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// The scoring config in force.
    pub fn config(&self) -> &Config {
        self.model.config()
    }

    /// The share of each draw spread uniformly over the drawn set, as of the last refresh:
    /// the config's `floor`, less where at the current decision rate it would reach each
    /// candidate less than once per `floor_period_s` (docs/config.toml).
    pub fn floor_in_force(&self) -> f64 {
        self.model.floor()
    }

    /// The all-candidate averages.
    pub fn overall(&self) -> Overall {
        self.fleet.overall
    }

    /// The deadline advice's multiple of a candidate's first-byte average, as of the last
    /// refresh (`[deadline]`: from the fleet's first-byte spread and its queueing; `factor`
    /// before the fleet has answered); `None` while the advice is off.
    pub fn deadline_multiple(&self) -> Option<f64> {
        (self.model.config().deadline.factor > 0.0).then(|| self.scoring().deadline_multiple())
    }

    /// Counters of decisions, rejections, ejections and reclaimed attempts.
    pub fn counters(&self) -> Counters {
        self.out.counters
    }

    /// Seconds since the epoch, as far as the core has seen.
    pub fn now_s(&self) -> f64 {
        self.clock.now_s
    }

    /// The core's epoch (its `now` at construction).
    pub fn epoch(&self) -> Instant {
        self.clock.epoch
    }

    /// The request an attempt serves (`None` once the attempt is released or reclaimed).
    pub fn attempt_request(&self, id: AttemptId) -> Option<RequestId> {
        let a = self.attempts.index(id).ok()?;
        let r = self.attempts[a].request;
        Some(RequestId::new(r, self.requests[r as usize].gen))
    }

    /// How many asks of an open request wait for a slot (`None` for a request that ended or
    /// never was).
    pub fn waiting_asks(&self, id: RequestId) -> Option<u32> {
        let idx = self.request_index(id).ok()?;
        Some(self.requests[idx as usize].pending)
    }

    /// How many attempts of an open request are running (`None` for a request that ended or
    /// never was).
    pub fn running_attempts(&self, id: RequestId) -> Option<u32> {
        let idx = self.request_index(id).ok()?;
        Some(self.requests[idx as usize].in_flight)
    }

    /// Every attempt running now: its id, the candidate it runs on, and whether its outcome
    /// was reported (what [`Core::carry`] takes over in a new core after a restart).
    pub fn running(&self) -> impl Iterator<Item = (AttemptId, &CandidateId, bool)> + '_ {
        self.attempts
            .iter()
            .enumerate()
            .filter(|(_, a)| a.active)
            .map(|(i, a)| {
                (
                    AttemptId::new(i as u32, a.gen),
                    &self.fleet.infos[a.key.idx as usize].id,
                    a.reported,
                )
            })
    }

    /// The candidate an attempt runs on.
    pub fn attempt_candidate(&self, id: AttemptId) -> Option<&CandidateId> {
        let a = self.attempts.index(id).ok()?;
        Some(&self.fleet.infos[self.attempts[a].key.idx as usize].id)
    }

    /// The slot of the candidate an attempt runs on (a driver in this crate keeps its own
    /// table by slot instead of hashing the grant's id).
    #[cfg(feature = "sim")]
    #[inline]
    pub(crate) fn attempt_slot(&self, id: AttemptId) -> Option<usize> {
        let a = self.attempts.index(id).ok()?;
        Some(self.attempts[a].key.idx as usize)
    }

    /// The slot of a live candidate.
    #[cfg(feature = "sim")]
    pub(crate) fn candidate_slot(&self, id: &CandidateId) -> Option<usize> {
        self.fleet.index_of(id).map(|i| i as usize)
    }

    /// Whether a waiting request could be granted right now and has no reason to wait. After
    /// any call returns this is false: the core never leaves capacity unused (the
    /// no-stuck-request invariant, checked by the property tests), except for a request
    /// whose free candidates have no weight where a busy one has, which waits for that one's
    /// release (docs/scoring.md, "Waiting for a candidate worth it").
    pub fn any_servable_waiting(&self) -> bool {
        if self.attempts.in_flight() >= self.limits.global {
            return false;
        }
        let mut ev = crate::core::evaluate::Evaluation::default();
        let mut must_serve =
            |set| self.fleet.servable(set) && !self.scoring().may_wait(set, &mut ev);
        let fast_waiting = self.queue.fast(&self.requests).next().is_some();
        (fast_waiting && must_serve(DrawSet::ALL))
            || self
                .queue
                .general(0, u64::MAX)
                .map(|(_, idx)| idx)
                .chain(self.queue.parked_requests())
                .any(|idx| must_serve(self.requests[idx as usize].set()))
    }

    /// Waiting requests parked: found unservable (every candidate they may use is at its
    /// limit), and out of the pump's scans until one of those candidates gains capacity.
    /// Counted in [`Core::waiting`] too.
    pub fn parked(&self) -> usize {
        self.queue.parked()
    }

    /// When the next coarse refresh of every candidate is due (for tests: a driver arms its
    /// timer at [`Core::next_wakeup`], which also covers the scans between refreshes).
    #[doc(hidden)]
    pub fn next_refresh(&self) -> Instant {
        self.clock
            .instant_at((self.clock.next_refresh_s * 1e9).ceil() as u64)
    }

    /// Checks that removed candidates with attempts still running are listed for an add to
    /// take back (so no id is both present and removed), and that every open request's
    /// exclusions by id hold by key for the candidates present (part of
    /// [`Core::check_invariants`]).
    fn check_exclusions(&self) -> Result<(), String> {
        let draining = self
            .fleet
            .slots
            .iter()
            .filter(|s| !s.live && s.in_flight > 0)
            .count();
        if draining != self.fleet.draining.len()
            || self.fleet.draining.iter().any(|(id, &i)| {
                let s = &self.fleet.slots[i as usize];
                s.live
                    || s.in_flight == 0
                    || self.fleet.infos[i as usize].id != *id
                    || self.fleet.index_of(id).is_some()
            })
        {
            return Err(format!(
                "{draining} removed candidates still running, {} listed",
                self.fleet.draining.len()
            ));
        }
        let mut excluding: HashMap<&CandidateId, u32> = HashMap::new();
        for r in self.requests.iter().filter(|r| r.active) {
            let Some(x) = r.extras.as_deref() else {
                continue;
            };
            for id in &x.excluded_ids {
                *excluding.entry(id).or_insert(0) += 1;
                if let Some(k) = self.fleet.key_of(id) {
                    if !x.exclude.contains(&k) {
                        return Err(format!("a request excluding {id} may draw it"));
                    }
                }
            }
        }
        if excluding.len() != self.excluding.len()
            || excluding
                .iter()
                .any(|(id, n)| self.excluding.get(*id) != Some(n))
        {
            return Err("the count of requests excluding each id drifted".into());
        }
        Ok(())
    }

    /// Recomputes every counter from scratch and compares (for tests). Returns what differs.
    #[doc(hidden)]
    pub fn check_invariants(&self) -> Result<(), String> {
        let mut in_flight = 0u32;
        for (i, s) in self.fleet.slots.iter().enumerate() {
            let limit = self.limit_of(s);
            if s.live && s.in_flight > limit && s.available {
                return Err(format!("candidate {i} over its limit yet available"));
            }
            in_flight += s.in_flight;
            if !s.live && s.in_tree {
                return Err(format!("removed candidate {i} is drawable"));
            }
            if s.in_tree && s.in_flight >= limit {
                return Err(format!("candidate {i} at capacity is drawable"));
            }
        }
        if in_flight != self.attempts.in_flight() {
            return Err(format!(
                "in flight {} != sum over candidates {}",
                self.attempts.in_flight(),
                in_flight
            ));
        }
        let active_attempts = self.attempts.iter().filter(|a| a.active).count() as u32;
        if active_attempts != self.attempts.in_flight() {
            return Err("active attempts != in flight".into());
        }
        let avail = self.fleet.slots.iter().filter(|s| s.available).count();
        let avail_pass = self.fleet.slots.iter().filter(|s| s.in_tree).count();
        let usable = self.fleet.slots.iter().filter(|s| s.usable).count();
        if avail != self.fleet.avail
            || avail_pass != self.fleet.avail_pass
            || usable != self.fleet.usable_count
        {
            return Err(format!(
                "counters drifted: avail {avail}/{} pass {avail_pass}/{} usable {usable}/{}",
                self.fleet.avail, self.fleet.avail_pass, self.fleet.usable_count
            ));
        }
        let waiting = self
            .requests
            .iter()
            .filter(|r| r.active && r.queued != Queued::No)
            .count();
        if waiting != self.queue.len() {
            return Err(format!("waiting {} != queued {waiting}", self.queue.len()));
        }
        let parked = self
            .requests
            .iter()
            .filter(|r| r.active && r.queued == Queued::Parked)
            .count();
        if parked != self.queue.parked()
            || self
                .queue
                .parked_requests()
                .any(|i| self.requests[i as usize].queued != Queued::Parked)
        {
            return Err(format!(
                "{parked} requests parked, {} listed",
                self.queue.parked()
            ));
        }
        for r in self.requests.iter().filter(|r| r.active) {
            if r.pending + r.in_flight > r.parallelism {
                return Err("a request runs more than its parallelism".into());
            }
        }
        self.check_exclusions()?;
        let stale = self.fleet.slots.iter().filter(|s| s.stale).count();
        if stale != self.fleet.stale.len() {
            return Err(format!(
                "{stale} candidates flagged stale, {} listed",
                self.fleet.stale.len()
            ));
        }
        let uniform = self.model.uniform_channel();
        if (self.fleet.trees[uniform].total() - avail_pass as f64).abs() > 1e-6 {
            return Err("uniform tree total != drawable count".into());
        }
        Ok(())
    }
}

//! Adding, changing and removing candidates, and changing the config and the limits.

#[allow(clippy::wildcard_imports)]
use super::*;

impl Core {
    /// Adds a candidate. Errors if the id exists or a number in its info is unusable.
    pub fn add_candidate<R: Rng + ?Sized>(
        &mut self,
        info: CandidateInfo,
        now: Instant,
        rng: &mut R,
    ) -> Result<(), Error> {
        self.add_with_stats(info, Stats::default(), now, rng)
    }

    /// Adds a candidate with previously learned statistics (from a snapshot). Errors as
    /// [`Core::add_candidate`] does, and with [`Error::InvalidCandidate`] (field `stats.<name>`)
    /// if a statistic is unusable: an average NaN, infinite or negative (the success average
    /// above 1), a time not finite, more successes than attempts.
    pub fn add_with_stats<R: Rng + ?Sized>(
        &mut self,
        info: CandidateInfo,
        stats: Stats,
        now: Instant,
        rng: &mut R,
    ) -> Result<(), Error> {
        info.validate()?;
        if let Some((field, problem)) = stats.problem() {
            return Err(Error::InvalidCandidate {
                id: info.id,
                field: format!("stats.{field}"),
                problem,
            });
        }
        if self.fleet.index_of(&info.id).is_some() {
            return Err(Error::DuplicateCandidate(info.id));
        }
        self.advance(now);
        // A candidate removed while its attempts still ran comes back to its slot, of the
        // same generation: those attempts load the same backend, so its limits count them,
        // and their outcomes and the exclusions that name it by key are its own.
        let (idx, gen, in_flight) = match self.fleet.draining.remove(&info.id) {
            Some(i) => {
                let s = &self.fleet.slots[i as usize];
                (i, s.gen, s.in_flight)
            }
            None => match self.fleet.free_slots.pop() {
                Some(i) => (i, self.fleet.slots[i as usize].gen.wrapping_add(1), 0),
                None => (self.fleet.slots.len() as u32, 0, 0),
            },
        };
        self.fleet.stake_total += info.stake;
        let info_stake = info.stake;
        let slot = Slot {
            stats: PackedStats::pack(&stats),
            learned: Learned::default(),
            fixed: Fixed::default(),
            own_limit: info.max_in_flight.unwrap_or(0),
            adaptive_limit: UNLIMITED,
            in_flight,
            gen,
            added_seq: self.fleet.next_added,
            live: true,
            usable: false,
            available: false,
            perf_ok: true,
            price_ok: true,
            ejected: false,
            in_tree: false,
            // A reused slot may still be listed for the next draw's leaf writes.
            stale: self.fleet.slots.get(idx as usize).is_some_and(|s| s.stale),
        };
        self.fleet.next_added += 1;
        if idx as usize == self.fleet.slots.len() {
            if self.fleet.slots.len() == self.fleet.slots.capacity() {
                // A candidate takes about 400 bytes across these vectors: growing by a
                // sixteenth instead of doubling keeps the unused tail under 6.25 % (still
                // amortised O(1): each move copies at most 16 times what was added since).
                let more = (self.fleet.slots.len() / 16).max(16);
                self.fleet.slots.reserve_exact(more);
                self.fleet.infos.reserve_exact(more);
                self.fleet.load_fit.reserve_exact(more);
            }
            self.fleet.slots.push(slot);
            self.fleet.load_fit.push(LoadFit::default());
            self.fleet.infos.push(info);
        } else {
            self.fleet.slots[idx as usize] = slot;
            self.fleet.load_fit[idx as usize] = LoadFit::default();
            self.fleet.infos[idx as usize] = info;
        }
        self.fleet.feedback.reset(idx as usize);
        self.fleet.by_id.insert(&self.fleet.infos, idx);
        self.limit_added(idx as usize);
        self.fleet.live_count += 1;
        self.fleet_resized();
        self.refresh_static(idx as usize);
        self.refresh_leaf(idx as usize);
        self.stake_moved(info_stake != 0.0);
        self.exclude_added(Key { idx, gen });
        // A request parked for want of a candidate with its capabilities may take this one.
        self.queue.wake_all(&mut self.requests);
        self.pump(rng);
        Ok(())
    }

    /// The candidate just added under `key` is excluded, by that key, from the open requests
    /// that exclude its id: one they named before it was present, or one removed and added
    /// again after they tried it.
    fn exclude_added(&mut self, key: Key) {
        let id = &self.fleet.infos[key.idx as usize].id;
        if !self.excluding.contains_key(id) {
            return;
        }
        for r in self.requests.iter_mut().filter(|r| r.active) {
            if let Some(x) = r.extras.as_deref_mut() {
                if x.excluded_ids.contains(id) && !x.exclude.contains(&key) {
                    x.exclude.push(key);
                }
            }
        }
    }

    /// A candidate's stake came, went or changed (`moved`): where stake is scored, every
    /// candidate's share of the total moved, so the next draw refreshes them all.
    fn stake_moved(&mut self, moved: bool) {
        if moved && self.model.config().weights.stake > 0.0 {
            self.dirty = true;
        }
    }

    /// Makes room for `additional` more candidates at once, so adding a large fleet one by one
    /// does not grow (and copy) the per-candidate tables many times over. Changes nothing else.
    pub fn reserve_candidates(&mut self, additional: usize) {
        let f = &mut self.fleet;
        let more = additional.saturating_sub(f.slots.capacity() - f.slots.len());
        f.slots.reserve_exact(more);
        f.infos.reserve_exact(more);
        f.load_fit.reserve_exact(more);
    }

    /// Replaces a candidate's static info (statistics are kept).
    pub fn update_candidate<R: Rng + ?Sized>(
        &mut self,
        info: CandidateInfo,
        now: Instant,
        rng: &mut R,
    ) -> Result<(), Error> {
        info.validate()?;
        let idx = self
            .fleet
            .index_of(&info.id)
            .ok_or_else(|| Error::UnknownCandidate(info.id.clone()))? as usize;
        self.advance(now);
        let stake_moved = info.stake != self.fleet.infos[idx].stake;
        self.fleet.stake_total += info.stake - self.fleet.infos[idx].stake;
        self.fleet.infos[idx] = info;
        self.refresh_static(idx);
        self.refresh_leaf(idx);
        // Only the stake component reads other candidates' info; the rest of the fleet-wide
        // figures follow at the next coarse refresh, as after an add (a refresh of every
        // candidate here would cost O(n) per update: milliseconds in a large fleet).
        self.stake_moved(stake_moved);
        self.reject_ineligible();
        self.pump(rng);
        Ok(())
    }

    /// Removes a candidate. Attempts on it run to their end and report; it is never granted
    /// again. Waiting requests left with no candidate are rejected. Added again under its id
    /// while those attempts run, it takes their slot back with the statistics it is given:
    /// its limits count them, and their outcomes are its own. Requests that exclude or tried
    /// it keep it excluded either way.
    pub fn remove_candidate<R: Rng + ?Sized>(
        &mut self,
        id: &CandidateId,
        now: Instant,
        rng: &mut R,
    ) -> Result<(), Error> {
        let idx = self
            .fleet
            .by_id
            .remove(&self.fleet.infos, id.as_str())
            .ok_or_else(|| Error::UnknownCandidate(id.clone()))? as usize;
        self.advance(now);
        self.fleet.stake_total -= self.fleet.infos[idx].stake;
        self.fleet.slots[idx].live = false;
        self.fleet.live_count -= 1;
        self.fleet_resized();
        self.refresh_static(idx);
        self.refresh_leaf(idx);
        if self.fleet.slots[idx].in_flight == 0 {
            self.fleet.free_slots.push(idx as u32);
        } else {
            self.fleet.draining.insert(id.clone(), idx as u32);
        }
        // As for an update: only a stake share moves for the others at once.
        self.stake_moved(self.fleet.infos[idx].stake != 0.0);
        self.reject_ineligible();
        self.pump(rng);
        Ok(())
    }

    /// Replaces the scoring config (hot reload): statistics, waiting requests and attempts are
    /// kept; an invalid config is refused and the old one stays.
    pub fn set_config<R: Rng + ?Sized>(
        &mut self,
        config: Config,
        now: Instant,
        rng: &mut R,
    ) -> Result<(), Error> {
        let model = ScoreModel::new(config)?;
        self.advance(now);
        let old_window = self.model.config().window.clone();
        let old_arms: Vec<String> = self.arm_names().into_iter().map(String::from).collect();
        let old = std::mem::replace(&mut self.model, model);
        if let Err(e) = self.build_variants() {
            self.model = old;
            self.build_variants()?;
            return Err(e);
        }
        self.remap_arms(&old_arms, rng);
        self.limits_reconfigured();
        let window = self.model.config().window.clone();
        let from = self.clock.bucket();
        self.clock.derive(window.bucket_s); // the width may have changed
        let to = self.clock.bucket();
        if window.bucket_s != old_window.bucket_s {
            // Buckets are numbered by their width: each window keeps its buckets as far back
            // as they were, or outcomes would land in buckets it takes for the past.
            let (from_n, to_n) = (old_window.buckets as usize, window.buckets as usize);
            for slot in &mut self.fleet.slots {
                slot.stats.rebase_window(from, from_n, to, to_n);
            }
        }
        self.rebuild_trees();
        self.reject_ineligible();
        self.pump(rng);
        Ok(())
    }

    /// Changes the limits. Raising one grants immediately.
    pub fn set_limits<R: Rng + ?Sized>(
        &mut self,
        limits: Limits,
        now: Instant,
        rng: &mut R,
    ) -> Result<(), Error> {
        limits.validate()?;
        self.advance(now);
        let per_candidate_changed = limits.per_candidate != self.limits.per_candidate;
        self.limits = limits;
        self.attempts.keep_leases(limits.max_attempt_s.is_some());
        if per_candidate_changed {
            self.refresh_all();
        }
        self.queue.wake_all(&mut self.requests);
        self.pump(rng);
        Ok(())
    }
}

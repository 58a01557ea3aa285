//! The id -> slot index: a hash table of slot numbers that hashes and compares through the
//! ids in the core's candidate infos, so each entry is four bytes instead of a second copy of
//! the id.

use std::hash::{BuildHasher, RandomState};

use hashbrown::HashTable;

use super::CandidateInfo;

/// Maps a live candidate's id to its slot. Every entry's id is `infos[entry].id`.
#[derive(Debug, Default)]
pub(crate) struct IdIndex {
    table: HashTable<u32>,
    state: RandomState,
}

impl IdIndex {
    fn hash(&self, id: &str) -> u64 {
        self.state.hash_one(id)
    }

    /// The slot of `id`, if it is live.
    pub(crate) fn get(&self, infos: &[CandidateInfo], id: &str) -> Option<u32> {
        self.table
            .find(self.hash(id), |&i| infos[i as usize].id.as_str() == id)
            .copied()
    }

    /// Indexes slot `idx` under `infos[idx].id` (which must not be indexed already).
    pub(crate) fn insert(&mut self, infos: &[CandidateInfo], idx: u32) {
        let h = self.hash(infos[idx as usize].id.as_str());
        let state = &self.state;
        self.table
            .insert_unique(h, idx, |&i| state.hash_one(infos[i as usize].id.as_str()));
    }

    /// Removes `id`, returning its slot.
    pub(crate) fn remove(&mut self, infos: &[CandidateInfo], id: &str) -> Option<u32> {
        let h = self.hash(id);
        self.table
            .find_entry(h, |&i| infos[i as usize].id.as_str() == id)
            .ok()
            .map(|e| e.remove().0)
    }
}

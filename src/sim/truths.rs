//! Every candidate's [`Truth`], one copy per scenario entry until a candidate's own changes.
//!
//! A scenario entry with `count = n` gives `n` candidates the same truth. Kept once per
//! candidate, a fleet of 10,000 holds 10,000 copies of it, and each attempt reads its
//! candidate's copy from a table larger than the cache. Here the candidates of one entry read
//! one shared copy; a `degrade` event gives its candidate a copy of its own to change (made at
//! its first change and reused after, so a candidate never holds more than one), and a `heal`
//! points it back at its entry's copy, which no event ever changes. Each candidate reads the
//! same values as with a copy of its own.

use std::ops::Index;

use super::scenario::{CandidateSpec, TimelineEvent};
use super::truth::Truth;

/// No copy of its own yet.
const NONE: u32 = u32::MAX;

/// The candidates' truths; see the [module docs](self).
#[derive(Debug)]
pub(crate) struct Truths {
    /// The scenario entries' truths (index = entry), then the candidates' own copies.
    table: Vec<Truth>,
    /// The copy each candidate reads now.
    of: Vec<u32>,
    /// Each candidate's scenario entry.
    base: Vec<u32>,
    /// Each candidate's own copy ([`NONE`] before its first change).
    own: Vec<u32>,
}

impl Truths {
    /// The truths of the candidates whose scenario entries (indices into `specs`) are
    /// `entry_of`, in that order (as [`Scenario::expanded`](super::Scenario::expanded) lists
    /// them), each as its entry in the file says.
    pub(crate) fn new(specs: &[CandidateSpec], entry_of: &[usize]) -> Self {
        let table: Vec<Truth> = specs.iter().map(Truth::from_spec).collect();
        let base: Vec<u32> = entry_of.iter().map(|&s| s as u32).collect();
        Truths {
            table,
            of: base.clone(),
            own: vec![NONE; base.len()],
            base,
        }
    }

    /// Number of candidates.
    pub(crate) fn len(&self) -> usize {
        self.of.len()
    }

    /// Each candidate's truth, in candidate order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &Truth> + '_ {
        self.of.iter().map(|&i| &self.table[i as usize])
    }

    /// Applies a `degrade` event to candidate `c`'s truth alone.
    pub(crate) fn degrade(&mut self, c: usize, ev: &TimelineEvent) {
        self.own_mut(c).degrade(ev);
    }

    /// Candidate `c`'s truth back to its entry in the file.
    pub(crate) fn heal(&mut self, c: usize) {
        self.of[c] = self.base[c];
    }

    /// Candidate `c`'s own copy, holding what it reads now, to change.
    fn own_mut(&mut self, c: usize) -> &mut Truth {
        if self.of[c] != self.own[c] {
            let now = self.table[self.of[c] as usize].clone();
            if self.own[c] == NONE {
                self.own[c] = self.table.len() as u32;
                self.table.push(now);
            } else {
                self.table[self.own[c] as usize] = now;
            }
            self.of[c] = self.own[c];
        }
        &mut self.table[self.of[c] as usize]
    }
}

impl Index<usize> for Truths {
    type Output = Truth;

    /// Candidate `c`'s truth now.
    #[inline]
    fn index(&self, c: usize) -> &Truth {
        &self.table[self.of[c] as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::Scenario;

    fn scenario() -> Scenario {
        Scenario::parse(
            "name = \"t\"\n[workload]\nloop = \"open\"\nrate_per_s = 10\nduration_s = 1\n\
             [[candidates]]\nid = \"a\"\ncount = 3\nsuccess = 1.0\nduration_ms = 10.0\n\
             [[candidates]]\nid = \"b\"\nsuccess = 1.0\nduration_ms = 40.0\n\
             [[timeline]]\nat_s = 0.5\ncandidate = \"a-2\"\naction = \"degrade\"\n\
             duration_ms = 300.0\n",
            "test",
        )
        .expect("a valid scenario")
    }

    /// A truth's fields, read through its `Debug` form (they are private to the truth's
    /// module).
    fn debug(t: &Truth) -> String {
        format!("{t:?}")
    }

    /// A degrade changes its candidate alone, repeated degrades and heals reuse the one own
    /// copy, and a heal gives back the file's values, as a copy per candidate would.
    #[test]
    fn a_change_stays_with_its_candidate_and_a_heal_restores_the_file() {
        let sc = scenario();
        let entries: Vec<usize> = sc.expanded().iter().map(|(_, s)| *s).collect();
        let mut truths = Truths::new(&sc.candidates, &entries);
        let each: Vec<Truth> = sc
            .expanded()
            .iter()
            .map(|(_, s)| Truth::from_spec(&sc.candidates[*s]))
            .collect();
        assert_eq!(truths.len(), 4);
        let same =
            |t: &Truths, each: &[Truth]| t.iter().zip(each).all(|(a, b)| debug(a) == debug(b));
        assert!(same(&truths, &each));
        let ev = &sc.timeline[0];
        let mut expected = each.clone();
        for round in 0..3 {
            truths.degrade(1, ev);
            expected[1].degrade(ev);
            assert!(same(&truths, &expected), "round {round}, degraded");
            assert_ne!(debug(&truths[1]), debug(&truths[0]));
            truths.heal(1);
            expected[1] = each[1].clone();
            assert!(same(&truths, &expected), "round {round}, healed");
        }
        // Two entries in the file, one own copy for the candidate that changed.
        assert_eq!(truths.table.len(), 3);
        // Two degrades in a row compound on the own copy, as on a copy per candidate.
        truths.degrade(0, ev);
        truths.degrade(0, ev);
        expected[0].degrade(ev);
        expected[0].degrade(ev);
        assert!(same(&truths, &expected));
        assert_eq!(truths.table.len(), 4);
    }
}

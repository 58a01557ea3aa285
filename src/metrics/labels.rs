//! Candidate label values: sanitized, unique, capped, and freed once their candidate is gone.

use std::collections::{HashMap, HashSet};

use metrics::SharedString;

use super::{names, MAX_LABEL_LEN};
use crate::core::CandidateId;

/// Turns a candidate id into a label value Prometheus and dashboards handle well.
///
/// Control characters become `_`, the value is cut to [`MAX_LABEL_LEN`] bytes on a character
/// boundary, an empty id becomes `_`, and `other` (reserved for the overflow) becomes `other_`.
pub fn sanitize_label(id: &str) -> String {
    let mut out = String::with_capacity(id.len().min(MAX_LABEL_LEN));
    for c in id.chars() {
        let c = if c.is_control() { '_' } else { c };
        if out.len() + c.len_utf8() > MAX_LABEL_LEN {
            break;
        }
        out.push(c);
    }
    if out.is_empty() {
        out.push('_');
    }
    if out == names::OTHER {
        out.push('_');
    }
    out
}

/// `base` with the suffix `~n` that tells apart names whose labels would be the same, the
/// base cut on a character boundary so the whole stays within [`MAX_LABEL_LEN`] bytes.
fn suffixed(base: &str, n: usize) -> String {
    let suffix = format!("~{n}");
    let mut end = MAX_LABEL_LEN.saturating_sub(suffix.len()).min(base.len());
    while !base.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}{suffix}", &base[..end])
}

/// `name`'s label: sanitized, and told apart by a suffix from every label in `used`, to
/// which it is added.
fn unique_label(name: &str, used: &mut HashSet<SharedString>) -> SharedString {
    let base = sanitize_label(name);
    let mut label = SharedString::from(base.clone());
    let mut n = 2;
    while used.contains(&label) {
        label = SharedString::from(suffixed(&base, n));
        n += 1;
    }
    used.insert(label.clone());
    label
}

/// Label values for a list of names (arms, shadows), in order: sanitized as candidate ids
/// are, and unique as theirs are, so two names that sanitize alike (the same first 64 bytes,
/// a tab against a newline) are not summed under one label.
pub(super) fn unique_labels<'a>(names: impl IntoIterator<Item = &'a str>) -> Vec<SharedString> {
    let mut used = HashSet::new();
    names
        .into_iter()
        .map(|name| unique_label(name, &mut used))
        .collect()
}

/// Gauge ticks a removed candidate keeps its label before the label is freed for another
/// candidate (outcomes of its last attempts may still arrive meanwhile).
pub const LABEL_RETIRE_TICKS: u64 = 3;

/// Maps candidate ids to capped, sanitized, unique label values.
///
/// A label is freed once its candidate has been absent from [`LABEL_RETIRE_TICKS`] gauge ticks
/// in a row and nothing was recorded under it meanwhile, so a fleet that replaces its
/// candidates keeps labelling the new ones instead of filling the cap with the departed.
#[derive(Debug)]
pub(super) struct CandidateLabels {
    cap: usize,
    labels: HashMap<CandidateId, Assigned>,
    used: HashSet<SharedString>,
    /// Gauge ticks so far.
    tick: u64,
}

/// A candidate's label and the last gauge tick that saw it (or recorded something under it).
#[derive(Debug)]
struct Assigned {
    label: SharedString,
    seen: u64,
}

impl CandidateLabels {
    pub(super) fn new(cap: usize) -> Self {
        CandidateLabels {
            cap,
            labels: HashMap::new(),
            used: HashSet::new(),
            tick: 0,
        }
    }

    /// The label of `id`, assigning one while fewer than `cap` are assigned.
    pub(super) fn get(&mut self, id: &CandidateId) -> SharedString {
        if let Some(a) = self.labels.get_mut(id) {
            a.seen = self.tick;
            return a.label.clone();
        }
        if self.labels.len() >= self.cap {
            return SharedString::const_str(names::OTHER);
        }
        let label = unique_label(id.as_str(), &mut self.used);
        self.labels.insert(
            id.clone(),
            Assigned {
                label: label.clone(),
                seen: self.tick,
            },
        );
        label
    }

    /// Starts a gauge tick: every label the tick does not touch ages by one.
    pub(super) fn start_tick(&mut self) {
        self.tick += 1;
    }

    /// Frees the labels untouched for [`LABEL_RETIRE_TICKS`] ticks (call after a tick's walk).
    pub(super) fn retire_absent(&mut self) {
        let tick = self.tick;
        let used = &mut self.used;
        self.labels.retain(|_, a| {
            let keep = tick - a.seen < LABEL_RETIRE_TICKS;
            if !keep {
                used.remove(&a.label);
            }
            keep
        });
    }

    /// How many candidates hold a label.
    pub(super) fn len(&self) -> usize {
        self.labels.len()
    }

    pub(super) fn is_other(label: &SharedString) -> bool {
        label.as_ref() == names::OTHER
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_sanitize_alike_get_distinct_labels_within_the_length_cap() {
        let long = "x".repeat(70);
        let longer = format!("{long}y");
        let labels = unique_labels([
            "s\n1",
            "s\t1",
            long.as_str(),
            longer.as_str(),
            "é".repeat(40).as_str(),
        ]);
        let texts: Vec<&str> = labels.iter().map(|l| l.as_ref()).collect();
        assert_eq!(texts[0], "s_1");
        assert_eq!(texts[1], "s_1~2");
        assert_eq!(texts[2], "x".repeat(MAX_LABEL_LEN));
        assert_eq!(texts[3], format!("{}~2", "x".repeat(MAX_LABEL_LEN - 2)));
        assert!(texts.iter().all(|t| t.len() <= MAX_LABEL_LEN));
        let distinct: HashSet<&str> = texts.iter().copied().collect();
        assert_eq!(distinct.len(), texts.len());
        // A cut never splits a character.
        assert_eq!(
            suffixed(&"é".repeat(32), 2),
            format!("{}~2", "é".repeat(31))
        );
    }

    #[test]
    fn a_candidate_label_with_a_suffix_stays_within_the_length_cap() {
        let mut labels = CandidateLabels::new(10);
        let a = CandidateId::new(format!("{}a", "p".repeat(64)));
        let b = CandidateId::new(format!("{}b", "p".repeat(64)));
        let (la, lb) = (labels.get(&a), labels.get(&b));
        assert_ne!(la, lb);
        assert!(
            la.len() <= MAX_LABEL_LEN && lb.len() <= MAX_LABEL_LEN,
            "{lb}"
        );
    }
}

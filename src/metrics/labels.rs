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
        let base = sanitize_label(id.as_str());
        let mut label = SharedString::from(base.clone());
        let mut n = 2;
        while self.used.contains(&label) {
            label = SharedString::from(format!("{base}~{n}"));
            n += 1;
        }
        self.used.insert(label.clone());
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

//! Decision records: why each candidate won.
//!
//! A record is built only when someone asks (see [`crate::core::Core::set_record_rate`]); the
//! hot path pays nothing otherwise.

use serde::{Deserialize, Serialize};

use crate::score::Components;
use crate::vocab::{AttemptId, CandidateId, RequestId};

/// How a decision was made.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DecisionReason {
    /// A weighted draw among several candidates.
    Draw,
    /// Only one candidate could take the attempt.
    OnlyChoice,
    /// Deterministic mode: the most probable candidate.
    Deterministic,
    /// A filter let nothing through and its fallback was taken before the draw.
    Fallback,
    /// Only in an explanation ([`crate::core::Core::explain`]): no candidate could take an
    /// attempt now; its filter notes say what kept each one out. A grant never has it.
    NoCandidate,
}

impl DecisionReason {
    /// A short stable label, used in metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            DecisionReason::Draw => "draw",
            DecisionReason::OnlyChoice => "only_choice",
            DecisionReason::Deterministic => "deterministic",
            DecisionReason::Fallback => "fallback",
            DecisionReason::NoCandidate => "no_candidate",
        }
    }

    /// Every reason a grant can have.
    pub const ALL: [DecisionReason; 4] = [
        DecisionReason::Draw,
        DecisionReason::OnlyChoice,
        DecisionReason::Deterministic,
        DecisionReason::Fallback,
    ];
}

/// One candidate as the draw saw it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ConsideredCandidate {
    /// The candidate.
    pub id: CandidateId,
    /// Its components, each in [0, 1].
    pub components: Components,
    /// The weighted sum of components.
    pub score: f64,
    /// Its weight in the draw (sum mode: score ^ exponent).
    pub weight: f64,
    /// Its probability of winning this draw.
    pub probability: f64,
    /// Its in-flight limit in force (the lower of the static and the learned one); `None`
    /// for unlimited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
    /// The deadline a grant to it advises, ms ([`crate::Grant::deadline_ms`]), to an attempt
    /// that may be advised (the only one of its request in flight, none of whose attempts
    /// timed out, and not its last); `None` without advice.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline_ms: Option<f64>,
}

/// What one filter removed, and why.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FilterNote {
    /// `perf`, `price` or `ejection`.
    pub filter: String,
    /// The candidates it removed.
    pub removed: Vec<CandidateId>,
    /// Why, e.g. `perf score in FRA below 0.8`.
    pub why: String,
}

/// A filter whose panic fallback was taken: it would have removed everything, so it was ignored.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Fallback {
    /// The filter.
    pub filter: String,
    /// What happened instead.
    pub action: String,
}

/// Everything about one decision.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DecisionRecord {
    /// Seconds since the coordinator's epoch.
    pub time_s: f64,
    /// The request served.
    pub request: RequestId,
    /// The attempt granted (absent in a dry run such as `selcoord explain`).
    pub attempt: Option<AttemptId>,
    /// How the winner was chosen.
    pub reason: DecisionReason,
    /// Every candidate in the drawn set.
    pub candidates: Vec<ConsideredCandidate>,
    /// What each filter removed.
    pub filters: Vec<FilterNote>,
    /// Fallbacks taken.
    pub fallbacks: Vec<Fallback>,
    /// The uniform roll in [0, 1) (absent in deterministic mode).
    pub roll: Option<f64>,
    /// The winner.
    pub winner: Option<CandidateId>,
    /// The winner's probability.
    pub winner_probability: f64,
    /// The arm (policy variant) that made the decision, when arms are configured.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub arm: Option<String>,
    /// What each sampled shadow policy would have done.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub shadows: Vec<ShadowVerdict>,
}

/// A shadow policy's view of one live decision.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ShadowVerdict {
    /// The shadow's name.
    pub name: String,
    /// What it would have picked with the same roll.
    pub choice: Option<CandidateId>,
    /// Whether that is the live winner.
    pub agreed: bool,
    /// The probability it gave the live winner.
    pub winner_probability: f64,
}

/// One line for a log: the request, the winner with its probability and how it was chosen,
/// the drawn set's size and the most probable others, and the filters' and fallbacks' notes.
///
/// ```text
/// r0.1: fast-1 won (draw, p 0.412, roll 0.187) of 6; next fast-0 0.398, steady 0.102; ejection removed 1 (4 failures in a row)
/// ```
impl std::fmt::Display for DecisionRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}: ", self.request)?;
        match &self.winner {
            Some(w) => write!(f, "{w} won")?,
            None => write!(f, "no winner")?,
        }
        write!(
            f,
            " ({}, p {:.3}",
            self.reason.as_str(),
            self.winner_probability
        )?;
        if let Some(roll) = self.roll {
            write!(f, ", roll {roll:.3}")?;
        }
        if let Some(arm) = &self.arm {
            write!(f, ", arm {arm}")?;
        }
        write!(f, ") of {}", self.candidates.len())?;
        let mut others: Vec<&ConsideredCandidate> = self
            .candidates
            .iter()
            .filter(|c| Some(&c.id) != self.winner.as_ref())
            .collect();
        others.sort_by(|a, b| b.probability.total_cmp(&a.probability));
        for (i, c) in others.iter().take(2).enumerate() {
            let sep = if i == 0 { "; next " } else { ", " };
            write!(f, "{sep}{} {:.3}", c.id, c.probability)?;
        }
        for n in &self.filters {
            write!(f, "; {} removed {} ({})", n.filter, n.removed.len(), n.why)?;
        }
        for fb in &self.fallbacks {
            write!(f, "; {} fallback: {}", fb.filter, fb.action)?;
        }
        Ok(())
    }
}

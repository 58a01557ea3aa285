//! Candidate identity and static information.

use serde::{Deserialize, Serialize};
use smol_str::SmolStr;
use std::collections::BTreeMap;
use std::fmt;

use crate::error::Error;

/// The name of a candidate (a provider, server, orchestrator). Cheap to clone: names of up to
/// 23 bytes are stored inline (a clone is a copy, with no shared counter to touch), longer ones
/// behind a reference count.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, Default)]
#[serde(transparent)]
pub struct CandidateId(SmolStr);

impl CandidateId {
    /// Creates an id from any string.
    pub fn new(id: impl AsRef<str>) -> Self {
        CandidateId(SmolStr::new(id.as_ref()))
    }

    /// The id as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for CandidateId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", &*self.0)
    }
}

impl fmt::Display for CandidateId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&str> for CandidateId {
    fn from(s: &str) -> Self {
        CandidateId::new(s)
    }
}

impl From<String> for CandidateId {
    fn from(s: String) -> Self {
        CandidateId(SmolStr::from(s))
    }
}

impl AsRef<str> for CandidateId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl std::borrow::Borrow<str> for CandidateId {
    fn borrow(&self) -> &str {
        &self.0
    }
}

/// What is known about a candidate before any attempt runs against it.
///
/// Everything is optional except the id; the scoring model only uses what its config weighs.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CandidateInfo {
    /// Unique name.
    pub id: CandidateId,
    /// Free-form tags such as `verified` or `fast-retrieval`, weighed by `tag_weights`.
    pub tags: Vec<String>,
    /// Stake (Livepeer-style); the stake component is this candidate's share.
    pub stake: f64,
    /// Price per unit of work; scored as `exp(-price / price.exp_factor)`.
    pub price: f64,
    /// Performance scores by region, checked by the minimum-perf-score filter.
    pub perf_scores: BTreeMap<String, f64>,
    /// Capabilities this candidate offers; a request may require some.
    pub capabilities: Vec<String>,
    /// This candidate's own in-flight limit, overriding the per-candidate default.
    pub max_in_flight: Option<u32>,
}

impl CandidateInfo {
    /// A candidate with only an id.
    pub fn new(id: impl Into<CandidateId>) -> Self {
        CandidateInfo {
            id: id.into(),
            ..Default::default()
        }
    }

    /// Adds a tag (builder style).
    pub fn with_tag(mut self, tag: impl Into<String>) -> Self {
        self.tags.push(tag.into());
        self
    }

    /// Sets the stake (builder style).
    pub fn with_stake(mut self, stake: f64) -> Self {
        self.stake = stake;
        self
    }

    /// Sets the price (builder style).
    pub fn with_price(mut self, price: f64) -> Self {
        self.price = price;
        self
    }

    /// Sets a regional perf score (builder style).
    pub fn with_perf_score(mut self, region: impl Into<String>, score: f64) -> Self {
        self.perf_scores.insert(region.into(), score);
        self
    }

    /// Adds a capability (builder style).
    pub fn with_capability(mut self, cap: impl Into<String>) -> Self {
        self.capabilities.push(cap.into());
        self
    }

    /// Sets this candidate's own in-flight limit (builder style).
    pub fn with_max_in_flight(mut self, limit: u32) -> Self {
        self.max_in_flight = Some(limit);
        self
    }

    /// Checks that every number is usable: finite and not negative, a non-empty id, a limit > 0.
    pub fn validate(&self) -> Result<(), Error> {
        let bad = |field: String, problem: &str| Error::InvalidCandidate {
            id: self.id.clone(),
            field,
            problem: problem.to_string(),
        };
        if self.id.as_str().is_empty() {
            return Err(bad("id".into(), "must not be empty"));
        }
        check_number(self.stake).map_err(|p| bad("stake".into(), p))?;
        check_number(self.price).map_err(|p| bad("price".into(), p))?;
        for (region, score) in &self.perf_scores {
            check_number(*score).map_err(|p| bad(format!("perf_scores.{region}"), p))?;
        }
        if self.max_in_flight == Some(0) {
            return Err(bad("max_in_flight".into(), "must be at least 1"));
        }
        Ok(())
    }
}

/// `Ok` for finite, non-negative numbers; otherwise what is wrong with it.
pub(crate) fn check_number(x: f64) -> Result<(), &'static str> {
    if x.is_nan() {
        Err("is NaN")
    } else if x.is_infinite() {
        Err("is infinite")
    } else if x < 0.0 {
        Err("is negative")
    } else {
        Ok(())
    }
}

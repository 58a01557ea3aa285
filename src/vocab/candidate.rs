//! Candidate identity and static information.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

use super::ids::CandidateId;

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
}

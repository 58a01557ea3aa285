//! Digests: what one coordinator tells the others it has learned.
//!
//! A coordinator that shares publishes a [`Digest`] every period ([`Core::digest`]): one
//! [`CandidateDigest`] per candidate it has fresh local evidence on (its success and time
//! averages, its overload window, its sample count and the age of its newest sample). The
//! others merge it as a down-weighted prior ([`Core::apply_digest`]); the merge rules and their
//! bounds are in `docs/fleet.md` and [`ShareConfig`].
//!
//! Pure data and checks: nothing here does I/O. A digest travels as JSON (serde) over whatever
//! transport the driver uses. Everything a digest carries is untrusted; [`DigestError`] names
//! each reason one (or one of its entries) is turned away.
//!
//! [`Core::digest`]: crate::Core::digest
//! [`Core::apply_digest`]: crate::Core::apply_digest

use serde::{Deserialize, Serialize};

use crate::score::ShareConfig;
use crate::vocab::CandidateId;

/// The largest time (ms) an entry may carry: an hour. Outcomes beyond it carry no more
/// information for a draw.
pub const MAX_TIME_MS: f64 = 3_600_000.0;

/// The largest bandwidth (bytes per second) an entry may carry: a terabyte per second.
pub const MAX_BANDWIDTH_BPS: f64 = 1e12;

/// The largest variance (squared natural-log units) an entry may carry.
pub const MAX_VARIANCE: f64 = 100.0;

/// The largest window count an entry may carry (16 buckets of 65,535 outcomes).
pub const MAX_WINDOW_COUNT: u32 = 16 * 65_535;

/// What one coordinator has learned, as it tells the others.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Digest {
    /// The sender's name (unique in the fleet; the transport should vouch for it).
    pub sender: String,
    /// Increases with every digest of the sender; a digest not newer than the last one
    /// applied from it is a replay.
    pub seq: u64,
    /// The sequence number of the sender's previous digest; `Some(0)` for the first digest
    /// a sender takes (after a restart too, whose running totals start again); `None` from
    /// senders that do not say (they predate it). A receiver that did not apply that one (it
    /// was lost or refused, or came from the process before a restart) cannot tell when the
    /// outcomes since its last report on a candidate happened, and does not count them among
    /// the recent outcomes (`docs/fleet.md`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prev_seq: Option<u64>,
    /// Set when the sender split one digest into parts (too large for one message): which
    /// part this is. Each part is a digest of its own, applied on its own; `None`: a whole
    /// digest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub part: Option<DigestPart>,
    /// One entry per candidate the sender has fresh evidence on.
    pub entries: Vec<CandidateDigest>,
}

/// One part of a digest split into several (`docs/fleet.md`, *Large fleets*). The parts of a
/// round are numbered `round`, `round + 1`, ... `round + count - 1` (the part's
/// [`Digest::seq`] is `round + index`) and all carry the round's [`Digest::prev_seq`]: the
/// `round` of the sender's previous digest. Every candidate is in at most one part of a
/// round.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DigestPart {
    /// The round's number: the sequence number of its first part.
    pub round: u64,
    /// This part's index, `0..count`.
    pub index: u32,
    /// The parts of the round, 1 to [`MAX_PARTS`].
    pub count: u32,
}

/// The most parts a digest may be split into: receivers refuse a part numbered beyond, so a
/// sender moves at most this many times `share.max_entries` entries per
/// `share.min_interval_s`.
pub const MAX_PARTS: u32 = 64;

/// What a coordinator has learned about one candidate.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CandidateDigest {
    /// The candidate.
    pub id: CandidateId,
    /// Success average, in `[0, 1]`.
    pub success: f64,
    /// Average time an attempt took to its result (first byte or failure), ms.
    #[serde(default)]
    pub attempt_ms: Option<f64>,
    /// That average's variance, squared natural-log units (0: unknown).
    #[serde(default)]
    pub attempt_var: f64,
    /// First-byte average of successes, ms.
    #[serde(default)]
    pub ttfb_ms: Option<f64>,
    /// Connect-time average of successes, ms.
    #[serde(default)]
    pub connect_ms: Option<f64>,
    /// Bandwidth average of successes, bytes per second.
    #[serde(default)]
    pub bandwidth_bps: Option<f64>,
    /// Overload errors over the sender's window.
    pub overload_errors: u32,
    /// Outcomes over the sender's window.
    pub overload_total: u32,
    /// Outcomes the sender has counted on it (a running total: the receiver reads the
    /// outcomes since the sender's previous digest from the difference).
    pub samples: u64,
    /// Of those, successes (a running total, at most `samples`).
    pub successes: u64,
    /// Seconds since the sender's newest sample of it, when the digest was made.
    pub age_s: f64,
}

/// Why a digest, or one entry of it, was turned away. [`DigestError::reason`] is a short label
/// for metrics.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum DigestError {
    /// `share.remote_weight` is 0: this coordinator does not merge digests.
    #[error("sharing is off (share.remote_weight = 0)")]
    SharingOff,
    /// The sender name is empty.
    #[error("digest without a sender name")]
    EmptySender,
    /// The digest claims to come from this coordinator.
    #[error("digest claims to come from this coordinator (`{0}`)")]
    OwnSender(String),
    /// The digest names another sender than the one the transport says sent it.
    #[error("digest claims sender `{claimed}` but came from `{actual}`")]
    SenderMismatch {
        /// The name in the digest.
        claimed: String,
        /// The name the transport vouches for.
        actual: String,
    },
    /// More entries than `share.max_entries`.
    #[error("digest has {count} entries, more than share.max_entries = {max}")]
    TooManyEntries {
        /// Entries in the digest.
        count: usize,
        /// The limit.
        max: usize,
    },
    /// Already `share.max_senders` senders are remembered.
    #[error("sender `{0}` is one more than share.max_senders remembered")]
    TooManySenders(String),
    /// Not newer than the last digest applied from this sender.
    #[error("digest {seq} from `{sender}` is not newer than {last}, the last applied (replay)")]
    Replayed {
        /// The sender.
        sender: String,
        /// The digest's sequence number.
        seq: u64,
        /// The last one applied.
        last: u64,
    },
    /// Sooner than `share.min_interval_s` after the last digest applied from this sender.
    #[error("digest from `{sender}` came {since_s:.3} s after the last one; at most one per {min_s} s is applied")]
    TooSoon {
        /// The sender.
        sender: String,
        /// Seconds since the last digest applied from it.
        since_s: f64,
        /// `share.min_interval_s`.
        min_s: f64,
    },
    /// An entry's number is NaN or infinite.
    #[error("entry `{id}`: {field} is not a finite number")]
    NonFinite {
        /// The candidate.
        id: CandidateId,
        /// The field.
        field: &'static str,
    },
    /// An entry's number is outside what an outcome can report.
    #[error("entry `{id}`: {field} = {value} is out of range")]
    OutOfRange {
        /// The candidate.
        id: CandidateId,
        /// The field.
        field: &'static str,
        /// The value.
        value: f64,
    },
    /// An entry claims more samples than `share.max_samples`, or more window errors than
    /// outcomes, or more window outcomes than a window holds.
    #[error("entry `{id}`: {field} = {value} is not a plausible count")]
    HugeCount {
        /// The candidate.
        id: CandidateId,
        /// The field.
        field: &'static str,
        /// The count.
        value: u64,
    },
    /// The entry names a candidate this coordinator does not know.
    #[error("entry `{0}`: unknown candidate")]
    UnknownCandidate(CandidateId),
    /// A second entry for the same candidate in one digest.
    #[error("entry `{0}`: the candidate appears twice in the digest")]
    DuplicateEntry(CandidateId),
    /// The entry's newest sample is older than `share.expiry_s`.
    #[error("entry `{id}`: its newest sample is {age_s} s old, past share.expiry_s")]
    Expired {
        /// The candidate.
        id: CandidateId,
        /// Its age, seconds.
        age_s: f64,
    },
    /// A part ([`Digest::part`]) whose numbers do not hold together: a count of 0 or over
    /// [`MAX_PARTS`], an index not below the count, or a sequence number that is not its
    /// round's plus its index.
    #[error("digest {seq}: part {index} of {count} of round {round} is not a valid part")]
    BadPart {
        /// The digest's sequence number.
        seq: u64,
        /// Its round.
        round: u64,
        /// Its index.
        index: u32,
        /// Its count.
        count: u32,
    },
}

impl DigestError {
    /// Every [`DigestError::reason`] label, in a fixed order (metrics pre-register them).
    pub const REASONS: [&'static str; 15] = [
        "sharing_off",
        "empty_sender",
        "own_sender",
        "sender_mismatch",
        "too_many_entries",
        "too_many_senders",
        "replayed",
        "too_soon",
        "non_finite",
        "out_of_range",
        "huge_count",
        "unknown_candidate",
        "duplicate_entry",
        "expired",
        "bad_part",
    ];

    /// A short label for metrics (one of [`DigestError::REASONS`]).
    pub fn reason(&self) -> &'static str {
        Self::REASONS[self.index()]
    }

    /// The index of [`DigestError::reason`] in [`DigestError::REASONS`].
    pub fn index(&self) -> usize {
        match self {
            DigestError::SharingOff => 0,
            DigestError::EmptySender => 1,
            DigestError::OwnSender(_) => 2,
            DigestError::SenderMismatch { .. } => 3,
            DigestError::TooManyEntries { .. } => 4,
            DigestError::TooManySenders(_) => 5,
            DigestError::Replayed { .. } => 6,
            DigestError::TooSoon { .. } => 7,
            DigestError::NonFinite { .. } => 8,
            DigestError::OutOfRange { .. } => 9,
            DigestError::HugeCount { .. } => 10,
            DigestError::UnknownCandidate(_) => 11,
            DigestError::DuplicateEntry(_) => 12,
            DigestError::Expired { .. } => 13,
            DigestError::BadPart { .. } => 14,
        }
    }
}

impl Digest {
    /// Checks the sender name against the one the transport vouches for (its subject or its
    /// authenticated user): a sender claiming another's name is turned away.
    pub fn check_sender(&self, actual: &str) -> Result<(), DigestError> {
        if self.sender == actual {
            Ok(())
        } else {
            Err(DigestError::SenderMismatch {
                claimed: self.sender.clone(),
                actual: actual.to_string(),
            })
        }
    }

    /// The checks of the whole digest that need no state: a sender name, at most
    /// `share.max_entries` entries, a part that holds together.
    pub fn check(&self, share: &ShareConfig) -> Result<(), DigestError> {
        if self.sender.is_empty() {
            return Err(DigestError::EmptySender);
        }
        if let Some(p) = self.part {
            let numbered = p.round.checked_add(u64::from(p.index)) == Some(self.seq);
            if p.count == 0 || p.count > MAX_PARTS || p.index >= p.count || !numbered {
                return Err(DigestError::BadPart {
                    seq: self.seq,
                    round: p.round,
                    index: p.index,
                    count: p.count,
                });
            }
        }
        if self.entries.len() > share.max_entries {
            return Err(DigestError::TooManyEntries {
                count: self.entries.len(),
                max: share.max_entries,
            });
        }
        Ok(())
    }
}

impl CandidateDigest {
    /// Checks every number against what a local outcome could report and every count against
    /// what is plausible, and the age against `share.expiry_s`.
    pub fn check(&self, share: &ShareConfig) -> Result<(), DigestError> {
        let id = || self.id.clone();
        let range = |field: &'static str, v: f64, max: f64| {
            if !v.is_finite() {
                Err(DigestError::NonFinite { id: id(), field })
            } else if !(0.0..=max).contains(&v) {
                Err(DigestError::OutOfRange {
                    id: id(),
                    field,
                    value: v,
                })
            } else {
                Ok(())
            }
        };
        range("success", self.success, 1.0)?;
        range("attempt_var", self.attempt_var, MAX_VARIANCE)?;
        range("age_s", self.age_s, f64::MAX)?;
        for (field, v, max) in [
            ("attempt_ms", self.attempt_ms, MAX_TIME_MS),
            ("ttfb_ms", self.ttfb_ms, MAX_TIME_MS),
            ("connect_ms", self.connect_ms, MAX_TIME_MS),
            ("bandwidth_bps", self.bandwidth_bps, MAX_BANDWIDTH_BPS),
        ] {
            if let Some(v) = v {
                range(field, v, max)?;
            }
        }
        let count = |field: &'static str, value: u64, max: u64| {
            if value > max {
                Err(DigestError::HugeCount {
                    id: id(),
                    field,
                    value,
                })
            } else {
                Ok(())
            }
        };
        count("samples", self.samples, share.max_samples)?;
        count("successes", self.successes, self.samples)?;
        count(
            "overload_total",
            u64::from(self.overload_total),
            u64::from(MAX_WINDOW_COUNT),
        )?;
        count(
            "overload_errors",
            u64::from(self.overload_errors),
            u64::from(self.overload_total),
        )?;
        if self.age_s > share.expiry_s {
            return Err(DigestError::Expired {
                id: id(),
                age_s: self.age_s,
            });
        }
        Ok(())
    }
}

/// What [`Core::apply_digest`](crate::Core::apply_digest) did with a digest it accepted.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Applied {
    /// Entries merged.
    pub applied: usize,
    /// Entries turned away, counted by [`DigestError::index`].
    pub rejected: [usize; DigestError::REASONS.len()],
    /// The first entry turned away and why (for a log line).
    pub first_rejection: Option<DigestError>,
}

impl Applied {
    /// Entries turned away in all.
    pub fn rejected_total(&self) -> usize {
        self.rejected.iter().sum()
    }

    pub(crate) fn reject(&mut self, e: DigestError) {
        self.rejected[e.index()] += 1;
        if self.first_rejection.is_none() {
            self.first_rejection = Some(e);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry() -> CandidateDigest {
        CandidateDigest {
            id: CandidateId::new("a"),
            success: 0.9,
            attempt_ms: Some(100.0),
            attempt_var: 0.1,
            ttfb_ms: Some(80.0),
            connect_ms: None,
            bandwidth_bps: None,
            overload_errors: 1,
            overload_total: 10,
            samples: 30,
            successes: 27,
            age_s: 0.5,
        }
    }

    #[test]
    fn each_bad_number_is_named() {
        let share = ShareConfig::default();
        assert_eq!(entry().check(&share), Ok(()));
        let cases: Vec<(CandidateDigest, &str)> = vec![
            (
                CandidateDigest {
                    success: f64::NAN,
                    ..entry()
                },
                "non_finite",
            ),
            (
                CandidateDigest {
                    success: 1.5,
                    ..entry()
                },
                "out_of_range",
            ),
            (
                CandidateDigest {
                    attempt_ms: Some(-1.0),
                    ..entry()
                },
                "out_of_range",
            ),
            (
                CandidateDigest {
                    ttfb_ms: Some(f64::INFINITY),
                    ..entry()
                },
                "non_finite",
            ),
            (
                CandidateDigest {
                    samples: u64::MAX,
                    ..entry()
                },
                "huge_count",
            ),
            (
                CandidateDigest {
                    overload_errors: 11,
                    ..entry()
                },
                "huge_count",
            ),
            (
                CandidateDigest {
                    successes: 31,
                    ..entry()
                },
                "huge_count",
            ),
            (
                CandidateDigest {
                    age_s: 1e6,
                    ..entry()
                },
                "expired",
            ),
        ];
        for (e, want) in cases {
            assert_eq!(e.check(&share).map_err(|e| e.reason()), Err(want), "{e:?}");
        }
    }

    #[test]
    fn the_sender_is_checked() {
        let d = Digest {
            sender: "a".into(),
            seq: 1,
            prev_seq: None,
            part: None,
            entries: vec![entry()],
        };
        let part = |round, index, count| Digest {
            seq: 10,
            part: Some(DigestPart {
                round,
                index,
                count,
            }),
            ..d.clone()
        };
        assert_eq!(part(10, 0, 1).check(&ShareConfig::default()), Ok(()));
        assert_eq!(part(7, 3, 4).check(&ShareConfig::default()), Ok(()));
        for bad in [
            part(10, 0, 0),
            part(7, 3, 3),
            part(8, 3, 4),
            part(10, 0, MAX_PARTS + 1),
            part(u64::MAX, 1, 4),
        ] {
            assert_eq!(
                bad.check(&ShareConfig::default()).map_err(|e| e.reason()),
                Err("bad_part"),
                "{bad:?}"
            );
        }
        assert_eq!(d.check_sender("a"), Ok(()));
        assert_eq!(
            d.check_sender("b").map_err(|e| e.reason()),
            Err("sender_mismatch")
        );
        let share = ShareConfig {
            max_entries: 0,
            ..ShareConfig::default()
        };
        assert_eq!(
            d.check(&share).map_err(|e| e.reason()),
            Err("too_many_entries")
        );
        let anonymous = Digest {
            sender: String::new(),
            ..d
        };
        assert_eq!(
            anonymous
                .check(&ShareConfig::default())
                .map_err(|e| e.reason()),
            Err("empty_sender")
        );
    }
}

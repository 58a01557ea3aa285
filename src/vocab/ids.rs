//! Identifiers: candidate names and the ids of requests and attempts.

use std::fmt;

use serde::{Deserialize, Serialize};
use smol_str::SmolStr;

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

/// Identifies a request inside one core. Stale ids (of finished requests) are detected.
///
/// Shown as `r<slot>.<generation>` (`r1.1`); serialized (in a decision record's JSON) as the
/// raw number [`as_u64`](Self::as_u64), `generation * 2^32 + slot` (`4294967297` for `r1.1`).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct RequestId(pub(crate) u64);

/// Identifies one granted attempt (the permit). Stale ids are detected.
///
/// Shown as `a<slot>.<generation>`; serialized as the raw number
/// [`as_u64`](Self::as_u64), `generation * 2^32 + slot`, as [`RequestId`].
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct AttemptId(pub(crate) u64);

macro_rules! slab_id {
    ($t:ident, $prefix:literal) => {
        impl $t {
            pub(crate) fn new(index: u32, generation: u32) -> Self {
                $t(((generation as u64) << 32) | index as u64)
            }
            pub(crate) fn index(self) -> usize {
                (self.0 & 0xffff_ffff) as usize
            }
            pub(crate) fn generation(self) -> u32 {
                (self.0 >> 32) as u32
            }
            /// The raw value, stable for the life of the core (for logs and maps).
            pub fn as_u64(self) -> u64 {
                self.0
            }
        }
        impl fmt::Debug for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(
                    f,
                    concat!($prefix, "{}.{}"),
                    self.index(),
                    self.generation()
                )
            }
        }
        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Debug::fmt(self, f)
            }
        }
    };
}
slab_id!(RequestId, "r");
slab_id!(AttemptId, "a");

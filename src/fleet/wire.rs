//! What goes over the wire: subjects, names and the versioned digest envelope.
//!
//! A digest is published on `selcoord.digest.<fleet>.<sender>` as JSON:
//! `{"v": 2, "digest": { "sender": ..., "seq": ..., "prev_seq": ..., "entries": [...] }}`. A
//! receiver checks, in this order, that the payload is at most [`MAX_PAYLOAD`] bytes, that it
//! is JSON with a version it reads ([`READS`]), that the digest decodes, and that the
//! subject's sender token is the digest's `sender` (so NATS publish permissions on the subject
//! bind the name). Version 2 added `prev_seq`; a version-1 envelope (without it) still
//! decodes.

use serde::{Deserialize, Serialize};

use crate::digest::Digest;

/// The envelope version this build writes.
pub const VERSION: u32 = 2;

/// The envelope versions this build reads.
pub const READS: [u32; 2] = [1, 2];

/// The first two tokens of every digest subject.
pub const SUBJECT_PREFIX: &str = "selcoord.digest";

/// Largest payload a receiver decodes, in bytes; larger ones are rejected unread.
pub const MAX_PAYLOAD: usize = 1 << 20;

/// Longest fleet or sender name, in bytes.
pub const MAX_NAME_LEN: usize = 64;

/// Why a received message was not passed to the coordinator.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WireError {
    /// The payload is larger than [`MAX_PAYLOAD`].
    #[error("payload of {0} bytes is over the {MAX_PAYLOAD}-byte limit")]
    TooLarge(usize),
    /// Not JSON, or not a digest envelope.
    #[error("malformed digest: {0}")]
    Malformed(String),
    /// An envelope version this build does not read.
    #[error("digest envelope version {0}; this build reads versions 1 and 2")]
    Version(u32),
    /// The subject is not `selcoord.digest.<fleet>.<sender>` with a valid sender token.
    #[error("subject `{0}` is not a digest subject of this fleet")]
    Subject(String),
    /// The digest's `sender` is not the subject's sender token.
    #[error("digest claims sender `{claimed}` but was published as `{subject}`")]
    SenderMismatch {
        /// The sender named in the digest.
        claimed: String,
        /// The sender token of the subject.
        subject: String,
    },
}

impl WireError {
    /// The `reason` label of the rejection metric.
    pub fn reason(&self) -> &'static str {
        match self {
            WireError::TooLarge(_) => "too_large",
            WireError::Malformed(_) => "malformed",
            WireError::Version(_) => "version",
            WireError::Subject(_) => "subject",
            WireError::SenderMismatch { .. } => "sender_mismatch",
        }
    }

    /// Every value [`WireError::reason`] returns.
    pub const REASONS: [&'static str; 5] = [
        "too_large",
        "malformed",
        "version",
        "subject",
        "sender_mismatch",
    ];
}

/// Checks a fleet or sender name: 1 to [`MAX_NAME_LEN`] ASCII letters, digits, `-` or `_`, so
/// it is exactly one NATS subject token (no `.`, no wildcards, no spaces).
pub fn check_name(what: &str, name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > MAX_NAME_LEN {
        return Err(format!(
            "{what} `{name}` must be 1 to {MAX_NAME_LEN} characters long"
        ));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '-' || *c == '_'))
    {
        return Err(format!(
            "{what} `{name}` contains {c:?}; use only ASCII letters, digits, `-` and `_` \
             (it is one NATS subject token)"
        ));
    }
    Ok(())
}

/// The subject `sender` publishes its digests on.
pub fn subject(fleet: &str, sender: &str) -> String {
    format!("{SUBJECT_PREFIX}.{fleet}.{sender}")
}

/// The subject that receives every sender's digests of `fleet`.
pub fn fleet_wildcard(fleet: &str) -> String {
    format!("{SUBJECT_PREFIX}.{fleet}.*")
}

/// The sender token of a digest subject of `fleet`.
pub fn sender_of<'s>(subject: &'s str, fleet: &str) -> Result<&'s str, WireError> {
    let bad = || WireError::Subject(truncate(subject));
    let rest = subject
        .strip_prefix(SUBJECT_PREFIX)
        .and_then(|r| r.strip_prefix('.'))
        .and_then(|r| r.strip_prefix(fleet))
        .and_then(|r| r.strip_prefix('.'))
        .ok_or_else(bad)?;
    check_name("sender", rest).map_err(|_| bad())?;
    Ok(rest)
}

#[derive(Serialize)]
struct EnvelopeOut<'a> {
    v: u32,
    digest: &'a Digest,
}

#[derive(Deserialize)]
struct VersionOnly {
    v: u32,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EnvelopeIn {
    #[allow(dead_code)]
    v: u32,
    digest: Digest,
}

/// Encodes a digest in the current envelope.
pub fn encode(digest: &Digest) -> Result<Vec<u8>, WireError> {
    serde_json::to_vec(&EnvelopeOut { v: VERSION, digest })
        .map_err(|e| WireError::Malformed(e.to_string()))
}

/// Decodes a payload received on `subject`, checking size, version, shape and sender.
pub fn decode(subject: &str, fleet: &str, payload: &[u8]) -> Result<Digest, WireError> {
    if payload.len() > MAX_PAYLOAD {
        return Err(WireError::TooLarge(payload.len()));
    }
    let sender = sender_of(subject, fleet)?;
    let version: VersionOnly =
        serde_json::from_slice(payload).map_err(|e| WireError::Malformed(e.to_string()))?;
    if !READS.contains(&version.v) {
        return Err(WireError::Version(version.v));
    }
    let envelope: EnvelopeIn =
        serde_json::from_slice(payload).map_err(|e| WireError::Malformed(e.to_string()))?;
    let digest = envelope.digest;
    if digest.sender.as_str() != sender {
        return Err(WireError::SenderMismatch {
            claimed: truncate(digest.sender.as_str()),
            subject: sender.to_string(),
        });
    }
    Ok(digest)
}

/// A name cut for an error message, so a hostile one cannot flood the logs.
fn truncate(s: &str) -> String {
    let mut end = s.len().min(MAX_NAME_LEN * 2);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::digest::CandidateDigest;
    use crate::CandidateId;

    fn digest(sender: &str) -> Digest {
        Digest {
            sender: sender.into(),
            seq: 7,
            prev_seq: Some(6),
            entries: vec![CandidateDigest {
                id: CandidateId::new("c1"),
                success: 0.25,
                attempt_ms: Some(120.0),
                attempt_var: 0.1,
                ttfb_ms: None,
                connect_ms: None,
                bandwidth_bps: None,
                overload_errors: 1,
                overload_total: 4,
                samples: 9,
                successes: 4,
                age_s: 0.5,
            }],
        }
    }

    #[test]
    fn a_digest_round_trips_on_its_own_subject() {
        let d = digest("a");
        let bytes = encode(&d).unwrap();
        assert_eq!(decode(&subject("f", "a"), "f", &bytes), Ok(d));
    }

    #[test]
    fn a_version_1_envelope_still_decodes() {
        let v1 = br#"{"v":1,"digest":{"sender":"a","seq":3,"entries":[]}}"#;
        let d = decode(&subject("f", "a"), "f", v1).unwrap();
        assert_eq!((d.seq, d.prev_seq), (3, None));
        // Version 2 writes the previous sequence number.
        let bytes = String::from_utf8(encode(&digest("a")).unwrap()).unwrap();
        assert!(
            bytes.starts_with(r#"{"v":2,"#) && bytes.contains(r#""prev_seq":6"#),
            "{bytes}"
        );
    }

    #[test]
    fn each_bad_message_is_rejected_with_its_reason() {
        let good = encode(&digest("a")).unwrap();
        let reason = |subject: &str, payload: &[u8]| {
            decode(subject, "f", payload)
                .map(|_| ())
                .unwrap_err()
                .reason()
        };
        // Another sender's subject: a sender claiming another's name.
        assert_eq!(reason("selcoord.digest.f.b", &good), "sender_mismatch");
        assert_eq!(reason("selcoord.digest.g.a", &good), "subject");
        assert_eq!(reason("selcoord.digest.f", &good), "subject");
        assert_eq!(reason("selcoord.digest.f.a.b", &good), "subject");
        assert_eq!(reason("selcoord.digest.f.a", b"not json"), "malformed");
        assert_eq!(
            reason("selcoord.digest.f.a", br#"{"v":1,"digest":{}}"#),
            "malformed"
        );
        let v3 = String::from_utf8(good.clone())
            .unwrap()
            .replacen("\"v\":2", "\"v\":3", 1);
        assert_eq!(reason("selcoord.digest.f.a", v3.as_bytes()), "version");
        let huge = vec![b' '; MAX_PAYLOAD + 1];
        assert_eq!(reason("selcoord.digest.f.a", &huge), "too_large");
        // Unknown fields are refused (the digest denies them), NaN cannot be written in JSON.
        let extra =
            String::from_utf8(good)
                .unwrap()
                .replacen("\"seq\":7", "\"seq\":7,\"boost\":9", 1);
        assert_eq!(reason("selcoord.digest.f.a", extra.as_bytes()), "malformed");
        assert_eq!(
            reason(
                "selcoord.digest.f.a",
                br#"{"v":1,"digest":{"sender":"a","seq":1,"entries":[{"id":"c","success":NaN}]}}"#
            ),
            "malformed"
        );
        for r in [
            WireError::TooLarge(0),
            WireError::Malformed(String::new()),
            WireError::Version(0),
            WireError::Subject(String::new()),
        ] {
            assert!(WireError::REASONS.contains(&r.reason()));
        }
    }

    #[test]
    fn names_are_single_subject_tokens() {
        for ok in ["a", "node-7", "EU_west_1", &"x".repeat(MAX_NAME_LEN)] {
            assert_eq!(check_name("sender", ok), Ok(()), "{ok}");
        }
        for bad in [
            "",
            "a.b",
            "a*",
            ">",
            "a b",
            "é",
            &"x".repeat(MAX_NAME_LEN + 1),
        ] {
            assert!(check_name("sender", bad).is_err(), "{bad:?}");
        }
        assert_eq!(fleet_wildcard("f"), "selcoord.digest.f.*");
        assert_eq!(sender_of("selcoord.digest.f.node-1", "f"), Ok("node-1"));
        // A fleet name that is a prefix of another's does not match it.
        assert!(sender_of("selcoord.digest.fx.a", "f").is_err());
    }
}

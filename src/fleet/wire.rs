//! What goes over the wire: subjects, names and the versioned digest envelope.
//!
//! A digest is published on `selcoord.digest.<fleet>.<sender>` as JSON:
//! `{"v": 2, "digest": { "sender": ..., "seq": ..., "prev_seq": ..., "entries": [...] }}`. A
//! receiver checks, in this order, that the payload is at most [`MAX_PAYLOAD`] bytes, that it
//! is JSON with a version it reads ([`READS`]), that the digest decodes, and that the
//! subject's sender token is the digest's `sender` (so NATS publish permissions on the subject
//! bind the name). Version 2 added `prev_seq`; a version-1 envelope (without it) still
//! decodes. Version 3 added `part`: a digest too large for one message is split
//! ([`encode_split`]) into parts, each a digest of its own. A whole digest is still written as
//! version 2, which the members of the version before read; only parts are version 3.

use serde::{Deserialize, Serialize};

use crate::digest::{Digest, DigestPart, MAX_PARTS};

/// The envelope version this build writes for a part ([`Digest::part`]); a whole digest is
/// written as [`WHOLE_VERSION`].
pub const VERSION: u32 = 3;

/// The envelope version this build writes for a whole digest (no `part`).
pub const WHOLE_VERSION: u32 = 2;

/// The envelope versions this build reads.
pub const READS: [u32; 3] = [1, 2, 3];

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
    #[error("digest envelope version {0}; this build reads versions 1 to 3")]
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

/// The envelope version a digest is written in: [`VERSION`] for a part, else
/// [`WHOLE_VERSION`].
fn version_of(digest: &Digest) -> u32 {
    if digest.part.is_some() {
        VERSION
    } else {
        WHOLE_VERSION
    }
}

/// Encodes a digest in one envelope (version 2 when whole, 3 when a part).
pub fn encode(digest: &Digest) -> Result<Vec<u8>, WireError> {
    serde_json::to_vec(&EnvelopeOut {
        v: version_of(digest),
        digest,
    })
    .map_err(|e| WireError::Malformed(e.to_string()))
}

/// Why a digest could not be encoded for sending.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EncodeError {
    /// JSON encoding failed.
    #[error("cannot encode the digest: {0}")]
    Json(String),
    /// One entry (with the envelope around it) is larger than a message may be.
    #[error("an entry of {bytes} bytes does not fit a message of at most {limit} bytes")]
    EntryTooLarge {
        /// The entry's size, with the largest envelope around it.
        bytes: usize,
        /// The largest message.
        limit: usize,
    },
}

impl From<WireError> for EncodeError {
    fn from(e: WireError) -> Self {
        EncodeError::Json(e.to_string())
    }
}

/// A digest encoded for sending: the payloads and the sequence numbers they carry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Encoded {
    /// One payload per message, in order; each at most the limit given to [`encode_split`].
    pub payloads: Vec<Vec<u8>>,
    /// The sequence number of each payload's digest (the first is the digest's own).
    pub seqs: Vec<u64>,
    /// Entries left out: a digest that needs more than [`MAX_PARTS`] parts keeps the
    /// freshest entries (smallest `age_s`) that fit.
    pub left_out: usize,
}

/// Encodes `digest` in messages of at most `max_bytes` bytes and `max_entries` entries each:
/// one whole digest (version 2) when it fits, else [`DigestPart`]s (version 3) of round
/// `digest.seq`, numbered `digest.seq + index`, each with the digest's `sender` and
/// `prev_seq`. Every entry is encoded once. A caller numbers its next digest after the last
/// of [`Encoded::seqs`].
pub fn encode_split(
    digest: &Digest,
    max_bytes: usize,
    max_entries: usize,
) -> Result<Encoded, EncodeError> {
    let json = |e: serde_json::Error| EncodeError::Json(e.to_string());
    let mut entries = digest
        .entries
        .iter()
        .map(|e| serde_json::to_vec(e).map_err(json))
        .collect::<Result<Vec<_>, _>>()?;
    // The largest envelope around no entries: a bound on every part's.
    let widest = Digest {
        sender: digest.sender.clone(),
        seq: u64::MAX,
        prev_seq: Some(u64::MAX),
        part: Some(DigestPart {
            round: u64::MAX,
            index: MAX_PARTS,
            count: MAX_PARTS,
        }),
        entries: Vec::new(),
    };
    let envelope = encode(&widest)?.len();
    let budget = max_bytes.saturating_sub(envelope);
    let max_entries = max_entries.max(1);
    if let Some(big) = entries.iter().map(Vec::len).find(|&n| n > budget) {
        return Err(EncodeError::EntryTooLarge {
            bytes: big + envelope,
            limit: max_bytes,
        });
    }
    let mut chunks = chunk(&entries, budget, max_entries);
    let mut left_out = 0;
    if chunks.len() > MAX_PARTS as usize {
        // Too many parts: the freshest entries first, the rest left out.
        let mut order: Vec<usize> = (0..entries.len()).collect();
        order.sort_by(|&a, &b| digest.entries[a].age_s.total_cmp(&digest.entries[b].age_s));
        let mut taken: Vec<Option<Vec<u8>>> = entries.into_iter().map(Some).collect();
        entries = order.iter().filter_map(|&i| taken[i].take()).collect();
        chunks = chunk(&entries, budget, max_entries);
        chunks.truncate(MAX_PARTS as usize);
        left_out = entries.len() - chunks.last().map_or(0, |c| c.end);
    }
    let count = chunks.len() as u32;
    let mut out = Encoded {
        payloads: Vec::with_capacity(chunks.len()),
        seqs: Vec::with_capacity(chunks.len()),
        left_out,
    };
    for (index, range) in chunks.into_iter().enumerate() {
        let seq = digest.seq.saturating_add(index as u64);
        let head = Digest {
            sender: digest.sender.clone(),
            seq,
            prev_seq: digest.prev_seq,
            part: (count > 1).then_some(DigestPart {
                round: digest.seq,
                index: index as u32,
                count,
            }),
            entries: Vec::new(),
        };
        let head = encode(&head)?;
        // `...,"entries":[]}}`: the entries go between the brackets.
        let Some(open) = head.strip_suffix(b"]}}") else {
            return Err(EncodeError::Json("unexpected envelope shape".into()));
        };
        let body: usize = entries[range.clone()].iter().map(|e| e.len() + 1).sum();
        let mut payload = Vec::with_capacity(open.len() + body + 3);
        payload.extend_from_slice(open);
        for (k, e) in entries[range].iter().enumerate() {
            if k > 0 {
                payload.push(b',');
            }
            payload.extend_from_slice(e);
        }
        payload.extend_from_slice(b"]}}");
        out.payloads.push(payload);
        out.seqs.push(seq);
    }
    Ok(out)
}

/// Consecutive ranges of `entries`, each at most `max_entries` long and at most `budget`
/// bytes with a comma between entries (every entry fits the budget on its own).
fn chunk(entries: &[Vec<u8>], budget: usize, max_entries: usize) -> Vec<std::ops::Range<usize>> {
    let mut chunks = Vec::new();
    let (mut start, mut bytes) = (0, 0);
    for (i, e) in entries.iter().enumerate() {
        let add = e.len() + usize::from(i > start);
        if i > start && (bytes + add > budget || i - start >= max_entries) {
            chunks.push(start..i);
            (start, bytes) = (i, e.len());
        } else {
            bytes += add;
        }
    }
    if start < entries.len() || chunks.is_empty() {
        chunks.push(start..entries.len());
    }
    chunks
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
    if digest.part.is_some() && version.v < VERSION {
        return Err(WireError::Malformed(format!(
            "a digest part in a version-{} envelope",
            version.v
        )));
    }
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
            part: None,
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
        let v4 = String::from_utf8(good.clone())
            .unwrap()
            .replacen("\"v\":2", "\"v\":4", 1);
        assert_eq!(reason("selcoord.digest.f.a", v4.as_bytes()), "version");
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

    fn many(n: usize) -> Digest {
        let one = digest("a").entries[0].clone();
        Digest {
            seq: 1_000,
            entries: (0..n)
                .map(|i| CandidateDigest {
                    id: CandidateId::new(format!("c{i}")),
                    age_s: (n - i) as f64,
                    ..one.clone()
                })
                .collect(),
            ..digest("a")
        }
    }

    #[test]
    fn a_large_digest_is_split_into_parts_that_each_fit_and_decode_on_their_own() {
        let d = many(100);
        let whole = encode(&d).unwrap().len();
        let limit = 2_000;
        let split = encode_split(&d, limit, 10_000).unwrap();
        let count = split.payloads.len();
        assert!(
            count > 1 && count >= whole / limit,
            "{count} parts of {whole} bytes"
        );
        assert_eq!(split.left_out, 0);
        let mut entries = Vec::new();
        for (i, (payload, seq)) in split.payloads.iter().zip(&split.seqs).enumerate() {
            assert!(payload.len() <= limit, "part {i}: {} bytes", payload.len());
            assert!(payload.starts_with(br#"{"v":3,"#));
            let part = decode(&subject("f", "a"), "f", payload).unwrap();
            assert_eq!(part.seq, *seq);
            assert_eq!(part.seq, 1_000 + i as u64);
            assert_eq!(part.prev_seq, Some(6));
            let want = DigestPart {
                round: 1_000,
                index: i as u32,
                count: count as u32,
            };
            assert_eq!(part.part, Some(want));
            assert_eq!(part.check(&crate::score::ShareConfig::default()), Ok(()));
            entries.extend(part.entries);
        }
        assert_eq!(entries, d.entries, "every entry once, in order");
        // At most `max_entries` a part.
        let split = encode_split(&d, 1 << 20, 7).unwrap();
        assert_eq!(split.payloads.len(), 15);
        // A digest that fits is sent whole, as version 2, which the version before reads.
        let split = encode_split(&d, 1 << 20, 10_000).unwrap();
        assert_eq!(split.payloads, vec![encode(&d).unwrap()]);
        assert!(split.payloads[0].starts_with(br#"{"v":2,"#));
        assert_eq!(split.seqs, vec![1_000]);
    }

    #[test]
    fn what_cannot_be_split_is_said() {
        let d = many(200);
        assert!(matches!(
            encode_split(&d, 100, 10_000),
            Err(EncodeError::EntryTooLarge { limit: 100, .. })
        ));
        // More than the parts a receiver takes: the freshest entries are kept.
        let split = encode_split(&d, 1 << 20, 1).unwrap();
        assert_eq!(split.payloads.len(), MAX_PARTS as usize);
        assert_eq!(split.left_out, 200 - MAX_PARTS as usize);
        let last = decode(&subject("f", "a"), "f", split.payloads.last().unwrap()).unwrap();
        assert_eq!(last.entries[0].id.as_str(), format!("c{}", 200 - MAX_PARTS));
    }

    #[test]
    fn a_part_needs_version_3() {
        let mut d = many(3);
        d.part = Some(DigestPart {
            round: 1_000,
            index: 0,
            count: 2,
        });
        let v3 = String::from_utf8(encode(&d).unwrap()).unwrap();
        assert!(v3.starts_with(r#"{"v":3,"#), "{v3}");
        assert!(decode(&subject("f", "a"), "f", v3.as_bytes()).is_ok());
        let v2 = v3.replacen(r#""v":3"#, r#""v":2"#, 1);
        assert_eq!(
            decode(&subject("f", "a"), "f", v2.as_bytes()).map_err(|e| e.reason()),
            Err("malformed")
        );
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

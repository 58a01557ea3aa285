//! Every metric name, in one place (dashboards and tests use these too).

/// Counter: decisions (grants), labels `arm`, `candidate`, `reason`.
pub const DECISIONS: &str = "selcoord_decisions_total";
/// Histogram: the winner's probability in its draw, labels `arm`, `reason`.
pub const WINNER_PROBABILITY: &str = "selcoord_winner_probability";
/// Histogram: seconds from `ready` to the grant, label `arm`.
pub const WAIT_SECONDS: &str = "selcoord_wait_seconds";
/// Counter: decisions whose filter fell back (it would have removed everything).
pub const FILTER_FALLBACKS: &str = "selcoord_filter_fallbacks_total";
/// Counter: requests answered without a slot, label `reason`.
pub const REJECTIONS: &str = "selcoord_rejections_total";
/// Counter: attempts reclaimed by the lease (`max_attempt_s`).
pub const RECLAIMED: &str = "selcoord_reclaimed_attempts_total";
/// Counter: attempt outcomes, labels `arm`, `candidate`, `outcome` (`success` or a failure
/// class).
pub const OUTCOMES: &str = "selcoord_attempt_outcomes_total";
/// Histogram: seconds one decision (one core call of a handler) took.
pub const DECISION_COST: &str = "selcoord_decision_cost_seconds";
/// Counter: outlier ejections started.
pub const EJECTIONS: &str = "selcoord_ejections_total";
/// Counter: draws that left their request waiting for a busy candidate with weight, every
/// free one having none ([`crate::core::Counters::waited_for_weight`]).
pub const WAITS_FOR_WEIGHT: &str = "selcoord_waits_for_weight_total";
/// Gauge: candidates known (live).
pub const CANDIDATES: &str = "selcoord_candidates";
/// Gauge: candidates ejected now.
pub const CANDIDATES_EJECTED: &str = "selcoord_candidates_ejected";
/// Gauge: requests waiting for a slot.
pub const WAITING: &str = "selcoord_waiting_requests";
/// Gauge: the waiting limit (`max_waiting`).
pub const WAITING_LIMIT: &str = "selcoord_waiting_requests_limit";
/// Gauge: waiting requests parked (no candidate that could serve them has room).
pub const WAITING_PARKED: &str = "selcoord_waiting_requests_parked";
/// Gauge: open requests (waiting or running).
pub const OPEN_REQUESTS: &str = "selcoord_open_requests";
/// Gauge: attempts in flight over all candidates.
pub const IN_FLIGHT: &str = "selcoord_in_flight";
/// Gauge: the global in-flight limit (absent while unlimited).
pub const IN_FLIGHT_LIMIT: &str = "selcoord_in_flight_limit";
/// Gauge: the deadline advice's multiple of a candidate's first-byte average in force (from
/// the fleet's first-byte spread; absent while the advice is off).
pub const DEADLINE_MULTIPLE: &str = "selcoord_deadline_multiple";
/// Gauge: the share of each draw spread uniformly over the drawn set, as in force (the
/// config's `floor`, less where `floor_period_s` scales it down).
pub const FLOOR_IN_FORCE: &str = "selcoord_floor_in_force";
/// Gauge: attempts in flight per candidate, label `candidate`.
pub const CANDIDATE_IN_FLIGHT: &str = "selcoord_candidate_in_flight";
/// Gauge: per-candidate in-flight limit, label `candidate` (absent while unlimited).
pub const CANDIDATE_IN_FLIGHT_LIMIT: &str = "selcoord_candidate_in_flight_limit";
/// Gauge: a candidate's estimated no-load latency in seconds, learned by adaptive limits,
/// label `candidate` (absent while adaptive limits are off or before its first success).
pub const CANDIDATE_NO_LOAD: &str = "selcoord_candidate_no_load_seconds";
/// Counter: grants that filled a candidate up to its learned (adaptive) limit while its
/// static limit would have taken more, label `candidate`: each one left later requests
/// waiting for it or going elsewhere.
pub const ADAPTIVE_LIMITED: &str = "selcoord_adaptive_limited_total";
/// Gauge: score components, labels `candidate`, `component`.
pub const SCORE_COMPONENT: &str = "selcoord_score_component";
/// Gauge: probability of the candidate winning the next unrestricted draw if every
/// candidate had a free slot ([`Core::preference`](crate::core::Core::preference)), label
/// `candidate`. It does not drop to 0 when candidates are at their limits or all ejected.
pub const CANDIDATE_PROBABILITY: &str = "selcoord_candidate_probability";
/// Gauge: share of sampled decisions where a shadow policy agreed with the live choice,
/// label `shadow`.
pub const SHADOW_AGREEMENT: &str = "selcoord_shadow_agreement";
/// Gauge: mean probability a shadow policy gave the live winner, label `shadow`.
pub const SHADOW_WINNER_PROBABILITY: &str = "selcoord_shadow_winner_probability";
/// Counter: decisions a shadow policy was asked about, label `shadow`.
pub const SHADOW_DECISIONS: &str = "selcoord_shadow_decisions_total";
/// Counter: snapshot saves of a coordinator with a snapshot store, label `result`:
/// `written`, `failed` (the coordinator kept running; the file before stays intact) or
/// `skipped` (a periodic save due while the last was still being written, or a save older
/// than one already written). Absent without a store.
pub const SNAPSHOT_SAVES: &str = "selcoord_snapshot_saves_total";

// Discovery's metrics (emitted by `crate::discovery`), kept here with the others.

/// Counter: fetches of candidate info, label `result` = `ok`, `error`, `timeout`, `invalid`.
pub const DISCOVERY_REQUESTS: &str = "selcoord_discovery_requests_total";
/// Histogram: seconds one refresh pass took, from its first fetch to its last answer or cut.
pub const DISCOVERY_REFRESH_DURATION: &str = "selcoord_discovery_refresh_duration_seconds";
/// Gauge: candidates with valid cached info (the ones pushed to the coordinator).
pub const DISCOVERY_CACHE_SIZE: &str = "selcoord_discovery_cache_size";
/// Gauge: age in seconds of the oldest valid cached info.
pub const DISCOVERY_CACHE_AGE: &str = "selcoord_discovery_cache_age_seconds";
/// Gauge: fetches running now.
pub const DISCOVERY_IN_FLIGHT: &str = "selcoord_discovery_fetches_in_flight";
/// Counter: perf-score document fetches that failed (previous scores kept), label `reason` =
/// `timeout`, `connect`, `status`, `too_large`, `malformed`, `body`.
pub const PERF_SCORE_ERRORS: &str = "selcoord_perf_scores_errors_total";
/// Counter: perf-score documents fetched and applied.
pub const PERF_SCORE_UPDATES: &str = "selcoord_perf_scores_updates_total";

// Fleet sharing's metrics (emitted by `crate::fleet`, feature `fleet`).

/// Counter: digests published to the fleet.
pub const FLEET_DIGESTS_SENT: &str = "selcoord_fleet_digests_sent_total";
/// Counter: of the digests sent, those published at once on a sharp change in this
/// coordinator's own outcomes (`FleetConfig::urgent_gap`).
pub const FLEET_DIGESTS_URGENT: &str = "selcoord_fleet_digests_urgent_total";
/// Counter: received digests the coordinator applied.
pub const FLEET_DIGESTS_APPLIED: &str = "selcoord_fleet_digests_applied_total";
/// Counter: received digests rejected, label `reason`: `too_large`, `malformed`, `version`,
/// `subject`, `sender_mismatch` (checked on receipt) or the coordinator's reason for
/// refusing the digest.
pub const FLEET_DIGESTS_REJECTED: &str = "selcoord_fleet_digests_rejected_total";
/// Counter: digests dropped, label `reason`: `disconnected` (not published while the
/// connection is down), `publish_error`, `queue_full` (received while the queue to the
/// coordinator was full).
pub const FLEET_DIGESTS_DROPPED: &str = "selcoord_fleet_digests_dropped_total";
/// Counter: entries of applied digests refused one by one, label `reason` (the
/// coordinator's reasons, as for whole digests).
pub const FLEET_DIGEST_ENTRIES_REJECTED: &str = "selcoord_fleet_digest_entries_rejected_total";
/// Gauge: 1 while connected to the NATS server, 0 while running alone.
pub const FLEET_CONNECTED: &str = "selcoord_fleet_connected";

/// Every fleet metric name above.
pub const FLEET: [&str; 7] = [
    FLEET_DIGESTS_SENT,
    FLEET_DIGESTS_URGENT,
    FLEET_DIGESTS_APPLIED,
    FLEET_DIGESTS_REJECTED,
    FLEET_DIGESTS_DROPPED,
    FLEET_DIGEST_ENTRIES_REJECTED,
    FLEET_CONNECTED,
];

/// Every coordinator metric name above (discovery's are listed in [`DISCOVERY`]).
pub const ALL: [&str; 30] = [
    DECISIONS,
    WINNER_PROBABILITY,
    WAIT_SECONDS,
    FILTER_FALLBACKS,
    REJECTIONS,
    RECLAIMED,
    OUTCOMES,
    DECISION_COST,
    EJECTIONS,
    WAITS_FOR_WEIGHT,
    CANDIDATES,
    CANDIDATES_EJECTED,
    WAITING,
    WAITING_LIMIT,
    WAITING_PARKED,
    OPEN_REQUESTS,
    IN_FLIGHT,
    IN_FLIGHT_LIMIT,
    DEADLINE_MULTIPLE,
    FLOOR_IN_FORCE,
    CANDIDATE_IN_FLIGHT,
    CANDIDATE_IN_FLIGHT_LIMIT,
    CANDIDATE_NO_LOAD,
    ADAPTIVE_LIMITED,
    SCORE_COMPONENT,
    CANDIDATE_PROBABILITY,
    SHADOW_AGREEMENT,
    SHADOW_WINNER_PROBABILITY,
    SHADOW_DECISIONS,
    SNAPSHOT_SAVES,
];

/// Every discovery metric name above.
pub const DISCOVERY: [&str; 7] = [
    DISCOVERY_REQUESTS,
    DISCOVERY_REFRESH_DURATION,
    DISCOVERY_CACHE_SIZE,
    DISCOVERY_CACHE_AGE,
    DISCOVERY_IN_FLIGHT,
    PERF_SCORE_ERRORS,
    PERF_SCORE_UPDATES,
];

/// The label value that collects every candidate past the cap.
pub const OTHER: &str = "other";

/// The `arm` label value when the config has no arms.
pub const DEFAULT_ARM: &str = "default";

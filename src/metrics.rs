//! Metric names, descriptions and recording through the [`metrics`] facade.
//!
//! The library only emits: without an installed recorder every call here is a no-op. An
//! executable installs an exporter once, e.g. `install_prometheus` (feature `prometheus`,
//! on by default), and calls [`describe`] so every metric carries its help text and unit.
//!
//! What is recorded, and when (names in [`names`]):
//!
//! | source | metrics |
//! |---|---|
//! | [`CoordinatorMetrics::on_event`] | decisions by arm, candidate and reason, winner probability and wait time by arm, filter fallbacks, rejections by reason, reclaimed attempts, attempts released unreported past their advice (as `timeout` outcomes, [`Event::TimedOut`]) |
//! | [`CoordinatorMetrics::on_outcome`] | attempt outcomes by arm, candidate and class |
//! | [`CoordinatorMetrics::on_decision_cost`] | decision cost |
//! | [`CoordinatorMetrics::on_gauges`] (when the coordinator starts, then periodic) | waiting and open requests, in flight vs each limit, score components and draw probability per candidate, candidates and ejected candidates, ejections, shadow agreement, winner probability and decisions |
//!
//! **Arms**: decisions, winner probability, wait time and outcomes carry an `arm` label, the
//! name of the live A/B arm that drew the grant, or [`names::DEFAULT_ARM`] when the config has
//! no arms. The arm names are read from the core by [`CoordinatorMetrics::sync_arms`] (call it
//! after a config change; [`CoordinatorMetrics::on_gauges`] does too). An outcome's arm is the
//! one the core says the attempt belonged to ([`Reported`], returned by
//! [`Core::outcome`](crate::core::Core::outcome)): the recorder keeps nothing per attempt.
//! (Before, it remembered each attempt's arm from its grant, and `on_outcome` took the attempt
//! and candidate; `tracked_attempts`, `forget_attempts` and `on_released` went with that map.)
//!
//! **Candidate labels are capped**: up to `cap` candidates at a time get their own `candidate`
//! label, every other one is counted as `other`, so 10,000 candidates cannot explode the
//! series count. A removed candidate keeps its label for [`LABEL_RETIRE_TICKS`] gauge ticks
//! (its last outcomes still land under it), then the label is freed for a candidate still
//! counted as `other`, so a fleet that replaces its members keeps naming them. A label is never
//! shared by two candidates at once, and a candidate that comes back gets its id's label again.
//! The departed candidate's series stay in an exporter's exposition until its idle timeout
//! drops them ([`prometheus_builder`] sets [`SERIES_IDLE_TIMEOUT`]). Label values are sanitized: control characters
//! become `_`, values are cut to [`MAX_LABEL_LEN`] bytes, a candidate literally named `other`
//! is labelled `other_`, and two ids that sanitize to the same value are told apart with a
//! `~N` suffix (the value cut shorter to keep it within the cap); so are arms' and shadows'
//! names, which label their own series.
//!
//! No metric handle is cached: each call resolves through the recorder installed *at that
//! moment*, so a `CoordinatorMetrics` built before the exporter is installed still reports.

use std::collections::{HashMap, HashSet};

use metrics::{counter, describe_counter, describe_gauge, describe_histogram, gauge, histogram};
use metrics::{Label, SharedString, Unit};

use crate::core::{CandidateId, Core, Counters, Event, FailureClass, Outcome, Reported, UNLIMITED};
use crate::decision::DecisionReason;
use crate::error::Rejection;

#[cfg(feature = "prometheus")]
mod prometheus;
#[cfg(feature = "prometheus")]
pub use prometheus::{install_prometheus, prometheus_builder, PrometheusInstallError};

mod labels;
mod named;
pub mod names;
mod saves;

pub use named::COORDINATOR_LABEL;
pub(crate) use named::{coordinator_label, recording_as};

use labels::CandidateLabels;
pub use labels::{sanitize_label, LABEL_RETIRE_TICKS};

/// Histogram bucket bounds, by metric (exporters that bucket use these).
pub const BUCKETS: [(&str, &[f64]); 4] = [
    (
        names::WINNER_PROBABILITY,
        &[0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 0.9, 0.99, 1.0],
    ),
    (
        names::WAIT_SECONDS,
        &[
            0.000_1, 0.000_5, 0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
            30.0,
        ],
    ),
    (
        names::DECISION_COST,
        &[
            1e-7, 2.5e-7, 5e-7, 1e-6, 2.5e-6, 5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 1e-3, 1e-2,
        ],
    ),
    (
        names::DISCOVERY_REFRESH_DURATION,
        &[
            0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0,
        ],
    ),
];

/// The default candidate-label cap.
pub const DEFAULT_LABEL_CAP: usize = 100;

/// How long the exporter [`prometheus_builder`] builds keeps a series nothing updated (a
/// departed candidate's, a histogram nothing recorded into) before it leaves the exposition.
/// The gauges are set at every housekeeping tick and the zero-primed counters touched, so
/// only series that stopped changing go.
pub const SERIES_IDLE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(3600);

/// Longest candidate label value, in bytes.
pub const MAX_LABEL_LEN: usize = 64;

/// Describes every metric (help text and unit) to the installed recorder. Call once, after
/// installing it.
pub fn describe() {
    use names::*;
    describe_counter!(
        DECISIONS,
        Unit::Count,
        "Decisions (grants) by arm, candidate and reason: draw, only_choice, deterministic, fallback."
    );
    describe_histogram!(
        WINNER_PROBABILITY,
        "The winner's probability in the draw that chose it, by arm and reason."
    );
    describe_histogram!(
        WAIT_SECONDS,
        Unit::Seconds,
        "Time a request waited from ready to its grant, by arm."
    );
    describe_counter!(
        FILTER_FALLBACKS,
        Unit::Count,
        "Decisions where a filter would have removed every candidate and was ignored."
    );
    describe_counter!(
        REJECTIONS,
        Unit::Count,
        "Requests answered without a slot, by reason."
    );
    describe_counter!(
        RECLAIMED,
        Unit::Count,
        "Attempts whose lease ran out; their slot was taken back as a timeout."
    );
    describe_counter!(
        OUTCOMES,
        Unit::Count,
        "Attempt outcomes by arm, candidate and class (success or the failure class)."
    );
    describe_histogram!(
        DECISION_COST,
        Unit::Seconds,
        "Time one decision (one core call of the coordinator) took."
    );
    describe_counter!(EJECTIONS, Unit::Count, "Outlier ejections started.");
    describe_counter!(
        WAITS_FOR_WEIGHT,
        Unit::Count,
        "Draws that left their request waiting for a busy candidate with weight: no free one had weight, or the roll picked one failing past hope."
    );
    describe_gauge!(CANDIDATES, Unit::Count, "Candidates known.");
    describe_gauge!(CANDIDATES_EJECTED, Unit::Count, "Candidates ejected now.");
    describe_gauge!(WAITING, Unit::Count, "Requests waiting for a slot.");
    describe_gauge!(
        WAITING_LIMIT,
        Unit::Count,
        "Most requests that may wait at once (max_waiting)."
    );
    describe_gauge!(
        WAITING_PARKED,
        Unit::Count,
        "Waiting requests no candidate that could serve them has room for (parked)."
    );
    describe_gauge!(
        OPEN_REQUESTS,
        Unit::Count,
        "Open requests, waiting or running."
    );
    describe_gauge!(
        DEADLINE_MULTIPLE,
        "Deadline advice: the multiple of a candidate's first-byte average a grant advises."
    );
    describe_gauge!(
        FLOOR_IN_FORCE,
        "Share of each draw spread uniformly over the drawn set, as in force."
    );
    describe_gauge!(
        IN_FLIGHT,
        Unit::Count,
        "Attempts in flight, all candidates."
    );
    describe_gauge!(
        IN_FLIGHT_LIMIT,
        Unit::Count,
        "Global in-flight limit (absent while unlimited)."
    );
    describe_gauge!(
        CANDIDATE_IN_FLIGHT,
        Unit::Count,
        "Attempts in flight on a candidate."
    );
    describe_gauge!(
        CANDIDATE_IN_FLIGHT_LIMIT,
        Unit::Count,
        "A candidate's in-flight limit (absent while unlimited)."
    );
    describe_gauge!(
        CANDIDATE_NO_LOAD,
        Unit::Seconds,
        "A candidate's no-load latency as adaptive limits estimate it."
    );
    describe_counter!(
        ADAPTIVE_LIMITED,
        Unit::Count,
        "Grants that filled a candidate up to its learned limit while its static limit would have taken more."
    );
    describe_gauge!(
        SCORE_COMPONENT,
        "A candidate's score component in [0, 1] at the last refresh."
    );
    describe_gauge!(
        CANDIDATE_PROBABILITY,
        "Probability that the candidate wins the next unrestricted draw if every candidate had a free slot."
    );
    describe_gauge!(
        SHADOW_AGREEMENT,
        "Share of sampled decisions where a shadow policy would have picked the live winner."
    );
    describe_gauge!(
        SHADOW_WINNER_PROBABILITY,
        "Mean probability a shadow policy gave the live winner."
    );
    describe_counter!(
        SHADOW_DECISIONS,
        Unit::Count,
        "Decisions a shadow policy was asked about."
    );
    describe_counter!(
        SNAPSHOT_SAVES,
        Unit::Count,
        "Snapshot saves by result: written, failed or skipped."
    );
    describe_discovery();
    describe_fleet();
}

/// Describes the fleet-sharing metrics.
fn describe_fleet() {
    use names::{
        FLEET_CONNECTED as METRIC_CONNECTED, FLEET_DIGESTS_APPLIED as METRIC_APPLIED,
        FLEET_DIGESTS_DROPPED as METRIC_DROPPED, FLEET_DIGESTS_REJECTED as METRIC_REJECTED,
        FLEET_DIGESTS_SENT as METRIC_SENT, FLEET_DIGESTS_URGENT as METRIC_URGENT,
        FLEET_DIGEST_ENTRIES_REJECTED as METRIC_ENTRIES,
    };
    describe_counter!(METRIC_SENT, Unit::Count, "Digests published to the fleet.");
    describe_counter!(
        METRIC_URGENT,
        Unit::Count,
        "Digests published at once on a sharp change in this coordinator's own outcomes (counted in sent too)."
    );
    describe_counter!(
        METRIC_APPLIED,
        Unit::Count,
        "Received digests the coordinator applied."
    );
    describe_counter!(
        METRIC_REJECTED,
        Unit::Count,
        "Received digests rejected, by reason."
    );
    describe_counter!(
        METRIC_DROPPED,
        Unit::Count,
        "Digests dropped (not published while disconnected, or received with the queue full), by reason."
    );
    describe_counter!(
        METRIC_ENTRIES,
        Unit::Count,
        "Entries of applied digests that the coordinator refused."
    );
    describe_gauge!(
        METRIC_CONNECTED,
        "1 while connected to the NATS server, 0 while the coordinator runs alone."
    );
}

/// Describes the discovery metrics.
fn describe_discovery() {
    use names::{
        DISCOVERY_CACHE_AGE as METRIC_CACHE_AGE, DISCOVERY_CACHE_SIZE as METRIC_CACHE_SIZE,
        DISCOVERY_IN_FLIGHT as METRIC_IN_FLIGHT,
        DISCOVERY_REFRESH_DURATION as METRIC_REFRESH_DURATION,
        DISCOVERY_REQUESTS as METRIC_REQUESTS, PERF_SCORE_ERRORS as METRIC_PERF_SCORE_ERRORS,
        PERF_SCORE_UPDATES as METRIC_PERF_SCORE_UPDATES,
    };
    describe_counter!(
        METRIC_REQUESTS,
        Unit::Count,
        "Discovery fetches of candidate info, by result: ok, error, timeout, invalid."
    );
    describe_histogram!(
        METRIC_REFRESH_DURATION,
        Unit::Seconds,
        "How long one discovery refresh pass took."
    );
    describe_gauge!(METRIC_CACHE_SIZE, "Candidates with cached info.");
    describe_gauge!(
        METRIC_CACHE_AGE,
        Unit::Seconds,
        "Age of the oldest cached candidate info."
    );
    describe_gauge!(METRIC_IN_FLIGHT, "Discovery fetches running now.");
    describe_counter!(
        METRIC_PERF_SCORE_ERRORS,
        Unit::Count,
        "Perf-score fetches that failed (previous scores kept), by reason."
    );
    describe_counter!(
        METRIC_PERF_SCORE_UPDATES,
        Unit::Count,
        "Perf-score fetches that replaced the scores."
    );
}

/// Records the coordinator's metrics, capping candidate labels.
#[derive(Debug)]
pub struct CoordinatorMetrics {
    /// `coordinator="<name>"` on every series, when named.
    name: Option<std::sync::Arc<Label>>,
    labels: CandidateLabels,
    last: Counters,
    /// The last tick set the `other` in-flight gauge.
    other_shown: bool,
    /// Labelled candidates whose gauges the last tick set.
    shown: HashSet<SharedString>,
    /// Per labelled candidate, its adaptive `limited` count at the last tick.
    limited: HashMap<SharedString, u64>,
    /// Gauges that are set only while what they show exists (a limit, a no-load estimate,
    /// the deadline advice): which the last tick set, so the next one can mark them gone.
    present: Present,
    /// The `arm` label of each arm index (empty: no arms).
    arms: Vec<SharedString>,
    /// The arms' names those labels were made from.
    arm_names: Vec<String>,
    /// Each shadow's `sampled` count at the last tick (a config change restarts them).
    shadow_sampled: HashMap<String, u64>,
    /// The snapshot saves (written, failed, skipped) counted up to the last tick.
    saves: [u64; 3],
}

/// The conditional gauges the last tick set.
#[derive(Debug, Default)]
struct Present {
    global_limit: bool,
    deadline_multiple: bool,
    candidate_limit: HashSet<SharedString>,
    no_load: HashSet<SharedString>,
}

/// What a conditional gauge reads once what it showed is gone (a limit removed, adaptive
/// limits turned off, a candidate removed): no value, until the exporter forgets the series.
const GONE: f64 = f64::NAN;

/// Sets gauge `name` to `value` while there is one; the first tick without marks it
/// [`GONE`]. `present` says whether the last tick set it.
fn set_while(name: &'static str, value: Option<f64>, present: &mut bool) {
    match value {
        Some(v) => gauge!(name).set(v),
        None if *present => gauge!(name).set(GONE),
        None => {}
    }
    *present = value.is_some();
}

impl Default for CoordinatorMetrics {
    fn default() -> Self {
        CoordinatorMetrics::new(DEFAULT_LABEL_CAP)
    }
}

impl CoordinatorMetrics {
    /// A recorder that labels at most `cap` candidates by name; the rest become `other`.
    pub fn new(cap: usize) -> Self {
        CoordinatorMetrics {
            name: None,
            other_shown: false,
            labels: CandidateLabels::new(cap),
            last: Counters::default(),
            shown: HashSet::new(),
            limited: HashMap::new(),
            present: Present::default(),
            arms: Vec::new(),
            arm_names: Vec::new(),
            shadow_sampled: HashMap::new(),
            saves: [0; 3],
        }
    }

    /// Labels every series this recorder writes `coordinator="<name>"` (sanitized as a
    /// candidate label is), so several coordinators in one process keep their series apart:
    /// unnamed, two would set the same gauges and add to the same counters. The dashboard's
    /// `coordinator` variable selects among them. Series of an unnamed coordinator carry no
    /// such label. Costs a key with one more label at each update.
    pub fn named(mut self, name: &str) -> Self {
        self.name = Some(std::sync::Arc::new(coordinator_label(name)));
        self
    }

    /// Runs `f` with what it records labelled by this recorder's name, if it has one.
    #[inline]
    fn as_named<T>(&mut self, f: impl FnOnce(&mut Self) -> T) -> T {
        // Shared, so naming costs no copy of the label per update.
        let name = self.name.clone();
        named::recording_as(name.as_deref(), || f(self))
    }

    /// The `coordinator` label's value, when named.
    pub fn name(&self) -> Option<&str> {
        self.name.as_deref().map(Label::value)
    }

    /// Reads the arm names of the config in force; call it after the config changes (grants
    /// name their arm by index).
    pub fn sync_arms(&mut self, core: &Core) {
        let names = core.arm_names();
        if names.len() == self.arm_names.len()
            && names.iter().zip(&self.arm_names).all(|(n, m)| n == m)
        {
            return;
        }
        self.arms = labels::unique_labels(names.iter().copied());
        self.arm_names = names.into_iter().map(String::from).collect();
    }

    /// The `arm` label value of an arm index ([`names::DEFAULT_ARM`] without arms).
    pub fn arm_label(&self, arm: Option<usize>) -> SharedString {
        match arm.and_then(|a| self.arms.get(a)) {
            Some(l) => l.clone(),
            None => SharedString::const_str(names::DEFAULT_ARM),
        }
    }

    /// How many candidates have a label of their own (at most the cap).
    pub fn labelled_candidates(&self) -> usize {
        self.labels.len()
    }

    /// The label value `id` is recorded under (assigning one if the cap allows).
    pub fn candidate_label(&mut self, id: &CandidateId) -> SharedString {
        self.labels.get(id)
    }

    /// Records a grant, rejection or reclaim (a request's end records nothing).
    pub fn on_event(&mut self, event: &Event) {
        self.as_named(|m| m.on_event_now(event))
    }

    fn on_event_now(&mut self, event: &Event) {
        match event {
            Event::Granted(g) => {
                let candidate = self.labels.get(&g.candidate);
                let arm = self.arm_label(g.arm);
                counter!(names::DECISIONS, "arm" => arm.clone(), "candidate" => candidate, "reason" => g.reason.as_str())
                    .increment(1);
                histogram!(names::WINNER_PROBABILITY, "arm" => arm.clone(), "reason" => g.reason.as_str())
                    .record(g.probability);
                histogram!(names::WAIT_SECONDS, "arm" => arm).record(g.waited_s);
                if g.reason == DecisionReason::Fallback {
                    counter!(names::FILTER_FALLBACKS).increment(1);
                }
            }
            Event::Rejected { reason, .. } => {
                counter!(names::REJECTIONS, "reason" => reason.as_str()).increment(1);
            }
            Event::Reclaimed { .. } => counter!(names::RECLAIMED).increment(1),
            Event::TimedOut(reported) => {
                self.on_outcome_now(reported, &Outcome::failure(FailureClass::Timeout));
            }
            Event::Closed { .. } => {}
        }
    }

    /// Records an attempt's outcome, under the candidate and arm the core says it belonged to.
    pub fn on_outcome(&mut self, reported: &Reported, outcome: &Outcome) {
        self.as_named(|m| m.on_outcome_now(reported, outcome))
    }

    fn on_outcome_now(&mut self, reported: &Reported, outcome: &Outcome) {
        let candidate = self.labels.get(&reported.candidate);
        let arm = self.arm_label(reported.arm);
        counter!(names::OUTCOMES, "arm" => arm, "candidate" => candidate, "outcome" => outcome.label())
            .increment(1);
    }

    /// Records how long one decision (a handler's core call) took, seconds.
    pub fn on_decision_cost(&mut self, seconds: f64) {
        self.as_named(|m| m.on_decision_cost_now(seconds))
    }

    fn on_decision_cost_now(&mut self, seconds: f64) {
        if seconds.is_finite() && seconds >= 0.0 {
            histogram!(names::DECISION_COST).record(seconds);
        }
    }

    /// Records gauges read from the core: waiting, in flight vs limits, components, counters.
    ///
    /// O(candidates): meant for a periodic tick, not for every message.
    pub fn on_gauges(&mut self, core: &Core) {
        self.as_named(|m| m.on_gauges_now(core))
    }

    fn on_gauges_now(&mut self, core: &Core) {
        // Every tick, so an exporter's idle timeout never drops a series still at zero.
        self.prime();
        self.labels.start_tick();
        self.sync_arms(core);
        self.on_shadows_now(core);
        let limits = core.limits();
        gauge!(names::WAITING).set(core.waiting() as f64);
        gauge!(names::WAITING_LIMIT).set(limits.max_waiting as f64);
        gauge!(names::WAITING_PARKED).set(core.parked() as f64);
        gauge!(names::OPEN_REQUESTS).set(core.open_requests() as f64);
        gauge!(names::IN_FLIGHT).set(f64::from(core.in_flight()));
        let global = (limits.global != UNLIMITED).then(|| f64::from(limits.global));
        set_while(
            names::IN_FLIGHT_LIMIT,
            global,
            &mut self.present.global_limit,
        );
        gauge!(names::CANDIDATES).set(core.candidate_count() as f64);
        set_while(
            names::DEADLINE_MULTIPLE,
            core.deadline_multiple(),
            &mut self.present.deadline_multiple,
        );
        gauge!(names::FLOOR_IN_FORCE).set(core.floor_in_force());

        let (mut other_in_flight, mut other_limit, mut other_count) = (0.0, 0.0, 0usize);
        let mut ejected = 0usize;
        let mut shown = HashSet::with_capacity(self.shown.len());
        let mut limit_shown = HashSet::new();
        let mut no_load_shown = HashSet::new();
        let preference: HashMap<CandidateId, f64> = core.preference().into_iter().collect();
        // The core lists each id once: a candidate added again while attempts of its
        // removed self run takes their slot back.
        for view in core.candidates() {
            let in_flight = f64::from(view.in_flight);
            if view.ejected {
                ejected += 1;
            }
            let label = self.labels.get(&view.info.id);
            let limited = view.limit != UNLIMITED;
            if CandidateLabels::is_other(&label) {
                other_in_flight += in_flight;
                if limited {
                    other_limit += f64::from(view.limit);
                }
                other_count += 1;
                continue;
            }
            gauge!(names::CANDIDATE_IN_FLIGHT, "candidate" => label.clone()).set(in_flight);
            if limited {
                gauge!(names::CANDIDATE_IN_FLIGHT_LIMIT, "candidate" => label.clone())
                    .set(f64::from(view.limit));
                limit_shown.insert(label.clone());
            }
            for (component, value) in view.components.entries() {
                gauge!(names::SCORE_COMPONENT, "candidate" => label.clone(), "component" => component)
                    .set(value);
            }
            gauge!(names::CANDIDATE_PROBABILITY, "candidate" => label.clone())
                .set(preference.get(&view.info.id).copied().unwrap_or(0.0));
            if view.adaptive.is_some() {
                if let Some(ms) = view.no_load_ms() {
                    gauge!(names::CANDIDATE_NO_LOAD, "candidate" => label.clone()).set(ms / 1000.0);
                    no_load_shown.insert(label.clone());
                }
                // A label new here takes the count as its base (a candidate that was `other`
                // until a label was freed for it brings its whole count, never exported); a
                // restarted core starts again from zero, below the base.
                let last = self
                    .limited
                    .insert(label.clone(), view.limited)
                    .unwrap_or(view.limited);
                counter!(names::ADAPTIVE_LIMITED, "candidate" => label.clone())
                    .increment(view.limited.saturating_sub(last));
            }
            shown.insert(label);
        }
        // A candidate that is gone holds nothing and cannot win: say so rather than leave its
        // last values standing.
        for gone in self.shown.difference(&shown) {
            gauge!(names::CANDIDATE_IN_FLIGHT, "candidate" => gone.clone()).set(0.0);
            gauge!(names::CANDIDATE_PROBABILITY, "candidate" => gone.clone()).set(0.0);
        }
        self.limited.retain(|label, _| shown.contains(label));
        self.shown = shown;
        self.labels.retire_absent();
        if other_count > 0 || self.other_shown {
            // Once every `other` candidate got a label of its own, `other` holds nothing.
            self.other_shown = other_count > 0;
            gauge!(names::CANDIDATE_IN_FLIGHT, "candidate" => names::OTHER).set(other_in_flight);
        }
        if other_count > 0 && other_limit > 0.0 {
            gauge!(names::CANDIDATE_IN_FLIGHT_LIMIT, "candidate" => names::OTHER).set(other_limit);
            limit_shown.insert(names::OTHER.into());
        }
        for gone in self.present.candidate_limit.difference(&limit_shown) {
            gauge!(names::CANDIDATE_IN_FLIGHT_LIMIT, "candidate" => gone.clone()).set(GONE);
        }
        for gone in self.present.no_load.difference(&no_load_shown) {
            gauge!(names::CANDIDATE_NO_LOAD, "candidate" => gone.clone()).set(GONE);
        }
        self.present.candidate_limit = limit_shown;
        self.present.no_load = no_load_shown;
        gauge!(names::CANDIDATES_EJECTED).set(ejected as f64);

        let now = core.counters();
        // A restarted core starts its counters again from zero: take the new values as the base.
        let ejections = now.ejections.saturating_sub(self.last.ejections);
        if ejections > 0 {
            counter!(names::EJECTIONS).increment(ejections);
        }
        let waits = now
            .waited_for_weight
            .saturating_sub(self.last.waited_for_weight);
        if waits > 0 {
            counter!(names::WAITS_FOR_WEIGHT).increment(waits);
        }
        self.last = now;
    }

    /// After a config change took effect: arm names may differ and shadow counts restarted
    /// (call [`CoordinatorMetrics::on_shadows`] just before the change so none are lost).
    pub fn on_config_set(&mut self, core: &Core) {
        self.shadow_sampled.clear();
        self.sync_arms(core);
    }

    /// Shadow agreement and winner probability gauges, and the decisions each was asked about
    /// since the last call.
    pub fn on_shadows(&mut self, core: &Core) {
        self.as_named(|m| m.on_shadows_now(core))
    }

    fn on_shadows_now(&mut self, core: &Core) {
        let stats = core.shadow_stats();
        let mut seen = HashMap::with_capacity(stats.len());
        let labels = labels::unique_labels(stats.iter().map(|s| s.name.as_str()));
        for (s, label) in stats.iter().zip(labels) {
            let last = self.shadow_sampled.get(&s.name).copied().unwrap_or(0);
            // A config change restarts a shadow's counts: everything counted since is new.
            let new = if s.sampled >= last {
                s.sampled - last
            } else {
                s.sampled
            };
            counter!(names::SHADOW_DECISIONS, "shadow" => label.clone()).increment(new);
            gauge!(names::SHADOW_AGREEMENT, "shadow" => label.clone()).set(s.agreement());
            gauge!(names::SHADOW_WINNER_PROBABILITY, "shadow" => label)
                .set(s.mean_winner_probability());
            seen.insert(s.name.clone(), s.sampled);
        }
        self.shadow_sampled = seen;
    }

    /// Creates the unlabelled and reason-labelled counters at zero (touching them again at
    /// every tick), so a dashboard shows 0 instead of "no data" for things that have not
    /// happened yet, however long the exporter's idle timeout.
    fn prime(&mut self) {
        for r in Rejection::ALL {
            counter!(names::REJECTIONS, "reason" => r.as_str()).increment(0);
        }
        counter!(names::FILTER_FALLBACKS).increment(0);
        counter!(names::RECLAIMED).increment(0);
        counter!(names::EJECTIONS).increment(0);
        counter!(names::WAITS_FOR_WEIGHT).increment(0);
    }
}

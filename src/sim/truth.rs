//! The hidden behaviour of candidates: what an attempt does, given the load it lands on.
//!
//! One model for every consumer: the virtual-time engine behind `selcoord simulate` and the
//! real-time `selcoord demo` both run their attempts through [`Truth::attempt`].

use rand::{Rng, RngExt};

use super::dist::{sample, Dist, MAX_MS};
use super::scenario::{CandidateSpec, Knee, Slowdown, TimelineEvent};
use crate::core::{FailureClass, Outcome};

/// One candidate's hidden truth: how its attempts succeed or fail and how long they take,
/// given how many attempts are in flight on it.
///
/// Built from a scenario's [`CandidateSpec`]; a `degrade` event of the timeline changes it
/// ([`Truth::degrade`]) and a `heal` event returns it to the file values ([`Truth::from_spec`]
/// again).
///
/// ```
/// use rand::{rngs::SmallRng, SeedableRng};
/// use selection_coordinator::sim::{Scenario, Truth};
///
/// let scenario = Scenario::load("pairwise-deadlock").unwrap();
/// let truth = Truth::from_spec(&scenario.candidates[0]);
/// let mut rng = SmallRng::seed_from_u64(1);
/// // One attempt landing on an idle candidate (itself the only one in flight).
/// let result = truth.attempt(1, 0, Some(500.0), &mut rng);
/// assert!(result.end_s() <= 0.5);
/// assert_eq!(result.is_success(), result.first_byte_s().is_some());
/// ```
#[derive(Clone, Debug)]
pub struct Truth {
    success: f64,
    failure: FailureClass,
    // Read by the oracle baseline.
    pub(crate) failure_ms: Dist,
    connect_ms: Dist,
    ttfb_ms: Option<Dist>,
    duration_ms: Dist,
    bandwidth_mbps: Option<f64>,
    capacity: Option<u32>,
    overload_per_extra: f64,
    servers: u32,
    service_ms: Option<Dist>,
    queue_limit: Option<u32>,
    slowdown: Option<Slowdown>,
    knee: Option<Knee>,
}

/// What one attempt did: its outcome for the policy, when it ends and when its first byte came.
#[derive(Clone, Copy, Debug)]
pub struct AttemptResult {
    // Read directly by the simulator's engine; the accessors are the public face.
    pub(crate) outcome: Outcome,
    pub(crate) ok: bool,
    /// From grant to the end, seconds.
    pub(crate) end_s: f64,
    /// From grant to the first byte (successes), seconds.
    pub(crate) first_byte_s: f64,
}

impl AttemptResult {
    /// The same attempt started `by_s` seconds later than its grant (its wait for a server
    /// and its service): every time from the grant grows by `by_s`.
    pub(crate) fn delayed(mut self, by_s: f64) -> Self {
        self.end_s += by_s;
        if self.ok {
            self.first_byte_s += by_s;
            if let Outcome::Success(s) = &mut self.outcome {
                let ms = by_s * 1000.0;
                s.duration_ms = s.duration_ms.map(|d| d + ms);
                s.ttfb_ms = s.ttfb_ms.map(|t| t + ms);
            }
        }
        self
    }

    /// The same attempt taking `factor` times as long: every time from the grant scales.
    pub(crate) fn scaled(mut self, factor: f64) -> Self {
        if factor == 1.0 {
            return self;
        }
        self.end_s *= factor;
        if self.ok {
            self.first_byte_s *= factor;
            if let Outcome::Success(s) = &mut self.outcome {
                s.duration_ms = s.duration_ms.map(|d| d * factor);
                s.ttfb_ms = s.ttfb_ms.map(|t| t * factor);
                s.connect_ms = s.connect_ms.map(|c| c * factor);
            }
        }
        self
    }

    /// Whether the attempt runs into a timeout of `timeout_ms`: its first byte (or its
    /// failure) would come later.
    pub(crate) fn times_out(&self, timeout_ms: Option<f64>) -> bool {
        match timeout_ms {
            Some(t) => {
                let t_s = t / 1000.0;
                (self.ok && self.first_byte_s > t_s) || (!self.ok && self.end_s > t_s)
            }
            None => false,
        }
    }

    /// A `timeout` failure at `timeout_ms` after the grant.
    pub(crate) fn timeout(timeout_ms: f64) -> Self {
        AttemptResult {
            outcome: Outcome::failure(FailureClass::Timeout),
            ok: false,
            end_s: timeout_ms / 1000.0,
            first_byte_s: f64::INFINITY,
        }
    }

    /// This attempt, or a timeout at `timeout_ms` if it runs into it.
    pub(crate) fn with_timeout(self, timeout_ms: Option<f64>) -> Self {
        match timeout_ms {
            Some(t) if self.times_out(timeout_ms) => Self::timeout(t),
            _ => self,
        }
    }

    /// The outcome to report to the coordinator (for a success, its client-side timings).
    pub fn outcome(&self) -> Outcome {
        self.outcome
    }

    /// Whether the attempt succeeded.
    pub fn is_success(&self) -> bool {
        self.ok
    }

    /// Seconds from the grant to the end of the attempt: when its outcome is known and its
    /// slot is free again.
    pub fn end_s(&self) -> f64 {
        self.end_s
    }

    /// Seconds from the grant to the first byte of a success; `None` for a failure.
    pub fn first_byte_s(&self) -> Option<f64> {
        self.ok.then_some(self.first_byte_s)
    }
}

impl Truth {
    /// The truth a scenario file gives a candidate.
    pub fn from_spec(s: &CandidateSpec) -> Self {
        Truth {
            success: s.success,
            failure: s.failure,
            failure_ms: s.failure_ms.clone(),
            connect_ms: s.connect_ms.clone(),
            ttfb_ms: s.ttfb_ms.clone(),
            duration_ms: s.duration_ms.clone(),
            bandwidth_mbps: s.bandwidth_mbps,
            capacity: s.capacity,
            overload_per_extra: s.overload_per_extra,
            servers: s.servers.unwrap_or(1),
            service_ms: s.service_ms.clone(),
            queue_limit: s.queue_limit,
            slowdown: s.slowdown,
            knee: s.knee,
        }
    }

    /// Applies a `degrade` event's overrides; fields the event leaves out keep their value.
    pub fn degrade(&mut self, ev: &TimelineEvent) {
        if let Some(s) = ev.success {
            self.success = s;
        }
        if let Some(f) = ev.failure {
            self.failure = f;
        }
        if let Some(d) = &ev.failure_ms {
            self.failure_ms = d.clone();
        }
        if let Some(d) = &ev.ttfb_ms {
            self.ttfb_ms = Some(d.clone());
        }
        if let Some(c) = ev.capacity {
            self.capacity = Some(c);
        }
        if let Some(d) = &ev.connect_ms {
            self.connect_ms = d.clone();
        }
        if let Some(d) = &ev.duration_ms {
            self.duration_ms = d.clone();
        }
        if let Some(b) = ev.bandwidth_mbps {
            self.bandwidth_mbps = Some(b);
        }
        if let Some(o) = ev.overload_per_extra {
            self.overload_per_extra = o;
        }
        if let Some(n) = ev.servers {
            self.servers = n;
        }
        if let Some(d) = &ev.service_ms {
            self.service_ms = Some(d.clone());
        }
        if let Some(l) = ev.queue_limit {
            self.queue_limit = Some(l);
        }
        if let Some(v) = ev.slowdown {
            self.slowdown = Some(v);
        }
        if let Some(k) = ev.knee {
            self.knee = Some(k);
        }
    }

    /// The attempts in flight it serves at its best: the servers of a queue, its `capacity`,
    /// its `knee`'s best concurrency (the smallest of those it has, at least 1); `None`
    /// without any.
    pub fn concurrency_capacity(&self) -> Option<u32> {
        let servers = self.is_queue().then_some(self.servers);
        [
            servers,
            self.capacity,
            self.knee.and_then(|k| k.best_concurrency()),
        ]
        .into_iter()
        .flatten()
        .min()
        .map(|c| c.max(1))
    }

    /// Whether attempts queue for a server (the candidate has a `service_ms`).
    pub fn is_queue(&self) -> bool {
        self.service_ms.is_some()
    }

    /// Parallel servers of a queueing candidate (`u32::MAX` without a queue: no attempt waits).
    pub fn servers(&self) -> u32 {
        if self.is_queue() {
            self.servers
        } else {
            u32::MAX
        }
    }

    /// How many attempts may wait for a server before new ones fail with `overload`.
    pub fn queue_limit(&self) -> Option<u32> {
        self.queue_limit
    }

    /// The time-varying service, if any.
    pub fn slowdown(&self) -> Option<Slowdown> {
        self.slowdown
    }

    /// The mean base service time, ms (0 without a queue).
    pub fn mean_service_ms(&self) -> f64 {
        self.service_ms.as_ref().map_or(0.0, Dist::mean)
    }

    /// One connect time, ms (0 without one): what a monitor's round trip takes.
    pub(crate) fn sample_connect_ms<R: Rng + ?Sized>(&self, rng: &mut R) -> f64 {
        sample(&self.connect_ms, rng)
    }

    /// One service time at base rate, ms (0 without a queue).
    pub(crate) fn sample_service_ms<R: Rng + ?Sized>(&self, rng: &mut R) -> f64 {
        self.service_ms.as_ref().map_or(0.0, |d| sample(d, rng))
    }

    /// Whether an attempt landing on `load` in flight (itself included) fails with `overload`
    /// because of the load alone; draws one number from `rng`.
    pub(crate) fn overload_roll<R: Rng + ?Sized>(&self, load: u32, rng: &mut R) -> bool {
        let over = self.overload_probability(load);
        let roll: f64 = rng.random();
        roll < over
    }

    /// What an attempt that was not overloaded does: the `success` roll, then its timings
    /// from the moment it is served (no timeout applied).
    pub(crate) fn serve<R: Rng + ?Sized>(&self, bytes: u64, rng: &mut R) -> AttemptResult {
        let fail = (rng.random::<f64>() >= self.success).then_some(self.failure);
        self.respond(fail, bytes, rng)
    }

    /// An overload failure: fast, after `failure_ms`.
    pub(crate) fn overloaded<R: Rng + ?Sized>(&self, rng: &mut R) -> AttemptResult {
        self.respond(Some(FailureClass::Overload), 0, rng)
    }

    /// The probability of an overload failure caused by load alone, with `load` attempts in
    /// flight counting the new one.
    pub(crate) fn overload_probability(&self, load: u32) -> f64 {
        match self.capacity {
            Some(c) if load > c => (self.overload_per_extra * (load - c) as f64).min(1.0),
            _ => 0.0,
        }
    }

    /// The probability that an attempt landing on `load` in flight (itself included) succeeds.
    pub fn success_probability(&self, load: u32) -> f64 {
        self.success * (1.0 - self.overload_probability(load))
    }

    /// The latency factor of an attempt landing on `load` attempts in flight (itself
    /// included): its knee's, 1 without one (a queue's slows by its wait instead).
    pub(crate) fn knee_factor(&self, load: u32) -> f64 {
        match self.knee {
            Some(k) if !self.is_queue() => k.factor(load),
            _ => 1.0,
        }
    }

    /// Mean milliseconds of a failed attempt landing on `load` attempts in flight: an
    /// overload failure takes `failure_ms` as it is, any other the knee scales, as
    /// [`Truth::attempt`] does.
    pub(crate) fn mean_failure_ms(&self, load: u32) -> f64 {
        let failure_ms = self.failure_ms.mean();
        let overload = self.overload_probability(load);
        let other = (1.0 - overload) * (1.0 - self.success);
        if self.failure == FailureClass::Overload || overload + other <= 0.0 {
            return failure_ms;
        }
        failure_ms * (overload + other * self.knee_factor(load)) / (overload + other)
    }

    /// The probability that a served attempt's first byte comes within `timeout_ms` of its
    /// grant, the connect time taken at its mean (a queue's wait and service not counted: the
    /// oracle reads those from the queue itself).
    pub(crate) fn first_byte_within(&self, timeout_ms: f64) -> f64 {
        let left = timeout_ms - self.connect_ms.mean();
        match &self.ttfb_ms {
            Some(t) => t.cdf(left),
            None => self.duration_ms.cdf(left),
        }
    }

    /// Expected time from grant to first byte of a success, ms.
    /// For a queue, service at the base rate included (the wait is not).
    pub(crate) fn mean_first_byte_ms(&self) -> f64 {
        self.mean_service_ms()
            + match &self.ttfb_ms {
                Some(t) => self.connect_ms.mean() + t.mean(),
                None => self.connect_ms.mean() + self.duration_ms.mean(),
            }
    }

    /// Mean milliseconds from a success's first byte to its end when it sends `bytes`: the
    /// duration and the transfer that follow a first byte (0 without `ttfb_ms`, where the
    /// first byte is the end of the whole attempt).
    pub(crate) fn mean_after_first_byte_ms(&self, bytes: u64) -> f64 {
        if self.ttfb_ms.is_none() {
            return 0.0;
        }
        self.duration_ms.mean() + self.transfer_ms(bytes)
    }

    /// Milliseconds to send `bytes` at this candidate's bandwidth (0 without one), at most
    /// the longest time a scenario may give (a timeline can set a bandwidth near 0).
    fn transfer_ms(&self, bytes: u64) -> f64 {
        match self.bandwidth_mbps {
            Some(mbps) if bytes > 0 => transfer_ms(bytes, mbps).min(MAX_MS),
            _ => 0.0,
        }
    }

    /// Runs one attempt that lands on `load` attempts in flight (itself included), transfers
    /// `bytes` (0: request-response) and gives up after `timeout_ms` without a first byte
    /// (`None`: never).
    ///
    /// Past `capacity`, each extra attempt in flight adds `overload_per_extra` to the odds of
    /// an overload failure; otherwise the attempt succeeds with the candidate's `success`
    /// probability. Durations are drawn from the candidate's distributions with `rng`, so a
    /// seeded `rng` makes the result reproducible. A failure ends after `failure_ms`; a
    /// success after connect, time to first byte, the transfer at `bandwidth_mbps` and
    /// `duration_ms`. An attempt whose first byte (or failure) would come after the timeout
    /// fails with [`FailureClass::Timeout`] at the timeout.
    pub fn attempt<R: Rng + ?Sized>(
        &self,
        load: u32,
        bytes: u64,
        timeout_ms: Option<f64>,
        rng: &mut R,
    ) -> AttemptResult {
        let fail_class = if self.overload_roll(load, rng) {
            Some(FailureClass::Overload)
        } else if rng.random::<f64>() >= self.success {
            Some(self.failure)
        } else {
            None
        };
        let mut r = self.respond(fail_class, bytes, rng);
        if let (Some(k), false) = (self.knee, fail_class == Some(FailureClass::Overload)) {
            if !self.is_queue() {
                r = r.scaled(k.factor(load));
            }
        }
        // No attempt outlasts the longest time a scenario may give (far past a knee without a
        // timeout, a transfer at a bandwidth a timeline set near 0): a run reaches every time.
        let cap_s = MAX_MS / 1000.0;
        r.end_s = r.end_s.min(cap_s);
        if r.first_byte_s.is_finite() {
            // A failure has none (infinite), and keeps it.
            r.first_byte_s = r.first_byte_s.min(cap_s);
        }
        if self.is_queue() {
            // Without an engine around it there is no queue to wait in: service alone.
            r = r.delayed(self.sample_service_ms(rng) / 1000.0);
        }
        r.with_timeout(timeout_ms)
    }

    /// Timings of an attempt that fails with `fail_class` or (`None`) succeeds, from the
    /// moment it is served; no timeout applied.
    fn respond<R: Rng + ?Sized>(
        &self,
        fail_class: Option<FailureClass>,
        bytes: u64,
        rng: &mut R,
    ) -> AttemptResult {
        match fail_class {
            Some(class) => AttemptResult {
                outcome: Outcome::failure(class),
                ok: false,
                end_s: sample(&self.failure_ms, rng) / 1000.0,
                first_byte_s: f64::INFINITY,
            },
            None => {
                let connect = sample(&self.connect_ms, rng);
                let ttfb = self.ttfb_ms.as_ref().map(|d| sample(d, rng));
                let transfer = self.transfer_ms(bytes);
                let duration = transfer + sample(&self.duration_ms, rng);
                let total = connect + ttfb.unwrap_or(0.0) + duration;
                let first_byte = match ttfb {
                    Some(t) => connect + t,
                    None => total,
                };
                let outcome = match ttfb {
                    // Request-response: only the duration is observable.
                    None => Outcome::Success(crate::core::Success {
                        duration_ms: Some(total),
                        ..Default::default()
                    }),
                    // ttfb as a client measures it: from the start of the attempt.
                    Some(t) => Outcome::Success(crate::core::Success {
                        connect_ms: Some(connect),
                        ttfb_ms: Some(connect + t),
                        bytes: (bytes > 0).then_some(bytes),
                        duration_ms: Some(total),
                        feedback: None,
                    }),
                };
                AttemptResult {
                    outcome,
                    ok: true,
                    end_s: total / 1000.0,
                    first_byte_s: first_byte / 1000.0,
                }
            }
        }
    }
}

/// Milliseconds to send `bytes` at `mbps` megabits per second.
pub(crate) fn transfer_ms(bytes: u64, mbps: f64) -> f64 {
    bytes as f64 * 8.0 / (mbps * 1e6) * 1000.0
}

/// The sooner of two optional timeouts (`None`: never).
pub(crate) fn sooner(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

#[cfg(test)]
mod tests {
    use rand::rngs::SmallRng;
    use rand::SeedableRng;

    use super::*;

    fn spec(toml_src: &str) -> CandidateSpec {
        toml::from_str(toml_src).expect("a valid candidate")
    }

    #[test]
    fn overload_past_capacity_lowers_the_success_probability() {
        let t = Truth::from_spec(&spec(
            "id = 'a'\nsuccess = 0.9\ncapacity = 2\noverload_per_extra = 0.25",
        ));
        assert_eq!(t.success_probability(2), 0.9);
        assert!((t.success_probability(4) - 0.9 * 0.5).abs() < 1e-12);
        assert_eq!(t.success_probability(10), 0.0);
    }

    #[test]
    fn a_success_reports_its_client_side_timings() {
        let t = Truth::from_spec(&spec(
            "id = 'a'\nsuccess = 1.0\nconnect_ms = 5.0\nttfb_ms = 10.0\nduration_ms = 20.0\n\
             bandwidth_mbps = 8.0",
        ));
        let r = t.attempt(1, 1000, None, &mut SmallRng::seed_from_u64(1));
        assert!(r.is_success());
        // 1000 bytes at 8 Mbit/s take 1 ms.
        assert!((r.end_s() - 0.036).abs() < 1e-9, "{}", r.end_s());
        assert_eq!(r.first_byte_s(), Some(0.015));
        let Outcome::Success(s) = r.outcome() else {
            panic!("a success, got {:?}", r.outcome())
        };
        assert_eq!(
            (s.connect_ms, s.ttfb_ms, s.bytes),
            (Some(5.0), Some(15.0), Some(1000))
        );
    }

    #[test]
    fn a_late_first_byte_is_a_timeout_at_the_timeout() {
        let t = Truth::from_spec(&spec(
            "id = 'a'\nsuccess = 1.0\nconnect_ms = 20.0\nttfb_ms = 200.0",
        ));
        let r = t.attempt(1, 0, Some(150.0), &mut SmallRng::seed_from_u64(1));
        assert_eq!(r.outcome(), Outcome::failure(FailureClass::Timeout));
        assert_eq!(r.end_s(), 0.15);
        assert_eq!(r.first_byte_s(), None);
    }

    #[test]
    fn degrade_overrides_only_what_the_event_names() {
        let base = spec("id = 'a'\nsuccess = 0.99\nfailure = 'refused'\nfailure_ms = 3.0");
        let mut t = Truth::from_spec(&base);
        let ev: TimelineEvent =
            toml::from_str("at_s = 1.0\naction = 'degrade'\ncandidate = 'a'\nsuccess = 0.0")
                .expect("a valid event");
        t.degrade(&ev);
        assert_eq!(t.success_probability(1), 0.0);
        let r = t.attempt(1, 0, None, &mut SmallRng::seed_from_u64(7));
        assert_eq!(r.outcome(), Outcome::failure(FailureClass::Refused));
        assert_eq!(r.end_s(), 0.003);
    }

    #[test]
    fn degrade_changes_every_timing_and_load_field() {
        let base = spec(
            "id = 'a'\nsuccess = 1.0\nconnect_ms = 1.0\nttfb_ms = 2.0\nduration_ms = 3.0\n\
             bandwidth_mbps = 8.0\ncapacity = 1\noverload_per_extra = 0.0",
        );
        let mut t = Truth::from_spec(&base);
        let before = t.attempt(1, 1000, None, &mut SmallRng::seed_from_u64(1));
        // 1 + 2 + 1 (1000 bytes at 8 Mbit/s) + 3 ms.
        assert!((before.end_s() - 0.007).abs() < 1e-12, "{}", before.end_s());
        let ev: TimelineEvent = toml::from_str(
            "at_s = 1.0\naction = 'degrade'\ncandidate = 'a'\nconnect_ms = 10.0\n\
             duration_ms = 30.0\nbandwidth_mbps = 0.8\noverload_per_extra = 1.0\n\
             servers = 3\nservice_ms = 5.0\nqueue_limit = 7\n\
             slowdown = { period_ms = 100.0, factor = 2.0 }",
        )
        .expect("a valid event");
        t.degrade(&ev);
        // Service 5 ms, connect 10, ttfb 2, transfer 10, duration 30.
        let after = t.attempt(1, 1000, None, &mut SmallRng::seed_from_u64(1));
        assert!((after.end_s() - 0.057).abs() < 1e-12, "{}", after.end_s());
        assert_eq!(t.success_probability(2), 0.0);
        assert_eq!((t.servers(), t.queue_limit()), (3, Some(7)));
        assert_eq!(t.slowdown().map(|s| s.factor), Some(2.0));
        assert_eq!(t.mean_service_ms(), 5.0);
        // Heal: the file's values.
        let healed = Truth::from_spec(&base);
        assert!(!healed.is_queue() && healed.servers() == u32::MAX);
    }

    /// A candidate answering every attempt in 100 ms, with this `knee` table.
    fn link(knee: &str) -> Truth {
        Truth::from_spec(&spec(&format!(
            "id = 'a'\nsuccess = 1.0\nduration_ms = 100.0\nknee = {knee}"
        )))
    }

    /// When an attempt granted at 0 s on `load` attempts in flight ends.
    fn end_at(t: &Truth, load: u32) -> f64 {
        t.attempt(load, 0, None, &mut SmallRng::seed_from_u64(1))
            .end_s()
    }

    #[test]
    fn past_the_knee_latency_grows_by_its_factor_per_attempt() {
        let t = link("{ start = 10, exp = 1.1 }");
        let end = |load| end_at(&t, load);
        assert_eq!(end(1), 0.1);
        assert_eq!(end(10), 0.1);
        assert!((end(11) - 0.11).abs() < 1e-12, "{}", end(11));
        assert!((end(13) - 0.1331).abs() < 1e-12, "{}", end(13));
        // Far past the knee the time stays finite and times out.
        let r = t.attempt(100_000, 0, Some(1000.0), &mut SmallRng::seed_from_u64(1));
        assert_eq!(r.outcome(), Outcome::failure(FailureClass::Timeout));
    }

    #[test]
    fn mean_failure_times_scale_by_the_knee_except_an_overloads() {
        let knee = "knee = { start = 1, exp = 2.0 }";
        let with = |failure: &str| {
            Truth::from_spec(&spec(&format!(
                "id = 'a'\nsuccess = 0.5\nfailure = '{failure}'\nfailure_ms = 10.0\n\
                 duration_ms = 100.0\ncapacity = 2\noverload_per_extra = 0.5\n{knee}"
            )))
        };
        let transport = with("transport");
        assert_eq!(transport.knee_factor(1), 1.0);
        assert_eq!(transport.knee_factor(3), 4.0);
        assert_eq!(transport.mean_failure_ms(1), 10.0);
        // At 3 in flight half the attempts shed (10 ms, unscaled); of the others half fail
        // as transport errors, four times as slow: (0.5 x 10 + 0.25 x 40) / 0.75.
        assert!((transport.mean_failure_ms(3) - 20.0).abs() < 1e-9);
        // An overload failure is never scaled.
        assert_eq!(with("overload").mean_failure_ms(3), 10.0);
    }

    #[test]
    fn a_scaled_link_adds_its_share_per_attempt_in_flight() {
        // Vector's `slow-link`: 100 ms, and 100 ms more per other attempt in flight.
        let t = link("{ scale = 1.0 }");
        let end = |load| end_at(&t, load);
        assert_eq!(end(1), 0.1);
        assert!((end(2) - 0.2).abs() < 1e-12, "{}", end(2));
        assert!((end(5) - 0.5).abs() < 1e-12, "{}", end(5));
        assert_eq!(t.concurrency_capacity(), Some(1));
        // Both terms, as Vector's harness sums them: 1 + 0.5 x 11 + (1.1^2 - 1) at 12.
        let both = link("{ start = 10, exp = 1.1, scale = 0.5 }");
        let end = end_at(&both, 12);
        assert!((end - 0.1 * (1.0 + 5.5 + 0.21)).abs() < 1e-12, "{end}");
        assert_eq!(both.concurrency_capacity(), Some(10));
        // A scale under 1 alone keeps adding throughput: no best concurrency to know.
        assert_eq!(link("{ scale = 0.25 }").concurrency_capacity(), None);
    }

    #[test]
    fn the_same_seed_gives_the_same_attempts() {
        let t = Truth::from_spec(&spec(
            "id = 'a'\nsuccess = 0.5\nfailure_ms = { kind = 'exp', mean = 10.0 }\n\
             connect_ms = { kind = 'lognormal', mean = 10.0, sd = 5.0 }\nttfb_ms = 5.0",
        ));
        let run = |seed| {
            let mut rng = SmallRng::seed_from_u64(seed);
            (0..50)
                .map(|_| {
                    let r = t.attempt(1, 0, None, &mut rng);
                    (r.is_success(), r.end_s())
                })
                .collect::<Vec<_>>()
        };
        let a = run(3);
        assert_eq!(a, run(3));
        assert!(a.iter().any(|x| x.0) && a.iter().any(|x| !x.0));
    }
}

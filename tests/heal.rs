//! A candidate that was failing and answers is back at once, and the others failing with it
//! are probed at once (`ema.heal_probes`): failures that come together tend to heal together.

use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::SeedableRng;
use selection_coordinator::{
    CandidateId, CandidateInfo, Config, Core, Event, FailureClass, Next, Outcome, Request,
};

/// The time component of a candidate drawn as if its time were average: `exp(-1)`.
const AVERAGE_TIME: f64 = 0.367_879_441_171_442_33;

struct Bench {
    core: Core,
    rng: SmallRng,
    now: Instant,
}

impl Bench {
    fn new(config: Config, ids: &[&str]) -> Self {
        let now = Instant::now();
        let mut rng = SmallRng::seed_from_u64(11);
        let mut core = Core::new(config, now).unwrap();
        for id in ids {
            core.add_candidate(CandidateInfo::new(*id), now, &mut rng)
                .unwrap();
        }
        Bench { core, rng, now }
    }

    fn wait(&mut self, d: Duration) {
        self.now += d;
    }

    /// Lets the next coarse refresh pass (every 250 ms by default), where whether a probe is
    /// due is judged.
    fn refresh(&mut self) {
        self.wait(260 * MS);
        self.core.tick(self.now, &mut self.rng);
    }

    /// One attempt on `id`: granted now, reported `took` later.
    fn attempt(&mut self, id: &str, ok: bool, took: Duration) {
        let r = self
            .core
            .ready(Request::only([id]), self.now, &mut self.rng)
            .unwrap();
        let grant = std::iter::from_fn(|| self.core.poll_event())
            .find_map(|e| match e {
                Event::Granted(g) if g.request == r => Some(g),
                _ => None,
            })
            .expect("a free candidate is granted at once");
        self.now += took;
        let outcome = if ok {
            Outcome::success().first_byte(took)
        } else {
            Outcome::failure(FailureClass::Refused)
        };
        self.core.outcome(grant.attempt, outcome, self.now).unwrap();
        self.core
            .done(grant.attempt, Next::Finish, self.now, &mut self.rng)
            .unwrap();
        while self.core.poll_event().is_some() {}
    }

    /// One round: each of `ids` answers in 20 ms, one after another; then `gap` passes.
    fn answer_round(&mut self, ids: &[&str], gap: Duration) {
        for id in ids {
            self.attempt(id, true, 20 * MS);
        }
        self.wait(gap);
    }

    fn success(&self, id: &str) -> f64 {
        let view = self.core.candidate(&CandidateId::from(id)).unwrap();
        view.stats.success.unwrap()
    }

    fn time_component(&self, id: &str) -> f64 {
        let view = self.core.candidate(&CandidateId::from(id)).unwrap();
        view.components.time_to_success
    }
}

const MS: Duration = Duration::from_millis(1);

/// Answers in 20 ms, then refuses in 2 ms for a while (an outage that fails fast), then
/// answers again in 20 ms.
#[test]
fn an_answer_after_a_run_of_failures_brings_the_candidate_back_at_once() {
    let mut b = Bench::new(Config::default(), &["x", "y"]);
    for _ in 0..40 {
        b.attempt("x", true, 20 * MS);
        b.attempt("y", true, 40 * MS);
        b.wait(50 * MS);
    }
    for _ in 0..20 {
        b.attempt("x", false, 2 * MS);
        b.wait(500 * MS);
    }
    let failing = b.success("x");
    assert!(failing < 0.1, "the outage is learned: {failing}");
    b.attempt("x", true, 20 * MS);
    // Measured 0.998: the answer weighs as a change. Without that rule it moved the average
    // by the filter's usual gain (to 0.51 here), and each later probe by about a tenth.
    let back = b.success("x");
    assert!(back > 0.8, "one answer after failures restores it: {back}");
    let view = b.core.candidate(&CandidateId::from("x")).unwrap();
    let t = view.stats.attempt_ms.unwrap();
    assert!(
        (10.0..40.0).contains(&t),
        "its time is the answer's, not the failures': {t} ms"
    );
}

/// Three of five candidates refuse everything; one of them answers: the other two are due a
/// probe from the next refresh on, with heal probes on, and only then.
#[test]
fn a_heal_makes_the_others_failing_with_it_due_a_probe() {
    for heal_probes in [true, false] {
        let mut config = Config::default();
        config.ema.heal_probes = heal_probes;
        let ids = ["a", "b", "c", "d", "e"];
        let mut b = Bench::new(config, &ids);
        for _ in 0..30 {
            b.answer_round(&ids, 20 * MS);
        }
        for _ in 0..6 {
            for id in ["a", "b", "c"] {
                b.attempt(id, false, 2 * MS);
            }
            b.wait(20 * MS);
        }
        // Freshly failed: no scheduled probe is due for any of them yet.
        for id in ["b", "c"] {
            let t = b.time_component(id);
            assert!(t < AVERAGE_TIME, "{id} before the heal: {t}");
        }
        b.wait(20 * MS);
        b.attempt("a", true, 20 * MS);
        // From the next refresh on.
        b.refresh();
        for id in ["b", "c"] {
            let t = b.time_component(id);
            if heal_probes {
                assert!(t >= AVERAGE_TIME, "{id} is due a probe: {t}");
            } else {
                assert!(t < AVERAGE_TIME, "{id} without heal probes: {t}");
            }
        }
        // Once tried, the probe is spent: b is tried (and fails again), c still waits for its
        // own.
        if heal_probes {
            b.attempt("b", false, 2 * MS);
            let t = b.time_component("b");
            assert!(t < AVERAGE_TIME, "b after its probe: {t}");
            assert!(b.time_component("c") >= AVERAGE_TIME);
        }
    }
}

/// Seven servers; one refuses for a while and is shunned. At 40 decisions per second the probe
/// budget (1 % of the draws) is 0.4 probes a second. With record probes (its record is good:
/// 40 answers, 6 refusals) the quiet server has that budget to itself and is due a probe once
/// idle for 2.5 s; without, it waits for the fleet-wide period, shared by all seven: 17.5 s.
#[test]
fn a_quiet_server_with_a_good_record_is_probed_at_the_record_period() {
    for record_probes in [true, false] {
        let mut config = Config::default();
        config.ema.record_probes = record_probes;
        let ids = ["x", "a", "b", "c", "d", "e", "f"];
        let mut b = Bench::new(config, &ids);
        for _ in 0..40 {
            b.answer_round(&ids, 30 * MS);
        }
        for _ in 0..6 {
            b.attempt("x", false, 2 * MS);
            b.answer_round(&ids[1..], 30 * MS);
        }
        assert!(b.time_component("x") < AVERAGE_TIME, "x is shunned");
        // Six seconds of traffic on the others only (six attempts every 150 ms).
        let mut due_after = None;
        for step in 1..=40 {
            b.answer_round(&ids[1..], 30 * MS);
            if due_after.is_none() && b.time_component("x") >= AVERAGE_TIME {
                due_after = Some(step);
            }
        }
        if record_probes {
            let step = due_after.expect("x is due a record probe");
            // Each step is 150 ms: due 2.5 s after its last sample (measured: 16 steps, the
            // last refusal counting as its last sample).
            assert!((14..=18).contains(&step), "x due after {step} steps");
        } else {
            assert_eq!(
                due_after, None,
                "no record probes: x waits for the fleet period"
            );
        }
    }
}

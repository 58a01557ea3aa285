//! Server feedback on outcomes: how a server's report of its queue and service time moves the
//! draw, and that candidates whose servers never report draw exactly as without it.

use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::SeedableRng;
use selection_coordinator::{
    CandidateInfo, Config, Core, Error, Event, Next, Outcome, Request, ServerFeedback,
};

fn core(config: Config, ids: &[&str]) -> (Core, SmallRng, Instant) {
    let now = Instant::now();
    let mut rng = SmallRng::seed_from_u64(11);
    let mut core = Core::new(config, now).unwrap();
    for id in ids {
        core.add_candidate(CandidateInfo::new(*id), now, &mut rng)
            .unwrap();
    }
    (core, rng, now)
}

/// Grants one attempt on `id` and returns it (still running).
fn grant(
    core: &mut Core,
    rng: &mut SmallRng,
    id: &str,
    now: Instant,
) -> selection_coordinator::AttemptId {
    core.ready(Request::only([id]), now, rng).unwrap();
    loop {
        match core.poll_event() {
            Some(Event::Granted(g)) => return g.attempt,
            Some(_) => continue,
            None => panic!("no grant on {id}"),
        }
    }
}

/// Runs `rounds` attempts on each candidate, each answering after 10 ms; `report` says what a
/// candidate's server piggybacks, if anything.
fn drive(
    core: &mut Core,
    rng: &mut SmallRng,
    start: Instant,
    ids: &[&str],
    rounds: u32,
    report: impl Fn(&str) -> Option<ServerFeedback>,
) -> Instant {
    let mut now = start;
    for _ in 0..rounds {
        for id in ids {
            let a = grant(core, rng, id, now);
            now += Duration::from_millis(10);
            let mut o = Outcome::success().first_byte(Duration::from_millis(10));
            if let Some(r) = report(id) {
                o = o.feedback(r);
            }
            core.outcome(a, o, now).unwrap();
            core.done(a, Next::Finish, now, rng).unwrap();
        }
    }
    now
}

fn weight_of(core: &mut Core, id: &str, now: Instant) -> (f64, f64, f64) {
    let r = core.explain(&Request::any(), now).unwrap();
    let c = r
        .candidates
        .iter()
        .find(|c| c.id.as_str() == id)
        .unwrap_or_else(|| panic!("{id} not considered"));
    (c.weight, c.probability, c.components.feedback)
}

#[test]
fn candidates_that_never_report_draw_exactly_as_without_feedback() {
    let ids = ["a", "b", "c"];
    let (mut plain, mut rng1, t0) = core(Config::default(), &ids);
    let (mut fed, mut rng2, _) = core(Config::default(), &ids);
    let t1 = drive(&mut plain, &mut rng1, t0, &ids, 20, |_| None);
    let t2 = drive(&mut fed, &mut rng2, t0, &ids, 20, |id| {
        (id == "b").then(|| ServerFeedback::new(6, Duration::from_millis(4)))
    });
    assert_eq!(t1, t2);
    for id in ["a", "c"] {
        let (w1, _, f1) = weight_of(&mut plain, id, t1);
        let (w2, _, f2) = weight_of(&mut fed, id, t2);
        assert_eq!(w1, w2, "{id}: a silent candidate's weight moved");
        assert_eq!(f1, f2);
        assert_eq!(f1, (-1.0f64).exp(), "silent: scored as idle at the average");
    }
    // `b` is the only one reporting: its own reports are the reference (r = 1 + 0 + 6 = 7
    // service times), so its weight falls by exp(3 * (1 - 7)) with the default exponent 3.
    let (wb1, pb1, _) = weight_of(&mut plain, "b", t1);
    let (wb2, pb2, fb) = weight_of(&mut fed, "b", t2);
    assert!((fb - (-7.0f64).exp()).abs() < 1e-9, "{fb}");
    let ratio = wb2 / wb1;
    assert!((ratio / (-18.0f64).exp() - 1.0).abs() < 1e-6, "{ratio}");
    // Left with little more than its floor share (0.01 / 3).
    assert!(pb2 < 0.005 && pb1 > 0.3, "{pb2} against {pb1}");
}

#[test]
fn a_faster_server_and_a_shorter_queue_draw_more() {
    let ids = ["fast", "slow"];
    let (mut core, mut rng, t0) = core(Config::default(), &ids);
    let now = drive(&mut core, &mut rng, t0, &ids, 20, |id| {
        let ms = if id == "fast" { 1 } else { 4 };
        Some(ServerFeedback::new(0, Duration::from_millis(ms)))
    });
    let (wf, pf, ff) = weight_of(&mut core, "fast", now);
    let (ws, ps, fs) = weight_of(&mut core, "slow", now);
    assert!(ff > fs, "{ff} {fs}");
    // The reference lies between 1 and 4 ms, so the weights differ by at least e^(3 x 3 / 4).
    assert!(wf > ws * 9.4, "{wf} {ws}");
    assert!(pf > 0.8 && pf > ps, "{pf} {ps}");
    // Attempts in flight on the fast one count as requests ahead of the next: with five of
    // them, (1 + 5) x 1 ms is past the slow one's idle 4 ms, and the draw turns.
    let held: Vec<_> = (0..5)
        .map(|_| grant(&mut core, &mut rng, "fast", now))
        .collect();
    let (_, pf2, _) = weight_of(&mut core, "fast", now);
    let (_, ps2, _) = weight_of(&mut core, "slow", now);
    assert!(ps2 > pf2, "fast with 5 in flight {pf2}, slow idle {ps2}");
    for a in held {
        // Cancelled: counted nowhere, so the statistics are as before.
        let cancelled = Outcome::failure(selection_coordinator::FailureClass::Cancelled);
        core.outcome(a, cancelled, now).unwrap();
        core.done(a, Next::Finish, now, &mut rng).unwrap();
    }
    let (_, pf3, _) = weight_of(&mut core, "fast", now);
    assert!((pf3 - pf).abs() < 1e-9, "{pf3} {pf}");
}

#[test]
fn with_the_exponent_at_zero_feedback_moves_no_draw() {
    let ids = ["a", "b"];
    let mut off = Config::default();
    off.feedback.exponent = 0.0;
    let (mut plain, mut rng1, t0) = core(off.clone(), &ids);
    let (mut fed, mut rng2, _) = core(off, &ids);
    let t = drive(&mut plain, &mut rng1, t0, &ids, 10, |_| None);
    drive(&mut fed, &mut rng2, t0, &ids, 10, |id| {
        (id == "a").then(|| ServerFeedback::new(9, Duration::from_millis(4)))
    });
    for id in ids {
        assert_eq!(weight_of(&mut plain, id, t).0, weight_of(&mut fed, id, t).0);
    }
    // The component is still computed and shown.
    assert!(weight_of(&mut fed, "a", t).2 < weight_of(&mut plain, "a", t).2);
}

#[test]
fn an_absurd_report_is_refused_with_the_field_and_the_attempt_may_report_again() {
    let (mut core, mut rng, now) = core(Config::default(), &["a"]);
    let a = grant(&mut core, &mut rng, "a", now);
    for (bad, field) in [
        (
            ServerFeedback {
                queue: 0,
                service_ms: f64::NAN,
            },
            "feedback.service_ms",
        ),
        (
            ServerFeedback {
                queue: u32::MAX,
                service_ms: 1.0,
            },
            "feedback.queue",
        ),
    ] {
        match core.outcome(a, Outcome::success().feedback(bad), now) {
            Err(Error::InvalidOutcome { field: f, .. }) => assert_eq!(f, field),
            other => panic!("{bad:?} gave {other:?}"),
        }
    }
    let good = Outcome::success().feedback(ServerFeedback::new(1, Duration::from_millis(2)));
    core.outcome(a, good, now).unwrap();
    core.done(a, Next::Finish, now, &mut rng).unwrap();
}

#[test]
fn feedback_config_fields_are_checked_by_name() {
    let err = Config::from_toml_str("[feedback]\nexponent = -1\nalpha = 2\n").unwrap_err();
    let paths: Vec<_> = err.problems.iter().map(|p| p.path.as_str()).collect();
    assert!(paths.contains(&"feedback.exponent"), "{paths:?}");
    assert!(paths.contains(&"feedback.alpha"), "{paths:?}");
    let ok = Config::from_toml_str("[feedback]\nexponent = 3\nalpha = 0.9\n").unwrap();
    assert_eq!((ok.feedback.exponent, ok.feedback.alpha), (3.0, 0.9));
    // The presets that reproduce other systems leave feedback out of the draw.
    assert_eq!(Config::lassie().feedback.exponent, 0.0);
    assert_eq!(Config::livepeer().feedback.exponent, 0.0);
}

//! Digests between coordinators: what one learns reaches another as a bounded prior, and no
//! digest, however hostile, panics or moves a weight outside what local outcomes could.

use std::time::{Duration, Instant};

use rand::{rngs::SmallRng, SeedableRng};
use selection_coordinator::{
    CandidateId, CandidateInfo, Config, Core, Event, FailureClass, Next, Outcome, Request,
};

const IDS: [&str; 4] = ["a", "b", "c", "d"];

fn core(name: &str, t0: Instant) -> Core {
    let mut rng = SmallRng::seed_from_u64(1);
    let mut core = Core::new(Config::default(), t0).unwrap();
    for id in IDS {
        core.add_candidate(CandidateInfo::new(id), t0, &mut rng)
            .unwrap();
    }
    core.set_share_identity(name, 0);
    core
}

/// Runs `n` requests pinned to `id`, each with `outcome` after `ms`.
fn drive(core: &mut Core, id: &str, n: usize, outcome: &Outcome, ms: u64, t: &mut Instant) {
    let mut rng = SmallRng::seed_from_u64(2);
    for _ in 0..n {
        core.ready(Request::only([CandidateId::new(id)]), *t, &mut rng)
            .unwrap();
        let Some(Event::Granted(g)) = core.poll_event() else {
            panic!("no grant");
        };
        *t += Duration::from_millis(ms);
        core.outcome(g.attempt, outcome.clone(), *t).unwrap();
        core.done(g.attempt, Next::Finish, *t, &mut rng).unwrap();
    }
}

fn probability(core: &Core, id: &str) -> f64 {
    core.tree_probability(&CandidateId::new(id))
}

#[test]
fn a_digest_carries_what_one_learned_to_another() {
    let t0 = Instant::now();
    let mut t = t0;
    let (mut a, mut b) = (core("a", t0), core("b", t0));
    let ok = Outcome::success_with(10.0, 50.0, 1000, 10.0);
    for id in IDS {
        drive(&mut a, id, 20, &ok, 50, &mut t);
        drive(&mut b, id, 20, &ok, 50, &mut t);
    }
    // `a` sees "c" fail; `b` has not used it for a minute and a half.
    t += Duration::from_secs(90);
    drive(
        &mut a,
        "c",
        20,
        &Outcome::failure(FailureClass::Transport),
        50,
        &mut t,
    );
    let before = probability(&b, "c");
    // The first digest starts the sender's blackout; one after it moves the weight.
    let d = a.digest(t);
    assert_eq!(d.sender, "a");
    assert!(d
        .entries
        .iter()
        .any(|e| e.id.as_str() == "c" && e.success < 0.5));
    b.apply_digest(t, &d).unwrap();
    b.tick(t, &mut SmallRng::seed_from_u64(3));
    assert!((probability(&b, "c") - before).abs() < 1e-12, "blackout");
    t += Duration::from_secs(2);
    let applied = b.apply_digest(t, &a.digest(t)).unwrap();
    assert_eq!(
        applied.applied, 1,
        "only the fresh entry is sent: {applied:?}"
    );
    b.tick(t, &mut SmallRng::seed_from_u64(3));
    let after = probability(&b, "c");
    assert!(after < 0.2 * before, "before {before}, after {after}");
    // A replay and a flood are turned away, and so is a digest under another's name.
    let again = a.digest(t);
    assert_eq!(
        b.apply_digest(t, &again).map_err(|e| e.reason()),
        Err("replayed")
    );
    t += Duration::from_millis(100);
    assert_eq!(
        b.apply_digest(t, &a.digest(t)).map_err(|e| e.reason()),
        Err("too_soon")
    );
    assert_eq!(
        b.apply_digest_from(t, "x", &a.digest(t))
            .map_err(|e| e.reason()),
        Err("sender_mismatch")
    );
    assert_eq!(
        b.apply_digest(t, &b.digest(t)).map_err(|e| e.reason()),
        Err("own_sender")
    );
    // The evidence expires.
    t += Duration::from_secs(120);
    b.tick(t, &mut SmallRng::seed_from_u64(3));
    let expired = probability(&b, "c");
    assert!(expired > 0.5 * before, "before {before}, expired {expired}");
}

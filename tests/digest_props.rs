//! Digests between coordinators: what one learns reaches another as a bounded prior, and no
//! digest, however hostile, panics or moves a weight outside what local outcomes could.

#[path = "support/props.rs"]
mod proptest_seed;

use std::time::{Duration, Instant};

use proptest::prelude::*;
use rand::{rngs::SmallRng, SeedableRng};
use selection_coordinator::digest::{CandidateDigest, Digest, DigestPart};
use selection_coordinator::{
    CandidateId, CandidateInfo, Config, Core, Event, FailureClass, Next, Outcome, Request,
};

const IDS: [&str; 4] = ["a", "b", "c", "d"];

fn core(name: &str, t0: Instant) -> Core {
    core_with(name, t0, Config::default())
}

fn core_with(name: &str, t0: Instant, config: Config) -> Core {
    let mut rng = SmallRng::seed_from_u64(1);
    let mut core = Core::new(config, t0).unwrap();
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
        core.outcome(g.attempt, *outcome, *t).unwrap();
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
    // Evidence expires after a minute here (the default keeps it ten).
    let mut config = Config::default();
    config.share.expiry_s = 60.0;
    let (mut a, mut b) = (
        core_with("a", t0, config.clone()),
        core_with("b", t0, config),
    );
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
    // The evidence expires, and the sender, silent since, is forgotten with no other digest
    // coming in.
    assert_eq!(b.share_senders().len(), 1);
    t += Duration::from_secs(120);
    b.tick(t, &mut SmallRng::seed_from_u64(3));
    let expired = probability(&b, "c");
    assert!(expired > 0.5 * before, "before {before}, expired {expired}");
    assert_eq!(b.share_senders(), vec![]);
}

/// A coordinator that shares learns the fleet's first-byte spread (its deadline advice) from
/// an answer on a candidate it never answered on before, against the others' average of it:
/// among many candidates, each drawn a few times, it would otherwise seldom learn it at all.
#[test]
fn a_first_answer_is_read_against_the_others_average() {
    let t0 = Instant::now();
    let mut t = t0;
    let (mut a, mut b) = (core("a", t0), core("b", t0));
    let ok = Outcome::success_with(10.0, 50.0, 1000, 60.0);
    drive(&mut a, "c", 20, &ok, 50, &mut t);
    // One digest starts the blackout, the next is pooled.
    b.apply_digest(t, &a.digest(t)).unwrap();
    t += Duration::from_secs(2);
    b.apply_digest(t, &a.digest(t)).unwrap();
    drive(&mut b, "c", 1, &ok, 50, &mut t);
    let o = b.overall();
    assert_eq!(o.ttfb_spread_answers, 1, "{o:?}");
    // An answer at the average: the spread falls to half its starting value.
    let start = (10f64.ln() / 5.0).powi(2);
    let spread = o.ttfb_spread.unwrap();
    assert!(
        (spread - start / 2.0).abs() < 1e-9,
        "{spread} against {start}"
    );
    // Without the others' evidence a first answer has nothing to be read against.
    let mut alone = core("c", t0);
    drive(&mut alone, "c", 1, &ok, 50, &mut t);
    assert_eq!(alone.overall().ttfb_spread_answers, 0);
    assert_eq!(alone.overall().ttfb_spread, None);
}

/// A coordinator that shares advises a deadline for a candidate it has not answered on from
/// the others' first-byte average of it, the average its score is computed from, not from its
/// own fleet's average: a fast server known only from digests is not left hanging for a
/// multiple of what the slow ones take.
#[test]
fn a_candidate_known_from_the_others_is_advised_from_their_first_byte_average() {
    let t0 = Instant::now();
    let mut t = t0;
    let (mut a, mut b) = (core("a", t0), core("b", t0));
    // `a` knows "c" answers its first byte in 50 ms; `b` knows only "a", at 400 ms.
    drive(
        &mut a,
        "c",
        20,
        &Outcome::success_with(10.0, 50.0, 1000, 60.0),
        60,
        &mut t,
    );
    drive(
        &mut b,
        "a",
        20,
        &Outcome::success_with(10.0, 400.0, 1000, 410.0),
        410,
        &mut t,
    );
    let mut alone = core("alone", t0);
    drive(
        &mut alone,
        "a",
        20,
        &Outcome::success_with(10.0, 400.0, 1000, 410.0),
        410,
        &mut t,
    );
    // One digest starts the blackout, the next is pooled.
    b.apply_digest(t, &a.digest(t)).unwrap();
    t += Duration::from_secs(2);
    b.apply_digest(t, &a.digest(t)).unwrap();

    let mut rng = SmallRng::seed_from_u64(3);
    let mut advised = |core: &mut Core| {
        let multiple = core.deadline_multiple().unwrap();
        core.ready(Request::only([CandidateId::new("c")]), t, &mut rng)
            .unwrap();
        let Some(Event::Granted(g)) = core.poll_event() else {
            panic!("no grant");
        };
        g.deadline_ms.unwrap() / multiple
    };
    let shared = advised(&mut b);
    assert!((shared - 50.0).abs() < 1e-6, "advised from {shared} ms");
    // Without the others' evidence, the fleet's own average is all there is.
    let own = advised(&mut alone);
    assert!((own - 400.0).abs() < 1e-6, "advised from {own} ms");
}

#[test]
fn one_round_of_failures_after_a_run_of_successes_is_enough() {
    let t0 = Instant::now();
    let mut t = t0;
    let (mut a, mut b) = (core("a", t0), core("b", t0));
    let ok = Outcome::success_with(10.0, 50.0, 1000, 10.0);
    for id in ["a", "b", "d"] {
        drive(&mut b, id, 20, &ok, 50, &mut t);
    }
    // `a` reports "c" every second, good for a while; `b` never sends to it.
    let mut rng = SmallRng::seed_from_u64(3);
    let mut round = |a: &mut Core, b: &mut Core, outcome: &Outcome, t: &mut Instant| {
        let since = *t;
        drive(a, "c", 5, outcome, 50, t);
        *t += Duration::from_millis(750);
        b.apply_digest(*t, &a.digest_since(*t, Some(since)))
            .unwrap();
        b.tick(*t, &mut rng);
    };
    for _ in 0..8 {
        round(&mut a, &mut b, &ok, &mut t);
    }
    let before = probability(&b, "c");
    assert!(before > 0.1, "b draws c before: {before}");
    // One round of failures: the successes before it no longer count.
    round(
        &mut a,
        &mut b,
        &Outcome::failure(FailureClass::Transport),
        &mut t,
    );
    let after = probability(&b, "c");
    assert!(after < 0.2 * before, "before {before}, after {after}");
    // The prior now holds the new failures, not the successes of the rounds before: what is
    // left is the optimistic prior (one sample) and the sender's average filling the cap.
    let success = b
        .candidate(&CandidateId::new("c"))
        .unwrap()
        .components
        .success;
    assert!(success < 0.5, "success {success}");
}

/// Each digest taken names the one taken before it; only the candidates sampled since go in
/// when asked.
#[test]
fn each_digest_taken_names_the_one_before() {
    let t0 = Instant::now();
    let mut t = t0;
    let mut a = core("a", t0);
    let ok = Outcome::success_with(10.0, 50.0, 1000, 10.0);
    drive(&mut a, "a", 3, &ok, 50, &mut t);
    let first = a.take_digest(t, true);
    // A first digest names none before it: 0, never a digest's number.
    assert_eq!(first.prev_seq, Some(0));
    assert!(first.seq > 0);
    assert_eq!(first.entries.len(), 1);
    t += Duration::from_millis(500);
    drive(&mut a, "b", 3, &ok, 50, &mut t);
    let second = a.take_digest(t, true);
    assert_eq!(second.prev_seq, Some(first.seq));
    assert!(second.seq > first.seq);
    let ids: Vec<&str> = second.entries.iter().map(|e| e.id.as_str()).collect();
    assert_eq!(
        ids,
        ["b"],
        "only what was sampled since the previous digest"
    );
    // Two in the same millisecond still get increasing numbers; a full one has both.
    let third = a.take_digest(t, false);
    assert_eq!(third.prev_seq, Some(second.seq));
    assert!(third.seq > second.seq);
    assert_eq!(third.entries.len(), 2);
}

/// A receiver that missed a sender's digest cannot tell when the outcomes since its last report
/// happened: they do not count as recent, so they cannot trip the change test. One that
/// received every digest reads the same outcomes as a change.
#[test]
fn outcomes_behind_a_missed_digest_do_not_count_as_recent() {
    let t0 = Instant::now();
    let mut t = t0;
    let (mut a, mut every, mut missed) = (core("a", t0), core("b", t0), core("c", t0));
    let ok = Outcome::success_with(10.0, 50.0, 1000, 10.0);
    let failure = Outcome::failure(FailureClass::Transport);
    for id in ["a", "b"] {
        drive(&mut every, id, 20, &ok, 50, &mut t);
        drive(&mut missed, id, 20, &ok, 50, &mut t);
    }
    let mut rng = SmallRng::seed_from_u64(3);
    let mut round = |a: &mut Core, to: &mut [&mut Core], outcome: &Outcome, t: &mut Instant| {
        drive(a, "d", 5, outcome, 50, t);
        *t += Duration::from_millis(750);
        let d = a.take_digest(*t, true);
        for b in to.iter_mut() {
            b.apply_digest(*t, &d).unwrap();
            b.tick(*t, &mut rng);
        }
    };
    for _ in 0..8 {
        round(&mut a, &mut [&mut every, &mut missed], &ok, &mut t);
    }
    // Successes whose digest `missed` never gets, then failures both get.
    round(&mut a, &mut [&mut every], &ok, &mut t);
    round(&mut a, &mut [&mut every, &mut missed], &failure, &mut t);
    let success = |b: &Core| {
        b.candidate(&CandidateId::new("d"))
            .unwrap()
            .components
            .success
    };
    assert!(success(&every) < 0.5, "every digest: {}", success(&every));
    // `missed` keeps its recent successes: the failures, mixed with successes of unknown
    // time, reach it through the sender's average only.
    assert!(success(&missed) > 0.8, "missed one: {}", success(&missed));
}

/// Sequence numbers follow the clock the driver gives (the wall clock), not the core's age: a
/// core that ran 8 s before it started sharing, replaced by a new process 3 s later, has the
/// new process's first digest applied, not refused as a replay. Numbered from its start
/// (the base being the wall clock when sharing started), the old core's digests ran 8 s
/// ahead of the wall clock and the new one's were refused.
#[test]
fn a_restarted_sender_is_not_taken_for_a_replay() {
    const WALL_MS: u64 = 1_700_000_000_000;
    let t0 = Instant::now();
    let ok = Outcome::success_with(10.0, 50.0, 1000, 10.0);
    let mut rng = SmallRng::seed_from_u64(4);
    for numbered_from_start in [false, true] {
        let mut t = t0;
        let (mut a, mut b) = (core("a", t0), core("b", t0));
        drive(&mut a, "a", 5, &ok, 50, &mut t);
        t = t0 + Duration::from_secs(8);
        let wall = |t: Instant| WALL_MS + (t - t0).as_millis() as u64;
        if numbered_from_start {
            a.set_share_identity("a", wall(t));
        } else {
            a.set_share_identity_at("a", t, wall(t));
        }
        for _ in 0..4 {
            drive(&mut a, "a", 2, &ok, 50, &mut t);
            t += Duration::from_millis(500);
            b.apply_digest(t, &a.take_digest(t, false)).unwrap();
            b.tick(t, &mut rng);
        }
        // The process restarts: a new core, its own epoch, the same name.
        t += Duration::from_secs(3);
        let mut a2 = Core::new(Config::default(), t).unwrap();
        for id in IDS {
            a2.add_candidate(CandidateInfo::new(id), t, &mut rng)
                .unwrap();
        }
        a2.set_share_identity_at("a", t, wall(t));
        drive(&mut a2, "a", 2, &ok, 50, &mut t);
        t += Duration::from_millis(500);
        let first = a2.take_digest(t, false);
        let applied = b.apply_digest(t, &first).map_err(|e| e.reason());
        if numbered_from_start {
            assert_eq!(applied.map(|_| ()), Err("replayed"), "the old numbering");
        } else {
            assert!(
                applied.is_ok(),
                "the restarted sender's first digest: {applied:?}"
            );
        }
    }
}

/// A restarted sender's running totals start again: its first digest says it follows none
/// (`prev_seq` 0), and the difference from the previous process's totals is not read as the
/// outcomes of the last period, which would trip the change test.
#[test]
fn a_restarted_senders_totals_are_not_read_as_recent_outcomes() {
    let t0 = Instant::now();
    let mut t = t0;
    let ok = Outcome::success_with(10.0, 50.0, 1000, 10.0);
    let failure = Outcome::failure(FailureClass::Transport);
    let mut rng = SmallRng::seed_from_u64(5);
    let (mut a, mut b, mut naive) = (core("a", t0), core("b", t0), core("c", t0));
    let mut last = 0;
    for _ in 0..4 {
        drive(&mut a, "d", 1, &ok, 50, &mut t);
        t += Duration::from_millis(500);
        let d = a.take_digest(t, false);
        last = d.seq;
        for r in [&mut b, &mut naive] {
            r.apply_digest(t, &d).unwrap();
            r.tick(t, &mut rng);
        }
    }
    // The new process (numbered on the same clock): 12 outcomes on "d", 5 successes. Read
    // against the old process's 4 out of 4, that is 8 new outcomes with 1 success.
    let mut a2 = core("a", t);
    a2.set_share_identity_at("a", t, (t - t0).as_millis() as u64);
    for i in 0..12 {
        let outcome = if i % 2 == 0 && i < 10 { &ok } else { &failure };
        drive(&mut a2, "d", 1, outcome, 50, &mut t);
    }
    t += Duration::from_millis(500);
    let first = a2.take_digest(t, false);
    assert_eq!(first.prev_seq, Some(0));
    b.apply_digest(t, &first).unwrap();
    // The same digest as a sender that does not say which one precedes it.
    let following_on = Digest {
        prev_seq: Some(last),
        ..first
    };
    naive.apply_digest(t, &following_on).unwrap();
    for r in [&mut b, &mut naive] {
        r.tick(t, &mut rng);
    }
    let success = |r: &Core| {
        r.candidate(&CandidateId::new("d"))
            .unwrap()
            .components
            .success
    };
    assert!(
        success(&b) > success(&naive) + 0.05,
        "restart: {}, read as following on: {}",
        success(&b),
        success(&naive)
    );
}

/// `d` split as a transport splits a digest too large for one message: candidates "a" and
/// "b" in the first part, "c" and "d" in the second, numbered from `d.seq`.
fn halves(d: &Digest) -> [Digest; 2] {
    let part = |index: u32, ids: [&str; 2]| Digest {
        seq: d.seq + u64::from(index),
        part: Some(DigestPart {
            round: d.seq,
            index,
            count: 2,
        }),
        entries: d
            .entries
            .iter()
            .filter(|e| ids.contains(&e.id.as_str()))
            .cloned()
            .collect(),
        ..d.clone()
    };
    [part(0, ["a", "b"]), part(1, ["c", "d"])]
}

/// A sender `a` that has three successes on each of [`IDS`] and a receiver `b`, and the time.
fn sender_and_receiver() -> (Core, Core, Instant) {
    let t0 = Instant::now();
    let mut t = t0;
    let (mut a, b) = (core("a", t0), core("b", t0));
    let ok = Outcome::success_with(10.0, 50.0, 1000, 10.0);
    for id in IDS {
        drive(&mut a, id, 3, &ok, 50, &mut t);
    }
    (a, b, t)
}

/// The parts of a digest split into several are each applied on their own, at once (the
/// flood control counts rounds, not parts); a new round sooner than `min_interval_s`, a part
/// seen before, a candidate in two parts of a round and a part whose numbers do not hold
/// together are refused.
#[test]
fn the_parts_of_a_round_are_applied_together_and_checked() {
    let (mut a, mut b, mut t) = sender_and_receiver();
    let [p0, p1] = halves(&a.take_digest(t, false));
    assert_eq!(b.apply_digest(t, &p0).unwrap().applied, 2);
    assert_eq!(b.apply_digest(t, &p1).unwrap().applied, 2, "not too soon");
    let reason =
        |b: &mut Core, d: &Digest, t| b.apply_digest(t, d).map(|_| ()).map_err(|e| e.reason());
    assert_eq!(reason(&mut b, &p1, t), Err("replayed"));
    t += Duration::from_millis(100);
    let [q0, q1] = halves(&a.take_digest(t, false));
    assert_eq!(reason(&mut b, &q0, t), Err("too_soon"), "a new round is");
    t += Duration::from_millis(500);
    // The second part of a round whose first was refused opens it.
    assert_eq!(reason(&mut b, &q1, t), Ok(()));
    t += Duration::from_millis(500);
    let [r0, mut r1] = halves(&a.take_digest(t, false));
    r1.entries.push(r0.entries[0].clone());
    assert_eq!(reason(&mut b, &r0, t), Ok(()));
    let applied = b.apply_digest(t, &r1).unwrap();
    assert_eq!((applied.applied, applied.rejected_total()), (2, 1));
    assert_eq!(
        applied.first_rejection.map(|e| e.reason()),
        Some("duplicate_entry")
    );
    t += Duration::from_millis(500);
    let [mut bad, _] = halves(&a.take_digest(t, false));
    bad.part = Some(DigestPart {
        round: bad.seq,
        index: 0,
        count: 100,
    });
    assert_eq!(reason(&mut b, &bad, t), Err("bad_part"));
}

/// Flood control counts from the first part of a round applied: a round whose last part
/// was applied late here does not push the next round, taken `min_interval_s` after it at the
/// sender, into `too_soon`.
#[test]
fn a_round_applied_late_does_not_hold_back_the_next() {
    let (mut a, mut b, mut t) = sender_and_receiver();
    let [p0, p1] = halves(&a.take_digest(t, false));
    b.apply_digest(t, &p0).unwrap();
    // The second part is applied 300 ms later here (a backlog of decoding).
    b.apply_digest(t + Duration::from_millis(300), &p1).unwrap();
    // The next round is taken 600 ms after the first and applied at once.
    t += Duration::from_millis(600);
    let [q0, q1] = halves(&a.take_digest(t, false));
    assert_eq!(b.apply_digest(t, &q0).unwrap().applied, 2, "not too soon");
    assert_eq!(b.apply_digest(t, &q1).unwrap().applied, 2);
}

/// A receiver that missed one part of a round does not count the outcomes since its last
/// report on that part's candidates as recent (it cannot tell when they happened); those of
/// the other parts it applied still count.
#[test]
fn a_lost_part_hides_the_recent_outcomes_of_its_candidates_only() {
    let t0 = Instant::now();
    let mut t = t0;
    let (mut a, mut every, mut missed) = (core("a", t0), core("b", t0), core("c", t0));
    let ok = Outcome::success_with(10.0, 50.0, 1000, 10.0);
    let failure = Outcome::failure(FailureClass::Transport);
    for id in ["a", "c"] {
        drive(&mut every, id, 20, &ok, 50, &mut t);
        drive(&mut missed, id, 20, &ok, 50, &mut t);
    }
    let mut rng = SmallRng::seed_from_u64(6);
    let mut round = |a: &mut Core, lose: bool, outcome: &Outcome, t: &mut Instant| {
        drive(a, "b", 5, outcome, 50, t);
        drive(a, "d", 5, outcome, 50, t);
        *t += Duration::from_millis(750);
        let [p0, p1] = halves(&a.take_digest(*t, false));
        for (b, lost) in [(&mut every, false), (&mut missed, lose)] {
            b.apply_digest(*t, &p0).unwrap();
            if !lost {
                b.apply_digest(*t, &p1).unwrap();
            }
            b.tick(*t, &mut rng);
        }
    };
    for _ in 0..8 {
        round(&mut a, false, &ok, &mut t);
    }
    // Successes whose second part (candidate "d") `missed` never gets, then failures.
    round(&mut a, true, &ok, &mut t);
    round(&mut a, false, &failure, &mut t);
    let success = |b: &Core, id: &str| {
        b.candidate(&CandidateId::new(id))
            .unwrap()
            .components
            .success
    };
    assert!(
        success(&every, "d") < 0.5,
        "every part: {}",
        success(&every, "d")
    );
    assert!(
        success(&missed, "b") < 0.5,
        "the part it got: {}",
        success(&missed, "b")
    );
    assert!(
        success(&missed, "d") > 0.8,
        "the part it missed: {}",
        success(&missed, "d")
    );
}

/// A core that shares watches its own outcomes: a failure on a candidate that rarely fails
/// makes its next digest urgent, until a digest is taken.
#[test]
fn a_sharp_change_in_local_outcomes_makes_the_digest_urgent() {
    let t0 = Instant::now();
    let mut t = t0;
    let mut a = core("a", t0);
    let ok = Outcome::success_with(10.0, 50.0, 1000, 10.0);
    let failure = Outcome::failure(FailureClass::Transport);
    drive(&mut a, "c", 30, &ok, 50, &mut t);
    assert!(!a.digest_urgent(), "successes are no news");
    drive(&mut a, "c", 1, &failure, 50, &mut t);
    assert!(a.digest_urgent(), "one failure after thirty successes");
    let _ = a.take_digest(t, true);
    assert!(!a.digest_urgent(), "taken");
    // A candidate that always fails: one more failure is no news.
    drive(&mut a, "d", 30, &failure, 50, &mut t);
    let _ = a.take_digest(t, true);
    drive(&mut a, "d", 1, &failure, 50, &mut t);
    assert!(
        !a.digest_urgent(),
        "one more failure of a failing candidate"
    );
    // A core that does not share never is.
    let mut alone = Core::new(Config::default(), t0).unwrap();
    let mut rng = SmallRng::seed_from_u64(1);
    alone
        .add_candidate(CandidateInfo::new("c"), t0, &mut rng)
        .unwrap();
    drive(&mut alone, "c", 30, &ok, 50, &mut t);
    drive(&mut alone, "c", 1, &failure, 50, &mut t);
    assert!(!alone.digest_urgent());
}

/// Any number, hostile ones included.
/// An entry that reports a candidate's times as they are but its estimate as uncertain as the
/// codec allows moves the candidate no further than the same entry reporting certainty: a
/// remote variance counts no higher than a local estimate's right after a sample, so it cannot
/// shrink a slow candidate's well-sampled time to the fleet's.
#[test]
fn a_claim_of_uncertainty_alone_does_not_move_a_time() {
    let t0 = Instant::now();
    let with_var = |attempt_var: f64| {
        let mut t = t0;
        let mut b = core("b", t0);
        let fast = Outcome::success_with(5.0, 50.0, 1000, 60.0);
        let slow = Outcome::success_with(5.0, 400.0, 1000, 410.0);
        for id in ["a", "b", "d"] {
            drive(&mut b, id, 20, &fast, 50, &mut t);
        }
        drive(&mut b, "c", 20, &slow, 400, &mut t);
        let entry = CandidateDigest {
            id: CandidateId::new("c"),
            success: 1.0,
            attempt_ms: Some(410.0),
            attempt_var,
            ttfb_ms: Some(400.0),
            connect_ms: Some(5.0),
            bandwidth_bps: None,
            overload_errors: 0,
            overload_total: 0,
            samples: 1000,
            successes: 1000,
            age_s: 0.0,
        };
        // Two digests, the second past the sender's blackout.
        for (seq, after_ms) in [(10, 100), (20, 1200)] {
            let d = Digest {
                sender: "x".into(),
                seq,
                prev_seq: None,
                part: None,
                entries: vec![entry.clone()],
            };
            b.apply_digest(t + Duration::from_millis(after_ms), &d)
                .unwrap();
        }
        b.tick(
            t + Duration::from_millis(1200),
            &mut SmallRng::seed_from_u64(9),
        );
        let v = b.candidate(&CandidateId::new("c")).unwrap();
        (v.components.time_to_success, probability(&b, "c"))
    };
    let (certain_time, certain_p) = with_var(0.0);
    let (uncertain_time, uncertain_p) = with_var(selection_coordinator::digest::MAX_VARIANCE);
    println!("c: time {certain_time:.3} p {certain_p:.5} certain, {uncertain_time:.3} p {uncertain_p:.5} uncertain");
    assert!(
        uncertain_time - certain_time < 0.1,
        "time_to_success {certain_time} -> {uncertain_time}"
    );
    assert!(
        uncertain_p < 10.0 * certain_p,
        "probability {certain_p} -> {uncertain_p}"
    );
}

fn any_number() -> impl Strategy<Value = f64> {
    prop_oneof![
        4 => 0.0..1.0f64,
        2 => 0.0..5_000.0f64,
        1 => Just(f64::NAN),
        1 => Just(f64::INFINITY),
        1 => Just(f64::NEG_INFINITY),
        1 => Just(-1.0),
        1 => Just(f64::MAX),
        1 => Just(1e300),
        1 => Just(-0.0),
    ]
}

fn any_count() -> impl Strategy<Value = u64> {
    prop_oneof![3 => 0..50u64, 1 => Just(u64::MAX), 1 => any::<u64>()]
}

fn any_entry() -> impl Strategy<Value = CandidateDigest> {
    (
        prop_oneof![Just("a"), Just("b"), Just("c"), Just("d"), Just("zz")],
        any_number(),
        proptest::option::of(any_number()),
        any_number(),
        proptest::option::of(any_number()),
        (any_count(), any_count(), any_count(), any_count()),
        any_number(),
    )
        .prop_map(
            |(id, success, attempt_ms, var, ttfb, counts, age)| CandidateDigest {
                id: CandidateId::new(id),
                success,
                attempt_ms,
                attempt_var: var,
                ttfb_ms: ttfb,
                connect_ms: None,
                bandwidth_bps: attempt_ms,
                overload_errors: counts.0.min(u64::from(u32::MAX)) as u32,
                overload_total: counts.1.min(u64::from(u32::MAX)) as u32,
                samples: counts.2,
                successes: counts.3,
                age_s: age,
            },
        )
}

fn any_digest() -> impl Strategy<Value = (Digest, u64)> {
    (
        prop_oneof![Just("x"), Just("y"), Just("b"), Just("")],
        prop_oneof![3 => 0..5_000u64, 1 => any::<u64>()],
        proptest::collection::vec(any_entry(), 0..8),
        0..3_000u64,
        prop_oneof![1 => Just(None), 2 => (0..5_000u64).prop_map(Some), 1 => any::<u64>().prop_map(Some)],
    )
        .prop_map(|(sender, seq, entries, gap_ms, prev_seq)| {
            (
                Digest {
                    sender: sender.to_string(),
                    seq,
                    prev_seq,
                    part: None,
                    entries,
                },
                gap_ms,
            )
        })
}

proptest! {
    #![proptest_config(proptest_seed::config(10_000))]

    /// Hostile digests: nothing panics, the core stays consistent, every component stays in
    /// [0, 1], and the prior moves a candidate's success no further than `max_prior_samples`
    /// local outcomes against its local evidence could: by at most `M / (n + M)` of the way to
    /// 0 or 1, where `n` is the local evidence's weight.
    #[test]
    fn hostile_digests_stay_within_the_local_bounds(
        local in proptest::collection::vec((0..4usize, any::<bool>(), 1..400u64), 0..12),
        digests in proptest::collection::vec(any_digest(), 1..6),
    ) {
        let t0 = Instant::now();
        let mut t = t0;
        let mut b = core("b", t0);
        for (c, ok, ms) in local {
            let outcome = if ok {
                Outcome::success_with(5.0, ms as f64, 1000, 10.0)
            } else {
                Outcome::failure(FailureClass::Transport)
            };
            drive(&mut b, IDS[c], 1, &outcome, ms, &mut t);
        }
        let cfg = b.config().clone();
        let memory = (1.0 / cfg.ema.alpha).ceil();
        let cap = cfg.share.max_prior_samples;
        let mut rng = SmallRng::seed_from_u64(9);
        for (d, gap_ms) in &digests {
            t += Duration::from_millis(*gap_ms);
            let _ = b.apply_digest(t, d);
            b.tick(t, &mut rng);
            prop_assert!(b.check_invariants().is_ok(), "{:?}", b.check_invariants());
            let now_s = b.now_s();
            let mut total = 0.0;
            for id in IDS {
                let v = b.candidate(&CandidateId::new(id)).unwrap();
                let c = v.components;
                for (name, x) in [
                    ("success", c.success), ("connect", c.connect), ("ttfb", c.ttfb),
                    ("bandwidth", c.bandwidth), ("overload", c.overload),
                    ("time_to_success", c.time_to_success),
                ] {
                    prop_assert!(x.is_finite() && (0.0..=1.0).contains(&x), "{id} {name} {x}");
                }
                // The local value and the weight of local evidence, from the local statistics.
                let (local_success, n) = match v.stats.success {
                    Some(s) => {
                        let age = now_s - v.stats.last_sample_s.unwrap_or(now_s);
                        let n = (v.stats.attempts as f64).min(memory)
                            * (-age.max(0.0) / cfg.share.local_half_life_s).exp2();
                        (s, n)
                    }
                    None => (cfg.ema.success_prior, 1.0),
                };
                let reach = cap / (n + cap);
                prop_assert!(
                    (c.success - local_success).abs() <= reach + 1e-9,
                    "{id}: success {} moved from {} further than {} (n {})",
                    c.success, local_success, reach, n
                );
                total += b.tree_probability(&CandidateId::new(id));
            }
            prop_assert!((total - 1.0).abs() < 1e-9, "probabilities sum to {}", total);
        }
    }
}

#[test]
fn a_sender_past_max_senders_is_turned_away() {
    let t = Instant::now();
    let mut config = Config::default();
    config.share.max_senders = 2;
    let mut b = core_with("b", t, config.clone());
    for name in ["s1", "s2"] {
        let s = core_with(name, t, config.clone());
        b.apply_digest(t, &s.digest(t)).unwrap();
    }
    let third = core_with("s3", t, config.clone());
    assert_eq!(
        b.apply_digest(t, &third.digest(t)).map_err(|e| e.reason()),
        Err("too_many_senders")
    );
    assert_eq!(b.share_senders().len(), 2);
}

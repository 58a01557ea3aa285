//! Changing a live A/B arm's share through the actor (`SetArmShare`): the new share takes
//! effect on the next requests, a bad arm or share is refused with the field to fix and the
//! old config stays, and statistics, waiting requests and permits outlive the change.

use std::time::Duration;

use selection_coordinator::actor::{Coordinator, CoordinatorHandle, SetArmShare};
use selection_coordinator::score::Arm;
use selection_coordinator::{CandidateInfo, Config, Error, Limits, Next, Outcome, Request};

fn arms_config() -> Config {
    Config {
        arms: vec![
            Arm {
                name: "a".into(),
                share: 1.0,
                config: Config::default(),
            },
            Arm {
                name: "b".into(),
                share: 1.0,
                config: Config::lassie(),
            },
        ],
        ..Config::default()
    }
}

fn start(config: Config, limits: Limits) -> CoordinatorHandle {
    let mut c = Coordinator::with_seed(config, limits, 7).unwrap();
    for i in 0..4 {
        c = c
            .with_candidate(CandidateInfo::new(format!("c{i}")))
            .unwrap();
    }
    c.start_handle()
}

/// Grants per arm index over `n` requests without keys (each permit released at once).
async fn grants_per_arm(h: &CoordinatorHandle, n: usize) -> [usize; 2] {
    let mut counts = [0; 2];
    for _ in 0..n {
        let mut p = h.acquire(Request::any()).await.unwrap();
        counts[p.grant().arm.expect("the config has arms")] += 1;
        p.report(Outcome::success());
        p.done(Next::Finish);
    }
    counts
}

async fn set_share(h: &CoordinatorHandle, arm: &str, share: f64) -> Result<(), Error> {
    h.addr()
        .send(SetArmShare {
            arm: arm.into(),
            share,
        })
        .await
        .unwrap()
}

/// The problems' field paths of a refused config.
fn paths(e: &Error) -> Vec<String> {
    match e {
        Error::Config(c) => c.problems.iter().map(|p| p.path.clone()).collect(),
        other => panic!("expected a config error, got {other:?}"),
    }
}

#[actix::test]
async fn a_new_share_moves_the_traffic() {
    tokio::time::pause();
    let h = start(arms_config(), Limits::default());
    let even = grants_per_arm(&h, 400).await;
    assert!((150..=250).contains(&even[0]), "1:1 split: {even:?}");

    set_share(&h, "b", 9.0).await.unwrap();
    let state = h.state().await.unwrap();
    assert_eq!(state.config.arms[1].share, 9.0);
    assert_eq!(state.arms, ["a", "b"]);
    let skewed = grants_per_arm(&h, 400).await;
    assert!(skewed[1] >= 320, "1:9 split: {skewed:?}");

    // A share of 0 takes an arm out of traffic.
    set_share(&h, "a", 0.0).await.unwrap();
    assert_eq!(grants_per_arm(&h, 100).await, [0, 100]);
    // Statistics learned before every change are all still there.
    let state = h.state().await.unwrap();
    let attempts: u64 = state.candidates.iter().map(|c| c.stats.attempts).sum();
    assert_eq!(attempts, 900);
}

#[actix::test]
async fn an_unknown_arm_or_a_bad_share_is_refused_and_the_config_stays() {
    tokio::time::pause();
    let h = start(arms_config(), Limits::default());
    let before = h.state().await.unwrap().config;

    let e = set_share(&h, "c", 1.0).await.unwrap_err();
    assert_eq!(paths(&e), ["arms"]);
    let text = e.to_string();
    assert!(text.contains("`c`") && text.contains("a, b"), "{text}");

    let e = set_share(&h, "b", -0.5).await.unwrap_err();
    assert_eq!(paths(&e), ["arms[1].share"]);
    let e = set_share(&h, "b", f64::NAN).await.unwrap_err();
    assert_eq!(paths(&e), ["arms[1].share"]);
    // Both to zero: nobody would get traffic.
    set_share(&h, "a", 0.0).await.unwrap();
    let e = set_share(&h, "b", 0.0).await.unwrap_err();
    assert_eq!(paths(&e), ["arms"]);

    let after = h.state().await.unwrap().config;
    assert_eq!(after.arms[1].share, before.arms[1].share);
    assert_eq!(after.arms[0].share, 0.0, "the one valid change stayed");
    assert_eq!(h.state().await.unwrap().shell.invalid_input, 4);

    // A config without arms has no arm to change.
    let plain = start(Config::default(), Limits::default());
    let e = set_share(&plain, "a", 1.0).await.unwrap_err();
    assert!(e.to_string().contains("no arms"), "{e}");
}

#[actix::test]
async fn waiting_requests_and_permits_survive_a_share_change() {
    tokio::time::pause();
    let limits = Limits {
        global: 1,
        ..Limits::default()
    };
    let h = start(arms_config(), limits);
    let mut held = h.acquire(Request::any()).await.unwrap();
    let waiter = {
        let h = h.clone();
        actix::spawn(async move { h.acquire(Request::any()).await })
    };
    // The second request waits for the one slot.
    for _ in 0..100 {
        if h.state().await.unwrap().waiting == 1 {
            break;
        }
        actix::clock::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(h.state().await.unwrap().waiting, 1);

    set_share(&h, "a", 3.0).await.unwrap();
    let s = h.state().await.unwrap();
    assert_eq!((s.waiting, s.in_flight), (1, 1), "nothing was dropped");

    // The permit granted before the change still reports and releases; the waiter gets the slot.
    held.report(Outcome::success());
    held.done(Next::Finish);
    let mut second = tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .expect("the waiter was granted")
        .unwrap()
        .unwrap();
    second.report(Outcome::success());
    second.done(Next::Finish);
    actix::clock::sleep(Duration::from_millis(20)).await;
    let s = h.state().await.unwrap();
    let attempts: u64 = s.candidates.iter().map(|c| c.stats.attempts).sum();
    assert_eq!(attempts, 2, "both outcomes were learned");
    assert_eq!(s.shell.stale, 0);
    assert_eq!((s.waiting, s.in_flight), (0, 0));
}

//! Fleet sharing end to end against a real `nats-server` (Debian package `nats-server`;
//! `.ci/run` installs it), started on 127.0.0.1 with a free port and killed on drop.
//!
//! - Two coordinators in this process, sharing through the server: the second learns of a
//!   candidate degraded at the first, and stops drawing it (below 20 % of its probability
//!   before, as the simulator's fleet mode measures), within 2 digest periods, counted in the
//!   first's published digests (not in wall-clock time).
//! - A sharp change at one coordinator is published at once (an urgent digest), not at the
//!   next period: the other learns of it with the period set to an hour.
//! - Killing the server mid-run: both coordinators keep granting (no errors, no stalls), and
//!   sharing resumes after a restart on the same port.
//! - Authentication: user/password and a credentials file (operator mode), accepted when
//!   right, refused with a typed error when wrong; publish permissions keep a user from
//!   publishing under another sender's name.
//!
//! Without `nats-server` on PATH each test prints a loud SKIPPED and returns, except under
//! `CI=true`, where it fails.

use std::io::Write;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use selection_coordinator::actor::{Coordinator, CoordinatorHandle, Explain, GetState, TakeDigest};
use selection_coordinator::fleet::{wire, Auth, Fleet, FleetConfig, FleetError};
use selection_coordinator::{CandidateInfo, Config, FailureClass, Limits, Next, Outcome, Request};

/// The digest period of these tests: long against the scheduling noise of a loaded machine,
/// short enough to keep the tests quick.
const PERIOD: Duration = Duration::from_millis(300);

/// The server binary: on PATH, or where the Debian package puts it (`/usr/sbin`, which a
/// non-root PATH may lack).
fn nats_server() -> &'static str {
    const DEBIAN: &str = "/usr/sbin/nats-server";
    if Path::new(DEBIAN).exists() {
        DEBIAN
    } else {
        "nats-server"
    }
}

/// Whether the server is there; `false` after a loud skip (outside CI only).
fn nats_present(test: &str) -> bool {
    let present = Command::new(nats_server())
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !present {
        let ci = std::env::var("CI").is_ok_and(|v| v == "true");
        assert!(
            !ci,
            "CI=true but `nats-server` is not on PATH: .ci/run must install the Debian \
             package `nats-server`"
        );
        // Straight to the stderr handle, past the harness's capture: a skip must be seen.
        let _ = writeln!(
            std::io::stderr(),
            "\n\n*** SKIPPED fleet_nats::{test}: `nats-server` not found on PATH. Install it \
             (apt-get install -y nats-server) to run this test. ***\n\n"
        );
    }
    present
}

/// A loopback port nobody listens on now (bound, then released).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A `nats-server` on 127.0.0.1, killed (and reaped) on drop.
struct NatsServer {
    port: u16,
    config: Option<PathBuf>,
    log: PathBuf,
    child: Option<Child>,
}

impl NatsServer {
    fn start(dir: &Path, config: Option<&str>) -> NatsServer {
        let config = config.map(|text| {
            let path = dir.join(format!("nats-{}.conf", free_port()));
            std::fs::write(&path, text).unwrap();
            path
        });
        let mut server = NatsServer {
            port: free_port(),
            config,
            log: dir.join("nats-server.log"),
            child: None,
        };
        server.restart();
        server
    }

    fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// Starts it (again) on the same port; returns once it accepts connections.
    fn restart(&mut self) {
        assert!(self.child.is_none(), "already running");
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap();
        let mut cmd = Command::new(nats_server());
        if let Some(c) = &self.config {
            cmd.arg("-c").arg(c);
        }
        cmd.args(["-a", "127.0.0.1", "-p", &self.port.to_string()])
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log);
        let mut child = cmd.spawn().expect("cannot start nats-server");
        let addr = SocketAddr::from(([127, 0, 0, 1], self.port));
        let start = Instant::now();
        while TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err() {
            if let Ok(Some(status)) = child.try_wait() {
                panic!(
                    "nats-server exited ({status}):\n{}",
                    std::fs::read_to_string(&self.log).unwrap_or_default()
                );
            }
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "nats-server did not listen on {addr}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        self.child = Some(child);
    }

    fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Polls `check` every 10 ms (real time: the server is another process) until it holds, or
/// panics after `limit` saying `what`.
async fn eventually(what: &str, limit: Duration, mut check: impl FnMut() -> bool) {
    let start = Instant::now();
    while !check() {
        assert!(start.elapsed() < limit, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn config(url: &str, sender: &str) -> FleetConfig {
    let mut c = FleetConfig::new(url, "test", sender);
    c.period = PERIOD;
    // Above the receivers' `min_interval_s` (0.1 s, [`scoring`]) and under the period.
    c.urgent_gap = Some(Duration::from_millis(150));
    c.max_reconnect_delay = Duration::from_millis(200);
    c.ping_interval = Duration::from_secs(1);
    c.connect_timeout = Duration::from_secs(2);
    c
}

fn candidates() -> Vec<&'static str> {
    vec!["c0", "c1", "c2", "c3"]
}

/// The scoring config of these tests: digests from a sender are applied at most every 0.1 s
/// (well under [`PERIOD`], so network jitter does not reject one as too soon), and local
/// evidence halves every second, as in the simulator's fleet scenarios.
fn scoring() -> Config {
    let mut config = Config::default();
    config.share.min_interval_s = 0.1;
    config.share.local_half_life_s = 1.0;
    config
}

fn coordinator(seed: u64) -> CoordinatorHandle {
    coordinator_with(scoring(), seed)
}

fn coordinator_with(scoring: Config, seed: u64) -> CoordinatorHandle {
    let mut c = Coordinator::with_seed(scoring, Limits::default(), seed).unwrap();
    for id in candidates() {
        c = c.with_candidate(CandidateInfo::new(id)).unwrap();
    }
    c.start_handle()
}

/// Runs one attempt on `candidate` (or any but c1, when `None`: the coordinator that learns
/// of c1 must do it from the other's digests alone) with `outcome`; fails the test on an
/// error or when the grant takes longer than 5 s (a stall).
async fn attempt(h: &CoordinatorHandle, candidate: Option<&str>, outcome: Outcome) {
    let request = match candidate {
        Some(c) => Request::only([c]),
        None => Request::any().excluding("c1"),
    };
    let mut permit = tokio::time::timeout(Duration::from_secs(5), h.acquire(request))
        .await
        .expect("the coordinator stalled: no grant within 5 s")
        .expect("acquire failed");
    permit.report(outcome);
    permit.done(Next::Finish);
}

fn ok() -> Outcome {
    Outcome::success_with(5.0, 20.0, 10_000, 40.0)
}

fn failed() -> Outcome {
    Outcome::failure(FailureClass::Timeout)
}

/// Builds evidence at a coordinator: every candidate good.
async fn warm_up(h: &CoordinatorHandle) {
    for _ in 0..20 {
        for c in candidates() {
            attempt(h, Some(c), ok()).await;
        }
    }
}

/// `n` attempts on `candidate` at `h`, all with `outcome`.
async fn stream(h: &CoordinatorHandle, candidate: &str, n: usize, outcome: Outcome) {
    for _ in 0..n {
        attempt(h, Some(candidate), outcome).await;
    }
}

/// `n` attempts on `candidate` at `h` running together, each failing after `after`: a
/// degraded candidate whose failures take time, as timeouts do.
async fn timeouts(h: &CoordinatorHandle, candidate: &str, n: usize, after: Duration) {
    let mut permits = Vec::with_capacity(n);
    for _ in 0..n {
        let permit = tokio::time::timeout(
            Duration::from_secs(5),
            h.acquire(Request::only([candidate])),
        )
        .await
        .expect("the coordinator stalled: no grant within 5 s")
        .expect("acquire failed");
        permits.push(permit);
    }
    tokio::time::sleep(after).await;
    for mut permit in permits {
        permit.report(failed());
        permit.done(Next::Finish);
    }
}

/// The success component a coordinator gives `candidate` now.
async fn success(h: &CoordinatorHandle, candidate: &str) -> f64 {
    let state = h.addr().send(GetState).await.unwrap();
    state
        .candidates
        .iter()
        .find(|c| c.info.id.as_str() == candidate)
        .unwrap()
        .components
        .success
}

/// The probability that a request open to every candidate draws `candidate` now.
async fn probability(h: &CoordinatorHandle, candidate: &str) -> f64 {
    let record = h
        .addr()
        .send(Explain(Request::any()))
        .await
        .unwrap()
        .unwrap();
    record
        .candidates
        .iter()
        .find(|c| c.id.as_str() == candidate)
        .map_or(0.0, |c| c.probability)
}

/// Input the coordinator ignored as an error (none is expected in these tests).
async fn errors(h: &CoordinatorHandle) -> u64 {
    h.addr().send(GetState).await.unwrap().shell.errors()
}

/// What [`periods_until`] watches at `b`.
#[derive(Clone, Copy, Debug)]
enum Watch {
    /// The success component of the candidate.
    Success,
    /// The probability of drawing it.
    Probability,
}

/// Waits until `watch` of `candidate` at `b` crosses `threshold` (downwards when `falling`),
/// and returns how many digests `a_fleet` published from `sent_before` until then: the delay
/// in digest periods.
async fn periods_until(
    b: &CoordinatorHandle,
    (candidate, watch): (&str, Watch),
    falling: bool,
    threshold: f64,
    a_fleet: &Fleet,
    sent_before: u64,
) -> u64 {
    let start = Instant::now();
    loop {
        let s = match watch {
            Watch::Success => success(b, candidate).await,
            Watch::Probability => probability(b, candidate).await,
        };
        if (falling && s < threshold) || (!falling && s > threshold) {
            return a_fleet.counts().sent - sent_before;
        }
        // A bound against a hang only; the assertion is on the periods counted.
        assert!(
            start.elapsed() < PERIOD * 50,
            "b never crossed {threshold} on {candidate} (now {s}); a's fleet: {:?}",
            a_fleet.counts()
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Sharing for `a` and `b` with configs `ca` and `cb`, once both are connected.
async fn share_both(
    a: &CoordinatorHandle,
    ca: FleetConfig,
    b: &CoordinatorHandle,
    cb: FleetConfig,
) -> (Fleet, Fleet) {
    // Started before sharing, so a test never ends with an actor still starting.
    a.addr().send(GetState).await.unwrap();
    b.addr().send(GetState).await.unwrap();
    let fa = Fleet::start(ca, a.addr().clone()).await.unwrap();
    let fb = Fleet::start(cb, b.addr().clone()).await.unwrap();
    eventually("both connections", Duration::from_secs(10), || {
        fa.connected() && fb.connected()
    })
    .await;
    (fa, fb)
}

/// Starts sharing at `a` and `b`, builds good evidence at `a` only, and waits until `b` has
/// applied enough of `a`'s digests to be past the sender blackout.
async fn pair(url: &str) -> (CoordinatorHandle, Fleet, CoordinatorHandle, Fleet) {
    let a = coordinator(11);
    let b = coordinator(12);
    let (fa, fb) = share_both(&a, config(url, "a"), &b, config(url, "b")).await;
    warm_up(&a).await;
    // The blackout of a new sender is 1 s: wait for digests covering twice that.
    let periods = (2.0 / PERIOD.as_secs_f64()).ceil() as u64 + 1;
    eventually("b to apply a's digests", PERIOD * 100, || {
        fb.counts().applied >= periods
    })
    .await;
    (a, fa, b, fb)
}

#[actix::test]
async fn a_candidate_degraded_at_one_coordinator_is_learned_by_the_other_within_two_periods() {
    if !nats_present(
        "a_candidate_degraded_at_one_coordinator_is_learned_by_the_other_within_two_periods",
    ) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let server = NatsServer::start(dir.path(), None);
    let (a, fa, b, fb) = pair(&server.url()).await;
    // b has used c1 too, as the simulator's fleet clients have used the candidate that
    // degrades, and not for the last few periods.
    warm_up(&b).await;
    tokio::time::sleep(PERIOD * 3).await;
    let before = success(&b, "c1").await;
    let drawn_before = probability(&b, "c1").await;
    assert!(drawn_before > 0.1, "b draws c1 before: {drawn_before}");

    // c1 degrades at a (its attempts time out after a third of a period); b never sends to it.
    let sent = fa.counts().sent;
    timeouts(&a, "c1", 20, PERIOD / 3).await;
    let at_a = success(&a, "c1").await;
    assert!(
        at_a < before - 0.3,
        "a itself must see c1 degraded: {before} -> {at_a}"
    );
    let halfway = (before + at_a) / 2.0;
    let periods = periods_until(&b, ("c1", Watch::Success), true, halfway, &fa, sent).await;
    let after = success(&b, "c1").await;
    println!("b learned of c1's degradation within {periods} digest period(s): {before:.3} -> {after:.3} (a: {at_a:.3})");
    assert!(
        periods <= 2,
        "b took {periods} digest periods to learn of c1"
    );
    // As the simulator measures a fleet: b stops drawing c1 (below 20 % of its probability
    // before) within 2 digest periods.
    let stopped = periods_until(
        &b,
        ("c1", Watch::Probability),
        true,
        0.2 * drawn_before,
        &fa,
        sent,
    )
    .await;
    let drawn_after = probability(&b, "c1").await;
    println!("b stopped drawing c1 within {stopped} digest period(s): {drawn_before:.3} -> {drawn_after:.3}");
    assert!(
        stopped <= 2,
        "b took {stopped} digest periods to stop drawing c1"
    );
    // The others are untouched.
    assert!(success(&b, "c0").await > halfway);
    let (ca, cb) = (fa.counts(), fb.counts());
    assert_eq!(
        (ca.rejected, cb.rejected, ca.dropped, cb.dropped),
        (0, 0, 0, 0),
        "{ca:?} {cb:?}"
    );
    assert!(cb.applied > 0 && ca.sent > 0);
    assert_eq!(errors(&a).await + errors(&b).await, 0);
}

/// Two members started under one sender name would each take the other's digests for the
/// echo of its own: they are counted as rejected (`own_sender`) instead of vanishing.
/// Stopping a member's sharing ends its publishing: the other applies nothing more from it,
/// though its coordinator keeps learning.
#[actix::test]
async fn a_stopped_fleet_publishes_no_more() {
    if !nats_present("a_stopped_fleet_publishes_no_more") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let server = NatsServer::start(dir.path(), None);
    let (a, fa, _b, fb) = pair(&server.url()).await;
    fa.stop();
    // A digest on its way when sharing stopped may still arrive.
    tokio::time::sleep(PERIOD * 2).await;
    let applied = fb.counts().applied;
    for _ in 0..5 {
        warm_up(&a).await;
        tokio::time::sleep(PERIOD).await;
    }
    assert_eq!(fb.counts().applied, applied, "{:?}", fb.counts());
}

#[actix::test]
async fn two_members_under_one_name_are_told_not_silently_ignored() {
    if !nats_present("two_members_under_one_name_are_told_not_silently_ignored") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let server = NatsServer::start(dir.path(), None);
    let (a, b) = (coordinator(21), coordinator(22));
    let same = config(&server.url(), "same");
    let (fa, fb) = share_both(&a, same.clone(), &b, same).await;
    warm_up(&a).await;
    warm_up(&b).await;
    eventually("both to see the other's digests", PERIOD * 100, || {
        fa.counts().rejected > 0 && fb.counts().rejected > 0
    })
    .await;
    let (ca, cb) = (fa.counts(), fb.counts());
    assert_eq!((ca.applied, cb.applied), (0, 0), "{ca:?} {cb:?}");
    assert!(ca.sent > 0 && cb.sent > 0, "{ca:?} {cb:?}");
}

/// With a digest period far longer than the test, `a` publishes only urgent digests: none
/// while its outcomes are healthy, and one at once when a candidate it used starts failing,
/// from which `b`, which never sends to that candidate, learns of it.
#[actix::test]
async fn a_sharp_change_is_published_at_once_not_at_the_next_period() {
    if !nats_present("a_sharp_change_is_published_at_once_not_at_the_next_period") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let server = NatsServer::start(dir.path(), None);
    // No blackout: b takes a's very first digest.
    let mut shared = scoring();
    shared.share.blackout_s = 0.0;
    let a = coordinator_with(shared.clone(), 21);
    let b = coordinator_with(shared, 22);
    let mut slow = config(&server.url(), "a");
    slow.period = Duration::from_secs(3600);
    let (fa, fb) = share_both(&a, slow, &b, config(&server.url(), "b")).await;
    warm_up(&a).await;
    warm_up(&b).await;
    tokio::time::sleep(PERIOD * 2).await;
    assert_eq!(
        fa.counts().sent,
        0,
        "healthy outcomes are not urgent: {:?}",
        fa.counts()
    );
    let before = success(&b, "c1").await;

    // c1 starts failing at a.
    stream(&a, "c1", 10, failed()).await;
    let at_a = success(&a, "c1").await;
    assert!(
        at_a < before - 0.3,
        "a itself sees c1 failing: {before} -> {at_a}"
    );
    let halfway = (before + at_a) / 2.0;
    let start = Instant::now();
    // A bound against a hang only: a's next periodic digest is an hour away.
    while success(&b, "c1").await >= halfway {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "b never learned of c1 (success {}); a's fleet: {:?}",
            success(&b, "c1").await,
            fa.counts()
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let counts = fa.counts();
    println!(
        "b learned of c1 from {} urgent digest(s): {before:.3} -> {:.3} (a: {at_a:.3})",
        counts.sent,
        success(&b, "c1").await
    );
    assert!(counts.sent >= 1 && counts.dropped == 0, "{counts:?}");
    assert_eq!(
        counts.urgent, counts.sent,
        "every digest a sent was urgent: {counts:?}"
    );
    assert_eq!(fb.counts().rejected, 0, "{:?}", fb.counts());
    assert_eq!(errors(&a).await + errors(&b).await, 0);
}

/// Digests that cannot be published (here: every one is larger than the server's
/// `max_payload`) are attempted at most once a period, however many sharp changes ask for
/// an urgent digest meanwhile: a failing send is not retried at every wake-up.
#[actix::test]
async fn failing_sends_are_attempted_at_most_once_a_period_not_at_every_urgent_change() {
    if !nats_present("failing_sends_are_attempted_at_most_once_a_period_not_at_every_urgent_change")
    {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // Smaller than any digest entry: every publish fails.
    let server = NatsServer::start(dir.path(), Some("max_payload: 100\n"));
    let a = coordinator(41);
    a.addr().send(GetState).await.unwrap();
    let fa = Fleet::start(config(&server.url(), "a"), a.addr().clone())
        .await
        .unwrap();
    eventually("a's connection", Duration::from_secs(10), || fa.connected()).await;
    warm_up(&a).await;
    let before = fa.counts();
    let start = Instant::now();
    let mut changes = 0;
    // Sharp changes over and over: two failures after many successes on a reliable candidate.
    while start.elapsed() < PERIOD * 6 {
        for c in candidates() {
            stream(&a, c, 40, ok()).await;
            stream(&a, c, 2, failed()).await;
            changes += 1;
        }
    }
    let elapsed = start.elapsed();
    let counts = fa.counts();
    let attempts = counts.dropped - before.dropped;
    println!("{changes} sharp changes in {elapsed:?}: {attempts} failed attempts; {counts:?}");
    assert_eq!(counts.sent, 0, "{counts:?}");
    let allowed = (elapsed.as_secs_f64() / PERIOD.as_secs_f64()).ceil() as u64 + 2;
    assert!(
        attempts <= allowed,
        "{attempts} attempts in {elapsed:?}, at most {allowed} expected (one a period)"
    );
    assert!(attempts >= 1, "{counts:?}");
    assert_eq!(errors(&a).await, 0);
}

/// A periodic digest due soon after an urgent one waits until the urgent gap has passed, as
/// the next urgent one would: the others take it (a receiver refuses a digest sooner than its
/// `share.min_interval_s` after the previous one from the same sender). Here the period is
/// 1 s, the gap 0.7 s and `b` refuses digests less than 0.5 s apart; the urgent digest goes
/// out 0.7 s after a periodic one, so the next period comes 0.3 s after it.
#[actix::test]
async fn a_periodic_digest_after_an_urgent_one_waits_the_gap_and_is_not_refused() {
    if !nats_present("a_periodic_digest_after_an_urgent_one_waits_the_gap_and_is_not_refused") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let server = NatsServer::start(dir.path(), None);
    let mut strict = scoring();
    strict.share.min_interval_s = 0.5;
    strict.share.blackout_s = 0.0;
    let a = coordinator(61);
    let b = coordinator_with(strict, 62);
    let gap = Duration::from_millis(700);
    let mut ca = config(&server.url(), "a");
    ca.period = Duration::from_secs(1);
    ca.urgent_gap = Some(gap);
    let (fa, fb) = share_both(&a, ca, &b, config(&server.url(), "b")).await;
    warm_up(&a).await;
    stream(&a, "c1", 40, ok()).await;
    // Right after a periodic digest, c1, which never failed, fails once at a: a sharp change.
    let sent = fa.counts().sent;
    eventually("a periodic digest", Duration::from_secs(10), || {
        fa.counts().sent > sent
    })
    .await;
    stream(&a, "c1", 1, failed()).await;
    eventually("the urgent digest", Duration::from_secs(10), || {
        fa.counts().urgent == 1
    })
    .await;
    let urgent_at = Instant::now();
    let after_urgent = fa.counts().sent;
    eventually(
        "the periodic digest after it",
        Duration::from_secs(10),
        || fa.counts().sent > after_urgent,
    )
    .await;
    let waited = urgent_at.elapsed();
    eventually("b to hear every digest", Duration::from_secs(10), || {
        let c = fb.counts();
        c.applied + c.rejected >= fa.counts().sent
    })
    .await;
    let (ca, cb) = (fa.counts(), fb.counts());
    println!("the periodic digest followed the urgent one after {waited:?}; a: {ca:?}; b: {cb:?}");
    // The two are observed by polling, late by as much as a loaded machine delays a poll:
    // slack for that (without the gap the periodic digest comes 0.3 s after the urgent one,
    // and `b` refuses it).
    assert!(
        waited >= gap - Duration::from_millis(250),
        "a periodic digest followed the urgent one after {waited:?}, within the gap {gap:?}"
    );
    assert_eq!(cb.rejected, 0, "b refused a digest from a: {cb:?}");
    assert_eq!(cb.applied, ca.sent, "{cb:?}");
}

/// A coordinator with no evidence of its own has nothing to share: it publishes nothing,
/// period after period (an empty digest would only cost the others a message and reset their
/// flood control), and publishes once it has evidence.
#[actix::test]
async fn a_coordinator_with_nothing_to_share_publishes_nothing() {
    if !nats_present("a_coordinator_with_nothing_to_share_publishes_nothing") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let server = NatsServer::start(dir.path(), None);
    let a = coordinator(71);
    let b = coordinator(72);
    let mut ca = config(&server.url(), "a");
    ca.period = Duration::from_millis(20);
    ca.urgent_gap = None;
    let (fa, fb) = share_both(&a, ca, &b, config(&server.url(), "b")).await;
    // Twenty-five periods.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (ca, cb) = (fa.counts(), fb.counts());
    assert_eq!(
        (ca.sent, ca.parts, ca.dropped),
        (0, 0, 0),
        "a published with nothing to share: {ca:?}"
    );
    assert_eq!(cb.applied + cb.rejected, 0, "b heard from a: {cb:?}");
    // With evidence, it does publish.
    warm_up(&a).await;
    eventually("a's first digest", Duration::from_secs(10), || {
        fa.counts().sent >= 1
    })
    .await;
}
/// The same with 50,000 candidates: 12 parts a digest.
#[actix::test]
#[ignore = "slow: 50,000 candidates; cargo test --release -- --ignored"]
async fn fifty_thousand_candidates_are_shared_with_the_default_max_payload() {
    a_large_digest_reaches_the_other_in_parts(
        "fifty_thousand_candidates_are_shared_with_the_default_max_payload",
        50_000,
        "",
    )
    .await;
}

/// A member that restarts (a new process: a new coordinator under the same name) is heard at
/// once, however long its predecessor ran before it started sharing: the digests are numbered
/// from the wall clock, not from the wall clock at start plus the coordinator's age.
#[actix::test]
async fn a_restarted_member_is_not_taken_for_a_replay() {
    if !nats_present("a_restarted_member_is_not_taken_for_a_replay") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let server = NatsServer::start(dir.path(), None);
    let b = coordinator(52);
    b.addr().send(GetState).await.unwrap();
    let fb = Fleet::start(config(&server.url(), "b"), b.addr().clone())
        .await
        .unwrap();
    // `a` runs 3 s before it shares.
    let a = coordinator(51);
    warm_up(&a).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let fa = Fleet::start(config(&server.url(), "a"), a.addr().clone())
        .await
        .unwrap();
    warm_up(&a).await;
    eventually("b to apply a's digests", PERIOD * 100, || {
        fb.counts().applied >= 2
    })
    .await;
    // The process restarts: sharing stops, a new coordinator shares under the same name.
    drop(fa);
    // What a published before it stopped has arrived.
    tokio::time::sleep(PERIOD * 2).await;
    let before = fb.counts();
    let a2 = coordinator(53);
    a2.addr().send(GetState).await.unwrap();
    let fa2 = Fleet::start(config(&server.url(), "a"), a2.addr().clone())
        .await
        .unwrap();
    warm_up(&a2).await;
    eventually(
        "b to hear two digests from the restarted a",
        PERIOD * 100,
        || {
            let c = fb.counts();
            c.applied + c.rejected >= before.applied + before.rejected + 2
        },
    )
    .await;
    let after = fb.counts();
    println!(
        "b before the restart: {before:?}; after: {after:?}; a2: {:?}",
        fa2.counts()
    );
    assert_eq!(
        after.rejected, before.rejected,
        "the restarted member's digest was rejected: {after:?}"
    );
    assert!(after.applied > before.applied, "{after:?}");
}

/// A digest larger than one message (more candidates with fresh evidence than the server's
/// `max_payload` holds) is split into parts that each reach the other coordinator and are
/// applied on their own: every candidate's evidence arrives, nothing is dropped or rejected.
async fn a_large_digest_reaches_the_other_in_parts(test: &str, n: usize, server_config: &str) {
    if !nats_present(test) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let server = NatsServer::start(dir.path(), Some(server_config));
    let mut shared = scoring();
    shared.share.blackout_s = 0.0;
    let ids: Vec<String> = (0..n).map(|i| format!("provider-{i:06}")).collect();
    let build = |seed| {
        let mut c = Coordinator::with_seed(shared.clone(), Limits::default(), seed).unwrap();
        for id in &ids {
            c = c.with_candidate(CandidateInfo::new(id.as_str())).unwrap();
        }
        c.start_handle()
    };
    let (a, b) = (build(61), build(62));
    let at_b = |state: &selection_coordinator::actor::State| -> Vec<f64> {
        state
            .candidates
            .iter()
            .map(|c| c.components.success)
            .collect()
    };
    let before = at_b(&b.addr().send(GetState).await.unwrap());
    let mut slow = config(&server.url(), "a");
    // Every digest is a periodic one, taken after all the outcomes.
    slow.period = Duration::from_secs(2);
    slow.urgent_gap = None;
    let (fa, fb) = share_both(&a, slow, &b, config(&server.url(), "b")).await;
    let start = Instant::now();
    for id in &ids {
        attempt(&a, Some(id), failed()).await;
    }
    println!("{n} outcomes at a in {:?}", start.elapsed());
    let sent = fa.counts().sent;
    eventually(
        "two digests from a, all of them applied",
        Duration::from_secs(60),
        || {
            let (ca, cb) = (fa.counts(), fb.counts());
            ca.sent >= sent + 2 && cb.applied + cb.rejected + cb.dropped >= ca.parts
        },
    )
    .await;
    let (ca, cb) = (fa.counts(), fb.counts());
    println!("a: {ca:?}; b: {cb:?}");
    assert!(ca.parts >= 2 * ca.sent, "each digest split: {ca:?}");
    assert_eq!(
        (ca.dropped, cb.rejected, cb.dropped, cb.entries_rejected),
        (0, 0, 0, 0),
        "{ca:?} {cb:?}"
    );
    let after = at_b(&b.addr().send(GetState).await.unwrap());
    let moved = before
        .iter()
        .zip(&after)
        .filter(|(x, y)| **y < **x - 0.05)
        .count();
    assert_eq!(moved, n, "every candidate's evidence reached b");
    assert_eq!(errors(&a).await + errors(&b).await, 0);
    // What a digest of `n` entries costs on the wire (last: it takes a digest at a).
    let digest = a.addr().send(TakeDigest).await.unwrap();
    let start = Instant::now();
    let encoded = wire::encode_split(&digest, 1 << 20, 10_000).unwrap();
    let encoding = start.elapsed();
    let bytes: usize = encoded.payloads.iter().map(Vec::len).sum();
    let start = Instant::now();
    for p in &encoded.payloads {
        wire::decode(&wire::subject("test", "a"), "test", p).unwrap();
    }
    println!(
        "a digest of {} entries: {bytes} bytes ({:.0} an entry) in {} parts of at most 1 MiB, \
         encoded in {encoding:?}, decoded in {:?}",
        digest.entries.len(),
        bytes as f64 / digest.entries.len() as f64,
        encoded.payloads.len(),
        start.elapsed()
    );
}

#[actix::test]
async fn a_digest_larger_than_max_payload_is_split_into_parts_each_applied() {
    a_large_digest_reaches_the_other_in_parts(
        "a_digest_larger_than_max_payload_is_split_into_parts_each_applied",
        2_000,
        "max_payload: 65536\n",
    )
    .await;
}

/// 20,000 candidates with fresh evidence, the server's default `max_payload` (1 MiB): the
/// figure of `docs/fleet.md` (*Large fleets*). Slow in a debug build: run it with `--release
/// --ignored`.
#[actix::test]
#[ignore = "slow: 20,000 candidates; cargo test --release -- --ignored"]
async fn twenty_thousand_candidates_are_shared_with_the_default_max_payload() {
    a_large_digest_reaches_the_other_in_parts(
        "twenty_thousand_candidates_are_shared_with_the_default_max_payload",
        20_000,
        "",
    )
    .await;
}

#[actix::test]
async fn killing_nats_causes_no_errors_or_stalls_and_sharing_resumes_after_a_restart() {
    if !nats_present("killing_nats_causes_no_errors_or_stalls_and_sharing_resumes_after_a_restart")
    {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut server = NatsServer::start(dir.path(), None);
    let (a, fa, b, fb) = pair(&server.url()).await;
    let before = success(&b, "c1").await;

    server.kill();
    eventually(
        "both to notice the server is gone",
        Duration::from_secs(10),
        || !fa.connected() && !fb.connected(),
    )
    .await;
    // Alone: every attempt is granted at once (a stall fails `attempt`), nothing errs, and
    // a's digests are dropped, not queued.
    let dropped = fa.counts().dropped;
    for round in 0..30 {
        attempt(&a, None, ok()).await;
        attempt(&b, None, ok()).await;
        if round % 10 == 0 {
            tokio::time::sleep(PERIOD).await;
        }
    }
    stream(&a, "c1", 20, failed()).await;
    eventually("a to drop digests while alone", PERIOD * 20, || {
        fa.counts().dropped >= dropped + 2
    })
    .await;
    let while_down = success(&b, "c1").await;
    assert!(
        (while_down - before).abs() < 0.05,
        "b cannot learn anything while the server is down: {before} -> {while_down}"
    );
    assert_eq!(errors(&a).await + errors(&b).await, 0);

    server.restart();
    eventually("both to reconnect", Duration::from_secs(20), || {
        fa.connected() && fb.connected()
    })
    .await;
    // Sharing resumes: b learns of the degradation a saw while they were apart.
    let at_a = success(&a, "c1").await;
    let halfway = (before + at_a) / 2.0;
    let sent = fa.counts().sent;
    let periods = periods_until(&b, ("c1", Watch::Success), true, halfway, &fa, sent).await;
    println!(
        "after the restart b learned of c1 within {periods} digest period(s) of a's first digest"
    );
    assert!(
        periods <= 2,
        "b took {periods} digest periods after the reconnection"
    );
    // And keeps learning: c1 heals at a.
    let low = success(&b, "c1").await;
    let sent = fa.counts().sent;
    stream(&a, "c1", 40, ok()).await;
    let healed = success(&a, "c1").await;
    let periods = periods_until(
        &b,
        ("c1", Watch::Success),
        false,
        (low + healed) / 2.0,
        &fa,
        sent,
    )
    .await;
    assert!(
        periods <= 2,
        "b took {periods} digest periods to learn of the heal"
    );
    assert_eq!(errors(&a).await + errors(&b).await, 0);
    assert_eq!(fb.counts().rejected, 0, "{:?}", fb.counts());
}

#[actix::test]
async fn wrong_password_is_a_typed_error_and_the_right_one_connects() {
    if !nats_present("wrong_password_is_a_typed_error_and_the_right_one_connects") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let server = NatsServer::start(
        dir.path(),
        Some("authorization {\n  users = [\n    {user: alice, password: \"s3cret-a\"}\n  ]\n}\n"),
    );
    let a = coordinator(1);

    let mut wrong = config(&server.url(), "alice");
    wrong.auth = Auth::UserPassword {
        user: "alice".into(),
        password: "wrong".into(),
    };
    match Fleet::start(wrong, a.addr().clone()).await {
        Err(FleetError::Auth { url, .. }) => assert_eq!(url, server.url()),
        other => panic!("a wrong password must be FleetError::Auth, got {other:?}"),
    }
    let mut none = config(&server.url(), "alice");
    none.auth = Auth::None;
    assert!(
        matches!(
            Fleet::start(none, a.addr().clone()).await,
            Err(FleetError::Auth { .. })
        ),
        "no credentials at a server that requires them must be refused"
    );

    let mut right = config(&server.url(), "alice");
    right.auth = Auth::UserPassword {
        user: "alice".into(),
        password: "s3cret-a".into(),
    };
    let fleet = Fleet::start(right, a.addr().clone()).await.unwrap();
    eventually("the connection", Duration::from_secs(10), || {
        fleet.connected()
    })
    .await;
}

/// The server config of `docs/fleet.md`: each user may publish only on its own digest
/// subject and read the whole fleet's.
const PERMISSIONS: &str = "authorization {
  users = [
    { user: a, password: pa, permissions: {
        publish: { allow: [\"selcoord.digest.test.a\"] }
        subscribe: { allow: [\"selcoord.digest.test.*\"] } } }
    { user: b, password: pb, permissions: {
        publish: { allow: [\"selcoord.digest.test.b\"] }
        subscribe: { allow: [\"selcoord.digest.test.*\"] } } }
  ]
}
";

#[actix::test]
async fn publish_permissions_keep_a_user_from_speaking_for_another() {
    if !nats_present("publish_permissions_keep_a_user_from_speaking_for_another") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let server = NatsServer::start(dir.path(), Some(PERMISSIONS));
    let b = coordinator(21);
    b.addr().send(GetState).await.unwrap();
    let mut cb = config(&server.url(), "b");
    cb.auth = Auth::UserPassword {
        user: "b".into(),
        password: "pb".into(),
    };
    let fb = Fleet::start(cb, b.addr().clone()).await.unwrap();
    eventually("b's connection", Duration::from_secs(10), || fb.connected()).await;

    // User a, misbehaving: a digest under a's own subject that claims to be c's, and one on
    // c's subject (which the server refuses to route).
    let rogue = async_nats::ConnectOptions::with_user_and_password("a".into(), "pa".into())
        .connect(server.url())
        .await
        .unwrap();
    let claims_c = br#"{"v":1,"digest":{"sender":"c","seq":1,"entries":[]}}"#;
    let honest = br#"{"v":1,"digest":{"sender":"a","seq":1,"entries":[]}}"#;
    rogue
        .publish("selcoord.digest.test.a", claims_c.as_slice().into())
        .await
        .unwrap();
    rogue
        .publish("selcoord.digest.test.c", honest.as_slice().into())
        .await
        .unwrap();
    rogue
        .publish("selcoord.digest.test.c", claims_c.as_slice().into())
        .await
        .unwrap();
    rogue.flush().await.unwrap();
    eventually(
        "b to reject the false claim",
        Duration::from_secs(10),
        || fb.counts().rejected >= 1,
    )
    .await;
    // The honest digest under a's own name still arrives: it is the last one a sends, so once
    // it is applied or refused everything before it has been seen.
    rogue
        .publish("selcoord.digest.test.a", honest.as_slice().into())
        .await
        .unwrap();
    rogue.flush().await.unwrap();
    eventually("b to take a's own digest", Duration::from_secs(10), || {
        let c = fb.counts();
        c.applied + c.rejected >= 2
    })
    .await;
    let c = fb.counts();
    assert_eq!(
        (c.applied, c.rejected),
        (1, 1),
        "only the claim under a's subject reached b (and was rejected), then a's own: {c:?}"
    );
}

#[actix::test]
async fn unreachable_server_is_not_an_error_and_the_fleet_connects_when_it_comes() {
    if !nats_present("unreachable_server_is_not_an_error_and_the_fleet_connects_when_it_comes") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut server = NatsServer::start(dir.path(), None);
    server.kill();
    let a = coordinator(2);
    let fleet = Fleet::start(config(&server.url(), "a"), a.addr().clone())
        .await
        .expect("an unreachable server must not keep the coordinator from starting");
    assert!(!fleet.connected());
    // The coordinator works alone meanwhile.
    for _ in 0..10 {
        attempt(&a, None, ok()).await;
    }
    server.restart();
    eventually("the background connection", Duration::from_secs(20), || {
        fleet.connected()
    })
    .await;
}

/// An empty URL (which the NATS client would take for its default server) is refused.
#[test]
fn an_empty_url_is_refused() {
    for url in ["", "  "] {
        match FleetConfig::new(url, "test", "a").validate() {
            Err(FleetError::Config(m)) => assert!(m.contains("empty"), "{url:?}: {m}"),
            other => panic!("the URL {url:?} must be refused: {other:?}"),
        }
    }
}

#[actix::test]
async fn invalid_names_are_refused_before_connecting() {
    let a = coordinator(3);
    a.addr().send(GetState).await.unwrap();
    for (fleet, sender) in [
        ("test", "a.b"),
        ("te*st", "a"),
        ("test", ""),
        ("test", "a b"),
    ] {
        let c = FleetConfig::new("nats://127.0.0.1:1", fleet, sender);
        assert!(
            matches!(
                Fleet::start(c, a.addr().clone()).await,
                Err(FleetError::Config(_))
            ),
            "fleet {fleet:?} sender {sender:?} must be refused"
        );
    }
    let c = FleetConfig::new("nats://127.0.0.1:1", "test", "a");
    let mut zero = c.clone();
    zero.period = Duration::ZERO;
    assert!(matches!(zero.validate(), Err(FleetError::Config(_))));
    let mut queue = c;
    queue.queue = 0;
    assert!(matches!(queue.validate(), Err(FleetError::Config(_))));
    // A URL the client could not parse is refused before anything starts.
    let http = FleetConfig::new("http://127.0.0.1:1", "test", "a");
    match http.validate() {
        Err(FleetError::Config(m)) => assert!(m.contains("scheme"), "{m}"),
        other => panic!("an http URL must be refused: {other:?}"),
    }
    assert!(FleetConfig::new("127.0.0.1:4222", "test", "a")
        .validate()
        .is_ok());
}

#[actix::test]
async fn a_missing_credentials_file_is_a_typed_error() {
    let a = coordinator(4);
    a.addr().send(GetState).await.unwrap();
    let mut c = FleetConfig::new("nats://127.0.0.1:1", "test", "a");
    c.auth = Auth::CredentialsFile(PathBuf::from("/nonexistent/selcoord.creds"));
    match Fleet::start(c, a.addr().clone()).await {
        Err(FleetError::Credentials { path, .. }) => {
            assert_eq!(path, PathBuf::from("/nonexistent/selcoord.creds"))
        }
        other => panic!("expected FleetError::Credentials, got {other:?}"),
    }
}

/// Base64url without padding (JWT segments).
fn b64url(bytes: &[u8]) -> String {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | (u32::from(*b) << (16 - 8 * i)));
        for i in 0..=chunk.len() {
            out.push(T[((n >> (18 - 6 * i)) & 63) as usize] as char);
        }
    }
    out
}

/// A NATS JWT (`ed25519-nkey`) with `claims`, signed by `issuer`.
fn jwt(issuer: &nkeys::KeyPair, subject: &str, name: &str, nats: serde_json::Value) -> String {
    static JTI: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    let claims = serde_json::json!({
        "jti": format!("SELCOORDTEST{}", JTI.fetch_add(1, std::sync::atomic::Ordering::Relaxed)),
        "iat": std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs(),
        "iss": issuer.public_key(),
        "name": name,
        "sub": subject,
        "nats": nats,
    });
    let head = b64url(br#"{"typ":"JWT","alg":"ed25519-nkey"}"#);
    let body = b64url(claims.to_string().as_bytes());
    let signed = format!("{head}.{body}");
    let sig = issuer.sign(signed.as_bytes()).unwrap();
    format!("{signed}.{}", b64url(&sig))
}

/// An operator-mode server config with one account, and a credentials file for a user of it
/// allowed to publish on its own digest subject only.
fn operator_setup(dir: &Path, sender: &str) -> (String, PathBuf) {
    let operator = nkeys::KeyPair::new_operator();
    let account = nkeys::KeyPair::new_account();
    let user = nkeys::KeyPair::new_user();
    let op_jwt = jwt(
        &operator,
        &operator.public_key(),
        "selcoord-test",
        serde_json::json!({"type": "operator", "version": 2}),
    );
    let limits = serde_json::json!({
        "subs": -1, "data": -1, "payload": -1, "imports": -1, "exports": -1,
        "wildcards": true, "conn": -1, "leaf": -1
    });
    let account_jwt = jwt(
        &operator,
        &account.public_key(),
        "fleet",
        serde_json::json!({"type": "account", "version": 2, "limits": limits}),
    );
    let user_jwt = jwt(
        &account,
        &user.public_key(),
        sender,
        serde_json::json!({
            "type": "user", "version": 2, "subs": -1, "data": -1, "payload": -1,
            "pub": {"allow": [format!("selcoord.digest.test.{sender}")]},
            "sub": {"allow": ["selcoord.digest.test.*"]},
        }),
    );
    let config = format!(
        "operator: \"{op_jwt}\"\nresolver: MEMORY\nresolver_preload: {{\n  {}: \"{account_jwt}\"\n}}\n",
        account.public_key()
    );
    let creds = dir.join(format!("{sender}.creds"));
    std::fs::write(
        &creds,
        format!(
            "-----BEGIN NATS USER JWT-----\n{user_jwt}\n------END NATS USER JWT------\n\n\
             -----BEGIN USER NKEY SEED-----\n{}\n------END USER NKEY SEED------\n",
            user.seed().unwrap()
        ),
    )
    .unwrap();
    (config, creds)
}

#[actix::test]
async fn credentials_file_is_accepted_and_a_foreign_one_refused() {
    if !nats_present("credentials_file_is_accepted_and_a_foreign_one_refused") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (server_config, creds) = operator_setup(dir.path(), "a");
    let server = NatsServer::start(dir.path(), Some(&server_config));
    let a = coordinator(5);

    let mut right = config(&server.url(), "a");
    right.auth = Auth::CredentialsFile(creds);
    let fleet = Fleet::start(right, a.addr().clone())
        .await
        .expect("the credentials file must be accepted");
    eventually("the connection", Duration::from_secs(10), || {
        fleet.connected()
    })
    .await;

    // A well-formed credentials file of another operator's user: refused by the server.
    let other = tempfile::tempdir().unwrap();
    let (_, foreign) = operator_setup(other.path(), "a");
    let mut wrong = config(&server.url(), "a");
    wrong.auth = Auth::CredentialsFile(foreign);
    match Fleet::start(wrong, a.addr().clone()).await {
        Err(FleetError::Auth { .. }) => {}
        other => panic!("a foreign credentials file must be FleetError::Auth, got {other:?}"),
    }
}

#[actix::test]
async fn a_flood_from_one_sender_is_bounded_and_counted_and_decisions_go_on() {
    if !nats_present("a_flood_from_one_sender_is_bounded_and_counted_and_decisions_go_on") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let server = NatsServer::start(dir.path(), None);
    let b = coordinator(31);
    b.addr().send(GetState).await.unwrap();
    let mut cb = config(&server.url(), "b");
    cb.queue = 8;
    let fb = Fleet::start(cb, b.addr().clone()).await.unwrap();
    eventually("b's connection", Duration::from_secs(10), || fb.connected()).await;

    const FLOOD: u64 = 5_000;
    let rogue = async_nats::connect(server.url()).await.unwrap();
    for seq in 1..=FLOOD {
        let entry = r#"{"id":"c0","success":0.0,"overload_errors":0,"overload_total":0,"samples":1000,"successes":0,"age_s":0.0}"#;
        let payload =
            format!(r#"{{"v":1,"digest":{{"sender":"x","seq":{seq},"entries":[{entry}]}}}}"#);
        rogue
            .publish("selcoord.digest.test.x", payload.into_bytes().into())
            .await
            .unwrap();
        if seq % 500 == 0 {
            // Decisions go on while the flood arrives (a stall fails `attempt`).
            attempt(&b, None, ok()).await;
        }
    }
    rogue.flush().await.unwrap();
    eventually(
        "every flooded digest to be accounted for",
        Duration::from_secs(30),
        || {
            let c = fb.counts();
            c.applied + c.rejected + c.dropped == FLOOD
        },
    )
    .await;
    let c = fb.counts();
    println!("a flood of {FLOOD} digests from one sender: {c:?}");
    // At most one digest per sender per `min_interval_s` is applied; the rest are refused by
    // the coordinator or dropped by the bounded queue before reaching it.
    assert!(c.applied > 0 && c.applied < FLOOD / 10, "{c:?}");
    assert!(c.rejected + c.dropped > FLOOD / 2, "{c:?}");
    assert_eq!(errors(&b).await, 0);
}

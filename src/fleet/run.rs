//! The connection and the two tasks: publish and receive.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use actix::Addr;
use async_nats::{ConnectErrorKind, ConnectOptions, Event};
use futures_util::StreamExt;
use metrics::{counter, gauge};
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::{wire, Auth, Counters, Fleet, FleetConfig, FleetError};
use crate::actor::{
    ApplyDigest, Coordinator, GetState, SetShareIdentity, TakeDigest, TakeUrgentDigest,
    WatchUrgentDigests,
};
use crate::digest::{Digest, DigestError};
use crate::metrics::names;

/// `reason` labels of the dropped-digest counter.
pub(super) const DROP_DISCONNECTED: &str = "disconnected";
pub(super) const DROP_PUBLISH_ERROR: &str = "publish_error";
pub(super) const DROP_QUEUE_FULL: &str = "queue_full";
/// The NATS client's buffer for received messages was full (it says so once a message).
pub(super) const DROP_SLOW_CONSUMER: &str = "slow_consumer";
pub(super) const DROP_REASONS: [&str; 4] = [
    DROP_DISCONNECTED,
    DROP_PUBLISH_ERROR,
    DROP_QUEUE_FULL,
    DROP_SLOW_CONSUMER,
];

async fn options(
    config: &FleetConfig,
    counters: &Arc<Counters>,
) -> Result<ConnectOptions, FleetError> {
    let options =
        match &config.auth {
            Auth::None => ConnectOptions::new(),
            Auth::UserPassword { user, password } => {
                ConnectOptions::with_user_and_password(user.clone(), password.clone())
            }
            Auth::CredentialsFile(path) => ConnectOptions::with_credentials_file(path)
                .await
                .map_err(|e| FleetError::Credentials {
                    path: path.clone(),
                    message: e.to_string(),
                })?,
        };
    let max_delay = config.max_reconnect_delay;
    let sender = config.sender.clone();
    let counters = counters.clone();
    Ok(options
        .name(format!("selcoord {}/{}", config.fleet, config.sender))
        .connection_timeout(config.connect_timeout)
        .ping_interval(config.ping_interval)
        .max_reconnects(None)
        .reconnect_delay_callback(move |attempts| {
            let exp = 50u64.saturating_mul(1u64 << attempts.min(16));
            Duration::from_millis(exp).min(max_delay)
        })
        .event_callback(move |event| {
            let (sender, counters) = (sender.clone(), counters.clone());
            async move { counters.record(|| on_event(&sender, event, &counters)) }
        }))
}

fn on_event(sender: &str, event: Event, counters: &Counters) {
    match event {
        Event::Connected => {
            tracing::info!(sender, "fleet: connected to NATS");
            gauge!(names::FLEET_CONNECTED).set(1.0);
        }
        Event::Disconnected => {
            tracing::warn!(sender, "fleet: disconnected from NATS; running alone");
            gauge!(names::FLEET_CONNECTED).set(0.0);
        }
        // Each failed reconnection attempt, every couple of seconds while the server is
        // down: the disconnection itself was said once.
        Event::ClientError(e) => tracing::debug!(sender, error = %e, "fleet: NATS client error"),
        // Sharing stopped (the fleet handle was dropped): expected.
        Event::Closed => tracing::info!(sender, "fleet: NATS connection closed"),
        // Once a message the client had no room for (a flood of messages on the subject):
        // counted, and said once.
        Event::SlowConsumer(_) => {
            dropped(counters, DROP_SLOW_CONSUMER);
            if !counters.warned_slow.swap(true, Ordering::Relaxed) {
                tracing::warn!(
                    sender,
                    "fleet: the NATS client dropped received messages (slow consumer: more \
                     arrive than are read); counted in \
                     selcoord_fleet_digests_dropped_total{{reason=\"slow_consumer\"}}"
                );
            }
        }
        other => tracing::warn!(sender, event = %other, "fleet: NATS event"),
    }
}

pub(super) async fn start(
    config: FleetConfig,
    coordinator: Addr<Coordinator>,
) -> Result<Fleet, FleetError> {
    let url = config.url.clone();
    let counters = Arc::new(Counters {
        label: config.label(),
        ..Counters::default()
    });
    let first = tokio::time::timeout(
        config.connect_timeout,
        options(&config, &counters).await?.connect(url.as_str()),
    )
    .await;
    let client = match first {
        Ok(Ok(client)) => client,
        Ok(Err(e)) => match e.kind() {
            ConnectErrorKind::AuthorizationViolation | ConnectErrorKind::Authentication => {
                return Err(FleetError::Auth {
                    url,
                    message: e.to_string(),
                })
            }
            ConnectErrorKind::ServerParse => {
                return Err(FleetError::Url {
                    url,
                    message: e.to_string(),
                })
            }
            _ => background(&config, &counters, &url, &e.to_string()).await?,
        },
        Err(_) => background(&config, &counters, &url, "timed out").await?,
    };
    touch_metrics(&counters, &client);
    let subscriber = client
        .subscribe(wire::fleet_wildcard(&config.fleet))
        .await
        .map_err(|e| FleetError::Subscribe(e.to_string()))?;
    identify(&coordinator, &config.sender).await;
    check_urgent_gap(&coordinator, &config).await;
    let (tx, rx) = mpsc::channel(config.queue);
    let tasks = vec![
        tokio::spawn(publish(
            client.clone(),
            config.clone(),
            coordinator.clone(),
            counters.clone(),
        )),
        tokio::spawn(receive(subscriber, config.clone(), tx, counters.clone())),
        tokio::spawn(apply(rx, coordinator, counters.clone())),
    ];
    Ok(Fleet {
        client,
        counters,
        tasks,
    })
}

/// Warns when urgent digests would follow the previous digest sooner than this coordinator's
/// own `share.min_interval_s`: members that share its config would refuse them as too soon.
async fn check_urgent_gap(coordinator: &Addr<Coordinator>, config: &FleetConfig) {
    let Some(gap) = config.urgent_gap else {
        return;
    };
    let Ok(state) = coordinator.send(GetState).await else {
        return;
    };
    let min_interval_s = state.config.share.min_interval_s;
    if gap.as_secs_f64() <= min_interval_s {
        tracing::warn!(
            sender = %config.sender,
            urgent_gap_s = gap.as_secs_f64(),
            min_interval_s,
            "fleet: the urgent digests' gap is not above share.min_interval_s; members with \
             this config refuse an urgent digest that follows another digest that closely"
        );
    }
}

/// Names the coordinator in its digests; the sequence numbers follow the wall clock (in ms,
/// from now on, whatever the coordinator's age) so the others do not take a restarted
/// coordinator's digests for replays.
async fn identify(coordinator: &Addr<Coordinator>, sender: &str) {
    let seq_base = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let _ = coordinator
        .send(SetShareIdentity {
            name: sender.to_string(),
            seq_base,
        })
        .await;
}

/// The server could not be reached now: a client that keeps trying in the background.
async fn background(
    config: &FleetConfig,
    counters: &Arc<Counters>,
    url: &str,
    why: &str,
) -> Result<async_nats::Client, FleetError> {
    tracing::warn!(
        url,
        why,
        "fleet: NATS not reachable; the coordinator runs alone until it is"
    );
    options(config, counters)
        .await?
        .retry_on_initial_connect()
        .connect(url)
        .await
        .map_err(|e| FleetError::Url {
            url: url.to_string(),
            message: e.to_string(),
        })
}

/// Sets the zero-primed counters and the connection gauge (at the start and every period).
fn touch_metrics(counters: &Counters, client: &async_nats::Client) {
    counters.record(|| {
        register_metrics();
        set_connected(client);
    });
}

/// The connection gauge from the client's state.
fn set_connected(client: &async_nats::Client) {
    gauge!(names::FLEET_CONNECTED).set(match client.connection_state() {
        async_nats::connection::State::Connected => 1.0,
        _ => 0.0,
    });
}

/// Every label combination starts at 0, so a dashboard shows the series before the first
/// event.
fn register_metrics() {
    counter!(names::FLEET_DIGESTS_SENT).increment(0);
    counter!(names::FLEET_DIGESTS_URGENT).increment(0);
    counter!(names::FLEET_DIGESTS_APPLIED).increment(0);
    for reason in wire::WireError::REASONS
        .iter()
        .chain(DigestError::REASONS.iter())
    {
        counter!(names::FLEET_DIGESTS_REJECTED, "reason" => *reason).increment(0);
    }
    for reason in DigestError::REASONS {
        counter!(names::FLEET_DIGEST_ENTRIES_REJECTED, "reason" => reason).increment(0);
    }
    for reason in DROP_REASONS {
        counter!(names::FLEET_DIGESTS_DROPPED, "reason" => reason).increment(0);
    }
}

fn dropped(counters: &Counters, reason: &'static str) {
    counters.dropped.fetch_add(1, Ordering::Relaxed);
    counters.record(|| {
        counter!(names::FLEET_DIGESTS_DROPPED, "reason" => reason).increment(1);
    });
}

/// How many of its latest sequence numbers a member remembers to recognise its own digests
/// (a few digests' worth of parts).
const PUBLISHED_KEPT: usize = 4 * crate::digest::MAX_PARTS as usize;

/// The sequence numbers this member published: a digest split into `n` parts uses `n`
/// numbers from its own, so the coordinator's next digest may need a later one, and its
/// `prev_seq` (the coordinator's number of the digest before) is the number that digest was
/// published under.
#[derive(Debug, Default)]
struct Numbering {
    /// The last digest taken: the coordinator's number, the number published.
    taken: Option<(u64, u64)>,
    /// The highest number published.
    used: u64,
}

impl Numbering {
    fn renumber(&mut self, mut digest: Digest) -> Digest {
        let taken = digest.seq;
        digest.seq = digest.seq.max(self.used.saturating_add(1));
        if let (Some(prev), Some((before, published))) = (digest.prev_seq, self.taken) {
            if prev == before {
                digest.prev_seq = Some(published);
            }
        }
        self.taken = Some((taken, digest.seq));
        self.used = self.used.max(digest.seq);
        digest
    }
}

fn connected(client: &async_nats::Client) -> bool {
    matches!(
        client.connection_state(),
        async_nats::connection::State::Connected
    )
}

fn rejected(counters: &Counters, reason: &'static str) {
    counters.rejected.fetch_add(1, Ordering::Relaxed);
    counters.record(|| {
        counter!(names::FLEET_DIGESTS_REJECTED, "reason" => reason).increment(1);
    });
}

/// `at + by`, or a deadline too far to ever come when that does not fit the clock (the
/// config is validated, but a deadline computed here must never panic).
fn later(at: Instant, by: Duration) -> Instant {
    /// About thirty years: still far beyond any run, and within the clock's range.
    const FAR: Duration = Duration::from_secs(86_400 * 365 * 30);
    at.checked_add(by)
        .or_else(|| at.checked_add(FAR))
        .unwrap_or(at)
}

/// Why a digest is published now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Due {
    /// The period came round.
    Period,
    /// The coordinator's own outcomes changed sharply ([`TakeUrgentDigest`]).
    Urgent,
}

/// Every period, and at once on a sharp local change (`urgent_gap`): take the digest from the
/// actor and publish it (or drop it while down).
async fn publish(
    client: async_nats::Client,
    config: FleetConfig,
    coordinator: Addr<Coordinator>,
    counters: Arc<Counters>,
) {
    let subject = wire::subject(&config.fleet, &config.sender);
    let urgent = match config.urgent_gap {
        Some(_) => match coordinator.send(WatchUrgentDigests).await {
            Ok(notify) => Some(notify),
            Err(_) => return, // the coordinator is gone
        },
        None => None,
    };
    // A message holds at most this many entries: the receivers refuse more (same config).
    let Ok(max_entries) = coordinator
        .send(GetState)
        .await
        .map(|s| s.config.share.max_entries)
    else {
        return; // the coordinator is gone
    };
    let mut numbering = Numbering::default();
    let gap = config.urgent_gap.unwrap_or(Duration::ZERO);
    let mut next = later(Instant::now(), config.period);
    // When the last attempt to publish ended, whatever its outcome, and whether it failed:
    // the gap runs from an attempt, not from a success, so failing sends are not retried at
    // every urgent wake-up.
    let mut last_attempt: Option<Instant> = None;
    let mut failing = false;
    let mut last_urgent: Option<Instant> = None;
    loop {
        let woken = async {
            match &urgent {
                Some(notify) => notify.notified().await,
                None => std::future::pending().await,
            }
        };
        let mut due = tokio::select! {
            () = tokio::time::sleep_until(next) => Due::Period,
            () = woken => Due::Urgent,
        };
        if due == Due::Urgent {
            if failing || !connected(&client) {
                // It would only be dropped (or fail again): the periodic digest tries, once a
                // period.
                tokio::time::sleep_until(next).await;
                due = Due::Period;
            } else if let Some(last) = last_attempt {
                // The others' flood control refuses a digest that follows the previous one
                // too closely: wait out the gap (the change stays urgent until a digest is
                // taken).
                tokio::time::sleep_until(later(last, gap)).await;
            }
        }
        let digest = match due {
            Due::Period => coordinator.send(TakeDigest).await.map(Some),
            Due::Urgent => coordinator.send(TakeUrgentDigest).await,
        };
        let Ok(digest) = digest else {
            return; // the coordinator is gone
        };
        // `None`: a periodic digest took the change while this one waited.
        if let Some(digest) = digest {
            let Some(digest) = named(&coordinator, &config.sender, digest).await else {
                return;
            };
            let digest = numbering.renumber(digest);
            let out = Out {
                client: &client,
                subject: &subject,
                config: &config,
                counters: &counters,
                max_entries,
            };
            let sent = out.send(digest, &mut numbering).await;
            if sent != Publish::Empty {
                let at = Instant::now();
                last_attempt = Some(at);
                failing = sent == Publish::Dropped;
                if due == Due::Urgent {
                    last_urgent = Some(at);
                    if sent == Publish::Sent {
                        counters.urgent.fetch_add(1, Ordering::Relaxed);
                        counters.record(|| {
                            counter!(names::FLEET_DIGESTS_URGENT).increment(1);
                        });
                    }
                }
            }
        }
        let now = Instant::now();
        if due == Due::Period {
            // Still at zero, they stay in the exposition however long its idle timeout, and
            // so does the connection state (set otherwise only when it changes).
            touch_metrics(&counters, &client);
            // As an interval that delays missed ticks.
            next = later(next, config.period);
            if next < now {
                next = later(now, config.period);
            }
        }
        // A periodic digest due sooner than the gap after an urgent one waits as long.
        if let Some(last) = last_urgent {
            next = next.max(later(last, gap));
        }
    }
}

/// What became of a digest handed to [`send`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Publish {
    /// Published.
    Sent,
    /// Nothing to publish (no entries): no attempt.
    Empty,
    /// Not published (disconnected, an error or a timeout): dropped and counted.
    Dropped,
}

/// `digest`, taken again after naming the coordinator if it came without this sender's name
/// (a supervised coordinator restarted from a snapshot without it); `None` when the
/// coordinator is gone.
async fn named(coordinator: &Addr<Coordinator>, sender: &str, digest: Digest) -> Option<Digest> {
    if digest.sender == sender {
        return Some(digest);
    }
    identify(coordinator, sender).await;
    coordinator.send(TakeDigest).await.ok()
}

/// Where and how [`publish`] sends.
struct Out<'a> {
    client: &'a async_nats::Client,
    subject: &'a str,
    config: &'a FleetConfig,
    counters: &'a Counters,
    /// The most entries a message holds (`share.max_entries`).
    max_entries: usize,
}

impl Out<'_> {
    /// Publishes one digest, split into parts that fit the server's `max_payload` (and the
    /// receivers' [`wire::MAX_PAYLOAD`]) and `share.max_entries` when it must be. One without
    /// entries is not sent; while the connection is down, or when a part is not published
    /// (an error, or all of them not within one period), it is dropped and counted once.
    async fn send(&self, digest: Digest, numbering: &mut Numbering) -> Publish {
        let counters = self.counters;
        if digest.entries.is_empty() {
            return Publish::Empty;
        }
        if !connected(self.client) {
            dropped(counters, DROP_DISCONNECTED);
            return Publish::Dropped;
        }
        let limit = match self.client.server_info().max_payload {
            0 => wire::MAX_PAYLOAD,
            server => server.min(wire::MAX_PAYLOAD),
        };
        let entries = digest.entries.len();
        let encoded = match wire::encode_split(&digest, limit, self.max_entries) {
            Ok(e) => e,
            Err(e) => {
                if !counters.warned_payload.swap(true, Ordering::Relaxed) {
                    tracing::warn!(
                        error = %e,
                        max_payload = limit,
                        "fleet: the digest cannot be encoded in messages the NATS server \
                         takes and is not sent (is the server's max_payload smaller than one \
                         candidate's entry?)"
                    );
                }
                dropped(counters, DROP_PUBLISH_ERROR);
                return Publish::Dropped;
            }
        };
        let parts = encoded.payloads.len();
        if let Some(&last) = encoded.seqs.last() {
            numbering.used = numbering.used.max(last);
        }
        if parts > 1 && !counters.warned_split.swap(true, Ordering::Relaxed) {
            tracing::info!(
                entries,
                parts,
                max_payload = limit,
                max_entries = self.max_entries,
                "fleet: digests are split into parts (each applied on its own) to fit the NATS \
                 server's max_payload and share.max_entries"
            );
        }
        if encoded.left_out > 0 && !counters.warned_left_out.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                entries,
                left_out = encoded.left_out,
                "fleet: the digest needs more parts than receivers take; the entries sampled \
                 longest ago are left out"
            );
        }
        if let Ok(mut published) = counters.published.lock() {
            for &seq in &encoded.seqs {
                if published.len() >= PUBLISHED_KEPT {
                    published.pop_front();
                }
                published.push_back(seq);
            }
        }
        let all = async {
            for payload in encoded.payloads {
                self.client
                    .publish(self.subject.to_string(), payload.into())
                    .await?;
                counters.parts.fetch_add(1, Ordering::Relaxed);
            }
            Ok::<(), async_nats::PublishError>(())
        };
        // Bounded: a stuck connection costs this task one period, never the coordinator.
        match tokio::time::timeout(self.config.period, all).await {
            Ok(Ok(())) => {
                counters.sent.fetch_add(1, Ordering::Relaxed);
                counters.record(|| {
                    counter!(names::FLEET_DIGESTS_SENT).increment(1);
                });
                Publish::Sent
            }
            Ok(Err(e)) => {
                if e.kind() == async_nats::client::PublishErrorKind::MaxPayloadExceeded
                    && !counters.warned_payload.swap(true, Ordering::Relaxed)
                {
                    tracing::warn!(
                        entries,
                        "fleet: a digest message is larger than the NATS server's max_payload \
                         (lowered since it was read?) and is not sent; the next digest is split \
                         to the server's limit"
                    );
                } else {
                    tracing::debug!(error = %e, "fleet: publish failed");
                }
                dropped(counters, DROP_PUBLISH_ERROR);
                Publish::Dropped
            }
            Err(_) => {
                dropped(counters, DROP_PUBLISH_ERROR);
                Publish::Dropped
            }
        }
    }
}

/// Decodes and checks every received message off the actor; valid digests go to the bounded
/// queue, or are dropped when it is full.
async fn receive(
    mut subscriber: async_nats::Subscriber,
    config: FleetConfig,
    queue: mpsc::Sender<(String, Digest)>,
    counters: Arc<Counters>,
) {
    while let Some(message) = subscriber.next().await {
        let subject = message.subject.as_str();
        // Our own digests come back through the wildcard: not evidence. One on our subject
        // that we did not publish is another member's under the same name.
        if wire::sender_of(subject, &config.fleet).is_ok_and(|s| s == config.sender) {
            let ours = |seq: u64| counters.published.lock().map_or(true, |p| p.contains(&seq));
            match wire::decode(subject, &config.fleet, &message.payload) {
                Ok(d) if ours(d.seq) => {}
                Ok(_) => {
                    if !counters.warned_name.swap(true, Ordering::Relaxed) {
                        tracing::warn!(
                            sender = %config.sender,
                            "fleet: another member publishes under this sender name; \
                             its digests are not applied (give each member its own name)"
                        );
                    }
                    rejected(&counters, "own_sender");
                }
                Err(e) => rejected(&counters, e.reason()),
            }
            continue;
        }
        match wire::decode(subject, &config.fleet, &message.payload) {
            Ok(digest) => match queue.try_send((digest.sender.clone(), digest)) {
                Ok(()) => {}
                Err(mpsc::error::TrySendError::Full(_)) => dropped(&counters, DROP_QUEUE_FULL),
                Err(mpsc::error::TrySendError::Closed(_)) => return,
            },
            Err(e) => {
                tracing::debug!(error = %e, "fleet: digest rejected");
                rejected(&counters, e.reason());
            }
        }
    }
}

/// Hands queued digests to the actor one at a time.
async fn apply(
    mut queue: mpsc::Receiver<(String, Digest)>,
    coordinator: Addr<Coordinator>,
    counters: Arc<Counters>,
) {
    while let Some((from, digest)) = queue.recv().await {
        match coordinator.send(ApplyDigest { from, digest }).await {
            Ok(Ok(applied)) => {
                counters.applied.fetch_add(1, Ordering::Relaxed);
                counters.record(|| {
                    counter!(names::FLEET_DIGESTS_APPLIED).increment(1);
                });
                for (reason, n) in DigestError::REASONS.iter().zip(applied.rejected) {
                    if n > 0 {
                        counters
                            .entries_rejected
                            .fetch_add(n as u64, Ordering::Relaxed);
                        counters.record(|| {
                            counter!(names::FLEET_DIGEST_ENTRIES_REJECTED, "reason" => *reason)
                                .increment(n as u64);
                        });
                    }
                }
            }
            Ok(Err(e)) => {
                tracing::debug!(error = %e, "fleet: the coordinator refused a digest");
                rejected(&counters, e.reason());
            }
            Err(_) => return, // the coordinator is gone
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn later_never_overflows() {
        let now = Instant::now();
        assert_eq!(
            later(now, Duration::from_secs(1)),
            now + Duration::from_secs(1)
        );
        let far = later(now, Duration::MAX);
        assert!(far > now + Duration::from_secs(86_400 * 365));
        assert!(later(far, Duration::MAX) >= far);
    }

    /// A digest names the one before it under the number that one was published with (after
    /// a split digest, not the coordinator's): else receivers take that one for lost.
    #[test]
    fn prev_seq_names_the_previous_digest_as_published() {
        let (mut n, d) = (Numbering::default(), |seq, prev| Digest {
            sender: "a".into(),
            seq,
            prev_seq: Some(prev),
            part: None,
            entries: Vec::new(),
        });
        n.renumber(d(100, 0));
        n.used = 104; // published in 5 parts: 100 to 104
        let second = n.renumber(d(102, 100));
        assert_eq!((second.seq, second.prev_seq), (105, Some(100)));
        let third = n.renumber(d(103, 102));
        assert_eq!((third.seq, third.prev_seq), (106, Some(105)));
    }

    /// Messages the NATS client had no room for are counted as dropped, each, and said once.
    #[test]
    fn slow_consumer_drops_are_counted_and_said_once() {
        let counters = Counters::default();
        for _ in 0..3 {
            on_event("b", Event::SlowConsumer(1), &counters);
        }
        assert_eq!(counters.read().dropped, 3);
        assert!(counters.warned_slow.load(Ordering::Relaxed));
    }
}

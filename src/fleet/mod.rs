//! Fleet sharing over NATS (feature `fleet`): coordinators publish what they learned and
//! apply what the others learned.
//!
//! [`Fleet::start`] runs two tasks next to a [`Coordinator`] actor:
//!
//! - **publish**: every digest period, and at once when the coordinator's own outcomes change
//!   sharply ([`FleetConfig::urgent_gap`]), it asks the actor for its digest
//!   ([`TakeDigest`](crate::actor::TakeDigest), i.e. [`Core::take_digest`](crate::core::Core::take_digest)),
//!   encodes it ([`wire`]: JSON in a versioned envelope; split into parts, each applied on its
//!   own, when it does not fit one message of the server's `max_payload` and
//!   `share.max_entries` entries: [`wire::encode_split`]) and publishes it on
//!   `selcoord.digest.<fleet>.<sender>`. While the connection is down the digest is dropped and
//!   counted, never queued: a stale digest is worth nothing.
//! - **receive**: it subscribes to `selcoord.digest.<fleet>.*`, decodes each message off the
//!   actor, rejects (and counts) malformed ones and those whose subject's sender token is not
//!   the digest's `sender`, and passes the others through a bounded queue to the actor
//!   ([`ApplyDigest`](crate::actor::ApplyDigest), i.e.
//!   [`Core::apply_digest`](crate::core::Core::apply_digest)). A digest the full queue cannot
//!   take is dropped and counted.
//!
//! **The decision path never waits on the network.** The actor never awaits NATS: it answers
//! the two messages from its own state like any other, and the tasks do all I/O. NATS down,
//! slow or partitioned, the coordinator runs alone on its own evidence; the client reconnects
//! forever (with a capped back-off) and resubscribes, and sharing resumes.
//!
//! Authentication: user and password, or a NATS credentials file ([`Auth`]); a server that
//! refuses them at start is a typed error, [`FleetError::Auth`]. See `docs/fleet.md` for the
//! server configuration, including the per-user publish permissions that keep a user from
//! publishing under another sender's name.

mod run;
pub mod wire;

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use actix::Addr;

use crate::actor::Coordinator;

/// How a coordinator authenticates to the NATS server.
#[derive(Clone, Default)]
pub enum Auth {
    /// No credentials.
    #[default]
    None,
    /// A user name and password (`authorization { users = [...] }` in the server config).
    UserPassword {
        /// The user.
        user: String,
        /// The password.
        password: String,
    },
    /// A NATS credentials file (a user JWT and its nkey seed, as `nsc` writes them).
    CredentialsFile(PathBuf),
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print a password.
        match self {
            Auth::None => f.write_str("None"),
            Auth::UserPassword { user, .. } => write!(f, "UserPassword({user}, ***)"),
            Auth::CredentialsFile(p) => write!(f, "CredentialsFile({})", p.display()),
        }
    }
}

/// Where and how a coordinator shares with its fleet.
#[derive(Debug, Clone)]
pub struct FleetConfig {
    /// The NATS server URL, e.g. `nats://127.0.0.1:4222` (several separated by commas).
    pub url: String,
    /// The fleet's name: coordinators share only within one fleet (one subject token).
    pub fleet: String,
    /// This coordinator's name in the fleet (one subject token; unique in the fleet).
    pub sender: String,
    /// How often the digest is published (at most [`FleetConfig::MAX_DURATION`]).
    pub period: Duration,
    /// Publish at once when this coordinator's own outcomes change sharply (a failure on a
    /// candidate that rarely fails: [`TakeUrgentDigest`](crate::actor::TakeUrgentDigest)),
    /// but no sooner than this after the previous digest, so the others' flood control
    /// (`share.min_interval_s`) takes it; a periodic digest due sooner after an urgent one
    /// waits as long. `None`: on the period only. Default 0.6 s, 1.2 x the default
    /// `share.min_interval_s`: set it above the receivers' own ([`Fleet::start`] logs a
    /// warning when it is not above the coordinator's own). At most
    /// [`FleetConfig::MAX_DURATION`].
    pub urgent_gap: Option<Duration>,
    /// Credentials.
    pub auth: Auth,
    /// Received digests that may wait for the actor; more are dropped and counted. 1 to
    /// [`FleetConfig::MAX_QUEUE`].
    pub queue: usize,
    /// How long the first connection attempt may take before the coordinator goes on alone
    /// (the client keeps trying in the background). At most [`FleetConfig::MAX_DURATION`].
    pub connect_timeout: Duration,
    /// Longest pause between reconnection attempts (at most [`FleetConfig::MAX_DURATION`]).
    pub max_reconnect_delay: Duration,
    /// How often the client pings the server; two unanswered pings mark the connection dead,
    /// so this bounds how long a silent partition goes unnoticed. At most
    /// [`FleetConfig::MAX_DURATION`].
    pub ping_interval: Duration,
    /// Labels every fleet series `coordinator="<name>"`, as
    /// [`CoordinatorMetrics::named`](crate::metrics::CoordinatorMetrics::named) labels the
    /// coordinator's: give it the coordinator's name when a process runs several links.
    /// `None` (the default): unlabelled.
    pub metrics_name: Option<String>,
}

impl FleetConfig {
    /// The longest period, urgent gap, connect timeout, reconnect delay and ping interval:
    /// one day (86,400 s). [`FleetConfig::validate`] refuses a longer one; the tasks and the
    /// NATS client add these to the clock, which a duration such as `Duration::MAX` overflows.
    pub const MAX_DURATION: Duration = Duration::from_secs(86_400);

    /// The largest receive queue, 2^20 digests ([`FleetConfig::validate`] refuses a larger
    /// one; tokio's channels cannot be near `usize::MAX`).
    pub const MAX_QUEUE: usize = 1 << 20;

    /// A config with the defaults: a 1 s period, urgent digests at least 0.6 s after the
    /// previous digest, no credentials, a queue of 64 digests, a 2 s first connection
    /// attempt, reconnection at most every 2 s, a ping every 5 s.
    pub fn new(
        url: impl Into<String>,
        fleet: impl Into<String>,
        sender: impl Into<String>,
    ) -> Self {
        FleetConfig {
            url: url.into(),
            fleet: fleet.into(),
            sender: sender.into(),
            period: Duration::from_secs(1),
            urgent_gap: Some(Duration::from_millis(600)),
            auth: Auth::None,
            queue: 64,
            connect_timeout: Duration::from_secs(2),
            max_reconnect_delay: Duration::from_secs(2),
            ping_interval: Duration::from_secs(5),
            metrics_name: None,
        }
    }

    /// The `coordinator` label of [`FleetConfig::metrics_name`].
    pub(crate) fn label(&self) -> Option<metrics::Label> {
        self.metrics_name
            .as_deref()
            .map(crate::metrics::coordinator_label)
    }

    /// Checks every field; the error says which one to fix. Durations must be above 0 and at
    /// most [`FleetConfig::MAX_DURATION`], the queue 1 to [`FleetConfig::MAX_QUEUE`].
    pub fn validate(&self) -> Result<(), FleetError> {
        wire::check_name("fleet name", &self.fleet).map_err(FleetError::Config)?;
        wire::check_name("sender name", &self.sender).map_err(FleetError::Config)?;
        if self.url.trim().is_empty() {
            return Err(FleetError::Config("the NATS URL is empty".into()));
        }
        // What the client will parse when it connects, checked before anything starts.
        if let Err(e) = self.url.parse::<async_nats::ServerAddr>() {
            return Err(FleetError::Config(format!("NATS URL `{}`: {e}", self.url)));
        }
        let positive = |what: &str, d: Duration| {
            if d.is_zero() {
                Err(FleetError::Config(format!("{what} must be longer than 0")))
            } else if d > Self::MAX_DURATION {
                Err(FleetError::Config(format!(
                    "{what} must be at most {} s (one day), not {:?}",
                    Self::MAX_DURATION.as_secs(),
                    d
                )))
            } else {
                Ok(())
            }
        };
        positive("the digest period", self.period)?;
        if let Some(gap) = self.urgent_gap {
            positive(
                "the urgent digests' gap (None publishes on the period only)",
                gap,
            )?;
        }
        positive("the connect timeout", self.connect_timeout)?;
        positive("the maximum reconnect delay", self.max_reconnect_delay)?;
        positive("the ping interval", self.ping_interval)?;
        if self.queue == 0 {
            return Err(FleetError::Config(
                "the receive queue must hold at least 1 digest".into(),
            ));
        }
        if self.queue > Self::MAX_QUEUE {
            return Err(FleetError::Config(format!(
                "the receive queue must hold at most {} digests, not {}",
                Self::MAX_QUEUE,
                self.queue
            )));
        }
        Ok(())
    }
}

/// Why sharing could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FleetError {
    /// A config field is invalid.
    #[error("fleet config: {0}")]
    Config(String),
    /// The credentials file cannot be read or parsed.
    #[error("NATS credentials file {path}: {message}")]
    Credentials {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
    /// The server refused the credentials.
    #[error("the NATS server at {url} refused the credentials: {message}")]
    Auth {
        /// The server.
        url: String,
        /// The server's or client's message.
        message: String,
    },
    /// The URL is not a NATS server address.
    #[error("NATS URL `{url}`: {message}")]
    Url {
        /// The URL.
        url: String,
        /// What is wrong with it.
        message: String,
    },
    /// Subscribing failed (the client was closed).
    #[error("NATS subscribe: {0}")]
    Subscribe(String),
}

/// What sharing has done so far (also exported as metrics, see
/// [`metrics::names`](crate::metrics::names)).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FleetCounts {
    /// Digests published.
    pub sent: u64,
    /// Messages published: one per whole digest, one per part of a digest split into parts
    /// (`docs/fleet.md`, *Large fleets*).
    pub parts: u64,
    /// Of those, digests published at once on a sharp local change
    /// ([`FleetConfig::urgent_gap`]).
    pub urgent: u64,
    /// Received digests the coordinator applied.
    pub applied: u64,
    /// Received digests rejected (malformed, wrong sender, refused by the coordinator).
    pub rejected: u64,
    /// Digests dropped: not published while disconnected or on a publish error, or received
    /// while the queue to the coordinator was full.
    pub dropped: u64,
    /// Entries of applied digests that the coordinator refused one by one.
    pub entries_rejected: u64,
}

/// In words, as an application's log line would say it: `3 digests sent (3 messages, 1
/// urgent), 2 applied, 0 rejected, 0 dropped, 0 entries refused`.
impl std::fmt::Display for FleetCounts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let plural =
            |n: u64, one: &'static str, many: &'static str| if n == 1 { one } else { many };
        write!(
            f,
            "{} {} sent ({} {}, {} urgent), {} applied, {} rejected, {} dropped, {} {} refused",
            self.sent,
            plural(self.sent, "digest", "digests"),
            self.parts,
            plural(self.parts, "message", "messages"),
            self.urgent,
            self.applied,
            self.rejected,
            self.dropped,
            self.entries_rejected,
            plural(self.entries_rejected, "entry", "entries"),
        )
    }
}

#[derive(Debug, Default)]
struct Counters {
    /// The `coordinator` label of every fleet series ([`FleetConfig::metrics_name`]).
    label: Option<metrics::Label>,
    sent: AtomicU64,
    parts: AtomicU64,
    urgent: AtomicU64,
    applied: AtomicU64,
    rejected: AtomicU64,
    dropped: AtomicU64,
    entries_rejected: AtomicU64,
    /// The sequence numbers of this member's latest digests: a digest on its own subject that
    /// is not one of them comes from another member under the same name.
    published: std::sync::Mutex<std::collections::VecDeque<u64>>,
    /// Said once: a digest the server cannot take, another member under this name.
    warned_payload: std::sync::atomic::AtomicBool,
    warned_name: std::sync::atomic::AtomicBool,
    warned_slow: std::sync::atomic::AtomicBool,
    /// Said once: digests are split into parts; some entries are left out.
    warned_split: std::sync::atomic::AtomicBool,
    warned_left_out: std::sync::atomic::AtomicBool,
}

impl Counters {
    /// Runs `f` with what it records labelled by the link's metrics name, if it has one.
    fn record(&self, f: impl FnOnce()) {
        crate::metrics::recording_as(self.label.as_ref(), f);
    }

    fn read(&self) -> FleetCounts {
        FleetCounts {
            sent: self.sent.load(Ordering::Relaxed),
            parts: self.parts.load(Ordering::Relaxed),
            urgent: self.urgent.load(Ordering::Relaxed),
            applied: self.applied.load(Ordering::Relaxed),
            rejected: self.rejected.load(Ordering::Relaxed),
            dropped: self.dropped.load(Ordering::Relaxed),
            entries_rejected: self.entries_rejected.load(Ordering::Relaxed),
        }
    }
}

/// A running share: its tasks stop when it is dropped (or [`Fleet::stop`]ped).
#[derive(Debug)]
pub struct Fleet {
    client: async_nats::Client,
    counters: Arc<Counters>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Fleet {
    /// Connects to NATS and starts sharing for `coordinator`. Must run inside a tokio runtime
    /// (an actix `System` is one).
    ///
    /// A server that refuses the credentials is [`FleetError::Auth`]; a server that cannot be
    /// reached within [`FleetConfig::connect_timeout`] is not an error: the coordinator runs
    /// alone and the client keeps trying in the background.
    pub async fn start(
        config: FleetConfig,
        coordinator: Addr<Coordinator>,
    ) -> Result<Fleet, FleetError> {
        config.validate()?;
        run::start(config, coordinator).await
    }

    /// What sharing has done so far.
    pub fn counts(&self) -> FleetCounts {
        self.counters.read()
    }

    /// Whether the client is connected to a server now.
    pub fn connected(&self) -> bool {
        matches!(
            self.client.connection_state(),
            async_nats::connection::State::Connected
        )
    }

    /// Stops sharing: the tasks end; the coordinator keeps what it applied.
    pub fn stop(self) {
        drop(self);
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::FleetCounts;

    #[test]
    fn counts_read_as_words() {
        let c = FleetCounts {
            sent: 1,
            parts: 3,
            urgent: 1,
            applied: 2,
            rejected: 0,
            dropped: 4,
            entries_rejected: 1,
        };
        assert_eq!(
            c.to_string(),
            "1 digest sent (3 messages, 1 urgent), 2 applied, 0 rejected, 4 dropped, 1 entry refused"
        );
    }
}

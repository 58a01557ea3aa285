//! `selcoord demo --fleet URL`: share what the demo's coordinator learns with the other
//! coordinators of a fleet over NATS (feature `fleet`; see `docs/fleet.md`).

use std::path::PathBuf;

use actix::Addr;
use selection_coordinator::actor::Coordinator;
use selection_coordinator::input::Num;

/// The fleet flags of `selcoord demo`.
#[derive(Debug, clap::Args)]
#[cfg_attr(not(feature = "fleet"), allow(dead_code))] // only `--fleet` is read, to refuse it
pub(crate) struct FleetArgs {
    /// Share with a fleet over NATS: the server's URL, e.g. `nats://127.0.0.1:4222`. The
    /// coordinator publishes a digest of what it learned every `--digest-period` and applies
    /// the other members' digests. An unreachable server is not an error: the demo runs alone
    /// and reconnects. Needs a build with `--features fleet`, as every fleet flag.
    #[arg(long, value_name = "URL")]
    fleet: Option<String>,
    /// The fleet's name (one subject token: letters, digits, `-`, `_`). Needs a build with
    /// `--features fleet`.
    #[arg(long, default_value = "demo", requires = "fleet")]
    fleet_name: String,
    /// This coordinator's name in the fleet (default `demo-<process id>`). With NATS publish
    /// permissions a user can publish only under its own name; see `docs/fleet.md`. Needs a build
    /// with `--features fleet`.
    #[arg(long, requires = "fleet")]
    sender: Option<String>,
    /// Seconds between two digests. Needs a build with `--features fleet`.
    #[arg(
        long,
        default_value_t = 1.0,
        requires = "fleet",
        allow_negative_numbers = true
    )]
    digest_period: f64,
    /// Publish at once when the demo's own outcomes on a candidate change sharply, but no
    /// sooner than this many seconds after the previous digest (above the others'
    /// `share.min_interval_s`, which refuses digests that come sooner); 0 publishes on the
    /// period only. Needs a build with `--features fleet`.
    #[arg(
        long,
        default_value_t = 0.6,
        requires = "fleet",
        allow_negative_numbers = true
    )]
    digest_urgent_gap: f64,
    /// NATS user (with `--nats-password`, or the `SELCOORD_NATS_PASSWORD` environment
    /// variable, which keeps the password out of the process list). Needs a build with
    /// `--features fleet`.
    #[arg(long, requires = "fleet", conflicts_with = "nats_creds")]
    nats_user: Option<String>,
    /// NATS password of `--nats-user`. Needs a build with `--features fleet`.
    #[arg(long, requires = "nats_user")]
    nats_password: Option<String>,
    /// NATS credentials file (a user JWT and nkey seed, as `nsc` writes it). Needs a build with
    /// `--features fleet`.
    #[arg(long, value_name = "FILE", requires = "fleet")]
    nats_creds: Option<PathBuf>,
}

/// What keeps sharing alive: dropped at the end of the demo.
#[cfg_attr(not(feature = "fleet"), allow(dead_code))] // never built without the feature
pub(crate) struct Sharing {
    #[cfg(feature = "fleet")]
    _fleet: selection_coordinator::fleet::Fleet,
}

impl FleetArgs {
    /// Checks the flags before anything starts.
    pub(crate) fn check(&self) -> Result<(), String> {
        if self.fleet.is_some() && !(self.digest_period.is_finite() && self.digest_period > 0.0) {
            return Err(format!(
                "--digest-period must be a positive number of seconds, got {}",
                Num(self.digest_period)
            ));
        }
        if self.fleet.is_some()
            && !(self.digest_urgent_gap.is_finite() && self.digest_urgent_gap >= 0.0)
        {
            return Err(format!(
                "--digest-urgent-gap must be 0 (off) or a positive number of seconds, got {}",
                Num(self.digest_urgent_gap)
            ));
        }
        #[cfg(not(feature = "fleet"))]
        if self.fleet.is_some() {
            return Err(
                "--fleet: this selcoord was built without the `fleet` feature \
                 (cargo build --features fleet)"
                    .into(),
            );
        }
        #[cfg(feature = "fleet")]
        if let Some(config) = self.config()? {
            config.validate().map_err(|e| format!("--fleet: {e}"))?;
        }
        Ok(())
    }

    /// The sharing config the flags describe (`None` without `--fleet`).
    #[cfg(feature = "fleet")]
    fn config(&self) -> Result<Option<selection_coordinator::fleet::FleetConfig>, String> {
        use selection_coordinator::fleet::{Auth, FleetConfig};
        let Some(url) = &self.fleet else {
            return Ok(None);
        };
        let seconds = |flag: &str, s: f64| {
            std::time::Duration::try_from_secs_f64(s).map_err(|_| {
                format!(
                    "{flag} must be at most {} s (one day), got {}",
                    FleetConfig::MAX_DURATION.as_secs(),
                    Num(s)
                )
            })
        };
        let sender = self
            .sender
            .clone()
            .unwrap_or_else(|| format!("demo-{}", std::process::id()));
        let mut config = FleetConfig::new(url.clone(), self.fleet_name.clone(), sender);
        config.period = seconds("--digest-period", self.digest_period)?;
        config.urgent_gap = if self.digest_urgent_gap > 0.0 {
            Some(seconds("--digest-urgent-gap", self.digest_urgent_gap)?)
        } else {
            None
        };
        config.auth = match (&self.nats_user, &self.nats_creds) {
            (Some(user), _) => {
                let password = match &self.nats_password {
                    Some(p) => p.clone(),
                    None => std::env::var("SELCOORD_NATS_PASSWORD").map_err(|_| {
                        "--nats-user needs --nats-password or SELCOORD_NATS_PASSWORD".to_string()
                    })?,
                };
                Auth::UserPassword {
                    user: user.clone(),
                    password,
                }
            }
            (None, Some(path)) => Auth::CredentialsFile(path.clone()),
            (None, None) => Auth::None,
        };
        Ok(Some(config))
    }

    /// Starts sharing when `--fleet` is given.
    /// `metrics_name`: the coordinator's (`--metrics-name`), for the fleet's series too.
    #[cfg(feature = "fleet")]
    pub(crate) async fn start(
        &self,
        coordinator: Addr<Coordinator>,
        metrics_name: Option<&str>,
    ) -> Result<Option<Sharing>, String> {
        use selection_coordinator::fleet::Fleet;
        let Some(mut config) = self.config()? else {
            return Ok(None);
        };
        config.metrics_name = metrics_name.map(str::to_string);
        let fleet = Fleet::start(config, coordinator)
            .await
            .map_err(|e| format!("--fleet: {e}"))?;
        Ok(Some(Sharing { _fleet: fleet }))
    }

    /// Without the `fleet` feature `check` has refused `--fleet` already.
    #[cfg(not(feature = "fleet"))]
    pub(crate) async fn start(
        &self,
        _coordinator: Addr<Coordinator>,
        _metrics_name: Option<&str>,
    ) -> Result<Option<Sharing>, String> {
        Ok(None)
    }
}

//! Hot reload of the demo's coordinator config: on SIGHUP and whenever the file's modification
//! time changes (polled every second), the file is read again; a valid config goes to the
//! coordinator with `SetConfig` (which keeps statistics, waiting requests and permits), an
//! invalid one is reported with its field paths and the running config stays.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use actix::Addr;
use selection_coordinator::actor::{Coordinator, SetConfig};
use selection_coordinator::score::Config;

/// Reads and validates the config file (the errors name the fields to fix).
pub(super) fn load(path: &Path) -> Result<Config, String> {
    Config::load(path).map_err(|e| format!("--config {}: {e}", path.display()))
}

/// The file's modification time and length: a rewrite that keeps the time (coarse clocks)
/// usually changes the length.
fn modified(path: &Path) -> Option<(SystemTime, u64)> {
    std::fs::metadata(path)
        .and_then(|m| Ok((m.modified()?, m.len())))
        .ok()
}

/// How long a changed file must stay unchanged before it is read: an editor or a script that
/// truncates the file and then writes it must not get its empty or half-written state applied.
const SETTLE: Duration = Duration::from_millis(200);

/// SIGHUP's stream. Made before anything else runs: once it exists a SIGHUP no longer
/// terminates the process (its default action), even before the watcher polls it.
#[cfg(unix)]
pub(super) type Hangup = Option<tokio::signal::unix::Signal>;
/// No SIGHUP off Unix: the file is watched only.
#[cfg(not(unix))]
pub(super) type Hangup = ();

/// Starts listening for SIGHUP (call inside the runtime).
pub(super) fn hangup() -> Hangup {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::hangup()) {
            Ok(s) => Some(s),
            Err(e) => {
                eprintln!("selcoord demo: cannot listen for SIGHUP ({e}); watching the file only");
                None
            }
        }
    }
}

/// Watches `path` until the coordinator stops.
#[cfg_attr(not(unix), allow(unused_variables, unused_mut))]
pub(super) async fn watch(path: PathBuf, coordinator: Addr<Coordinator>, mut hup: Hangup) {
    let mut seen = modified(&path);
    let mut every = actix::clock::interval(Duration::from_secs(1));
    loop {
        #[cfg(unix)]
        let signalled = tokio::select! {
            _ = every.tick() => false,
            Some(()) = async {
                match hup.as_mut() {
                    Some(s) => s.recv().await,
                    None => std::future::pending().await,
                }
            } => true,
        };
        #[cfg(not(unix))]
        let signalled = {
            every.tick().await;
            false
        };
        let now = modified(&path);
        if !signalled && now == seen {
            continue;
        }
        if !signalled {
            actix::clock::sleep(SETTLE).await;
            if modified(&path) != now {
                // Still being written: the next poll sees it again.
                continue;
            }
        }
        seen = now;
        match load(&path) {
            Ok(config) => match coordinator.send(SetConfig(config)).await {
                Ok(Ok(())) => {
                    let arms = match coordinator
                        .send(selection_coordinator::actor::GetState)
                        .await
                    {
                        Ok(state) if !state.arms.is_empty() => state.arms.join(", "),
                        Ok(_) => "none".to_string(),
                        Err(_) => return,
                    };
                    eprintln!(
                        "\nselcoord demo: config reloaded from {} (arms: {arms})",
                        path.display()
                    );
                }
                Ok(Err(e)) => eprintln!(
                    "\nselcoord demo: config {} refused, the old one stays: {e}",
                    path.display()
                ),
                Err(_) => return, // the coordinator is gone
            },
            Err(e) => eprintln!("\nselcoord demo: {e}\nselcoord demo: the old config stays"),
        }
    }
}

//! A coordinator on a thread of its own, for services that run on plain tokio (or on no
//! runtime at all) rather than inside an actix `System`.

use std::io;
use std::sync::mpsc;
use std::thread;

use actix::Addr;
use tokio::sync::watch;

use super::handle::CoordinatorHandle;
use super::messages::Stop;
use super::Coordinator;

/// The thread of a coordinator started with [`Coordinator::start_in_thread`], shared by the
/// clones of its handle: when the last one is dropped the coordinator stops, which ends the
/// thread.
#[derive(Debug)]
pub(crate) struct OwnThread {
    addr: Addr<Coordinator>,
    /// Its sender is dropped when the thread has ended.
    ended: watch::Receiver<()>,
}

impl OwnThread {
    /// A receiver that learns when the thread has ended (its sender is dropped).
    pub(crate) fn ended(&self) -> watch::Receiver<()> {
        self.ended.clone()
    }
}

impl Drop for OwnThread {
    fn drop(&mut self) {
        // Nothing to do if it has stopped already.
        self.addr.do_send(Stop);
    }
}

impl Coordinator {
    /// Starts the coordinator on a new thread running an actix `System` of its own, and
    /// returns a handle usable from any thread and any async runtime (the handle, its clones
    /// and its permits are `Send + Sync`): the way to embed the coordinator in a service on
    /// plain tokio, where [`Coordinator::start`] would panic.
    ///
    /// The thread (named `selcoord-coordinator`) runs until the coordinator stops:
    /// [`CoordinatorHandle::stop`] stops it and returns once its snapshot is saved and the
    /// thread has ended; dropping the last clone of the handle stops it too, without waiting
    /// (permits still out become inert, and addresses taken with
    /// [`CoordinatorHandle::addr`] do not keep it running). Sending [`Stop`] to its address
    /// also ends the thread. The call blocks only until the coordinator has started.
    ///
    /// The coordinator is not supervised: a stop ends it (see
    /// [`Coordinator::start_supervised`] for restarts inside an actix `System`).
    ///
    /// Errors if the thread cannot be spawned, or ends before the coordinator started.
    ///
    /// ```
    /// use selection_coordinator::actor::Coordinator;
    /// use selection_coordinator::{CandidateInfo, Config, Limits, Outcome, Request};
    ///
    /// #[tokio::main(flavor = "current_thread")]
    /// async fn main() -> Result<(), Box<dyn std::error::Error>> {
    ///     let handle = Coordinator::with_seed(Config::default(), Limits::default(), 1)?
    ///         .with_candidate(CandidateInfo::new("a"))?
    ///         .start_in_thread()?;
    ///     let mut permit = handle.acquire(Request::any()).await?;
    ///     permit.report(Outcome::success());
    ///     drop(permit);
    ///     handle.stop().await; // the thread has ended
    ///     Ok(())
    /// }
    /// ```
    pub fn start_in_thread(self) -> io::Result<CoordinatorHandle> {
        let (started_tx, started_rx) = mpsc::sync_channel(1);
        let (ended_tx, ended) = watch::channel(());
        thread::Builder::new()
            .name("selcoord-coordinator".into())
            .spawn(move || {
                let system = actix::System::new();
                system.block_on(async move {
                    let mut gone = self.gone.subscribe();
                    let addr = self.start();
                    if let Err(mpsc::SendError(addr)) = started_tx.send(addr) {
                        addr.do_send(Stop);
                    }
                    // Until the coordinator is gone: stopped, its last snapshot written.
                    let _ = gone.changed().await;
                });
                // Ends whatever else was spawned on this System, then says the thread is done.
                drop(system);
                drop(ended_tx);
            })?;
        let addr = started_rx.recv().map_err(|_| {
            io::Error::other("the coordinator's thread ended before the coordinator started")
        })?;
        Ok(CoordinatorHandle::in_thread(
            OwnThread {
                addr: addr.clone(),
                ended,
            },
            addr,
        ))
    }
}

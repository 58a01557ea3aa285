//! Progress on stderr when it is not a terminal (a log, CI): a line every few seconds while
//! the work goes on, whether or not a run has finished since, so a long single run is seen to
//! progress too.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How often a line of progress goes to stderr.
const EVERY: Duration = Duration::from_secs(5);

/// Prints `simulate <what>: <done>/<all> runs (<pct>%), <s> s` (or `running, <s> s` when the
/// runs are not counted) every [`EVERY`] until dropped.
pub(crate) struct Heartbeat {
    stop: Arc<AtomicBool>,
    done: Arc<AtomicUsize>,
    thread: Option<JoinHandle<()>>,
}

impl Heartbeat {
    /// Starts the lines for `what`; `all` runs to do (0: not counted).
    pub(crate) fn start(what: String, all: usize) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let done = Arc::new(AtomicUsize::new(0));
        let (s, d) = (stop.clone(), done.clone());
        let thread = std::thread::Builder::new()
            .name("selcoord-progress".into())
            .spawn(move || {
                let started = Instant::now();
                let mut next = EVERY;
                while !s.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(100));
                    let elapsed = started.elapsed();
                    if elapsed < next || s.load(Ordering::Relaxed) {
                        continue;
                    }
                    next += EVERY;
                    let secs = elapsed.as_secs_f64();
                    if all > 0 {
                        let n = d.load(Ordering::Relaxed);
                        let pct = n as f64 * 100.0 / all as f64;
                        eprintln!("simulate {what}: {n}/{all} runs ({pct:.1}%), {secs:.0} s");
                    } else {
                        eprintln!("simulate {what}: running, {secs:.0} s");
                    }
                }
            })
            .ok();
        Heartbeat { stop, done, thread }
    }

    /// `done` runs are finished.
    pub(crate) fn set(&self, done: usize) {
        self.done.store(done, Ordering::Relaxed);
    }
}

impl Drop for Heartbeat {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

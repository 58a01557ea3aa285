//! The snapshot-save counter, from the counts the actor's snapshot store keeps.

use metrics::counter;

use super::{names, CoordinatorMetrics};

impl CoordinatorMetrics {
    /// The save counts so far (written, failed, skipped) of a coordinator with a snapshot
    /// store, as [`SnapshotStatus`](crate::actor::SnapshotStatus) reads them; each tick. The
    /// counter grows by what is new since the last call, so it adds up over coordinators
    /// sharing a name as every counter does; counts lower than the last (another store) start
    /// a new baseline and add nothing.
    pub fn on_snapshot_saves(&mut self, written: u64, failed: u64, skipped: u64) {
        self.as_named(|m| {
            let now = [written, failed, skipped];
            let results = ["written", "failed", "skipped"];
            for ((result, now), last) in results.into_iter().zip(now).zip(&mut m.saves) {
                counter!(names::SNAPSHOT_SAVES, "result" => result)
                    .increment(now.saturating_sub(*last));
                *last = now;
            }
        })
    }
}

//! A snapshot directory that outlives the test's actix System.

use std::future::Future;
use std::path::PathBuf;

/// Runs `test` on a new actix System, as `#[actix::test]` does, with a temporary directory
/// made outside it. A coordinator with a snapshot store writes a last snapshot as its System
/// stops, after the test's body: a directory made inside the body is gone by then, and the
/// save would recreate it and leave it behind. This one outlives the System and is removed,
/// with what was written in it, after it.
#[allow(dead_code)] // not every test binary saves snapshots
pub fn with_snapshot_dir<F: Future<Output = ()>>(test: impl FnOnce(PathBuf) -> F) {
    let dir = tempfile::tempdir().unwrap();
    actix::System::new().block_on(test(dir.path().to_path_buf()));
}

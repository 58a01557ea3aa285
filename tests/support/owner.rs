//! Files given to another user, for the tests that a replaced file keeps its owner.

use std::path::Path;

/// Gives `path` to another user (`nobody` on Debian) and returns its uid and gid; `None`, with
/// a note, where the tests may not (only root may give a file away). CI runs as root, so there
/// it must work.
pub fn give_to_another_user(path: &Path) -> Option<(u32, u32)> {
    let (uid, gid) = (65534, 65534);
    match std::os::unix::fs::chown(path, Some(uid), Some(gid)) {
        Ok(()) => Some((uid, gid)),
        Err(e) => {
            assert!(
                std::env::var_os("CI").is_none(),
                "CI runs as root, which may give a file to another user: {e}"
            );
            eprintln!("SKIPPED: giving a file to another user needs root ({e})");
            None
        }
    }
}

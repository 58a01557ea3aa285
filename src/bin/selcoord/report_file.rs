//! The files the CLI writes whole once a run is done: `simulate --json` and `--plot`, the
//! suite's `--json` and `--dump` files.
//!
//! A regular file is replaced atomically: the new contents go to a temporary file in the same
//! directory, which is then renamed over the path, so a write that fails (a full disk, a size
//! limit) leaves the file that was there before intact and no temporary file behind. A path
//! that does not exist yet is created the same way. A replaced file's mode is kept, and so are
//! its owner and group where the writer may set them (root, or the owner itself).
//!
//! Anything else at the path (a FIFO, `/dev/stdout`, a process substitution such as
//! `>(jq .)`, a character device) is opened as it is and written directly, once: it has no
//! earlier contents to keep, and a reader on the other end sees one open and the whole report.
//! A reader that has gone before the end (a closed pipe) is not an error, as for stdout.
//! A path under `/dev/` or `/proc/` is always written directly, even when it leads to a
//! regular file (`--json /dev/stdout > out.txt`), and appended to, so the report follows the
//! table printed before it rather than replacing the file stdout writes to.
//!
//! A symbolic link to an existing file is written through: the file it points to is replaced
//! and the link stays. A symbolic link to nothing (dangling) is refused, before the run, rather
//! than creating a file wherever it points.
//!
//! The demo's `--decision-log` is not written here: it is a log streamed as the run goes, and
//! stays a plain file written in place.

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufWriter, ErrorKind, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// How a path is written.
#[derive(Debug, PartialEq)]
enum Target {
    /// A regular file (the one a link points to), or nothing yet: replaced by a rename.
    Replace(PathBuf),
    /// Something else (a FIFO, a device, stdout): opened and written in place.
    Direct,
}

/// What `path` is, following a symbolic link; an error for a directory or a dangling link.
fn target(path: &Path) -> io::Result<Target> {
    let meta = match fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Target::Replace(path.into())),
        Err(e) => return Err(e),
    };
    let (meta, link) = if meta.file_type().is_symlink() {
        match fs::metadata(path) {
            Ok(m) => (m, true),
            Err(e) if e.kind() == ErrorKind::NotFound => {
                let to = fs::read_link(path)
                    .map(|t| t.display().to_string())
                    .unwrap_or_else(|_| "?".into());
                return Err(io::Error::new(
                    ErrorKind::NotFound,
                    format!(
                        "a symbolic link to {to}, which does not exist; selcoord writes \
                         through a link only to an existing file: give the file's own path"
                    ),
                ));
            }
            Err(e) => return Err(e),
        }
    } else {
        (meta, false)
    };
    if meta.is_dir() {
        return Err(io::Error::new(ErrorKind::IsADirectory, "it is a directory"));
    }
    if !meta.is_file() || path.starts_with("/dev") || path.starts_with("/proc") {
        return Ok(Target::Direct);
    }
    Ok(Target::Replace(if link {
        fs::canonicalize(path)?
    } else {
        path.into()
    }))
}

/// A new, empty file next to `dest` with a name of its own: `.NAME.selcoord-PID-N.tmp`.
fn temp_beside(dest: &Path) -> io::Result<PathBuf> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let dir = dest.parent().unwrap_or(Path::new(""));
    let name = dest
        .file_name()
        .ok_or_else(|| io::Error::new(ErrorKind::InvalidInput, "not a file name"))?
        .to_string_lossy();
    loop {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let tmp = dir.join(format!(".{name}.selcoord-{}-{n}.tmp", std::process::id()));
        match OpenOptions::new().write(true).create_new(true).open(&tmp) {
            Ok(_) => return Ok(tmp),
            Err(e) if e.kind() == ErrorKind::AlreadyExists && n < 1_000 => {}
            Err(e) => return Err(e),
        }
    }
}

/// Gives `tmp` the owner and group of the file it replaces (`old`). Only a privileged user can
/// give a file to another user; for anyone else that part fails, and the new file keeps its
/// writer as owner, as any replacing write does (the mode is kept either way).
#[cfg(unix)]
fn keep_owner(tmp: &Path, old: &fs::Metadata) {
    use std::os::unix::fs::MetadataExt;
    if let Err(e) = std::os::unix::fs::chown(tmp, Some(old.uid()), Some(old.gid())) {
        tracing::debug!(error = %e, "the replaced report's owner is not kept");
    }
}

#[cfg(not(unix))]
fn keep_owner(_: &Path, _: &fs::Metadata) {}

/// Checks before a run that `path` can be written, changing nothing there: for a file that is
/// replaced, that a temporary file can be made beside it (then removed) and that an existing
/// one opens for writing; nothing is opened for a FIFO or a device, whose reader would see an
/// end of file.
pub(crate) fn check(path: &Path) -> io::Result<()> {
    let Target::Replace(dest) = target(path)? else {
        return Ok(());
    };
    fs::remove_file(temp_beside(&dest)?)?;
    if dest.exists() {
        OpenOptions::new().append(true).open(&dest)?;
    }
    Ok(())
}

/// Writes `path` by having `fill` write the file at the path it is given: a temporary file,
/// renamed over `path` once complete, for a regular file; `path` itself otherwise (see the
/// module's doc). On an error the temporary file is removed and `path` is left as it was.
pub(crate) fn write_with(
    path: &Path,
    fill: impl FnOnce(&Path) -> io::Result<()>,
) -> io::Result<()> {
    let dest = match target(path)? {
        // A reader that has gone (`--json /dev/stdout | head -1`) is not an error: the report
        // is dropped quietly, as the table is (`out`).
        Target::Direct => {
            return match fill(path) {
                Err(e) if broken_pipe(&e) => Ok(()),
                done => done,
            }
        }
        Target::Replace(dest) => dest,
    };
    let tmp = temp_beside(&dest)?;
    let done = fill(&tmp).and_then(|()| {
        // On disk before it takes the name (a late write error shows here), with the owner
        // and mode of the file it replaces.
        File::open(&tmp)?.sync_all()?;
        if let Ok(old) = fs::metadata(&dest) {
            keep_owner(&tmp, &old);
            fs::set_permissions(&tmp, old.permissions())?;
        }
        fs::rename(&tmp, &dest)
    });
    if done.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    done
}

/// Whether `e` is a write to a pipe whose reader has gone, also when the JSON writer wrapped
/// it.
fn broken_pipe(e: &io::Error) -> bool {
    e.kind() == ErrorKind::BrokenPipe
        || e.get_ref()
            .and_then(|inner| inner.downcast_ref::<serde_json::Error>())
            .and_then(serde_json::Error::io_error_kind)
            == Some(ErrorKind::BrokenPipe)
}

/// Writes `path` with what `body` writes to the writer it is given ([`write_with`]).
pub(crate) fn write(
    path: &Path,
    body: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> io::Result<()> {
    write_with(path, |at: &Path| {
        // Appending: the temporary file is new and empty; a FIFO or a device takes it as it
        // would a plain write; stdout redirected to a file gets the report after the table.
        let mut w = BufWriter::new(OpenOptions::new().append(true).open(at)?);
        body(&mut w)?;
        w.flush()
    })
}

/// Writes `text` to `path` ([`write()`]).
pub(crate) fn write_str(path: &Path, text: &str) -> io::Result<()> {
    write(path, |w| w.write_all(text.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A writer that fails the way a full disk does, after part of the report.
    #[test]
    fn a_failed_write_leaves_the_earlier_file_and_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("report.json");
        fs::write(&path, "earlier report\n").unwrap();
        let e = write(&path, |w| {
            w.write_all(b"{\"part\": ")?;
            w.flush()?;
            Err(io::Error::new(ErrorKind::StorageFull, "no space left"))
        })
        .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::StorageFull);
        assert_eq!(fs::read_to_string(&path).unwrap(), "earlier report\n");
        let names: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["report.json"], "a temporary file was left");
        // Then a write that succeeds replaces it.
        write_str(&path, "new report\n").unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "new report\n");
    }

    /// A fill by path (the plot) that fails also leaves the earlier file.
    #[test]
    fn a_failed_fill_by_path_leaves_the_earlier_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("plot.svg");
        fs::write(&path, "<svg/>").unwrap();
        let e = write_with(&path, |at: &Path| {
            fs::write(at, "<sv")?;
            Err(io::Error::other("plot: no space left"))
        })
        .unwrap_err();
        assert!(e.to_string().contains("no space"), "{e}");
        assert_eq!(fs::read_to_string(&path).unwrap(), "<svg/>");
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}

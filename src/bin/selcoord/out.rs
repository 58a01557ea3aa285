//! Standard output for every subcommand.
//!
//! A reader that stops early (`selcoord simulate --list | head -1`) closes the pipe; the rest of
//! the output is then dropped quietly, and the command finishes what it was asked to do (a
//! `--json` file is still written) and exits with success, rather than `print!` panicking.

use std::io::{ErrorKind, Write};

/// Writes `text` to stdout and flushes it. A closed pipe is not an error; any other failure to
/// write is.
pub(crate) fn print(text: &str) -> Result<(), String> {
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Err(e) if e.kind() != ErrorKind::BrokenPipe => Err(format!("cannot write to stdout: {e}")),
        _ => Ok(()),
    }
}

/// [`print()`] followed by a newline.
pub(crate) fn println(text: &str) -> Result<(), String> {
    print(&format!("{text}\n"))
}

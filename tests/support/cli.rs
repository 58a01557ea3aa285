//! Running the `selcoord` binary from the CLI test binaries.

use std::process::{Command, Output};

/// Runs `selcoord` with `args` (with no `SELCOORD_LOG` from the environment) to its end.
pub fn selcoord(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_selcoord"))
        .args(args)
        .env_remove("SELCOORD_LOG")
        .output()
        .expect("run selcoord")
}

/// A run's standard error, as text.
#[allow(dead_code)] // not every CLI test binary reads it
pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

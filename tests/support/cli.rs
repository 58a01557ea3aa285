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

/// Runs `selcoord` with `args` and `--json <file>` (a file in a temporary directory), checks
/// that it succeeded, and returns its output and the report it wrote.
#[allow(dead_code)] // not every CLI test binary reads a report
pub fn selcoord_json(args: &[&str]) -> (Output, serde_json::Value) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("report.json");
    let mut all = args.to_vec();
    all.extend(["--json", path.to_str().expect("a UTF-8 path")]);
    let out = selcoord(&all);
    assert!(out.status.success(), "{all:?}: {}", stderr(&out));
    let text = std::fs::read_to_string(&path).expect("the report is written");
    (
        out,
        serde_json::from_str(&text).expect("the report is JSON"),
    )
}

/// Runs `selcoord` with `args`, checks that it failed with nothing on standard output, and
/// returns its standard error.
#[allow(dead_code)] // not every CLI test binary runs a refused command
pub fn selcoord_fails(args: &[&str]) -> String {
    let out = selcoord(args);
    let err = stderr(&out);
    assert!(
        !out.status.success() && out.stdout.is_empty(),
        "{args:?}: {err}"
    );
    err
}

//! The files `selcoord simulate` writes (`--json`, `--plot`): a regular file is replaced whole
//! or not at all, a FIFO or stdout is written directly, and a dangling symbolic link is
//! refused.

#![cfg(unix)]

use std::io::Read;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

#[path = "support/cli.rs"]
mod cli;
use cli::{selcoord, stderr};

fn names_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// A link to a file that does not exist is refused before the run: nothing is created where
/// it points and the link stays a link.
#[test]
fn a_dangling_symlink_is_refused_before_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.json");
    let link = dir.path().join("dangling.json");
    std::os::unix::fs::symlink(&missing, &link).unwrap();
    for option in ["--json", "--plot"] {
        let link = if option == "--plot" {
            let svg = dir.path().join("dangling.svg");
            std::os::unix::fs::symlink(dir.path().join("missing.svg"), &svg).unwrap();
            svg
        } else {
            link.clone()
        };
        let out = selcoord(&[
            "simulate",
            "--scenario",
            "mongo-overload",
            option,
            link.to_str().unwrap(),
        ]);
        let err = stderr(&out);
        assert!(!out.status.success(), "{option}: accepted: {err}");
        assert!(
            err.contains(option) && err.contains("symbolic link"),
            "{err}"
        );
        assert!(out.stdout.is_empty(), "{option}: ran first");
        assert!(
            std::fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink(),
            "{option}: the link was replaced"
        );
    }
    assert_eq!(
        names_in(dir.path()),
        ["dangling.json", "dangling.svg"],
        "a file was created"
    );
}

/// A link to an existing report is written through: the report is replaced, the link stays.
#[test]
fn a_link_to_an_existing_report_is_written_through() {
    let dir = tempfile::tempdir().unwrap();
    let real = dir.path().join("real.json");
    let link = dir.path().join("link.json");
    std::fs::write(&real, "earlier\n").unwrap();
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let out = selcoord(&[
        "simulate",
        "--scenario",
        "mongo-overload",
        "--json",
        link.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let meta = std::fs::symlink_metadata(&link).unwrap();
    assert!(meta.file_type().is_symlink(), "the link was replaced");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&real).unwrap()).expect("the report");
    assert!(v["policies"].is_array(), "{v}");
    assert_eq!(names_in(dir.path()), ["link.json", "real.json"]);
}

/// A write that fails part way (here a file size limit of 1 KiB, `ulimit -f 2`, with its
/// signal ignored, so that the write fails as it would on a full disk) leaves the earlier
/// report as it was, and no temporary file.
#[test]
fn an_earlier_report_is_kept_when_the_new_one_cannot_be_written() {
    let dir = tempfile::tempdir().unwrap();
    for (option, name) in [("--json", "report.json"), ("--plot", "plot.svg")] {
        let path = dir.path().join(name);
        std::fs::write(&path, "earlier report\n").unwrap();
        let out = Command::new("sh")
            .arg("-c")
            .arg("trap '' XFSZ; ulimit -f 2 && exec \"$0\" \"$@\"")
            .arg(env!("CARGO_BIN_EXE_selcoord"))
            .args(["simulate", "--scenario", "mongo-overload", option])
            .arg(&path)
            .env_remove("SELCOORD_LOG")
            .output()
            .expect("run selcoord under sh");
        let err = stderr(&out);
        assert!(
            !out.status.success(),
            "{option}: the write did not fail: {err}"
        );
        assert!(err.contains(name), "{option}: {err}");
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "earlier report\n",
            "{option}: the earlier report was changed"
        );
    }
    assert_eq!(names_in(dir.path()), ["plot.svg", "report.json"]);
}

/// Waits for `child` at most `limit`; kills it if it is still running then.
fn wait_or_kill(child: &mut std::process::Child, limit: Duration) -> Option<Output> {
    let start = Instant::now();
    while start.elapsed() < limit {
        if child.try_wait().unwrap().is_some() {
            let mut out = Output {
                status: child.wait().unwrap(),
                stdout: Vec::new(),
                stderr: Vec::new(),
            };
            if let Some(mut e) = child.stderr.take() {
                e.read_to_end(&mut out.stderr).unwrap();
            }
            return Some(out);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

/// A FIFO is opened once, by the write itself: its reader gets the whole report, not an end
/// of file from a check before the run.
#[test]
fn a_fifo_with_a_reader_gets_the_whole_report() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("report.fifo");
    let made = Command::new("mkfifo").arg(&fifo).status().expect("mkfifo");
    assert!(made.success());
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::read_to_string(fifo).unwrap())
    };
    let mut child = Command::new(env!("CARGO_BIN_EXE_selcoord"))
        .args(["simulate", "--scenario", "mongo-overload", "--json"])
        .arg(&fifo)
        .env_remove("SELCOORD_LOG")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run selcoord");
    let got = reader.join().unwrap();
    let out = wait_or_kill(&mut child, Duration::from_secs(120));
    let out = out.unwrap_or_else(|| {
        panic!(
            "selcoord still running after its reader saw the end ({} bytes read)",
            got.len()
        )
    });
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_str(&got).expect("the whole report");
    assert!(v["policies"].is_array(), "{v}");
}

/// `--json /dev/stdout` writes the report after the table, on a pipe as in a file.
#[test]
fn json_to_dev_stdout_follows_the_table() {
    let out = selcoord(&[
        "simulate",
        "--scenario",
        "mongo-overload",
        "--json",
        "/dev/stdout",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8(out.stdout).unwrap();
    let start = text.find("\n{\n").expect("the JSON after the table") + 1;
    assert!(text.starts_with("scenario mongo-overload"), "{text}");
    let v: serde_json::Value = serde_json::from_str(&text[start..]).expect("the report");
    assert!(v["policies"].is_array(), "{v}");

    // Into a file through the shell's redirection: the table and then the report.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("out.txt");
    let status = Command::new(env!("CARGO_BIN_EXE_selcoord"))
        .args([
            "simulate",
            "--scenario",
            "mongo-overload",
            "--json",
            "/dev/stdout",
        ])
        .env_remove("SELCOORD_LOG")
        .stdout(std::fs::File::create(&file).unwrap())
        .status()
        .unwrap();
    assert!(status.success());
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.starts_with("scenario mongo-overload"), "{text}");
    let start = text.find("\n{\n").expect("the JSON after the table") + 1;
    serde_json::from_str::<serde_json::Value>(&text[start..]).expect("the report");
}

//! `examples/http_fleet.rs` stopped by a signal leaves no nginx behind: each test runs the
//! example's command line (`http_fleet::cli`) in a child process (this test binary, run again
//! with [`CHILD`] set), waits until its fleet is up and its arms run, finds the fleet's
//! instances (the child's `nginx` children) and their temporary directory, sends the signal and
//! checks that no process whose command line names that directory is left and, where the
//! example could act on the signal, that the directory is gone and the example exited non-zero
//! with a line saying it was interrupted. Without nginx or its echo module the tests say
//! SKIPPED on stderr and pass, except under `CI=true`, where they fail.
#![cfg(target_os = "linux")]

#[path = "../examples/http_fleet.rs"]
#[allow(dead_code)]
mod http_fleet;

use std::io::{BufRead, BufReader, Write as _};
use std::os::unix::process::{CommandExt as _, ExitStatusExt as _};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use http_fleet::nginx;

/// Set (to the example's arguments) in the child process: [`example_in_child`] then runs the
/// example instead of returning at once.
const CHILD: &str = "HTTP_FLEET_SIGNALS_CHILD";

/// Two instances and more requests than can end before the signal: the run is always
/// interrupted mid-arm.
const ARGS: &str = "--caps 1,1 --sleep-ms 20 --requests 100000000 --workers 4 --arms adaptive";

/// Not a test of its own: the example, in the child process the tests below start (returns at
/// once in any other process).
#[test]
fn example_in_child() {
    let Ok(args) = std::env::var(CHILD) else {
        return;
    };
    let status = http_fleet::cli(args.split_whitespace().map(String::from));
    std::process::exit(status);
}

/// Whether nginx is here to run the tests (see the module's doc for `CI=true`).
fn nginx_here() -> bool {
    match nginx::available() {
        Ok(_) => true,
        Err(missing) => {
            assert!(
                !std::env::var("CI").is_ok_and(|v| v == "true"),
                "CI=true but {missing}: .ci/run must install them"
            );
            // Written to the stderr handle, not with eprintln!, so the test harness does not
            // capture it: a skip must be seen.
            let _ = writeln!(
                std::io::stderr(),
                "\n\n*** SKIPPED http_fleet_signals: {missing}. ***\n\n"
            );
            false
        }
    }
}

/// A live process: its id, its parent's and its command line.
struct Process {
    pid: i32,
    ppid: i32,
    argv: Vec<String>,
}

/// Every live process (zombies, whose command line is empty, left out).
fn processes() -> Vec<Process> {
    let mut all = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("read /proc").flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        let (Ok(cmdline), Ok(stat)) = (
            std::fs::read(entry.path().join("cmdline")),
            std::fs::read_to_string(entry.path().join("stat")),
        ) else {
            continue; // gone meanwhile
        };
        // `pid (comm) state ppid ...`; the name may hold spaces and parentheses.
        let after_name = &stat[stat.rfind(')').map_or(0, |i| i + 1)..];
        let mut fields = after_name.split_whitespace();
        let state = fields.next().unwrap_or("");
        let ppid = fields.next().and_then(|p| p.parse().ok()).unwrap_or(0);
        if cmdline.is_empty() || state == "Z" {
            continue;
        }
        let argv = cmdline
            .split(|&b| b == 0)
            .filter(|a| !a.is_empty())
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        all.push(Process { pid, ppid, argv });
    }
    all
}

/// The live processes whose command line names `dir` (an nginx runs with `-p <dir>/instance-N`).
fn naming(dir: &Path) -> Vec<Process> {
    let dir = dir.to_string_lossy();
    processes()
        .into_iter()
        .filter(|p| p.argv.iter().any(|a| a.contains(dir.as_ref())))
        .collect()
}

/// Kills whatever a test leaves (a child past its time, surviving instances, the directory),
/// however the test ends.
struct Leftovers {
    child: Child,
    dir: Option<PathBuf>,
}

impl Drop for Leftovers {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(dir) = &self.dir {
            for p in naming(dir) {
                // SAFETY: kill(2) on a process this test's child started.
                unsafe { libc::kill(p.pid, libc::SIGKILL) };
            }
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// What was left after the signal.
struct After {
    status: ExitStatus,
    stderr: String,
    dir: PathBuf,
    /// Live processes naming the fleet's directory, as `pid argv`.
    survivors: Vec<String>,
    dir_exists: bool,
}

/// Runs the example in a child process (in a process group of its own when `to_group`), sends
/// `signal` to it (to its whole group when `to_group`, as a Ctrl-C at a terminal does) once its
/// arms run, and reports what is left once it has exited.
fn interrupt(signal: i32, to_group: bool) -> After {
    let exe = std::env::current_exe().expect("this test binary");
    let mut command = Command::new(exe);
    command
        .args([
            "example_in_child",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD, ARGS)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    if to_group {
        command.process_group(0);
    }
    let mut child = command.spawn().expect("run this test binary again");
    let pid = child.id() as i32;
    let stderr = child.stderr.take().expect("piped stderr");
    let (lines_tx, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if lines_tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut leftovers = Leftovers { child, dir: None };
    let mut seen = Vec::new();

    // The fleet is up once the example says so.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match lines.recv_timeout(left) {
            Ok(line) => {
                let up = line.contains("nginx instances");
                seen.push(line);
                if up {
                    break;
                }
            }
            Err(e) => panic!("the example did not start its fleet ({e:?}): {seen:#?}"),
        }
    }
    // Its instances: the child's nginx children, each with `-p <dir>/instance-N`.
    let instances: Vec<Process> = processes()
        .into_iter()
        .filter(|p| p.ppid == pid && p.argv.first().is_some_and(|a| a.ends_with("nginx")))
        .collect();
    assert_eq!(
        instances.len(),
        2,
        "the example's nginx children: {seen:#?}"
    );
    let prefixes: Vec<PathBuf> = instances
        .iter()
        .map(|p| {
            let at = p.argv.iter().position(|a| a == "-p").expect("nginx -p");
            PathBuf::from(&p.argv[at + 1])
        })
        .collect();
    let dir = prefixes[0]
        .parent()
        .expect("the fleet's directory")
        .to_path_buf();
    assert!(
        prefixes.iter().all(|p| p.parent() == Some(dir.as_path())),
        "one directory for the fleet: {prefixes:?}"
    );
    assert!(
        dir.is_dir(),
        "{} is not there while the fleet runs",
        dir.display()
    );
    assert_eq!(
        naming(&dir).len(),
        2,
        "the processes naming {}",
        dir.display()
    );
    leftovers.dir = Some(dir.clone());

    // Let the arm run a little, then the signal.
    std::thread::sleep(Duration::from_millis(300));
    // SAFETY: kill(2) / killpg(2) on the child started above, still unwaited for.
    let sent = unsafe {
        if to_group {
            libc::killpg(pid, signal)
        } else {
            libc::kill(pid, signal)
        }
    };
    assert_eq!(sent, 0, "cannot send signal {signal}");

    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = leftovers.child.try_wait().expect("wait for the child") {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "the example still runs 30 s after signal {signal}: {seen:#?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    // The rest of its stderr (the reader ends with the pipe, unless an orphan holds it).
    while let Ok(line) = lines.recv_timeout(Duration::from_secs(2)) {
        seen.push(line);
    }
    // An instance killed by the kernel as its parent died goes a moment later.
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut survivors = naming(&dir);
    while !survivors.is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
        survivors = naming(&dir);
    }
    After {
        status,
        stderr: seen.join("\n"),
        survivors: survivors
            .iter()
            .map(|p| format!("{} {}", p.pid, p.argv.join(" ")))
            .collect(),
        dir_exists: dir.exists(),
        dir,
    }
    // `leftovers` kills survivors and removes the directory, also when a check above failed.
}

/// The example acted on the signal: nothing is left, it exited with `status` and said why.
fn assert_cleaned_up(after: &After, signal: &str, status: i32) {
    assert!(
        after.survivors.is_empty() && !after.dir_exists,
        "after {signal}: nginx processes left {:#?}, {} {}; the example ended with {}, stderr:\n{}",
        after.survivors,
        after.dir.display(),
        if after.dir_exists { "left" } else { "removed" },
        after.status,
        after.stderr
    );
    assert_eq!(
        after.status.code(),
        Some(status),
        "exit status after {signal}, stderr:\n{}",
        after.stderr
    );
    let interrupted: Vec<&str> = after
        .stderr
        .lines()
        .filter(|l| l.contains(&format!("interrupted by {signal}")))
        .collect();
    assert_eq!(interrupted.len(), 1, "stderr:\n{}", after.stderr);
}

#[test]
fn sigterm_stops_the_fleet_and_removes_its_directory() {
    if nginx_here() {
        assert_cleaned_up(&interrupt(libc::SIGTERM, false), "SIGTERM", 143);
    }
}

#[test]
fn sigint_to_the_example_alone_stops_the_fleet() {
    if nginx_here() {
        assert_cleaned_up(&interrupt(libc::SIGINT, false), "SIGINT", 130);
    }
}

#[test]
fn ctrl_c_to_the_process_group_stops_the_fleet() {
    if nginx_here() {
        assert_cleaned_up(&interrupt(libc::SIGINT, true), "SIGINT", 130);
    }
}

/// Killed outright, the example cannot remove the directory (the test does), but its nginx
/// instances die with it.
#[test]
fn sigkill_leaves_no_nginx_running() {
    if nginx_here() {
        let after = interrupt(libc::SIGKILL, false);
        assert_eq!(after.status.signal(), Some(libc::SIGKILL));
        assert!(
            after.survivors.is_empty(),
            "nginx outlived the example killed by SIGKILL: {:#?}",
            after.survivors
        );
    }
}

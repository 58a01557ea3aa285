//! The `selcoord` binary at its edges: a reader that closes the pipe early, numbers a TOML file
//! can hold but JSON cannot, flags that belong to another mode, negative numbers, the demo's
//! drain, and the notes and warnings a user would otherwise miss.

use std::fmt::Write as _;
use std::io::BufRead;
use std::path::Path;
use std::process::{Command, Output, Stdio};

fn repo(rel: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(rel)
        .to_string_lossy()
        .into_owned()
}

#[path = "support/cli.rs"]
mod cli;
use cli::{selcoord, selcoord_fails, selcoord_json, stderr};

/// Runs `args` with stdout on a pipe whose reader reads `lines` lines (0: none) and then
/// closes it; the process's output and status once it has finished.
fn with_closed_pipe(args: &[&str], lines: usize) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_selcoord"))
        .args(args)
        .env_remove("SELCOORD_LOG")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run selcoord");
    let stdout = child.stdout.take().expect("stdout");
    let mut reader = std::io::BufReader::new(stdout);
    for _ in 0..lines {
        let mut line = String::new();
        reader.read_line(&mut line).expect("a line");
        assert!(!line.is_empty(), "{args:?}: no output");
    }
    drop(reader);
    child.wait_with_output().expect("wait for selcoord")
}

fn assert_quiet_exit(args: &[&str], out: &Output) {
    let err = stderr(out);
    assert!(!err.contains("panicked"), "{args:?}: {err}");
    assert!(!err.contains("Broken pipe"), "{args:?}: {err}");
    assert!(out.status.success(), "{args:?}: {:?} {err}", out.status);
}

/// Thousands of candidates: `explain --json` writes far more than a pipe holds, so the writer is
/// still writing when the reader goes away after one line.
#[test]
fn a_reader_that_stops_early_ends_the_output_quietly() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("many.toml");
    let mut text = String::new();
    for i in 0..3000 {
        let _ = writeln!(text, "[[candidates]]\nid = \"c{i:04}\"");
    }
    std::fs::write(&path, text).unwrap();
    let path = path.to_str().unwrap();
    for args in [
        &["explain", "--candidates", path, "--json"][..],
        &["explain", "--candidates", path],
    ] {
        let out = with_closed_pipe(args, 1);
        assert_quiet_exit(args, &out);
    }
    // Closed before anything is written: the table comes after the run.
    for args in [
        &["simulate", "--list"][..],
        &[
            "simulate",
            "--scenario",
            "mongo-overload",
            "--policies",
            "random",
        ],
    ] {
        let out = with_closed_pipe(args, 0);
        assert_quiet_exit(args, &out);
    }
}

/// A `--json` file is still written when the table's reader has gone.
#[test]
fn a_closed_pipe_still_writes_the_json_report() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("out.json");
    let args = [
        "simulate",
        "--scenario",
        "recovery",
        "--policies",
        "random",
        "--json",
        json.to_str().unwrap(),
    ];
    let out = with_closed_pipe(&args, 0);
    assert_quiet_exit(&args, &out);
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).expect("the report");
    assert!(v["policies"].is_array(), "{v}");
}

#[test]
fn explain_refuses_nan_and_infinity_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.toml");
    std::fs::write(
        &path,
        "[overall]\nttfb_ms = nan\n\n[[candidates]]\nid = \"a\"\nprice = nan\n\n\
         [[candidates]]\nid = \"b\"\nstats = { ttfb_ms = inf, success = 1.0 }\n",
    )
    .unwrap();
    let err = selcoord_fails(&["explain", "--candidates", path.to_str().unwrap()]);
    for want in [
        "candidates[0].price: must be a finite number, got nan",
        "candidates[1].stats.ttfb_ms: must be a finite number, got inf",
        "overall.ttfb_ms: must be a finite number, got nan",
    ] {
        assert!(err.contains(want), "missing {want:?} in {err}");
    }
    assert!(!err.contains("null"), "{err}");
    // The overall average alone is refused too, not read as absent.
    std::fs::write(
        &path,
        "[overall]\nttfb_ms = -inf\n[[candidates]]\nid = \"a\"\n",
    )
    .unwrap();
    let out = selcoord(&["explain", "--candidates", path.to_str().unwrap()]);
    let err = stderr(&out);
    assert!(!out.status.success(), "accepted: {err}");
    assert!(
        err.contains("overall.ttfb_ms: must be a finite number, got -inf"),
        "{err}"
    );
}

#[test]
fn an_upper_case_json_extension_is_read_as_json() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.JSON");
    std::fs::write(
        &path,
        r#"{"candidates": [{"id": "a"}, {"id": "b", "stats": {"success": 0.5}}]}"#,
    )
    .unwrap();
    let out = selcoord(&["explain", "--candidates", path.to_str().unwrap(), "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON output");
    let ids: Vec<&str> = v["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["a", "b"]);
}

#[test]
fn explain_says_the_arms_are_not_explained() {
    let config = repo("examples/configs/arms-mongo.toml");
    let candidates = repo("examples/candidates/livepeer-case.toml");
    let out = selcoord(&["explain", "--config", &config, "--candidates", &candidates]);
    assert!(out.status.success(), "{}", stderr(&out));
    let table = String::from_utf8_lossy(&out.stdout);
    let note = table
        .lines()
        .find(|l| l.starts_with("note:"))
        .unwrap_or_else(|| panic!("no note in\n{table}"));
    for want in ["2 arms", "tuned 50%", "lassie 50%", "not explained"] {
        assert!(note.contains(want), "missing {want:?} in {note}");
    }
    // With --json the output stays the JSON object; the note goes to stderr.
    let out = selcoord(&[
        "explain",
        "--config",
        &config,
        "--candidates",
        &candidates,
        "--json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON output");
    assert!(v["candidates"].is_array(), "{v}");
    assert!(stderr(&out).contains("2 arms"), "{}", stderr(&out));
    // Without arms, no note.
    let out = selcoord(&["explain", "--candidates", &candidates]);
    assert!(out.status.success());
    assert!(!String::from_utf8_lossy(&out.stdout).contains("note:"));
}

/// Each flag that means nothing in the mode asked for is refused before anything runs, with
/// the flags named and the mode they go with.
#[test]
fn flags_of_another_mode_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let dump = dir.path().join("d3");
    let dump = dump.to_str().unwrap();
    let cases: [(Vec<&str>, &[&str]); 7] = [
        (
            vec![
                "--scenario",
                "pairwise-deadlock",
                "--dump",
                dump,
                "--count",
                "5",
            ],
            &["--count and --dump go with --suite"],
        ),
        (
            vec!["--scenario", "recovery", "--count", "5"],
            &["--count goes with --suite"],
        ),
        (
            vec!["--scenario", "recovery", "--by-world"],
            &["--by-world goes with --suite"],
        ),
        (
            vec![
                "--suite",
                "outage",
                "--count",
                "1",
                "--fleet-clients",
                "5",
                "--digest-loss",
                "0.5",
            ],
            &["--fleet-clients, --digest-loss", "go with --scenario"],
        ),
        (
            vec!["--scenario", "livepeer-discovery", "--fleet-clients", "3"],
            &["discovery scenario", "--fleet-clients does not apply"],
        ),
        (
            vec!["--list", "--scenario", "recovery"],
            &["--list only lists", "drop --scenario"],
        ),
        (
            vec![],
            &["nothing to run", "--scenario", "--suite", "--list"],
        ),
    ];
    for (extra, wants) in cases {
        let mut args = vec!["simulate"];
        args.extend(&extra);
        let out = selcoord(&args);
        let err = stderr(&out);
        assert!(!out.status.success(), "{extra:?} accepted");
        assert!(out.stdout.is_empty(), "{extra:?} ran");
        for want in wants {
            assert!(err.contains(want), "{extra:?}: missing {want:?} in {err}");
        }
    }
    assert!(!Path::new(dump).exists(), "--dump wrote files");
}

#[test]
fn a_fleet_override_is_reported_under_its_flag() {
    for (flag, value) in [
        ("--digest-loss", "7"),
        ("--digest-period-s", "0"),
        ("--digest-delay-ms", "-1"),
        ("--digest-jitter-ms", "inf"),
    ] {
        let out = selcoord(&["simulate", "--scenario", "fleet-degrade", flag, value]);
        let err = stderr(&out);
        assert!(!out.status.success(), "{flag} {value} accepted");
        assert!(err.contains(&format!("selcoord: {flag} must")), "{err}");
        assert!(!err.contains("fleet."), "{err}");
    }
}

/// A negative number reaches the program's own check instead of clap's "unexpected argument".
#[test]
fn negative_numbers_get_the_programs_own_message() {
    for (args, want) in [
        (
            &["demo", "--duration", "-1"][..],
            "--duration must be a positive number of seconds up to 1e9 (leave it out to run until Ctrl-C or SIGTERM), got -1.0",
        ),
        (
            &["demo", "--speed", "-2"],
            "--speed must be between 1e-6 and 1e6, got -2.0",
        ),
        (
            &["demo", "--speed", "1e-300"],
            "--speed must be between 1e-6 and 1e6, got 1e-300",
        ),
        (
            &["demo", "--duration", "1e20"],
            "--duration must be a positive number of seconds up to 1e9",
        ),
        (
            &["simulate", "--scenario", "recovery", "--seed", "18446744073709551615", "--seeds", "2"],
            "runs past the largest seed",
        ),
        (
            &["demo", "--decision-log", "d.jsonl", "--sample-rate", "-0.5"],
            "--sample-rate must be between 0 and 1",
        ),
        (
            &["demo", "--snapshot", "s.json", "--snapshot-every", "-1"],
            "--snapshot-every must be between 0.001 and 1e9 seconds, got -1.0",
        ),
        (
            &["demo", "--snapshot-every", "5"],
            "the following required arguments were not provided",
        ),
        (
            &["simulate", "--scenario", "recovery", "--seed", "-5"],
            "must be a whole number >= 0",
        ),
        (
            &["simulate", "--scenario", "recovery", "--seeds", "-1"],
            "must be a whole number >= 1",
        ),
        (
            &["simulate", "--scenario", "recovery", "--digest-loss", "-1"],
            "--digest-loss must be a probability",
        ),
    ] {
        let out = selcoord(args);
        let err = stderr(&out);
        assert!(!out.status.success(), "{args:?} accepted");
        assert!(err.contains(want), "{args:?}: missing {want:?} in {err}");
        assert!(!err.contains("unexpected argument"), "{args:?}: {err}");
    }
}

#[test]
fn an_unknown_scenario_has_no_placeholder_field() {
    for sub in ["simulate", "demo"] {
        let out = selcoord(&[sub, "--scenario", "nosuch"]);
        let err = stderr(&out);
        assert!(!out.status.success());
        assert!(
            err.contains("selcoord: nosuch: unknown scenario `nosuch`"),
            "{sub}: {err}"
        );
        assert!(!err.contains("(document)"), "{sub}: {err}");
    }
}

/// The help text of the demo's fleet flags says they need the `fleet` feature, and
/// `--duration`'s says that stopping drains.
#[test]
fn the_demo_help_says_what_the_fleet_flags_need_and_that_stopping_drains() {
    let out = selcoord(&["demo", "--help"]);
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    // Each option's block: its `--name` line and the description under it, on one line.
    let mut blocks: Vec<(String, String)> = Vec::new();
    for line in help.lines() {
        let t = line.trim_start();
        if t.starts_with("--") && line.starts_with("      --") {
            let name = t.split([' ', '<']).next().unwrap_or_default().to_string();
            blocks.push((name, String::new()));
        } else if let Some((_, text)) = blocks.last_mut() {
            text.push(' ');
            text.push_str(t);
        }
    }
    let block = |name: &str| -> String {
        let text = blocks
            .iter()
            .find(|(n, _)| n == name)
            .unwrap_or_else(|| panic!("{name} is not in\n{help}"))
            .1
            .clone();
        text.split_whitespace().collect::<Vec<_>>().join(" ")
    };
    for flag in [
        "--fleet",
        "--fleet-name",
        "--sender",
        "--digest-period",
        "--digest-urgent-gap",
        "--nats-user",
        "--nats-password",
        "--nats-creds",
    ] {
        let text = block(flag);
        assert!(
            text.contains("build with `--features fleet`"),
            "{flag}: {text}"
        );
    }
    let duration = block("--duration");
    assert!(
        duration.contains("drains") && duration.contains("up to 5 more seconds"),
        "{duration}"
    );
}

/// An attempt of two seconds is in flight when a half-second demo stops: the drain is
/// announced, then waited for.
#[test]
fn the_demo_announces_its_drain() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = dir.path().join("slow.toml");
    std::fs::write(
        &scenario,
        r#"
name = "slow"
description = "one candidate answering after two seconds"
[workload]
loop = "closed"
workers = 1
operations = 1
[[candidates]]
id = "slow"
success = 1.0
ttfb_ms = 2000.0
"#,
    )
    .unwrap();
    let out = selcoord(&[
        "demo",
        "--scenario",
        scenario.to_str().unwrap(),
        "--duration",
        "0.5",
        "--listen",
        "127.0.0.1:0",
    ]);
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    let drain = err
        .find("draining: waiting up to 5 s for the attempts in flight (1)")
        .unwrap_or_else(|| panic!("no drain line in {err}"));
    let stopped = err.find("stopped after").expect("the summary");
    assert!(drain < stopped, "{err}");
}

#[test]
fn a_bad_selcoord_log_is_reported() {
    let run = |value: &str| {
        let out = Command::new(env!("CARGO_BIN_EXE_selcoord"))
            .args(["simulate", "--list"])
            .env("SELCOORD_LOG", value)
            .output()
            .expect("run selcoord");
        assert!(out.status.success(), "{value}: {}", stderr(&out));
        stderr(&out)
    };
    let err = run("selection_coordinator=loud");
    assert!(
        err.contains("warning: SELCOORD_LOG=selection_coordinator=loud: not a valid filter"),
        "{err}"
    );
    let err = run("degub");
    assert!(
        err.contains("warning: SELCOORD_LOG: `degub` is not a level"),
        "{err}"
    );
    for fine in ["info", "selection_coordinator=debug,warn", "3"] {
        assert_eq!(run(fine), "", "{fine}");
    }
}

/// Fleet mode and a discovery scenario keep every seed's figures: a seed count past what they
/// keep is refused at once (it used to abort allocating terabytes).
#[test]
fn more_seeds_than_fleet_and_discovery_keep_are_refused() {
    for (scenario, mode) in [
        ("fleet-degrade", "fleet mode"),
        ("livepeer-discovery", "a discovery scenario"),
    ] {
        let out = selcoord(&[
            "simulate",
            "--scenario",
            scenario,
            "--seeds",
            "1000000000000",
        ]);
        let err = stderr(&out);
        assert!(!out.status.success(), "{scenario} accepted");
        assert!(
            err.contains("--seeds 1000000000000") && err.contains(mode),
            "{err}"
        );
        assert!(err.contains("at most 10000"), "{err}");
    }
}

/// A suite's count stays at what its scenarios and figures fit in memory (100,000 per family
/// used to run out of it), and the refusal says the bound.
#[test]
fn a_suite_count_past_what_fits_is_refused_with_the_bound() {
    let err = selcoord_fails(&[
        "simulate",
        "--suite",
        "all",
        "--count",
        "100000",
        "--policies",
        "random",
    ]);
    assert!(
        err.contains("--count must be at most 1000 scenarios per family (got 100000)"),
        "{err}"
    );
}

/// A suite reports each policy against the oracle: the oracle alone is refused with the
/// reason (it printed an empty table and nothing else).
#[test]
fn a_suite_of_the_oracle_alone_is_refused() {
    let out = selcoord(&[
        "simulate",
        "--suite",
        "outage",
        "--count",
        "1",
        "--policies",
        "oracle",
    ]);
    let err = stderr(&out);
    assert!(!out.status.success() && out.stdout.is_empty(), "{err}");
    assert!(
        err.contains("against the oracle") && err.contains("nothing to report"),
        "{err}"
    );
}

/// `--dump` naming a file says it is not a directory, not "File exists".
#[test]
fn a_dump_path_that_is_a_file_is_not_a_directory() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("afile");
    std::fs::write(&file, "x").unwrap();
    let file = file.to_str().unwrap();
    let err = selcoord_fails(&[
        "simulate", "--suite", "outage", "--count", "1", "--dump", file,
    ]);
    assert!(
        err.contains(&format!("--dump {file}: not a directory")),
        "{err}"
    );
    assert!(!err.contains("File exists"), "{err}");
}

/// Input files are read with a size cap: a device is refused at once, by name, whichever
/// reader meets it (a scenario, a config of a policy, a candidates file), instead of being read
/// until memory runs out.
#[test]
fn a_device_given_as_an_input_file_is_refused_at_once() {
    let cases: [&[&str]; 3] = [
        &["simulate", "--scenario", "/dev/zero"],
        &[
            "simulate",
            "--scenario",
            "recovery",
            "--policies",
            "coordinator:/dev/zero",
        ],
        &[
            "explain",
            "--config",
            "default",
            "--candidates",
            "/dev/zero",
        ],
    ];
    for args in cases {
        let out = selcoord(args);
        let err = stderr(&out);
        assert!(
            !out.status.success() && out.stdout.is_empty(),
            "{args:?}: {err}"
        );
        assert!(
            err.contains("/dev/zero") && err.contains("not a regular file"),
            "{args:?}: {err}"
        );
    }
}

/// `explain` over tens of thousands of candidates explains every one, in the file's order.
/// (Its time per candidate, which a scan per candidate made grow with the file, is measured
/// by the `explain` bench: `cargo bench --bench explain`.)
#[test]
fn explain_explains_every_one_of_many_candidates_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.toml");
    let mut text = String::new();
    for i in 0..60_000 {
        let _ = writeln!(text, "[[candidates]]\nid = \"c{i:05}\"");
    }
    std::fs::write(&path, text).unwrap();
    let out = selcoord(&[
        "explain",
        "--config",
        "default",
        "--candidates",
        path.to_str().unwrap(),
        "--json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let candidates = json["candidates"].as_array().unwrap();
    assert_eq!(candidates.len(), 60_000);
    for (i, c) in candidates.iter().enumerate() {
        assert_eq!(c["id"], format!("c{i:05}"), "{c}");
    }
}

/// `--policies` naming a policy twice is refused, for one scenario and for a suite (it printed
/// the same row twice).
#[test]
fn a_policy_named_twice_is_refused() {
    for args in [
        &[
            "simulate",
            "--scenario",
            "recovery",
            "--policies",
            "oracle,oracle",
        ][..],
        &[
            "simulate",
            "--suite",
            "outage",
            "--count",
            "1",
            "--policies",
            "random, random",
        ],
    ] {
        let out = selcoord(args);
        let err = stderr(&out);
        assert!(
            !out.status.success() && out.stdout.is_empty(),
            "{args:?}: {err}"
        );
        assert!(err.contains("twice"), "{args:?}: {err}");
    }
    let out = selcoord(&[
        "simulate",
        "--scenario",
        "recovery",
        "--policies",
        "coordinatr",
    ]);
    assert!(
        stderr(&out).contains("did you mean `coordinator`?"),
        "{}",
        stderr(&out)
    );
}

/// `--list` refuses the flags of a run (seeds, seed, threads) as it refuses `--json`, instead
/// of ignoring them.
#[test]
fn list_refuses_the_flags_of_a_run() {
    for (extra, flag) in [
        (&["--seeds", "3"][..], "--seeds"),
        (&["--seed", "5", "--threads", "1"], "--seed"),
        (&["--threads", "2"], "--threads"),
        (&["--json", "x.json"], "--json"),
    ] {
        let mut args = vec!["simulate", "--list"];
        args.extend(extra);
        let out = selcoord(&args);
        let err = stderr(&out);
        assert!(
            !out.status.success() && out.stdout.is_empty(),
            "{args:?}: {err}"
        );
        assert!(
            err.contains("'--list' cannot be used with") && err.contains(flag),
            "{args:?}: {err}"
        );
    }
    assert!(selcoord(&["simulate", "--list"]).status.success());
}

/// A count flag says the same range whatever is wrong with the value: a fraction used to read
/// "from 0 to 18446744073709551615" where 0 read ">= 1", and `--seeds` and `--count` give
/// their own bounds, not their type's.
#[test]
fn count_flags_say_at_least_one_whatever_the_value() {
    let runs: [(&[&str], &str, &str); 4] = [
        (&["--scenario", "recovery"], "--seeds", "1000000"),
        (&["--suite", "outage"], "--count", "1000"),
        (
            &["--scenario", "recovery"],
            "--threads",
            "18446744073709551615",
        ),
        (&["--scenario", "fleet-degrade"], "--fleet-clients", "100"),
    ];
    for (mode, flag, max) in runs {
        for value in ["1.5", "0", "-2", "x", "99999999999999999999999"] {
            let mut args = vec!["simulate"];
            args.extend(mode);
            args.extend([flag, value]);
            let out = selcoord(&args);
            let err = stderr(&out);
            assert!(!out.status.success(), "{args:?} accepted");
            let want = format!("must be a whole number >= 1 (at most {max})");
            assert!(err.contains(&want), "{args:?}: missing {want:?} in {err}");
        }
    }
}

/// `--listen 127.0.0.1:0` lets the system pick the port; the demo shows the port it serves
/// on, not 0.
#[test]
fn the_demo_shows_the_port_it_serves_on() {
    let out = selcoord(&["demo", "--duration", "1.5", "--listen", "127.0.0.1:0"]);
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    let at = err
        .find("http://127.0.0.1:")
        .unwrap_or_else(|| panic!("no metrics address in {err}"));
    let port: String = err[at + "http://127.0.0.1:".len()..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    let port: u16 = port.parse().unwrap_or_else(|_| panic!("no port in {err}"));
    assert_ne!(port, 0, "{err}");
}

/// `--snapshot FILE`: the first run starts fresh and saves at stop; a second run with the same
/// file starts from what the first learned, and both say so.
#[test]
fn the_demo_keeps_what_it_learned_in_its_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("demo.json");
    let run = || {
        let out = selcoord(&[
            "demo",
            "--duration",
            "1.5",
            "--listen",
            "127.0.0.1:0",
            "--snapshot",
            file.to_str().unwrap(),
        ]);
        let err = stderr(&out);
        assert!(out.status.success(), "{err}");
        err
    };
    let first = run();
    assert!(first.contains("no file yet: starting fresh"), "{first}");
    assert!(
        first.contains("0 failed (last error: none); the last save at stop written"),
        "{first}"
    );
    assert!(file.is_file(), "no snapshot after the first run: {first}");
    let second = run();
    assert!(
        second.contains("restored what an earlier run learned of 6 candidates"),
        "{second}"
    );
}

/// A corrupt snapshot file is moved aside and the run starts fresh, said once (the library's
/// warning), not again by the demo's own status line.
#[test]
fn a_corrupt_demo_snapshot_is_reported_once() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("demo.json");
    std::fs::write(&file, "garbage{").unwrap();
    let out = selcoord(&[
        "demo",
        "--duration",
        "0.5",
        "--listen",
        "127.0.0.1:0",
        "--snapshot",
        file.to_str().unwrap(),
    ]);
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert_eq!(err.matches("demo.json.corrupt-0").count(), 1, "{err}");
    assert!(err.contains("starting fresh"), "{err}");
    assert!(dir.path().join("demo.json.corrupt-0").is_file(), "{err}");
}

/// A scenario of two candidates, short enough to run in a moment; `fleet` is its `[fleet]`
/// table, or empty.
fn small_scenario(dir: &Path, name: &str, fleet: &str) -> String {
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(
        &path,
        format!(
            "name = \"{name}\"\n{fleet}\n[workload]\nloop = \"open\"\nrate_per_s = 20.0\n\
             duration_s = 5.0\n[[candidates]]\nid = \"fast\"\nsuccess = 1.0\nttfb_ms = 10.0\n\
             [[candidates]]\nid = \"slow\"\nsuccess = 1.0\nttfb_ms = 50.0\n"
        ),
    )
    .unwrap();
    path.to_string_lossy().into_owned()
}

fn json_file(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).expect("a JSON report")
}

/// `--seed BASE --seeds N` runs seeds BASE..BASE+N-1, in one scenario as in fleet mode, and
/// the report lists them.
#[test]
fn the_seed_flags_choose_the_seeds_run() {
    let dir = tempfile::tempdir().unwrap();
    let (out, report) = selcoord_json(&[
        "simulate",
        "--scenario",
        "recovery",
        "--policies",
        "random",
        "--seed",
        "7",
        "--seeds",
        "2",
    ]);
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.contains("2 seeds (7..=8)"), "{table}");
    assert_eq!(report["seeds"], serde_json::json!([7, 8]));

    let fleet = small_scenario(dir.path(), "fleet", "[fleet]\nclients = 2");
    let (_, report) = selcoord_json(&[
        "simulate",
        "--scenario",
        &fleet,
        "--seed",
        "3",
        "--seeds",
        "2",
    ]);
    assert_eq!(report["seeds"], serde_json::json!([3, 4]));
}

/// The fleet flags replace the `[fleet]` table's fields, and alone turn fleet mode on with one
/// coordinator sharing a digest every second; the fleet report's JSON says what ran.
#[test]
fn fleet_flags_override_the_fleet_table_or_stand_for_it() {
    let dir = tempfile::tempdir().unwrap();
    let table = small_scenario(
        dir.path(),
        "table",
        "[fleet]\nclients = 2\nshare = \"digest\"\nperiod_s = 1.0\ndelay_ms = 1.0",
    );
    let (_, report) = selcoord_json(&[
        "simulate",
        "--scenario",
        &table,
        "--fleet-clients",
        "3",
        "--fleet-share",
        "none",
        "--digest-period-s",
        "2",
        "--digest-delay-ms",
        "5",
        "--digest-jitter-ms",
        "4",
        "--digest-loss",
        "0.25",
        "--digest-urgent",
        "on",
    ]);
    assert_eq!(
        report["fleet"],
        serde_json::json!({
            "clients": 3, "share": "none", "period_s": 2.0, "delay_ms": 5.0,
            "jitter_ms": 4.0, "loss": 0.25, "urgent": true
        })
    );

    let plain = small_scenario(dir.path(), "plain", "");
    let (_, report) = selcoord_json(&["simulate", "--scenario", &plain, "--fleet-clients", "2"]);
    assert_eq!(
        report["fleet"],
        serde_json::json!({
            "clients": 2, "share": "digest", "period_s": 1.0, "delay_ms": 0.0,
            "jitter_ms": 0.0, "loss": 0.0, "urgent": false
        })
    );
}

/// Without `--policies` and without a `policies` list, a scenario runs the coordinator, random
/// and the oracle; names in `--policies` may be padded with spaces.
#[test]
fn the_policies_run_by_default_and_as_named() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = small_scenario(dir.path(), "bare", "");
    let policies = |extra: &[&str]| -> Vec<String> {
        let mut args = vec!["simulate", "--scenario", &scenario];
        args.extend(extra);
        selcoord_json(&args).1["policies"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["policy"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(policies(&[]), ["coordinator", "random", "oracle"]);
    assert_eq!(
        policies(&["--policies", " round-robin , oracle"]),
        ["round-robin", "oracle"]
    );
}

/// Fleet mode and a discovery scenario refuse the options they have no use for, before
/// running; at the bound of the seeds they keep, fleet mode goes on to its next check.
#[test]
fn fleet_and_discovery_refuse_what_does_not_apply() {
    let dir = tempfile::tempdir().unwrap();
    let fleet = small_scenario(dir.path(), "fleet", "[fleet]\nclients = 2");
    let plot = dir.path().join("p.svg");
    let plot = plot.to_str().unwrap();
    for (args, want) in [
        (
            vec!["--scenario", &fleet, "--plot", plot],
            "--plot does not apply",
        ),
        (
            vec!["--scenario", "livepeer-discovery", "--policies", "random"],
            "--policies and --plot do not apply",
        ),
        (
            vec!["--scenario", "livepeer-discovery", "--plot", plot],
            "--policies and --plot do not apply",
        ),
        (
            vec![
                "--scenario",
                &fleet,
                "--seeds",
                "10000",
                "--policies",
                "random",
            ],
            "not `random`",
        ),
    ] {
        let mut all = vec!["simulate"];
        all.extend(&args);
        let out = selcoord(&all);
        let err = stderr(&out);
        assert!(!out.status.success(), "{args:?} accepted");
        assert!(out.stdout.is_empty(), "{args:?} ran");
        assert!(err.contains(want), "{args:?}: missing {want:?} in {err}");
    }
    assert!(!Path::new(plot).exists());
}

/// `--list` lists every built-in scenario, the discovery one too; fleet mode and a discovery
/// scenario write their `--json` reports.
#[test]
fn the_list_and_the_other_modes_reports() {
    let out = selcoord(&["simulate", "--list"]);
    assert!(out.status.success());
    let list = String::from_utf8_lossy(&out.stdout);
    let names: Vec<&str> = list.lines().filter_map(|l| l.split(' ').next()).collect();
    for name in [
        "recovery",
        "mongo-overload",
        "fleet-lassie",
        "livepeer-discovery",
    ] {
        assert!(names.contains(&name), "{name} in {list}");
    }

    let dir = tempfile::tempdir().unwrap();
    let fleet = small_scenario(dir.path(), "fleet", "[fleet]\nclients = 2");
    for (scenario, json, field) in [
        (fleet.as_str(), "fleet.json", "fleet"),
        ("livepeer-discovery", "discovery.json", "policies"),
    ] {
        let path = dir.path().join(json);
        let out = selcoord(&[
            "simulate",
            "--scenario",
            scenario,
            "--json",
            path.to_str().unwrap(),
        ]);
        assert!(out.status.success(), "{scenario}: {}", stderr(&out));
        let v = json_file(&path);
        assert!(!v[field].is_null(), "{scenario}: no {field} in {v}");
    }
}

/// `--count` takes up to 1000 scenarios per family: at the bound the run goes on to read the
/// policies.
#[test]
fn a_suite_count_at_the_bound_is_taken() {
    let err = selcoord_fails(&[
        "simulate",
        "--suite",
        "drift",
        "--count",
        "1000",
        "--policies",
        "no-such-policy",
    ]);
    assert!(err.contains("no-such-policy"), "{err}");
    assert!(!err.contains("--count"), "{err}");
}

/// Runs `selcoord explain --candidates <file>` (and `extra`) on `text` written to `name`.
fn explain_file(dir: &Path, name: &str, text: &str, extra: &[&str]) -> Output {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    let mut args = vec!["explain", "--candidates", path.to_str().unwrap()];
    args.extend(extra);
    selcoord(&args)
}

/// Every problem of a candidates file is reported at once with its place: recorded
/// statistics out of their range, unknown fields at the top and in `overall`, a value of the
/// wrong type (named in words).
#[test]
fn explain_reports_every_bad_value_of_a_candidates_file() {
    let dir = tempfile::tempdir().unwrap();
    let out = explain_file(
        dir.path(),
        "c.json",
        r#"{"candidates": [
            {"id": "a", "stats": {"success": 1.5}},
            {"id": "b", "stats": {"overload_errors": 3, "outcomes": 2}},
            {"id": "c", "stats": {"ejected_for_s": -1, "age_s": -2, "connect_ms": -5}},
            {"id": "d", "stake": "high"}
        ], "overall": {"ttfb": 1}, "colour": "red"}"#,
        &[],
    );
    let err = stderr(&out);
    assert!(!out.status.success() && out.stdout.is_empty(), "{err}");
    for want in [
        "candidates[0].stats.success: must be in [0, 1], got 1.5",
        "candidates[1].stats.overload_errors: 3 is more than outcomes (2)",
        "candidates[2].stats.connect_ms: must be a finite number >= 0, got -5",
        "candidates[2].stats.ejected_for_s: must be a finite number >= 0, got -1",
        "candidates[2].stats.age_s: must be a finite number >= 0, got -2",
        "candidates[3].stake: invalid type: string \"high\", expected a number",
        "overall.ttfb: unknown field `ttfb`",
        "colour: unknown field",
    ] {
        assert!(err.contains(want), "missing {want:?} in\n{err}");
    }
    for (text, want) in [
        (r#"{"candidates": []}"#, "candidates: the list is empty"),
        (
            r#"{"candidates": {"id": "a"}}"#,
            "candidates: must be a list of tables",
        ),
    ] {
        let out = explain_file(dir.path(), "c.json", text, &[]);
        let err = stderr(&out);
        assert!(!out.status.success() && err.contains(want), "{text}: {err}");
    }
}

/// `[overall]` is checked with the rest of the file: its bad values and every unknown field of
/// it appear in the one list, under the file's name, each as `overall.<field>`, next to the
/// candidates' own problems; nothing is left for a later, placeless error.
#[test]
fn explain_checks_overall_with_the_rest_of_the_file() {
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in [
        (
            "ov.toml",
            "[overall]\nttfb_ms = -300\nbandwidth_bps = -1\nattempt_ms = -5\n\
             ttfb_spread = -2\nttfb = 1\ncolour = 2\n\
             [[candidates]]\nid = \"a\"\n[candidates.stats]\nsuccess = 1.5\n",
        ),
        (
            "ov.json",
            r#"{"overall": {"ttfb_ms": -300, "bandwidth_bps": -1, "attempt_ms": -5,
                "ttfb_spread": -2, "ttfb": 1, "colour": 2},
                "candidates": [{"id": "a", "stats": {"success": 1.5}}]}"#,
        ),
    ] {
        let out = explain_file(dir.path(), name, text, &[]);
        let err = stderr(&out);
        assert!(!out.status.success() && out.stdout.is_empty(), "{err}");
        assert!(
            err.contains(&format!(
                "invalid candidates file {}",
                dir.path().join(name).display()
            )),
            "{err}"
        );
        for want in [
            "overall.ttfb_ms:",
            "overall.bandwidth_bps:",
            "overall.attempt_ms:",
            "overall.ttfb_spread:",
            "overall.ttfb: unknown field `ttfb`",
            "overall.colour: unknown field `colour`",
            "candidates[0].stats.success: must be in [0, 1], got 1.5",
        ] {
            assert!(err.contains(want), "{name}: missing {want:?} in\n{err}");
        }
        assert!(!err.contains("invalid snapshot"), "{name}: {err}");
    }
}

/// A candidates file's problems say on which line they are, in TOML and in JSON alike, as a
/// config's do.
#[test]
fn explain_says_the_line_of_each_problem() {
    let dir = tempfile::tempdir().unwrap();
    let toml = "[overall]\nttfb_ms = -3\n\n[[candidates]]\nid = \"a\"\nstake = \"lots\"\n\
                [candidates.stats]\nsuccess = 1.5\nbogus = 1\n[[candidates]]\nid = \"b\"\n\
                colour = \"red\"\nmax_in_flight = -1\n";
    let json = "{\"overall\": {\"ttfb_ms\": -3},\n\"candidates\": [\n\
                {\"id\": \"a\", \"stake\": \"lots\",\n\"stats\": {\"success\": 1.5,\n\"bogus\": 1}},\n\
                {\"id\": \"b\",\n\"colour\": \"red\",\n\"max_in_flight\": -1}]}";
    for (name, text, lines) in [
        ("lines.toml", toml, [2, 6, 8, 9, 12, 13]),
        ("lines.json", json, [1, 3, 4, 5, 7, 8]),
    ] {
        let out = explain_file(dir.path(), name, text, &[]);
        let err = stderr(&out);
        assert!(!out.status.success(), "{err}");
        for (field, line) in [
            "overall.ttfb_ms:",
            "candidates[0].stake:",
            "candidates[0].stats.success:",
            "candidates[0].stats.bogus:",
            "candidates[1].colour:",
            "candidates[1].max_in_flight:",
        ]
        .into_iter()
        .zip(lines)
        {
            let item = err
                .lines()
                .find(|l| l.contains(field))
                .unwrap_or_else(|| panic!("{name}: no {field} in\n{err}"));
            assert!(
                item.ends_with(&format!("(line {line})")),
                "{name}: {field} is not said to be at line {line}:\n{err}"
            );
        }
    }
}

/// A whole number too large (or negative) for its field is said to be out of range, with the
/// range, not to be no whole number.
#[test]
fn explain_says_a_whole_number_is_out_of_range() {
    let dir = tempfile::tempdir().unwrap();
    let out = explain_file(
        dir.path(),
        "c.toml",
        "[[candidates]]\nid = \"a\"\nmax_in_flight = -1\n\
         [candidates.stats]\noutcomes = 4294967296\n",
        &[],
    );
    let err = stderr(&out);
    assert!(!out.status.success(), "{err}");
    for want in [
        "candidates[0].stats.outcomes: 4294967296 is out of range (0 to 4294967295)",
        "candidates[0].max_in_flight: -1 is out of range (0 to 4294967295)",
    ] {
        assert!(err.contains(want), "missing {want:?} in\n{err}");
    }
    assert!(!err.contains("expected a whole number"), "{err}");
}

/// The table names the config's preset and mode, shows a limit column and a deadline column
/// only when some candidate has one, and says when no filter removed anything and no fallback
/// was taken.
#[test]
fn the_explain_table_shows_the_columns_that_apply() {
    let dir = tempfile::tempdir().unwrap();
    let with_limit = "[[candidates]]\nid = \"a\"\nmax_in_flight = 4\n\
                      [candidates.stats]\nttfb_ms = 100.0\n[[candidates]]\nid = \"b\"\n";
    let plain = "[[candidates]]\nid = \"a\"\n[[candidates]]\nid = \"b\"\n";
    for (config, text, head, limit, deadline) in [
        (
            "default",
            with_limit,
            "config: preset default, mode sum,",
            true,
            true,
        ),
        (
            "livepeer",
            with_limit,
            "config: preset livepeer, mode mixture,",
            true,
            false,
        ),
        (
            "livepeer",
            plain,
            "config: preset livepeer, mode mixture,",
            false,
            false,
        ),
    ] {
        let out = explain_file(dir.path(), "c.toml", text, &["--config", config]);
        assert!(out.status.success(), "{config}: {}", stderr(&out));
        let table = String::from_utf8(out.stdout).unwrap();
        assert!(
            table.ends_with("(none)\n"),
            "{config}: the last line is not ended"
        );
        let lines: Vec<&str> = table.lines().collect();
        assert!(lines[0].starts_with(head), "{table}");
        let header = lines[1];
        assert_eq!(header.contains(" limit "), limit, "{config}: {table}");
        assert_eq!(
            header.contains("deadline ms"),
            deadline,
            "{config}: {table}"
        );
        if limit {
            let a: Vec<&str> = lines[2].split_whitespace().collect();
            let b: Vec<&str> = lines[3].split_whitespace().collect();
            let at = header
                .split_whitespace()
                .position(|w| w == "limit")
                .unwrap();
            assert_eq!((a[at], b[at]), ("4", "-"), "{table}");
        }
        let rest = lines[4..].join("\n");
        assert!(
            rest.contains("filters:\n  (none removed anything)\nfallbacks:\n  (none)"),
            "{config}: {table}"
        );
    }
}

/// `SELCOORD_LOG` takes the levels by number too, 0 (off) to 5 (trace), without a warning.
#[test]
fn selcoord_log_takes_the_levels_by_number() {
    for value in ["0", "5", "off,5"] {
        let out = Command::new(env!("CARGO_BIN_EXE_selcoord"))
            .args(["simulate", "--list"])
            .env("SELCOORD_LOG", value)
            .output()
            .expect("run selcoord");
        assert!(out.status.success(), "{value}: {}", stderr(&out));
        assert!(
            !stderr(&out).contains("warning"),
            "{value}: {}",
            stderr(&out)
        );
    }
}

/// `--count` left out: 20 scenarios a family, as `--help` and docs/scenarios.md say.
#[test]
fn the_suite_runs_twenty_scenarios_a_family_by_default() {
    let (_, v) = selcoord_json(&[
        "simulate",
        "--suite",
        "degrade-heal",
        "--policies",
        "round-robin",
    ]);
    assert_eq!(v["families"][0]["family"], "degrade-heal");
    assert_eq!(v["families"][0]["scenarios"], 20);
    assert_eq!(v["instances"].as_array().unwrap().len(), 20);
}

/// Without `--policies` a suite runs the documented default policies, in their order; it runs
/// each scenario once, so `--seeds` is refused.
#[test]
fn the_suite_runs_the_default_policies_once_each() {
    let (_, v) = selcoord_json(&["simulate", "--suite", "outage", "--count", "1"]);
    let ran: Vec<&str> = v["instances"][0]["policies"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["policy"].as_str().unwrap())
        .collect();
    assert_eq!(
        ran,
        [
            "coordinator",
            "oracle",
            "p2c-peak-ewma",
            "least-loaded",
            "mongo-error-bias",
            "round-robin",
            "random",
            "p2c-opcount"
        ]
    );
    let err = selcoord_fails(&[
        "simulate", "--suite", "outage", "--count", "1", "--seeds", "2",
    ]);
    assert!(err.contains("drop --seeds"), "{err}");
}

/// `--json /dev/stdout` whose reader has gone before the report: the report is dropped
/// quietly, as the table is, and the run ends with success.
#[test]
fn a_closed_pipe_drops_a_report_sent_to_stdout_quietly() {
    let args = [
        "simulate",
        "--scenario",
        "recovery",
        "--policies",
        "random",
        "--json",
        "/dev/stdout",
    ];
    let out = with_closed_pipe(&args, 0);
    assert_quiet_exit(&args, &out);
}

/// The first decision record a short demo writes to its log, with `extra` flags.
fn first_demo_record(extra: &[&str]) -> serde_json::Value {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("decisions.jsonl");
    let mut args = vec![
        "demo",
        "--duration",
        "0.3",
        "--listen",
        "127.0.0.1:0",
        "--decision-log",
        log.to_str().unwrap(),
    ];
    args.extend(extra);
    let out = selcoord(&args);
    assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    let text = std::fs::read_to_string(&log).unwrap();
    let first = text.lines().next().expect("a decision record");
    serde_json::from_str(first).unwrap()
}

/// `demo --config` takes a preset by name, as `explain --config` and `coordinator:<preset>`
/// do: Lassie's preset weighs a candidate by its plain score (exponent 1), the default by a
/// power of it.
#[test]
fn the_demo_runs_a_preset_named_by_config() {
    let weighed_plainly = |record: &serde_json::Value| {
        let c = &record["candidates"][0];
        let (score, weight) = (c["score"].as_f64().unwrap(), c["weight"].as_f64().unwrap());
        (score - weight).abs() < 1e-9 * score.abs().max(1.0)
    };
    assert!(weighed_plainly(&first_demo_record(&["--config", "lassie"])));
    assert!(!weighed_plainly(&first_demo_record(&[])));
    let err = selcoord_fails(&["demo", "--config", "lassy", "--duration", "0.3"]);
    assert!(
        err.contains("--config lassy")
            && err.contains("`lassy` is neither a preset (default, lassie, livepeer)"),
        "{err}"
    );
}

/// A scenario file's own problem is reported as it is; the note that `demo` is a built-in
/// scenario comes only with a name that was not found.
#[test]
fn the_demo_notes_its_own_scenario_only_for_a_name_not_found() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("typo.toml");
    std::fs::write(&path, "name = \"x\"\nwrokers = 3\n").unwrap();
    let err = selcoord_fails(&["demo", "--scenario", path.to_str().unwrap()]);
    assert!(err.contains("wrokers"), "{err}");
    assert!(!err.contains("built into the demo"), "{err}");
    let err = selcoord_fails(&["demo", "--scenario", "livepeer-discovery"]);
    assert!(err.contains("is a discovery scenario"), "{err}");
    assert!(!err.contains("built into the demo"), "{err}");
    let err = selcoord_fails(&["demo", "--scenario", "nosuch"]);
    assert!(err.contains("`demo` is built into the demo too"), "{err}");
}

/// Flags that would otherwise be ignored or accepted without bound are refused with what to
/// do: a sample rate with no decision log, a seed count a typo made huge, an empty policy
/// name, and a fleet of no coordinators (with the fleet's own bounds, not the type's).
#[test]
fn flags_that_would_do_nothing_or_run_for_days_are_refused() {
    for (args, want) in [
        (
            &["demo", "--sample-rate", "0.5", "--duration", "1"][..],
            "--decision-log",
        ),
        (
            &["simulate", "--scenario", "recovery", "--seeds", "99999999"],
            "--seeds 99999999: at most 1000000 seeds at once",
        ),
        (
            &["simulate", "--scenario", "recovery", "--policies", ""],
            "--policies has an empty name",
        ),
        (
            &[
                "simulate",
                "--scenario",
                "recovery",
                "--policies",
                "oracle,,random",
            ],
            "--policies has an empty name",
        ),
        (
            &["simulate", "--scenario", "recovery", "--fleet-clients", "101"],
            "invalid value '101' for '--fleet-clients <N>': must be a whole number >= 1 (at most 100)",
        ),
    ] {
        let err = selcoord_fails(args);
        assert!(err.contains(want), "{args:?}: missing {want:?} in {err}");
    }
}

/// A candidates file with unknown fields beside bad values gets both reported in one pass,
/// and a candidate's bad fields each get their own path.
#[test]
fn explain_reports_unknown_fields_beside_bad_values() {
    let dir = tempfile::tempdir().unwrap();
    let out = explain_file(
        dir.path(),
        "c.json",
        r#"{"candidates": [
            {"id": "a", "stats": {"success": 1.5, "latency": 3}},
            {"id": "b", "stake": -5, "price": -1, "weird": 2}
        ]}"#,
        &[],
    );
    let err = stderr(&out);
    assert!(!out.status.success() && out.stdout.is_empty(), "{err}");
    for want in [
        "candidates[0].stats.latency: unknown field `latency`",
        "candidates[0].stats.success: must be in [0, 1], got 1.5",
        "candidates[1].weird: unknown field `weird`",
        "candidates[1].stake: is negative",
        "candidates[1].price: is negative",
    ] {
        assert!(err.contains(want), "missing {want:?} in\n{err}");
    }
}

/// A fleet flag without `--fleet-clients` on a scenario without a `[fleet]` table runs a fleet
/// of one, which has no one to share with: the run says so and how to run several.
#[test]
fn a_fleet_of_one_says_it_shares_with_no_one() {
    let out = selcoord(&[
        "simulate",
        "--scenario",
        "mongo-overload",
        "--digest-loss",
        "0.5",
    ]);
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("a fleet of 1 coordinator shares its digests with no one"),
        "{err}"
    );
    let out = selcoord(&[
        "simulate",
        "--scenario",
        "mongo-overload",
        "--fleet-clients",
        "2",
    ]);
    assert!(!stderr(&out).contains("with no one"), "{}", stderr(&out));
}

/// The demo's stop summary: how many decisions it made, and how long it ran.
fn demo_decisions(err: &str) -> (f64, f64) {
    let line = err
        .lines()
        .find(|l| l.contains("stopped after"))
        .unwrap_or_else(|| panic!("no summary in {err}"));
    let secs = line.split("stopped after ").nth(1).unwrap();
    let secs: f64 = secs.split(" s").next().unwrap().parse().unwrap();
    let n = line.split(": ").nth(2).unwrap();
    let n: f64 = n.split(' ').next().unwrap().parse().unwrap();
    (n, secs)
}

/// An open loop plays at the scenario's rate: `herd` asks for 3,200 requests a second, and a
/// timer per arrival used to hold every scenario under about a thousand. The margin is wide
/// (half the rate) so a loaded machine does not fail it; the cap it guards against is a third.
#[test]
fn the_demo_plays_an_open_loop_at_its_rate() {
    let out = selcoord(&[
        "demo",
        "--scenario",
        "herd",
        "--duration",
        "2",
        "--listen",
        "127.0.0.1:0",
    ]);
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    let (n, secs) = demo_decisions(&err);
    assert!(n / secs > 1_600.0, "{n} decisions in {secs} s: {err}");
}

/// SIGTERM (what systemd, Docker and Kubernetes send) stops the demo as Ctrl-C does: it
/// drains, prints its summary, saves its snapshot and exits 0.
#[cfg(unix)]
#[test]
fn the_demo_stops_cleanly_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("demo.json");
    let child = Command::new(env!("CARGO_BIN_EXE_selcoord"))
        .args(["demo", "--listen", "127.0.0.1:0", "--snapshot"])
        .arg(&file)
        .env_remove("SELCOORD_LOG")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run selcoord");
    // Its first status line says it is serving; then it is told to stop.
    let mut child = child;
    let mut reader = std::io::BufReader::new(child.stderr.take().expect("stderr"));
    let mut seen = String::new();
    while !seen.contains("metrics") {
        let mut line = String::new();
        if reader.read_line(&mut line).expect("a line") == 0 {
            break;
        }
        seen.push_str(&line);
    }
    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("run kill");
    assert!(killed.success());
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut reader, &mut rest).unwrap();
    let status = child.wait().expect("wait for selcoord");
    let err = format!("{seen}{rest}");
    assert!(status.success(), "{status:?}: {err}");
    assert!(err.contains("stopped after"), "{err}");
    assert!(err.contains("the last save at stop written"), "{err}");
    assert!(file.is_file(), "no snapshot: {err}");
}

/// An empty `--metrics-name` is refused: it used to label every series `coordinator="_"`.
#[test]
fn the_demo_refuses_an_empty_metrics_name() {
    let err = selcoord_fails(&["demo", "--metrics-name", " ", "--duration", "0.3"]);
    assert!(err.contains("--metrics-name must not be empty"), "{err}");
}

/// One candidate is "1 candidate".
#[test]
fn a_one_candidate_scenario_reads_in_the_singular() {
    let out = selcoord(&["simulate", "--scenario", "knee", "--seeds", "1"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        text.starts_with("scenario knee: 1 candidate, seed 1"),
        "{text}"
    );
}

/// `--listen` takes a host name with its port, as a user writes `localhost:9464`, and names
/// what it wants when the value is neither.
#[test]
fn the_demo_listens_on_a_host_name() {
    let out = selcoord(&["demo", "--duration", "0.3", "--listen", "localhost:0"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let err = selcoord_fails(&["demo", "--listen", "nohost"]);
    assert!(err.contains("must be IP:PORT or HOST:PORT"), "{err}");
}

//! What a new user meets first: a mistyped built-in scenario name, a TOML syntax error,
//! `selcoord simulate` options that could only fail at the end of a run (checked before it),
//! and the table's header.

use selection_coordinator::sim::{Scenario, BUILTIN};

#[path = "support/cli.rs"]
mod cli;
use cli::selcoord;

/// Every built-in, the discovery one included.
fn builtin_names() -> Vec<&'static str> {
    let mut names: Vec<&str> = BUILTIN.iter().map(|(n, _)| *n).collect();
    names.push("livepeer-discovery");
    names
}

fn assert_unknown_with_suggestion(err: &str, want: &str) {
    assert!(err.contains("unknown scenario"), "{err}");
    assert!(err.contains(&format!("did you mean `{want}`?")), "{err}");
    assert!(
        !err.contains("No such file"),
        "reads as a file error: {err}"
    );
    for name in builtin_names() {
        assert!(err.contains(name), "the list lacks {name}: {err}");
    }
}

#[test]
fn a_mistyped_name_is_an_unknown_scenario_with_a_suggestion_and_the_list() {
    for (typo, want) in [
        ("mongo-overlaod", "mongo-overload"),
        ("recovry", "recovery"),
        ("large_fleet", "large-fleet"),
        ("livepeer-discovry", "livepeer-discovery"),
    ] {
        let e = Scenario::load(typo).unwrap_err();
        assert_unknown_with_suggestion(&e.to_string(), want);
    }
    // Nothing close: no suggestion, still the list.
    let e = Scenario::load("zzzz").unwrap_err().to_string();
    assert!(
        e.contains("unknown scenario") && !e.contains("did you mean"),
        "{e}"
    );
    assert!(e.contains("livepeer-discovery"), "{e}");
}

#[test]
fn a_missing_path_is_a_file_error() {
    let e = Scenario::load("no/such/dir/scenario.toml")
        .unwrap_err()
        .to_string();
    assert!(e.contains("cannot read it"), "{e}");
    assert!(!e.contains("unknown scenario"), "{e}");
}

#[test]
fn the_discovery_scenario_says_what_it_is() {
    let e = Scenario::load("livepeer-discovery")
        .unwrap_err()
        .to_string();
    assert!(e.contains("discovery scenario"), "{e}");
}

#[test]
fn the_cli_says_unknown_scenario_for_simulate_and_demo() {
    for sub in ["simulate", "demo"] {
        let out = selcoord(&[sub, "--scenario", "mongo-overlaod"]);
        assert!(!out.status.success(), "{sub} accepted an unknown scenario");
        assert_unknown_with_suggestion(&String::from_utf8_lossy(&out.stderr), "mongo-overload");
    }
}

#[test]
fn a_toml_syntax_error_shows_line_column_and_snippet() {
    let text = "name = \"x\"\ndescription = \"y\"\n[workload\nkind = \"closed\"\n";
    let e = Scenario::parse(text, "bad.toml").unwrap_err();
    assert_eq!(e.line, Some(3), "{e}");
    let shown = e.to_string();
    for want in [
        "bad.toml line 3",
        "column 10",
        "3 | [workload",
        "  |          ^",
    ] {
        assert!(shown.contains(want), "missing {want:?} in\n{shown}");
    }
    // Through the CLI, from a file.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.toml");
    std::fs::write(&path, text).unwrap();
    let out = selcoord(&["simulate", "--scenario", path.to_str().unwrap()]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("column 10") && err.contains("3 | [workload"),
        "{err}"
    );
}

/// An error at a carriage return that ends a line (a lone `\r`, or one of several before the
/// newline) is shown at that line with one caret, not a panic: the line shown is cut before
/// its carriage returns, so the span may start past the line's shown end.
#[test]
fn an_error_at_a_carriage_return_is_shown_not_a_panic() {
    for text in ["\r", "name = \"x\"\r\r\r\n[[\n", "a = 1\r\r\r\r\n"] {
        let e = Scenario::parse(text, "bad.toml").unwrap_err();
        let shown = e.to_string();
        assert!(shown.contains("bad.toml line 1"), "{text:?}: {shown}");
        assert!(shown.contains("at line 1, column"), "{text:?}: {shown}");
        assert!(shown.contains("\n1 | "), "{text:?}: {shown}");
        assert!(shown.ends_with('^'), "{text:?}: {shown}");
    }
}

#[test]
fn columns_count_characters_not_bytes() {
    let e = Scenario::parse("name = \"ééé\" oops\n", "bad.toml").unwrap_err();
    let shown = e.to_string();
    assert!(
        shown.contains("column 14") && shown.contains("1 | name = \"ééé\" oops"),
        "{shown}"
    );
}

#[test]
fn a_bad_value_points_at_it_too() {
    let text = "name = \"x\"\ndescription = \"y\"\n[[candidates]]\nid = \"a\"\nsuccess = 1.5\n";
    let e = Scenario::parse(text, "bad.toml").unwrap_err();
    assert_eq!(e.field, "candidates[0].success", "{e}");
    assert_eq!(e.line, Some(5), "{e}");
    let shown = e.to_string();
    assert!(
        shown.contains("column 11") && shown.contains("5 | success = 1.5"),
        "{shown}"
    );
}

/// Each bad option fails before the run: nothing is printed on stdout (the table comes after
/// the run) and no file is left behind.
#[test]
fn simulate_checks_its_options_before_running() {
    let dir = tempfile::tempdir().unwrap();
    let png = dir.path().join("out.png");
    let missing_dir = dir.path().join("no-such-dir").join("out.json");
    let svg_in_missing_dir = dir.path().join("no-such-dir").join("out.svg");
    let cases: [(Vec<&str>, &str); 4] = [
        (vec!["--plot", png.to_str().unwrap()], ".svg"),
        (vec!["--json", missing_dir.to_str().unwrap()], "--json"),
        (
            vec!["--plot", svg_in_missing_dir.to_str().unwrap()],
            "--plot",
        ),
        (vec!["--threads", "0"], "must be a whole number >= 1"),
    ];
    for (extra, want) in cases {
        let mut args = vec!["simulate", "--scenario", "recovery"];
        args.extend(&extra);
        let out = selcoord(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{extra:?} accepted");
        assert!(err.contains(want), "{extra:?}: missing {want} in {err}");
        assert!(out.stdout.is_empty(), "{extra:?} ran first");
    }
    assert!(!png.exists());
    // A suite too large to generate is refused before anything is generated.
    let out = selcoord(&["simulate", "--suite", "drift", "--count", "100000000"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && out.stdout.is_empty());
    assert!(err.contains("--count must be at most"), "{err}");
    // A writable --json path is left as it was until the report is written.
    let json = dir.path().join("out.json");
    let out = selcoord(&[
        "simulate",
        "--scenario",
        "recovery",
        "--json",
        json.to_str().unwrap(),
        "--threads",
        "1",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).expect("the report");
    assert!(v["policies"].is_array(), "{v}");
    // One seed: the figures are that seed's, not means.
    let table = String::from_utf8_lossy(&out.stdout);
    let header = table.lines().next().unwrap_or_default();
    assert!(
        header.contains("seed 1") && !header.contains("means"),
        "{header}"
    );
}

#[test]
fn several_seeds_say_means_over_seeds() {
    let out = selcoord(&[
        "simulate",
        "--scenario",
        "recovery",
        "--policies",
        "random",
        "--seeds",
        "2",
    ]);
    assert!(out.status.success());
    let table = String::from_utf8_lossy(&out.stdout);
    let header = table.lines().next().unwrap_or_default();
    assert!(
        header.contains("2 seeds (1..=2), means over seeds"),
        "{header}"
    );
}

/// Fleet mode takes the one config every client runs from `--policies coordinator:<file>`
/// (with `oracle`, which it always reports), and says why anything else does not apply.
#[test]
fn fleet_mode_runs_the_coordinator_config_named_by_policies() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = dir.path().join("fleet.toml");
    std::fs::write(
        &scenario,
        r#"
name = "fleet-two"
[fleet]
clients = 4
[workload]
loop = "open"
rate_per_s = 40.0
duration_s = 20.0
[[candidates]]
id = "fast"
success = 1.0
ttfb_ms = 10.0
[[candidates]]
id = "slow"
count = 3
success = 1.0
ttfb_ms = 100.0
"#,
    )
    .unwrap();
    // Every draw uniform: the fleet sends three quarters of its requests to the slow ones.
    let uniform = dir.path().join("uniform.toml");
    std::fs::write(&uniform, "floor = 1.0\n").unwrap();
    let ratio = |policies: Option<String>| -> f64 {
        let mut args = vec![
            "simulate".to_string(),
            "--scenario".into(),
            scenario.to_str().unwrap().into(),
        ];
        if let Some(p) = policies {
            args.extend(["--policies".into(), p]);
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = selcoord(&args);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let line = text.lines().find(|l| l.starts_with("ttfb mean")).unwrap();
        let x = line.split(": ").nth(1).unwrap().split(' ').next().unwrap();
        x.parse().unwrap()
    };
    let default = ratio(None);
    let same = ratio(Some("coordinator,oracle".into()));
    let flat = ratio(Some(format!("coordinator:{}", uniform.display())));
    assert_eq!(default, same, "`coordinator` is the scenario's own config");
    assert!(
        flat > 2.0 * default,
        "the uniform config must show: {flat} against {default}"
    );
    for (policies, want) in [
        ("random", "not `random`"),
        ("coordinator,coordinator:lassie", "more than one"),
    ] {
        let out = selcoord(&[
            "simulate",
            "--scenario",
            scenario.to_str().unwrap(),
            "--policies",
            policies,
        ]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && err.contains(want),
            "{policies}: {err}"
        );
    }
}

/// A number far out of range (a typo such as `1e300`) is shown as written, not as the three
/// hundred digits `{}` would print for it; ordinary figures are shown as before.
#[test]
fn a_huge_number_is_shown_compactly() {
    let base = "name = \"x\"\n[workload]\nloop = \"closed\"\nworkers = 2\noperations = 10\n\
                [[candidates]]\nid = \"a\"\n";
    for (line, want) in [
        ("success = 0.9\nttfb_ms = 1e300\n", "got 1e300"),
        ("success = 1e300\n", "got 1e300"),
        ("success = 0.9\nconnect_ms = -1e300\n", "got -1e300"),
        ("success = 0.9\nttfb_ms = -5\n", "got -5"),
        ("success = 1.5\n", "got 1.5"),
    ] {
        let e = Scenario::parse(&format!("{base}{line}"), "big.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains(want) && !e.contains("0000000000"), "{e}");
    }
    let discovery = "kind = \"discovery\"\n[discovery]\ninterval_s = 1e300\n";
    let e = selection_coordinator::discovery::sim::DiscoveryScenario::from_toml_str(discovery)
        .unwrap_err()
        .to_string();
    assert!(e.contains("got 1e300") && !e.contains("0000000000"), "{e}");
    let out = selcoord(&[
        "demo",
        "--decision-log",
        "d.jsonl",
        "--sample-rate",
        "1e300",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("got 1e300") && !err.contains("0000000000"),
        "{err}"
    );
}

/// A value refused inside an inline table (a candidate, a distribution, the workload, a
/// timeline event written `{ ... }`) is shown as one in an ordinary table is: the line and
/// column, the line quoted, the value underlined; both when serde refuses it and when a check
/// on the whole scenario does.
#[test]
fn a_bad_value_in_an_inline_table_is_underlined() {
    let workload = "workload = { loop = \"closed\", workers = 2, operations = 10 }\n";
    let cases = [
        // (candidates, field, quoted line, carets: column and count)
        (
            "candidates = [{ id = \"a\", success = 0.9, ttfb_ms = -5 }]",
            "candidates[0].ttfb_ms",
            52,
            2,
        ),
        (
            "candidates = [{ id = \"a\", success = 0.9, connect_ms = { kind = \"normal\", mean = 5, sd = -1 } }]",
            "candidates[0].connect_ms.sd",
            89,
            2,
        ),
        (
            "candidates = [{ id = \"a\", success = 0.9 }, { id = \"a\", success = 0.5 }]",
            "candidates[1].id",
            51,
            3,
        ),
        (
            "candidates = [{ id = \"a\", success = 0.9, servers = 2 }]",
            "candidates[0].servers",
            52,
            1,
        ),
    ];
    for (candidates, field, column, carets) in cases {
        let text = format!("name = \"x\"\n{candidates}\n{workload}");
        let e = Scenario::parse(&text, "inline.toml").unwrap_err();
        assert_eq!(e.field, field, "{e}");
        assert_eq!(e.line, Some(2), "{e}");
        let shown = e.to_string();
        let underline = format!("  | {}{}\n", " ".repeat(column - 1), "^".repeat(carets));
        for want in [
            "inline.toml line 2".to_string(),
            format!("column {column}:"),
            format!("2 | {candidates}"),
        ] {
            assert!(shown.contains(&want), "missing {want:?} in\n{shown}");
        }
        assert!(
            format!("{shown}\n").contains(&underline),
            "no {underline:?} in\n{shown}"
        );
    }
    // The workload and a timeline event inline too.
    let text = "name = \"x\"\ncandidates = [{ id = \"a\", success = 0.9 }]\n\
                workload = { loop = \"open\", rate_per_s = 5, duration_s = 10, workers = 3 }\n";
    let e = Scenario::parse(text, "inline.toml").unwrap_err();
    assert_eq!(
        (e.field.as_str(), e.line),
        ("workload.workers", Some(3)),
        "{e}"
    );
    assert!(e.to_string().contains("column 72:"), "{e}");
    let text = format!(
        "name = \"x\"\ncandidates = [{{ id = \"a\", success = 0.9 }}]\n{workload}\
         timeline = [{{ at_s = 1, action = \"leave\", candidate = \"zz\" }}]\n"
    );
    let e = Scenario::parse(&text, "inline.toml").unwrap_err();
    assert_eq!(e.line, Some(4), "{e}");
    assert!(e.to_string().contains("column 55:"), "{e}");
}

/// A discovery scenario's errors read as a selection scenario's: the file, the field, the line
/// and column, the line quoted with the value underlined; for a syntax error, an unknown
/// field, a value out of range and a discovery setting alike.
#[test]
fn a_discovery_scenario_error_names_the_file_line_and_column() {
    use selection_coordinator::discovery::sim::DiscoveryScenario;
    let base = "kind = \"discovery\"\nname = \"d\"\nseeds = [1]\ncandidates = 100\nstreams = 10\n";
    for (tail, field, line, column, quoted) in [
        (
            "[latency]\nmedian_ms = -3\n",
            "latency.median_ms",
            7,
            13,
            "7 | median_ms = -3",
        ),
        (
            "latency = { sigma = 9 }\n",
            "latency.sigma",
            6,
            21,
            "6 | latency = { sigma = 9 }",
        ),
        (
            "[discovery]\nbatch_size = 0\n",
            "discovery.batch_size",
            7,
            14,
            "7 | batch_size = 0",
        ),
        ("bogus = 3\n", "bogus", 6, 1, "6 | bogus = 3"),
    ] {
        let text = format!("{base}{tail}");
        let e = DiscoveryScenario::parse(&text, "d.toml").unwrap_err();
        assert_eq!((e.field.as_str(), e.line), (field, Some(line)), "{e}");
        let shown = e.to_string();
        for want in [
            format!("d.toml line {line}: {field}: "),
            format!("at line {line}, column {column}:"),
            quoted.to_string(),
        ] {
            assert!(shown.contains(&want), "missing {want:?} in\n{shown}");
        }
    }
    // Through the CLI, from a file: the path is named.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("disc.toml");
    std::fs::write(&path, format!("{base}[latency]\nmedian_ms = 1e300\n")).unwrap();
    let path = path.to_str().unwrap();
    let out = selcoord(&["simulate", "--scenario", path]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    for want in [
        format!("{path} line 7: latency.median_ms: "),
        "column 13:".to_string(),
        "7 | median_ms = 1e300".to_string(),
        "  |             ^^^^^".to_string(),
    ] {
        assert!(err.contains(&want), "missing {want:?} in\n{err}");
    }
}

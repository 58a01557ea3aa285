//! The files `selcoord simulate` writes (`--json`, `--plot`): a regular file is replaced whole
//! or not at all, a FIFO or stdout is written directly, and a dangling symbolic link is
//! refused.

#![cfg(unix)]

#[path = "support/owner.rs"]
mod owner;

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
        // The error names the file given, and no other.
        assert_eq!(err.matches(name).count(), 1, "{option}: {err}");
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

/// A report written over an earlier file keeps that file's permissions: the new report takes
/// its place with its mode, not the mode a new file would get.
#[test]
fn a_replaced_report_keeps_the_mode_of_the_file_it_replaces() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    for (option, name, mode) in [
        ("--json", "report.json", 0o640),
        ("--plot", "plot.svg", 0o604),
    ] {
        let path = dir.path().join(name);
        std::fs::write(&path, "earlier report\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        simulate_into("recovery", "random", option, &path);
        let text = std::fs::read_to_string(&path).unwrap();
        assert_ne!(text, "earlier report\n", "{option}: not replaced");
        let got = std::fs::metadata(&path).unwrap().permissions().mode() & 0o7777;
        assert_eq!(
            got, mode,
            "{option}: mode {got:o}, the earlier file had {mode:o}"
        );
    }
    assert_eq!(names_in(dir.path()), ["plot.svg", "report.json"]);
}

/// A report written over an earlier file keeps its owner and group, where the writer may set
/// them: run as root (as CI runs) over a file of another user, the new report is that user's.
#[test]
fn a_replaced_report_keeps_the_owner_of_the_file_it_replaces() {
    use std::os::unix::fs::MetadataExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("report.json");
    std::fs::write(&path, "earlier report\n").unwrap();
    let Some((uid, gid)) = owner::give_to_another_user(&path) else {
        return;
    };
    simulate_into("recovery", "random", "--json", &path);
    assert_ne!(std::fs::read_to_string(&path).unwrap(), "earlier report\n");
    let meta = std::fs::metadata(&path).unwrap();
    assert_eq!((meta.uid(), meta.gid()), (uid, gid));
}

/// A directory given as the report's path is refused before the run, naming the option.
#[test]
fn a_directory_as_the_report_path_is_refused_before_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let sub = dir.path().join("reports.svg");
    std::fs::create_dir(&sub).unwrap();
    for option in ["--json", "--plot"] {
        let out = selcoord(&[
            "simulate",
            "--scenario",
            "recovery",
            "--policies",
            "random",
            option,
            sub.to_str().unwrap(),
        ]);
        let err = stderr(&out);
        assert!(!out.status.success(), "{option}: accepted: {err}");
        assert!(out.stdout.is_empty(), "{option}: ran first");
        assert!(
            err.contains(option) && err.contains("directory"),
            "{option}: {err}"
        );
    }
    assert_eq!(names_in(&sub), Vec::<String>::new());
    assert_eq!(names_in(dir.path()), ["reports.svg"]);
}

/// Files next to the report, whatever their names, are left as they were.
#[test]
fn files_beside_the_report_are_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let others = ["report.json.tmp", ".report.json.tmp", "report.json~"];
    for name in others {
        std::fs::write(dir.path().join(name), name).unwrap();
    }
    let path = dir.path().join("report.json");
    simulate_into("recovery", "random", "--json", &path);
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).expect("the report");
    assert!(v["policies"].is_array(), "{v}");
    for name in others {
        assert_eq!(
            std::fs::read_to_string(dir.path().join(name)).unwrap(),
            name,
            "{name} was changed"
        );
    }
    assert_eq!(names_in(dir.path()).len(), others.len() + 1);
}

/// Runs `simulate --scenario <scenario> --policies <policies> <option> <path>` and checks
/// that it succeeded.
fn simulate_into(scenario: &str, policies: &str, option: &str, path: &Path) {
    let out = selcoord(&[
        "simulate",
        "--scenario",
        scenario,
        "--policies",
        policies,
        option,
        path.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{option} {}: {}",
        path.display(),
        stderr(&out)
    );
}

/// The text of every `<text>` element of an SVG, trimmed.
fn svg_texts(svg: &str) -> Vec<String> {
    svg.split("<text")
        .skip(1)
        .filter_map(|t| {
            let body = &t[t.find('>')? + 1..];
            Some(body[..body.find("</text>")?].trim().to_string())
        })
        .collect()
}

/// The points of every data line of a plot (a polyline drawn 2 px wide, longer than a legend
/// sample), in drawing order.
fn svg_lines(svg: &str) -> Vec<Vec<(f64, f64)>> {
    svg.split("<polyline")
        .skip(1)
        .filter_map(|p| {
            let tag = &p[..p.find('>')?];
            if !tag.contains("stroke-width=\"2\"") {
                return None;
            }
            let points = &tag[tag.find("points=\"")? + 8..];
            let points = &points[..points.find('"')?];
            let line: Vec<(f64, f64)> = points
                .split_whitespace()
                .map(|xy| {
                    let (x, y) = xy.split_once(',').unwrap();
                    (x.parse().unwrap(), y.parse().unwrap())
                })
                .collect();
            (line.len() > 2).then_some(line)
        })
        .collect()
}

/// `--plot` (a `.SVG` name is an SVG file too) draws, per policy, the traffic share of each
/// candidate over time, the shares of a second adding up to the whole, and one panel of each
/// policy's error rate.
#[test]
fn the_plot_draws_each_policys_shares_and_its_error_rate() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("plot.SVG");
    simulate_into("recovery", "coordinator,random", "--plot", &path);
    let svg = std::fs::read_to_string(&path).unwrap();
    assert!(svg.starts_with("<svg"), "{}", &svg[..svg.len().min(200)]);
    let texts = svg_texts(&svg);
    let count = |s: &str| texts.iter().filter(|t| *t == s).count();
    for title in [
        "coordinator: traffic share per candidate",
        "random: traffic share per candidate",
        "error rate per policy (failed / finished requests)",
    ] {
        assert_eq!(count(title), 1, "{title} in {texts:?}");
    }
    // Each share panel's legend names the five servers; the error panel's, both policies.
    for k in 0..5 {
        assert_eq!(count(&format!("server-{k}")), 2, "{texts:?}");
    }
    assert_eq!(count("coordinator"), 1, "{texts:?}");
    assert_eq!(count("random"), 1, "{texts:?}");
    // Five share lines per policy, then one error-rate line per policy.
    let lines = svg_lines(&svg);
    assert_eq!(lines.len(), 2 * 5 + 2, "{lines:?}");
    for panel in lines[..10].chunks(5) {
        // Every second had attempts: each line has a point per second, at the same places,
        // and their shares add up to 1, the same height everywhere (to a pixel per line).
        let n = panel[0].len();
        assert!(n >= 60, "{n} points");
        let heights: Vec<f64> = (0..n)
            .map(|i| {
                panel
                    .iter()
                    .map(|line| {
                        assert_eq!(line.len(), n);
                        assert_eq!(line[i].0, panel[0][i].0);
                        line[i].1
                    })
                    .sum()
            })
            .collect();
        let (lo, hi) = heights
            .iter()
            .fold((f64::MAX, f64::MIN), |(lo, hi), &h| (lo.min(h), hi.max(h)));
        assert!(
            hi - lo <= 5.0,
            "the shares do not add up alike: {heights:?}"
        );
    }
    assert_eq!(names_in(dir.path()), ["plot.SVG"]);
}

/// Past 32 candidates the plot follows only those the timeline names, under their own ids;
/// with none named it says why a panel has no lines. A run without errors still plots, on an
/// error-rate scale that shows small rates.
#[test]
fn a_plot_of_many_candidates_follows_those_the_timeline_names() {
    let dir = tempfile::tempdir().unwrap();
    let base = "name = \"many\"\n[workload]\nloop = \"open\"\nrate_per_s = 50.0\n\
                duration_s = 5.0\n[[candidates]]\nid = \"c\"\ncount = 40\nsuccess = 1.0\n";
    for (name, timeline, want) in [
        ("plain", "", None),
        (
            "named",
            "[[timeline]]\nat_s = 2.0\naction = \"degrade\"\ncandidate = \"c-37\"\nsuccess = 1.0\n",
            Some("c-37"),
        ),
    ] {
        let scenario = dir.path().join(format!("{name}.toml"));
        std::fs::write(&scenario, format!("{base}{timeline}")).unwrap();
        let plot = dir.path().join(format!("{name}.svg"));
        simulate_into(scenario.to_str().unwrap(), "random", "--plot", &plot);
        let svg = std::fs::read_to_string(&plot).unwrap();
        let texts = svg_texts(&svg);
        let note = texts.iter().any(|t| t.starts_with("no share series"));
        let lines = svg_lines(&svg);
        match want {
            None => {
                assert!(note, "{name}: {texts:?}");
                // The error-rate line alone.
                assert_eq!(lines.len(), 1, "{name}");
            }
            Some(id) => {
                assert!(!note, "{name}: {texts:?}");
                assert!(texts.iter().any(|t| t == id), "{name}: {texts:?}");
                assert!(!texts.iter().any(|t| t == "c-0"), "{name}: {texts:?}");
                assert_eq!(lines.len(), 2, "{name}");
            }
        }
        // No error anywhere: the error-rate axis still reads small rates.
        let small_tick = texts
            .iter()
            .skip_while(|t| *t != "error rate")
            .filter_map(|t| t.parse::<f64>().ok())
            .any(|x| x > 0.0 && x < 0.05);
        assert!(small_tick, "{name}: {texts:?}");
        // Every point lies on the drawing (one row of two panels, 1200 x 320).
        assert!(
            svg.starts_with("<svg width=\"1200\" height=\"320\""),
            "{name}"
        );
        for line in &lines {
            for &(x, y) in line {
                assert!(
                    (0.0..=1200.0).contains(&x) && (0.0..=320.0).contains(&y),
                    "{name}: ({x}, {y})"
                );
            }
        }
    }
}

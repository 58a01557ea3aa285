//! End to end against a real Prometheus: `selcoord demo`, running a config with two live A/B
//! arms and a shadow policy (`examples/configs/demo-arms.toml`) and adding its candidates
//! through the discovery actor (`--discovery`), serves its metrics on a loopback port, a
//! Prometheus server scrapes it every second, then
//!
//! 1. every panel query of every dashboard under `dashboards/` evaluates to a non-empty result
//!    through Prometheus's HTTP API,
//! 2. the `$candidate` variable lists every candidate, those that never won included, and the
//!    winner's-probability panels leave out grants that were no draw (checked on a second demo,
//!    `--metrics-name e2e-one-choice`, whose every grant is an only choice because its other
//!    candidate is priced above the price filter's maximum), and
//! 3. `promtool check metrics` finds no problem in the exposition.
//!
//! Without Prometheus, `rate_panels_are_per_second` checks that every panel plotting only
//! rates has a per-second unit.
//!
//! Built with the `fleet` feature, the demo also shares with a fleet (`--fleet`), through a
//! real `nats-server` when one is on PATH (else at a loopback port nobody serves: it then runs
//! alone, and the fleet series are there all the same); without the feature the fleet panels
//! are left out of (1).
//!
//! Needs `prometheus` and `promtool` on PATH (Debian package `prometheus`; `.ci/run` installs
//! it). Without them the test is skipped with a loud message, except under `CI=true`, where it
//! fails.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// A child process killed (and reaped) when dropped, so no server outlives the test.
struct Guard {
    name: &'static str,
    child: Child,
}

impl Guard {
    fn spawn(name: &'static str, cmd: &mut Command, log: &Path) -> Guard {
        let out = std::fs::File::create(log).unwrap();
        let err = out.try_clone().unwrap();
        let child = cmd
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {name}: {e}"));
        Guard { name, child }
    }

    fn assert_running(&mut self, log: &Path) {
        if let Ok(Some(status)) = self.child.try_wait() {
            panic!(
                "{} exited early ({status}); its output:\n{}",
                self.name,
                std::fs::read_to_string(log).unwrap_or_default()
            );
        }
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn tool_present(tool: &str) -> bool {
    Command::new(tool)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// A loopback port nobody listens on now (bound, then released).
fn free_port() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap()
}

/// A plain HTTP/1.0 GET (HTTP/1.0 keeps servers from chunking the body): (status, body).
fn http_get(addr: SocketAddr, path_and_query: &str) -> std::io::Result<(u16, String)> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(
        s,
        "GET {path_and_query} HTTP/1.0\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)?;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    Ok((status, body.to_string()))
}

fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Waits until `check` returns `Some`, or panics with `what` after `timeout`.
fn wait_for<T>(what: &str, timeout: Duration, mut check: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = check() {
            return v;
        }
        assert!(start.elapsed() < timeout, "timed out waiting for {what}");
        // Real time: the demo and Prometheus are other processes, on the wall clock.
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// Every panel query of a dashboard (rows' nested panels included), with its panel title.
fn panel_queries(dashboard: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for p in panels(dashboard) {
        for t in p["targets"].as_array().into_iter().flatten() {
            if let Some(expr) = t["expr"].as_str() {
                let title = p["title"].as_str().unwrap_or("?").to_string();
                out.push((title, expr.to_string()));
            }
        }
    }
    out
}

/// The demo's `--metrics-name`: its series carry `coordinator="e2e"`, and the panels are
/// queried for that coordinator, so each shows it follows the coordinator selector.
const DEMO_NAME: &str = "e2e";

/// The second demo's `--metrics-name`: it runs [`ONE_CHOICE_SCENARIO`].
const ONE_CHOICE_NAME: &str = "e2e-one-choice";

/// Two candidates, `pricey` above the price filter's maximum (which is never ignored), so
/// `cheap` wins every grant as an only choice and `pricey` never wins.
const ONE_CHOICE_SCENARIO: &str = r#"
name = "one-choice"
description = "two candidates, one priced above the price filter's maximum: it never wins"

[workload]
loop = "closed"
workers = 2
operations = 1
think_ms = 20.0

[coordinator]
preset = "default"
price = { max = 1.0, ignore_max_if_none_pass = false }

[[candidates]]
id = "cheap"
success = 1.0
duration_ms = 5.0

[[candidates]]
id = "pricey"
success = 1.0
price = 10.0
duration_ms = 5.0
"#;

/// Replaces Grafana's variables with what Grafana would send for the demo's coordinator, "All"
/// candidates and arms, and a 1 s scrape.
fn substitute(expr: &str) -> String {
    substitute_for(expr, DEMO_NAME)
}

/// [`substitute`] for the coordinator named `coordinator`.
fn substitute_for(expr: &str, coordinator: &str) -> String {
    expr.replace("${coordinator}", coordinator)
        .replace("$coordinator", coordinator)
        .replace("${candidate}", ".*")
        .replace("$candidate", ".*")
        .replace("${arm}", ".*")
        .replace("$arm", ".*")
        .replace("$__rate_interval", "5s")
        .replace("$__interval", "1s")
        .replace("$__range", "1m")
}

/// The demo's A/B config: two arms and a shadow, so the per-arm and shadow panels have data.
fn demo_arms_config() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples/configs/demo-arms.toml")
        .display()
        .to_string()
}

/// The series selector and label of a template variable's `label_values(SELECTOR, LABEL)`
/// query, `None` when the dashboard has no such variable.
fn label_values_variable(dashboard: &Value, name: &str) -> Option<(String, String)> {
    let var = dashboard["templating"]["list"]
        .as_array()?
        .iter()
        .find(|v| v["name"] == name)?;
    let query = var["query"]["query"]
        .as_str()
        .or(var["query"].as_str())
        .or(var["definition"].as_str())?;
    let inner = query
        .trim()
        .strip_prefix("label_values(")?
        .strip_suffix(')')?;
    let (selector, label) = inner.rsplit_once(',')?;
    Some((selector.trim().to_string(), label.trim().to_string()))
}

/// The values of `label` on the series `selector` matches, through Prometheus's HTTP API (as
/// Grafana resolves a `label_values` variable).
fn label_values(prom: SocketAddr, label: &str, selector: &str) -> Vec<String> {
    let url = format!(
        "/api/v1/label/{label}/values?match[]={}",
        urlencode(selector)
    );
    let (status, body) = http_get(prom, &url).unwrap();
    let v: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    assert!(
        status == 200 && v["status"] == "success",
        "label values of {label} on {selector} failed: {body}"
    );
    v["data"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|a| a.as_str().map(String::from))
        .collect()
}

/// An instant query's result vector: (labels, value as Prometheus writes it, e.g. "NaN").
fn instant_query(prom: SocketAddr, query: &str) -> Vec<(Value, String)> {
    let url = format!("/api/v1/query?query={}", urlencode(query));
    let (status, body) = http_get(prom, &url).unwrap();
    let v: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    assert!(
        status == 200 && v["status"] == "success",
        "query {query:?} failed: {body}"
    );
    v["data"]["result"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            let value = r["value"][1].as_str().unwrap_or("").to_string();
            (r["metric"].clone(), value)
        })
        .collect()
}

/// Every panel of a dashboard (rows' nested panels included).
fn panels(dashboard: &Value) -> Vec<&Value> {
    let mut out = Vec::new();
    let mut stack = vec![&dashboard["panels"]];
    while let Some(panels) = stack.pop() {
        for p in panels.as_array().into_iter().flatten() {
            stack.push(&p["panels"]);
            out.push(p);
        }
    }
    out
}

fn dashboards() -> Vec<(PathBuf, Value)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("dashboards");
    let mut out: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .map(|p| {
            let v = serde_json::from_str(&std::fs::read_to_string(&p).unwrap())
                .unwrap_or_else(|e| panic!("{}: not JSON: {e}", p.display()));
            (p, v)
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    assert!(!out.is_empty(), "no dashboard under {}", dir.display());
    out
}

#[test]
fn demo_metrics_pass_promtool_and_every_dashboard_query_has_data() {
    let ci = std::env::var("CI").is_ok_and(|v| v == "true");
    if !(tool_present("prometheus") && tool_present("promtool")) {
        assert!(
            !ci,
            "CI=true but `prometheus`/`promtool` is not on PATH: .ci/run must install the \
             Debian package `prometheus`"
        );
        // Written to the stderr handle, not with eprintln!, so the test harness does not
        // capture it: a skip must be seen.
        let _ = writeln!(
            std::io::stderr(),
            "\n\n*** SKIPPED prometheus_e2e: `prometheus`/`promtool` not found on PATH. \
             Install it (apt-get install -y prometheus) to run this test. ***\n\n"
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();

    // The fleet's NATS server, when the demo shares (feature `fleet`).
    let nats_port = free_port().port();
    let _nats = (cfg!(feature = "fleet") && tool_present("nats-server")).then(|| {
        Guard::spawn(
            "nats-server",
            Command::new("nats-server").args(["-a", "127.0.0.1", "-p", &nats_port.to_string()]),
            &dir.path().join("nats.log"),
        )
    });

    // The demo, serving metrics on a free loopback port.
    let metrics_addr = free_port();
    let demo_log = dir.path().join("demo.log");
    let mut demo_cmd = Command::new(env!("CARGO_BIN_EXE_selcoord"));
    demo_cmd.args([
        "demo",
        "--listen",
        &metrics_addr.to_string(),
        "--duration",
        "120",
        "--config",
        &demo_arms_config(),
        // Candidates through the discovery actor, so the Discovery row has data.
        "--discovery",
        "--metrics-name",
        DEMO_NAME,
        // A snapshot store, so the snapshot panel has data.
        "--snapshot",
        dir.path().join("demo-snapshot.json").to_str().unwrap(),
        "--snapshot-every",
        "1",
    ]);
    if cfg!(feature = "fleet") {
        demo_cmd.args(["--fleet", &format!("nats://127.0.0.1:{nats_port}")]);
    }
    let mut demo = Guard::spawn("selcoord demo", &mut demo_cmd, &demo_log);
    wait_for("the demo's /metrics", Duration::from_secs(30), || {
        demo.assert_running(&demo_log);
        match http_get(metrics_addr, "/metrics") {
            Ok((200, body)) if body.contains("selcoord_decisions_total") => Some(()),
            _ => None,
        }
    });

    // The second demo, whose every grant is an only choice and one of whose candidates never
    // wins.
    let one_choice_scenario = dir.path().join("one-choice.toml");
    std::fs::write(&one_choice_scenario, ONE_CHOICE_SCENARIO).unwrap();
    let one_choice_addr = free_port();
    let one_choice_log = dir.path().join("demo-one-choice.log");
    let mut one_choice = Guard::spawn(
        "selcoord demo (one choice)",
        Command::new(env!("CARGO_BIN_EXE_selcoord")).args([
            "demo",
            "--scenario",
            one_choice_scenario.to_str().unwrap(),
            "--listen",
            &one_choice_addr.to_string(),
            "--duration",
            "120",
            "--metrics-name",
            ONE_CHOICE_NAME,
        ]),
        &one_choice_log,
    );
    wait_for(
        "the one-choice demo's /metrics",
        Duration::from_secs(30),
        || {
            one_choice.assert_running(&one_choice_log);
            match http_get(one_choice_addr, "/metrics") {
                Ok((200, body)) if body.contains("selcoord_decisions_total") => Some(()),
                _ => None,
            }
        },
    );

    // A Prometheus server scraping the demo every second.
    let prom_addr = free_port();
    let config = dir.path().join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n  \
             - job_name: selcoord\n    static_configs:\n      - targets: ['{metrics_addr}', \
             '{one_choice_addr}']\n"
        ),
    )
    .unwrap();
    let prom_log = dir.path().join("prometheus.log");
    let mut prometheus = Guard::spawn(
        "prometheus",
        Command::new("prometheus").args([
            &format!("--config.file={}", config.display()),
            &format!("--storage.tsdb.path={}", dir.path().join("data").display()),
            &format!("--web.listen-address={prom_addr}"),
        ]),
        &prom_log,
    );
    wait_for(
        "Prometheus to scrape the demo",
        Duration::from_secs(60),
        || {
            prometheus.assert_running(&prom_log);
            demo.assert_running(&demo_log);
            let (status, body) = http_get(prom_addr, "/api/v1/targets").ok()?;
            let v: Value = serde_json::from_str(&body).ok()?;
            let targets = v["data"]["activeTargets"].as_array()?;
            let up =
                status == 200 && targets.len() == 2 && targets.iter().all(|t| t["health"] == "up");
            up.then_some(())
        },
    );

    // (1) every panel query, through Prometheus's HTTP API. Rates need a few scrapes, so each
    // query may be retried until the deadline.
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut checked = 0usize;
    let mut nan_only = 0usize;
    let mut empty = Vec::new();
    for (path, dashboard) in dashboards() {
        // The variables' own queries must list the coordinator, candidates and both arms too.
        let (_, body) = http_get(prom_addr, "/api/v1/label/coordinator/values").unwrap();
        assert!(body.contains(&format!("\"{DEMO_NAME}\"")), "{body}");
        if let Some((selector, label)) = label_values_variable(&dashboard, "candidate") {
            check_candidate_variable(prom_addr, &path, &selector, &label);
        }
        check_winner_probability_panels(prom_addr, &path, &dashboard, deadline);
        let arms = wait_for("both arms' label values", Duration::from_secs(30), || {
            let (_, body) = http_get(
                prom_addr,
                &format!(
                    "/api/v1/label/arm/values?match[]={}",
                    urlencode(&format!(
                        "selcoord_decisions_total{{coordinator=\"{DEMO_NAME}\"}}"
                    ))
                ),
            )
            .ok()?;
            let v: Value = serde_json::from_str(&body).ok()?;
            let arms: Vec<String> = v["data"]
                .as_array()?
                .iter()
                .filter_map(|a| a.as_str().map(String::from))
                .collect();
            (arms.len() == 2).then_some(arms)
        });
        assert_eq!(arms, ["default", "lassie"]);
        for (title, expr) in panel_queries(&dashboard) {
            if !cfg!(feature = "fleet") && expr.contains("selcoord_fleet_") {
                println!("not checked (built without the `fleet` feature): {title}: {expr}");
                continue;
            }
            let query = substitute(&expr);
            let url = format!("/api/v1/query?query={}", urlencode(&query));
            let mut last = String::new();
            let has_data = loop {
                prometheus.assert_running(&prom_log);
                let (status, body) = http_get(prom_addr, &url).unwrap();
                let v: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
                assert!(
                    status == 200 && v["status"] == "success",
                    "{}: panel {title:?}: query {query:?} failed: {body}",
                    path.display()
                );
                if let Some(r) = v["data"]["result"].as_array().filter(|r| !r.is_empty()) {
                    if r.iter().all(|x| x["value"][1] == "NaN") {
                        nan_only += 1;
                    }
                    break true;
                }
                last = body;
                if Instant::now() > deadline {
                    break false;
                }
                // Real time: the next value comes with Prometheus's next real scrape.
                std::thread::sleep(Duration::from_millis(500));
            };
            checked += 1;
            if !has_data {
                empty.push(format!("{title}: {query} -> {last}"));
            }
        }
    }
    // (2) promtool's lint of the exposition, taken now that every series has appeared.
    demo.assert_running(&demo_log);
    let (_, exposition) = http_get(metrics_addr, "/metrics").unwrap();
    let exposition_path = dir.path().join("exposition.txt");
    std::fs::write(&exposition_path, &exposition).unwrap();
    let promtool = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::fs::File::open(&exposition_path).unwrap())
        .output()
        .unwrap();
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&promtool.stdout),
        String::from_utf8_lossy(&promtool.stderr)
    );
    println!(
        "promtool check metrics: exit {}, {} bytes of exposition, output: {:?}",
        promtool.status,
        exposition.len(),
        report.trim()
    );
    assert!(
        promtool.status.success() && report.trim().is_empty(),
        "promtool check metrics found problems:\n{report}"
    );

    println!(
        "dashboard queries checked through Prometheus: {checked} ({nan_only} of them NaN only, \
         e.g. a quantile of an idle histogram)"
    );
    assert!(
        empty.is_empty(),
        "{} of {checked} panel queries returned no data:\n{}",
        empty.len(),
        empty.join("\n")
    );
    drop(prometheus);
    drop(demo);
    drop(one_choice);
}

/// The `$candidate` variable (`label_values(selector, label)`) lists, for each demo, every
/// candidate that won a grant and, for the one-choice demo, `pricey`, which never won (the
/// decisions counter has no series of it, so a variable sourced there leaves it out).
fn check_candidate_variable(prom: SocketAddr, path: &Path, selector: &str, label: &str) {
    assert_eq!(
        label,
        "candidate",
        "{}: $candidate lists {label}",
        path.display()
    );
    for (coordinator, must_list) in [
        (DEMO_NAME, &[][..]),
        (ONE_CHOICE_NAME, &["cheap", "pricey"][..]),
    ] {
        let winners = wait_for("candidates with grants", Duration::from_secs(30), || {
            let w = label_values(
                prom,
                "candidate",
                &format!("selcoord_decisions_total{{coordinator=\"{coordinator}\"}}"),
            );
            (!w.is_empty()).then_some(w)
        });
        if coordinator == ONE_CHOICE_NAME {
            assert_eq!(
                winners,
                ["cheap"],
                "the one-choice demo's `pricey` must never win, or it checks nothing"
            );
        }
        let query = substitute_for(selector, coordinator);
        // The gauges appear at the coordinator's first tick, the counters at the first grant.
        let until = Instant::now() + Duration::from_secs(30);
        loop {
            let listed = label_values(prom, label, &query);
            let missing: Vec<&str> = winners
                .iter()
                .map(String::as_str)
                .chain(must_list.iter().copied())
                .filter(|c| !listed.iter().any(|l| l == c))
                .collect();
            if missing.is_empty() {
                println!("$candidate for {coordinator} ({query}): {listed:?}");
                break;
            }
            assert!(
                Instant::now() < until,
                "{}: the $candidate variable ({query}) leaves out {missing:?} (a candidate \
                 that never won must be listed too); it lists {listed:?}",
                path.display()
            );
            // Real time: the next value comes with Prometheus's next real scrape.
            std::thread::sleep(Duration::from_millis(500));
        }
    }
}

/// The panels of the winner's probability keep to real draws: for the one-choice demo, whose
/// grants are all only choices (probability 1), they show nothing; for the main demo, with
/// draws among several candidates, they show a value.
fn check_winner_probability_panels(
    prom: SocketAddr,
    path: &Path,
    dashboard: &Value,
    deadline: Instant,
) {
    let queries: Vec<(String, String)> = panel_queries(dashboard)
        .into_iter()
        .filter(|(_, expr)| expr.contains("selcoord_winner_probability"))
        .collect();
    if queries.is_empty() {
        return;
    }
    // Grants of the one-choice demo in the window the panels read, so an unfiltered panel
    // would show their probability.
    wait_for(
        "the one-choice demo's grants in Prometheus",
        Duration::from_secs(30),
        || {
            let r = instant_query(
                prom,
                &format!(
                    "sum(rate(selcoord_winner_probability_count{{coordinator=\"{ONE_CHOICE_NAME}\"}}[5s])) > 0"
                ),
            );
            (!r.is_empty()).then_some(())
        },
    );
    for (title, expr) in &queries {
        let query = substitute_for(expr, ONE_CHOICE_NAME);
        let shown: Vec<_> = instant_query(prom, &query)
            .into_iter()
            .filter(|(_, v)| v != "NaN")
            .collect();
        assert!(
            shown.is_empty(),
            "{}: panel {title:?} shows the one-choice demo's only-choice grants (always \
             probability 1) as if drawn: {query} -> {shown:?}",
            path.display()
        );
        let query = substitute(expr);
        loop {
            let r = instant_query(prom, &query);
            if r.iter()
                .any(|(_, v)| v.parse::<f64>().is_ok_and(|x| x.is_finite()))
            {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{}: panel {title:?} shows no value for the demo's draws: {query} -> {r:?}",
                path.display()
            );
            // Real time: the next value comes with Prometheus's next real scrape.
            std::thread::sleep(Duration::from_millis(500));
        }
    }
}

/// Every panel whose every query is a per-second rate (no ratio, no quantile) says so in its
/// unit, as the dashboard's rate panels do: `ops` or `reqps`.
#[test]
fn rate_panels_are_per_second() {
    let mut wrong = Vec::new();
    for (path, dashboard) in dashboards() {
        for p in panels(&dashboard) {
            let exprs: Vec<&str> = p["targets"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|t| t["expr"].as_str())
                .collect();
            let per_second = |e: &&str| {
                e.contains("rate(") && !e.contains("histogram_quantile") && !e.contains(" / ")
            };
            if exprs.is_empty() || !exprs.iter().all(per_second) {
                continue;
            }
            let unit = p["fieldConfig"]["defaults"]["unit"].as_str().unwrap_or("");
            if !matches!(unit, "ops" | "reqps") {
                wrong.push(format!(
                    "{}: {:?} plots rates with unit {unit:?}",
                    path.display(),
                    p["title"].as_str().unwrap_or("?")
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The demo without Prometheus: Ctrl-C (SIGINT) stops it cleanly, and the decision log holds
/// the sampled share of the decisions as JSON lines, each a whole `DecisionRecord`.
#[test]
fn demo_stops_on_ctrl_c_and_writes_sampled_decision_records() {
    let dir = tempfile::tempdir().unwrap();
    let log_path = dir.path().join("decisions.jsonl");
    let out_path = dir.path().join("demo.log");
    let metrics_addr = free_port();
    let mut demo = Guard::spawn(
        "selcoord demo",
        Command::new(env!("CARGO_BIN_EXE_selcoord")).args([
            "demo",
            "--listen",
            &metrics_addr.to_string(),
            "--decision-log",
            log_path.to_str().unwrap(),
            "--sample-rate",
            "0.5",
            "--speed",
            "2",
        ]),
        &out_path,
    );
    wait_for("decisions in the log", Duration::from_secs(30), || {
        demo.assert_running(&out_path);
        let n = std::fs::metadata(&log_path).map(|m| m.len()).unwrap_or(0);
        // Past the writer's buffer many times: a record is about 2 KB, so over a hundred
        // records and twice as many decisions (the check below wants at least 100).
        (n > 256 * 1024).then_some(())
    });
    let interrupted = Command::new("kill")
        .args(["-INT", &demo.child.id().to_string()])
        .status()
        .unwrap();
    assert!(interrupted.success());
    let status = wait_for("the demo to exit", Duration::from_secs(20), || {
        demo.child.try_wait().unwrap()
    });
    let output = std::fs::read_to_string(&out_path).unwrap();
    assert!(
        status.success(),
        "demo failed on Ctrl-C: {status}\n{output}"
    );
    let summary = output
        .lines()
        .find(|l| l.starts_with("selcoord demo: stopped"))
        .unwrap_or_else(|| panic!("no summary line:\n{output}"));
    // "... : N decisions, ... R decision records in FILE"
    let number_before = |word: &str| -> u64 {
        let words: Vec<&str> = summary.split_whitespace().collect();
        let i = words
            .iter()
            .position(|w| w.trim_end_matches(',') == word)
            .unwrap();
        words[i - 1].parse().unwrap()
    };
    let decisions = number_before("decisions");
    let records = number_before("decision");
    let text = std::fs::read_to_string(&log_path).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len() as u64, records, "{summary}");
    for line in &lines {
        let r: selection_coordinator::DecisionRecord = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("not a decision record ({e}): {line}"));
        assert!(r.winner.is_some() && !r.candidates.is_empty(), "{line}");
    }
    let share = records as f64 / decisions as f64;
    println!("{summary}\nrecorded share {share:.3} of {decisions} decisions at --sample-rate 0.5");
    assert!(decisions >= 100, "{summary}");
    assert!((0.45..=0.55).contains(&share), "{summary}");
}

/// The demo's hot reload, without Prometheus: an invalid rewrite of its `--config` file is
/// refused with the bad field named and the demo keeps running; a valid rewrite is applied.
#[test]
fn demo_reloads_its_config_file_and_refuses_an_invalid_one() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("arms.toml");
    let original = std::fs::read_to_string(demo_arms_config()).unwrap();
    std::fs::write(&config, &original).unwrap();
    let metrics_addr = free_port();
    let log = dir.path().join("demo.log");
    let mut demo = Guard::spawn(
        "selcoord demo",
        Command::new(env!("CARGO_BIN_EXE_selcoord")).args([
            "demo",
            "--listen",
            &metrics_addr.to_string(),
            "--duration",
            "60",
            "--config",
            &config.display().to_string(),
        ]),
        &log,
    );
    // Decisions under both arms mean the live loop (and the watcher, spawned before it) run.
    wait_for("decisions under both arms", Duration::from_secs(30), || {
        demo.assert_running(&log);
        match http_get(metrics_addr, "/metrics") {
            Ok((200, body))
                if body.contains("arm=\"default\"") && body.contains("arm=\"lassie\"") =>
            {
                Some(())
            }
            _ => None,
        }
    });
    let hup = |demo: &Guard| {
        let status = Command::new("kill")
            .args(["-HUP", &demo.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    };
    let log_text = || std::fs::read_to_string(&log).unwrap_or_default();

    // A negative share: refused, with the field's path; the demo runs on.
    let bad = original.replacen("share = 1.0", "share = -2.0", 1);
    assert_ne!(bad, original);
    std::fs::write(&config, &bad).unwrap();
    hup(&demo);
    wait_for(
        "the refusal naming arms[0].share",
        Duration::from_secs(10),
        || {
            demo.assert_running(&log);
            log_text().contains("arms[0].share").then_some(())
        },
    );
    assert!(!log_text().contains("config reloaded"), "{}", log_text());
    // Real time: a while for the demo (another process) to wrongly apply the refused file.
    std::thread::sleep(Duration::from_millis(300));
    demo.assert_running(&log);
    let (status, _) = http_get(metrics_addr, "/metrics").unwrap();
    assert_eq!(status, 200);

    // A valid rewrite (one arm renamed) is applied, found by the modification-time poll.
    let good = original.replace("name = \"lassie\"", "name = \"lassie-2\"");
    std::fs::write(&config, &good).unwrap();
    wait_for("the reload", Duration::from_secs(10), || {
        demo.assert_running(&log);
        log_text().contains("config reloaded").then_some(())
    });
    assert!(
        log_text().contains("(arms: default, lassie-2)"),
        "{}",
        log_text()
    );
    wait_for(
        "decisions under the renamed arm",
        Duration::from_secs(10),
        || match http_get(metrics_addr, "/metrics") {
            Ok((200, body)) if body.contains("arm=\"lassie-2\"") => Some(()),
            _ => None,
        },
    );
    drop(demo);
}

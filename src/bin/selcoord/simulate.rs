//! `selcoord simulate`: run a scenario in virtual time with several policies side by side.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Duration;

use crate::heartbeat::Heartbeat;
use selection_coordinator::discovery::sim::{self as discovery_sim, DiscoveryScenario};
use selection_coordinator::sim::{
    plot_svg, simulate_fleet, simulate_seeds, CoordinatorSpec, FleetShare, FleetSpec, PolicySpec,
    Scenario, Seeds, BUILTIN,
};

/// The most seeds fleet mode and a discovery scenario run at once: they keep every seed's
/// figures (and list the seeds), where one scenario's runs fold into running means.
const MAX_KEPT_SEEDS: u64 = 10_000;

/// The most seeds one run takes: a typo's extra digits would otherwise run for days.
const MAX_SEEDS: u64 = 1_000_000;

/// Refuses more seeds than `mode` keeps, before any allocation.
fn kept_seeds(args: &Args, mode: &str) -> Result<Vec<u64>, String> {
    if args.seeds > MAX_KEPT_SEEDS {
        return Err(format!(
            "--seeds {}: {mode} keeps every seed's figures, so it runs at most {MAX_KEPT_SEEDS} \
             seeds at once; lower --seeds (and run more with a later --seed)",
            args.seeds
        ));
    }
    Ok((0..args.seeds).map(|i| args.seed.wrapping_add(i)).collect())
}

/// Parses the `--policies` names (trimmed), refusing one named twice: it would only print
/// the same row again.
pub(crate) fn parse_policies(names: &[String]) -> Result<Vec<PolicySpec>, String> {
    let mut specs: Vec<PolicySpec> = Vec::with_capacity(names.len());
    for name in names {
        if name.trim().is_empty() {
            return Err(
                "--policies has an empty name (two commas in a row, or one at an end): list \
                 policy names separated by commas"
                    .into(),
            );
        }
        let spec = PolicySpec::parse(name.trim())?;
        if specs.iter().any(|s| s.label() == spec.label()) {
            return Err(format!(
                "--policies names `{}` twice: each policy runs once; drop the repeat",
                name.trim()
            ));
        }
        specs.push(spec);
    }
    Ok(specs)
}

/// Arguments of `selcoord simulate`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// A built-in scenario name (`--list` shows them all: mongo-overload, recovery,
    /// lassie-retrieval, herd, linkerd-spike, c3-clop, knee, fleet-lassie, ...) or a scenario
    /// TOML file.
    #[arg(long)]
    scenario: Option<String>,
    /// Comma-separated policies: coordinator, `coordinator:<preset or config file>`, random,
    /// round-robin, p2c-opcount, mongo-error-bias, lassie-pairwise, lassie, livepeer,
    /// p2c-peak-ewma, least-loaded, least-loaded-accrual, least-pending, dynamic-snitch, c3,
    /// c3-rate, clairvoyant, oracle, oracle-completion, thompson, and the concurrency limiters
    /// gradient2, vegas, aimd, vector-arc, oracle-limits (docs/baselines.md). Default: the
    /// scenario's own list. A config file with `[[arms]]`
    /// also reports each arm (docs/arms.md). In fleet mode, `coordinator:<config>` alone: the
    /// config every client runs.
    #[arg(long, value_delimiter = ',')]
    policies: Vec<String>,
    /// How many seeds to run (BASE..BASE+N-1); figures are means over them.
    #[arg(
        long,
        default_value_t = 1,
        allow_negative_numbers = true,
        value_parser = crate::positive_citing::<u64, MAX_SEEDS>,
    )]
    seeds: u64,
    /// The first seed (with --suite, the suite's seed).
    #[arg(
        long,
        default_value_t = 1,
        allow_negative_numbers = true,
        value_parser = crate::whole::<u64>,
    )]
    seed: u64,
    /// Runs at a time, at least 1 (default: the number of cores).
    #[arg(
        long,
        allow_negative_numbers = true,
        value_parser = crate::positive::<usize>,
    )]
    threads: Option<usize>,
    /// Write the report as JSON (see docs/simulate-json.md). A file is replaced whole once the
    /// report is complete (a failed write leaves the earlier file as it was); a FIFO or
    /// /dev/stdout is written directly; a symbolic link to a file that does not exist is
    /// refused.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Write an SVG plot: traffic share over time per candidate, error rate per policy. Written
    /// as --json is.
    #[arg(long)]
    plot: Option<PathBuf>,
    /// List the built-in scenarios and exit.
    #[arg(long, conflicts_with_all = ["policies", "json", "plot", "seeds", "seed", "threads"])]
    list: bool,
    #[command(flatten)]
    suite: crate::suite::SuiteArgs,
    #[command(flatten)]
    fleet: FleetArgs,
}

/// Fleet mode (docs/fleet.md): several coordinators over one set of candidates. A scenario
/// with a `[fleet]` table runs in fleet mode; these options override its fields (or, without
/// the table, turn fleet mode on).
#[derive(Debug, clap::Args)]
pub(crate) struct FleetArgs {
    /// Whether the coordinators share digests: none or digest.
    #[arg(long, value_name = "none|digest")]
    fleet_share: Option<String>,
    /// Coordinators in the fleet, 1 to 100.
    #[arg(
        long,
        value_name = "N",
        allow_negative_numbers = true,
        value_parser = crate::positive_up_to::<{ selection_coordinator::sim::MAX_CLIENTS }>,
    )]
    fleet_clients: Option<u32>,
    /// Seconds between a coordinator's digests.
    #[arg(long, value_name = "S", allow_negative_numbers = true)]
    digest_period_s: Option<f64>,
    /// Delay of a digest copy, ms.
    #[arg(long, value_name = "MS", allow_negative_numbers = true)]
    digest_delay_ms: Option<f64>,
    /// Extra delay per copy, uniform in [0, MS].
    #[arg(long, value_name = "MS", allow_negative_numbers = true)]
    digest_jitter_ms: Option<f64>,
    /// Probability that a digest copy is lost.
    #[arg(long, value_name = "P", allow_negative_numbers = true)]
    digest_loss: Option<f64>,
    /// Whether a coordinator publishes at once on a sharp change in its own outcomes: on or off.
    #[arg(long, value_name = "on|off")]
    digest_urgent: Option<String>,
}

impl FleetArgs {
    /// The fleet flags given, by name.
    fn given(&self) -> Vec<&'static str> {
        [
            ("--fleet-share", self.fleet_share.is_some()),
            ("--fleet-clients", self.fleet_clients.is_some()),
            ("--digest-period-s", self.digest_period_s.is_some()),
            ("--digest-delay-ms", self.digest_delay_ms.is_some()),
            ("--digest-jitter-ms", self.digest_jitter_ms.is_some()),
            ("--digest-loss", self.digest_loss.is_some()),
            ("--digest-urgent", self.digest_urgent.is_some()),
        ]
        .into_iter()
        .filter_map(|(name, given)| given.then_some(name))
        .collect()
    }

    fn any(&self) -> bool {
        !self.given().is_empty()
    }

    /// Checks each override on its own, with the library's bounds, so a bad value is reported
    /// under its flag rather than under the `[fleet]` field it replaces.
    fn check(&self) -> Result<(), String> {
        let one = |flag: &str, field: &str, set: &dyn Fn(&mut FleetSpec)| {
            let mut spec = lone_spec();
            set(&mut spec);
            spec.check()
                .map_err(|e| e.replacen(&format!("fleet.{field}"), flag, 1))
        };
        // `--fleet-clients` is bounded by its parser (`MAX_CLIENTS`).
        if let Some(p) = self.digest_period_s {
            one("--digest-period-s", "period_s", &|s| s.period_s = p)?;
        }
        if let Some(d) = self.digest_delay_ms {
            one("--digest-delay-ms", "delay_ms", &|s| s.delay_ms = d)?;
        }
        if let Some(j) = self.digest_jitter_ms {
            one("--digest-jitter-ms", "jitter_ms", &|s| s.jitter_ms = j)?;
        }
        if let Some(l) = self.digest_loss {
            one("--digest-loss", "loss", &|s| s.loss = l)?;
        }
        Ok(())
    }

    /// The scenario's `[fleet]` table with these overrides (`None`: not fleet mode).
    fn spec(&self, scenario: &Scenario) -> Result<Option<FleetSpec>, String> {
        self.check()?;
        let Some(mut spec) = scenario
            .fleet
            .clone()
            .or_else(|| self.any().then(lone_spec))
        else {
            return Ok(None);
        };
        if let Some(s) = &self.fleet_share {
            spec.share = FleetShare::parse(s).map_err(|e| format!("--fleet-share: {e}"))?;
        }
        if let Some(n) = self.fleet_clients {
            spec.clients = n;
        }
        if let Some(p) = self.digest_period_s {
            spec.period_s = p;
        }
        if let Some(d) = self.digest_delay_ms {
            spec.delay_ms = d;
        }
        if let Some(j) = self.digest_jitter_ms {
            spec.jitter_ms = j;
        }
        if let Some(l) = self.digest_loss {
            spec.loss = l;
        }
        match self.digest_urgent.as_deref() {
            None => {}
            Some("on") => spec.urgent = true,
            Some("off") => spec.urgent = false,
            Some(other) => {
                return Err(format!(
                    "--digest-urgent: expected on or off, got `{other}`"
                ))
            }
        }
        spec.check()?;
        Ok(Some(spec))
    }
}

/// The fleet a scenario without a `[fleet]` table gets from the flags: one coordinator sharing
/// a digest every second, without delay or loss.
fn lone_spec() -> FleetSpec {
    FleetSpec::new(1)
}

/// Which of the three modes was asked for, refusing a flag that means nothing in it (clap's
/// `requires` lets `--scenario x --count 5` through, as `--suite` conflicts with `--scenario`).
fn check_mode(args: &Args) -> Result<(), String> {
    let suite_flags: Vec<&str> = [
        ("--count", args.suite.count.is_some()),
        ("--dump", args.suite.dump.is_some()),
        ("--by-world", args.suite.by_world),
    ]
    .into_iter()
    .filter_map(|(name, given)| given.then_some(name))
    .collect();
    let fleet_flags = args.fleet.given();
    let suite = !args.suite.suite.is_empty();
    if args.list {
        let mut extra = suite_flags;
        extra.extend(&fleet_flags);
        if args.scenario.is_some() {
            extra.insert(0, "--scenario");
        }
        if !extra.is_empty() {
            return Err(format!(
                "--list only lists the built-in scenarios: drop {}",
                extra.join(", ")
            ));
        }
    } else if suite {
        if !fleet_flags.is_empty() {
            return Err(format!(
                "{} {} fleet mode, which runs one scenario: they go with --scenario, not with \
                 --suite (generated scenarios, one coordinator each)",
                fleet_flags.join(", "),
                if fleet_flags.len() == 1 {
                    "sets"
                } else {
                    "set"
                }
            ));
        }
    } else if args.scenario.is_some() {
        if !suite_flags.is_empty() {
            return Err(format!(
                "{} {} with --suite (generated scenarios); --scenario runs one scenario",
                suite_flags.join(" and "),
                if suite_flags.len() == 1 { "goes" } else { "go" }
            ));
        }
    } else {
        return Err(
            "nothing to run: give --scenario <name|file> to run one scenario, \
             --suite <families|all> to run generated ones, or --list to see the built-in \
             scenarios"
                .into(),
        );
    }
    Ok(())
}

/// Checks made before any work, so a bad option fails at once rather than after the run: the
/// seed range fits in 64 bits, `--plot` names an `.svg` file (the plot is SVG), and the
/// `--json` and `--plot` files can be written.
fn check_options(args: &Args) -> Result<(), String> {
    if args.seed.checked_add(args.seeds - 1).is_none() {
        return Err(format!(
            "--seed {} with --seeds {} runs past the largest seed ({}); start lower",
            args.seed,
            args.seeds,
            u64::MAX
        ));
    }
    if let Some(path) = &args.plot {
        let svg = path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("svg"));
        if !svg {
            return Err(format!(
                "--plot {}: the plot is written as SVG; give a file name ending in .svg",
                path.display()
            ));
        }
    }
    for (option, path) in [("--json", &args.json), ("--plot", &args.plot)] {
        if let Some(path) = path {
            crate::report_file::check(path)
                .map_err(|e| format!("{option} {}: cannot write it: {e}", path.display()))?;
        }
    }
    Ok(())
}

/// Runs the subcommand.
pub(crate) fn run(args: Args) -> Result<(), String> {
    check_mode(&args)?;
    if args.list {
        let mut list = String::new();
        for (name, text) in BUILTIN {
            let sc = Scenario::parse(text, name).map_err(|e| e.to_string())?;
            list.push_str(&format!("{name:<20} {}\n", sc.description));
        }
        let discovery = DiscoveryScenario::from_toml_str(discovery_sim::LIVEPEER_DISCOVERY)
            .map_err(|e| e.to_string())?;
        list.push_str(&format!(
            "{:<20} {}\n",
            discovery.name, discovery.description
        ));
        return crate::out::print(&list);
    }
    check_options(&args)?;
    if !args.suite.suite.is_empty() {
        let (seed, threads, json) = (args.seed, args.threads, args.json.as_deref());
        return crate::suite::run(&args.suite, &args.policies, seed, threads, json, args.seeds);
    }
    let name = args.scenario.as_deref().unwrap_or_default();
    if let Some(text) = discovery_sim::scenario_text(name) {
        return run_discovery(&text, name, &args);
    }
    let scenario = Scenario::load(name).map_err(|e| e.to_string())?;
    if let Some(spec) = args.fleet.spec(&scenario)? {
        return run_fleet(&scenario, &spec, &args);
    }
    // `--policies` paths are relative to the working directory; the scenario's own
    // `policies` read a `coordinator:<file>` beside the scenario file.
    let policies = if !args.policies.is_empty() {
        parse_policies(&args.policies)?
    } else if !scenario.policies.is_empty() {
        scenario
            .policy_specs()
            .map_err(|e| format!("{name}: policies: {e}"))?
    } else {
        let names = ["coordinator", "random", "oracle"].map(String::from);
        parse_policies(&names)?
    };
    if args.seeds > MAX_SEEDS {
        return Err(format!(
            "--seeds {}: at most {MAX_SEEDS} seeds at once (figures are means over them, and \
             a million runs take hours); run more with a later --seed",
            args.seeds
        ));
    }
    let seeds = Seeds::Range {
        first: args.seed,
        count: args.seeds,
    };
    let threads = crate::threads_or_cores(args.threads);
    let runs = (policies.len() as u64).saturating_mul(args.seeds);
    let bar = std::io::stderr().is_terminal().then(|| {
        let b = indicatif::ProgressBar::new(runs);
        if let Ok(style) = indicatif::ProgressStyle::with_template(
            "{spinner} {msg} [{bar:30}] {pos}/{len} runs ({elapsed})",
        ) {
            b.set_style(style.progress_chars("=> "));
        }
        b.set_message(scenario.name.clone());
        b
    });
    // Without a terminal: a line on stderr every few seconds, also during a long run.
    let heartbeat = bar
        .is_none()
        .then(|| Heartbeat::start(scenario.name.clone(), runs as usize));
    let progress = |done: usize, _all: usize| {
        if let Some(b) = &bar {
            b.set_position(done as u64);
        }
        if let Some(h) = &heartbeat {
            h.set(done);
        }
    };
    let report = simulate_seeds(&scenario, &policies, seeds, threads, Some(&progress));
    drop(heartbeat);
    let report = report?;
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    crate::out::print(&report.table())?;
    if let Some(path) = &args.json {
        crate::report_file::write(path, |w| {
            report.write_json(&mut *w)?;
            writeln!(w)
        })
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    if let Some(path) = &args.plot {
        crate::report_file::write_with(path, |at| {
            // The plot names the file it writes, here the temporary one: name `path` instead.
            plot_svg(&report, at).map_err(|e| {
                let prefix = format!("plot {}: ", at.display());
                std::io::Error::other(e.strip_prefix(&prefix).unwrap_or(&e).to_string())
            })
        })
        .map_err(|e| format!("plot {}: {e}", path.display()))?;
    }
    Ok(())
}

/// Fleet mode: the fleet's figures against the oracle (docs/fleet.md). `--policies` may name
/// the one coordinator config every client runs (`coordinator:<preset or file>`), in place of
/// the scenario's own.
fn run_fleet(scenario: &Scenario, spec: &FleetSpec, args: &Args) -> Result<(), String> {
    if args.plot.is_some() {
        return Err(
            "fleet mode reports the fleet against the oracle: --plot does not apply".into(),
        );
    }
    let seeds = kept_seeds(args, "fleet mode")?;
    if spec.clients == 1 && spec.share == FleetShare::Digest {
        eprintln!(
            "selcoord: note: a fleet of 1 coordinator shares its digests with no one; \
             --fleet-clients N (2 to 100) runs several"
        );
    }
    let scenario = &fleet_config(scenario, &args.policies)?;
    let threads = crate::threads_or_cores(args.threads);
    // `simulate_fleet` reports no progress: a spinner with the elapsed time shows it runs.
    let spinner = std::io::stderr().is_terminal().then(|| {
        let s = indicatif::ProgressBar::new_spinner();
        if let Ok(style) = indicatif::ProgressStyle::with_template("{spinner} {msg} ({elapsed})") {
            s.set_style(style);
        }
        s.set_message(format!(
            "{}: a fleet of {} coordinator{}, {} seed{}",
            scenario.name,
            spec.clients,
            if spec.clients == 1 { "" } else { "s" },
            seeds.len(),
            if seeds.len() == 1 { "" } else { "s" }
        ));
        s.enable_steady_tick(Duration::from_millis(100));
        s
    });
    let heartbeat = spinner.is_none().then(|| {
        Heartbeat::start(
            format!(
                "{} (a fleet of {} coordinators)",
                scenario.name, spec.clients
            ),
            0,
        )
    });
    let report = simulate_fleet(scenario, spec, &seeds, threads);
    drop(heartbeat);
    if let Some(s) = &spinner {
        s.finish_and_clear();
    }
    let report = report?;
    crate::out::print(&report.table())?;
    if let Some(path) = &args.json {
        crate::report_file::write_str(path, &(report.to_json() + "\n"))
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    Ok(())
}

/// The scenario with the clients' config `policies` names: at most one coordinator spec, and
/// the oracle, which fleet mode always reports.
fn fleet_config(scenario: &Scenario, policies: &[String]) -> Result<Scenario, String> {
    let mut scenario = scenario.clone();
    let mut coordinators = 0;
    for name in policies {
        match PolicySpec::parse(name.trim())? {
            PolicySpec::Coordinator { config, .. } => {
                coordinators += 1;
                if let Some(config) = config {
                    scenario.coordinator = Some(CoordinatorSpec(*config));
                }
            }
            PolicySpec::Oracle => {}
            _ => {
                return Err(format!(
                    "fleet mode runs one coordinator config on every client against the \
                     oracle: --policies takes `coordinator` or `coordinator:<preset or config \
                     file>`, not `{}`",
                    name.trim()
                ))
            }
        }
    }
    if coordinators > 1 {
        return Err(
            "fleet mode runs one coordinator config on every client: --policies names \
             more than one; run them one after another"
                .into(),
        );
    }
    Ok(scenario)
}

/// A `kind = "discovery"` scenario (`livepeer-discovery`) compares discovery modes
/// (per-request fan-out against the cached catalogue) rather than selection policies.
fn run_discovery(text: &str, name: &str, args: &Args) -> Result<(), String> {
    if !args.policies.is_empty() || args.plot.is_some() {
        return Err(
            "a discovery scenario compares discovery modes: --policies and --plot do not apply"
                .into(),
        );
    }
    let fleet_flags = args.fleet.given();
    if !fleet_flags.is_empty() {
        return Err(format!(
            "a discovery scenario compares discovery modes, not a fleet of coordinators: {} \
             {} not apply",
            fleet_flags.join(", "),
            if fleet_flags.len() == 1 { "does" } else { "do" }
        ));
    }
    let seeds = kept_seeds(args, "a discovery scenario")?;
    // Errors name the file as a selection scenario's do.
    let source = if name == "livepeer-discovery" {
        format!("builtin:{name}")
    } else {
        name.to_string()
    };
    let mut scenario = DiscoveryScenario::parse(text, &source).map_err(|e| e.to_string())?;
    scenario.seeds = seeds;
    let report = discovery_sim::run(&scenario).map_err(|e| e.to_string())?;
    crate::out::print(&discovery_sim::render_table(&report))?;
    if let Some(path) = &args.json {
        let json = serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?;
        crate::report_file::write_str(path, &(json + "\n"))
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    Ok(())
}

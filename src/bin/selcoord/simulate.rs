//! `selcoord simulate`: run a scenario in virtual time with several policies side by side.

use std::io::IsTerminal;
use std::path::PathBuf;

use selection_coordinator::discovery::sim::{self as discovery_sim, DiscoveryScenario};
use selection_coordinator::sim::{plot_svg, simulate, PolicySpec, Scenario, BUILTIN};

/// Arguments of `selcoord simulate`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// A built-in scenario name (mongo-overload, capacity-overload, recovery, lassie-retrieval,
    /// livepeer-selection, pairwise-deadlock, large-fleet, livepeer-discovery) or a scenario
    /// TOML file.
    #[arg(long, required_unless_present_any = ["list", "suite"])]
    scenario: Option<String>,
    /// Comma-separated policies: coordinator, `coordinator:<preset or config file>`, random,
    /// round-robin, p2c-opcount, mongo-error-bias, lassie-pairwise, lassie, livepeer,
    /// p2c-peak-ewma, oracle. Default: the scenario's own list. A config file with `[[arms]]`
    /// also reports each arm (docs/arms.md).
    #[arg(long, value_delimiter = ',')]
    policies: Vec<String>,
    /// How many seeds to run (BASE..BASE+N-1); figures are means over them.
    #[arg(long, default_value_t = 1)]
    seeds: u64,
    /// The first seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Runs at a time (default: the number of cores).
    #[arg(long)]
    threads: Option<usize>,
    /// Write the report as JSON (see docs/simulate-json.md).
    #[arg(long)]
    json: Option<PathBuf>,
    /// Write an SVG plot: traffic share over time per candidate, error rate per policy.
    #[arg(long)]
    plot: Option<PathBuf>,
    /// List the built-in scenarios and exit.
    #[arg(long, conflicts_with_all = ["policies", "json", "plot"])]
    list: bool,
    #[command(flatten)]
    suite: crate::suite::SuiteArgs,
}

/// Runs the subcommand.
pub(crate) fn run(args: Args) -> Result<(), String> {
    if args.list {
        for (name, text) in BUILTIN {
            let sc = Scenario::parse(text, name).map_err(|e| e.to_string())?;
            println!("{name:<20} {}", sc.description);
        }
        let discovery = DiscoveryScenario::from_toml_str(discovery_sim::LIVEPEER_DISCOVERY)
            .map_err(|e| e.to_string())?;
        println!("{:<20} {}", discovery.name, discovery.description);
        return Ok(());
    }
    if !args.suite.suite.is_empty() {
        let (seed, threads, json) = (args.seed, args.threads, args.json.as_deref());
        return crate::suite::run(&args.suite, &args.policies, seed, threads, json, args.seeds);
    }
    let name = args.scenario.as_deref().unwrap_or_default();
    if let Some(text) = discovery_sim::scenario_text(name) {
        return run_discovery(&text, &args);
    }
    let scenario = Scenario::load(name).map_err(|e| e.to_string())?;
    let names: Vec<String> = if args.policies.is_empty() {
        if scenario.policies.is_empty() {
            vec!["coordinator".into(), "random".into(), "oracle".into()]
        } else {
            scenario.policies.clone()
        }
    } else {
        args.policies.clone()
    };
    let policies = names
        .iter()
        .map(|n| PolicySpec::parse(n.trim()))
        .collect::<Result<Vec<_>, _>>()?;
    if args.seeds == 0 {
        return Err("--seeds must be at least 1".into());
    }
    let seeds: Vec<u64> = (0..args.seeds).map(|i| args.seed.wrapping_add(i)).collect();
    let threads = args.threads.unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    });
    let bar = std::io::stderr().is_terminal().then(|| {
        let b = indicatif::ProgressBar::new((policies.len() * seeds.len()) as u64);
        if let Ok(style) = indicatif::ProgressStyle::with_template(
            "{spinner} {msg} [{bar:30}] {pos}/{len} runs ({elapsed})",
        ) {
            b.set_style(style.progress_chars("=> "));
        }
        b.set_message(scenario.name.clone());
        b
    });
    let progress = |done: usize, _all: usize| {
        if let Some(b) = &bar {
            b.set_position(done as u64);
        }
    };
    let report = simulate(&scenario, &policies, &seeds, threads, Some(&progress))?;
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    print!("{}", report.table());
    if let Some(path) = &args.json {
        std::fs::write(path, report.to_json() + "\n")
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    if let Some(path) = &args.plot {
        plot_svg(&report, path)?;
    }
    Ok(())
}

/// A `kind = "discovery"` scenario (`livepeer-discovery`) compares discovery modes
/// (per-request fan-out against the cached catalogue) rather than selection policies.
fn run_discovery(text: &str, args: &Args) -> Result<(), String> {
    if !args.policies.is_empty() || args.plot.is_some() {
        return Err(
            "a discovery scenario compares discovery modes: --policies and --plot do not apply"
                .into(),
        );
    }
    if args.seeds == 0 {
        return Err("--seeds must be at least 1".into());
    }
    let mut scenario = DiscoveryScenario::from_toml_str(text).map_err(|e| e.to_string())?;
    scenario.seeds = (0..args.seeds).map(|i| args.seed.wrapping_add(i)).collect();
    let report = discovery_sim::run(&scenario).map_err(|e| e.to_string())?;
    print!("{}", discovery_sim::render_table(&report));
    if let Some(path) = &args.json {
        let json = serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?;
        std::fs::write(path, json + "\n")
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    Ok(())
}

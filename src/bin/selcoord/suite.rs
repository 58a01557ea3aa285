//! `selcoord simulate --suite`: generate scenarios per family, run every policy on each and
//! report each policy against the oracle (docs/scenarios.md, docs/simulate-json.md).

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use selection_coordinator::sim::suite::{
    generate_suite, run_suite, Detail, Family, DEFAULT_POLICIES,
};
use selection_coordinator::sim::PolicySpec;

/// The suite's own flags of `selcoord simulate`.
#[derive(Debug, clap::Args)]
pub(crate) struct SuiteArgs {
    /// Run generated scenarios instead of one: comma-separated families (degrade-heal, outage,
    /// drift, flap, churn, population, heavy-tail, or all). Default policies: coordinator, oracle,
    /// p2c-peak-ewma, least-loaded, mongo-error-bias, round-robin, random, p2c-opcount.
    #[arg(long, value_delimiter = ',', conflicts_with_all = ["scenario", "plot", "list"])]
    pub(crate) suite: Vec<String>,
    /// Scenarios per family (with --suite; default 20).
    #[arg(
        long,
        value_name = "N",
        allow_negative_numbers = true,
        value_parser = crate::positive_citing::<usize, { MAX_COUNT as u64 }>,
    )]
    pub(crate) count: Option<usize>,
    /// Write each generated scenario to DIR/FAMILY-INDEX.toml before running (with --suite).
    #[arg(long, value_name = "DIR")]
    pub(crate) dump: Option<PathBuf>,
    /// Also report each family split by kind of world: fleets whose latency is their own or
    /// that queue, requests that retry or not (with --suite; the JSON always has the split).
    #[arg(long)]
    pub(crate) by_world: bool,
}

/// The most scenarios per family `--count` takes. Every scenario is generated before the runs
/// start (some 10 KB each, text and parsed, and each run's figures stay until the report):
/// 1000 per family of all seven families stay within about a hundred MB, and take over an
/// hour with the default policies on two cores. 100 per family and policy take about a minute.
const MAX_COUNT: usize = 1_000;

/// Scenarios per family when `--count` is not given.
const DEFAULT_COUNT: usize = 20;

/// Runs a suite: `seed` is the suite seed, `policies` as given (empty: the defaults).
pub(crate) fn run(
    args: &SuiteArgs,
    policies: &[String],
    seed: u64,
    threads: Option<usize>,
    json: Option<&Path>,
    seeds: u64,
) -> Result<(), String> {
    if seeds != 1 {
        return Err("--suite runs each scenario once, with its own seed: drop --seeds".into());
    }
    let threads = crate::threads_or_cores(threads);
    let families = Family::parse_list(&args.suite)?;
    let count = args.count.unwrap_or(DEFAULT_COUNT);
    if count > MAX_COUNT {
        return Err(format!(
            "--count must be at most {MAX_COUNT} scenarios per family (got {count}): every \
             scenario is generated before the runs start; run more with another --seed"
        ));
    }
    let names: Vec<String> = if policies.is_empty() {
        DEFAULT_POLICIES.iter().map(|s| s.to_string()).collect()
    } else {
        policies.iter().map(|s| s.trim().to_string()).collect()
    };
    let specs = crate::simulate::parse_policies(&names)?;
    if specs.iter().all(|s| *s == PolicySpec::Oracle) {
        return Err(
            "--suite reports each policy against the oracle (which runs on every scenario \
             whether listed or not), so `--policies oracle` alone has nothing to report: add the \
             policies to compare, e.g. --policies coordinator,p2c-peak-ewma"
                .into(),
        );
    }
    let scenarios = generate_suite(&families, count, seed, &names).map_err(|e| e.to_string())?;
    if let Some(dir) = &args.dump {
        if dir.exists() && !dir.is_dir() {
            return Err(format!(
                "--dump {}: not a directory; give a directory (created if missing)",
                dir.display()
            ));
        }
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("--dump {}: cannot create it: {e}", dir.display()))?;
        for g in &scenarios {
            let path = dir.join(format!("{}.toml", g.scenario.name));
            crate::report_file::write_str(&path, &g.text)
                .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        }
        let n = scenarios.len();
        eprintln!(
            "wrote {n} scenario file{} to {}",
            if n == 1 { "" } else { "s" },
            dir.display()
        );
    }
    let runs = scenarios.len() * (specs.len() + usize::from(!specs.contains(&PolicySpec::Oracle)));
    let bar = std::io::stderr().is_terminal().then(|| {
        let b = indicatif::ProgressBar::new(runs as u64);
        if let Ok(style) = indicatif::ProgressStyle::with_template(
            "{spinner} suite [{bar:30}] {pos}/{len} runs ({elapsed}, eta {eta})",
        ) {
            b.set_style(style.progress_chars("=> "));
        }
        b
    });
    // Without a terminal, a line every 10% of the runs.
    let step = (runs / 10).max(1);
    let progress = |done: usize, all: usize| match &bar {
        Some(b) => b.set_position(done as u64),
        None if done.is_multiple_of(step) || done == all => eprintln!("suite: {done}/{all} runs"),
        None => {}
    };
    let report = run_suite(seed, &scenarios, &specs, threads, Some(&progress))?;
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    let detail = if args.by_world {
        Detail::Worlds
    } else {
        Detail::Families
    };
    crate::out::print(&report.table_with(detail))?;
    if let Some(path) = json {
        crate::report_file::write_str(path, &(report.to_json() + "\n"))
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    Ok(())
}

//! `selcoord`: simulate, explain and demo the selection coordinator.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod demo;
mod explain;
mod out;
mod simulate;
mod suite;

/// Choose which backend gets the next unit of work: simulate policies, explain a draw, or run
/// the live demo with Prometheus metrics.
#[derive(Debug, Parser)]
#[command(name = "selcoord", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a scenario in virtual time with several policies side by side.
    Simulate(simulate::Args),
    /// Show what a draw would do for a set of candidates under a config.
    Explain(explain::Args),
    /// Run the coordinator live (real actors, real time) with a metrics endpoint.
    Demo(demo::Args),
}

/// Library warnings (NATS unreachable, a snapshot that could not be saved, the metrics
/// exporter stopped) go to stderr. `SELCOORD_LOG` sets the level with `EnvFilter` directives
/// (`info`, `selection_coordinator=debug`, ...); `warn` by default.
fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("SELCOORD_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    // Already set (never, in this binary): keep the one there.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .try_init();
}

/// Parses a whole number for clap, saying what is expected: a negative one (clap lets it through
/// with `allow_negative_numbers`) would otherwise read "invalid digit found in string".
pub(crate) fn whole<T: Whole>(s: &str) -> Result<T, String> {
    if s.trim_start().starts_with('-') {
        return Err("must be a whole number >= 0".into());
    }
    s.parse()
        .map_err(|_| format!("must be a whole number from 0 to {}", T::MAX))
}

/// An unsigned integer type a flag takes.
pub(crate) trait Whole: std::str::FromStr + std::fmt::Display {
    /// Its largest value.
    const MAX: Self;
}

impl Whole for u32 {
    const MAX: Self = u32::MAX;
}

impl Whole for u64 {
    const MAX: Self = u64::MAX;
}

impl Whole for usize {
    const MAX: Self = usize::MAX;
}

fn main() -> ExitCode {
    init_logging();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Simulate(args) => simulate::run(args),
        Command::Explain(args) => explain::run(args),
        Command::Demo(args) => demo::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("selcoord: {message}");
            ExitCode::FAILURE
        }
    }
}

//! `selcoord`: simulate, explain and demo the selection coordinator.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod demo;
mod explain;
mod heartbeat;
mod out;
mod report_file;
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
/// (`info`, `selection_coordinator=debug`, ...); `warn` by default, and when the value does not
/// parse (a warning says so).
fn init_logging() {
    let filter = match std::env::var("SELCOORD_LOG") {
        Err(std::env::VarError::NotPresent) => None,
        Err(std::env::VarError::NotUnicode(v)) => {
            eprintln!(
                "selcoord: warning: SELCOORD_LOG={}: not valid UTF-8; logging at `warn`",
                v.to_string_lossy()
            );
            None
        }
        Ok(v) => {
            for word in unknown_bare_words(&v) {
                eprintln!(
                    "selcoord: warning: SELCOORD_LOG: `{word}` is not a level ({}): it is read \
                     as a target name; for a target at a level write e.g. \
                     `selection_coordinator=debug`",
                    LEVELS.join(", ")
                );
            }
            match tracing_subscriber::EnvFilter::try_new(&v) {
                Ok(f) => Some(f),
                Err(e) => {
                    eprintln!(
                        "selcoord: warning: SELCOORD_LOG={v}: not a valid filter ({e}); \
                         logging at `warn`"
                    );
                    None
                }
            }
        }
    };
    let filter = filter.unwrap_or_else(|| tracing_subscriber::EnvFilter::new("warn"));
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

/// [`whole`] for a flag that needs at least 1 (a count of runs, seeds, threads): whatever is
/// wrong (negative, 0, a fraction, too large), the message gives the same range.
pub(crate) fn positive<T: Whole + PartialEq + Default>(s: &str) -> Result<T, String> {
    let want = || format!("must be a whole number >= 1 (at most {})", T::MAX);
    if s.trim_start().starts_with('-') {
        return Err(want());
    }
    match s.parse::<T>() {
        Ok(v) if v != T::default() => Ok(v),
        _ => Err(want()),
    }
}

/// [`positive`] for a flag whose bound, `MAX`, is checked later with its reason (`--seeds`,
/// `--count`): a value that is no whole number >= 1 is told that range, not the type's.
pub(crate) fn positive_citing<T: Whole + PartialEq + Default, const MAX: u64>(
    s: &str,
) -> Result<T, String> {
    positive::<T>(s).map_err(|_| format!("must be a whole number >= 1 (at most {MAX})"))
}

/// A whole number from 1 to `MAX`: [`positive`] with the flag's own bound in the message.
pub(crate) fn positive_up_to<const MAX: u32>(s: &str) -> Result<u32, String> {
    match positive::<u32>(s) {
        Ok(v) if v <= MAX => Ok(v),
        _ => Err(format!("must be a whole number >= 1 (at most {MAX})")),
    }
}

/// `--threads` as given, or the number of cores.
pub(crate) fn threads_or_cores(threads: Option<usize>) -> usize {
    threads.unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    })
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

/// The level names a bare directive may be.
const LEVELS: [&str; 6] = ["off", "error", "warn", "info", "debug", "trace"];

/// The directives of `value` that are a bare word but neither a level nor its number 0 to 5
/// (`degub`): `EnvFilter` takes them as target names, so a mistyped level silently shows
/// nothing more.
fn unknown_bare_words(value: &str) -> Vec<&str> {
    value
        .split(',')
        .map(str::trim)
        .filter(|d| {
            !d.is_empty()
                && !d.contains(['=', '[', ':'])
                && !LEVELS.iter().any(|l| l.eq_ignore_ascii_case(d))
                && !d.parse::<u8>().is_ok_and(|n| n <= 5)
                && !d.starts_with("selection_coordinator")
        })
        .collect()
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

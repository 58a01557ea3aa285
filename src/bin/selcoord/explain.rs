//! `selcoord explain`.

/// Arguments of `selcoord explain`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {}

/// Runs the subcommand.
pub(crate) fn run(_args: Args) -> Result<(), String> {
    Err("`explain` is not built yet".into())
}

//! `selcoord simulate`.

/// Arguments of `selcoord simulate`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {}

/// Runs the subcommand.
pub(crate) fn run(_args: Args) -> Result<(), String> {
    Err("`simulate` is not built yet".into())
}

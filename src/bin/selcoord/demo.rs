//! `selcoord demo`.

/// Arguments of `selcoord demo`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {}

/// Runs the subcommand.
pub(crate) fn run(_args: Args) -> Result<(), String> {
    Err("`demo` is not built yet".into())
}

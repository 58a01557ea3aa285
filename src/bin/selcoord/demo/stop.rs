//! What stops the demo: Ctrl-C (SIGINT) or, on Unix, SIGTERM (what systemd, Docker and
//! Kubernetes send), either of which starts the drain and the summary.

/// Resolves at the first Ctrl-C or SIGTERM.
pub(super) async fn requested() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(e) => {
                eprintln!("selcoord demo: cannot listen for SIGTERM ({e}); Ctrl-C stops it");
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

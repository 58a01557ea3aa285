//! The Prometheus exporter: installation with this crate's buckets and typed errors.

use super::{describe, BUCKETS};

/// Why the Prometheus exporter could not be installed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PrometheusInstallError {
    /// The HTTP listener could not bind; pick another address or free the port.
    #[error("cannot listen on {addr}: {reason}; choose another address or stop what uses it")]
    Listen {
        /// The address asked for.
        addr: std::net::SocketAddr,
        /// What the system said.
        reason: String,
    },
    /// A metrics recorder is installed already; install the exporter once per process.
    #[error("a metrics recorder is installed already; install the exporter once per process")]
    AlreadyInstalled,
    /// Any other exporter error (runtime creation, configuration).
    #[error("cannot start the Prometheus exporter: {0}")]
    Exporter(String),
}

/// A Prometheus builder with this crate's histogram buckets (no listener set).
pub fn prometheus_builder(
) -> Result<metrics_exporter_prometheus::PrometheusBuilder, PrometheusInstallError> {
    use metrics_exporter_prometheus::{Matcher, PrometheusBuilder};
    let mut builder = PrometheusBuilder::new();
    for (name, buckets) in BUCKETS {
        builder = builder
            .set_buckets_for_metric(Matcher::Full(name.to_string()), buckets)
            .map_err(|e| PrometheusInstallError::Exporter(e.to_string()))?;
    }
    Ok(builder)
}

/// Installs the Prometheus exporter as the global recorder, serving `/metrics` over HTTP on
/// `addr` (e.g. `127.0.0.1:9464`), and describes every metric.
///
/// Call it outside any Tokio runtime (the exporter then runs on a thread of its own) or inside
/// one (it is spawned there). Only one recorder can be installed per process.
pub fn install_prometheus(addr: std::net::SocketAddr) -> Result<(), PrometheusInstallError> {
    use metrics_exporter_prometheus::BuildError;
    prometheus_builder()?
        .with_http_listener(addr)
        .install()
        .map_err(|e| match e {
            BuildError::FailedToCreateHTTPListener(reason) => {
                PrometheusInstallError::Listen { addr, reason }
            }
            BuildError::FailedToSetGlobalRecorder(_) => PrometheusInstallError::AlreadyInstalled,
            other => PrometheusInstallError::Exporter(other.to_string()),
        })?;
    describe();
    Ok(())
}

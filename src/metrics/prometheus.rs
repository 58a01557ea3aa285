//! The Prometheus exporter: installation with this crate's buckets and typed errors.
//!
//! The exporter always runs on a thread of its own with its own single-threaded Tokio
//! runtime, wherever it is installed from: outside any runtime, inside `actix::System`, inside
//! `#[tokio::main]`. An application that blocks its own threads (a synchronous call in an actix
//! handler, a long computation) therefore never stops `/metrics` from answering.

use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::mpsc;

use metrics_exporter_prometheus::{BuildError, ExporterFuture, PrometheusRecorder};

use super::{describe, BUCKETS, SERIES_IDLE_TIMEOUT};

/// Whether [`install_prometheus`] installed an exporter in this process.
static INSTALLED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// The name of the exporter's thread (visible in debuggers and `top -H`).
const THREAD_NAME: &str = "selcoord-prometheus";

/// Why the Prometheus exporter could not be installed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PrometheusInstallError {
    /// The address could not be read or resolved, e.g. `"localhost"` without a port.
    #[error(
        "cannot use {addr} as a listen address: {reason}; write it as host:port, e.g. \
         127.0.0.1:9464"
    )]
    Address {
        /// The address as given (its `Debug` form: a string is quoted).
        addr: String,
        /// What was wrong with it.
        reason: String,
    },
    /// The HTTP listener could not bind; pick another address or free the port.
    #[error("cannot listen on {addr}: {reason}; choose another address or stop what uses it")]
    Listen {
        /// The address asked for (the last one tried when a name resolved to several).
        addr: SocketAddr,
        /// What the system said.
        reason: String,
    },
    /// A metrics recorder is installed already; install the exporter once per process.
    #[error("a metrics recorder is installed already; install the exporter once per process")]
    AlreadyInstalled,
    /// Any other exporter error (runtime or thread creation, configuration).
    #[error("cannot start the Prometheus exporter: {0}")]
    Exporter(String),
}

/// A Prometheus builder with this crate's histogram buckets and an idle timeout of
/// [`SERIES_IDLE_TIMEOUT`] (no listener set): the series of candidates that left go from the
/// exposition an hour after their last update. Call `idle_timeout` on it to change that.
pub fn prometheus_builder(
) -> Result<metrics_exporter_prometheus::PrometheusBuilder, PrometheusInstallError> {
    use metrics_exporter_prometheus::{Matcher, PrometheusBuilder};
    use metrics_util::MetricKindMask;
    let mut builder =
        PrometheusBuilder::new().idle_timeout(MetricKindMask::ALL, Some(SERIES_IDLE_TIMEOUT));
    for (name, buckets) in BUCKETS {
        builder = builder
            .set_buckets_for_metric(Matcher::Full(name.to_string()), buckets)
            .map_err(|e| PrometheusInstallError::Exporter(e.to_string()))?;
    }
    Ok(builder)
}

/// Installs the Prometheus exporter as the global recorder, serving `/metrics` over HTTP on
/// `addr`, and describes every metric.
///
/// `addr` is anything [`ToSocketAddrs`] takes: `"127.0.0.1:9464"`, a `String`, a
/// [`SocketAddr`], `("localhost", 9464)`. A name resolving to several addresses binds the first
/// that works.
///
/// The exporter runs on a thread of its own (with its own single-threaded Tokio runtime)
/// wherever this is called, so blocking the application's threads, actix's included, never
/// stops `/metrics`. Call it once per process, at start-up, before or inside
/// `actix::System::block_on`: both are the same.
///
/// Errors: [`PrometheusInstallError::Address`] (unreadable address),
/// [`PrometheusInstallError::Listen`] (the port is taken or the address not local),
/// [`PrometheusInstallError::AlreadyInstalled`], [`PrometheusInstallError::Exporter`]. On an
/// error nothing keeps running and no recorder is installed.
pub fn install_prometheus(
    addr: impl ToSocketAddrs + std::fmt::Debug,
) -> Result<(), PrometheusInstallError> {
    let bad = |reason: String| PrometheusInstallError::Address {
        addr: format!("{addr:?}"),
        reason,
    };
    let addrs: Vec<SocketAddr> = addr
        .to_socket_addrs()
        .map_err(|e| bad(e.to_string()))?
        .collect();
    if addrs.is_empty() {
        return Err(bad("it resolves to no address".into()));
    }
    // Installed by an earlier call: say so before binding the address (which that exporter
    // may hold), or the error would point at the port.
    if INSTALLED.load(std::sync::atomic::Ordering::Acquire) {
        return Err(PrometheusInstallError::AlreadyInstalled);
    }
    // The exporter's thread builds everything on a runtime of its own (the listener registers
    // with it, the exporter's upkeep task is spawned on it), hands back the recorder, and
    // serves only once the recorder is installed; told otherwise it drops it all and ends.
    let (built_tx, built_rx) = mpsc::channel();
    let (go_tx, go_rx) = mpsc::channel::<bool>();
    std::thread::Builder::new()
        .name(THREAD_NAME.into())
        .spawn(move || {
            let runtime = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(r) => r,
                Err(e) => {
                    let _ = built_tx.send(Err(PrometheusInstallError::Exporter(format!(
                        "cannot create its runtime: {e}"
                    ))));
                    return;
                }
            };
            let exporter = match build_on(&runtime, &addrs) {
                Ok((recorder, exporter)) => {
                    if built_tx.send(Ok(recorder)).is_err() {
                        return;
                    }
                    exporter
                }
                Err(e) => {
                    let _ = built_tx.send(Err(e));
                    return;
                }
            };
            if go_rx.recv() == Ok(true) {
                // Serves until the process ends; only an accept error ends it early.
                if let Err(e) = runtime.block_on(exporter) {
                    tracing::error!("the Prometheus exporter stopped: {e:?}");
                }
            }
        })
        .map_err(|e| PrometheusInstallError::Exporter(format!("cannot start its thread: {e}")))?;
    let recorder = built_rx.recv().map_err(|_| {
        PrometheusInstallError::Exporter("its thread ended before building it".into())
    })??;
    let installed = metrics::set_global_recorder(recorder).is_ok();
    if installed {
        // Never set back: a call that lost a race to install must not clear it.
        INSTALLED.store(true, std::sync::atomic::Ordering::Release);
    }
    let _ = go_tx.send(installed);
    if !installed {
        return Err(PrometheusInstallError::AlreadyInstalled);
    }
    describe();
    Ok(())
}

/// Builds the recorder and the exporter on `runtime`, listening on the first of `addrs` that
/// binds.
fn build_on(
    runtime: &tokio::runtime::Runtime,
    addrs: &[SocketAddr],
) -> Result<(PrometheusRecorder, ExporterFuture), PrometheusInstallError> {
    let _inside = runtime.enter();
    let mut last = PrometheusInstallError::Exporter("no address to listen on".into());
    for &addr in addrs {
        match prometheus_builder()?.with_http_listener(addr).build() {
            Ok(pair) => return Ok(pair),
            Err(BuildError::FailedToCreateHTTPListener(reason)) => {
                last = PrometheusInstallError::Listen { addr, reason };
            }
            Err(other) => return Err(PrometheusInstallError::Exporter(other.to_string())),
        }
    }
    Err(last)
}

//! The Prometheus exporter answers `/metrics` from a thread of its own wherever it is
//! installed: here inside `actix::System::block_on`, with the actix thread then blocked in a
//! synchronous call until another thread has scraped the endpoint over 127.0.0.1.
//!
//! A global recorder can be installed once per process, so the test that installs one lives in
//! this file of its own; the other tests here fail before installing anything (a taken port
//! binds, so its check runs inside the installing test, before the install).
#![cfg(feature = "prometheus")]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use selection_coordinator::metrics::{install_prometheus, names, PrometheusInstallError};

/// A loopback port nobody listens on now (bound, then released).
fn free_port() -> SocketAddr {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
}

/// `GET /metrics` over HTTP/1.0: the status line and the body.
fn scrape(addr: SocketAddr) -> std::io::Result<(String, String)> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(s, "GET /metrics HTTP/1.0\r\nHost: {addr}\r\n\r\n")?;
    let mut raw = String::new();
    s.read_to_string(&mut raw)?;
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
    Ok((
        head.lines().next().unwrap_or_default().to_string(),
        body.to_string(),
    ))
}

#[test]
fn metrics_answer_while_the_actix_thread_is_blocked() {
    // In this test, before the install: run as a test of its own it could come after it.
    a_taken_port_is_a_listen_error_naming_the_address();
    let addr = free_port();
    let (scraped_tx, scraped_rx) = mpsc::channel();
    actix::System::new().block_on(async move {
        // Installed from inside the actix system, with a string address.
        install_prometheus(addr.to_string().as_str()).expect("install the exporter");
        metrics::counter!(names::EJECTIONS).increment(7);
        let scraper = std::thread::spawn(move || {
            // Retried until it answers: no timing is asserted, only that it answers at all.
            let start = Instant::now();
            let result = loop {
                match scrape(addr) {
                    Ok(answer) => break Ok(answer),
                    Err(e) if start.elapsed() > Duration::from_secs(30) => break Err(e),
                    Err(_) => std::thread::sleep(Duration::from_millis(50)),
                }
            };
            scraped_tx.send(result).unwrap();
        });
        // A synchronous call on the actix thread: nothing else runs on it until the scraper
        // has its answer (or gave up).
        let result = scraped_rx.recv().expect("the scraper reports");
        scraper.join().unwrap();
        let (status, body) = result.expect("/metrics answered while actix was blocked");
        assert!(status.contains("200"), "status {status}");
        assert!(
            body.lines()
                .any(|l| l.starts_with(names::EJECTIONS) && l.ends_with(" 7")),
            "no {} 7 in\n{body}",
            names::EJECTIONS
        );
        // Every metric is described on install.
        assert!(
            body.contains(&format!("# HELP {}", names::EJECTIONS)),
            "{body}"
        );
        // Once per process: a second install says so, and the first keeps serving.
        let again = install_prometheus(free_port());
        assert!(
            matches!(again, Err(PrometheusInstallError::AlreadyInstalled)),
            "{again:?}"
        );
        // On the address the first one holds too: not a port in use.
        let same = install_prometheus(addr);
        assert!(
            matches!(same, Err(PrometheusInstallError::AlreadyInstalled)),
            "{same:?}"
        );
        assert!(scrape(addr).is_ok_and(|(s, _)| s.contains("200")));
    });
}

#[test]
fn an_unreadable_address_is_a_typed_error() {
    // Each fails before any name lookup: no port, a port that is not a number.
    for bad in ["localhost", "127.0.0.1:notaport", ""] {
        match install_prometheus(bad) {
            Err(PrometheusInstallError::Address { addr, reason }) => {
                assert!(addr.contains(bad), "{addr}");
                assert!(!reason.is_empty());
            }
            other => panic!("{bad}: {other:?}"),
        }
    }
}

/// A port in use is a listen error naming the address. Called before the one install of the
/// process: after it, every install says `AlreadyInstalled` first.
fn a_taken_port_is_a_listen_error_naming_the_address() {
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap();
    match install_prometheus(addr) {
        Err(e @ PrometheusInstallError::Listen { .. }) => {
            assert!(e.to_string().contains(&addr.to_string()), "{e}");
        }
        other => panic!("{other:?}"),
    }
}

//! Busy queueing servers: three servers of different widths at about three fifths of their
//! joint capacity. The oldest attempt of a busy server waits behind the others; read as a
//! censored sample, it charged each busy server at every refresh, and the draw swung from
//! server to server, filling one queue after another. In a fleet that shows queueing, a
//! running attempt now counts only while its candidate is silent (`docs/tuning.md`, "A busy
//! queue is not a hang"). Measured when written, seeds 1-3: the coordinator's mean first byte
//! 52.5 ms before, 13.3 ms after; the oracle's 12.0 ms, `least-loaded`'s 14.9 ms.

#[path = "support/against_oracle.rs"]
mod against_oracle;

use against_oracle::mean_ttfb_coordinator_and_oracle;

const BUSY_QUEUES: &str = r#"
name = "busy-queues"

[workload]
loop = "open"
rate_per_s = 730.0
duration_s = 15.0
retries = 2
attempt_timeout_ms = 2000.0

[[candidates]]
id = "narrow-slow"
success = 0.993
failure = "transport"
failure_ms = { kind = "uniform", min = 0.5, max = 5.0 }
connect_ms = 1.8
ttfb_ms = 0.6
servers = 2
service_ms = { kind = "lognormal", mean = 9.2, sd = 3.3 }
queue_limit = 40

[[candidates]]
id = "narrow-fast"
success = 0.999
failure = "overload"
failure_ms = { kind = "uniform", min = 0.5, max = 5.0 }
connect_ms = 1.2
ttfb_ms = 0.6
servers = 2
service_ms = { kind = "exp", mean = 6.1 }
queue_limit = 35

[[candidates]]
id = "wide"
success = 0.988
failure = "timeout"
failure_ms = { kind = "uniform", min = 100.0, max = 500.0 }
connect_ms = 2.0
ttfb_ms = 0.7
servers = 5
service_ms = { kind = "exp", mean = 7.4 }
queue_limit = 7
"#;

#[test]
fn busy_queueing_servers_are_not_read_as_hanging() {
    let (coordinator, oracle) =
        mean_ttfb_coordinator_and_oracle(BUSY_QUEUES, "busy-queues", &[1, 2, 3]);
    eprintln!("busy queues: coordinator {coordinator:.1} ms, oracle {oracle:.1} ms");
    // About 4.4 x the oracle when every busy queue read as a hang.
    assert!(
        coordinator < 1.5 * oracle,
        "coordinator {coordinator:.1} ms against the oracle's {oracle:.1}"
    );
}

//! Real HTTP servers: adaptive limits, static limits and tower's p2c over one nginx fleet.
//!
//! Starts one Debian `nginx` per cap on loopback ports (see `tests/support/nginx.rs`): each
//! answers `GET /` after `--sleep-ms` and answers 503 at once past its cap. Then, arm by arm
//! over the same instances, `--workers` tasks share `--requests` GETs, sent with a pooled
//! keep-alive HTTP/1 client:
//!
//! - `adaptive`: through the coordinator with adaptive per-candidate limits
//!   (`[adaptive] enabled = true`), no static limit;
//! - `static N`: through the coordinator with the static limit `per_candidate = N`, for each
//!   `N` of `--static`; the best of them (most successes per second) is named;
//! - `tower p2c`: tower's power-of-two-choices `Balance` over the instances, each weighed by
//!   its requests in flight.
//!
//! Every arm reports each GET to its balancer (a 503 is an overload, a refused connection is
//! refused), and the table shows per arm the requests, successes, errors (503s and refused
//! connections among them), error rate, successes per second, the latency of the successful
//! requests from asking for a slot to the last byte (p50, p99), and the successes and failed
//! GETs of each instance.
//!
//! `--dead N` adds N candidates that refuse every connection at once (a dead server): each a
//! loopback port bound, for the whole run, by a socket that never listens, so a connect to it
//! is answered with a reset. Every arm gets them after the nginx instances (`dead-1`,
//! `dead-2`, ... in the table); a refused GET is reported to the coordinator as
//! `FailureClass::Refused` and counted by tower as a failed answer, like any other failure.
//!
//! `--crash MS` crashes a server mid-run: in each arm, MS milliseconds after the arm starts
//! sending, the last nginx instance (the last of `--caps`, the highest by default) is killed,
//! so that its port refuses every connection from then on (its requests in service end
//! without an answer), and it is started again, on the same port with the same config, once
//! the arm is over: every arm sees the same crash at the same time. A connection it refuses
//! is reported and counted as a dead candidate's (`refused`, and its failed GETs in its
//! column); an arm that ends before MS milliseconds sees no crash (said on stderr).
//!
//! `--stalls EVERY_MS,MAX_MS` blocks the client's thread now and then, the way a loaded
//! machine starves it, so the arms can be compared under that noise on a quiet machine.
//!
//! SIGINT (Ctrl-C) or SIGTERM stops the run: the fleet is stopped, its temporary directory
//! removed, and the example exits with 128 + the signal's number and a line saying so.
//!
//! Needs `apt-get install -y nginx libnginx-mod-http-echo`. Run with
//! `cargo run --release --example http_fleet --features actor -- --help`.

#[path = "../tests/support/nginx.rs"]
pub mod nginx;

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::net::Ipv4Addr;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper::{StatusCode, Uri};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use selection_coordinator::actor::Coordinator;
use selection_coordinator::core::UNLIMITED;
use selection_coordinator::{
    CandidateInfo, Config, CoordinatorHandle, FailureClass, Limits, Next, Outcome, Request,
};
use tower::balance::p2c::Balance;
use tower::discover::ServiceList;
use tower::load::{CompleteOnResponse, PendingRequests};
use tower::{Service, ServiceExt};

use nginx::Fleet;

/// The coordinator config of the adaptive arm.
pub const ADAPTIVE_CONFIG: &str = "[adaptive]\nenabled = true\n";

/// A GET without its whole answer by then has timed out (bounds a run against a stuck server).
pub const TIMEOUT: Duration = Duration::from_secs(2);

/// What to run.
#[derive(Clone, Debug, PartialEq)]
pub struct Options {
    /// One nginx instance per cap: requests it serves at once.
    pub caps: Vec<u32>,
    /// Each request's service time at nginx (`echo_sleep`), in milliseconds.
    pub sleep_ms: u64,
    /// Requests per arm.
    pub requests: usize,
    /// Concurrent workers per arm.
    pub workers: usize,
    /// The static per-candidate limits swept.
    pub statics: Vec<u32>,
    /// Which arms run: `adaptive`, `static`, `tower`.
    pub arms: Vec<String>,
    /// The coordinator's seed.
    pub seed: u64,
    /// The adaptive arm's config file (TOML); `None`: [`ADAPTIVE_CONFIG`].
    pub adaptive_config: Option<std::path::PathBuf>,
    /// Stalls of the client's thread, to reproduce a loaded machine on a quiet one: every
    /// `U(0, 2 x .0)` ms the thread is blocked for `U(0, .1)` ms (every arm alike).
    pub stalls: Option<(u64, u64)>,
    /// Dead candidates, after the nginx instances: addresses that refuse every connection.
    pub dead: usize,
    /// In each arm, this many milliseconds after it starts sending, the last nginx instance is
    /// killed (it is started again before the next arm); `None`: no crash.
    pub crash_after_ms: Option<u64>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            caps: vec![2, 4, 8, 16],
            sleep_ms: 20,
            requests: 2000,
            workers: 32,
            statics: vec![2, 4, 8, 16],
            arms: vec!["adaptive".into(), "static".into(), "tower".into()],
            seed: 1,
            adaptive_config: None,
            stalls: None,
            dead: 0,
            crash_after_ms: None,
        }
    }
}

const USAGE: &str = "\
usage: http_fleet [--caps 2,4,8,16] [--sleep-ms 20] [--requests 2000] [--workers 32]
                  [--static 2,4,8,16] [--arms adaptive,static,tower] [--seed 1]
                  [--adaptive-config FILE (default: [adaptive] enabled = true)]
                  [--stalls EVERY_MS,MAX_MS (block the client's thread for U(0, MAX_MS)
                   every U(0, 2 x EVERY_MS) ms: a loaded machine, reproduced)]
                  [--dead 0 (candidates after the nginx instances, dead-1, dead-2, ...,
                   whose loopback address refuses every connection at once)]
                  [--crash MS (in each arm, MS ms after it starts sending, kill the last
                   nginx instance, the last of --caps, and start it again after the arm)]";

fn list<T: std::str::FromStr>(flag: &str, value: &str) -> Result<Vec<T>, String> {
    value
        .split(',')
        .map(|v| {
            v.trim()
                .parse()
                .map_err(|_| format!("{flag}: cannot read {v:?} as a number"))
        })
        .collect()
}

fn number<T: std::str::FromStr>(flag: &str, value: &str) -> Result<T, String> {
    value
        .parse()
        .map_err(|_| format!("{flag}: cannot read {value:?} as a number"))
}

impl Options {
    /// Reads the command line (without the program name). `Ok(None)`: `--help` was asked.
    pub fn parse(args: impl IntoIterator<Item = String>) -> Result<Option<Options>, String> {
        let mut o = Options::default();
        let mut args = args.into_iter();
        while let Some(flag) = args.next() {
            if flag == "--help" || flag == "-h" {
                return Ok(None);
            }
            let value = args
                .next()
                .ok_or_else(|| format!("{flag} needs a value\n{USAGE}"))?;
            match flag.as_str() {
                "--caps" => o.caps = list(&flag, &value)?,
                "--sleep-ms" => o.sleep_ms = number(&flag, &value)?,
                "--requests" => o.requests = number(&flag, &value)?,
                "--workers" => o.workers = number(&flag, &value)?,
                "--static" => o.statics = list(&flag, &value)?,
                "--arms" => o.arms = value.split(',').map(|a| a.trim().to_string()).collect(),
                "--seed" => o.seed = number(&flag, &value)?,
                "--adaptive-config" => o.adaptive_config = Some(value.into()),
                "--dead" => o.dead = number(&flag, &value)?,
                "--crash" => o.crash_after_ms = Some(number(&flag, &value)?),
                "--stalls" => match list::<u64>(&flag, &value)?[..] {
                    [every, max] if every > 0 => o.stalls = Some((every, max)),
                    _ => {
                        return Err(format!(
                            "--stalls: give EVERY_MS,MAX_MS, EVERY_MS at least 1\n{USAGE}"
                        ))
                    }
                },
                _ => return Err(format!("unknown flag {flag}\n{USAGE}")),
            }
        }
        o.validate()?;
        Ok(Some(o))
    }

    fn validate(&self) -> Result<(), String> {
        if self.caps.is_empty() || self.caps.contains(&0) {
            return Err("--caps: give at least one cap, each at least 1".into());
        }
        if self.requests == 0 || self.workers == 0 {
            return Err("--requests and --workers must be at least 1".into());
        }
        if self.statics.contains(&0) {
            return Err("--static: every limit must be at least 1".into());
        }
        if self.dead > MAX_DEAD {
            return Err(format!("--dead: at most {MAX_DEAD} dead candidates"));
        }
        if let Some(ms) = self.crash_after_ms {
            if !(1..=MAX_CRASH_MS).contains(&ms) {
                return Err(format!(
                    "--crash: give the milliseconds after an arm's start, from 1 to {MAX_CRASH_MS}"
                ));
            }
        }
        if let Some(arm) = self
            .arms
            .iter()
            .find(|a| !["adaptive", "static", "tower"].contains(&a.as_str()))
        {
            return Err(format!(
                "--arms: unknown arm {arm:?} (adaptive, static, tower)"
            ));
        }
        Ok(())
    }

    fn runs(&self, arm: &str) -> bool {
        self.arms.iter().any(|a| a == arm)
    }
}

/// The most `--dead` candidates (each holds a loopback port for the run).
pub const MAX_DEAD: usize = 64;

/// The latest `--crash` (an hour, in milliseconds).
pub const MAX_CRASH_MS: u64 = 3_600_000;

/// What one arm measured.
#[derive(Clone, Debug)]
pub struct ArmReport {
    /// `adaptive`, `static N` or `tower p2c`.
    pub name: String,
    /// Requests sent.
    pub requests: usize,
    /// Requests that succeeded (one GET answered 200 each).
    pub ok: usize,
    /// GETs sent: every request's first one and its retries.
    pub attempts: usize,
    /// GETs answered 503 (the instance was past its cap).
    pub overloaded: usize,
    /// GETs whose connection was refused (a dead candidate's, every one; a crashed instance's
    /// once it is down).
    pub refused: usize,
    /// Successes per instance, in the order of [`Backends::names`].
    pub ok_per_instance: Vec<usize>,
    /// Failed GETs per instance, in the same order.
    pub failed_per_instance: Vec<usize>,
    /// Latency of each successful request (from its first ask to its answer's last byte,
    /// retries included), ms, sorted.
    pub latencies_ms: Vec<f64>,
    /// From the first request to the last answer.
    pub elapsed: Duration,
    /// Each instance's limit in force at the end (coordinator arms; empty for tower).
    pub final_limits: Vec<u32>,
}

impl ArmReport {
    /// GETs that failed (503s, refused connections, other statuses and transport errors,
    /// timeouts).
    pub fn errors(&self) -> usize {
        self.attempts - self.ok
    }

    /// Errors per GET sent.
    pub fn error_rate(&self) -> f64 {
        self.errors() as f64 / self.attempts.max(1) as f64
    }

    /// Successful requests per second.
    pub fn throughput(&self) -> f64 {
        self.ok as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// The `q` quantile of the successes' latency (nearest rank), ms; 0 without successes.
    pub fn latency_ms(&self, q: f64) -> f64 {
        if self.latencies_ms.is_empty() {
            return 0.0;
        }
        let rank = (q * self.latencies_ms.len() as f64).ceil() as usize;
        self.latencies_ms[rank.clamp(1, self.latencies_ms.len()) - 1]
    }
}

/// Every arm's report.
#[derive(Clone, Debug, Default)]
pub struct Comparison {
    /// The instances, in the order of the per-instance columns ([`Backends::names`]).
    pub instances: Vec<String>,
    /// The adaptive arm, if it ran.
    pub adaptive: Option<ArmReport>,
    /// One per static limit swept.
    pub statics: Vec<ArmReport>,
    /// Tower's p2c, if it ran.
    pub tower: Option<ArmReport>,
}

impl Comparison {
    /// The static arm with the most successes per second.
    pub fn best_static(&self) -> Option<&ArmReport> {
        self.statics
            .iter()
            .max_by(|a, b| a.throughput().total_cmp(&b.throughput()))
    }

    /// The table, one line per arm, under a line naming the instances of the per-instance
    /// columns.
    pub fn table(&self) -> String {
        let arms: Vec<&ArmReport> = self
            .adaptive
            .iter()
            .chain(&self.statics)
            .chain(&self.tower)
            .collect();
        let slashed = |values: &[usize]| {
            values
                .iter()
                .map(|n| n.to_string())
                .collect::<Vec<_>>()
                .join("/")
        };
        let oks: Vec<String> = arms.iter().map(|a| slashed(&a.ok_per_instance)).collect();
        let failed: Vec<String> = arms
            .iter()
            .map(|a| slashed(&a.failed_per_instance))
            .collect();
        let ok_width = oks.iter().map(String::len).max().unwrap_or(0).max(15);
        let failed_width = failed.iter().map(String::len).max().unwrap_or(0).max(19);
        let mut out = format!("instances: {}\n", self.instances.join(", "));
        out.push_str(&format!(
            "{:<11} {:>8} {:>6} {:>8} {:>6} {:>6} {:>7} {:>10} {:>12} {:>7} {:>7}  {:<ok_width$}  {:<failed_width$}  {}\n",
            "arm",
            "requests",
            "ok",
            "attempts",
            "errors",
            "503",
            "refused",
            "error rate",
            "throughput/s",
            "p50 ms",
            "p99 ms",
            "ok per instance",
            "failed per instance",
            "final limits"
        ));
        for ((a, ok), failed) in arms.iter().zip(&oks).zip(&failed) {
            let limits: Vec<String> = a
                .final_limits
                .iter()
                .map(|&l| match l {
                    UNLIMITED => "-".to_string(),
                    l => l.to_string(),
                })
                .collect();
            out.push_str(&format!(
                "{:<11} {:>8} {:>6} {:>8} {:>6} {:>6} {:>7} {:>10.4} {:>12.1} {:>7.1} {:>7.1}  {:<ok_width$}  {:<failed_width$}  {}\n",
                a.name,
                a.requests,
                a.ok,
                a.attempts,
                a.errors(),
                a.overloaded,
                a.refused,
                a.error_rate(),
                a.throughput(),
                a.latency_ms(0.50),
                a.latency_ms(0.99),
                ok,
                failed,
                limits.join("/")
            ));
        }
        if let Some(best) = self.best_static() {
            out.push_str(&format!("best static: {}\n", best.name));
        }
        out
    }
}

/// Blocks the current thread (the arms' only one) for `U(0, max_ms)` every `U(0, 2 x
/// every_ms)` ms, for as long as the actix `System` runs: what a client starved of CPU sees.
fn spawn_stalls(every_ms: u64, max_ms: u64, seed: u64) {
    actix::spawn(async move {
        // xorshift64: reproducible, and no dependency for an example's noise.
        let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let mut below = move |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n.max(1)
        };
        loop {
            tokio::time::sleep(Duration::from_millis(below(2 * every_ms))).await;
            std::thread::sleep(Duration::from_micros(below(max_ms * 1000)));
        }
    });
}

/// A loopback address that refuses every connection for as long as this lives: a port bound
/// by a socket that never listens (on Linux a connect to it is answered with a reset at once,
/// `ECONNREFUSED`). The socket does not set `SO_REUSEADDR`, so no other socket can bind the
/// port meanwhile, and a bound port is never handed out to another `bind` to port 0.
#[derive(Debug)]
pub struct DeadAddress {
    /// Its loopback port.
    pub port: u16,
    _socket: tokio::net::TcpSocket,
}

impl DeadAddress {
    /// Binds a free loopback port, without listening.
    pub fn bind() -> Result<DeadAddress, String> {
        let socket = tokio::net::TcpSocket::new_v4()
            .map_err(|e| format!("cannot open a socket for a dead address: {e}"))?;
        socket
            .bind((Ipv4Addr::LOCALHOST, 0).into())
            .map_err(|e| format!("cannot bind a loopback port for a dead address: {e}"))?;
        let port = socket
            .local_addr()
            .map_err(|e| format!("cannot read a dead address's port: {e}"))?
            .port();
        Ok(DeadAddress {
            port,
            _socket: socket,
        })
    }

    /// `http://127.0.0.1:<port>/`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/", self.port)
    }
}

/// What every arm runs over: the nginx instances, then the dead addresses (`--dead`). Dropped,
/// it stops the instances, removes their directory and frees the dead ports.
#[derive(Debug)]
pub struct Backends {
    /// Bound first, so that a port that cannot be had fails the run before nginx starts.
    pub dead: Vec<DeadAddress>,
    /// The nginx instances.
    pub fleet: Fleet,
}

impl Backends {
    /// Binds `options.dead` dead addresses and starts one nginx instance per cap.
    pub fn start(options: &Options) -> Result<Backends, String> {
        let dead = (0..options.dead)
            .map(|_| DeadAddress::bind())
            .collect::<Result<Vec<_>, _>>()?;
        let fleet = Fleet::start(&options.caps, options.sleep_ms)?;
        Ok(Backends { dead, fleet })
    }

    /// Every candidate's name, the coordinator's id for it: `nginx-0`, `nginx-1`, ... in the
    /// order of the caps, then `dead-1`, `dead-2`, ...
    pub fn names(&self) -> Vec<String> {
        let live = (0..self.fleet.instances.len()).map(|i| format!("nginx-{i}"));
        live.chain((1..=self.dead.len()).map(|k| format!("dead-{k}")))
            .collect()
    }

    /// Every candidate's address, in the order of [`Backends::names`].
    pub fn uris(&self) -> Result<Vec<Uri>, String> {
        let live = self.fleet.instances.iter().map(|i| i.url());
        live.chain(self.dead.iter().map(DeadAddress::url))
            .map(|url| url.parse::<Uri>().map_err(|e| e.to_string()))
            .collect()
    }

    /// The names with what each is: `nginx-0 (cap 2)`, ..., `dead-1 (refuses connections)`.
    pub fn described(&self) -> Vec<String> {
        let what = self
            .fleet
            .instances
            .iter()
            .map(|i| format!("cap {}", i.cap))
            .chain(self.dead.iter().map(|_| "refuses connections".to_string()));
        self.names()
            .into_iter()
            .zip(what)
            .map(|(name, what)| format!("{name} ({what})"))
            .collect()
    }
}

/// Runs the arms asked for, one after the other, over `backends` (every arm over the same
/// candidates). Call inside an actix `System`.
pub async fn compare(backends: &Backends, options: &Options) -> Result<Comparison, String> {
    if let Some((every_ms, max_ms)) = options.stalls {
        spawn_stalls(every_ms, max_ms, options.seed);
    }
    let uris = backends.uris()?;
    let names = backends.names();
    let mut comparison = Comparison {
        instances: backends.described(),
        ..Comparison::default()
    };
    if options.runs("adaptive") {
        let config = match &options.adaptive_config {
            Some(path) => Config::load(path),
            None => Config::from_toml_str(ADAPTIVE_CONFIG),
        }
        .map_err(|e| format!("the adaptive arm's config: {e}"))?;
        if !config.adaptive.enabled {
            return Err("the adaptive arm's config does not set [adaptive] enabled = true".into());
        }
        let limits = Limits::default();
        let arm = through_coordinator("adaptive", config, limits, &names, &uris, options);
        let report = with_crash(backends, options, arm).await?;
        comparison.adaptive = Some(report);
    }
    if options.runs("static") {
        for &limit in &options.statics {
            let limits = Limits {
                per_candidate: limit,
                ..Limits::default()
            };
            let name = format!("static {limit}");
            let arm = through_coordinator(&name, Config::default(), limits, &names, &uris, options);
            let report = with_crash(backends, options, arm).await?;
            comparison.statics.push(report);
        }
    }
    if options.runs("tower") {
        let arm = through_tower(&uris, options);
        comparison.tower = Some(with_crash(backends, options, arm).await?);
    }
    Ok(comparison)
}

/// Runs one arm; with `--crash MS`, kills the last nginx instance MS milliseconds after the
/// arm starts and starts it again (waiting until it answers) once the arm is over, before the
/// next one.
async fn with_crash(
    backends: &Backends,
    options: &Options,
    arm: impl Future<Output = Result<ArmReport, String>>,
) -> Result<ArmReport, String> {
    let Some(ms) = options.crash_after_ms else {
        return arm.await;
    };
    let last = backends.fleet.instances.len() - 1;
    let crash = async {
        tokio::time::sleep(Duration::from_millis(ms)).await;
        backends.fleet.stop(last)
    };
    tokio::pin!(arm);
    let report = tokio::select! {
        report = &mut arm => report,
        stopped = crash => match stopped {
            Ok(()) => arm.await,
            Err(e) => Err(e),
        },
    };
    let crashed = !backends.fleet.instances[last].running();
    backends.fleet.restart(last)?;
    let report = report?;
    if !crashed {
        eprintln!(
            "http_fleet: {} ended in {} ms, before the crash at {ms} ms: no crash in this arm",
            report.name,
            report.elapsed.as_millis()
        );
    }
    Ok(report)
}

type HttpClient = Client<HttpConnector, Empty<Bytes>>;

/// A pooled keep-alive HTTP/1 client (no Nagle delay).
fn http_client() -> HttpClient {
    let mut connector = HttpConnector::new();
    connector.set_nodelay(true);
    Client::builder(TokioExecutor::new())
        .pool_idle_timeout(Duration::from_secs(30))
        .build(connector)
}

/// One GET's result.
#[derive(Clone, Debug)]
pub struct Attempt {
    /// The instance asked.
    pub instance: usize,
    /// The status, or `None` if the request failed in transport.
    pub status: Option<StatusCode>,
    /// A transport failure was in connecting: a refused connection (a dead candidate's, a
    /// crashed instance's, or any other connect error).
    pub refused: bool,
    /// No answer within [`TIMEOUT`].
    pub timed_out: bool,
    /// Time to the response head.
    pub first_byte: Duration,
    /// Time to the last byte.
    pub duration: Duration,
    /// Body bytes.
    pub bytes: u64,
}

impl Attempt {
    /// What the coordinator learns from it.
    fn outcome(&self) -> Outcome {
        match self.status {
            Some(StatusCode::OK) => Outcome::success()
                .first_byte(self.first_byte)
                .bytes(self.bytes)
                .duration(self.duration),
            Some(StatusCode::SERVICE_UNAVAILABLE) => Outcome::failure(FailureClass::Overload),
            Some(_) => Outcome::failure(FailureClass::Transport),
            None if self.timed_out => Outcome::failure(FailureClass::Timeout),
            None if self.refused => Outcome::failure(FailureClass::Refused),
            None => Outcome::failure(FailureClass::Transport),
        }
    }
}

async fn get(client: &HttpClient, uri: &Uri, instance: usize) -> Attempt {
    let sent = Instant::now();
    let mut attempt = Attempt {
        instance,
        status: None,
        refused: false,
        timed_out: false,
        first_byte: Duration::ZERO,
        duration: Duration::ZERO,
        bytes: 0,
    };
    let exchange = async {
        match client.get(uri.clone()).await {
            Ok(response) => {
                attempt.first_byte = sent.elapsed();
                let status = response.status();
                if let Ok(body) = response.into_body().collect().await {
                    attempt.status = Some(status);
                    attempt.bytes = body.to_bytes().len() as u64;
                }
            }
            Err(e) => attempt.refused = e.is_connect(),
        }
    };
    attempt.timed_out = tokio::time::timeout(TIMEOUT, exchange).await.is_err();
    attempt.duration = sent.elapsed();
    attempt
}

/// A request is given up after this many failed GETs.
pub const MAX_ATTEMPTS: usize = 100;

/// Collects the attempts and requests of one arm.
struct Tally {
    name: String,
    started: Instant,
    requests: usize,
    attempts: usize,
    overloaded: usize,
    refused: usize,
    ok_per_instance: Vec<usize>,
    failed_per_instance: Vec<usize>,
    latencies_ms: Vec<f64>,
}

impl Tally {
    fn new(name: &str, instances: usize, requests: usize) -> Self {
        Tally {
            name: name.to_string(),
            started: Instant::now(),
            requests: 0,
            attempts: 0,
            overloaded: 0,
            refused: 0,
            ok_per_instance: vec![0; instances],
            failed_per_instance: vec![0; instances],
            latencies_ms: Vec::with_capacity(requests),
        }
    }

    /// Counts one GET; whether it succeeded.
    fn attempt(&mut self, attempt: &Attempt) -> bool {
        self.attempts += 1;
        match attempt.status {
            Some(StatusCode::OK) => {
                self.ok_per_instance[attempt.instance] += 1;
                return true;
            }
            Some(StatusCode::SERVICE_UNAVAILABLE) => self.overloaded += 1,
            None if attempt.refused => self.refused += 1,
            _ => {}
        }
        self.failed_per_instance[attempt.instance] += 1;
        false
    }

    /// Counts one request, with its latency if it succeeded.
    fn request(&mut self, ok: bool, latency: Duration) {
        self.requests += 1;
        if ok {
            self.latencies_ms.push(latency.as_secs_f64() * 1e3);
        }
    }

    fn report(mut self) -> ArmReport {
        let elapsed = self.started.elapsed();
        self.latencies_ms.sort_by(f64::total_cmp);
        ArmReport {
            name: self.name,
            requests: self.requests,
            ok: self.latencies_ms.len(),
            attempts: self.attempts,
            overloaded: self.overloaded,
            refused: self.refused,
            ok_per_instance: self.ok_per_instance,
            failed_per_instance: self.failed_per_instance,
            latencies_ms: self.latencies_ms,
            elapsed,
            final_limits: Vec::new(),
        }
    }
}

/// Takes the next request number, or `None` once `requests` have been taken.
fn take(next: &Cell<usize>, requests: usize) -> bool {
    let n = next.get();
    next.set(n + 1);
    n < requests
}

async fn through_coordinator(
    name: &str,
    config: Config,
    limits: Limits,
    names: &[String],
    uris: &[Uri],
    options: &Options,
) -> Result<ArmReport, String> {
    let mut coordinator =
        Coordinator::with_seed(config, limits, options.seed).map_err(|e| e.to_string())?;
    let mut index = HashMap::new();
    for (i, id) in names.iter().enumerate() {
        coordinator = coordinator
            .with_candidate(CandidateInfo::new(id.as_str()))
            .map_err(|e| e.to_string())?;
        index.insert(id.clone(), i);
    }
    let handle: CoordinatorHandle = coordinator.start_handle();
    let client = http_client();
    let index = Rc::new(index);
    let uris: Rc<[Uri]> = uris.into();
    let next = Rc::new(Cell::new(0));
    let tally = Rc::new(RefCell::new(Tally::new(name, uris.len(), options.requests)));
    let requests = options.requests;
    let workers: Vec<_> = (0..options.workers)
        .map(|_| {
            let (handle, client, index, uris) =
                (handle.clone(), client.clone(), index.clone(), uris.clone());
            let (next, tally) = (next.clone(), tally.clone());
            actix::spawn(async move {
                while take(&next, requests) {
                    let asked = Instant::now();
                    let mut ok = false;
                    for _ in 0..MAX_ATTEMPTS {
                        let mut permit = handle
                            .acquire(Request::any())
                            .await
                            .map_err(|e| e.to_string())?;
                        let instance = index[permit.candidate().as_str()];
                        let attempt = get(&client, &uris[instance], instance).await;
                        permit.report(attempt.outcome());
                        permit.done(Next::Finish);
                        ok = tally.borrow_mut().attempt(&attempt);
                        if ok {
                            break;
                        }
                    }
                    tally.borrow_mut().request(ok, asked.elapsed());
                }
                Ok::<(), String>(())
            })
        })
        .collect();
    for worker in workers {
        worker.await.map_err(|e| e.to_string())??;
    }
    let state = handle.state().await.map_err(|e| e.to_string())?;
    drop(handle);
    let tally = Rc::try_unwrap(tally)
        .map_err(|_| "a worker outlived its arm".to_string())?
        .into_inner();
    let mut report = tally.report();
    report.final_limits = vec![0; uris.len()];
    for c in &state.candidates {
        report.final_limits[index[c.info.id.as_str()]] = c.limit;
    }
    Ok(report)
}

/// One instance as a tower service; failures are answers, so the balancer never drops it.
#[derive(Clone)]
struct Instance {
    client: HttpClient,
    uri: Uri,
    index: usize,
}

impl Service<()> for Instance {
    type Response = Attempt;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Attempt, Infallible>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: ()) -> Self::Future {
        let this = self.clone();
        Box::pin(async move { Ok(get(&this.client, &this.uri, this.index).await) })
    }
}

async fn through_tower(uris: &[Uri], options: &Options) -> Result<ArmReport, String> {
    let client = http_client();
    let services: Vec<_> = uris
        .iter()
        .enumerate()
        .map(|(index, uri)| {
            let instance = Instance {
                client: client.clone(),
                uri: uri.clone(),
                index,
            };
            PendingRequests::new(instance, CompleteOnResponse::default())
        })
        .collect();
    let balance = Rc::new(tokio::sync::Mutex::new(Balance::new(ServiceList::new(
        services,
    ))));
    let next = Rc::new(Cell::new(0));
    let tally = Rc::new(RefCell::new(Tally::new(
        "tower p2c",
        uris.len(),
        options.requests,
    )));
    let requests = options.requests;
    let workers: Vec<_> = (0..options.workers)
        .map(|_| {
            let (balance, next, tally) = (balance.clone(), next.clone(), tally.clone());
            actix::spawn(async move {
                while take(&next, requests) {
                    let asked = Instant::now();
                    let mut ok = false;
                    for _ in 0..MAX_ATTEMPTS {
                        let call = {
                            let mut balance = balance.lock().await;
                            balance.ready().await.map_err(|e| e.to_string())?.call(())
                        };
                        let attempt = call.await.map_err(|e| e.to_string())?;
                        ok = tally.borrow_mut().attempt(&attempt);
                        if ok {
                            break;
                        }
                    }
                    tally.borrow_mut().request(ok, asked.elapsed());
                }
                Ok::<(), String>(())
            })
        })
        .collect();
    for worker in workers {
        worker.await.map_err(|e| e.to_string())??;
    }
    drop(balance);
    let tally = Rc::try_unwrap(tally)
        .map_err(|_| "a worker outlived its arm".to_string())?
        .into_inner();
    Ok(tally.report())
}

#[allow(dead_code)] // a plain function where the test binary includes this file
fn main() {
    std::process::exit(cli(std::env::args().skip(1)));
}

/// The example's command line (without the program name); returns its exit status: 0 once the
/// table is printed, 1 on an error, 2 on a bad command line, 128 + the signal's number when
/// SIGINT or SIGTERM interrupted the run (the fleet is stopped and its directory removed by
/// then).
pub fn cli(args: impl IntoIterator<Item = String>) -> i32 {
    let options = match Options::parse(args) {
        Ok(Some(options)) => options,
        Ok(None) => {
            println!("{USAGE}");
            return 0;
        }
        Err(e) => {
            eprintln!("{e}");
            return 2;
        }
    };
    // The fleet is stopped by the time `run_until_signal` returns, however it ends.
    match run_until_signal(&options) {
        Ok(Ended::Done(comparison)) => {
            print!("{}", comparison.table());
            0
        }
        Ok(Ended::Interrupted(signal)) => {
            eprintln!(
                "http_fleet: interrupted by {}; the nginx fleet is stopped and its directory removed",
                signal.name
            );
            signal.exit_status
        }
        Err(e) => {
            eprintln!("http_fleet: {e}");
            1
        }
    }
}

/// Starts the fleet (and binds the dead addresses), runs the arms in an actix `System` of
/// their own, stops the fleet.
#[allow(dead_code)] // tests/http_fleet.rs runs it; the example's own `main` can be interrupted
pub fn run(options: &Options) -> Result<Comparison, String> {
    let backends = start(options)?;
    let comparison = actix::System::new().block_on(compare(&backends, options));
    // The arms' tasks end with their runtime (dropped above), then the fleet stops.
    drop(backends);
    comparison
}

/// How [`run_until_signal`] ended.
#[derive(Debug)]
pub enum Ended {
    /// Every arm ran.
    Done(Box<Comparison>),
    /// A signal stopped the run; the fleet is stopped and its directory removed.
    Interrupted(Signal),
}

/// A signal that stops a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Signal {
    /// `SIGINT` or `SIGTERM`.
    pub name: &'static str,
    /// The exit status it gives: 128 + its number, as a shell reports a process it killed.
    pub exit_status: i32,
}

/// As [`run`], but SIGINT (Ctrl-C) and SIGTERM stop it: they are listened for before the fleet
/// starts, so one that comes while it starts is acted on once it is up; the arm running is
/// then abandoned, its tasks end with their runtime and the fleet is dropped (every instance
/// killed, the temporary directory removed) before this returns. From the first call on, the
/// two signals no longer end the process by themselves.
pub fn run_until_signal(options: &Options) -> Result<Ended, String> {
    let system = actix::System::new();
    let mut signals = system.block_on(async { Signals::listen() })?;
    let backends = start(options)?;
    let ended = system.block_on(async {
        tokio::select! {
            comparison = compare(&backends, options) => comparison.map(|c| Ended::Done(Box::new(c))),
            signal = signals.recv() => Ok(Ended::Interrupted(signal)),
        }
    });
    drop(system);
    drop(backends);
    ended
}

/// Binds the dead addresses, starts the fleet and says so on stderr (with the directory that
/// holds it).
fn start(options: &Options) -> Result<Backends, String> {
    let backends = Backends::start(options)?;
    let caps: Vec<String> = options.caps.iter().map(|c| c.to_string()).collect();
    let dead: Vec<String> = backends.dead.iter().map(|d| d.port.to_string()).collect();
    eprintln!(
        "{} nginx instances (caps {}) in {}{}, {} ms service, {} requests from {} workers per arm{}{}",
        options.caps.len(),
        caps.join("/"),
        backends.fleet.dir().display(),
        if dead.is_empty() {
            String::new()
        } else {
            format!(
                ", {} dead (refusing connections on port {})",
                dead.len(),
                dead.join(", ")
            )
        },
        options.sleep_ms,
        options.requests,
        options.workers,
        options.stalls.map_or(String::new(), |(e, m)| format!(
            ", client stalls of up to {m} ms every {e} ms on average"
        )),
        options.crash_after_ms.map_or(String::new(), |ms| format!(
            ", nginx-{} killed {ms} ms into each arm and restarted after it",
            options.caps.len() - 1
        ))
    );
    Ok(backends)
}

/// SIGINT and SIGTERM, caught from [`Signals::listen`] on (call it inside a runtime): one that
/// comes before [`Signals::recv`] is awaited is kept for it.
struct Signals {
    #[cfg(unix)]
    interrupt: tokio::signal::unix::Signal,
    #[cfg(unix)]
    terminate: tokio::signal::unix::Signal,
}

impl Signals {
    fn listen() -> Result<Signals, String> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            let listen =
                |kind, name| signal(kind).map_err(|e| format!("cannot listen for {name}: {e}"));
            Ok(Signals {
                interrupt: listen(SignalKind::interrupt(), "SIGINT")?,
                terminate: listen(SignalKind::terminate(), "SIGTERM")?,
            })
        }
        #[cfg(not(unix))]
        Ok(Signals {})
    }

    /// The next signal.
    async fn recv(&mut self) -> Signal {
        const SIGINT: Signal = Signal {
            name: "SIGINT",
            exit_status: 130,
        };
        #[cfg(unix)]
        {
            const SIGTERM: Signal = Signal {
                name: "SIGTERM",
                exit_status: 143,
            };
            tokio::select! {
                _ = self.interrupt.recv() => SIGINT,
                _ = self.terminate.recv() => SIGTERM,
            }
        }
        #[cfg(not(unix))]
        {
            // Listens from the first poll on only: Ctrl-C while the fleet starts ends the
            // process.
            let _ = tokio::signal::ctrl_c().await;
            SIGINT
        }
    }
}

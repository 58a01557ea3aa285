//! `selcoord demo`: the coordinator live — a real actix system with the `Coordinator` actor,
//! worker actors and simulated candidates from a scenario file, in real time, with the
//! Prometheus endpoint, a one-line status on stderr and an optional decision log.

use std::cell::RefCell;
use std::io::{IsTerminal, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::{Duration, Instant};

use actix::prelude::*;
use selection_coordinator::actor::{
    Answer, Coordinator, GetState, LoadOutcome, Ready, SaveSnapshot, Stop, SubscribeChannel,
};
use selection_coordinator::input::Num;
use selection_coordinator::metrics::CoordinatorMetrics;
use selection_coordinator::sim::{Action, LoopKind, Scenario, Workload};
use selection_coordinator::snapshot::SnapshotStore;
use selection_coordinator::{Next, Outcome};

mod arrivals;
mod discovery;
mod fleet;
mod reload;
mod stop;
mod world;
use arrivals::Arrivals;
use discovery::Membership;
use world::{World, RECENT_S};

/// The scenario run when none is named: built into the demo, made to move every panel of the
/// dashboard within seconds.
const DEFAULT_SCENARIO: &str = "demo";

const DEMO_SCENARIO: &str = include_str!("demo/scenario.toml");

/// How long stopping waits, at most, for the attempts in flight and the requests waiting.
const DRAIN_S: u64 = 5;

/// Arguments of `selcoord demo`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// `demo` (built in), another built-in scenario name, or a scenario TOML file. Its
    /// candidates, limits, coordinator config, workload shape and timeline run live until
    /// stopped (a closed loop's `operations` and an open loop's `duration_s` are ignored).
    #[arg(long, default_value = DEFAULT_SCENARIO)]
    scenario: String,
    /// A coordinator config replacing the scenario's: a preset name (default, lassie,
    /// livepeer), or a config file (TOML or JSON; it may define live A/B `arms` and
    /// `shadows`). A file is reloaded on SIGHUP and when it changes: a valid file is applied
    /// keeping statistics, waiting requests and permits; an invalid one is reported with its
    /// field paths and the running config stays.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Where to serve Prometheus metrics (`/metrics`): IP:PORT or HOST:PORT. Port 0 takes a
    /// free port, which the status line shows.
    #[arg(long, default_value = "127.0.0.1:9464", value_parser = listen_addr)]
    listen: SocketAddr,
    /// Stop after this many seconds (default: run until Ctrl-C or SIGTERM). Stopping then drains: no new
    /// requests, and the attempts in flight and the requests waiting get up to 5 more seconds
    /// to finish, so the summary and the decision log agree with the metrics.
    #[arg(long, allow_negative_numbers = true)]
    duration: Option<f64>,
    /// Time scale: 2 runs attempts, pauses and the timeline twice as fast as the scenario says.
    #[arg(long, default_value_t = 1.0, allow_negative_numbers = true)]
    speed: f64,
    /// Write decision records to this file as JSON lines.
    #[arg(long)]
    decision_log: Option<PathBuf>,
    /// Share of decisions written to the decision log (0 to 1; with --decision-log).
    #[arg(
        long,
        default_value_t = 1.0,
        allow_negative_numbers = true,
        requires = "decision_log"
    )]
    sample_rate: f64,
    /// Candidates labelled by name in the metrics; the rest are counted as `other`.
    #[arg(
        long,
        default_value_t = selection_coordinator::metrics::DEFAULT_LABEL_CAP,
        allow_negative_numbers = true,
        value_parser = crate::whole::<usize>
    )]
    label_cap: usize,
    /// Labels every series of the coordinator, its discovery and its fleet link
    /// `coordinator="<NAME>"` (the dashboard's `coordinator` variable), as an application
    /// running several coordinators names each.
    #[arg(long, value_name = "NAME")]
    metrics_name: Option<String>,
    /// Seed of the coordinator's draws and of the simulated candidates.
    #[arg(
        long,
        default_value_t = 1,
        allow_negative_numbers = true,
        value_parser = crate::whole::<u64>,
    )]
    seed: u64,
    /// Keeps what the coordinator learns in this snapshot file: loaded at start (a corrupt or
    /// incompatible file is moved aside and the run starts fresh), saved every
    /// `--snapshot-every` seconds and at stop. A demo run again with the same file starts
    /// from what the last one learned.
    #[arg(long, value_name = "FILE")]
    snapshot: Option<PathBuf>,
    /// Seconds between snapshot saves (with `--snapshot`).
    #[arg(
        long,
        default_value_t = 10.0,
        allow_negative_numbers = true,
        requires = "snapshot"
    )]
    snapshot_every: f64,
    #[command(flatten)]
    fleet: fleet::FleetArgs,
    #[command(flatten)]
    discovery: discovery::DiscoveryArgs,
}

/// The slowest and fastest `--speed`.
const MIN_SPEED: f64 = 1e-6;
const MAX_SPEED: f64 = 1e6;
/// The longest `--duration`, seconds (about 31 years).
const MAX_DURATION_S: f64 = 1e9;

/// Runs the subcommand.
pub(crate) fn run(args: Args) -> Result<(), String> {
    // Scenario times are at most 1e6 s, so every wait the demo derives stays a valid duration.
    if !(MIN_SPEED..=MAX_SPEED).contains(&args.speed) {
        return Err(format!(
            "--speed must be between 1e-6 and 1e6, got {:?}",
            args.speed
        ));
    }
    if !(0.0..=1.0).contains(&args.sample_rate) {
        return Err(format!(
            "--sample-rate must be between 0 and 1, got {}",
            Num(args.sample_rate)
        ));
    }
    if args
        .metrics_name
        .as_deref()
        .is_some_and(|n| n.trim().is_empty())
    {
        return Err(
            "--metrics-name must not be empty (leave it out for no `coordinator` label)".into(),
        );
    }
    args.fleet.check()?;
    let discovery = args.discovery.config()?;
    let snapshots = snapshot_store(&args)?;
    if let Some(d) = args.duration {
        if !(d > 0.0 && d <= MAX_DURATION_S) {
            return Err(format!(
                "--duration must be a positive number of seconds up to 1e9 \
                 (leave it out to run until Ctrl-C or SIGTERM), got {d:?}"
            ));
        }
    }
    let scenario = if args.scenario == DEFAULT_SCENARIO {
        Scenario::parse(DEMO_SCENARIO, "builtin:demo").map_err(|e| e.to_string())?
    } else {
        Scenario::load(&args.scenario).map_err(|e| {
            // Only where nothing of that name exists: the simulator's list of built-ins does
            // not have the demo's own scenario. A file's own problems, and a discovery
            // scenario's, stand as they are.
            let exists = std::path::Path::new(&args.scenario).exists()
                || selection_coordinator::discovery::sim::scenario_text(&args.scenario).is_some();
            if exists {
                e.to_string()
            } else {
                format!("{e}; `{DEFAULT_SCENARIO}` is built into the demo too")
            }
        })?
    };
    let (config, args) = demo_config(args)?;
    // A log streamed as the run goes, written in place: not replaced atomically as the
    // reports of `simulate` are (`report_file`).
    let log = match &args.decision_log {
        Some(path) => Some(
            std::fs::File::create(path)
                .map_err(|e| format!("--decision-log {}: cannot create it: {e}", path.display()))?,
        ),
        None => None,
    };
    // The exporter serves from a thread of its own; installing it first makes a busy port an
    // error before anything starts.
    #[cfg(feature = "prometheus")]
    let args = Args {
        listen: serve_metrics(args.listen)?,
        ..args
    };
    #[cfg(not(feature = "prometheus"))]
    eprintln!("selcoord demo: built without the `prometheus` feature: no metrics endpoint");
    System::new().block_on(live(args, scenario, config, discovery, log, snapshots))
}

/// The `--config` given: a preset by name (run as it is, with nothing to watch: `args.config`
/// is cleared), or a file (read now, and watched by the running demo).
fn demo_config(mut args: Args) -> Result<(Option<selection_coordinator::Config>, Args), String> {
    let Some(path) = args.config.clone() else {
        return Ok((None, args));
    };
    if path.exists() {
        return Ok((Some(reload::load(&path)?), args));
    }
    // A preset, or else the error that names the presets and says no such file exists.
    let name = path.to_string_lossy();
    let config = selection_coordinator::Config::from_name_or_path(&name)
        .map_err(|e| format!("--config {name}: {e}"))?;
    args.config = None;
    Ok((Some(config), args))
}

/// The store and period of `--snapshot` / `--snapshot-every`, checked before anything starts.
fn snapshot_store(args: &Args) -> Result<Option<(SnapshotStore, Duration)>, String> {
    let Some(path) = &args.snapshot else {
        return Ok(None);
    };
    let every = args.snapshot_every;
    if !(0.001..=MAX_DURATION_S).contains(&every) {
        return Err(format!(
            "--snapshot-every must be between 0.001 and 1e9 seconds, got {every:?}"
        ));
    }
    let name = path.file_name().and_then(|n| n.to_str()).ok_or_else(|| {
        format!(
            "--snapshot {}: give a file path whose last part is a UTF-8 file name",
            path.display()
        )
    })?;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let store =
        SnapshotStore::new(dir, name).map_err(|e| format!("--snapshot {}: {e}", path.display()))?;
    Ok(Some((store, Duration::from_secs_f64(every))))
}

/// `--listen`: an address, or a host name with a port (`localhost:9464`) resolved once, to
/// its first address.
fn listen_addr(s: &str) -> Result<SocketAddr, String> {
    use std::net::ToSocketAddrs;
    s.to_socket_addrs()
        .map_err(|e| format!("must be IP:PORT or HOST:PORT ({e})"))?
        .next()
        .ok_or_else(|| format!("{s} resolves to no address"))
}

/// Installs the Prometheus exporter on `listen` and returns the address it serves on. The
/// exporter binds the address itself and does not say which port the system picked for a port
/// of 0, so for one the port is asked of the system first (a listener bound and read, then
/// closed) and the exporter given it: the status line then shows the port really served.
#[cfg(feature = "prometheus")]
fn serve_metrics(listen: SocketAddr) -> Result<SocketAddr, String> {
    use selection_coordinator::metrics::{install_prometheus, PrometheusInstallError};
    if listen.port() != 0 {
        install_prometheus(listen).map_err(|e| format!("--listen: {e}"))?;
        return Ok(listen);
    }
    let mut tries = 0;
    loop {
        let free = std::net::TcpListener::bind(listen)
            .and_then(|l| l.local_addr())
            .map_err(|e| format!("--listen: cannot listen on {listen}: {e}"))?;
        tries += 1;
        match install_prometheus(free) {
            Ok(()) => return Ok(free),
            // Taken by someone else between the two binds: ask for another.
            Err(PrometheusInstallError::Listen { .. }) if tries < 5 => {}
            Err(e) => return Err(format!("--listen: {e}")),
        }
    }
}

async fn live(
    args: Args,
    scenario: Scenario,
    config: Option<selection_coordinator::Config>,
    discovery: Option<selection_coordinator::discovery::DiscoveryConfig>,
    log: Option<std::fs::File>,
    snapshots: Option<(SnapshotStore, Duration)>,
) -> Result<(), String> {
    let hup = args.config.as_ref().map(|_| reload::hangup());
    let config = config.unwrap_or_else(|| {
        scenario
            .coordinator
            .as_ref()
            .map(|c| c.0.clone())
            .unwrap_or_default()
    });
    let mut coordinator = Coordinator::with_seed(config, scenario.limits, args.seed)
        .map_err(|e| format!("scenario {}: {e}", scenario.name))?
        .with_metrics(match &args.metrics_name {
            Some(name) => CoordinatorMetrics::new(args.label_cap).named(name),
            None => CoordinatorMetrics::new(args.label_cap),
        });
    let world = Rc::new(RefCell::new(World::new(&scenario, args.seed)));
    let mut infos = std::collections::HashMap::new();
    let mut present = Vec::new();
    for (id, spec) in scenario.expanded() {
        let spec = &scenario.candidates[spec];
        let info = spec.info(&id);
        if spec.present {
            if discovery.is_none() {
                coordinator = coordinator
                    .with_candidate(info.clone())
                    .map_err(|e| format!("scenario {}: {e}", scenario.name))?;
            }
            world.borrow_mut().join(&id);
            present.push(id.clone());
        }
        infos.insert(id, info);
    }
    if let Some(((store, every), path)) = snapshots.zip(args.snapshot.as_ref()) {
        coordinator = coordinator
            .with_snapshots(store, Some(every))
            .map_err(|e| format!("--snapshot {}: {e}", path.display()))?;
    }
    let coordinator = coordinator.start();
    if args.snapshot.is_some() {
        if let Ok(state) = coordinator.send(GetState).await {
            // A file moved aside or not applied is already reported by the library's warning.
            if let Some(outcome) = load_outcome(&state.snapshots.loaded) {
                let path = state.snapshots.path.as_deref().unwrap_or(Path::new(""));
                eprintln!("selcoord demo: snapshot {}: {outcome}", path.display());
            }
        }
    }
    let membership = Membership::start(
        discovery,
        &coordinator,
        infos,
        present,
        (args.seed, args.speed),
        args.metrics_name.as_deref(),
    )?;
    if membership.discovers() {
        eprintln!(
            "selcoord demo: candidates come through discovery, refreshed every {} s",
            args.discovery.interval_s()
        );
    }
    let sharing = args
        .fleet
        .start(coordinator.clone(), args.metrics_name.as_deref())
        .await?;
    let watcher = args
        .config
        .clone()
        .zip(hup)
        .map(|(path, hup)| actix::spawn(reload::watch(path, coordinator.clone(), hup)));

    let writer = match log {
        Some(file) => {
            let rx = coordinator
                .send(SubscribeChannel {
                    rate: args.sample_rate,
                    capacity: 4096,
                })
                .await
                .map_err(|e| format!("the coordinator stopped: {e}"))?;
            Some(actix::spawn(write_records(rx, file)))
        }
        None => None,
    };

    let workload = Rc::new(scenario.workload.clone());
    let speed = args.speed;
    let load = LoadShape {
        coordinator: coordinator.clone(),
        world: world.clone(),
        workload: workload.clone(),
        speed,
    };
    match workload.kind {
        LoopKind::Closed => {
            for _ in 0..workload.workers.max(1) {
                Worker::new(load.clone(), true).start();
            }
        }
        LoopKind::Open => {
            Arrivals {
                load: load.clone(),
                next_at: Instant::now(),
            }
            .start();
        }
    }
    schedule_timeline(&scenario, &membership, &world, speed);

    let started = Instant::now();
    let status = actix::spawn(status_line(coordinator.clone(), world.clone(), args.listen));
    let stop_after = args.duration.map(Duration::from_secs_f64);
    tokio::select! {
        _ = async {
            match stop_after {
                Some(d) => actix::clock::sleep(d).await,
                None => std::future::pending().await,
            }
        } => {}
        _ = stop::requested() => {}
    }
    status.abort();
    if let Some(w) = watcher {
        w.abort();
    }
    // Drain: no new requests; the attempts running and the requests waiting finish (for at
    // most five seconds), so the summary and the decision log agree with the metrics.
    world.borrow_mut().stopping = true;
    let drain_until = Instant::now() + Duration::from_secs(DRAIN_S);
    let mut said = false;
    let state = loop {
        let state = coordinator.send(GetState).await.ok();
        let idle = match &state {
            Some(s) => s.in_flight == 0 && s.waiting == 0,
            None => true, // the coordinator is gone
        };
        if idle || Instant::now() > drain_until {
            break state;
        }
        if let (Some(s), false) = (&state, said) {
            // Ends the status line; the summary below ends this one.
            eprint!(
                "\nselcoord demo: draining: waiting up to {DRAIN_S} s for the attempts in flight \
                 ({}) and the requests waiting ({})",
                s.in_flight, s.waiting
            );
            said = true;
        }
        actix::clock::sleep(Duration::from_millis(20)).await;
    };
    // Built without the fleet feature, `Sharing` holds nothing to drop.
    #[cfg_attr(not(feature = "fleet"), allow(clippy::drop_non_drop))]
    drop(sharing);
    // The last save, answered here (the one at stop is not), so the summary can say whether
    // the file holds this run.
    let last_save = match &args.snapshot {
        Some(_) => match coordinator.send(SaveSnapshot).await {
            Ok(Ok(_)) => Some("written".to_string()),
            Ok(Err(e)) => Some(format!("failed: {e}")),
            Err(_) => Some("not made: the coordinator is gone".to_string()),
        },
        None => None,
    };
    let _ = coordinator.send(Stop).await;
    let written = match writer {
        // The subscription ends with the coordinator, which ends the writer.
        Some(handle) => match tokio::time::timeout(Duration::from_secs(5), handle).await {
            Ok(Ok(result)) => Some(result?),
            _ => return Err("the decision log writer did not finish".into()),
        },
        None => None,
    };
    let w = world.borrow();
    eprintln!(
        "\nselcoord demo: stopped after {:.1} s: {} decisions, {} attempts ({} failed){}{}",
        started.elapsed().as_secs_f64(),
        state.as_ref().map_or(0, |s| s.counters.decisions),
        w.attempts,
        w.failures,
        match (written, &args.decision_log) {
            (Some(n), Some(p)) => format!(", {n} decision records in {}", p.display()),
            _ => String::new(),
        },
        match (&state, &args.snapshot, &last_save) {
            (Some(s), Some(p), Some(last)) => format!(
                ", snapshots in {}: {} written while running, {} failed (last error: {}); \
                 the last save at stop {last}",
                p.display(),
                s.snapshots.saves,
                s.snapshots.save_errors,
                s.snapshots.last_error.as_deref().unwrap_or("none"),
            ),
            _ => String::new(),
        }
    );
    Ok(())
}

/// What the snapshot load found, in a few words; `None` when the library's warning has said
/// it (a file moved aside, or one that could not be applied).
fn load_outcome(loaded: &LoadOutcome) -> Option<String> {
    match loaded {
        LoadOutcome::NotConfigured => Some("no store".into()),
        LoadOutcome::Missing => Some("no file yet: starting fresh".into()),
        LoadOutcome::Restored { candidates } => Some(format!(
            "restored what an earlier run learned of {candidates} candidates"
        )),
        LoadOutcome::Quarantined { .. } | LoadOutcome::Failed { .. } => None,
    }
}

/// Writes decision records as JSON lines until the subscription closes; returns how many.
async fn write_records(
    mut rx: tokio::sync::mpsc::Receiver<selection_coordinator::DecisionRecord>,
    file: std::fs::File,
) -> Result<u64, String> {
    let mut out = std::io::BufWriter::new(file);
    let mut n = 0u64;
    while let Some(record) = rx.recv().await {
        serde_json::to_writer(&mut out, &record).map_err(|e| format!("decision log: {e}"))?;
        out.write_all(b"\n")
            .map_err(|e| format!("decision log: {e}"))?;
        n += 1;
    }
    out.flush().map_err(|e| format!("decision log: {e}"))?;
    Ok(n)
}

/// The one-line live status on stderr, once a second. Decisions per second cover the last
/// second; the failure rate and the top shares the attempts started in the last [`RECENT_S`]
/// seconds, so a degradation shows within seconds; the summary at the end is cumulative.
async fn status_line(
    coordinator: Addr<Coordinator>,
    world: Rc<RefCell<World>>,
    listen: SocketAddr,
) {
    let tty = std::io::stderr().is_terminal();
    let started = Instant::now();
    let mut last = (0u64, Instant::now());
    let mut every = actix::clock::interval(Duration::from_secs(1));
    let mut ticks = 0u64;
    every.tick().await; // the first tick is immediate: nothing to report yet
    loop {
        every.tick().await;
        let Ok(state) = coordinator.send(GetState).await else {
            return;
        };
        let decisions = state.counters.decisions;
        let rate = (decisions - last.0) as f64 / last.1.elapsed().as_secs_f64().max(1e-9);
        last = (decisions, Instant::now());
        let mut w = world.borrow_mut();
        w.next_second();
        let limit = match state.limits.global {
            u32::MAX => "∞".to_string(),
            g => g.to_string(),
        };
        let line = format!(
            "[{:6.1}s] decisions {decisions} ({rate:.0}/s) | waiting {} | in flight {}/{limit} | \
             ejected {} | last {RECENT_S} s: failures {:.1}%, top {} | http://{listen}/metrics",
            started.elapsed().as_secs_f64(),
            state.waiting,
            state.in_flight,
            state.candidates.iter().filter(|c| c.ejected).count(),
            w.recent_failure_pct(),
            w.recent_top(3),
        );
        drop(w);
        ticks += 1;
        if tty {
            eprint!("\r\x1b[2K{line}");
        } else if ticks % 5 == 1 {
            // Not a terminal (a log file): a line every five seconds instead of redrawing.
            eprintln!("{line}");
        }
    }
}

/// What every worker shares.
#[derive(Clone)]
struct LoadShape {
    coordinator: Addr<Coordinator>,
    world: Rc<RefCell<World>>,
    workload: Rc<Workload>,
    speed: f64,
}

impl LoadShape {
    fn real(&self, scenario_ms: f64) -> Duration {
        Duration::from_secs_f64((scenario_ms / 1000.0 / self.speed).max(0.0))
    }
}

/// A worker: asks for a slot, runs the attempt against the simulated candidate, reports,
/// retries a failure on another candidate while it has retries left, then (in a closed loop)
/// thinks and asks again.
struct Worker {
    load: LoadShape,
    repeat: bool,
    tries: u32,
}

impl Worker {
    fn new(load: LoadShape, repeat: bool) -> Self {
        Worker {
            load,
            repeat,
            tries: 0,
        }
    }

    fn ask(&mut self, ctx: &mut Context<Self>) {
        if self.load.world.borrow().stopping {
            ctx.stop();
            return;
        }
        self.tries = 0;
        let request = self.load.world.borrow_mut().request(&self.load.workload);
        self.load
            .coordinator
            .do_send(Ready::new(request, ctx.address().recipient()));
    }

    /// The request is over: think, then ask again (closed loop) or stop (open loop).
    fn next(&mut self, ctx: &mut Context<Self>) {
        if self.repeat {
            // A pause of at least 1 ms keeps an all-failing scenario from spinning.
            let pause = self.load.real(self.load.workload.think_ms.max(1.0));
            ctx.run_later(pause, |act, ctx| act.ask(ctx));
        } else {
            ctx.stop();
        }
    }
}

impl Actor for Worker {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        self.ask(ctx);
    }
}

impl Handler<Answer> for Worker {
    type Result = ();

    fn handle(&mut self, answer: Answer, ctx: &mut Context<Self>) {
        match answer {
            Answer::Granted(mut permit) => {
                let (outcome, ms) = self
                    .load
                    .world
                    .borrow_mut()
                    .attempt(permit.candidate(), &self.load.workload);
                ctx.run_later(self.load.real(ms), move |act, ctx| {
                    act.load.world.borrow_mut().finished(permit.candidate());
                    permit.report(outcome);
                    let retry = matches!(outcome, Outcome::Failure(_))
                        && act.tries < act.load.workload.retries;
                    if retry {
                        act.tries += 1;
                        permit.done(Next::Retry);
                    } else {
                        permit.done(Next::Finish);
                        act.next(ctx);
                    }
                });
            }
            Answer::Rejected { .. } => self.next(ctx),
        }
    }
}

/// Plays the scenario's timeline in scaled real time.
fn schedule_timeline(
    scenario: &Scenario,
    membership: &Membership,
    world: &Rc<RefCell<World>>,
    speed: f64,
) {
    for ev in scenario.timeline.clone() {
        let membership = membership.clone();
        let world = world.clone();
        let spec = world.borrow().spec(ev.candidate.get_ref()).cloned();
        let Some(spec) = spec else { continue };
        actix::spawn(async move {
            actix::clock::sleep(Duration::from_secs_f64(ev.at_s / speed)).await;
            let id = ev.candidate.get_ref().clone();
            match ev.action {
                Action::Degrade => world.borrow_mut().degrade(&id, &ev),
                Action::Heal => world.borrow_mut().heal(&id),
                Action::Join => {
                    if membership.join(spec.info(&id)).await {
                        world.borrow_mut().join(&id);
                    }
                }
                Action::Leave => {
                    world.borrow_mut().leave(&id);
                    membership.leave(&id).await;
                }
            }
        });
    }
}

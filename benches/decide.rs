//! Decision cost: the coordinator's pure core against the naive many-way draw, lassie's
//! sort-and-walk and tower's power-of-two-choices, all in one run so the ratios are fair.
//!
//! Every coordinator iteration is one full cycle through the core: `ready` (the draw and the
//! grant), `poll_event`, `outcome` (the statistics update) and `done` (the slot freed). The
//! core's clock advances 1 µs per cycle, so the periodic O(n) score refresh (every
//! `refresh_ms` of core time, stretched for large fleets) runs as it would at a steady
//! million decisions per second;
//! `refresh/<n>` measures one refresh on its own so its share at any other rate can be worked
//! out. See `docs/performance.md`.

use std::convert::Infallible;
use std::future::Future;
use std::hint::black_box;
use std::pin::pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use criterion::{criterion_group, BatchSize, BenchmarkId, Criterion};
use rand::distr::{weighted::WeightedIndex, Distribution};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use selection_coordinator::score::Stats;
use selection_coordinator::{
    CandidateId, CandidateInfo, Config, Core, Event, Grant, Limits, Next, Outcome, Request,
};

const SIZES: [usize; 5] = [10, 100, 1_000, 10_000, 100_000];
const STEP: Duration = Duration::from_micros(1);

/// Learned statistics that differ per candidate, so every score component is live.
fn stats_for(i: usize, rng: &mut SmallRng) -> Stats {
    Stats {
        success: Some(rng.random_range(0.5..1.0)),
        connect_ms: Some(rng.random_range(5.0..80.0)),
        ttfb_ms: Some(rng.random_range(20.0..400.0)),
        bandwidth_bps: Some(rng.random_range(1e5..1e8)),
        last_sample_s: Some(0.0),
        attempts: 20 + (i as u64 % 7),
        successes: 18,
        ..Stats::default()
    }
}

/// A measured outcome: timings from a small fixed table, varied per call.
fn outcome_for(k: u64) -> Outcome {
    const MS: [f64; 8] = [12.0, 35.0, 8.0, 60.0, 22.0, 15.0, 41.0, 28.0];
    let t = MS[(k % 8) as usize];
    Outcome::success_with(t, 3.0 * t, 64 * 1024, 10.0 * t)
}

/// The config the coordinator benches run: `DECIDE_CONFIG=<file>` (TOML or JSON) if set, to
/// measure what a scoring feature costs or to compare trees on the same scoring; else the
/// default.
fn bench_config() -> Config {
    match std::env::var("DECIDE_CONFIG") {
        Ok(path) => Config::load(std::path::Path::new(&path)).expect("DECIDE_CONFIG is valid"),
        Err(_) => Config::default(),
    }
}

/// A core with `n` candidates carrying statistics, warmed up so the all-candidate averages
/// are set, plus the clock it runs on.
fn warm_core(n: usize) -> (Core, SmallRng, Instant) {
    let start = Instant::now();
    let mut rng = SmallRng::seed_from_u64(42);
    let mut core = Core::new(bench_config(), start).expect("default config is valid");
    for i in 0..n {
        let stats = stats_for(i, &mut rng);
        core.add_with_stats(CandidateInfo::new(format!("c{i}")), stats, start, &mut rng)
            .expect("fresh candidate");
    }
    let mut now = start;
    for k in 0..1_000 {
        now += STEP;
        cycle(&mut core, Request::any(), now, &mut rng, k);
    }
    (core, rng, now)
}

/// One decision cycle through the core: draw and grant, statistics update, slot freed.
#[inline]
fn cycle(core: &mut Core, request: Request, now: Instant, rng: &mut SmallRng, k: u64) {
    core.ready(request, now, rng).expect("valid request");
    let Some(Event::Granted(Grant { attempt, .. })) = core.poll_event() else {
        panic!("an unlimited core grants at once");
    };
    core.outcome(attempt, outcome_for(k), now)
        .expect("first report");
    core.done(attempt, Next::Finish, now, rng)
        .expect("live attempt");
}

/// The coordinator: one full decision cycle per call.
fn coordinator_step(n: usize) -> impl FnMut() {
    let (mut core, mut rng, mut now) = warm_core(n);
    let mut k = 0u64;
    move || {
        now += STEP;
        k += 1;
        cycle(&mut core, Request::any(), now, &mut rng, k);
    }
}

/// One full score refresh (the coarse tick), O(n): its share per decision is this time divided
/// by the decisions made per refresh period.
fn refresh_step(n: usize) -> impl FnMut() {
    let (mut core, mut rng, mut now) = warm_core(n);
    // The default period at this fleet size (`refresh_ms`, stretched per candidate), so every
    // step's tick is due a refresh.
    let period = Duration::from_secs_f64(Config::default().refresh_period_s(n));
    move || {
        now += period;
        core.tick(now, &mut rng);
    }
}

/// Churn: one candidate removed and a new one added, then one decision cycle. Neither the
/// removal nor the addition rescores the fleet (without stake in the scoring), so this stays
/// near the `coordinator/<n>` cycle plus two candidates' refresh.
fn churn_step(n: usize) -> impl FnMut() {
    let (mut core, mut rng, mut now) = warm_core(n);
    let (mut k, mut oldest, mut next) = (0u64, 0usize, n);
    move || {
        now += STEP;
        k += 1;
        core.remove_candidate(&CandidateId::new(format!("c{oldest}")), now, &mut rng)
            .expect("a live candidate");
        let stats = stats_for(next, &mut rng);
        core.add_with_stats(CandidateInfo::new(format!("c{next}")), stats, now, &mut rng)
            .expect("a fresh candidate");
        (oldest, next) = (oldest + 1, next + 1);
        cycle(&mut core, Request::any(), now, &mut rng, k);
    }
}

/// Plain decision cycles over 1,000 candidates (one attempt each at most) while `waiters`
/// requests wait for the one candidate they name, held by an attempt that never ends: the
/// cost of waiters no candidate can serve on everyone else's grants (they are parked, so
/// it should not grow with their number).
fn parked_step(waiters: usize) -> impl FnMut() {
    let (mut core, mut rng, mut now) = warm_core(1_000);
    let limits = Limits {
        per_candidate: 1,
        ..Limits::default()
    };
    core.set_limits(limits, now, &mut rng)
        .expect("valid limits");
    let c0 = CandidateId::new("c0");
    core.ready(Request::only([c0.clone()]), now, &mut rng)
        .expect("valid request");
    while core.poll_event().is_some() {}
    for _ in 0..waiters {
        core.ready(Request::only([c0.clone()]), now, &mut rng)
            .expect("valid request");
    }
    assert_eq!(core.waiting(), waiters, "the waiters wait");
    let mut k = 0u64;
    move || {
        now += STEP;
        k += 1;
        cycle(&mut core, Request::any(), now, &mut rng, k);
    }
}

/// 64 requests, each naming a random subset of `k_size` of the 10,000 candidates (seeded by
/// `k_size`, so both subset benches draw the same subsets).
fn subset_requests(k_size: usize) -> Vec<Request> {
    let mut pick = SmallRng::seed_from_u64(k_size as u64);
    (0..64)
        .map(|_| {
            let ids: Vec<CandidateId> = rand::seq::index::sample(&mut pick, 10_000, k_size)
                .into_iter()
                .map(|i| CandidateId::new(format!("c{i}")))
                .collect();
            Request::only(ids)
        })
        .collect()
}

/// The coordinator over explicit subsets of `k` out of 10,000 candidates (the evaluated
/// draw), as `decide/coordinator_subset/<k>`; the request's clone is counted too.
fn subset_step(k_size: usize) -> impl FnMut() {
    let (mut core, mut rng, mut now) = warm_core(10_000);
    let subsets = subset_requests(k_size);
    let mut k = 0u64;
    move || {
        now += STEP;
        k += 1;
        cycle(
            &mut core,
            subsets[(k % 64) as usize].clone(),
            now,
            &mut rng,
            k,
        );
    }
}

/// The naive many-way draw: rebuild `WeightedIndex` from every candidate's cached weight and
/// sample; then update the winner's statistics and weight.
fn naive_step(n: usize) -> impl FnMut() {
    let mut rng = SmallRng::seed_from_u64(42);
    let mut stats: Vec<LassieStats> = (0..n).map(|_| LassieStats::random(&mut rng)).collect();
    let overall = LassieStats::overall(&stats);
    let mut weights: Vec<f64> = stats.iter().map(|s| s.score(&overall)).collect();
    let mut k = 0u64;
    move || {
        k += 1;
        let dist = WeightedIndex::new(&weights).expect("positive weights");
        let i = dist.sample(&mut rng);
        stats[i].observe(k);
        weights[i] = stats[i].score(&overall);
        black_box(i);
    }
}

/// lassie's way: score every candidate, sort by score, walk the sorted list with one roll,
/// update the winner's statistics. The buffer is reused (lassie allocates it each time).
fn lassie_step(n: usize) -> impl FnMut() {
    let mut rng = SmallRng::seed_from_u64(42);
    let mut stats: Vec<LassieStats> = (0..n).map(|_| LassieStats::random(&mut rng)).collect();
    let overall = LassieStats::overall(&stats);
    let mut scored: Vec<(f64, usize)> = Vec::with_capacity(n);
    let mut k = 0u64;
    move || {
        k += 1;
        scored.clear();
        scored.extend(
            stats
                .iter()
                .enumerate()
                .map(|(i, s)| (s.score(&overall), i)),
        );
        scored.sort_unstable_by(|a, b| b.0.total_cmp(&a.0));
        let total: f64 = scored.iter().map(|x| x.0).sum();
        let mut roll = rng.random::<f64>() * total;
        let mut winner = scored[scored.len() - 1].1;
        for &(s, i) in &scored {
            if roll < s {
                winner = i;
                break;
            }
            roll -= s;
        }
        stats[winner].observe(k);
        black_box(winner);
    }
}

/// tower's `Balance` (power of two choices over `PendingRequests`) across n services that are
/// always ready: one `poll_ready`, one `call`, the response polled to completion (which
/// releases the pending count).
fn tower_p2c_step(n: usize) -> impl FnMut() {
    use tower::balance::p2c::Balance;
    use tower::discover::ServiceList;
    use tower::load::{CompleteOnResponse, PendingRequests};
    use tower::{service_fn, Service};

    let services: Vec<_> = (0..n)
        .map(|i| {
            PendingRequests::new(
                service_fn(move |k: u64| std::future::ready(Ok::<_, Infallible>(k ^ i as u64))),
                CompleteOnResponse::default(),
            )
        })
        .collect();
    let mut balance: Balance<_, u64> = Balance::new(ServiceList::new(services));
    let waker = futures::task::noop_waker();
    // The first poll discovers every service: setup, not a decision.
    let mut cx = Context::from_waker(&waker);
    assert!(matches!(balance.poll_ready(&mut cx), Poll::Ready(Ok(()))));
    let mut k = 0u64;
    move || {
        let mut cx = Context::from_waker(&waker);
        k += 1;
        let Poll::Ready(Ok(())) = balance.poll_ready(&mut cx) else {
            panic!("always-ready services");
        };
        let fut = pin!(balance.call(k));
        match fut.poll(&mut cx) {
            Poll::Ready(Ok(v)) => {
                black_box(v);
            }
            _ => panic!("an always-ready service answers at once"),
        }
    }
}

fn decide(c: &mut Criterion) {
    let mut g = c.benchmark_group("decide");
    g.measurement_time(Duration::from_secs(2))
        .warm_up_time(Duration::from_secs(1))
        .sample_size(30);
    for n in SIZES {
        let mut step = coordinator_step(n);
        g.bench_function(BenchmarkId::new("coordinator", n), |b| b.iter(&mut step));
        drop(step);
        let mut step = refresh_step(n);
        g.bench_function(BenchmarkId::new("refresh", n), |b| b.iter(&mut step));
        drop(step);
        let mut step = churn_step(n);
        g.bench_function(BenchmarkId::new("churn", n), |b| b.iter(&mut step));
        drop(step);
        let mut step = naive_step(n);
        g.bench_function(BenchmarkId::new("naive_weighted_index", n), |b| {
            b.iter(&mut step)
        });
        drop(step);
        let mut step = lassie_step(n);
        g.bench_function(BenchmarkId::new("lassie_sort_roulette", n), |b| {
            b.iter(&mut step)
        });
        drop(step);
        let mut step = tower_p2c_step(n);
        g.bench_function(BenchmarkId::new("tower_p2c", n), |b| b.iter(&mut step));
    }
    for waiters in [0, 10_000] {
        let mut step = parked_step(waiters);
        g.bench_function(BenchmarkId::new("parked_waiters", waiters), |b| {
            b.iter(&mut step)
        });
    }
    g.finish();
}

/// The statistics lassie keeps per candidate, scored the way lassie scores them.
#[derive(Clone, Copy)]
struct LassieStats {
    success: f64,
    connect_ms: f64,
    ttfb_ms: f64,
    bandwidth: f64,
    verified: bool,
}

impl LassieStats {
    fn random(rng: &mut SmallRng) -> Self {
        LassieStats {
            success: rng.random_range(0.5..1.0),
            connect_ms: rng.random_range(5.0..80.0),
            ttfb_ms: rng.random_range(20.0..400.0),
            bandwidth: rng.random_range(1e5..1e8),
            verified: rng.random_bool(0.3),
        }
    }

    fn overall(all: &[LassieStats]) -> LassieStats {
        let n = all.len() as f64;
        LassieStats {
            success: all.iter().map(|s| s.success).sum::<f64>() / n,
            connect_ms: all.iter().map(|s| s.connect_ms).sum::<f64>() / n,
            ttfb_ms: all.iter().map(|s| s.ttfb_ms).sum::<f64>() / n,
            bandwidth: all.iter().map(|s| s.bandwidth).sum::<f64>() / n,
            verified: false,
        }
    }

    #[inline]
    fn score(&self, o: &LassieStats) -> f64 {
        let tags = if self.verified { 3.0 } else { 0.0 };
        self.success
            + (-self.connect_ms / o.connect_ms).exp()
            + (-self.ttfb_ms / o.ttfb_ms).exp()
            + 0.5 * (1.0 - (-self.bandwidth / o.bandwidth).exp())
            + tags
    }

    #[inline]
    fn observe(&mut self, k: u64) {
        let Outcome::Success(s) = outcome_for(k) else {
            return;
        };
        let ema = |old: f64, x: f64| old + 0.5 * (x - old);
        self.success = ema(self.success, 1.0);
        self.connect_ms = ema(self.connect_ms, s.connect_ms.unwrap_or(self.connect_ms));
        self.ttfb_ms = ema(self.ttfb_ms, s.ttfb_ms.unwrap_or(self.ttfb_ms));
    }
}

/// Explicit eligible subsets of k out of 10,000: the O(k) evaluated draw.
fn subsets(c: &mut Criterion) {
    let mut g = c.benchmark_group("decide");
    g.measurement_time(Duration::from_secs(2))
        .warm_up_time(Duration::from_secs(1))
        .sample_size(30);
    let (mut core, mut rng, mut now) = warm_core(10_000);
    for k_size in [8usize, 32, 128] {
        let subsets = subset_requests(k_size);
        let mut k = 0u64;
        g.bench_function(BenchmarkId::new("coordinator_subset", k_size), |b| {
            b.iter_batched(
                || {
                    k += 1;
                    (subsets[(k % 64) as usize].clone(), k)
                },
                |(request, k)| {
                    now += STEP;
                    cycle(&mut core, request, now, &mut rng, k);
                },
                BatchSize::SmallInput,
            )
        });
    }
    g.finish();
}

/// A decision with decision records off, sampled at 1 %, and on for every decision.
fn records(c: &mut Criterion) {
    let mut g = c.benchmark_group("record");
    g.measurement_time(Duration::from_secs(2))
        .warm_up_time(Duration::from_secs(1))
        .sample_size(30);
    let n = 1_000;
    for (name, rate) in [
        ("no_subscriber", 0.0),
        ("one_percent", 0.01),
        ("every_decision", 1.0),
    ] {
        let (mut core, mut rng, mut now) = warm_core(n);
        core.set_record_rate(rate);
        let mut k = 0u64;
        g.bench_function(BenchmarkId::new(name, n), |b| {
            b.iter(|| {
                now += STEP;
                k += 1;
                cycle(&mut core, Request::any(), now, &mut rng, k);
                while let Some(r) = core.poll_record() {
                    black_box(r);
                }
            })
        });
    }
    g.finish();
}

/// Round trips through the real actix actor: 64 workers each loop `acquire` (a `Ready` and its
/// grant), `report` (an `Outcome`) and `done` (a `Done`) against 1,000 candidates. The time
/// per iteration is the wall time of the whole run divided by the cycles completed, so it is
/// the inverse of the coordinator's throughput at 64 concurrent workers.
fn actor(c: &mut Criterion) {
    use selection_coordinator::actor::{Coordinator, CoordinatorHandle};

    const CANDIDATES: usize = 1_000;
    const WORKERS: u64 = 64;
    let mut g = c.benchmark_group("actor");
    g.measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_secs(1))
        .sample_size(20);
    let system = actix::System::new();
    let handle: CoordinatorHandle = system.block_on(async {
        let mut coordinator = Coordinator::with_seed(bench_config(), Limits::default(), 42)
            .expect("the config and limits are valid");
        for i in 0..CANDIDATES {
            coordinator = coordinator
                .with_candidate(CandidateInfo::new(format!("c{i}")))
                .expect("fresh candidate");
        }
        coordinator.start_handle()
    });
    g.bench_function(BenchmarkId::new("cycle", CANDIDATES), |b| {
        b.iter_custom(|iters| {
            let per_worker = iters.div_ceil(WORKERS);
            system.block_on(async {
                let start = Instant::now();
                let workers = (0..WORKERS).map(|w| {
                    let handle = handle.clone();
                    async move {
                        for k in 0..per_worker {
                            let mut permit = handle
                                .acquire(Request::any())
                                .await
                                .expect("an unlimited coordinator grants");
                            permit.report(outcome_for(w * per_worker + k));
                            permit.done(Next::Finish);
                        }
                    }
                });
                futures::future::join_all(workers).await;
                // Time per cycle over the cycles actually run.
                start
                    .elapsed()
                    .mul_f64(iters as f64 / (per_worker * WORKERS) as f64)
            })
        })
    });
    g.finish();
    // Stopped inside the runtime: a live actor's timers cannot be dropped once it is gone.
    system.block_on(async {
        handle
            .addr()
            .send(selection_coordinator::actor::Stop)
            .await
            .expect("the coordinator is running");
        actix::clock::sleep(Duration::from_millis(10)).await;
    });
}

criterion_group!(benches, decide, subsets, records, actor);

/// `DECIDE_COUNT=<impl>:<n>:<iterations>` runs one implementation's step that many times
/// without criterion, for instruction counts under callgrind (robust to a noisy machine):
/// the difference between two iteration counts divided by their difference is the cost of
/// one step. `<impl>` is `coordinator`, `refresh`, `churn`, `naive`, `lassie`, `tower_p2c`,
/// `subset` (then `<n>` is the subset size, out of 10,000 candidates) or `parked` (then `<n>`
/// is the number of waiters no candidate can serve).
/// `DECIDE_CONFIG=<file>` runs the coordinator with that config instead of the default
/// ([`bench_config`]; the criterion benches read it too).
fn count(spec: &str) {
    let parts: Vec<&str> = spec.split(':').collect();
    let [name, n, iterations] = parts[..] else {
        panic!("DECIDE_COUNT wants <impl>:<n>:<iterations>, got {spec:?}");
    };
    let n: usize = n.parse().expect("n is a number");
    let iterations: u64 = iterations.parse().expect("iterations is a number");
    let mut step: Box<dyn FnMut()> = match name {
        "coordinator" => Box::new(coordinator_step(n)),
        "refresh" => Box::new(refresh_step(n)),
        "churn" => Box::new(churn_step(n)),
        "naive" => Box::new(naive_step(n)),
        "lassie" => Box::new(lassie_step(n)),
        "tower_p2c" => Box::new(tower_p2c_step(n)),
        "subset" => Box::new(subset_step(n)),
        "parked" => Box::new(parked_step(n)),
        other => panic!("unknown implementation {other:?}"),
    };
    for _ in 0..iterations {
        step();
    }
}

fn main() {
    if let Ok(spec) = std::env::var("DECIDE_COUNT") {
        count(&spec);
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}

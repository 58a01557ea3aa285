//! What decision records cost: one grant + done with no record asked for, with every decision
//! recorded, and with 1 % sampled, over 1,000 candidates.
//!
//! With no subscriber the draw takes the O(log n) tree and builds nothing; a recorded decision
//! evaluates every candidate (O(n)) to list them, so its cost is paid only when asked for.

use std::hint::black_box;
use std::time::Instant;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use rand::rngs::SmallRng;
use rand::SeedableRng;
use selection_coordinator::{CandidateInfo, Config, Core, Event, Next, Request};

const CANDIDATES: usize = 1_000;

fn core(rate: f64) -> (Core, SmallRng, Instant) {
    let now = Instant::now();
    let mut rng = SmallRng::seed_from_u64(3);
    let mut core = Core::new(Config::default(), now).expect("default config");
    for i in 0..CANDIDATES {
        let info = CandidateInfo::new(format!("c{i}")).with_stake(1.0 + i as f64);
        core.add_candidate(info, now, &mut rng).expect("add");
    }
    core.set_record_rate(rate);
    (core, rng, now)
}

fn decide(core: &mut Core, rng: &mut SmallRng, now: Instant) {
    core.ready(Request::any(), now, rng).expect("ready");
    let Some(Event::Granted(g)) = core.poll_event() else {
        panic!("expected a grant");
    };
    core.done(g.attempt, Next::Finish, now, rng).expect("done");
    while let Some(r) = core.poll_record() {
        black_box(r);
    }
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("record");
    for (name, rate) in [("off", 0.0), ("rate_1.0", 1.0), ("rate_0.01", 0.01)] {
        let (mut core, mut rng, now) = core(rate);
        group.bench_function(BenchmarkId::new(name, CANDIDATES), |b| {
            b.iter(|| decide(&mut core, &mut rng, now))
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);

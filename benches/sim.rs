//! Simulated decisions per second: the `large-fleet` scenario (10,000 candidates) run by the
//! simulator on one thread, the coordinator deciding every attempt. Criterion reports the
//! throughput in decisions (elements) per second.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use selection_coordinator::sim::{simulate, PolicySpec, Scenario};

fn large_fleet(c: &mut Criterion) {
    let mut sc = Scenario::load("large-fleet").expect("built-in scenario");
    // 5 virtual seconds: 100,000 requests, enough to amortise adding the 10,000 candidates.
    sc.workload.duration_s = 5.0;
    let policies = [PolicySpec::parse("coordinator").expect("policy")];
    let decisions = simulate(&sc, &policies, &[1], 1, None)
        .expect("run")
        .policies[0]
        .decisions as u64;
    let mut group = c.benchmark_group("simulate");
    group.throughput(Throughput::Elements(decisions));
    group.sample_size(20);
    group.bench_function("large-fleet/coordinator/10k-candidates", |b| {
        b.iter(|| simulate(&sc, &policies, &[1], 1, None).expect("run"))
    });
    group.finish();
}

criterion_group!(benches, large_fleet);
criterion_main!(benches);

//! Downloads from candidates whose links differ: the built-in `bulk-transfer`. Counted to
//! their completion (`ema.attempt_time = "completion"`), the coordinator sends them where
//! they finish first; counted to the first byte (the default) it sends them where the
//! first byte comes first. `oracle-completion` is the limit for the first.

use selection_coordinator::sim::{simulate, PolicyReport, PolicySpec, Report, Scenario};

fn run(policies: &[&str], seeds: &[u64]) -> Report {
    let sc = Scenario::load("bulk-transfer").unwrap();
    let specs: Vec<PolicySpec> = policies
        .iter()
        .map(|p| PolicySpec::parse(p).unwrap())
        .collect();
    simulate(&sc, &specs, seeds, 2, None).unwrap()
}

fn get<'a>(r: &'a Report, policy: &str) -> &'a PolicyReport {
    r.policies.iter().find(|p| p.policy == policy).unwrap()
}

#[test]
fn downloads_counted_to_completion_go_where_they_finish_first() {
    let r = run(
        &[
            "coordinator",
            "coordinator:default",
            "p2c-peak-ewma",
            "oracle-completion",
        ],
        &[1, 2],
    );
    let completion = get(&r, "coordinator");
    let first_byte = get(&r, "coordinator:default");
    let p2c = get(&r, "p2c-peak-ewma");
    let best = get(&r, "oracle-completion");
    let lat = |p: &PolicyReport| p.latency_ms.mean;
    eprintln!(
        "latency: completion {:.1}, first byte {:.1}, p2c-peak-ewma {:.1}, oracle-completion {:.1}; \
         ttfb {:.1} / {:.1}; detection {:?}, recovery {:?}",
        lat(completion),
        lat(first_byte),
        lat(p2c),
        lat(best),
        completion.ttfb_ms.mean,
        first_byte.ttfb_ms.mean,
        completion.detection_s,
        completion.recovery_s,
    );
    // A download on a wide link takes about 60 + 200 ms, on a near one 20 + 3,200 ms.
    assert!(lat(best) < 300.0, "{}", lat(best));
    assert!(lat(completion) <= 1.2 * lat(best), "{}", lat(completion));
    assert!(lat(completion) <= 0.5 * lat(p2c), "{}", lat(completion));
    // Counted to the first byte, the same coordinator waits less for the first byte and far
    // longer for the download.
    assert!(first_byte.ttfb_ms.mean < completion.ttfb_ms.mean);
    assert!(
        lat(first_byte) > 5.0 * lat(completion),
        "{}",
        lat(first_byte)
    );
    // `wide-0`'s link drops to 20 Mbit/s for 30 s: left within seconds, and returned to.
    let detection = completion.detection_s.expect("wide-0 left");
    let recovery = completion.recovery_s.expect("wide-0 returned to");
    assert!(detection <= 5.0, "{detection}");
    assert!(recovery <= 15.0, "{recovery}");
}

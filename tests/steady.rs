//! Identical candidates get steady probabilities: noise in their samples does not herd.

use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use selection_coordinator::{CandidateInfo, Config, Core, Event, Next, Outcome, Request};

/// Five identical candidates (first byte uniform 5–20 ms), 1,000 outcomes one at a time, then
/// the ratio of the largest to the smallest probability of the next draw.
fn spread(config: Config, seed: u64) -> f64 {
    let mut now = Instant::now();
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut world = SmallRng::seed_from_u64(seed ^ 0x5eed);
    let mut core = Core::new(config, now).unwrap();
    for i in 0..5 {
        core.add_candidate(CandidateInfo::new(format!("c{i}")), now, &mut rng)
            .unwrap();
    }
    for _ in 0..1000 {
        core.ready(Request::any(), now, &mut rng).unwrap();
        let Some(Event::Granted(g)) = core.poll_event() else {
            panic!("no grant")
        };
        let ttfb = world.random_range(5.0..20.0);
        now += Duration::from_secs_f64(ttfb / 1000.0);
        core.outcome(
            g.attempt,
            Outcome::success_with(1.0, ttfb, 1000, ttfb + 1.0),
            now,
        )
        .unwrap();
        core.done(g.attempt, Next::Finish, now, &mut rng).unwrap();
    }
    let p = core.probabilities(&Request::any(), now).unwrap();
    let max = p.iter().map(|x| x.1).fold(0.0, f64::max);
    let min = p.iter().map(|x| x.1).fold(1.0, f64::min);
    max / min
}

/// Fails with fixed-weight averages and no pooling (`ema.drift = 0`, `ema.pooling = false`):
/// the largest probability was up to 200 x the smallest on these seeds.
#[test]
fn identical_candidates_get_steady_probabilities() {
    let mut worst: f64 = 0.0;
    for seed in 0..20 {
        let s = spread(Config::default(), seed);
        eprintln!("seed {seed}: max/min {s:.3}");
        worst = worst.max(s);
    }
    eprintln!("worst {worst:.3}");
    assert!(worst <= 1.5, "largest / smallest probability {worst:.3}");
}

//! Identical candidates get steady probabilities: noise in their samples does not herd.

use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use selection_coordinator::{CandidateInfo, Config, Core, Event, Next, Outcome, Request};

/// Five identical candidates served `outcomes` times, one attempt at a time: each first byte
/// drawn by `ttfb` from the world's generator, the clock advanced by it times `pace`; after
/// the `k`-th outcome, `look(k, core, now)`.
fn serve_identical(
    config: Config,
    seed: u64,
    outcomes: usize,
    pace: f64,
    ttfb: impl Fn(&mut SmallRng) -> f64,
    mut look: impl FnMut(usize, &mut Core, Instant),
) {
    let mut now = Instant::now();
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut world = SmallRng::seed_from_u64(seed ^ 0x5eed);
    let mut core = Core::new(config, now).unwrap();
    for i in 0..5 {
        core.add_candidate(CandidateInfo::new(format!("c{i}")), now, &mut rng)
            .unwrap();
    }
    for k in 0..outcomes {
        core.ready(Request::any(), now, &mut rng).unwrap();
        let Some(Event::Granted(g)) = core.poll_event() else {
            panic!("no grant")
        };
        let ttfb = ttfb(&mut world);
        now += Duration::from_secs_f64(ttfb * pace / 1000.0);
        core.outcome(
            g.attempt,
            Outcome::success_with(1.0, ttfb, 1000, ttfb + 1.0),
            now,
        )
        .unwrap();
        core.done(g.attempt, Next::Finish, now, &mut rng).unwrap();
        look(k, &mut core, now);
    }
}

/// The ratio of the largest to the smallest probability of the next draw.
fn max_over_min(core: &mut Core, now: Instant) -> f64 {
    let p = core.probabilities(&Request::any(), now).unwrap();
    let max = p.iter().map(|x| x.1).fold(0.0, f64::max);
    let min = p.iter().map(|x| x.1).fold(1.0, f64::min);
    max / min
}

/// Five identical candidates (first byte uniform 5–20 ms), 1,000 outcomes one at a time, then
/// the ratio of the largest to the smallest probability of the next draw.
fn spread(config: Config, seed: u64) -> f64 {
    let mut ratio = 0.0;
    serve_identical(
        config,
        seed,
        1000,
        1.0,
        |w| w.random_range(5.0..20.0),
        |k, core, now| {
            if k == 999 {
                ratio = max_over_min(core, now);
            }
        },
    );
    ratio
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

/// Five identical candidates whose first bytes are heavy-tailed (`exponential`: mean 12.5 ms;
/// otherwise lognormal with a coefficient of variation of 1, sigma 0.83), 1,000 outcomes to
/// warm up, then the ratio of the largest to the smallest probability every tenth of the next
/// 2,000 outcomes: the ratios of all instants of seeds 0-9.
fn heavy_tailed_spreads(exponential: bool) -> Vec<f64> {
    let mut ratios = Vec::new();
    let ttfb = |world: &mut SmallRng| {
        let u: f64 = world.random_range(f64::EPSILON..1.0);
        if exponential {
            -12.5 * u.ln()
        } else {
            // Box-Muller: a standard normal from two uniforms.
            let v: f64 = world.random_range(0.0..1.0);
            let z = (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos();
            let sigma: f64 = 0.83;
            12.5 * (sigma * z - sigma * sigma / 2.0).exp()
        }
    };
    for seed in 0..10 {
        // Four attempts a first byte: about 320 outcomes a second.
        serve_identical(Config::default(), seed, 3000, 0.25, ttfb, |k, core, now| {
            if k >= 1000 && k % 10 == 0 {
                ratios.push(max_over_min(core, now));
            }
        });
    }
    ratios.sort_by(f64::total_cmp);
    ratios
}

/// Heavy-tailed times (an exponential answers in under a tenth of its mean one time in ten)
/// used to herd identical candidates: one lucky answer read as a change made its candidate
/// the fastest of the fleet, the filter's variance, capped for its gain, understated how much
/// such an estimate wanders, and one candidate far off opened the pooled spread for all.
/// Before one fast answer was held to the fleet's level and pooling weighed the estimates by
/// their precision (docs/scoring.md), on these seeds, exponential / lognormal first bytes:
/// the median ratio 1.78 / 1.35, the 90th percentile 437 / 81 (one candidate with nearly all
/// of the draw), and 38 % / 23 % of the instants above 3. After it 1.49 / 1.28, 2.1 / 2.8
/// and 8 % / 10 %; now (the fleet-relative load, the time factor at 14) 1.48 / 1.28,
/// 1.9 / 2.5 and 6 % / 10 %.
#[test]
fn identical_heavy_tailed_candidates_get_steady_probabilities() {
    let figures: Vec<(bool, f64, f64)> = [true, false]
        .into_iter()
        .map(|exponential| {
            let r = heavy_tailed_spreads(exponential);
            let median = r[r.len() / 2];
            let above_3 = r.iter().filter(|x| **x > 3.0).count() as f64 / r.len() as f64;
            eprintln!(
                "exponential {exponential}: median max/min {median:.2}, p90 {:.2}, share above 3 {above_3:.3}",
                r[r.len() * 9 / 10]
            );
            (exponential, median, above_3)
        })
        .collect();
    for (exponential, median, above_3) in figures {
        assert!(
            median <= 1.6,
            "exponential {exponential}: median max/min {median:.2}"
        );
        assert!(
            above_3 <= 0.12,
            "exponential {exponential}: share of instants above 3x {above_3:.3}"
        );
    }
}

/// Twenty identical servers at 400 requests a second (20 each), heavy-tailed: the largest
/// server's share of each 1 s bucket (from the second second on) over the fair share, mean
/// over buckets, per seed 1-10, under `policy`.
#[cfg(feature = "sim")]
fn bucket_herding(duration: &str, policy: &str) -> Vec<f64> {
    use selection_coordinator::sim::{simulate, PolicySpec, Scenario};
    let text = format!(
        r#"
name = "equals"
series_bucket_s = 1.0
[workload]
loop = "open"
rate_per_s = 400.0
duration_s = 60.0
[[candidates]]
id = "s"
count = 20
success = 0.99
failure = "transport"
failure_ms = 5.0
duration_ms = {duration}
"#
    );
    let sc = Scenario::parse(&text, "equals").unwrap();
    let policies = [PolicySpec::parse(policy).unwrap()];
    (1..=10u64)
        .map(|seed| {
            let r = simulate(&sc, &policies, &[seed], 1, None).unwrap();
            let s = &r.policies[0].series;
            let n = s.share.len() as f64;
            let worst: Vec<f64> = (0..s.t_s.len())
                .filter(|&t| s.t_s[t] >= 2.0 && s.attempts[t] > 0)
                .map(|t| s.share.values().filter_map(|v| v[t]).fold(0.0, f64::max) * n)
                .collect();
            worst.iter().sum::<f64>() / worst.len() as f64
        })
        .collect()
}

/// About as even as a uniform random draw (whose figure, about 1.44, is the noise of 20
/// requests a bucket): within 10 % over seeds 1-10; p2c with peak EWMA reads 1.64, 1.62 and
/// 1.64 on the lognormal (seeds 1-3). Before the change described above the coordinator read
/// 3.30, 3.44 and 3.37 (exponential) and 4.07, 4.68 and 4.24 (lognormal) on seeds 1-3;
/// after it 1.47, 1.45, 1.53 and 1.51, 1.47, 1.63.
///
/// The mean was over seeds 1-3 until the load gate's evidence became an elasticity
/// (docs/tuning.md, "The load gate's evidence as an elasticity"). With it, seed 3 of the
/// lognormal reads 2.00: in seconds 2-8 one server, lucky in its first samples, draws up to
/// ten times its share before the averages settle (the old rule had such an episode on that
/// seed too, in seconds 1-3). Over seeds 1-20 the two rules read 1.456 and 1.469; three seeds
/// are too few for a figure one warm-up episode can move by 0.2.
#[cfg(feature = "sim")]
#[test]
fn identical_heavy_tailed_servers_share_each_second_evenly() {
    let figures: Vec<(&str, Vec<f64>, Vec<f64>)> = [
        r#"{ kind = "exp", mean = 20.0 }"#,
        r#"{ kind = "lognormal", mean = 20.0, sd = 20.0 }"#,
    ]
    .into_iter()
    .map(|duration| {
        let ours = bucket_herding(duration, "coordinator");
        let random = bucket_herding(duration, "random");
        eprintln!(
            "{duration}: largest share / fair, mean over buckets, seeds 1-10: coordinator {ours:.2?}, random {random:.2?}"
        );
        (duration, ours, random)
    })
    .collect();
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    for (duration, ours, random) in figures {
        let (o, r) = (mean(&ours), mean(&random));
        assert!(o <= 1.1 * r, "{duration}: {o:.2} against random {r:.2}");
    }
}

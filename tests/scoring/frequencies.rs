//! Seeded draws through `ready`/`done` land on each candidate as often as `probabilities()`
//! says, in both modes and for an explicit subset.

use super::*;

/// Draws `n` times through `ready`/`done` and returns each candidate's share.
fn draw_shares(
    core: &mut Core,
    rng: &mut SmallRng,
    now: Instant,
    request: &Request,
    n: usize,
) -> HashMap<String, f64> {
    let mut counts: HashMap<String, f64> = HashMap::new();
    for _ in 0..n {
        core.ready(request.clone(), now, rng).unwrap();
        let Some(Event::Granted(g)) = core.poll_event() else {
            panic!("expected a grant");
        };
        *counts.entry(g.candidate.to_string()).or_default() += 1.0;
        core.done(g.attempt, Next::Finish, now, rng).unwrap();
    }
    counts.values_mut().for_each(|c| *c /= n as f64);
    counts
}

fn assert_shares_match(core: &mut Core, rng: &mut SmallRng, now: Instant, request: &Request) {
    let want = probs(core, request, now);
    assert!(want.len() >= 3);
    let got = draw_shares(core, rng, now, request, 10_000);
    let mut worst = 0.0f64;
    for (id, p) in &want {
        let share = got.get(id).copied().unwrap_or(0.0);
        worst = worst.max((share - p).abs());
        assert!(
            (share - p).abs() <= 0.03,
            "{id}: share {share}, probability {p}"
        );
    }
    for id in got.keys() {
        assert!(
            want.contains_key(id),
            "{id} was drawn but has no probability"
        );
    }
    eprintln!("largest |share - probability| over 10,000 draws: {worst:.4}");
}

fn sum_mode_core() -> (Core, SmallRng, Instant) {
    let mut c = Config {
        mode: Mode::Sum,
        weights: Weights {
            success: 1.0,
            uniform: 0.2,
            ..Weights::ZERO
        },
        tag_weights: [("verified".to_string(), 2.0)].into_iter().collect(),
        exponent: 2.0,
        floor: 0.05,
        ..Config::default()
    };
    c.ema.half_life_s = None;
    let (mut core, mut rng, now) = new_core(c);
    for (id, success, verified) in [
        ("a", Some(1.0), true),
        ("b", Some(0.6), false),
        ("c", Some(0.2), true),
        ("d", Some(0.0), false),
        ("e", None, false),
    ] {
        let mut info = CandidateInfo::new(id);
        if verified {
            info = info.with_tag("verified");
        }
        let stats = Stats {
            success,
            ..Stats::default()
        };
        core.add_with_stats(info, stats, now, &mut rng).unwrap();
    }
    (core, rng, now)
}

#[test]
fn frequencies_match_probabilities_in_sum_mode() {
    let (mut core, mut rng, now) = sum_mode_core();
    assert_shares_match(&mut core, &mut rng, now, &Request::any());
}

#[test]
fn frequencies_match_probabilities_for_an_explicit_subset() {
    let (mut core, mut rng, now) = sum_mode_core();
    assert_shares_match(
        &mut core,
        &mut rng,
        now,
        &Request::only(["b", "c", "d", "e"]),
    );
}

#[test]
fn frequencies_match_probabilities_in_mixture_mode() {
    let mut c = Config::livepeer();
    c.weights.stake = 0.5;
    c.weights.price = 0.3;
    c.weights.uniform = 0.2;
    c.floor = 0.05;
    let (mut core, mut rng, now) = new_core(c);
    let infos = [
        (10.0, 50.0),
        (40.0, 120.0),
        (5.0, 10.0),
        (0.0, 300.0),
        (45.0, 80.0),
    ]
    .iter()
    .enumerate()
    .map(|(i, (s, p))| {
        CandidateInfo::new(format!("o{i}"))
            .with_stake(*s)
            .with_price(*p)
    })
    .collect();
    add_all(&mut core, &mut rng, now, infos);
    assert_shares_match(&mut core, &mut rng, now, &Request::any());
    assert_shares_match(&mut core, &mut rng, now, &Request::only(["o1", "o2", "o3"]));
}

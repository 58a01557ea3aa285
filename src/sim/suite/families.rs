//! The families' generators: each turns a seeded random stream into one [`Draft`].
//!
//! The distributions are documented in `docs/scenarios.md` ("Generated scenarios"); keep the
//! two in step.

use rand::rngs::SmallRng;
use rand::seq::{IndexedRandom, SliceRandom};
use rand::RngExt;

use super::draft::{r3, Arrivals, Cand, Draft, Event, Load, Queue};
use crate::sim::Dist;

/// Seconds a run goes on after the last change, so a slow return is still seen.
const TAIL_S: f64 = 60.0;
/// Open-loop arrival rates stay in this range (the upper bound keeps runs short).
const RATE_RANGE: (f64, f64) = (50.0, 1000.0);

fn log_uniform(rng: &mut SmallRng, lo: f64, hi: f64) -> f64 {
    rng.random_range(lo.ln()..hi.ln()).exp()
}

/// A lognormal with the given mean and a coefficient of variation drawn in 0.1..0.6.
fn lognormal(rng: &mut SmallRng, mean: f64) -> Dist {
    let cv = rng.random_range(0.1..0.6);
    Dist::LogNormal {
        mean: r3(mean),
        sd: r3(mean * cv),
    }
}

/// The same distribution, every value multiplied by `f` (its shape kept: a queue's
/// exponential service stays exponential).
fn scaled(d: &Dist, f: f64) -> Dist {
    match *d {
        Dist::Const(v) => Dist::Const(r3(v * f)),
        Dist::Uniform { min, max } => Dist::Uniform {
            min: r3(min * f),
            max: r3(max * f),
        },
        Dist::Normal { mean, sd } => Dist::Normal {
            mean: r3(mean * f),
            sd: r3(sd * f),
        },
        Dist::LogNormal { mean, sd } => Dist::LogNormal {
            mean: r3(mean * f),
            sd: r3(sd * f),
        },
        Dist::Exp { mean } => Dist::Exp { mean: r3(mean * f) },
    }
}

/// A failure class and how long such a failure takes: fast refusals, resets and overload
/// rejections (0.5-5 ms), or timeouts (100-500 ms).
fn failure_mode(rng: &mut SmallRng) -> (&'static str, Dist) {
    match rng.random_range(0..4) {
        0 => ("transport", Dist::Uniform { min: 0.5, max: 5.0 }),
        1 => ("overload", Dist::Uniform { min: 0.5, max: 5.0 }),
        2 => ("refused", Dist::Uniform { min: 0.5, max: 5.0 }),
        _ => (
            "timeout",
            Dist::Uniform {
                min: 100.0,
                max: 500.0,
            },
        ),
    }
}

/// One candidate of a fleet whose fastest mean first byte is about `base_ms`.
fn candidate(rng: &mut SmallRng, id: String, base_ms: f64, spread: f64, flaky: f64) -> Cand {
    let mean = base_ms * log_uniform(rng, 1.0, spread);
    let success = if rng.random_bool(flaky) {
        rng.random_range(0.8..0.98)
    } else {
        rng.random_range(0.98..1.0)
    };
    let (failure, failure_ms) = failure_mode(rng);
    Cand {
        id,
        count: 1,
        present: true,
        success: r3(success),
        failure,
        failure_ms,
        connect_ms: Dist::Const(r3(rng.random_range(0.2..2.0))),
        ttfb_ms: lognormal(rng, mean),
        capacity: None,
        overload_per_extra: 0.0,
        queue: None,
    }
}

/// Makes `c` a queueing candidate: 1-8 servers whose service (exponential or lognormal) takes
/// what its first byte took, the first byte itself down to 0.2-1 ms; a queue limit of 5-50
/// half the time; time-varying service (periods of 0.2-2 s, slow half of them, x2-5) a
/// quarter of the time.
fn make_queue(rng: &mut SmallRng, c: &mut Cand) {
    let mean = c.ttfb_ms.mean();
    let service_ms = if rng.random_bool(0.5) {
        Dist::Exp { mean: r3(mean) }
    } else {
        c.ttfb_ms.clone()
    };
    c.ttfb_ms = Dist::Const(r3(rng.random_range(0.2..1.0)));
    c.queue = Some(Queue {
        servers: rng.random_range(1..=8),
        service_ms,
        queue_limit: rng.random_bool(0.5).then(|| rng.random_range(5..=50)),
        slowdown: rng.random_bool(0.25).then(|| {
            (
                r3(rng.random_range(200.0..2000.0)),
                r3(rng.random_range(2.0..5.0)),
            )
        }),
    });
}

/// `n` candidates `<prefix>-0..`: speeds lognormal with a fleet base of 5-50 ms (log-uniform)
/// times 1-4 each, success 0.98-1 (0.8-0.98 for 15% of them); 35% of fleets are queueing
/// candidates ([`make_queue`]).
fn fleet(rng: &mut SmallRng, n: usize, prefix: &str) -> Vec<Cand> {
    let base = log_uniform(rng, 5.0, 50.0);
    let queues = rng.random_bool(0.35);
    (0..n)
        .map(|i| {
            let mut c = candidate(rng, format!("{prefix}-{i}"), base, 4.0, 0.15);
            if queues {
                make_queue(rng, &mut c);
            }
            c
        })
        .collect()
}

/// The load: a level (attempts in flight per candidate if spread evenly: 0.2, 0.7 or 2) sets
/// the open-loop rate; retries 0-2; attempts time out after 1-3 s. Some candidates (30%) get
/// a capacity near the level with 5-30% overload failures per extra attempt.
fn load(rng: &mut SmallRng, cands: &mut [Cand], duration_s: f64) -> Load {
    let level = *[0.2, 0.7, 2.0].choose(rng).unwrap_or(&0.7);
    let present: Vec<&Cand> = cands.iter().filter(|c| c.present).collect();
    let n = present.len().max(1) as f64;
    let mean_s = present.iter().map(|c| c.mean_ms()).sum::<f64>() / n / 1000.0;
    let rate = if present.iter().all(|c| c.queue.is_some()) {
        // Queues: a utilization of the fleet's service capacity instead.
        let per_s: f64 = present
            .iter()
            .filter_map(|c| c.queue.as_ref())
            .map(|q| q.servers as f64 * 1000.0 / q.service_ms.mean().max(1e-3))
            .sum();
        *[0.3, 0.6, 0.85].choose(rng).unwrap_or(&0.6) * per_s
    } else {
        level * n / mean_s.max(1e-3)
    };
    let rate = rate.clamp(RATE_RANGE.0, RATE_RANGE.1);
    for c in cands.iter_mut() {
        if rng.random_bool(0.3) {
            c.capacity = Some(((level * rng.random_range(1.0..4.0)).round() as u32).max(1));
            c.overload_per_extra = r3(rng.random_range(0.05..0.3));
        }
    }
    Load {
        arrivals: Arrivals::Open {
            rate_per_s: r3(rate),
            duration_s: r3(duration_s),
        },
        subset: 0,
        retries: *[0, 1, 1, 2].choose(rng).unwrap_or(&1),
        attempt_timeout_ms: Some(r3(rng.random_range(1000.0..3000.0))),
    }
}

/// The candidate the oracle prefers at no load (its own order: success first without
/// retries, success per expected millisecond with them).
fn best(cands: &[Cand], retries: u32) -> usize {
    let key = |c: &Cand| {
        let p = c.success;
        let cost = p * c.mean_ms() + (1.0 - p) * c.failure_ms.mean();
        if retries == 0 {
            (p, -cost)
        } else {
            (p / cost.max(1e-3), p)
        }
    };
    let mut b = 0;
    for i in 1..cands.len() {
        if key(&cands[i]) > key(&cands[b]) {
            b = i;
        }
    }
    b
}

/// The target of a change: the oracle's favourite with probability `p_best`, else any.
fn target(rng: &mut SmallRng, cands: &[Cand], retries: u32, p_best: f64) -> usize {
    if rng.random_bool(p_best) {
        best(cands, retries)
    } else {
        rng.random_range(0..cands.len())
    }
}

/// Makes `c` slower by `f`: its first byte, or for a queue its service time.
fn slower(ev: &mut Event, c: &Cand, f: f64) {
    match &c.queue {
        Some(q) => ev.service_ms = Some(scaled(&q.service_ms, f)),
        None => ev.ttfb_ms = Some(scaled(&c.ttfb_ms, f)),
    }
}

/// What a bad spell does: slower (first byte x5-30; a queue: service x3-15, or a quarter of
/// its servers left), failing (success 0-0.6, a fresh failure mode; a `timeout` failure then
/// takes the attempt timeout: a hang), or both.
fn bad_spell(rng: &mut SmallRng, c: &Cand, timeout_ms: f64) -> (Event, String) {
    let mut ev = Event::default();
    let mut what = Vec::new();
    let kind = rng.random_range(0..10);
    if !(4..7).contains(&kind) {
        match &c.queue {
            Some(q) if q.servers >= 4 && rng.random_bool(0.3) => {
                let left = (q.servers / 4).max(1);
                ev.servers = Some(left);
                what.push(format!("{left} of {} servers", q.servers));
            }
            Some(_) => {
                let f = rng.random_range(3.0..15.0);
                slower(&mut ev, c, f);
                what.push(format!("service x{f:.1}"));
            }
            None => {
                let f = rng.random_range(5.0..30.0);
                slower(&mut ev, c, f);
                what.push(format!("first byte x{f:.1}"));
            }
        }
    }
    if kind >= 4 {
        let s = r3(rng.random_range(0.0..0.6));
        let (class, ms) = failure_mode(rng);
        ev.success = Some(s);
        ev.failure = Some(class);
        ev.failure_ms = Some(if class == "timeout" {
            Dist::Const(r3(timeout_ms))
        } else {
            ms
        });
        what.push(format!("success {s} ({class})"));
    }
    (ev, what.join(", "))
}

/// "servers" or "queueing servers", for descriptions.
fn kind(cands: &[Cand]) -> &'static str {
    if cands.iter().any(|c| c.queue.is_some()) {
        "queueing servers"
    } else {
        "servers"
    }
}

fn timeout_of(l: &Load) -> f64 {
    l.attempt_timeout_ms.unwrap_or(1000.0)
}

/// A candidate (the oracle's favourite 60% of the time) has a bad spell of 10-30 s starting at
/// 10-30 s, then heals; 3-12 candidates.
pub(super) fn degrade_heal(rng: &mut SmallRng, name: String) -> Draft {
    let n = rng.random_range(3..=12);
    let mut cands = fleet(rng, n, "server");
    let t0 = r3(rng.random_range(10.0..30.0));
    let t1 = r3(t0 + rng.random_range(10.0..30.0));
    let load = load(rng, &mut cands, t1 + TAIL_S);
    let k = target(rng, &cands, load.retries, 0.6);
    let (mut ev, what) = bad_spell(rng, &cands[k], timeout_of(&load));
    let id = cands[k].id.clone();
    ev.at_s = t0;
    ev.action = "degrade";
    ev.candidate = id.clone();
    Draft {
        name,
        description: format!(
            "{n} {}; {id} degrades at {t0} s ({what}) and heals at {t1} s",
            kind(&cands)
        ),
        load,
        candidates: cands,
        timeline: vec![ev, Event::plain(t1, "heal", &id)],
    }
}

/// 20-80% of a fleet of 5-20 fails at once (fast failures) or hangs (every attempt times
/// out), at 10-30 s, for 10-30 s. The oracle's favourite is among them 70% of the time and is
/// then the first event (the one detection and recovery follow).
pub(super) fn outage(rng: &mut SmallRng, name: String) -> Draft {
    let n = rng.random_range(5..=20);
    let mut cands = fleet(rng, n, "server");
    let t0 = r3(rng.random_range(10.0..30.0));
    let t1 = r3(t0 + rng.random_range(10.0..30.0));
    let load = load(rng, &mut cands, t1 + TAIL_S);
    let k = ((n as f64 * rng.random_range(0.2..0.8)).round() as usize).clamp(1, n - 1);
    let mut order: Vec<usize> = (0..n).collect();
    order.shuffle(rng);
    let b = best(&cands, load.retries);
    let mut down: Vec<usize> = order.into_iter().filter(|&i| i != b).take(k).collect();
    if rng.random_bool(0.7) {
        down.pop();
        down.insert(0, b);
    }
    let hang = rng.random_bool(0.5);
    let timeout = timeout_of(&load);
    let mut timeline = Vec::new();
    for &i in &down {
        let mut ev = Event::plain(t0, "degrade", &cands[i].id);
        ev.success = Some(0.0);
        if hang {
            ev.failure = Some("timeout");
            ev.failure_ms = Some(Dist::Const(r3(timeout)));
        } else {
            ev.failure = Some(if rng.random_bool(0.5) {
                "transport"
            } else {
                "refused"
            });
            ev.failure_ms = Some(Dist::Uniform { min: 0.5, max: 5.0 });
        }
        timeline.push(ev);
    }
    for &i in &down {
        timeline.push(Event::plain(t1, "heal", &cands[i].id));
    }
    Draft {
        name,
        description: format!(
            "{k} of {n} {} {} at {t0} s and heal at {t1} s",
            kind(&cands),
            if hang { "hang" } else { "fail" }
        ),
        load,
        candidates: cands,
        timeline,
    }
}

/// A candidate (the favourite 70% of the time) drifts from 10-20 s on: every 1-3 s its
/// first byte (a queue: its service time) grows, geometrically over 5-12 steps to x3-20, then shrinks the same way over
/// 5-12 steps; the last step is a heal.
pub(super) fn drift(rng: &mut SmallRng, name: String) -> Draft {
    let n = rng.random_range(3..=12);
    let mut cands = fleet(rng, n, "server");
    let t0 = rng.random_range(10.0..20.0);
    let step = rng.random_range(1.0..3.0);
    let up = rng.random_range(5..=12);
    let downs = rng.random_range(5..=12);
    let peak: f64 = rng.random_range(3.0..20.0);
    let end = t0 + (up + downs - 1) as f64 * step;
    let load = load(rng, &mut cands, end + TAIL_S);
    let k = target(rng, &cands, load.retries, 0.7);
    let id = cands[k].id.clone();
    let mut timeline = Vec::new();
    for j in 0..up + downs {
        let at = r3(t0 + j as f64 * step);
        let exponent = if j < up {
            (j + 1) as f64 / up as f64
        } else {
            1.0 - (j + 1 - up) as f64 / downs as f64
        };
        if j + 1 == up + downs {
            timeline.push(Event::plain(at, "heal", &id));
        } else {
            let mut ev = Event::plain(at, "degrade", &id);
            slower(&mut ev, &cands[k], peak.powf(exponent));
            timeline.push(ev);
        }
    }
    Draft {
        name,
        description: format!(
            "{n} {}; {id}'s latency drifts to x{peak:.1} from {:.1} s in {up} steps of {step:.1} s and back in {downs}",
            kind(&cands),
            r3(t0)
        ),
        load,
        candidates: cands,
        timeline,
    }
}

/// A candidate (the favourite 70% of the time) alternates from 5-20 s on between a bad spell
/// and its normal self, each half-period 1-10 s (+-20% each time), for 20-60 s (at least two
/// bad spells), then stays healed.
pub(super) fn flap(rng: &mut SmallRng, name: String) -> Draft {
    let n = rng.random_range(3..=12);
    let mut cands = fleet(rng, n, "server");
    let t0 = rng.random_range(5.0..20.0);
    let half = rng.random_range(1.0..10.0);
    let span = rng.random_range(20.0..60.0);
    let load = load(rng, &mut cands, t0 + span + half * 1.2 + TAIL_S);
    let k = target(rng, &cands, load.retries, 0.7);
    let id = cands[k].id.clone();
    let (bad, what) = bad_spell(rng, &cands[k], timeout_of(&load));
    let mut timeline = Vec::new();
    let mut t = t0;
    let mut degraded = false;
    let mut spells = 0;
    while t < t0 + span || degraded || spells < 2 {
        let mut ev = if degraded {
            Event::plain(r3(t), "heal", &id)
        } else {
            let mut ev = bad.clone();
            ev.at_s = r3(t);
            ev.action = "degrade";
            ev.candidate = id.clone();
            ev
        };
        ev.at_s = r3(t);
        timeline.push(ev);
        spells += usize::from(!degraded);
        degraded = !degraded;
        t += half * rng.random_range(0.8..1.2);
    }
    Draft {
        name,
        description: format!(
            "{n} {}; {id} flaps ({what}) every {half:.1} s from {:.1} s for {span:.0} s",
            kind(&cands),
            r3(t0)
        ),
        load,
        candidates: cands,
        timeline,
    }
}

/// 5-20 candidates, 70% present at the start (at least 2); 3-10 joins and leaves at uniform
/// times over a 60-120 s run, never leaving fewer than 2; half the time the fastest candidate
/// is a late joiner.
pub(super) fn churn(rng: &mut SmallRng, name: String) -> Draft {
    let n = rng.random_range(5..=20);
    let mut cands = fleet(rng, n, "server");
    let fastest = (0..n)
        .min_by(|&a, &b| cands[a].mean_ms().total_cmp(&cands[b].mean_ms()))
        .unwrap_or(0);
    let mut present: Vec<bool> = (0..n).map(|_| rng.random_bool(0.7)).collect();
    if rng.random_bool(0.5) {
        present[fastest] = false;
    }
    for i in 0..n {
        if present.iter().filter(|&&p| p).count() >= 2 {
            break;
        }
        if i != fastest || n <= 2 {
            present[i] = true;
        }
    }
    for (c, &p) in cands.iter_mut().zip(&present) {
        c.present = p;
    }
    let duration = rng.random_range(60.0..120.0);
    let m = rng.random_range(3..=10);
    let mut times: Vec<f64> = (0..m)
        .map(|_| r3(rng.random_range(5.0..duration - 5.0)))
        .collect();
    times.sort_by(f64::total_cmp);
    let load = load(rng, &mut cands, duration);
    let mut timeline = Vec::new();
    let (mut joins, mut leaves) = (0, 0);
    for at in times {
        let absent: Vec<usize> = (0..n).filter(|&i| !present[i]).collect();
        let here: Vec<usize> = (0..n).filter(|&i| present[i]).collect();
        let join = !absent.is_empty() && (here.len() <= 2 || rng.random_bool(0.5));
        let i = if join {
            // A late fastest candidate joins first.
            if !present[fastest] && rng.random_bool(0.5) {
                fastest
            } else {
                absent[rng.random_range(0..absent.len())]
            }
        } else if here.len() > 2 {
            here[rng.random_range(0..here.len())]
        } else {
            continue;
        };
        present[i] = join;
        if join {
            joins += 1;
        } else {
            leaves += 1;
        }
        timeline.push(Event::plain(
            at,
            if join { "join" } else { "leave" },
            &cands[i].id,
        ));
    }
    let start = cands.iter().filter(|c| c.present).count();
    Draft {
        name,
        description: format!(
            "{start} of {n} {} at the start; {joins} joins and {leaves} leaves over {duration:.0} s",
            kind(&cands)
        ),
        load,
        candidates: cands,
        timeline,
    }
}

/// 50-2,000 candidates (log-uniform) in 5-20 classes of identical replicas, each request gets
/// a random subset of 5-50 and tries one at a time (0-3 retries); speeds 10-100 ms (fleet
/// base) x1-10, success 0.5-1, failures of every class. Short runs: 2,000-20,000 requests (log-uniform),
/// open or closed loop. Nothing changes: what is measured is the cost of learning.
pub(super) fn population(rng: &mut SmallRng, name: String) -> Draft {
    let n = log_uniform(rng, 50.0, 2000.0).round() as u32;
    let classes = rng.random_range(5..=20u32).min(n);
    let base = log_uniform(rng, 10.0, 100.0);
    let mut weights: Vec<f64> = (0..classes).map(|_| rng.random_range(0.2..1.0)).collect();
    let total: f64 = weights.iter().sum();
    weights.iter_mut().for_each(|w| *w /= total);
    let mut counts: Vec<u32> = weights
        .iter()
        .map(|w| ((w * n as f64).floor() as u32).max(1))
        .collect();
    let short = n.saturating_sub(counts.iter().sum::<u32>());
    counts[0] += short;
    let mut cands: Vec<Cand> = counts
        .iter()
        .enumerate()
        .map(|(i, &count)| {
            let mut c = candidate(rng, format!("class{i}"), base, 10.0, 0.0);
            c.success = r3(rng.random_range(0.5..1.0));
            c.count = count;
            c
        })
        .collect();
    let all: u32 = counts.iter().sum();
    let subset = rng.random_range(5..=50u32).min(all);
    let requests = log_uniform(rng, 2000.0, 20000.0).round() as u32;
    let retries = rng.random_range(0..=3);
    let mean_s = cands.iter().map(|c| c.mean_ms()).sum::<f64>() / cands.len() as f64 / 1000.0;
    let arrivals = if rng.random_bool(0.5) {
        let rate = rng.random_range(100.0..1000.0);
        Arrivals::Open {
            rate_per_s: r3(rate),
            duration_s: r3(requests as f64 / rate),
        }
    } else {
        let workers = rng.random_range(5..=50u32);
        Arrivals::Closed {
            workers,
            operations: (requests / workers).max(1),
            think_ms: r3(rng.random_range(0.0..2.0) * mean_s * 1000.0),
        }
    };
    for c in &mut cands {
        if rng.random_bool(0.2) {
            c.capacity = Some(rng.random_range(1..=4));
            c.overload_per_extra = r3(rng.random_range(0.05..0.3));
        }
    }
    Draft {
        name,
        description: format!(
            "{all} candidates in {classes} classes, subsets of {subset}, {requests} requests, {retries} retries"
        ),
        load: Load {
            arrivals,
            subset,
            retries,
            attempt_timeout_ms: Some(r3(rng.random_range(1000.0..3000.0))),
        },
        candidates: cands,
        timeline: Vec::new(),
    }
}

/// 4-12 candidates whose first bytes differ up to threefold (the fleet's base, log-uniform
/// 5-50 ms, x log-uniform 1-3), half of them (each on its own) heavy-tailed: exponential, or
/// lognormal with a coefficient of variation of 1-3, equally likely; the others the mild
/// lognormal of the other families. Success, failures, load and run length as in the other
/// families (60-120 s), never queueing. Nothing changes: what is measured is telling a heavy
/// tail from a slower mean.
pub(super) fn heavy_tail(rng: &mut SmallRng, name: String) -> Draft {
    let n = rng.random_range(4..=12);
    let base = log_uniform(rng, 5.0, 50.0);
    let mut heavy = 0;
    let mut cands: Vec<Cand> = (0..n)
        .map(|i| {
            let mut c = candidate(rng, format!("server-{i}"), base, 3.0, 0.15);
            if rng.random_bool(0.5) {
                heavy += 1;
                let mean = c.ttfb_ms.mean();
                c.ttfb_ms = if rng.random_bool(0.5) {
                    Dist::Exp { mean: r3(mean) }
                } else {
                    Dist::LogNormal {
                        mean: r3(mean),
                        sd: r3(mean * rng.random_range(1.0..3.0)),
                    }
                };
            }
            c
        })
        .collect();
    let duration = rng.random_range(60.0..120.0);
    let load = load(rng, &mut cands, duration);
    Draft {
        name,
        description: format!(
            "{n} servers, {heavy} with heavy-tailed first bytes; nothing changes over {duration:.0} s"
        ),
        load,
        candidates: cands,
        timeline: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slower_spell_keeps_the_distributions_shape() {
        assert_eq!(
            scaled(&Dist::Exp { mean: 2.0 }, 3.0),
            Dist::Exp { mean: 6.0 }
        );
        assert_eq!(
            scaled(&Dist::Uniform { min: 1.0, max: 2.0 }, 2.0),
            Dist::Uniform { min: 2.0, max: 4.0 }
        );
        assert_eq!(scaled(&Dist::Const(1.5), 2.0), Dist::Const(3.0));
        assert_eq!(
            scaled(
                &Dist::LogNormal {
                    mean: 10.0,
                    sd: 3.0
                },
                2.0
            ),
            Dist::LogNormal {
                mean: 20.0,
                sd: 6.0
            }
        );
    }
}

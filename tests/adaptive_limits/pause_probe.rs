//! A pause of the driver while a probe attempt is out: `Core::driver_paused` moves the grant
//! times of the attempts running, and the estimator, which finds its probe by grant time and
//! judges windows by their grant times, must move with them, or the probe stays out for good
//! and the limit never grows again (here when the candidate's capacity doubles).

use std::collections::BinaryHeap;
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::SeedableRng;
use selection_coordinator::limit::AdaptiveConfig;
use selection_coordinator::{
    AttemptId, CandidateId, CandidateInfo, Config, Core, Event, Limits, Next, Outcome, Request,
};

#[derive(Debug, PartialEq, Eq)]
struct Answer {
    at_ns: u64,
    attempt: AttemptId,
}
impl PartialOrd for Answer {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Answer {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        o.at_ns.cmp(&self.at_ns)
    }
}

struct World {
    core: Core,
    rng: SmallRng,
    t0: Instant,
    now_s: f64,
    id: CandidateId,
    free_at: Vec<f64>,
    heap: BinaryHeap<Answer>,
    service_s: f64,
}

impl World {
    fn new() -> Self {
        let t0 = Instant::now();
        let mut rng = SmallRng::seed_from_u64(7);
        let config = Config {
            adaptive: AdaptiveConfig {
                enabled: true,
                initial: 4,
                ..AdaptiveConfig::default()
            },
            ..Config::default()
        };
        let mut core = Core::new(config, t0)
            .unwrap()
            .with_limits(Limits::default())
            .unwrap();
        core.add_candidate(CandidateInfo::new("server"), t0, &mut rng)
            .unwrap();
        World {
            core,
            rng,
            t0,
            now_s: 0.0,
            id: CandidateId::new("server"),
            free_at: vec![0.0; 8],
            heap: BinaryHeap::new(),
            service_s: 0.05,
        }
    }
    fn at(&self, s: f64) -> Instant {
        self.t0 + Duration::from_secs_f64(s)
    }
    fn drain(&mut self) {
        while let Some(ev) = self.core.poll_event() {
            if let Event::Granted(g) = ev {
                let now = self.now_s;
                let (i, &free) = self
                    .free_at
                    .iter()
                    .enumerate()
                    .min_by(|a, b| a.1.total_cmp(b.1))
                    .unwrap();
                let start = if free <= now + 1e-9 { now } else { free };
                let end = start + self.service_s;
                self.free_at[i] = end;
                self.heap.push(Answer {
                    at_ns: (end * 1e9) as u64,
                    attempt: g.attempt,
                });
            }
        }
    }
    /// The limit in force and the learned one.
    fn limits(&self) -> (u32, f64) {
        let v = self.core.candidate(&self.id).unwrap();
        (v.limit().unwrap(), v.adaptive.unwrap().limit)
    }
    fn start(&mut self, workers: u32) {
        for _ in 0..workers {
            let now = self.at(self.now_s);
            self.core.ready(Request::any(), now, &mut self.rng).unwrap();
        }
        self.drain();
    }
    /// Runs until `until_s`; when `pause_at_probe` and a probe attempt is out (the limit in
    /// force was one past the learned one and a grant closed it), the driver is paused for
    /// 3 s there, once. Returns whether it paused and the highest limit in force seen.
    fn run(&mut self, until_s: f64, mut pause_at_probe: bool) -> (bool, u32) {
        let mut paused = false;
        let mut max_limit = 0;
        let mut prev_over = true;
        while let Some(a) = self.heap.pop() {
            let t = a.at_ns as f64 / 1e9;
            if t > until_s {
                self.heap.push(a);
                break;
            }
            self.now_s = t;
            let now = self.at(t);
            let (_, learned_before) = self.limits();
            self.core
                .outcome(a.attempt, Outcome::success(), now)
                .unwrap();
            self.core
                .done(a.attempt, Next::Finish, now, &mut self.rng)
                .unwrap();
            // A probe: an attempt granted past the learned limit, which did not move.
            let v = self.core.candidate(&self.id).unwrap();
            let over = v.in_flight > v.limit;
            self.core.ready(Request::any(), now, &mut self.rng).unwrap();
            self.drain();
            let (after, learned) = self.limits();
            max_limit = max_limit.max(after);
            let probe_out = over && !prev_over && learned == learned_before;
            let v = self.core.candidate(&self.id).unwrap();
            prev_over = v.in_flight > v.limit;
            if pause_at_probe && probe_out {
                // The process stops for 3 s; the candidate answers meanwhile, its answers are
                // heard when the driver runs again.
                pause_at_probe = false;
                paused = true;
                self.now_s += 3.0;
                let resumed = self.at(self.now_s);
                self.core.driver_paused(Duration::from_secs(3), resumed);
                let late: Vec<Answer> = self.heap.drain().collect();
                for mut a in late {
                    a.at_ns = a.at_ns.max((self.now_s * 1e9) as u64);
                    self.heap.push(a);
                }
                for f in &mut self.free_at {
                    *f = f.max(self.now_s);
                }
            }
        }
        (paused, max_limit)
    }
}

#[test]
fn a_pause_while_a_probe_is_out_does_not_stop_the_limit_growing() {
    let mut w = World::new();
    w.start(64);
    // The limit settles near the 8 servers and probes past them.
    let (paused, _) = w.run(60.0, true);
    assert!(paused, "no probe was seen going out");
    // The capacity doubles: the probes should find it.
    w.free_at.extend(vec![w.now_s; 8]);
    let (_, max_limit) = w.run(180.0, false);
    let (limit, learned) = w.limits();
    eprintln!("after the capacity doubled: max limit {max_limit}, now {limit} (learned {learned})");
    assert!(
        max_limit >= 12,
        "the limit never grew past {max_limit} in 120 s with 16 servers"
    );
}

/// The same run without the pause: the probes find the new capacity.
#[test]
fn control_without_a_pause_the_limit_grows() {
    let mut w = World::new();
    w.start(64);
    w.run(60.0, false);
    w.free_at.extend(vec![w.now_s; 8]);
    let (_, max_limit) = w.run(180.0, false);
    eprintln!("control: max limit {max_limit}");
    assert!(max_limit >= 12, "max limit {max_limit}");
}

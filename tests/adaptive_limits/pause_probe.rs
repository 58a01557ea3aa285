//! A pause of the driver while a probe attempt is out: `Core::driver_paused` moves the grant
//! times of the attempts running, and the estimator, which finds its probe by grant time and
//! judges windows by their grant times, must move with them, or the probe stays out for good
//! and the limit never grows again (here when the candidate's capacity doubles).

use std::time::Duration;

use selection_coordinator::{Next, Request};

use super::{adaptive, Behaviour, World};

/// 64 closed-loop workers against 8 servers of 50 ms, the limit starting at 4.
fn station() -> World {
    let b = Behaviour::Station {
        servers: 8,
        service_ms: 50.0,
        queue_limit: u32::MAX,
    };
    let mut w = World::new(adaptive(4), b, 7);
    w.start(64);
    w
}

impl World {
    /// The limit in force and the learned one.
    fn limits(&self) -> (u32, f64) {
        let v = self.core.candidate(&self.id).unwrap();
        (v.limit().unwrap(), v.adaptive.unwrap().limit)
    }

    /// Runs until `until_s`; when `pause_at_probe` and a probe attempt is out (the limit in
    /// force was one past the learned one and a grant closed it), the driver is paused for
    /// 3 s there, once. Returns whether it paused and the highest limit in force seen.
    fn run_pausing_at_a_probe(&mut self, until_s: f64, mut pause_at_probe: bool) -> (bool, u32) {
        let mut paused = false;
        let mut max_limit = 0;
        let mut prev_over = true;
        while let Some((a, now)) = self.next_answer(until_s) {
            let (_, learned_before) = self.limits();
            self.core.outcome(a.attempt, a.outcome, now).unwrap();
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
                let late: Vec<_> = self.heap.drain().collect();
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
    let mut w = station();
    // The limit settles near the 8 servers and probes past them.
    let (paused, _) = w.run_pausing_at_a_probe(60.0, true);
    assert!(paused, "no probe was seen going out");
    // The capacity doubles: the probes should find it.
    w.free_at.extend(vec![w.now_s; 8]);
    let (_, max_limit) = w.run_pausing_at_a_probe(180.0, false);
    assert!(
        max_limit >= 12,
        "the limit never grew past {max_limit} in 120 s with 16 servers"
    );
}

/// The same run without the pause: the probes find the new capacity.
#[test]
fn control_without_a_pause_the_limit_grows() {
    let mut w = station();
    w.run_pausing_at_a_probe(60.0, false);
    w.free_at.extend(vec![w.now_s; 8]);
    let (_, max_limit) = w.run_pausing_at_a_probe(180.0, false);
    assert!(max_limit >= 12, "max limit {max_limit}");
}

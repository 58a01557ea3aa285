//! Queueing candidates: their servers take the attempts waiting in line, one each.

use super::{Engine, Ev, MAX_MS};

impl Engine<'_> {
    /// Starts service for waiting attempts on `c` while it has a free server.
    pub(super) fn serve_queue(&mut self, c: usize, now: f64) {
        loop {
            let truth = &self.truth[c];
            let st = &mut self.queues.stations[c];
            if st.busy >= truth.servers() {
                return;
            }
            let Some(job) = st.waiting.pop_front() else {
                return;
            };
            st.busy += 1;
            let factor = self.queues.factor(c, truth.slowdown(), now);
            // Capped as every other time is: a run reaches every time it is given.
            let service_ms = truth.sample_service_ms(&mut self.truth_rng) * factor;
            let service_s = service_ms.min(MAX_MS) / 1000.0;
            self.at(now + service_s, Ev::ServiceDone(c as u32, job.att, job.gen));
        }
    }

    /// A server of `c` finished attempt slot `a` (if still generation `gen`, the caller is
    /// still waiting for it): its response follows, and the server takes the next in line.
    pub(super) fn service_done(&mut self, c: usize, a: u32, gen: u32, now: f64) {
        let st = &mut self.queues.stations[c];
        st.busy = st.busy.saturating_sub(1);
        let att = self.atts[a as usize];
        if self.att_gen[a as usize] == gen && att.queued {
            let timeout_ms = att.timeout_ms;
            let result = self.truth[c]
                .serve(self.sc.workload.bytes, &mut self.truth_rng)
                .delayed(now - att.granted);
            // Past its timeout the pending `Expire` ends the attempt.
            if !result.times_out(timeout_ms) {
                let x = &mut self.atts[a as usize];
                x.queued = false;
                x.result = result;
                self.schedule_end(a, att.granted);
            }
        }
        self.serve_queue(c, now);
    }
}

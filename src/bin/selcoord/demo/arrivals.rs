//! The open loop's arrivals in real time, each a one-request worker.

use std::time::{Duration, Instant};

use actix::prelude::*;

use super::{LoadShape, Worker};

/// An open loop: Poisson arrivals, each a one-request worker.
pub(super) struct Arrivals {
    pub(super) load: LoadShape,
    /// When the next arrival is due.
    pub(super) next_at: Instant,
}

impl Actor for Arrivals {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        self.next_at = Instant::now() + self.gap();
        self.wait(ctx);
    }
}

impl Arrivals {
    fn gap(&mut self) -> Duration {
        let rate = self.load.workload.rate_per_s.max(1e-3) * self.load.speed;
        Duration::from_secs_f64(self.load.world.borrow_mut().gap(rate).min(60.0))
    }

    /// Starts every arrival due by now, then waits for the next: a timer per arrival would
    /// round each gap up to the timer's granularity and hold the rate under about a thousand
    /// a second whatever the scenario asks.
    fn wait(&mut self, ctx: &mut Context<Self>) {
        let now = Instant::now();
        while self.next_at <= now {
            Worker::new(self.load.clone(), false).start();
            let gap = self.gap();
            self.next_at += gap;
        }
        ctx.run_later(self.next_at - now, |act, ctx| act.wait(ctx));
    }
}

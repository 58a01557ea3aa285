//! Fleet mode: N coordinators, each with its own workers, over one shared set of candidates.
//!
//! The engine runs unchanged: one truth, one set of queues, so capacity is shared; the
//! [`FleetPolicy`] stands in for the policy and routes each request to its client's own
//! [`Core`](crate::Core) (closed loop: worker `k` belongs to client `k mod N`; open loop: each
//! arrival goes to a client drawn uniformly). With `share = "digest"` every client publishes a
//! digest every `period_s` (the candidates it sampled since its previous one); each copy reaches each other client after `delay_ms` (plus a
//! uniform jitter) unless it is lost (probability `loss`), and is merged there with
//! `Core::apply_digest`. All randomness comes from the run's seed.
//!
//! For a scenario whose timeline degrades a candidate, the policy also samples every client's
//! probability of drawing that candidate, so detection is measured per client, including the
//! clients that never sent to it.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::sync::{Arc, Mutex};

use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use serde::{Deserialize, Serialize};

use super::dist::{MAX_MS, MAX_S};
use super::policy::{Cand, CoordinatorPolicy, Decision, Policy, Req, World};
use crate::core::{CandidateInfo, Limits, Outcome};
use crate::digest::Digest;
use crate::score::Config;

/// The most coordinators a fleet may have.
pub const MAX_CLIENTS: u32 = 100;

/// Whether the coordinators of a fleet share what they learn.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FleetShare {
    /// Each learns alone.
    None,
    /// Each publishes a digest every period and merges the others' as a prior.
    #[default]
    Digest,
}

impl FleetShare {
    /// Parses `none` or `digest`.
    pub fn parse(s: &str) -> Result<Self, String> {
        match s {
            "none" => Ok(FleetShare::None),
            "digest" => Ok(FleetShare::Digest),
            other => Err(format!(
                "unknown fleet share `{other}`; expected none or digest"
            )),
        }
    }

    /// Its name.
    pub fn name(self) -> &'static str {
        match self {
            FleetShare::None => "none",
            FleetShare::Digest => "digest",
        }
    }
}

/// A scenario's `[fleet]` table: how many coordinators, and how their digests travel.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FleetSpec {
    /// Coordinators, 1 to 100.
    pub clients: u32,
    /// `none` or `digest` (default).
    #[serde(default)]
    pub share: FleetShare,
    /// Seconds between a client's digests.
    #[serde(default = "one_s")]
    pub period_s: f64,
    /// Delay of a digest from sender to receiver, ms.
    #[serde(default)]
    pub delay_ms: f64,
    /// Extra delay, uniform in `[0, jitter_ms]`, drawn per copy.
    #[serde(default)]
    pub jitter_ms: f64,
    /// Probability that a copy of a digest is lost.
    #[serde(default)]
    pub loss: f64,
    /// A client whose own outcomes on a candidate change sharply (`Core::digest_urgent`)
    /// publishes at once instead of at the next period, as soon as the others take it
    /// (`share.min_interval_s` plus the jitter after its previous digest).
    #[serde(default)]
    pub urgent: bool,
}

fn one_s() -> f64 {
    1.0
}

impl FleetSpec {
    /// A `[fleet]` table naming only `clients`: they share a digest every second, with no
    /// delay, jitter or loss, and no urgent digests.
    pub fn new(clients: u32) -> Self {
        FleetSpec {
            clients,
            share: FleetShare::default(),
            period_s: one_s(),
            delay_ms: 0.0,
            jitter_ms: 0.0,
            loss: 0.0,
            urgent: false,
        }
    }

    /// Checks every field; the message names the field and what it must be.
    pub fn check(&self) -> Result<(), String> {
        if !(1..=MAX_CLIENTS).contains(&self.clients) {
            return Err(format!(
                "fleet.clients must be 1 to {MAX_CLIENTS}, got {}",
                self.clients
            ));
        }
        if !(self.period_s.is_finite() && (0.001..=MAX_S).contains(&self.period_s)) {
            return Err(format!(
                "fleet.period_s must be a number of seconds from 0.001 to {MAX_S:e}, got {}",
                self.period_s
            ));
        }
        for (name, v) in [("delay_ms", self.delay_ms), ("jitter_ms", self.jitter_ms)] {
            if !(v.is_finite() && (0.0..=MAX_MS).contains(&v)) {
                return Err(format!(
                    "fleet.{name} must be a number of milliseconds from 0 to {MAX_MS:e}, got {v}"
                ));
            }
        }
        if !(0.0..=1.0).contains(&self.loss) {
            return Err(format!(
                "fleet.loss must be a probability between 0 and 1, got {}",
                self.loss
            ));
        }
        Ok(())
    }
}

/// What the fleet counted during one run.
#[derive(Clone, Debug, Default)]
pub(crate) struct FleetCounts {
    /// Digests published (one per client per period).
    pub(crate) digests: u64,
    /// Copies lost on the way.
    pub(crate) lost: u64,
    /// Copies turned away whole by the receiver.
    pub(crate) rejected: u64,
    /// Entries merged.
    pub(crate) entries_applied: u64,
    /// Entries turned away.
    pub(crate) entries_rejected: u64,
}

/// Per client, its probability of drawing the watched candidate over time.
#[derive(Clone, Debug, Default)]
pub(crate) struct Watch {
    /// The watched candidate (the timeline's first degraded one).
    pub(crate) cand: Cand,
    /// Its first degrade, seconds.
    pub(crate) degraded_at: f64,
    /// Sample times, seconds.
    pub(crate) times: Vec<f64>,
    /// Per sample, per client: the probability.
    pub(crate) probability: Vec<Vec<f64>>,
    /// Per client, the times it was granted the watched candidate.
    pub(crate) grants: Vec<Vec<f64>>,
    /// Per client, its probability after every call that changed it, from 5 s before the
    /// degrade on: (time, probability). Detection is read from these, to the event, not from
    /// the samples.
    pub(crate) steps: Vec<Vec<(f64, f64)>>,
    /// Sample at most this often, seconds.
    pub(crate) every_s: f64,
    /// The next sample, seconds.
    pub(crate) next_s: f64,
    /// Stop sampling after this time.
    pub(crate) until_s: f64,
}

/// Where a fleet run's counts and samples are handed back when the engine drops the policy.
pub(crate) type FleetResults = Arc<Mutex<Option<(FleetCounts, Option<Watch>)>>>;

/// A digest copy on its way: (arrival in ns, order, receiver, digest).
type InFlight = Reverse<(u64, u64, u32, usize)>;

/// N coordinators behind one policy; see the [module docs](self).
pub(crate) struct FleetPolicy {
    clients: Vec<CoordinatorPolicy>,
    names: Vec<String>,
    /// Engine request -> its client.
    client_of: Vec<u32>,
    spec: FleetSpec,
    rng: SmallRng,
    /// The next period's digests.
    next_digest_s: f64,
    /// Per client: when it last published.
    last_publish: Vec<f64>,
    /// Per client: when it publishes next off the period (an urgent digest, or a periodic one
    /// held back to keep `gap_s` after an urgent one); infinite for none.
    due: Vec<f64>,
    /// The least time between two digests of one client for the others to take both.
    gap_s: f64,
    inbox: BinaryHeap<InFlight>,
    /// Digests on their way, by slot (freed when no copy is left).
    digests: Vec<Option<(Arc<Digest>, u32)>>,
    free_digests: Vec<usize>,
    order: u64,
    /// The wake-up already asked of the engine.
    wake_at: f64,
    /// Requests started and not finished.
    open: u64,
    out: VecDeque<Decision>,
    counts: FleetCounts,
    watch: Option<Watch>,
    /// Where the counts and the samples go when the run ends (the engine owns the policy).
    results: FleetResults,
}

impl Drop for FleetPolicy {
    fn drop(&mut self) {
        if let Ok(mut r) = self.results.lock() {
            *r = Some((std::mem::take(&mut self.counts), self.watch.take()));
        }
    }
}

impl std::fmt::Debug for FleetPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FleetPolicy")
            .field("clients", &self.clients.len())
            .field("spec", &self.spec)
            .finish()
    }
}

impl FleetPolicy {
    /// A fleet of `spec.clients` coordinators with `config` and `limits` each. `watch`: the
    /// candidate whose draw probability is sampled, its degrade time and when to stop.
    pub(crate) fn new(
        config: &Config,
        limits: Limits,
        spec: &FleetSpec,
        seed: u64,
        watch: Option<(Cand, f64, f64)>,
        results: FleetResults,
    ) -> Result<Self, String> {
        spec.check()?;
        let mut clients = Vec::new();
        let mut names = Vec::new();
        for k in 0..spec.clients {
            let rng = SmallRng::seed_from_u64(seed ^ (u64::from(k) + 1).wrapping_mul(0x9E37_79B9));
            let mut c = CoordinatorPolicy::new(config.clone(), limits, rng)?;
            let name = format!("client-{k}");
            c.core_mut().set_share_identity(&name, 0);
            clients.push(c);
            names.push(name);
        }
        let n = spec.clients as usize;
        let watch = watch.map(|(cand, degraded_at, until_s)| Watch {
            cand,
            degraded_at,
            grants: vec![Vec::new(); n],
            steps: vec![Vec::new(); n],
            every_s: (spec.period_s / 10.0).min(0.1),
            until_s,
            ..Watch::default()
        });
        Ok(FleetPolicy {
            clients,
            names,
            client_of: Vec::new(),
            spec: spec.clone(),
            rng: SmallRng::seed_from_u64(seed ^ 0xF1EE7),
            next_digest_s: spec.period_s,
            last_publish: vec![f64::NEG_INFINITY; n],
            due: vec![f64::INFINITY; n],
            // A fifth over the receivers' limit, and the jitter: a period's digest applied
            // late (it waited for the fleet's next event) does not turn the next one away.
            gap_s: 1.2 * config.share.min_interval_s + spec.jitter_ms / 1000.0,
            inbox: BinaryHeap::new(),
            digests: Vec::new(),
            free_digests: Vec::new(),
            order: 0,
            wake_at: f64::INFINITY,
            open: 0,
            out: VecDeque::new(),
            counts: FleetCounts::default(),
            watch,
            results,
        })
    }

    fn client(&self, req: Req) -> usize {
        self.client_of.get(req as usize).copied().unwrap_or(0) as usize
    }

    /// Notes client `k`'s probability of drawing the watched candidate if it changed.
    fn note(&mut self, k: usize, now: f64) {
        let Some(w) = self.watch.as_mut() else {
            return;
        };
        if now < w.degraded_at - 5.0 || now > w.until_s {
            return;
        }
        let p = self.clients[k].probability_of(w.cand);
        let steps = &mut w.steps[k];
        if steps.last().is_none_or(|&(_, last)| last != p) {
            steps.push((now, p));
        }
    }

    /// Moves client `k`'s decisions out, noting grants of the watched candidate and finished
    /// requests.
    fn collect(&mut self, k: usize, now: f64) {
        self.note(k, now);
        while let Some(d) = self.clients[k].poll() {
            match d {
                Decision::Grant { cand, .. } => {
                    if let Some(w) = self.watch.as_mut().filter(|w| w.cand == cand) {
                        w.grants[k].push(now);
                    }
                }
                Decision::Reject { .. } => self.open = self.open.saturating_sub(1),
                // The engine's worker asks again or ends the request (`done`).
                Decision::Stall { .. } | Decision::Reclaimed { .. } => {}
            }
            self.out.push_back(d);
        }
    }

    /// Publishes the digests due, delivers the copies that arrived, samples the watched
    /// candidate, and asks to be woken for what comes next.
    fn catch_up(&mut self, now: f64) {
        if self.spec.share == FleetShare::Digest {
            loop {
                let (k, due) = self
                    .due
                    .iter()
                    .copied()
                    .enumerate()
                    .fold((0, f64::INFINITY), |a, b| if b.1 < a.1 { b } else { a });
                let grid = self.next_digest_s;
                if grid.min(due) > now {
                    break;
                }
                if grid <= due {
                    for k in 0..self.clients.len() {
                        if grid - self.last_publish[k] >= self.gap_s {
                            self.publish(k, grid);
                        } else {
                            self.due[k] = self.due[k].min(self.last_publish[k] + self.gap_s);
                        }
                    }
                    self.next_digest_s += self.spec.period_s;
                } else {
                    self.publish(k, due);
                }
            }
            self.deliver(now);
        }
        self.sample(now);
        // Copies on their way and urgent digests are few: woken for always, so a digest is
        // applied when it arrives even while no request is open. The period and the samples
        // go on forever: woken for only while requests are open.
        let mut next = self.due.iter().copied().fold(f64::INFINITY, f64::min);
        if let Some(Reverse((ns, ..))) = self.inbox.peek() {
            next = next.min(*ns as f64 / 1e9);
        }
        if self.open > 0 {
            if self.spec.share == FleetShare::Digest {
                next = next.min(self.next_digest_s);
            }
            if let Some(w) = &self.watch {
                // No sample is taken past `until_s`: a window that closes before it opens
                // (an open loop that ends more than 5 s before the degrade) asks for none.
                let at = w.next_s.max(w.degraded_at - 5.0);
                if w.next_s < w.until_s && at <= w.until_s {
                    next = next.min(at);
                }
            }
        }
        if next.is_finite() && (self.wake_at <= now || next < self.wake_at) {
            self.wake_at = next;
            self.out.push_back(Decision::Stall { retry_at: next });
        }
    }

    /// Client `k` publishes its digest at `at`.
    fn publish(&mut self, k: usize, at: f64) {
        let n = self.clients.len();
        self.last_publish[k] = at;
        self.due[k] = f64::INFINITY;
        let clock = self.clients[k].clock();
        // Only what changed since the previous digest: receivers keep the rest.
        let digest = Arc::new(self.clients[k].core_mut().take_digest(clock.at(at), true));
        self.counts.digests += 1;
        let mut copies = 0;
        let slot = self.free_digests.pop().unwrap_or_else(|| {
            self.digests.push(None);
            self.digests.len() - 1
        });
        for to in 0..n {
            if to == k {
                continue;
            }
            if self.spec.loss > 0.0 && self.rng.random_bool(self.spec.loss) {
                self.counts.lost += 1;
                continue;
            }
            let jitter = if self.spec.jitter_ms > 0.0 {
                self.rng.random_range(0.0..=self.spec.jitter_ms)
            } else {
                0.0
            };
            let arrive = at + (self.spec.delay_ms + jitter) / 1000.0;
            self.order += 1;
            self.inbox.push(Reverse((
                (arrive * 1e9).round() as u64,
                self.order,
                to as u32,
                slot,
            )));
            copies += 1;
        }
        if copies > 0 {
            self.digests[slot] = Some((digest, copies));
        } else {
            self.free_digests.push(slot);
        }
    }

    fn deliver(&mut self, now: f64) {
        let now_ns = (now * 1e9).round() as u64;
        let mut touched = vec![false; self.clients.len()];
        while let Some(&Reverse((ns, _, to, slot))) = self.inbox.peek() {
            if ns > now_ns {
                break;
            }
            self.inbox.pop();
            let Some((digest, left)) = self.digests[slot].as_mut() else {
                continue;
            };
            let digest = Arc::clone(digest);
            *left -= 1;
            if *left == 0 {
                self.digests[slot] = None;
                self.free_digests.push(slot);
            }
            let c = &mut self.clients[to as usize];
            let at = c.clock().at(ns as f64 / 1e9);
            match c.core_mut().apply_digest(at, &digest) {
                Ok(applied) => {
                    self.counts.entries_applied += applied.applied as u64;
                    self.counts.entries_rejected += applied.rejected_total() as u64;
                }
                Err(_) => self.counts.rejected += 1,
            }
            touched[to as usize] = true;
        }
        for (k, t) in touched.into_iter().enumerate() {
            if t {
                // One refresh for the round of digests this client just took in.
                self.clients[k].tick_core(now);
                self.collect(k, now);
            }
        }
    }

    fn sample(&mut self, now: f64) {
        let Some(w) = self.watch.as_mut() else {
            return;
        };
        if now < w.next_s || now > w.until_s || now < w.degraded_at - 5.0 {
            return;
        }
        w.next_s = now + w.every_s;
        let cand = w.cand;
        let row: Vec<f64> = self
            .clients
            .iter()
            .map(|c| c.probability_of(cand))
            .collect();
        if let Some(w) = self.watch.as_mut() {
            w.times.push(now);
            w.probability.push(row);
        }
    }
}

impl Policy for FleetPolicy {
    fn add(&mut self, cand: Cand, info: &CandidateInfo, now: f64) {
        for k in 0..self.clients.len() {
            self.clients[k].add(cand, info, now);
            self.collect(k, now);
        }
    }

    fn remove(&mut self, cand: Cand, now: f64, world: &World<'_>) {
        for k in 0..self.clients.len() {
            self.clients[k].remove(cand, now, world);
            self.collect(k, now);
        }
    }

    fn assign(&mut self, req: Req, worker: Option<u32>) {
        let n = self.spec.clients;
        let k = match worker {
            Some(w) => w % n,
            None => self.rng.random_range(0..n),
        };
        if self.client_of.len() <= req as usize {
            self.client_of.resize(req as usize + 1, 0);
        }
        self.client_of[req as usize] = k;
    }

    fn ready(&mut self, req: Req, eligible: Option<&[Cand]>, now: f64, world: &World<'_>) {
        self.catch_up(now);
        self.open += 1;
        let k = self.client(req);
        self.clients[k].ready(req, eligible, now, world);
        self.collect(k, now);
    }

    fn first_byte(&mut self, req: Req, cand: Cand, now: f64) {
        let k = self.client(req);
        self.clients[k].first_byte(req, cand, now);
    }

    fn outcome(&mut self, req: Req, cand: Cand, outcome: &Outcome, now: f64) {
        let k = self.client(req);
        self.clients[k].outcome(req, cand, outcome, now);
        self.note(k, now);
        if self.spec.urgent
            && self.spec.share == FleetShare::Digest
            && self.clients[k].core().digest_urgent()
        {
            // Published at the next call (the request's `done` comes at once).
            let at = now.max(self.last_publish[k] + self.gap_s);
            self.due[k] = self.due[k].min(at);
        }
    }

    fn done(&mut self, req: Req, cand: Cand, retry: bool, now: f64, world: &World<'_>) {
        self.catch_up(now);
        if !retry {
            self.open = self.open.saturating_sub(1);
        }
        let k = self.client(req);
        self.clients[k].done(req, cand, retry, now, world);
        self.collect(k, now);
    }

    fn tick(&mut self, now: f64, world: &World<'_>) {
        self.catch_up(now);
        for k in 0..self.clients.len() {
            self.clients[k].tick(now, world);
            self.collect(k, now);
        }
    }

    fn next_wakeup_s(&self) -> Option<f64> {
        self.clients
            .iter()
            .filter_map(Policy::next_wakeup_s)
            .reduce(f64::min)
    }

    fn cancel(&mut self, req: Req, now: f64) {
        let k = self.client(req);
        self.clients[k].cancel(req, now);
        self.collect(k, now);
    }

    fn ask_again(
        &mut self,
        req: Req,
        eligible: Option<&[Cand]>,
        attempts: u32,
        now: f64,
        world: &World<'_>,
    ) {
        // Still open here: the reclaim left it so.
        self.catch_up(now);
        let k = self.client(req);
        self.clients[k].ask_again(req, eligible, attempts, now, world);
        self.collect(k, now);
    }

    fn poll(&mut self) -> Option<Decision> {
        self.out.pop_front()
    }

    fn decisions(&self) -> u64 {
        self.clients.iter().map(Policy::decisions).sum()
    }

    fn stalls(&self) -> u64 {
        0
    }

    fn arm_names(&self) -> Vec<String> {
        self.names.clone()
    }

    fn arm(&self, req: Req) -> Option<usize> {
        (self.clients.len() > 1).then(|| self.client(req))
    }

    fn deadline_ms(&self, req: Req) -> Option<f64> {
        self.clients[self.client(req)].deadline_ms(req)
    }
}

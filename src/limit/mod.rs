//! Adaptive concurrency limits: one [`Estimator`] per candidate learns how many attempts the
//! candidate takes at once before it queues, from the outcomes the coordinator already sees.
//!
//! Pure code (no clock, no I/O): every call takes the time in seconds.
//!
//! ## The rule
//!
//! - **No-load latency.** The mean latency of successes granted at *light load* (the candidate's
//!   attempts in flight, the new one included, at most half its limit, or 1). Samples taken
//!   under load raise it only through a latency cut's check (below), which takes a latency
//!   that did not come down with the concurrency: queueing does, so it cannot drift up under
//!   sustained load. A window whose mean is clearly below it lowers it at once. When it fell a
//!   long way (below the window's mean less the allowance, or by more than the allowance while
//!   the window ran) in a window that ran at two or more attempts in flight, what it fell to
//!   may hold queueing too (a first answer from a cold start, then windows at a limit far past
//!   the capacity, which a workload that keeps the limit full never corrects at light load):
//!   the limit is cut to half the window's concurrency and the next window re-measures. If its
//!   latency fell by at least a quarter of the fall in proportion to the concurrency, its mean
//!   is the estimate and the next halving re-measures again; if not, the last cut is undone and
//!   probes grow the limit as usual (`remeasure.rs`). When the true
//!   no-load latency rises, the windows look queued, the limit falls until attempts run at
//!   light load, and those samples correct it: nothing is ever probed by cutting the limit on a
//!   schedule.
//! - **Windows.** A window holds the first `max(window_samples, limit)` attempts granted after
//!   it opens and is judged on their successes once they have reported (or, if some never
//!   report, after ten no-load latencies). At a window's end, with `m` its mean latency, `k`
//!   the mean attempts in flight at their grants and `r = m / no_load`:
//!   - `r` above `1 + tolerance` plus twice the standard error of the window's mean
//!     (the latency's own noise, measured at light load, and kept within four times the
//!     spread of each window's own answers): queueing. By Little's law the
//!     candidate completes `k / m` per second, so it would run them without queueing at
//!     `k / r` in flight: the limit drops to that (at most halving). Out of slow start, only
//!     on the second such window in a row (one alone may be a loaded machine's or the
//!     network's noise), unless the limit just grew.
//!   - The window after such a cut checks it: queueing comes down with the concurrency (a
//!     saturated candidate's wait is in proportion to its attempts in flight); if the wait
//!     over the no-load latency fell less than the concurrency did, the latency was not the
//!     candidate's queue: the cut is undone and that latency becomes the no-load one.
//!   - otherwise, if the window reached the limit (an attempt was granted at it) and did
//!     not wait, a probe is due after as many clean windows as the last failed probes asked
//!     for (doubling per probe that queued, up to 8; eightfold per probe that was refused, up
//!     to 1,024), and at least once a second (once in up to 8 s after refused probes,
//!     doubling per refused probe). A concurrency refused less than that interval ago is not
//!     probed again before it.
//! - **Probes.** A probe is one attempt past the limit: the limit in force is one more until
//!   that attempt is granted, then the learned one again. Back as fast as without load (within
//!   twice the latency's noise of the no-load latency, or of the attempts answered beside it
//!   when those were all slower), the limit grows by one, and by twice as much
//!   after each growth in a row whose window did not wait (at most a quarter of the limit);
//!   slower, refused or timed out, the limit stays and the next probe waits longer.
//! - **Slow start.** Until the first sign of queueing or overload, every success granted at
//!   the full limit and answered about as fast as without load adds three: the limit grows
//!   fourfold per round trip. Its first failure undoes it in one step: the limit drops below
//!   the failed attempt's concurrency.
//! - **Back-pressure.** An `overload` failure or a `timeout` multiplies the limit by `backoff`,
//!   at most once per no-load latency, whatever the burst; within that interval a failure
//!   granted since the cut still lowers the limit to its own concurrency less one, and a
//!   failed probe is only undone. Neither is a latency sample (a
//!   timeout's latency is the timeout, not the candidate's). A timeout counts only when the
//!   attempt itself ran at least `TIMEOUT_PRESSURE` no-load latencies: a caller's deadline
//!   spent mostly waiting before the grant says nothing about the candidate. Other failures
//!   (transport, application, refused, cancelled) say nothing about load and are ignored, and
//!   so does an overload failure that the core finds does not follow the candidate's load (its
//!   sheds come at no higher concurrency than its other attempts: a quota's steady trickle of
//!   503s; the core then passes it as [`Signal::Other`]).
//! - The limit stays within `[min, max]`; the limit in force is its integer part.

mod config;
mod remeasure;
mod sample;
mod window;

pub use config::AdaptiveConfig;
pub use sample::{LimitSnapshot, Sample, Signal};
use window::Window;

/// The largest relative deviation of a light answer from the no-load latency that its noise
/// takes in (larger ones count as this much).
const MAX_DEVIATION: f64 = 1e3;

/// A closed window whose attempts have not all reported after this many no-load latencies is
/// judged on what it has (an attempt may never report, e.g. when its candidate goes away).
const STALE_WINDOW: f64 = 10.0;

/// A timeout is back-pressure only if its attempt ran at least this many no-load latencies
/// (an attempt granted just before its caller's deadline times out however idle the
/// candidate is).
pub const TIMEOUT_PRESSURE: f64 = 2.0;

/// One candidate's adaptive limit. See the [module docs](self).
#[derive(Clone, Debug, PartialEq)]
pub struct Estimator {
    limit: f64,
    no_load_ms: Option<f64>,
    /// Light-load successes seen (for the warm-up of the no-load mean).
    light_n: u32,
    noise: f64,
    slow_start: bool,
    /// Clean windows to wait for before the next growth: doubled by each growth that queued,
    /// back to 1 by one that held.
    probe_wait: u32,
    /// Clean windows since the last change.
    clean: u32,
    /// The current window judges a limit just grown.
    grew: bool,
    window: Window,
    last_cut_s: f64,
    /// When the limit last changed (a cut or a growth), seconds.
    last_change_s: f64,
    /// A probe is due once the limit has not changed for this long, seconds: doubled by each
    /// refused probe, back to [`MAX_PROBE_INTERVAL_S`] by one that held.
    probe_interval_s: f64,
    /// The probe under way, if any.
    probe: Probe,
    /// The last cut on latency alone, until the window after it shows the latency fell with
    /// the concurrency.
    check: Option<Check>,
    /// The last window queued, and the limit was held: a second in a row cuts it.
    queued_once: bool,
    /// Growths in a row whose windows did not wait: the next grows by twice as much.
    streak: u32,
    /// The limit before the last growth (a refused growth goes back to it).
    grown_from: f64,
    /// The lowest concurrency refused (or timed out) since the limit was last cut, and when:
    /// a probe up to it waits `probe_interval_s` from then.
    refused: Option<(u32, f64)>,
    /// Resumed from a snapshot and not cut since: light samples may only lower the no-load
    /// latency, as in a slow start (the saved limit may be far above what the candidate runs
    /// now, and then every attempt is light however much it queues).
    resumed: bool,
}

/// A cut on latency alone, to be checked by the next window: queueing at the candidate falls
/// with the concurrency (by Little's law, a saturated candidate's latency is proportional to
/// its attempts in flight), a slower machine or network does not.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Check {
    /// The limit before the cut.
    limit: f64,
    /// The cut window's mean latency (ms) and mean concurrency at grant.
    mean_ms: f64,
    k: f64,
    /// A cut to re-measure the no-load latency (see [`Estimator::remeasure`]), not a cut on
    /// queueing.
    remeasure: bool,
}

/// A probe: one attempt past the limit, judged before the limit grows.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Probe {
    /// No probe under way.
    Idle,
    /// The limit in force is one more than the learned one until an attempt is granted past
    /// the learned one: that attempt is the probe.
    Open,
    /// The probe attempt, granted at `granted_s` at `concurrency` in flight, has not reported;
    /// the limit in force is the learned one again.
    Out { granted_s: f64, concurrency: u32 },
}

/// The shortest interval between two back-pressure cuts when no latency is known yet, seconds.
const CUT_INTERVAL_UNKNOWN_S: f64 = 0.01;

/// The most clean windows waited for between two growths after a probe that queued: a probe
/// past a capacity that queues costs some latency.
const MAX_PROBE_WAIT: u32 = 8;

/// The most clean windows waited for between two growths after a probe that was refused (or
/// timed out): every probe past such a capacity costs a failed attempt, so they grow rare (the
/// time bound [`MAX_PROBE_INTERVAL_S`] still applies).
const MAX_PROBE_WAIT_REFUSED: u32 = 1024;

/// A probe past a limit that held this long is due whatever the windows counted, seconds: a
/// capacity that rose is found within about this long. Doubled by each refused probe, up to
/// [`MAX_REFUSED_PROBE_INTERVAL_S`].
const MAX_PROBE_INTERVAL_S: f64 = 1.0;

/// The longest interval between two probes past a capacity that refuses them, seconds: each
/// such probe costs a failed attempt.
const MAX_REFUSED_PROBE_INTERVAL_S: f64 = 8.0;

/// What a slow start adds per success granted at the full limit: the limit grows fourfold per
/// round trip. A caller that offers more than the limits take waits while they are learned, and
/// under a high load that queue drains only slowly: each round trip of the start counts.
const SLOW_START_STEP: f64 = 3.0;

/// The least noise (relative variance) a window's spread brings the noise down to: a part in a
/// million of the latency, squared.
const NOISE_FLOOR: f64 = 1e-12;

impl Estimator {
    /// A new estimator at `config.initial`, starting its first window at `now_s`.
    pub fn new(config: &AdaptiveConfig, now_s: f64) -> Self {
        Estimator {
            limit: f64::from(config.initial.clamp(config.min.max(1), config.max.max(1))),
            no_load_ms: None,
            light_n: 0,
            noise: 0.0,
            slow_start: true,
            probe_wait: 1,
            clean: 0,
            grew: false,
            window: Window {
                start_s: now_s,
                ..Window::default()
            },
            last_cut_s: f64::NEG_INFINITY,
            last_change_s: now_s,
            probe_interval_s: MAX_PROBE_INTERVAL_S,
            probe: Probe::Idle,
            check: None,
            queued_once: false,
            streak: 0,
            grown_from: 0.0,
            refused: None,
            resumed: false,
        }
    }

    /// An estimator resumed from a snapshot (its limit clamped to the config's bounds).
    pub fn restore(config: &AdaptiveConfig, saved: &LimitSnapshot, now_s: f64) -> Self {
        let mut e = Estimator::new(config, now_s);
        e.limit = saved.limit;
        // A base of 0 (written by builds that let a window of 0 ms answers set it) judges
        // nothing: learned again.
        e.no_load_ms = saved.no_load_ms.filter(|ms| *ms > 0.0);
        e.light_n = u32::from(e.no_load_ms.is_some()) * 20;
        e.noise = saved.noise;
        e.slow_start = saved.slow_start;
        e.resumed = !saved.slow_start;
        e.clamp(config);
        e
    }

    /// What to save.
    pub fn snapshot(&self) -> LimitSnapshot {
        LimitSnapshot {
            limit: self.limit,
            no_load_ms: self.no_load_ms,
            noise: self.noise,
            slow_start: self.slow_start,
        }
    }

    /// The limit in force: the integer part of the learned one (at least 1), and one more
    /// while a probe waits for its grant.
    pub fn limit(&self) -> u32 {
        self.learned() + u32::from(self.probe == Probe::Open)
    }

    /// The integer part of the learned limit, at least 1.
    fn learned(&self) -> u32 {
        (self.limit.floor() as u32).max(1)
    }

    /// The learned limit, fractional.
    pub fn limit_f64(&self) -> f64 {
        self.limit
    }

    /// The no-load latency estimate, milliseconds (`None` before the first success).
    pub fn no_load_ms(&self) -> Option<f64> {
        self.no_load_ms
    }

    /// Keeps the limit within the config's bounds (after a config change).
    pub fn clamp(&mut self, config: &AdaptiveConfig) {
        let lo = f64::from(config.min.max(1));
        let hi = f64::from(config.max.max(config.min).max(1));
        self.limit = self.limit.clamp(lo, hi);
        if self.probe == Probe::Open && self.learned() >= hi as u32 {
            self.probe = Probe::Idle;
        }
    }

    /// The driver was paused for `by_s` seconds and the attempts running skip it
    /// ([`Core::driver_paused`](crate::core::Core::driver_paused)): the times kept here move
    /// with their grant times, none past `now_s`, so the probe out is still found by its grant
    /// time and its window still holds it.
    pub fn skip_pause(&mut self, by_s: f64, now_s: f64) {
        let shift = |t: f64| (t + by_s).min(now_s);
        self.window.start_s = shift(self.window.start_s);
        self.window.closed_s = self.window.closed_s.map(shift);
        if self.last_cut_s.is_finite() {
            self.last_cut_s = shift(self.last_cut_s);
        }
        self.last_change_s = shift(self.last_change_s);
        if let Probe::Out { granted_s, .. } = &mut self.probe {
            *granted_s = shift(*granted_s);
        }
        if let Some((_, at)) = &mut self.refused {
            *at = shift(*at);
        }
    }

    /// An attempt was granted at `concurrency` in flight (itself included): the first
    /// `window_samples` of a window are the ones it judges, except a probe, which is judged
    /// alone. Returns whether the limit in force changed (a probe's grant closes it).
    pub fn granted(&mut self, config: &AdaptiveConfig, concurrency: u32, now_s: f64) -> bool {
        if self.probe == Probe::Open && concurrency > self.learned() {
            self.probe = Probe::Out {
                granted_s: now_s,
                concurrency,
            };
            return true;
        }
        let limit = self.limit();
        let w = &mut self.window;
        if w.closed_s.is_some() {
            return false;
        }
        w.granted += 1;
        w.sum_k += f64::from(concurrency.max(1));
        w.max_k = w.max_k.max(concurrency);
        // At least one round of the limit: the attempts past a capacity are in it.
        if w.granted >= config.window_samples.max(limit) {
            w.closed_s = Some(now_s);
        }
        false
    }

    /// Takes one outcome at `now_s`. Returns whether the limit in force changed.
    pub fn observe(&mut self, config: &AdaptiveConfig, sample: Sample, now_s: f64) -> bool {
        let before = self.limit();
        if let Probe::Out {
            granted_s,
            concurrency,
        } = self.probe
        {
            if sample.granted_s == granted_s && sample.concurrency == concurrency {
                self.probe_answered(&sample, now_s);
                self.clamp(config);
                return self.limit() != before;
            }
        }
        let member = self.window.holds(sample.granted_s, sample.concurrency);
        match sample.signal {
            Signal::Overload => self.back_pressure(config, &sample, now_s),
            Signal::Timeout => {
                let ran_ms = (now_s - sample.granted_s) * 1000.0;
                if self
                    .no_load_ms
                    .is_none_or(|ms| ran_ms >= TIMEOUT_PRESSURE * ms)
                {
                    self.back_pressure(config, &sample, now_s);
                }
            }
            Signal::Success(ms) if ms.is_finite() && ms >= 0.0 => {
                self.success(config, ms, &sample, member);
            }
            Signal::Success(_) | Signal::Other => {}
        }
        let w = &mut self.window;
        if member && w.start_s <= sample.granted_s && w.reported < w.granted {
            w.reported += 1;
        }
        let w = self.window;
        if let Some(closed) = w.closed_s {
            let stale = STALE_WINDOW * self.no_load_ms.unwrap_or(100.0) / 1000.0;
            if w.reported >= w.granted || now_s - closed > stale {
                self.end_window(config, now_s);
            }
        }
        self.clamp(config);
        self.limit() != before
    }

    fn back_pressure(&mut self, config: &AdaptiveConfig, sample: &Sample, now_s: f64) {
        // Attempts granted before the last cut were sent under the limit it cut.
        if sample.granted_s < self.last_cut_s {
            return;
        }
        if self.probe == Probe::Open {
            self.probe = Probe::Idle;
        }
        // A refusal or a timeout is load: a latency cut before it stands.
        self.check = None;
        let k = sample.concurrency.max(1);
        if self
            .refused
            .is_none_or(|(r, at)| k <= r || now_s - at >= self.probe_interval_s)
        {
            self.refused = Some((k, now_s));
        }
        let proven = f64::from(k) - 1.0;
        // And at most one cut per no-load latency, whatever the burst; within it, an attempt
        // granted since the cut still proves its own concurrency too many (a candidate that
        // refuses at once would otherwise be sent a refusal per slot per millisecond).
        let interval = self
            .no_load_ms
            .map_or(CUT_INTERVAL_UNKNOWN_S, |ms| (ms / 1000.0).max(1e-6));
        if now_s - self.last_cut_s < interval {
            if proven < self.limit {
                self.limit = proven.max(self.limit / 2.0);
            }
            return;
        }
        self.last_cut_s = now_s;
        self.last_change_s = now_s;
        self.resumed = false;
        let probe = self.grew && !self.slow_start;
        let overshot = self.slow_start;
        self.slow_start = false;
        self.after_cut(MAX_PROBE_WAIT_REFUSED);
        if overshot {
            // The slow start found the capacity by a refusal past it, as a refused probe does.
            self.refused_probe();
        }
        // The attempt proved its concurrency too many: below it at once, but never more than
        // halving on one failure, except for the first failure of a slow start: the limit grew
        // fourfold per round trip and is undone in one step (the attempts it already sent past
        // the capacity fail anyway; more would follow). A probe one past a limit that held
        // fails at that one: it is undone, no more, and the next probe waits longer.
        self.limit = if probe && proven >= self.grown_from {
            self.probe_interval_s = (self.probe_interval_s * 2.0).min(MAX_REFUSED_PROBE_INTERVAL_S);
            self.grown_from
        } else if overshot {
            (self.limit * config.backoff).min(proven)
        } else {
            (self.limit * config.backoff).min(proven.max(self.limit / 2.0))
        };
        self.restart_window(now_s);
        self.window.cap = Some(self.limit());
    }

    fn restart_window(&mut self, now_s: f64) {
        self.window = Window {
            start_s: now_s,
            base_ms: self.no_load_ms,
            ..Window::default()
        };
    }

    fn success(&mut self, config: &AdaptiveConfig, ms: f64, sample: &Sample, member: bool) {
        let k = sample.concurrency.max(1);
        // Light: at most half the limit in force at its grant (or alone).
        let light = k <= (sample.limit / 2).max(1);
        // Granted since the last cut, under the limit it set: at the cut's own instant only
        // within that limit (attempts granted just before it, under the old one, share it).
        let since_cut = sample.granted_s > self.last_cut_s
            || (sample.granted_s == self.last_cut_s && k <= self.limit());
        match self.no_load_ms {
            // A first byte of 0 ms (or less) says nothing of the latency: a base of 0 would
            // never let a window be judged.
            _ if ms <= 0.0 => {}
            None => {
                self.no_load_ms = Some(ms);
                self.light_n = u32::from(light);
            }
            // A light sample may raise the estimate only once the limit was cut (it is then
            // near the capacity, and half of it runs unqueued) and if granted since: a slow
            // start can overshoot the capacity severalfold, and so can a limit that the
            // candidate's capacity just fell under, or one resumed from a snapshot.
            Some(base)
                if light && (ms <= base || (!self.slow_start && !self.resumed && since_cut)) =>
            {
                // A running mean at first, then an EMA of weight `no_load_alpha`.
                self.light_n = self.light_n.saturating_add(1);
                let a = (1.0 / f64::from(self.light_n)).max(config.no_load_alpha);
                let next = base + a * (ms - base);
                if base > 0.0 {
                    // Within a thousandfold either way, so the noise stays finite whatever
                    // the first answer was (1e-300 ms over a base of 20 overflowed to inf,
                    // and the next update made it NaN).
                    let dev = (ms / base - 1.0).clamp(-1.0, MAX_DEVIATION);
                    self.noise += a * (dev * dev - self.noise);
                }
                self.no_load_ms = Some(next);
            }
            Some(_) => {}
        }
        // A time of 0 ms (a cached answer) says nothing of waiting, as for the base above: a
        // window of them would read as no latency at all and set the base to 0.
        if member && ms > 0.0 {
            self.window.n += 1;
            self.window.sum_ms += ms;
            self.window.sum_sq_ms += ms * ms;
        }
        // Slow start: three more for every success granted at the full limit, so the limit
        // grows fourfold per round trip, and a step past the capacity is three attempts, not
        // a whole round's growth: a candidate that refuses past it at once answers the first
        // one over before the next step.
        // Only while answers come about as fast as without load: a success that queued says
        // the capacity is near, and the window it belongs to judges by how much.
        let calm = self
            .no_load_ms
            .is_none_or(|base| ms <= base * (1.0 + config.tolerance + 2.0 * self.noise.sqrt()));
        // Growth follows the limit in force: under a lower static cap, successes at the cap
        // grow the learned limit to at most four times it, not to `max`, so raising the cap
        // later does not release a flood.
        if self.slow_start && k >= sample.limit && calm {
            self.limit = (self.limit + SLOW_START_STEP)
                .min(4.0 * f64::from(sample.limit) + SLOW_START_STEP)
                .max(self.limit);
        }
    }

    fn end_window(&mut self, config: &AdaptiveConfig, now_s: f64) {
        let w = self.window;
        self.restart_window(now_s);
        let Some(base) = self.no_load_ms.filter(|b| *b > 0.0) else {
            return;
        };
        if w.n == 0 || w.granted == 0 {
            return;
        }
        let n = f64::from(w.n);
        let m = w.sum_ms / n;
        // The noise is learned at light load, which a limit near a busy candidate's capacity
        // seldom sees: one odd early sample (a cold start, a 0.5 ms answer) would set it for
        // good, and with it every allowance. It is kept within four times the spread of the
        // window's own answers (a window's spread under load is at least the latency's own,
        // but for the chance of a small sample), though not below a part in a million, so
        // answers that differ by a rounding still read as equal.
        if w.n >= 2 {
            let var = (w.sum_sq_ms / n - m * m).max(0.0) / (base * base);
            if 4.0 * var < self.noise {
                self.noise = (4.0 * var).max(NOISE_FLOOR).min(self.noise);
            }
        }
        let k = w.sum_k / f64::from(w.granted);
        let r = m / base;
        // By Little's law `1 - 1 / r` is the share of the attempts in flight that wait: at most
        // `tolerance` of them, and never more than one attempt's worth, plus the noise.
        let allowance = config.tolerance.min(1.0 / k) + 2.0 * (self.noise / n).sqrt();
        let waiting = 1.0 - 1.0 / r;
        if let Some(c) = self.check.take() {
            if c.remeasure {
                self.remeasured(config, c, m, k, now_s);
                return;
            }
            // The wait queueing adds comes down at least in proportion to the concurrency.
            if k < c.k && m - base > (c.mean_ms - base) * k / c.k {
                // It stayed nearer where it was: the latency is not this candidate's queue.
                // The cut is undone, and the latency at the lower concurrency is its no-load.
                self.limit = c.limit;
                self.no_load_ms = Some(m);
                self.last_change_s = now_s;
                return;
            }
        }
        // The estimate fell a long way during a window that ran loaded (or falls now, below
        // the window's mean): what it fell to may hold queueing too, and so may this window.
        let fell = r < 1.0 - allowance || w.base_ms.is_some_and(|b| base < b * (1.0 - allowance));
        if fell && k >= remeasure::REMEASURE_K {
            self.no_load_ms = Some(m.min(base));
            self.remeasure(config, m, k, now_s);
            return;
        }
        let first = !std::mem::replace(&mut self.queued_once, waiting > allowance);
        if waiting > allowance && first && !self.slow_start && !self.grew {
            // One window that queued under a limit that held may be the machine's or the
            // network's noise: the next one confirms it.
            return;
        }
        if waiting > allowance {
            self.queued_once = false;
            // In slow start the limit grew during the window: judge the concurrency the
            // window ran at.
            let ran = if self.slow_start {
                self.limit.min(f64::from(w.max_k.max(1)))
            } else {
                self.limit
            };
            // A cut in slow start is not checked: its window's latency is that of a queue
            // still filling, not in proportion to the concurrency.
            self.check = (!self.slow_start).then_some(Check {
                limit: self.limit,
                mean_ms: m,
                k,
                remeasure: false,
            });
            self.slow_start = false;
            // Back-pressure from attempts granted before this cut was sent under the old limit.
            self.last_cut_s = now_s;
            self.last_change_s = now_s;
            self.resumed = false;
            self.after_cut(MAX_PROBE_WAIT);
            // By Little's law the candidate would have served the window's throughput without
            // waiting at `limit / r` in flight; at least one less, at most halving.
            let target = (ran / r).min(ran - 1.0);
            self.limit = target.max(ran / 2.0);
            self.window.cap = Some(self.limit());
            return;
        }
        if r < 1.0 - allowance {
            // The estimate is above what this whole window saw: it was taken under load.
            self.no_load_ms = Some(m);
        }
        // Grow only from a window that (nearly) did not wait: one that waited within the
        // allowance holds the limit where it is.
        // Probing past a limit that queued waits for `probe_wait` clean windows; a growth that
        // held shows the capacity moving up, and the next one follows at once.
        if waiting <= allowance / 2.0 && w.max_k >= self.limit() {
            if self.grew {
                self.probe_wait = 1;
                self.probe_interval_s = MAX_PROBE_INTERVAL_S;
                self.streak += 1;
            }
            self.clean += 1;
            self.grew = false;
            let due = (self.clean >= self.probe_wait
                || now_s - self.last_change_s >= self.probe_interval_s)
                && !self.near_refused(1, now_s);
            if due && self.probe == Probe::Idle && self.learned() < config.max {
                self.probe = Probe::Open;
                self.clean = 0;
            }
        } else {
            if self.grew {
                self.streak = 0;
            }
            self.grew = false;
        }
    }

    /// The probe attempt reported. Back as fast as without load: the limit grows by one
    /// (more after growths in a row that did not wait), and the next window judges it. Slower: it waited, and the next probe waits for
    /// twice as many clean windows. Refused or timed out: the next one waits eight times as
    /// many, and twice as long. Either way the limit stays where it held, and a probe is
    /// never a latency sample of the windows.
    fn probe_answered(&mut self, sample: &Sample, now_s: f64) {
        self.probe = Probe::Idle;
        self.clean = 0;
        self.last_change_s = now_s;
        match sample.signal {
            Signal::Success(ms) if ms.is_finite() && ms >= 0.0 => {
                // The probe asks whether one attempt more waits at all: it must come back
                // within the latency's own noise of the no-load latency, or of the attempts
                // answered beside it when those were all slower (a loaded machine slows them
                // all, a queue only the one past the capacity). `tolerance` is a share of a
                // window's attempts that may wait, not a wait one attempt may take.
                let w = &self.window;
                let beside = (w.n > 0).then(|| w.sum_ms / f64::from(w.n));
                let calm = self.no_load_ms.is_none_or(|base| {
                    let reference = beside.map_or(base, |b| b.max(base));
                    ms <= reference * (1.0 + 2.0 * self.noise.sqrt())
                });
                if calm {
                    // One, and twice as much after each growth in a row that did not wait
                    // (a capacity that rose is followed quickly), at most a quarter.
                    let mut step = f64::from(1u32 << self.streak.min(10));
                    step = step.min((self.limit / 4.0).floor()).max(1.0);
                    while step > 1.0 && self.near_refused(step as u32, now_s) {
                        step -= 1.0;
                    }
                    self.grown_from = self.limit;
                    self.limit += step;
                    self.grew = true;
                    self.restart_window(now_s);
                } else {
                    self.streak = 0;
                    self.probe_wait = (self.probe_wait * 2).min(MAX_PROBE_WAIT);
                }
            }
            Signal::Overload | Signal::Timeout => {
                self.streak = 0;
                self.refused_probe();
            }
            Signal::Success(_) | Signal::Other => {}
        }
    }

    /// Whether growing by `step` would reach a concurrency refused less than
    /// `probe_interval_s` ago: probing it again so soon would most likely cost another
    /// failed attempt.
    fn near_refused(&self, step: u32, now_s: f64) -> bool {
        self.refused
            .is_some_and(|(k, at)| self.learned() + step >= k && now_s - at < self.probe_interval_s)
    }

    /// A probe past the limit was refused (or timed out): each such probe costs a failed
    /// attempt, so the next waits eight times as many clean windows and twice as long.
    fn refused_probe(&mut self) {
        self.probe_wait = (self.probe_wait * 8).min(MAX_PROBE_WAIT_REFUSED);
        self.probe_interval_s = (self.probe_interval_s * 2.0).min(MAX_REFUSED_PROBE_INTERVAL_S);
    }

    /// A cut: a growth it follows queued, so the next probe waits longer; a probe waiting
    /// for its grant is called off.
    fn after_cut(&mut self, max_wait: u32) {
        if self.probe == Probe::Open {
            self.probe = Probe::Idle;
        }
        if self.grew {
            // A probe that queued cost some latency; one that was refused cost a failed
            // attempt, and the next waits eight times longer.
            let factor = if max_wait == MAX_PROBE_WAIT { 2 } else { 8 };
            self.probe_wait = (self.probe_wait * factor).min(max_wait);
        }
        self.grew = false;
        self.clean = 0;
        self.streak = 0;
    }
}

#[cfg(test)]
mod tests;

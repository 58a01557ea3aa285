//! Netflix concurrency-limits' limit algorithms (`Gradient2Limit`, `VegasLimit`, `AIMDLimit`,
//! concurrency-limits-core, `com.netflix.concurrency.limits.limit`), with their published
//! defaults, one instance per candidate.
//!
//! A limiter sees what Netflix's `AbstractLimiter` hands its `Limit.onSample(startTime, rtt,
//! inflight, didDrop)`: the attempt's round trip, the attempts in flight on the candidate when
//! it was granted (itself included), and whether it was dropped (`onDropped`: an `overload`
//! or a `timeout`). Other failures are `onIgnore` and give no sample. The limit a request sees
//! is the integer part of the estimate (`getLimit()` is an `int`): a candidate is open while
//! its attempts in flight are fewer.

use crate::sim::events::secs_to_ns;
use rand::rngs::SmallRng;
use rand::RngExt;

/// One candidate's limit algorithm.
pub(crate) trait LimitAlgo: Send + std::fmt::Debug {
    /// The current estimate (the limit is its integer part).
    fn estimate(&self) -> f64;
    /// One sample: round trip `rtt_s` seconds (> 0), `inflight` attempts in flight on the
    /// candidate when this one was granted (itself included), `drop`: it was dropped.
    fn sample(&mut self, rtt_s: f64, inflight: u32, drop: bool, rng: &mut SmallRng);
    /// The integer limit, as `AbstractLimit.getLimit()` returns it.
    fn limit(&self) -> u32 {
        self.estimate().max(0.0) as u32
    }
    /// An attempt was granted with `inflight` in flight on the candidate (itself included), at
    /// `now_s`. Netflix's algorithms only read samples.
    fn started(&mut self, _inflight: u32, _now_s: f64) {}
    /// [`LimitAlgo::sample`] at `now_s` seconds of virtual time, for an algorithm that keeps
    /// time windows; the others ignore the time.
    fn sample_at(
        &mut self,
        rtt_s: f64,
        inflight: u32,
        drop: bool,
        _now_s: f64,
        rng: &mut SmallRng,
    ) {
        self.sample(rtt_s, inflight, drop, rng);
    }
}

/// `ExpAvgMeasurement(window, warmupWindow)`: the plain mean of the first `warmup` samples,
/// then an exponential average with factor `2 / (window + 1)`.
#[derive(Clone, Debug)]
pub(crate) struct ExpAvg {
    value: f64,
    sum: f64,
    count: u32,
    window: u32,
    warmup: u32,
}

impl ExpAvg {
    pub(crate) fn new(window: u32, warmup: u32) -> Self {
        ExpAvg {
            value: 0.0,
            sum: 0.0,
            count: 0,
            window,
            warmup,
        }
    }

    pub(crate) fn add(&mut self, sample: f64) -> f64 {
        if self.count < self.warmup {
            self.count += 1;
            self.sum += sample;
            self.value = self.sum / self.count as f64;
        } else {
            let factor = 2.0 / (self.window as f64 + 1.0);
            self.value = self.value * (1.0 - factor) + sample * factor;
        }
        self.value
    }
}

/// `Gradient2Limit` with `Gradient2Limit.newDefault()`'s settings: initial limit 20, minimum
/// 20, maximum 200, smoothing 0.2, queue size 4, long window 600 samples (10 of warm-up), RTT
/// tolerance 1.5.
///
/// Per sample: `longRtt` = the long window's average with this RTT; if `longRtt / rtt > 2`
/// the long average is cut by 5%; if `inflight < limit / 2` nothing changes (app-limited);
/// else `gradient = clamp(tolerance x longRtt / rtt, 0.5, 1)`,
/// `new = limit x gradient + queueSize`, smoothed `limit x (1 - smoothing) + new x smoothing`,
/// clamped to [min, max]. Drops are not looked at.
#[derive(Clone, Debug)]
pub(crate) struct Gradient2 {
    pub(crate) estimated: f64,
    pub(crate) long_rtt: ExpAvg,
    pub(crate) min_limit: f64,
    pub(crate) max_limit: f64,
    pub(crate) smoothing: f64,
    pub(crate) queue_size: f64,
    pub(crate) tolerance: f64,
}

impl Default for Gradient2 {
    fn default() -> Self {
        Gradient2 {
            estimated: 20.0,
            long_rtt: ExpAvg::new(600, 10),
            min_limit: 20.0,
            max_limit: 200.0,
            smoothing: 0.2,
            queue_size: 4.0,
            tolerance: 1.5,
        }
    }
}

impl LimitAlgo for Gradient2 {
    fn estimate(&self) -> f64 {
        self.estimated
    }

    fn sample(&mut self, rtt_s: f64, inflight: u32, _drop: bool, _rng: &mut SmallRng) {
        let short = rtt_s;
        let long = self.long_rtt.add(rtt_s);
        if long / short > 2.0 {
            self.long_rtt.value *= 0.95;
        }
        if (inflight as f64) < self.estimated / 2.0 {
            return;
        }
        let gradient = (self.tolerance * long / short).clamp(0.5, 1.0);
        let new = self.estimated * gradient + self.queue_size;
        let new = self.estimated * (1.0 - self.smoothing) + new * self.smoothing;
        self.estimated = new.clamp(self.min_limit, self.max_limit);
    }
}

/// `Log10RootIntFunction`: `max(1, (int) log10(x))` below 1000, `(int) log10(x)` above.
pub(crate) fn log10_root(x: u32) -> u32 {
    let l = if x == 0 {
        0
    } else {
        (x as f64).log10().floor() as u32
    };
    if x < 1000 {
        l.max(1)
    } else {
        l
    }
}

/// `VegasLimit` with `VegasLimit.newDefault()`'s settings: initial limit 20, maximum 1000,
/// smoothing 1, `alpha = 3 x log10(limit)`, `beta = 6 x log10(limit)`,
/// `threshold = log10(limit)`, increase `limit + log10(limit)`, decrease
/// `limit - log10(limit)` (each log10 as [`log10_root`]), probe multiplier 30.
///
/// Per sample: after `jitter x 30 x limit` samples (`jitter` uniform in [0.5, 1), drawn
/// again after each probe) the no-load RTT is reset to this RTT; a lower RTT than the no-load
/// one replaces it; otherwise `queue = ceil(limit x (1 - rtt_noload / rtt))` and: a drop
/// decreases; `inflight x 2 < limit` changes nothing; `queue <= threshold` adds `beta`;
/// `queue < alpha` increases; `queue > beta` decreases; else nothing. The new limit is
/// clamped to [1, max] and smoothed.
#[derive(Clone, Debug)]
pub(crate) struct Vegas {
    pub(crate) estimated: f64,
    pub(crate) rtt_noload: f64,
    pub(crate) max_limit: f64,
    pub(crate) smoothing: f64,
    pub(crate) probe_multiplier: f64,
    pub(crate) probe_count: u64,
    pub(crate) probe_jitter: f64,
}

impl Vegas {
    /// The defaults, with the first probe jitter drawn from `rng`.
    pub(crate) fn new(rng: &mut SmallRng) -> Self {
        Vegas {
            estimated: 20.0,
            rtt_noload: 0.0,
            max_limit: 1000.0,
            smoothing: 1.0,
            probe_multiplier: 30.0,
            probe_count: 0,
            probe_jitter: rng.random_range(0.5..1.0),
        }
    }

    fn update(&mut self, rtt: f64, inflight: u32, drop: bool) {
        let est = self.estimated;
        let queue = (est * (1.0 - self.rtt_noload / rtt)).ceil();
        let log = |x: f64| log10_root(x as u32) as f64;
        let new = if drop {
            est - log(est)
        } else if (inflight as f64) * 2.0 < est {
            return;
        } else {
            let l = log(est);
            let (alpha, beta, threshold) = (3.0 * l, 6.0 * l, l);
            if queue <= threshold {
                est + beta
            } else if queue < alpha {
                est + log(est)
            } else if queue > beta {
                est - log(est)
            } else {
                return;
            }
        };
        let new = new.clamp(1.0, self.max_limit);
        self.estimated = (1.0 - self.smoothing) * est + self.smoothing * new;
    }
}

impl LimitAlgo for Vegas {
    fn estimate(&self) -> f64 {
        self.estimated
    }

    fn sample(&mut self, rtt_s: f64, inflight: u32, drop: bool, rng: &mut SmallRng) {
        self.probe_count += 1;
        if self.probe_jitter * self.probe_multiplier * self.estimated <= self.probe_count as f64 {
            self.probe_jitter = rng.random_range(0.5..1.0);
            self.probe_count = 0;
            self.rtt_noload = rtt_s;
            return;
        }
        if self.rtt_noload == 0.0 || rtt_s < self.rtt_noload {
            self.rtt_noload = rtt_s;
            return;
        }
        self.update(rtt_s, inflight, drop);
    }
}

/// `AIMDLimit` with its builder's defaults: initial limit 20, minimum 20, maximum 200, backoff
/// ratio 0.9, timeout 5 s.
///
/// Per sample: a drop or an RTT over the timeout multiplies the limit by the backoff ratio
/// (then truncates it to an integer); otherwise, if `inflight x 2 >= limit`, the limit grows
/// by one. Clamped to [min, max].
#[derive(Clone, Debug)]
pub(crate) struct Aimd {
    pub(crate) limit: u32,
    pub(crate) min_limit: u32,
    pub(crate) max_limit: u32,
    pub(crate) backoff: f64,
    pub(crate) timeout_s: f64,
}

impl Default for Aimd {
    fn default() -> Self {
        Aimd {
            limit: 20,
            min_limit: 20,
            max_limit: 200,
            backoff: 0.9,
            timeout_s: 5.0,
        }
    }
}

impl LimitAlgo for Aimd {
    fn estimate(&self) -> f64 {
        self.limit as f64
    }

    fn sample(&mut self, rtt_s: f64, inflight: u32, drop: bool, _rng: &mut SmallRng) {
        let mut l = self.limit;
        if drop || rtt_s > self.timeout_s {
            l = (l as f64 * self.backoff) as u32;
        } else if inflight * 2 >= l {
            l += 1;
        }
        self.limit = l.clamp(self.min_limit, self.max_limit);
    }
}

/// Vector's adaptive request concurrency (`src/sinks/util/adaptive_concurrency/controller.rs`),
/// with `AdaptiveConcurrencySettings`' defaults: initial limit 1, maximum 200, decrease ratio
/// 0.9, EWMA alpha 0.4, RTT deviation scale 2.5.
///
/// The limit moves once per window of one past RTT. Within a window, successes add their round
/// trip to a plain mean (rounded to the microsecond, as Vector's test build does). A
/// dropped attempt (`overload`, `timeout`: Vector's retriable errors and `Elapsed`) marks
/// back-pressure. An attempt started at the limit marks the limit reached. At the first
/// outcome on or after the window's end:
///
/// - the limit grows by one if it was reached, no back-pressure came, and the window's mean is
///   at most the past mean;
/// - else it is cut to `floor(limit x 0.9)` (at least 1) on back-pressure or a mean at least the
///   past mean plus 2.5 standard deviations.
///
/// The window's mean then feeds the past RTT's EWMA mean and variance (West's recurrence), and
/// the next window ends one past mean later. Window ends are kept in whole nanoseconds, as
/// Vector's `Instant`s are: on the simulator's `f64` clock a batch answering exactly one mean
/// after the window opened can read an ulp early and miss it.
#[derive(Clone, Debug)]
pub(crate) struct VectorArc {
    limit: u32,
    max_limit: u32,
    decrease_ratio: f64,
    alpha: f64,
    deviation_scale: f64,
    /// The past RTT's EWMA (mean, variance), seconds; `None` before the first success.
    past: Option<(f64, f64)>,
    /// When the window ends, ns.
    next_update_ns: u64,
    sum_s: f64,
    n: u32,
    back_pressure: bool,
    reached: bool,
}

impl Default for VectorArc {
    fn default() -> Self {
        VectorArc {
            limit: 1,
            max_limit: 200,
            decrease_ratio: 0.9,
            alpha: 0.4,
            deviation_scale: 2.5,
            past: None,
            next_update_ns: 0,
            sum_s: 0.0,
            n: 0,
            back_pressure: false,
            reached: false,
        }
    }
}

impl VectorArc {
    /// The window's mean RTT, rounded to the microsecond.
    fn current(&self) -> Option<f64> {
        (self.n > 0).then(|| (self.sum_s / self.n as f64 * 1e6).round() / 1e6)
    }

    fn manage(&mut self, mean: f64, variance: f64, current: Option<f64>) {
        let threshold = variance.sqrt() * self.deviation_scale;
        if self.limit < self.max_limit
            && self.reached
            && !self.back_pressure
            && current.is_some_and(|c| c <= mean)
        {
            self.limit += 1;
        } else if self.limit > 1
            && (self.back_pressure || current.unwrap_or(0.0) >= mean + threshold)
        {
            self.limit = ((self.limit as f64 * self.decrease_ratio) as u32).max(1);
        }
    }
}

impl LimitAlgo for VectorArc {
    fn estimate(&self) -> f64 {
        self.limit as f64
    }

    fn started(&mut self, inflight: u32, _now_s: f64) {
        if inflight >= self.limit {
            self.reached = true;
        }
    }

    /// Without a clock every sample closes a window.
    fn sample(&mut self, rtt_s: f64, inflight: u32, drop: bool, rng: &mut SmallRng) {
        self.sample_at(rtt_s, inflight, drop, f64::INFINITY, rng);
    }

    fn sample_at(
        &mut self,
        rtt_s: f64,
        _inflight: u32,
        drop: bool,
        now_s: f64,
        _rng: &mut SmallRng,
    ) {
        if drop {
            self.back_pressure = true;
        } else {
            self.sum_s += rtt_s;
            self.n += 1;
        }
        let current = self.current();
        let now = secs_to_ns(now_s);
        match self.past {
            None => {
                if let Some(c) = current {
                    self.past = Some((c, 0.0));
                    self.next_update_ns = now.saturating_add(secs_to_ns(c));
                }
            }
            Some((mean, variance)) if now >= self.next_update_ns => {
                self.manage(mean, variance, current);
                let (mean, variance) = match current {
                    Some(c) => {
                        let diff = c - mean;
                        let incr = self.alpha * diff;
                        (mean + incr, (1.0 - self.alpha) * (variance + diff * incr))
                    }
                    None => (mean, variance),
                };
                self.past = Some((mean, variance));
                self.next_update_ns = now.saturating_add(secs_to_ns(mean));
                self.sum_s = 0.0;
                self.n = 0;
                self.back_pressure = false;
                self.reached = false;
            }
            Some(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;

    use super::*;

    fn rng() -> SmallRng {
        SmallRng::seed_from_u64(1)
    }

    /// Starts one attempt at `inflight` and takes its success `rtt` later, at `now`.
    fn arc_round(a: &mut VectorArc, inflight: u32, rtt: f64, now: f64) {
        a.started(inflight, now - rtt);
        a.sample_at(rtt, inflight, false, now, &mut rng());
    }

    #[test]
    fn vector_arc_adds_one_per_window_at_its_limit() {
        let mut a = VectorArc::default();
        assert_eq!(a.limit(), 1);
        // The first success sets the past RTT (0.1 s) and ends the first window at 0.2 s.
        arc_round(&mut a, 1, 0.1, 0.1);
        assert_eq!(a.limit(), 1);
        // Before the window's end nothing changes.
        arc_round(&mut a, 1, 0.1, 0.15);
        assert_eq!(a.limit(), 1);
        // At its end: reached, no back-pressure, mean 0.1 <= past 0.1: one more.
        arc_round(&mut a, 1, 0.1, 0.2);
        assert_eq!(a.limit(), 2);
        // The next window ends one past mean later: 0.2 + 0.1 s, which in floating point is
        // just past the clock's 0.3 (0.30000000000000004 against 0.29999999999999998). On
        // Vector's nanosecond clock they are the same instant, and the window ends at 0.3.
        arc_round(&mut a, 2, 0.1, 0.3);
        assert_eq!(a.limit(), 3);
    }

    #[test]
    fn vector_arc_cuts_by_a_tenth_on_back_pressure_or_a_slower_window() {
        let mut a = VectorArc {
            limit: 20,
            ..Default::default()
        };
        arc_round(&mut a, 20, 0.1, 0.1);
        // A timeout in the next window: floor(20 x 0.9) = 18 at the window's end.
        a.started(20, 0.1);
        a.sample_at(1.0, 20, true, 0.2, &mut rng());
        assert_eq!(a.limit(), 18);
        // A window whose mean (0.2 s) is past the past mean (0.1 s, no variance yet):
        // floor(18 x 0.9) = 16.
        arc_round(&mut a, 18, 0.2, 0.31);
        assert_eq!(a.limit(), 16);
        // The past RTT took the window's mean: 0.1 + 0.4 x (0.2 - 0.1) = 0.14, variance
        // (1 - 0.4) x (0 + 0.1 x 0.04) = 0.0024.
        let (mean, var) = a.past.unwrap();
        assert!((mean - 0.14).abs() < 1e-12, "{mean}");
        assert!((var - 0.0024).abs() < 1e-12, "{var}");
    }

    #[test]
    fn vector_arc_cuts_a_window_below_its_limit_as_vector_does() {
        // Not reached and a mean equal to a past mean without variance: Vector's second test
        // (`current >= mean + 0`) holds, and the limit is cut.
        let mut a = VectorArc {
            limit: 10,
            ..Default::default()
        };
        arc_round(&mut a, 5, 0.1, 0.1);
        arc_round(&mut a, 5, 0.1, 0.2);
        assert_eq!(a.limit(), 9);
    }

    #[test]
    fn exp_avg_is_a_plain_mean_during_warm_up_then_exponential() {
        let mut m = ExpAvg::new(3, 2);
        assert_eq!(m.add(1.0), 1.0);
        assert_eq!(m.add(3.0), 2.0);
        // Factor 2 / (3 + 1) = 0.5.
        assert_eq!(m.add(6.0), 4.0);
    }

    #[test]
    fn gradient2_grows_by_the_smoothed_queue_size_without_queueing() {
        let mut g = Gradient2::default();
        let mut r = rng();
        // First sample: longRtt = 0.1 = rtt, gradient = min(1, 1.5) = 1;
        // new = 20 x 1 + 4 = 24, smoothed 20 x 0.8 + 24 x 0.2 = 20.8.
        g.sample(0.1, 20, false, &mut r);
        assert!((g.estimate() - 20.8).abs() < 1e-12, "{}", g.estimate());
        assert_eq!(g.limit(), 20);
        // App-limited: 10 < 20.8 / 2, no change.
        g.sample(0.1, 10, false, &mut r);
        assert!((g.estimate() - 20.8).abs() < 1e-12);
    }

    #[test]
    fn gradient2_shrinks_by_the_latency_gradient() {
        let mut g = Gradient2 {
            estimated: 100.0,
            ..Default::default()
        };
        let mut r = rng();
        // Warm up the long RTT at 0.1 s (10 samples; app-limited so the limit stays).
        for _ in 0..10 {
            g.sample(0.1, 1, false, &mut r);
        }
        assert_eq!(g.estimate(), 100.0);
        // rtt 0.3: longRtt = 0.1 x (1 - 2/601) + 0.3 x 2/601.
        let long: f64 = 0.1 * (1.0 - 2.0 / 601.0) + 0.3 * 2.0 / 601.0;
        let gradient = (1.5 * long / 0.3).clamp(0.5, 1.0);
        let want = 100.0 * 0.8 + (100.0 * gradient + 4.0) * 0.2;
        g.sample(0.3, 100, false, &mut r);
        assert!(
            (g.estimate() - want).abs() < 1e-9,
            "{} {want}",
            g.estimate()
        );
        assert!(g.estimate() < 100.0);
        // Far slower: the gradient floors at 0.5: 0.8 x L + 0.2 x (0.5 x L + 4).
        let before = g.estimate();
        g.sample(10.0, 100, false, &mut r);
        let want = before * 0.8 + (before * 0.5 + 4.0) * 0.2;
        assert!(
            (g.estimate() - want).abs() < 1e-9,
            "{} {want}",
            g.estimate()
        );
    }

    #[test]
    fn gradient2_cuts_the_long_rtt_when_it_is_twice_the_short_one() {
        let mut g = Gradient2::default();
        let mut r = rng();
        g.sample(1.0, 1, false, &mut r);
        // longRtt = (1 + 0.2) / 2 = 0.6 > 2 x 0.2: cut to 0.57.
        g.sample(0.2, 1, false, &mut r);
        assert!(
            (g.long_rtt.value - 0.57).abs() < 1e-12,
            "{}",
            g.long_rtt.value
        );
    }

    #[test]
    fn gradient2_never_goes_below_its_minimum() {
        let mut g = Gradient2 {
            estimated: 100.0,
            ..Default::default()
        };
        let mut r = rng();
        for _ in 0..10 {
            g.sample(0.1, 1, false, &mut r);
        }
        // Latency x1000: the gradient floors at 0.5, each sample L -> 0.9 L + 0.8.
        g.sample(100.0, 100, false, &mut r);
        assert!((g.estimate() - 90.8).abs() < 1e-9, "{}", g.estimate());
        for _ in 0..40 {
            g.sample(100.0, 100, false, &mut r);
        }
        assert_eq!(g.estimate(), 20.0);
    }

    #[test]
    fn log10_root_is_at_least_one_below_1000() {
        assert_eq!(
            [0, 1, 9, 10, 99, 100, 999, 1000, 20_000].map(log10_root),
            [1, 1, 1, 1, 1, 2, 2, 3, 4]
        );
    }

    #[test]
    fn vegas_follows_its_queue_estimate() {
        let mut r = rng();
        let mut v = Vegas::new(&mut r);
        // No probe in these few samples: the first probe comes after >= 0.5 x 30 x 20.
        v.sample(0.1, 20, false, &mut r);
        assert_eq!((v.rtt_noload, v.estimate()), (0.1, 20.0));
        // rtt = no-load: queue = 0 <= threshold 1: + beta = 6 x 1.
        v.sample(0.1, 20, false, &mut r);
        assert_eq!(v.estimate(), 26.0);
        // queue = ceil(26 x (1 - 0.1 / 0.11)) = ceil(2.36) = 3: above threshold 1, below
        // alpha 3? No: 3 is not < 3, and not > beta 6: no change.
        v.sample(0.11, 26, false, &mut r);
        assert_eq!(v.estimate(), 26.0);
        // queue = ceil(26 x (1 - 0.1 / 0.105)) = ceil(1.24) = 2 < alpha 3: + log10 = 1.
        v.sample(0.105, 26, false, &mut r);
        assert_eq!(v.estimate(), 27.0);
        // queue = ceil(27 x 0.5) = 14 > beta 6: - 1.
        v.sample(0.2, 27, false, &mut r);
        assert_eq!(v.estimate(), 26.0);
        // A drop decreases whatever the queue.
        v.sample(0.1, 26, true, &mut r);
        assert_eq!(v.estimate(), 25.0);
        // App-limited: 10 x 2 < 25, no change.
        v.sample(0.1, 10, false, &mut r);
        assert_eq!(v.estimate(), 25.0);
        // A faster RTT becomes the no-load RTT without an update.
        v.sample(0.05, 25, false, &mut r);
        assert_eq!((v.rtt_noload, v.estimate()), (0.05, 25.0));
    }

    #[test]
    fn vegas_probes_the_no_load_rtt_after_its_jittered_count() {
        let mut r = rng();
        let mut v = Vegas::new(&mut r);
        v.probe_jitter = 0.5;
        v.rtt_noload = 0.1;
        // Probe after 0.5 x 30 x 20 = 300 samples: the 300th resets the no-load RTT.
        for _ in 0..299 {
            v.sample(0.5, 1, false, &mut r);
        }
        assert_eq!(v.rtt_noload, 0.1);
        v.sample(0.5, 1, false, &mut r);
        assert_eq!((v.rtt_noload, v.probe_count), (0.5, 0));
        assert!((0.5..1.0).contains(&v.probe_jitter));
    }

    #[test]
    fn aimd_adds_one_and_backs_off_by_ten_percent() {
        let mut r = rng();
        let mut a = Aimd::default();
        a.sample(0.1, 10, false, &mut r);
        assert_eq!(a.limit(), 21);
        // App-limited: 10 x 2 < 21.
        a.sample(0.1, 10, false, &mut r);
        assert_eq!(a.limit(), 21);
        a.limit = 100;
        a.sample(0.1, 100, true, &mut r);
        assert_eq!(a.limit(), 90);
        // Slower than the 5 s timeout counts as a drop: (int) 81.0 = 81.
        a.sample(6.0, 1, false, &mut r);
        assert_eq!(a.limit(), 81);
        // Never below its minimum of 20.
        a.limit = 21;
        a.sample(0.1, 1, true, &mut r);
        assert_eq!(a.limit(), 20);
    }
}

#[cfg(test)]
#[path = "limiters_tests.rs"]
mod defaults_tests;

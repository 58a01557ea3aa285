//! Learned statistics per candidate: moving averages, the bucketed overload window, failure
//! streaks. Pure data plus the update rules; no clock reads (time is a `f64` of seconds since the
//! core's epoch, passed in).

use serde::{Deserialize, Serialize};

mod check;
pub(crate) use check::MAX_TIME_S;

/// Updates an EMA where `alpha` is the weight of the newest sample.
#[inline]
pub(crate) fn ema(old: Option<f64>, sample: f64, alpha: f64) -> f64 {
    match old {
        None => sample,
        Some(o) => o + alpha * (sample - o),
    }
}

/// A bounded, time-bucketed error counter: `buckets` buckets of `bucket_s` seconds each.
///
/// Recording and reading are O(buckets) at worst (when buckets roll over) and allocate nothing.
///
/// Counts are 16-bit, which keeps a candidate's window in one cache line and a half: a bucket
/// that would count past 65,535 outcomes halves both its counts instead, so its error ratio
/// stays right and the window only weighs that bucket a little less than a precise count would.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ErrorWindow {
    /// Overload errors per bucket (ring, indexed by bucket number modulo the ring size).
    errors: [u16; 16],
    /// All counted outcomes per bucket.
    totals: [u16; 16],
    /// The absolute number of the newest bucket written.
    newest: u64,
}

/// Ring size of [`ErrorWindow`]; configs with more buckets are capped here.
pub(crate) const WINDOW_RING: usize = 16;
// `ErrorWindow::counts` finds the live buckets in a 16-bit mask of the ring's slots.
const _: () = assert!(WINDOW_RING == 16);

impl ErrorWindow {
    /// Moves the newest bucket forward to `bucket`, clearing the slots it passes over.
    /// Slots are indexed modulo the ring size, not the configured window, so a config reload
    /// that changes `window.buckets` keeps the counts aligned.
    fn roll(&mut self, bucket: u64) {
        if bucket <= self.newest {
            return;
        }
        let gap = (bucket - self.newest).min(WINDOW_RING as u64);
        for k in 1..=gap {
            let i = ((self.newest + k) % WINDOW_RING as u64) as usize;
            self.errors[i] = 0;
            self.totals[i] = 0;
        }
        self.newest = bucket;
    }

    /// Counts one outcome in `bucket` (an absolute bucket number).
    pub(crate) fn record(&mut self, bucket: u64, buckets: usize, overload: bool) {
        let buckets = buckets.clamp(1, WINDOW_RING) as u64;
        if bucket + buckets <= self.newest {
            return; // older than the window
        }
        self.roll(bucket);
        let i = (bucket % WINDOW_RING as u64) as usize;
        if self.totals[i] == u16::MAX {
            self.totals[i] /= 2;
            self.errors[i] /= 2;
        }
        self.totals[i] += 1;
        if overload {
            self.errors[i] += 1;
        }
    }

    /// `(errors, total)` over the last `buckets` buckets as seen from `bucket`.
    pub(crate) fn counts(&self, bucket: u64, buckets: usize) -> (u32, u32) {
        let buckets = buckets.clamp(1, WINDOW_RING) as u64;
        // Buckets newest - k for k < live are inside the window seen from `bucket`: not older
        // than bucket - buckets + 1, and not before bucket 0.
        let oldest = (bucket + 1).saturating_sub(buckets);
        let live = if self.newest < oldest {
            0
        } else {
            (self.newest - oldest + 1).min(buckets).min(self.newest + 1)
        };
        // The live buckets are a run of the ring, `live` long, ending at the newest: their
        // slots' bits, rotated into place in 16 bits.
        let run = (1u32 << live) - 1;
        let start = ((self.newest + 1 - live) % WINDOW_RING as u64) as u32;
        let slots = ((run << start) | (run >> (WINDOW_RING as u32 - start))) & 0xFFFF;
        (
            masked_sum(&self.errors, slots),
            masked_sum(&self.totals, slots),
        )
    }
}

/// For each 4-bit pattern `b`, the mask of a `u64` holding four 16-bit counts (the first in the
/// lowest bits) that keeps count `l` where bit `l` of `b` is set.
const LANES: [u64; 16] = {
    let mut table = [0u64; 16];
    let mut b = 0;
    while b < 16 {
        let mut l = 0;
        while l < 4 {
            if (b >> l) & 1 == 1 {
                table[b] |= 0xFFFF << (16 * l);
            }
            l += 1;
        }
        b += 1;
    }
    table
};

/// The sum of the ring's counts whose bit is set in `slots` (bit `i` for slot `i`), four at a
/// time in a `u64`: the same integer as adding them one by one, without an index per slot.
#[inline]
fn masked_sum(counts: &[u16; WINDOW_RING], slots: u32) -> u32 {
    const EVEN: u64 = 0x0000_FFFF_0000_FFFF;
    let mut acc = 0u64;
    for (j, four) in counts.chunks_exact(4).enumerate() {
        let word = u64::from(four[0])
            | (u64::from(four[1]) << 16)
            | (u64::from(four[2]) << 32)
            | (u64::from(four[3]) << 48);
        let kept = word & LANES[((slots >> (4 * j)) & 15) as usize];
        // Two 32-bit lanes, each adding at most eight 16-bit counts: no carry between them.
        acc += (kept & EVEN) + ((kept >> 16) & EVEN);
    }
    ((acc >> 32) + (acc & 0xFFFF_FFFF)) as u32
}

impl ErrorWindow {
    /// `(errors, total)` per bucket, newest first: index `k` is the bucket `k` buckets before
    /// `at_bucket`. Used to store the window independently of the clock's epoch.
    pub fn relative(&self, at_bucket: u64, buckets: usize) -> Vec<(u32, u32)> {
        let buckets = buckets.clamp(1, WINDOW_RING);
        (0..buckets as u64)
            .map(|k| {
                let Some(b) = at_bucket.checked_sub(k) else {
                    return (0, 0);
                };
                if b > self.newest || b + buckets as u64 <= self.newest {
                    return (0, 0);
                }
                let i = (b % WINDOW_RING as u64) as usize;
                (u32::from(self.errors[i]), u32::from(self.totals[i]))
            })
            .collect()
    }

    /// Rebuilds a window from [`ErrorWindow::relative`] counts, placed before `at_bucket`.
    /// Counts past the 16-bit range are scaled down together, keeping their ratio.
    pub fn from_relative(counts: &[(u32, u32)], at_bucket: u64, buckets: usize) -> Self {
        let buckets = buckets.clamp(1, WINDOW_RING);
        let mut w = ErrorWindow::default();
        for (k, &(errors, totals)) in counts.iter().enumerate().take(buckets).rev() {
            let Some(b) = at_bucket.checked_sub(k as u64) else {
                continue;
            };
            w.roll(b);
            let i = (b % WINDOW_RING as u64) as usize;
            let errors = errors.min(totals);
            let scale = (totals / u32::from(u16::MAX)) + 1;
            // Both fit: totals / scale <= u16::MAX and errors <= totals.
            w.errors[i] = (errors / scale) as u16;
            w.totals[i] = (totals / scale) as u16;
        }
        w.roll(at_bucket);
        w
    }
}

/// What the coordinator has learned about one candidate.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Stats {
    /// Success EMA (None until the first counted attempt: the prior applies).
    pub success: Option<f64>,
    /// Connect time EMA, ms.
    pub connect_ms: Option<f64>,
    /// Time-to-first-byte EMA, ms.
    pub ttfb_ms: Option<f64>,
    /// Bandwidth EMA, bytes per second.
    pub bandwidth_bps: Option<f64>,
    /// EMA of the time each attempt took to its result (first byte, or the failure), ms.
    pub attempt_ms: Option<f64>,
    /// Seconds (since the core's epoch) of the last sample; drives decay toward the prior.
    pub last_sample_s: Option<f64>,
    /// Overload error window.
    pub window: ErrorWindow,
    /// Failures in a row (reset by a success).
    pub consecutive_failures: u32,
    /// Times this candidate has been ejected.
    pub ejections: u32,
    /// Ejected until this time (seconds since the core's epoch).
    pub ejected_until_s: Option<f64>,
    /// Attempts that reported an outcome.
    pub attempts: u64,
    /// Of those, successes (application errors included).
    pub successes: u64,
    /// EMA (newest outcome weighs 0.02) of 1 per overload failure, 0 per other counted
    /// outcome: whether this candidate degrades under load. Gates the load component
    /// (`Config::load_gate`).
    pub overload_evidence: f32,
    /// With `ema.drift` set: the variance of the attempt-time estimate, in squared natural-log
    /// units (0 until the first sample).
    pub attempt_var: f32,
    /// With `ema.drift` set: the learned variance of one attempt-time sample around the
    /// estimate, in squared natural-log units (0 until the first sample).
    pub attempt_noise: f32,
    /// With `ema.drift` set: the last attempt time was far outside the estimate (a second one
    /// in a row is taken as a change).
    pub attempt_surprise: bool,
    /// With `ema.drift` set: a signed cumulative sum of the served answers' standardized
    /// deviations from the estimate (positive: answers slower than it). Past a threshold the
    /// estimate lags a change it has not caught, and the next answer weighs as a change.
    pub attempt_lag: f32,
}

/// [`Stats`] as the core keeps it per candidate: the optional values as `f64` with NaN for
/// "none", which saves the eight-byte tag of each `Option<f64>` and keeps the whole record in
/// under three cache lines. Unpacked to a [`Stats`] to score or update, packed back after.
///
/// The update rules (`observe.rs`) work on it in place, and the scoring reads it through
/// [`StatsView`], so an outcome neither unpacks nor repacks it.
#[derive(Clone, Debug)]
#[repr(C)]
pub(crate) struct PackedStats {
    /// success, connect_ms, ttfb_ms, bandwidth_bps, attempt_ms, last_sample_s, ejected_until_s
    /// (indexed by [`SUCCESS`] and the constants after it).
    pub(super) values: [f64; 7],
    pub(super) window: ErrorWindow,
    /// Saturating at `u16::MAX`: the config caps the ejection threshold there.
    pub(super) consecutive_failures: u16,
    /// Saturating at `u8::MAX`: an ejection's length (`ejection.base_s` times the count)
    /// reaches `ejection.max_s` long before with any usual config.
    pub(super) ejections: u8,
    /// [`Stats::attempt_lag`] in sixteenths: the test resets it past its threshold of 6, so it
    /// stays within reach of an `i8`.
    pub(super) attempt_lag: i8,
    pub(super) overload_evidence: f32,
    /// Saturating at `u32::MAX` (they only steer the warm-up and the unknown-candidate gate,
    /// both long over by then), which leaves room for the attempt-time filter's two variances.
    pub(super) attempts: u32,
    pub(super) successes: u32,
    pub(super) attempt_var: f32,
    /// Negative when the last sample was a surprise ([`Stats::attempt_surprise`]).
    pub(super) attempt_noise: f32,
}

/// Index of [`Stats::success`] in [`PackedStats`]' values.
pub(super) const SUCCESS: usize = 0;
/// Index of [`Stats::connect_ms`].
pub(super) const CONNECT_MS: usize = 1;
/// Index of [`Stats::ttfb_ms`].
pub(super) const TTFB_MS: usize = 2;
/// Index of [`Stats::bandwidth_bps`].
pub(super) const BANDWIDTH_BPS: usize = 3;
/// Index of [`Stats::attempt_ms`].
pub(super) const ATTEMPT_MS: usize = 4;
/// Index of [`Stats::last_sample_s`].
pub(super) const LAST_SAMPLE_S: usize = 5;
/// Index of [`Stats::ejected_until_s`].
pub(super) const EJECTED_UNTIL_S: usize = 6;

impl Default for PackedStats {
    fn default() -> Self {
        PackedStats::pack(&Stats::default())
    }
}

#[inline]
pub(super) fn pack_opt(x: Option<f64>) -> f64 {
    x.unwrap_or(f64::NAN)
}

#[inline]
pub(super) fn saturate_u16(x: u32) -> u16 {
    u16::try_from(x).unwrap_or(u16::MAX)
}

/// A variance as stored: hostile or overflowed values read as "nothing known" (0).
#[inline]
pub(super) fn finite_or_zero(x: f32) -> f32 {
    if x > 0.0 && x < f32::INFINITY {
        x
    } else {
        0.0
    }
}

/// [`Stats::attempt_lag`] as stored, in sixteenths (hostile values read as none, 0).
#[inline]
pub(super) fn pack_lag(x: f32) -> i8 {
    if x.is_finite() {
        (x * 16.0).round().clamp(-127.0, 127.0) as i8
    } else {
        0
    }
}

/// [`Stats::attempt_lag`] from its stored sixteenths.
#[inline]
pub(super) fn unpack_lag(x: i8) -> f32 {
    f32::from(x) / 16.0
}

#[inline]
pub(super) fn unpack_opt(x: f64) -> Option<f64> {
    (!x.is_nan()).then_some(x)
}

impl PackedStats {
    /// Moves the overload window from bucket `from` (of `from_buckets`) to bucket `to`, each
    /// bucket as far back as it was: the buckets' width changed, and with it their numbering.
    pub(crate) fn rebase_window(
        &mut self,
        from: u64,
        from_buckets: usize,
        to: u64,
        buckets: usize,
    ) {
        self.window =
            ErrorWindow::from_relative(&self.window.relative(from, from_buckets), to, buckets);
    }

    /// Packs statistics; a `Some(NaN)` (possible only from hostile input) becomes `None`.
    #[inline]
    pub(crate) fn pack(s: &Stats) -> Self {
        PackedStats {
            values: [
                pack_opt(s.success),
                pack_opt(s.connect_ms),
                pack_opt(s.ttfb_ms),
                pack_opt(s.bandwidth_bps),
                pack_opt(s.attempt_ms),
                pack_opt(s.last_sample_s),
                pack_opt(s.ejected_until_s),
            ],
            window: s.window.clone(),
            consecutive_failures: saturate_u16(s.consecutive_failures),
            ejections: u8::try_from(s.ejections).unwrap_or(u8::MAX),
            attempt_lag: pack_lag(s.attempt_lag),
            overload_evidence: s.overload_evidence,
            attempts: u32::try_from(s.attempts).unwrap_or(u32::MAX),
            successes: u32::try_from(s.successes).unwrap_or(u32::MAX),
            attempt_var: finite_or_zero(s.attempt_var),
            attempt_noise: if s.attempt_surprise {
                -finite_or_zero(s.attempt_noise)
            } else {
                finite_or_zero(s.attempt_noise)
            },
        }
    }

    /// The statistics in their public form.
    #[inline]
    pub(crate) fn unpack(&self) -> Stats {
        let v = &self.values;
        Stats {
            success: unpack_opt(v[0]),
            connect_ms: unpack_opt(v[1]),
            ttfb_ms: unpack_opt(v[2]),
            bandwidth_bps: unpack_opt(v[3]),
            attempt_ms: unpack_opt(v[4]),
            last_sample_s: unpack_opt(v[5]),
            window: self.window.clone(),
            consecutive_failures: u32::from(self.consecutive_failures),
            ejections: u32::from(self.ejections),
            ejected_until_s: unpack_opt(v[6]),
            attempts: u64::from(self.attempts),
            successes: u64::from(self.successes),
            overload_evidence: self.overload_evidence,
            attempt_var: self.attempt_var,
            attempt_noise: self.attempt_noise.abs(),
            attempt_surprise: self.attempt_noise.is_sign_negative(),
            attempt_lag: unpack_lag(self.attempt_lag),
        }
    }

    /// The success average, its time estimate (ms) and that estimate's variance as pooling
    /// reads it ([`StatsView::estimate_var`]), read without unpacking (the coarse refresh
    /// reads them for every candidate).
    #[inline]
    pub(crate) fn time_terms(&self) -> (Option<f64>, Option<f64>, f32) {
        (
            unpack_opt(self.values[0]),
            unpack_opt(self.values[4]),
            self.estimate_var(),
        )
    }

    /// Successes over the candidate's whole history (saturating).
    #[inline]
    pub(crate) fn successes(&self) -> u64 {
        u64::from(self.successes)
    }

    /// Counted attempts (the load gate reads it without unpacking).
    #[inline]
    pub(crate) fn attempts(&self) -> u64 {
        u64::from(self.attempts)
    }

    /// Seconds (since the core's epoch) of the last sample, if any (the probe schedule reads
    /// it without unpacking).
    #[inline]
    pub(crate) fn last_sample_s(&self) -> Option<f64> {
        unpack_opt(self.values[5])
    }

    /// [`Stats::consecutive_failures`] (heal probes read it without unpacking).
    #[inline]
    pub(crate) fn consecutive_failures(&self) -> u32 {
        u32::from(self.consecutive_failures)
    }

    /// [`Stats::overload_evidence`] (the load gate reads it without unpacking).
    #[inline]
    pub(crate) fn overload_evidence(&self) -> f32 {
        self.overload_evidence
    }

    /// A value from its start and one from its end (the core reads them to bring the lines in
    /// early).
    #[inline]
    pub(crate) fn ends(&self) -> (f64, u32) {
        (self.values[4], self.successes)
    }

    /// Ejected until this time (seconds since the core's epoch), if ever ejected.
    #[inline]
    pub(crate) fn ejected_until_s(&self) -> Option<f64> {
        unpack_opt(self.values[6])
    }
}

/// What the scoring reads of a candidate's statistics, from a [`Stats`] or, without unpacking
/// it, from a [`PackedStats`] (which reads exactly as its unpacked form would).
pub(crate) trait StatsView {
    /// [`Stats::success`].
    fn success(&self) -> Option<f64>;
    /// [`Stats::connect_ms`].
    fn connect_ms(&self) -> Option<f64>;
    /// [`Stats::ttfb_ms`].
    fn ttfb_ms(&self) -> Option<f64>;
    /// [`Stats::bandwidth_bps`].
    fn bandwidth_bps(&self) -> Option<f64>;
    /// [`Stats::attempt_ms`].
    fn attempt_ms(&self) -> Option<f64>;
    /// [`Stats::last_sample_s`].
    fn last_sample_s(&self) -> Option<f64>;
    /// When the candidate last answered (a success or an application error), seconds: its last
    /// outcome's time if that outcome was an answer ([`Stats::consecutive_failures`] is 0),
    /// else `None`.
    fn last_answer_s(&self) -> Option<f64>;
    /// The attempt-time estimate's variance as pooling reads it: [`Stats::attempt_var`],
    /// scaled up where the samples vary more than the filter's gain assumes
    /// ([`Stats::attempt_noise`] above the gain's cap).
    fn estimate_var(&self) -> f32;
    /// [`Stats::window`].
    fn window(&self) -> &ErrorWindow;
    /// Whether the candidate has never answered: no success (nor application error) yet.
    fn never_answered(&self) -> bool;
    /// [`Stats::consecutive_failures`].
    fn failures_in_a_row(&self) -> u32;
}

impl StatsView for Stats {
    #[inline]
    fn success(&self) -> Option<f64> {
        self.success
    }
    #[inline]
    fn connect_ms(&self) -> Option<f64> {
        self.connect_ms
    }
    #[inline]
    fn ttfb_ms(&self) -> Option<f64> {
        self.ttfb_ms
    }
    #[inline]
    fn bandwidth_bps(&self) -> Option<f64> {
        self.bandwidth_bps
    }
    #[inline]
    fn attempt_ms(&self) -> Option<f64> {
        self.attempt_ms
    }
    #[inline]
    fn last_sample_s(&self) -> Option<f64> {
        self.last_sample_s
    }
    #[inline]
    fn last_answer_s(&self) -> Option<f64> {
        self.last_sample_s
            .filter(|_| self.consecutive_failures == 0)
    }
    #[inline]
    fn estimate_var(&self) -> f32 {
        super::evidence::estimate_var(self.attempt_var, self.attempt_noise)
    }
    #[inline]
    fn window(&self) -> &ErrorWindow {
        &self.window
    }
    #[inline]
    fn never_answered(&self) -> bool {
        self.successes == 0
    }
    #[inline]
    fn failures_in_a_row(&self) -> u32 {
        self.consecutive_failures
    }
}

impl StatsView for PackedStats {
    #[inline]
    fn success(&self) -> Option<f64> {
        unpack_opt(self.values[SUCCESS])
    }
    #[inline]
    fn connect_ms(&self) -> Option<f64> {
        unpack_opt(self.values[CONNECT_MS])
    }
    #[inline]
    fn ttfb_ms(&self) -> Option<f64> {
        unpack_opt(self.values[TTFB_MS])
    }
    #[inline]
    fn bandwidth_bps(&self) -> Option<f64> {
        unpack_opt(self.values[BANDWIDTH_BPS])
    }
    #[inline]
    fn attempt_ms(&self) -> Option<f64> {
        unpack_opt(self.values[ATTEMPT_MS])
    }
    #[inline]
    fn last_sample_s(&self) -> Option<f64> {
        unpack_opt(self.values[LAST_SAMPLE_S])
    }
    #[inline]
    fn last_answer_s(&self) -> Option<f64> {
        if self.consecutive_failures == 0 {
            unpack_opt(self.values[LAST_SAMPLE_S])
        } else {
            None
        }
    }
    #[inline]
    fn estimate_var(&self) -> f32 {
        super::evidence::estimate_var(self.attempt_var, self.attempt_noise)
    }
    #[inline]
    fn window(&self) -> &ErrorWindow {
        &self.window
    }
    #[inline]
    fn never_answered(&self) -> bool {
        self.successes == 0
    }
    #[inline]
    fn failures_in_a_row(&self) -> u32 {
        u32::from(self.consecutive_failures)
    }
}

fn spread_warm() -> u32 {
    super::deadline::SPREAD_WARM
}

/// Averages over all candidates, the reference for the relative components. Unknown fields
/// are refused, as in every other part of a snapshot.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Overall {
    /// All-candidate connect time EMA, ms.
    pub connect_ms: Option<f64>,
    /// All-candidate time-to-first-byte EMA, ms.
    pub ttfb_ms: Option<f64>,
    /// All-candidate bandwidth EMA, bytes per second.
    pub bandwidth_bps: Option<f64>,
    /// All-candidate EMA of attempt time to a result, ms.
    #[serde(default)]
    pub attempt_ms: Option<f64>,
    /// How far answers stray from their candidate's first-byte average: the mean square of
    /// the natural log of each first byte over its candidate's average before it (the newest
    /// weighing 1 %); what the deadline advice's multiple follows
    /// ([`DeadlineConfig::sigmas`](super::DeadlineConfig::sigmas)). `None` until a candidate
    /// with an average answers again, or with the spread rule off.
    #[serde(default)]
    pub ttfb_spread: Option<f64>,
    /// The answers [`ttfb_spread`](Self::ttfb_spread) was learned from (saturating): its
    /// first answers are averaged evenly, then the newest weighs 1 %. A snapshot without it
    /// reads as warmed up, unless it saved no spread either: then a restore starts the count
    /// at 0.
    #[serde(default = "spread_warm")]
    pub ttfb_spread_answers: u32,
}

#[cfg(test)]
mod tests;

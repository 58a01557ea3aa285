//! C3's rate control: a token bucket per replica whose rate follows a cubic function of the
//! time since it was last cut (as TCP CUBIC grows its window), as absim implements it.

/// The interval rates are counted over, ms (small-clop's `--rateInterval 20`).
pub(super) const INTERVAL_MS: f64 = 20.0;
/// Cubic growth constant (`--cubicC 0.000004`).
const CUBIC_C: f64 = 0.000_004;
/// The largest step of one increase, requests per interval (`--cubicSmax 10`).
const SMAX: f64 = 10.0;
/// The multiplicative decrease (`--cubicBeta 0.2`).
const BETA: f64 = 0.2;
/// An increase blocks decreases for this many intervals (`--hysterisisFactor 2`).
const HYSTERESIS: f64 = 2.0;
/// Tokens a bucket holds at most (absim's `maxTokens`).
const MAX_TOKENS: f64 = 50.0;

/// absim's `RateLimiter`: `rate` tokens per interval, accrued since the last send.
#[derive(Clone, Copy, Debug)]
struct Bucket {
    rate: f64,
    tokens: f64,
    last_sent_ms: f64,
}

/// absim's `ReceiveRate`: responses per interval, smoothed with weight 0.9 on the newest
/// interval. absim compares interval numbers against the interval length (a units slip); it is
/// kept, since it decides when the smoothed rate resets.
#[derive(Clone, Copy, Debug)]
struct Receive {
    rate: f64,
    last: i64,
    count: f64,
}

impl Receive {
    fn add(&mut self, n: f64, now_ms: f64) {
        let now = (now_ms / INTERVAL_MS).floor() as i64;
        if ((now - self.last) as f64) < INTERVAL_MS {
            self.count += n;
            if now > self.last {
                self.rate = 0.9 * self.count + 0.1 * self.rate;
                self.last = now;
                self.count = 0.0;
            }
        } else {
            self.rate = self.count;
            self.last = now;
            self.count = 0.0;
        }
    }
}

/// One replica's rate control.
#[derive(Clone, Copy, Debug)]
pub(super) struct RateControl {
    bucket: Bucket,
    receive: Receive,
    last_decrease_ms: f64,
    last_increase_ms: f64,
    /// The sending rate when it was last cut (CUBIC's `W_max`).
    rate_at_last_decrease: f64,
}

impl Default for RateControl {
    fn default() -> Self {
        RateControl {
            bucket: Bucket {
                rate: 5.0,
                tokens: 0.0,
                last_sent_ms: 0.0,
            },
            receive: Receive {
                rate: 10.0,
                last: 0,
                count: 0.0,
            },
            last_decrease_ms: 0.0,
            last_increase_ms: 0.0,
            rate_at_last_decrease: 10.0,
        }
    }
}

impl RateControl {
    /// absim's `tryAcquire`: 0 if a token is there (it is then kept, to be spent by
    /// [`RateControl::sent`]), else how long until one is, ms.
    pub(super) fn try_acquire(&mut self, now_ms: f64) -> f64 {
        let b = &mut self.bucket;
        let tokens =
            MAX_TOKENS.min(b.tokens + b.rate / INTERVAL_MS * (now_ms - b.last_sent_ms).max(0.0));
        if tokens >= 1.0 {
            b.tokens = tokens;
            0.0
        } else {
            (1.0 - tokens) * INTERVAL_MS / b.rate
        }
    }

    /// A request went out.
    pub(super) fn sent(&mut self, now_ms: f64) {
        self.bucket.last_sent_ms = now_ms;
        self.bucket.tokens -= 1.0;
    }

    /// A response came back: count it and adjust the sending rate (absim's `updateRates`).
    pub(super) fn response(&mut self, now_ms: f64) {
        self.receive.add(1.0, now_ms);
        self.receive.add(0.0, now_ms);
        let sending = self.bucket.rate;
        let receiving = self.receive.rate;
        if sending < receiving {
            let t = now_ms - self.last_decrease_ms;
            self.last_increase_ms = now_ms;
            let w_max = self.rate_at_last_decrease;
            let k = (w_max * BETA / CUBIC_C).cbrt();
            let next = CUBIC_C * (t - k).powi(3) + w_max;
            if next - sending > SMAX {
                self.bucket.rate += SMAX;
            } else {
                self.bucket.rate = next;
            }
        } else if sending > receiving && now_ms - self.last_increase_ms > INTERVAL_MS * HYSTERESIS {
            self.rate_at_last_decrease = sending;
            self.bucket.rate = (sending * BETA).max(0.0001);
            self.last_decrease_ms = now_ms;
        }
        // The cubic can dip below zero right after a cut; absim asserts it never does.
        self.bucket.rate = self.bucket.rate.max(0.0001);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bucket_fills_at_its_rate_and_waits_for_the_next_token() {
        let mut r = RateControl::default();
        // 5 tokens per 20 ms: the first comes after 4 ms.
        assert!((r.try_acquire(0.0) - 4.0).abs() < 1e-9);
        assert_eq!(r.try_acquire(4.0), 0.0);
        r.sent(4.0);
        assert!((r.try_acquire(4.0) - 4.0).abs() < 1e-9);
    }

    #[test]
    fn the_rate_grows_while_responses_keep_up_and_is_cut_when_they_do_not() {
        let mut r = RateControl::default();
        // Receiving 10 per interval (the initial estimate) beats sending 5: grow by at most SMAX.
        r.response(1.0);
        let grown = r.bucket.rate;
        assert!(grown > 5.0 && grown <= 15.0, "{grown}");
        // Long silence: the receive rate resets to what came in, far below the sending rate.
        r.response(10_000.0);
        assert!(r.bucket.rate < grown, "{} vs {grown}", r.bucket.rate);
        assert_eq!(r.rate_at_last_decrease, grown);
    }

    #[test]
    fn an_increase_follows_the_cubic_from_the_last_cut() {
        let mut r = RateControl::default();
        r.response(1.0);
        // T = 1 ms since the (initial) cut, W_max = 10: C (T - (W_max beta / C)^(1/3))^3 + W_max.
        let k = (10.0_f64 * 0.2 / 0.000_004).cbrt();
        let want = 0.000_004 * (1.0 - k).powi(3) + 10.0;
        assert!(
            (r.bucket.rate - want).abs() < 1e-9,
            "{} {want}",
            r.bucket.rate
        );
    }

    #[test]
    fn one_increase_adds_at_most_smax() {
        let mut r = RateControl {
            rate_at_last_decrease: 100.0,
            ..Default::default()
        };
        // The cubic 10 ms after a cut from 100 reads about 83: the step is capped at 10.
        r.response(10.0);
        assert_eq!(r.bucket.rate, 15.0);
    }

    #[test]
    fn a_cut_waits_two_intervals_after_an_increase_and_keeps_a_fifth() {
        let mut r = RateControl::default();
        r.response(1.0);
        let grown = r.bucket.rate;
        // 20 ms later the receive rate (0.9 x 2 + 0.1 x 10 = 2.8) is below the sending rate,
        // but the increase was less than two intervals ago: no cut.
        r.response(21.0);
        assert!((r.receive.rate - 2.8).abs() < 1e-9, "{}", r.receive.rate);
        assert_eq!(r.bucket.rate, grown);
        // 60 ms after the increase it is cut to beta = 0.2 of itself.
        r.response(61.0);
        assert!(
            (r.bucket.rate - 0.2 * grown).abs() < 1e-9,
            "{}",
            r.bucket.rate
        );
        assert_eq!(r.last_decrease_ms, 61.0);
    }

    #[test]
    fn a_bucket_holds_at_most_fifty_tokens() {
        let mut r = RateControl::default();
        // A second at 5 tokens per 20 ms would be 250: 50 are kept.
        for _ in 0..50 {
            assert_eq!(r.try_acquire(1000.0), 0.0);
            r.sent(1000.0);
        }
        assert!(r.try_acquire(1000.0) > 0.0);
    }
}

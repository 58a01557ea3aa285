//! From one run's raw counts to its per-seed summary, and the running means over seeds.
//!
//! A run's raw counts (every latency it measured) live only as long as the run: the worker
//! that ran it reduces them to a [`RunSummary`] (percentiles, shares, detection), and the
//! summaries are folded into an [`Acc`] in seed order, so memory does not grow with the seed
//! count and the sums are the same whatever thread finished first.

use std::collections::BTreeMap;

use super::limit_stats::{LimitAcc, LimitTrack};
use super::report::{
    bucket_index, bucket_index_ceil, summarize, ArmReport, Degraded, PolicyReport, RunStats,
    Series, SeriesReport, Summary,
};
use super::scenario::Action;

/// Seconds of share before a degrade that make a candidate's normal share.
const BEFORE_S: f64 = 5.0;

/// One degraded candidate in one run.
#[derive(Clone, Debug)]
pub(crate) struct DegRun {
    pub(crate) cand: usize,
    pub(crate) at: f64,
    pub(crate) before: Option<f64>,
    pub(crate) det: Option<f64>,
    pub(crate) healed: Option<f64>,
    pub(crate) rec: Option<f64>,
}

/// One run reduced to what the means over seeds need.
#[derive(Clone, Debug)]
pub(crate) struct RunSummary {
    policy: String,
    requests: u64,
    errors: u64,
    overloads: u64,
    stuck: u64,
    attempts: u64,
    decisions: u64,
    stalls: u64,
    in_time: u64,
    per_cand: Vec<u64>,
    lat: Summary,
    ttfb: Summary,
    det: Option<Option<f64>>,
    rec: Option<Option<f64>>,
    degraded: Vec<DegRun>,
    wall_s: f64,
    end_s: f64,
    last_request_s: f64,
    /// The trailing-second rate's mean (`None`: fewer than two attempt events).
    rate: Option<f64>,
    series: Series,
    limits: LimitTrack,
    arms: Vec<RunSummary>,
}

impl Series {
    /// Attempts, and attempts on tracked candidate `k`, over the 1 s window ending at bucket
    /// `end` (exclusive), if it had any attempt.
    fn share_in(&self, k: usize, from: usize, to: usize) -> Option<f64> {
        let (all, mine) = self.window(k, from, to);
        (all > 0).then(|| mine as f64 / all as f64)
    }

    /// Seconds from `t0` until the first 1 s window (sliding by one bucket) after it whose
    /// share of tracked candidate `k` satisfies `hit`, among the windows that end by `until`
    /// (a detection counts only before the heal).
    pub(crate) fn first_window(
        &self,
        k: usize,
        t0: f64,
        until: Option<f64>,
        hit: impl Fn(f64) -> bool,
    ) -> Option<f64> {
        let bs = self.bucket_s;
        let per_window = ((1.0 / bs).round() as usize).max(1);
        let start = bucket_index_ceil(t0, bs);
        let mut end = start + per_window;
        let last = until.map_or(self.totals.len(), |u| {
            bucket_index(u, bs).min(self.totals.len())
        });
        while end <= last {
            if let Some(share) = self.share_in(k, end - per_window, end) {
                if hit(share) {
                    return Some(end as f64 * bs - t0);
                }
            }
            end += 1;
        }
        None
    }

    /// Per 1 s bin: (attempts, finished, failed, attempts per tracked candidate).
    pub(crate) fn seconds(&self) -> Vec<(u64, u64, u64, Vec<u64>)> {
        let per = ((1.0 / self.bucket_s).round() as usize).max(1);
        let n = self.tracked.len();
        self.totals
            .chunks(per)
            .enumerate()
            .map(|(i, chunk)| {
                let mut c = vec![0; n];
                let (mut a, mut f, mut e) = (0, 0, 0);
                for (j, t) in chunk.iter().enumerate() {
                    a += t[0];
                    f += t[1];
                    e += t[2];
                    let b = i * per + j;
                    for (k, v) in c.iter_mut().enumerate() {
                        *v += self.by_cand[b * n + k];
                    }
                }
                (a, f, e, c)
            })
            .collect()
    }

    /// The JSON form: 1 s bins, shares and error rates.
    pub(crate) fn report(&self, ids: &[String]) -> SeriesReport {
        let bins = self.seconds();
        let width = ((1.0 / self.bucket_s).round()).max(1.0) * self.bucket_s;
        let mut share = BTreeMap::new();
        for (k, &c) in self.tracked.iter().enumerate() {
            let v = bins
                .iter()
                .map(|b| (b.0 > 0).then(|| b.3[k] as f64 / b.0 as f64))
                .collect();
            share.insert(ids[c].clone(), v);
        }
        SeriesReport {
            bucket_s: width,
            t_s: (0..bins.len()).map(|i| i as f64 * width).collect(),
            attempts: bins.iter().map(|b| b.0).collect(),
            requests: bins.iter().map(|b| b.1).collect(),
            error_rate: bins
                .iter()
                .map(|b| (b.1 > 0).then(|| b.2 as f64 / b.1 as f64))
                .collect(),
            share,
            limit: BTreeMap::new(),
        }
    }
}

impl RunStats {
    /// Every degraded candidate (its first degrade), measured against its own share before.
    pub(crate) fn degradations(&self) -> Vec<DegRun> {
        let mut out: Vec<DegRun> = Vec::new();
        let s = &self.series;
        for &(action, cand, _, at) in &self.marks {
            if action != Action::Degrade || out.iter().any(|d| d.cand == cand) {
                continue;
            }
            let healed = self.heal_after(cand, at).map(|m| m.3);
            let mut d = DegRun {
                cand,
                at,
                before: None,
                det: None,
                healed,
                rec: None,
            };
            if let Some(k) = s.tracked.iter().position(|&c| c == cand) {
                let end = bucket_index(at, s.bucket_s);
                let from = end.saturating_sub((BEFORE_S / s.bucket_s).round() as usize);
                d.before = s.share_in(k, from, end);
                if let Some(before) = d.before {
                    d.det = s.first_window(k, at, healed, |x| x < 0.2 * before);
                    d.rec = healed.and_then(|h| s.first_window(k, h, None, |x| x >= 0.8 * before));
                }
            }
            out.push(d);
        }
        out
    }

    /// Reduces the run to its summary (sorts and drops the latencies).
    pub(crate) fn summary(mut self) -> RunSummary {
        let arms = std::mem::take(&mut self.arms)
            .into_iter()
            .map(RunStats::summary)
            .collect();
        RunSummary {
            lat: summarize(&mut self.latency_ms),
            ttfb: summarize(&mut self.ttfb_ms),
            det: self.time_to_share(Action::Degrade, 0.2, true),
            rec: self.time_to_share(Action::Heal, 0.8, false),
            degraded: self.degradations(),
            policy: self.policy,
            requests: self.requests,
            errors: self.errors,
            overloads: self.overloads,
            stuck: self.stuck,
            attempts: self.attempts,
            decisions: self.decisions,
            stalls: self.stalls,
            in_time: self.in_time,
            per_cand: self.per_cand,
            wall_s: self.wall_s,
            end_s: self.end_s,
            last_request_s: self.last_request_s,
            rate: self.rate.mean(),
            series: self.series,
            limits: self.limits,
            arms,
        }
    }
}

/// A running mean of optional per-seed values: `None` once any seed had none.
#[derive(Clone, Debug, Default)]
struct OptMean {
    sum: f64,
    n: u64,
    missing: bool,
}

impl OptMean {
    fn add(&mut self, x: Option<f64>) {
        match x {
            Some(v) => {
                self.sum += v;
                self.n += 1;
            }
            None => self.missing = true,
        }
    }

    fn get(&self) -> Option<f64> {
        (!self.missing && self.n > 0).then(|| self.sum / self.n as f64)
    }
}

#[derive(Clone, Debug)]
struct DegAcc {
    cand: usize,
    at: f64,
    before: OptMean,
    det: OptMean,
    healed: OptMean,
    rec: OptMean,
}

/// Running sums over seeds of one policy (or one arm), folded in seed order.
#[derive(Clone, Debug, Default)]
pub(crate) struct Acc {
    n: u64,
    policy: String,
    requests: f64,
    errors: f64,
    stalls: f64,
    decisions: f64,
    stuck: f64,
    error_rate: f64,
    in_time_rate: f64,
    attempts_per_request: f64,
    decisions_per_s: f64,
    virtual_s: f64,
    share: Vec<f64>,
    lat: [f64; 4],
    ttfb: [f64; 4],
    /// Seeds with at least one success: the first-byte figures are means over those only (a
    /// seed without a success has no first byte, not one of 0 ms).
    ttfb_runs: f64,
    /// Seeds with at least one request: the per-request figures (rates, attempts per request,
    /// latencies) are means over those only, and have no value (null) without one.
    req_runs: f64,
    /// Seeds with at least one attempt: the shares are means over those only.
    att_runs: f64,
    det: OptMean,
    rec: OptMean,
    /// Whether the scalar detection/recovery apply (the event exists in the runs).
    det_applies: bool,
    rec_applies: bool,
    degraded: Vec<DegAcc>,
    series: Option<Series>,
    goodput_per_s: f64,
    rate_trailing_1s: f64,
    overload_rate: f64,
    limits: LimitAcc,
    arms: Vec<Acc>,
}

fn add4(acc: &mut [f64; 4], s: &Summary) {
    acc[0] += s.mean;
    acc[1] += s.p50;
    acc[2] += s.p99;
    acc[3] += s.p999;
}

impl Acc {
    /// Folds in the next seed's summary.
    pub(crate) fn add(&mut self, r: RunSummary) {
        self.n += 1;
        if self.n == 1 {
            self.policy = r.policy.clone();
            self.share = vec![0.0; r.per_cand.len()];
            self.det_applies = r.det.is_some();
            self.rec_applies = r.rec.is_some();
        }
        self.requests += r.requests as f64;
        self.errors += r.errors as f64;
        self.stalls += r.stalls as f64;
        self.decisions += r.decisions as f64;
        self.stuck += r.stuck as f64;
        if r.requests > 0 {
            self.req_runs += 1.0;
            self.error_rate += r.errors as f64 / r.requests as f64;
            self.in_time_rate += r.in_time as f64 / r.requests as f64;
            self.attempts_per_request += r.attempts as f64 / r.requests as f64;
            self.overload_rate += r.overloads as f64 / r.requests as f64;
            add4(&mut self.lat, &r.lat);
        }
        self.decisions_per_s += r.decisions as f64 / r.wall_s.max(1e-9);
        self.virtual_s += r.end_s;
        self.goodput_per_s += (r.requests - r.errors) as f64 / r.last_request_s.max(1e-9);
        self.rate_trailing_1s += r.rate.unwrap_or(0.0);
        self.limits.add(&r.limits);
        if r.attempts > 0 {
            self.att_runs += 1.0;
            for (s, &c) in self.share.iter_mut().zip(&r.per_cand) {
                *s += c as f64 / r.attempts as f64;
            }
        }
        if r.requests > r.errors {
            add4(&mut self.ttfb, &r.ttfb);
            self.ttfb_runs += 1.0;
        }
        if let Some(d) = r.det {
            self.det.add(d);
        }
        if let Some(d) = r.rec {
            self.rec.add(d);
        }
        for d in &r.degraded {
            let i = match self.degraded.iter().position(|x| x.cand == d.cand) {
                Some(i) => i,
                None => {
                    self.degraded.push(DegAcc {
                        cand: d.cand,
                        at: d.at,
                        before: OptMean::default(),
                        det: OptMean::default(),
                        healed: OptMean::default(),
                        rec: OptMean::default(),
                    });
                    self.degraded.len() - 1
                }
            };
            let x = &mut self.degraded[i];
            x.before.add(d.before);
            x.det.add(d.det);
            x.healed.add(d.healed);
            x.rec.add(d.rec);
        }
        match &mut self.series {
            Some(s) => s.add(&r.series),
            None => self.series = Some(r.series),
        }
        for (k, a) in r.arms.into_iter().enumerate() {
            if self.arms.len() <= k {
                self.arms.push(Acc::default());
            }
            self.arms[k].add(a);
        }
    }

    /// The means over the seeds folded in, and the summed series.
    pub(crate) fn finish(self, ids: &[String]) -> (PolicyReport, Series) {
        let n = self.n.max(1) as f64;
        // A mean over no seed is no figure: NaN, written as null in the JSON.
        let over = |sum: f64, runs: f64| if runs > 0.0 { sum / runs } else { f64::NAN };
        let arms = self
            .arms
            .into_iter()
            .map(|a| ArmReport::from(&a.finish(ids).0))
            .collect();
        let mut share = BTreeMap::new();
        for (c, id) in ids.iter().enumerate() {
            let sum = self.share.get(c).copied().unwrap_or(0.0);
            share.insert(id.clone(), over(sum, self.att_runs));
        }
        let avg_over = |a: [f64; 4], n: f64| Summary {
            mean: over(a[0], n),
            p50: over(a[1], n),
            p99: over(a[2], n),
            p999: over(a[3], n),
        };
        let series = self.series.unwrap_or_default();
        let mut series_report = series.report(ids);
        series_report.limit = self
            .limits
            .series(ids, &series.tracked, series_report.t_s.len());
        let error_rate = over(self.error_rate, self.req_runs);
        let report = PolicyReport {
            policy: self.policy,
            requests: self.requests / n,
            errors: self.errors / n,
            error_rate,
            success_rate: 1.0 - error_rate,
            stalls: self.stalls / n,
            decisions: self.decisions / n,
            share,
            latency_ms: avg_over(self.lat, self.req_runs),
            ttfb_ms: avg_over(self.ttfb, self.ttfb_runs),
            attempts_per_request: over(self.attempts_per_request, self.req_runs),
            detection_s: if self.det_applies {
                self.det.get()
            } else {
                None
            },
            recovery_s: if self.rec_applies {
                self.rec.get()
            } else {
                None
            },
            success_within_timeout: over(self.in_time_rate, self.req_runs),
            goodput_per_s: self.goodput_per_s / n,
            rate_trailing_1s: self.rate_trailing_1s / n,
            overload_rate: over(self.overload_rate, self.req_runs),
            limit_mean: self.limits.means(ids),
            degraded: self
                .degraded
                .iter()
                .map(|d| Degraded {
                    candidate: ids.get(d.cand).cloned().unwrap_or_default(),
                    degraded_at_s: d.at,
                    share_before: d.before.get(),
                    detection_s: d.det.get(),
                    healed_at_s: d.healed.get(),
                    recovery_s: d.rec.get(),
                })
                .collect(),
            series: series_report,
            decisions_per_s: self.decisions_per_s / n,
            stuck: self.stuck / n,
            virtual_s: self.virtual_s / n,
            arms,
        };
        (report, series)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 20 s in 0.1 s buckets, 10 attempts each; the tracked candidate gets half of them but
    /// none from 10.5 s to 13 s.
    fn shunned_after_heal() -> Series {
        let n = 200;
        let by_cand = (0..n)
            .map(|b| if (105..130).contains(&b) { 0 } else { 5 })
            .collect();
        Series {
            bucket_s: 0.1,
            tracked: vec![0],
            totals: vec![[10, 10, 0]; n],
            by_cand,
            ..Default::default()
        }
    }

    #[test]
    fn a_share_that_falls_after_the_heal_is_no_detection() {
        let s = shunned_after_heal();
        let low = |x: f64| x < 0.1;
        assert_eq!(s.first_window(0, 10.0, Some(10.5), low), None);
        let unbounded = s.first_window(0, 10.0, None, low).unwrap();
        assert!((unbounded - 1.4).abs() < 1e-9, "{unbounded}");
        // A heal after the fall leaves the detection as it was.
        assert_eq!(s.first_window(0, 10.0, Some(15.0), low), Some(unbounded));
    }

    #[test]
    fn percentiles_take_the_nearest_rank_and_the_mean_every_value() {
        // Ranks (n - 1) x p, rounded: 1.5 -> 2 and 2.97 -> 3 among four.
        let s = summarize(&mut [4.0, 1.0, 3.0, 2.0]);
        assert_eq!((s.mean, s.p50, s.p99, s.p999), (2.5, 3.0, 4.0, 4.0));
        // Among 0..=1000 the 99th and 99.9th percentiles are ranks 990 and 999.
        let mut v: Vec<f64> = (0..=1000).map(f64::from).collect();
        let s = summarize(&mut v);
        assert_eq!((s.mean, s.p50, s.p99, s.p999), (500.0, 500.0, 990.0, 999.0));
    }

    #[test]
    fn a_seed_without_a_figure_leaves_the_mean_without_one() {
        let mut m = OptMean::default();
        m.add(Some(1.0));
        m.add(Some(3.0));
        assert_eq!(m.get(), Some(2.0));
        m.add(None);
        assert_eq!(m.get(), None);
    }

    fn run(attempts: &[(u32, f64)], requests: &[(f64, Option<f64>)]) -> RunStats {
        let ids = ["a".to_string(), "b".to_string()];
        let mut st = RunStats::new("p", &ids, vec![0, 1], 0.1);
        for &(c, t) in attempts {
            st.attempt(c, t, None);
        }
        for &(t, ttfb) in requests {
            st.request(t, ttfb.unwrap_or(0.05), ttfb, None);
        }
        st
    }

    #[test]
    fn the_means_over_seeds_divide_each_figure_by_its_own_count() {
        // Seed 1: five attempts (four on a), four requests of which one failed, the last
        // ending at 1 s and the run at 2 s. Seed 2: two attempts on b, both requests failed.
        let mut one = run(
            &[(0, 0.1), (0, 0.2), (0, 0.3), (0, 0.4), (1, 0.5)],
            &[
                (0.5, Some(0.01)),
                (0.6, Some(0.02)),
                (0.7, Some(0.03)),
                (1.0, None),
            ],
        );
        one.end_s = 2.0;
        let mut two = run(&[(1, 0.1), (1, 0.2)], &[(0.5, None), (0.6, None)]);
        two.end_s = 2.0;
        let mut acc = Acc::default();
        acc.add(one.summary());
        acc.add(two.summary());
        let (r, _) = acc.finish(&["a".to_string(), "b".to_string()]);
        let close = |x: f64, want: f64| assert!((x - want).abs() < 1e-9, "{x} != {want}");
        // (1/4 + 2/2) / 2 over requests, not attempts.
        close(r.error_rate, 0.625);
        // (3/4 + 0/2) / 2: successes in time over all requests.
        close(r.success_within_timeout, 0.375);
        // Shares of attempts: (4/5 + 0) / 2 and (1/5 + 1) / 2.
        close(r.share["a"], 0.4);
        close(r.share["b"], 0.6);
        // (3 successes / 1 s to the last request + 0) / 2.
        close(r.goodput_per_s, 1.5);
        // First bytes of 10, 20 and 30 ms: the seed without a success is left out.
        close(r.ttfb_ms.mean, 20.0);
        close(r.ttfb_ms.p50, 20.0);
    }

    #[test]
    fn a_first_byte_at_the_timeout_is_in_time() {
        let mut st = run(&[], &[]);
        st.timeout_s = Some(0.25);
        st.request(1.0, 0.25, Some(0.25), None);
        st.request(1.0, 0.26, Some(0.26), None);
        assert_eq!(st.in_time, 1);
    }

    /// 20 s in 0.1 s buckets, 100 attempts per second; the tracked candidate's attempts per
    /// bucket are `mine(bucket)`.
    fn run_with(mine: impl Fn(usize) -> u64) -> RunStats {
        let mut st = RunStats::new("p", &["a".to_string(), "b".to_string()], vec![0], 0.1);
        st.series.totals = vec![[10, 10, 0]; 200];
        st.series.by_cand = (0..200).map(mine).collect();
        st
    }

    #[test]
    fn detection_against_the_fair_share_is_strictly_below_it() {
        // Half the traffic, then one in ten from the degrade at 10 s, none from 11 s on.
        let mut st = run_with(|b| match b {
            ..100 => 5,
            100..110 => 1,
            _ => 0,
        });
        st.mark(Action::Degrade, 0, 2, 10.0);
        // 20% of the fair 1/2 is 0.1: the window 10-11 s is at it, not below; the one
        // ending at 11.1 s holds 9 of 100.
        let det = st
            .time_to_share(Action::Degrade, 0.2, true)
            .unwrap()
            .unwrap();
        assert!((det - 1.1).abs() < 1e-9, "{det}");
    }

    #[test]
    fn detection_and_recovery_measure_against_the_five_seconds_before() {
        // Half the traffic from 5 s to 9 s and all of it from 9 s to 10 s: 0.6 over the 5 s
        // before the degrade at 10 s. None until the heal at 12 s, then 0.4 for a second,
        // then 0.5.
        let mut st = run_with(|b| match b {
            ..90 => 5,
            90..100 => 10,
            100..120 => 0,
            120..130 => 4,
            _ => 5,
        });
        st.mark(Action::Degrade, 0, 2, 10.0);
        st.mark(Action::Heal, 0, 2, 12.0);
        let d = &st.degradations()[0];
        let before = d.before.unwrap();
        assert!((before - 0.6).abs() < 1e-9, "{before}");
        let det = d.det.unwrap();
        assert!((det - 1.0).abs() < 1e-9, "{det}");
        // 80% of 0.6 is 0.48: the window ending at 13.8 s holds 2 x 4 + 8 x 5 of 100.
        let rec = d.rec.unwrap();
        assert!((rec - 1.8).abs() < 1e-9, "{rec}");
    }

    #[test]
    fn a_heal_at_the_instant_of_the_degrade_is_its_heal() {
        let mut st = run_with(|_| 5);
        st.mark(Action::Degrade, 0, 2, 10.0);
        st.mark(Action::Heal, 0, 2, 10.0);
        assert_eq!(st.degradations()[0].healed, Some(10.0));
        // No detection after the heal; the share is back at once.
        assert_eq!(st.time_to_share(Action::Degrade, 0.2, true), Some(None));
        let rec = st.time_to_share(Action::Heal, 0.8, false).unwrap().unwrap();
        assert!((rec - 1.0).abs() < 1e-9, "{rec}");
    }

    #[test]
    fn a_window_that_ends_after_the_heal_is_no_detection() {
        // Nothing on the tracked candidate from 9.6 s on; degrade at 9.55 s. The first whole
        // window after it ends at 10.6 s, after a heal at 10.55 s.
        let mut s = shunned_after_heal();
        for b in 96..200 {
            s.by_cand[b] = 0;
        }
        let low = |x: f64| x < 0.1;
        assert_eq!(s.first_window(0, 9.55, Some(10.55), low), None);
        let det = s.first_window(0, 9.55, Some(10.65), low).unwrap();
        assert!((det - 1.05).abs() < 1e-9, "{det}");
    }
}

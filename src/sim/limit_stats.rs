//! Concurrency limits over a run: each candidate's limit as its policy reports it
//! ([`Policy::limit`](super::policy::Policy::limit)), integrated over virtual time into a
//! time-weighted mean and a per-bucket time series, then averaged over seeds.
//!
//! The engine reads a candidate's limit after every event that can change it (an attempt
//! granted or ended on it, a caller timeout, a timeline event, every tick), and the value
//! holds until the next read that differs.

use std::collections::BTreeMap;

use super::report::PolicyReport;
use super::scenario::{Action, Scenario};
use super::truth::Truth;

/// One run's limits: integrals per candidate and per (bucket, tracked candidate).
#[derive(Clone, Debug, Default)]
pub(crate) struct LimitTrack {
    last: Vec<Option<f64>>,
    since: Vec<f64>,
    integral: Vec<f64>,
    weight: Vec<f64>,
    bucket_s: f64,
    /// Candidate -> its index among the tracked ones.
    slot: Vec<Option<usize>>,
    tracked: usize,
    /// Per bucket, per tracked candidate (flattened): limit x seconds, and seconds.
    bins: Vec<f64>,
    bin_w: Vec<f64>,
    /// Closed at the run's end ([`LimitTrack::finish`]): later reads no longer count.
    ended: bool,
}

impl LimitTrack {
    /// `n` candidates, of which `tracked` get a time series in buckets of `bucket_s`.
    pub(crate) fn new(n: usize, tracked: &[usize], bucket_s: f64) -> Self {
        let mut slot = vec![None; n];
        for (k, &c) in tracked.iter().enumerate() {
            if let Some(s) = slot.get_mut(c) {
                *s = Some(k);
            }
        }
        LimitTrack {
            last: vec![None; n],
            since: vec![0.0; n],
            integral: vec![0.0; n],
            weight: vec![0.0; n],
            bucket_s,
            slot,
            tracked: tracked.len(),
            bins: Vec::new(),
            bin_w: Vec::new(),
            ended: false,
        }
    }

    /// The policy's limit for candidate `c` is `limit` from `now` on (`None`, or a value that
    /// is not a finite number: no limit). Ignored once the run has ended.
    pub(crate) fn set(&mut self, c: usize, limit: Option<f64>, now: f64) {
        let limit = limit.filter(|v| v.is_finite());
        if self.ended || c >= self.last.len() || self.last[c] == limit {
            return;
        }
        self.close(c, now);
        self.last[c] = limit;
    }

    /// Integrates candidate `c`'s current limit up to `now`.
    fn close(&mut self, c: usize, now: f64) {
        let from = self.since[c];
        self.since[c] = now;
        let Some(v) = self.last[c] else { return };
        let dt = now - from;
        if dt <= 0.0 {
            return;
        }
        self.integral[c] += v * dt;
        self.weight[c] += dt;
        let (Some(k), true) = (self.slot[c], self.bucket_s > 0.0) else {
            return;
        };
        let bs = self.bucket_s;
        // The saturating casts are `floor().max(0.0)` (see `Series::bucket`).
        let first = (from / bs) as usize;
        let last = ((now / bs) as usize).min(super::report::MAX_SERIES_BUCKETS - 1);
        if first > last {
            return;
        }
        if self.bins.len() < (last + 1) * self.tracked {
            self.bins.resize((last + 1) * self.tracked, 0.0);
            self.bin_w.resize((last + 1) * self.tracked, 0.0);
        }
        for b in first..=last {
            let lo = from.max(b as f64 * bs);
            let hi = now.min((b + 1) as f64 * bs);
            if hi > lo {
                self.bins[b * self.tracked + k] += v * (hi - lo);
                self.bin_w[b * self.tracked + k] += hi - lo;
            }
        }
    }

    /// Closes every candidate's current limit at the end of the run, `now` (the end of its
    /// last request): what the policy reports after it, while leftover events run out, is not
    /// counted. Only the first call counts.
    pub(crate) fn finish(&mut self, now: f64) {
        if self.ended {
            return;
        }
        for c in 0..self.last.len() {
            self.close(c, now);
        }
        self.ended = true;
    }

    /// Per candidate, its time-weighted mean limit over the time it had one.
    pub(crate) fn means(&self) -> Vec<Option<f64>> {
        self.integral
            .iter()
            .zip(&self.weight)
            .map(|(i, w)| (*w > 0.0).then(|| i / w))
            .collect()
    }
}

/// Limits summed over seeds (one policy).
#[derive(Clone, Debug, Default)]
pub(crate) struct LimitAcc {
    sum: Vec<f64>,
    seeds: Vec<u64>,
    bucket_s: f64,
    tracked: usize,
    bins: Vec<f64>,
    bin_w: Vec<f64>,
}

impl LimitAcc {
    /// Folds in one run's limits.
    pub(crate) fn add(&mut self, t: &LimitTrack) {
        let means = t.means();
        if self.sum.len() < means.len() {
            self.sum.resize(means.len(), 0.0);
            self.seeds.resize(means.len(), 0);
        }
        for (c, m) in means.iter().enumerate() {
            if let Some(m) = m {
                self.sum[c] += m;
                self.seeds[c] += 1;
            }
        }
        self.bucket_s = t.bucket_s;
        self.tracked = t.tracked;
        if self.bins.len() < t.bins.len() {
            self.bins.resize(t.bins.len(), 0.0);
            self.bin_w.resize(t.bins.len(), 0.0);
        }
        for (a, b) in self.bins.iter_mut().zip(&t.bins) {
            *a += b;
        }
        for (a, b) in self.bin_w.iter_mut().zip(&t.bin_w) {
            *a += b;
        }
    }

    /// Candidate id -> its mean limit over the seeds where it had one (`None`: never had
    /// one); empty when no candidate ever had a limit.
    pub(crate) fn means(&self, ids: &[String]) -> BTreeMap<String, Option<f64>> {
        if self.seeds.iter().all(|&n| n == 0) {
            return BTreeMap::new();
        }
        ids.iter()
            .enumerate()
            .map(|(c, id)| {
                let n = self.seeds.get(c).copied().unwrap_or(0);
                (id.clone(), (n > 0).then(|| self.sum[c] / n as f64))
            })
            .collect()
    }

    /// Tracked candidate id -> its time-weighted mean limit in each whole second (`None`:
    /// no limit in that second), over `seconds` bins; empty when no candidate had a limit.
    pub(crate) fn series(
        &self,
        ids: &[String],
        tracked: &[usize],
        seconds: usize,
    ) -> BTreeMap<String, Vec<Option<f64>>> {
        if self.tracked == 0 || self.bin_w.iter().all(|&w| w == 0.0) {
            return BTreeMap::new();
        }
        let per = ((1.0 / self.bucket_s).round() as usize).max(1);
        let buckets = self.bins.len() / self.tracked;
        let mut out = BTreeMap::new();
        for (k, &c) in tracked.iter().enumerate().take(self.tracked) {
            let v = (0..seconds)
                .map(|s| {
                    let (mut sum, mut w) = (0.0, 0.0);
                    for b in s * per..((s + 1) * per).min(buckets) {
                        sum += self.bins[b * self.tracked + k];
                        w += self.bin_w[b * self.tracked + k];
                    }
                    (w > 0.0).then(|| sum / w)
                })
                .collect();
            if let Some(id) = ids.get(c) {
                out.insert(id.clone(), v);
            }
        }
        out
    }
}

/// How one candidate's limit followed one change of its capacity (see [`limit_settling`]).
#[derive(Clone, Debug, PartialEq)]
pub struct LimitSettle {
    /// The candidate id.
    pub candidate: String,
    /// When its capacity changed, virtual seconds (0: its capacity at the start).
    pub at_s: f64,
    /// Its capacity from then on.
    pub capacity: u32,
    /// From the change to the end of the first whole second from which the policy's mean
    /// limit in every second stays within the band around `capacity` until the next change
    /// (or the end of the series); `None` if it never does.
    pub settle_s: Option<f64>,
}

/// For every candidate of `sc` with a capacity (`Truth::concurrency_capacity`: the servers of
/// a queue, else its `capacity`, else the start of its `knee`), at the start and at each
/// timeline event that changes it: how long `policy`'s limit took to come within
/// `band` x capacity of the new capacity (`|limit - capacity| <= band x capacity`) and stay
/// there, read from the report's `limit` series (1 s means over the seeds). Empty for a policy
/// without limits.
///
/// ```
/// use selection_coordinator::sim::{limit_settling, simulate, PolicySpec, Scenario};
///
/// let mut sc = Scenario::load("capacity-shift").unwrap();
/// sc.workload.duration_s = 40.0;
/// sc.timeline.retain(|e| e.at_s < 40.0);
/// let oracle = PolicySpec::parse("oracle-limits").unwrap();
/// let report = simulate(&sc, &[oracle], &[1], 1, None).unwrap();
/// let settle = limit_settling(&sc, &report.policies[0], 0.2);
/// // Ten candidates, each at the start and at the halving at 30 s.
/// assert_eq!(settle.len(), 20);
/// assert!(settle.iter().all(|s| s.settle_s == Some(1.0)));
/// ```
pub fn limit_settling(sc: &Scenario, policy: &PolicyReport, band: f64) -> Vec<LimitSettle> {
    let series = &policy.series;
    let width = series.bucket_s;
    let mut out = Vec::new();
    if series.limit.is_empty() || width <= 0.0 {
        return out;
    }
    for (id, spec) in sc.expanded() {
        let Some(limits) = series.limit.get(&id) else {
            continue;
        };
        let base = Truth::from_spec(&sc.candidates[spec]);
        let mut truth = base.clone();
        let mut changes: Vec<(f64, u32)> = Vec::new();
        if let Some(c) = truth.concurrency_capacity() {
            changes.push((0.0, c));
        }
        let mut events: Vec<_> = sc
            .timeline
            .iter()
            .filter(|e| e.candidate.get_ref() == &id)
            .collect();
        events.sort_by(|a, b| a.at_s.total_cmp(&b.at_s));
        for ev in events {
            match ev.action {
                Action::Degrade => truth.degrade(ev),
                Action::Heal => truth = base.clone(),
                Action::Join | Action::Leave => continue,
            }
            if let Some(c) = truth.concurrency_capacity() {
                if changes.last().map(|x| x.1) != Some(c) {
                    changes.push((ev.at_s, c));
                }
            }
        }
        for (i, &(at, cap)) in changes.iter().enumerate() {
            let until = changes.get(i + 1).map_or(f64::INFINITY, |x| x.0);
            let first = (at / width - 1e-9).ceil().max(0.0) as usize;
            let last = limits
                .len()
                .min(((until / width) + 1e-9).floor().min(limits.len() as f64) as usize);
            let ok =
                |b: usize| limits[b].is_some_and(|v| (v - cap as f64).abs() <= band * cap as f64);
            // The first bin from which every bin up to the next change is in the band.
            let mut from = last;
            while from > first && ok(from - 1) {
                from -= 1;
            }
            let settle_s = (from < last).then(|| (from + 1) as f64 * width - at);
            out.push(LimitSettle {
                candidate: id.clone(),
                at_s: at,
                capacity: cap,
                settle_s,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mean_weighs_each_limit_by_how_long_it_held() {
        let mut t = LimitTrack::new(2, &[0, 1], 1.0);
        t.set(0, Some(10.0), 0.0);
        t.set(0, Some(20.0), 1.5);
        t.set(0, Some(20.0), 2.0);
        t.set(1, None, 0.0);
        t.finish(3.0);
        // 10 for 1.5 s, 20 for 1.5 s.
        assert_eq!(t.means(), vec![Some(15.0), None]);
        let mut acc = LimitAcc::default();
        acc.add(&t);
        let ids = ["a".to_string(), "b".to_string()];
        let s = acc.series(&ids, &[0, 1], 3);
        // Second 1 holds 10 for 0.5 s and 20 for 0.5 s.
        assert_eq!(s["a"], vec![Some(10.0), Some(15.0), Some(20.0)]);
        assert_eq!(s["b"], vec![None, None, None]);
        assert_eq!(acc.means(&ids)["b"], None);
    }

    #[test]
    fn a_policy_without_limits_reports_none() {
        let mut t = LimitTrack::new(1, &[0], 0.1);
        t.set(0, None, 0.0);
        t.set(0, Some(f64::INFINITY), 1.0);
        t.finish(2.0);
        let mut acc = LimitAcc::default();
        acc.add(&t);
        assert!(acc.means(&["a".into()]).is_empty());
        assert!(acc.series(&["a".into()], &[0], 2).is_empty());
    }

    #[test]
    fn a_mean_over_seeds_counts_only_the_seeds_with_a_limit() {
        let mut acc = LimitAcc::default();
        for b in [Some(4.0), None] {
            let mut t = LimitTrack::new(2, &[], 0.1);
            t.set(0, Some(2.0), 0.0);
            t.set(1, b, 0.0);
            t.finish(1.0);
            acc.add(&t);
        }
        let m = acc.means(&["a".into(), "b".into()]);
        assert_eq!((m["a"], m["b"]), (Some(2.0), Some(4.0)));
    }

    #[test]
    fn settling_starts_at_the_first_bin_of_the_last_run_within_the_band() {
        let sc = Scenario::parse(
            r#"
            name = "two"
            [workload]
            loop = "open"
            rate_per_s = 10.0
            duration_s = 4.0
            [[candidates]]
            id = "a"
            success = 1.0
            servers = 10
            service_ms = 100.0
            [[candidates]]
            id = "b"
            success = 1.0
            servers = 10
            service_ms = 100.0
            "#,
            "two",
        )
        .unwrap();
        let mut p = crate::sim::aggregate::Acc::default().finish(&[]).0;
        p.series.bucket_s = 1.0;
        // 20% of 10 either way: 8 and 12 are at the band's edges, in it.
        p.series.limit.insert(
            "a".into(),
            vec![Some(5.0), Some(8.0), Some(12.0), Some(9.0)],
        );
        p.series.limit.insert("b".into(), vec![Some(10.0); 4]);
        let s = limit_settling(&sc, &p, 0.2);
        let got: Vec<_> = s
            .iter()
            .map(|x| (x.candidate.as_str(), x.settle_s))
            .collect();
        // From the start to the end of the first bin in the band.
        assert_eq!(got, vec![("a", Some(2.0)), ("b", Some(1.0))]);
    }
}

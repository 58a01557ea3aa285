//! What a run measured, the means over seeds, the table and the JSON contract
//! (`docs/simulate-json.md`).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use super::limit_stats::LimitTrack;
use super::policy::Cand;
use super::rate_stats::TrailingRate;
use super::scenario::{Action, Scenario};
pub(crate) use super::series::{bucket_index, bucket_index_ceil, Series, MAX_SERIES_BUCKETS};

/// Raw counts of one run (one policy, one seed).
#[derive(Clone, Debug)]
pub(crate) struct RunStats {
    pub(crate) policy: String,
    pub(crate) requests: u64,
    pub(crate) errors: u64,
    /// Requests whose last attempt failed with `overload`.
    pub(crate) overloads: u64,
    pub(crate) stuck: u64,
    pub(crate) attempts: u64,
    pub(crate) decisions: u64,
    pub(crate) stalls: u64,
    pub(crate) per_cand: Vec<u64>,
    pub(crate) latency_ms: Vec<f64>,
    pub(crate) ttfb_ms: Vec<f64>,
    pub(crate) wall_s: f64,
    /// The run's end (`virtual_s`): the end of its last request, the events left after it
    /// (deadlines of requests already answered, timeline events, ticks) not counted.
    pub(crate) end_s: f64,
    /// When the last request ended so far (at the end of the run, `end_s`).
    pub(crate) last_request_s: f64,
    pub(crate) series: Series,
    /// Successful requests whose first byte came within the caller timeout.
    pub(crate) in_time: u64,
    /// The caller timeout, seconds (`None`: every success counts as in time).
    pub(crate) timeout_s: Option<f64>,
    pub(crate) marks: Vec<(Action, usize, usize, f64)>,
    /// The same counts restricted to each arm's requests, when the policy has arms.
    pub(crate) arms: Vec<RunStats>,
    /// Each candidate's concurrency limit over time, as the policy reports it.
    pub(crate) limits: LimitTrack,
    /// Attempts started in the trailing second, as Vector's harness measures its rate.
    pub(crate) rate: TrailingRate,
}

/// Up to this many candidates, every one gets a share series; past it, only those the
/// timeline names.
pub(crate) const ALL_TRACKED_UP_TO: usize = 32;

impl RunStats {
    pub(crate) fn new(policy: &str, ids: &[String], tracked: Vec<usize>, bucket_s: f64) -> Self {
        RunStats {
            policy: policy.to_string(),
            requests: 0,
            errors: 0,
            overloads: 0,
            stuck: 0,
            attempts: 0,
            decisions: 0,
            stalls: 0,
            per_cand: vec![0; ids.len()],
            latency_ms: Vec::new(),
            ttfb_ms: Vec::new(),
            wall_s: 0.0,
            end_s: 0.0,
            last_request_s: 0.0,
            limits: LimitTrack::new(ids.len(), &tracked, bucket_s),
            rate: TrailingRate::default(),
            series: Series {
                bucket_s,
                tracked,
                ..Default::default()
            },
            in_time: 0,
            timeout_s: None,
            marks: Vec::new(),
            arms: Vec::new(),
        }
    }

    /// Room for `n` requests' latencies and first bytes, so the lists do not grow (and copy
    /// themselves) during the run.
    pub(crate) fn reserve_requests(&mut self, n: usize) {
        self.latency_ms.reserve_exact(n);
        self.ttfb_ms.reserve_exact(n);
    }

    /// An attempt on `cand` of a request of `arm`.
    pub(crate) fn attempt(&mut self, cand: Cand, now: f64, arm: Option<usize>) {
        if let Some(a) = arm.and_then(|a| self.arms.get_mut(a)) {
            a.attempt(cand, now, None);
        }
        self.attempts += 1;
        self.rate.start(now);
        self.per_cand[cand as usize] += 1;
        if let Some(b) = self.series.bucket(now) {
            self.series.totals[b][0] += 1;
            if let Some(k) = self.series.tracked.iter().position(|&c| c == cand as usize) {
                let n = self.series.tracked.len();
                self.series.by_cand[b * n + k] += 1;
            }
        }
    }

    /// A request of `arm` ended; `ttfb_s` is `None` if it failed.
    pub(crate) fn request(
        &mut self,
        now: f64,
        latency_s: f64,
        ttfb_s: Option<f64>,
        arm: Option<usize>,
    ) {
        if let Some(a) = arm.and_then(|a| self.arms.get_mut(a)) {
            a.request(now, latency_s, ttfb_s, None);
        }
        self.requests += 1;
        self.last_request_s = self.last_request_s.max(now);
        self.latency_ms.push(latency_s * 1000.0);
        let b = self.series.bucket(now);
        if let Some(b) = b {
            self.series.totals[b][1] += 1;
        }
        match ttfb_s {
            Some(t) => {
                self.ttfb_ms.push(t * 1000.0);
                if self.timeout_s.is_none_or(|limit| t <= limit + 1e-12) {
                    self.in_time += 1;
                }
            }
            None => {
                self.errors += 1;
                if let Some(b) = b {
                    self.series.totals[b][2] += 1;
                }
            }
        }
    }

    /// An attempt ended (answered, failed, or given up by its caller).
    pub(crate) fn attempt_end(&mut self, now: f64) {
        self.rate.end(now);
    }

    pub(crate) fn mark(&mut self, action: Action, cand: usize, live: usize, now: f64) {
        self.marks.push((action, cand, live, now));
    }

    /// The mark of candidate `cand`'s first heal at `t` or later.
    pub(crate) fn heal_after(&self, cand: usize, t: f64) -> Option<&(Action, usize, usize, f64)> {
        self.marks
            .iter()
            .find(|m| m.0 == Action::Heal && m.1 == cand && m.3 >= t)
    }

    /// Seconds from the first `action` until its candidate's 1 s traffic share first passes the
    /// threshold (a fraction of the fair share): below it for a degrade, at or above it for a
    /// heal. The degrade is the first one; the heal is the first of that same candidate after
    /// it (another candidate's heal is not its return). `None` if there is no such event or it
    /// never happens.
    pub(crate) fn time_to_share(
        &self,
        action: Action,
        fraction: f64,
        below: bool,
    ) -> Option<Option<f64>> {
        let degrade = self.marks.iter().find(|m| m.0 == Action::Degrade);
        let &(_, cand, live, t0) = match action {
            Action::Heal => {
                let d = degrade?;
                self.heal_after(d.1, d.3)?
            }
            _ => self.marks.iter().find(|m| m.0 == action)?,
        };
        let Some(k) = self.series.tracked.iter().position(|&c| c == cand) else {
            return Some(None);
        };
        let fair = 1.0 / live.max(1) as f64;
        // A detection counts only before the candidate's heal.
        let until = (action == Action::Degrade)
            .then(|| self.heal_after(cand, t0).map(|m| m.3))
            .flatten();
        Some(self.series.first_window(k, t0, until, |share| {
            if below {
                share < fraction * fair
            } else {
                share >= fraction * fair
            }
        }))
    }
}

/// Mean, median, 99th and 99.9th percentiles, ms.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Summary {
    /// Mean.
    pub mean: f64,
    /// Median.
    pub p50: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p999: f64,
}

pub(crate) fn summarize(values: &mut [f64]) -> Summary {
    if values.is_empty() {
        return Summary::default();
    }
    values.sort_by(f64::total_cmp);
    let q = |p: f64| values[((values.len() - 1) as f64 * p).round() as usize];
    Summary {
        mean: values.iter().sum::<f64>() / values.len() as f64,
        p50: q(0.5),
        p99: q(0.99),
        p999: q(0.999),
    }
}

/// One policy's figures, means over seeds. The field names are the JSON contract.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PolicyReport {
    /// The policy name as given.
    pub policy: String,
    /// Requests per run.
    pub requests: f64,
    /// Requests that ended without a success, per run.
    pub errors: f64,
    /// errors / requests.
    pub error_rate: f64,
    /// 1 - error_rate.
    pub success_rate: f64,
    /// Rounds in which the policy could not choose although a candidate was free.
    pub stalls: f64,
    /// Decisions (attempts granted) per run.
    pub decisions: f64,
    /// Candidate id -> fraction of attempts.
    pub share: BTreeMap<String, f64>,
    /// Per request, arrival to its end (success or final failure), ms.
    pub latency_ms: Summary,
    /// Per successful request, arrival to the first byte of its successful attempt, ms.
    pub ttfb_ms: Summary,
    /// Attempts per request.
    pub attempts_per_request: f64,
    /// Degrade -> the degraded candidate's 1 s share first falls below 20% of its fair share.
    pub detection_s: Option<f64>,
    /// Heal -> its 1 s share first reaches 80% of its fair share.
    pub recovery_s: Option<f64>,
    /// Requests that succeeded with their first byte within the caller timeout
    /// (`workload.timeout_ms`; timeouts count as failures) over all requests.
    pub success_within_timeout: f64,
    /// Requests that ended with an `overload` failure (their last attempt refused) over all
    /// requests.
    pub overload_rate: f64,
    /// Successful requests per virtual second, from the start of the run to the end of its
    /// last request.
    pub goodput_per_s: f64,
    /// The time-weighted mean of the attempts started in the trailing second, read at every
    /// attempt's start and end, as Vector's adaptive-concurrency tests measure their `rate`.
    pub rate_trailing_1s: f64,
    /// Candidate id -> the time-weighted mean of the concurrency limit the policy kept for it
    /// (`None`: it never had one); empty (absent from the JSON) for a policy without limits.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub limit_mean: BTreeMap<String, Option<f64>>,
    /// Every degraded candidate: detection and recovery against its own share before.
    pub degraded: Vec<Degraded>,
    /// Per 1 s bucket: each tracked candidate's share of attempts and the error rate.
    pub series: SeriesReport,
    /// Decisions per wall-clock second of the run (engine included), one core per run.
    pub decisions_per_s: f64,
    /// Requests a policy left waiting forever (counted in errors).
    pub stuck: f64,
    /// Virtual seconds the run lasted: from 0 to the end of its last request (0 without one);
    /// events left after it (deadlines of requests already answered, timeline events, ticks)
    /// do not stretch it.
    pub virtual_s: f64,
    /// Per live A/B arm of the coordinator's config, in config order; empty without arms.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub arms: Vec<ArmReport>,
}

/// Detection and recovery of one degraded candidate, means over seeds (`None`: not in
/// every seed).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Degraded {
    /// The candidate id.
    pub candidate: String,
    /// Its first `degrade`, virtual seconds.
    pub degraded_at_s: f64,
    /// Its 1 s share over the 5 s before that (its own normal share).
    pub share_before: Option<f64>,
    /// Degrade -> its 1 s share first falls below 20% of `share_before`.
    pub detection_s: Option<f64>,
    /// Its first `heal` after the degrade, virtual seconds.
    pub healed_at_s: Option<f64>,
    /// Heal -> its 1 s share first reaches 80% of `share_before`.
    pub recovery_s: Option<f64>,
}

/// What `--plot` draws, per policy: 1 s buckets summed over seeds.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct SeriesReport {
    /// Bucket width, seconds.
    pub bucket_s: f64,
    /// Start of each bucket, virtual seconds.
    pub t_s: Vec<f64>,
    /// Attempts started in each bucket (all seeds).
    pub attempts: Vec<u64>,
    /// Requests finished in each bucket (all seeds).
    pub requests: Vec<u64>,
    /// Failed over finished requests per bucket (`null`: none finished).
    pub error_rate: Vec<Option<f64>>,
    /// Candidate id -> its share of each bucket's attempts (`null`: no attempt). Every
    /// candidate in scenarios of up to 32, else the ones the timeline names.
    pub share: BTreeMap<String, Vec<Option<f64>>>,
    /// Candidate id -> the time-weighted mean of its concurrency limit in each bucket, over
    /// the seeds (`null`: no limit then); the same candidates as `share`. Absent for a policy
    /// without limits.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub limit: BTreeMap<String, Vec<Option<f64>>>,
}

/// One arm's figures: the policy's figures over the requests whose first attempt that arm
/// granted, means over seeds.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ArmReport {
    /// The arm's name in the config.
    pub arm: String,
    /// The arm's requests per run.
    pub requests: f64,
    /// Of them, requests that ended without a success, per run.
    pub errors: f64,
    /// errors / requests.
    pub error_rate: f64,
    /// 1 - error_rate.
    pub success_rate: f64,
    /// Candidate id -> fraction of the arm's attempts.
    pub share: BTreeMap<String, f64>,
    /// Per request, arrival to its end, ms.
    pub latency_ms: Summary,
    /// Per successful request, arrival to the first byte of its successful attempt, ms.
    pub ttfb_ms: Summary,
    /// Attempts per request.
    pub attempts_per_request: f64,
}

/// The figures an arm reports out of a policy's (the aggregation is the same).
impl From<&PolicyReport> for ArmReport {
    fn from(p: &PolicyReport) -> Self {
        ArmReport {
            arm: p.policy.clone(),
            requests: p.requests,
            errors: p.errors,
            error_rate: p.error_rate,
            success_rate: p.success_rate,
            share: p.share.clone(),
            latency_ms: p.latency_ms,
            ttfb_ms: p.ttfb_ms,
            attempts_per_request: p.attempts_per_request,
        }
    }
}

/// The seeds of a run: a list, or `count` consecutive seeds from `first` (kept as a range so
/// that a million seeds take no memory). Serialised as the list either way.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Seeds {
    /// These seeds, in order.
    List(Vec<u64>),
    /// `first`, `first + 1`, ... (`count` seeds, wrapping at `u64::MAX`).
    Range {
        /// The first seed.
        first: u64,
        /// How many.
        count: u64,
    },
}

impl Seeds {
    /// How many seeds.
    pub fn len(&self) -> u64 {
        match self {
            Seeds::List(v) => v.len() as u64,
            Seeds::Range { count, .. } => *count,
        }
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The `i`-th seed (`i < len()`).
    pub fn get(&self, i: u64) -> Option<u64> {
        match self {
            Seeds::List(v) => usize::try_from(i).ok().and_then(|i| v.get(i).copied()),
            Seeds::Range { first, count } => (i < *count).then(|| first.wrapping_add(i)),
        }
    }

    /// The seeds in order.
    pub fn iter(&self) -> impl Iterator<Item = u64> + '_ {
        (0..self.len()).filter_map(|i| self.get(i))
    }
}

impl Serialize for Seeds {
    fn serialize<S: serde::Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        ser.collect_seq(self.iter())
    }
}

/// The whole report of `selcoord simulate`.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// Scenario name.
    pub scenario: String,
    /// The seeds run (each policy ran once per seed).
    pub seeds: Seeds,
    /// One entry per policy, in the order asked.
    pub policies: Vec<PolicyReport>,
    /// Candidate ids in scenario order.
    #[serde(skip)]
    pub candidates: Vec<String>,
    #[serde(skip)]
    pub(crate) series: Vec<Series>,
    /// Whether the scenario has a degrade or heal (detection and recovery apply).
    #[serde(skip)]
    pub timeline: bool,
}

impl Report {
    /// The side-by-side table.
    pub fn table(&self) -> String {
        let mut out = String::new();
        let n = self.seeds.len();
        let seeds = match (self.seeds.get(0), self.seeds.get(n.saturating_sub(1))) {
            (Some(a), Some(b)) if a != b => format!("{n} seeds ({a}..={b})"),
            (Some(a), _) => format!("seed {a}"),
            _ => String::new(),
        };
        let _ = writeln!(
            out,
            "scenario {}: {} candidate{}, {seeds}{}",
            self.scenario,
            self.candidates.len(),
            if self.candidates.len() == 1 { "" } else { "s" },
            if self.seeds.len() > 1 {
                ", means over seeds"
            } else {
                ""
            }
        );
        let shown: Vec<&String> = if self.candidates.len() <= 4 {
            self.candidates.iter().collect()
        } else {
            Vec::new()
        };
        let mut head = format!(
            "{:<22} {:>8} {:>8} {:>7}",
            "policy", "requests", "err rate", "att/req"
        );
        for id in &shown {
            let _ = write!(head, " {:>9}", truncate(id, 9));
        }
        let _ = write!(
            head,
            " {:>9} {:>9} {:>9} {:>9} {:>7}",
            "lat mean", "lat p99", "ttfb mean", "ttfb p99", "stalls"
        );
        // Goodput and limits matter where a policy keeps concurrency limits.
        let limits = self.policies.iter().any(|p| !p.limit_mean.is_empty());
        if limits {
            let _ = write!(head, " {:>9} {:>7}", "goodput/s", "limits");
        }
        if self.timeline {
            let _ = write!(head, " {:>8} {:>8}", "detect", "recover");
        }
        let _ = write!(head, " {:>10}", "decisions/s");
        let _ = writeln!(out, "{head}");
        for p in &self.policies {
            let mut row = figures_row(&short_label(&p.policy), &p.into(), &shown);
            let _ = write!(row, " {:>7.1}", p.stalls);
            if limits {
                let _ = write!(row, " {:>9.1}", p.goodput_per_s);
                if p.limit_mean.is_empty() {
                    let _ = write!(row, " {:>7}", "-");
                } else {
                    let sum: f64 = p.limit_mean.values().flatten().sum();
                    let _ = write!(row, " {:>7.1}", sum);
                }
            }
            if self.timeline {
                let f = |x: Option<f64>| x.map_or("never".to_string(), |v| format!("{v:.1}s"));
                // Without a heal there is nothing to recover from: "-", not "never".
                let healed = p.degraded.iter().any(|d| d.healed_at_s.is_some());
                let recovery = if healed || p.recovery_s.is_some() {
                    f(p.recovery_s)
                } else {
                    "-".to_string()
                };
                // Without a degrade of a candidate that had traffic before it (none, or all
                // after the workload) there is nothing to detect: "-", not "never".
                let degraded = p.degraded.iter().any(|d| d.share_before.is_some());
                let detection = if degraded || p.detection_s.is_some() {
                    f(p.detection_s)
                } else {
                    "-".to_string()
                };
                let _ = write!(row, " {:>8} {:>8}", detection, recovery);
            }
            let _ = write!(row, " {:>10.0}", p.decisions_per_s);
            let _ = writeln!(out, "{row}");
            for a in &p.arms {
                let label = format!("  [arm {}]", a.arm);
                let _ = writeln!(out, "{}", figures_row(&label, a, &shown));
            }
        }
        if !shown.is_empty() {
            let _ = writeln!(out, "(candidate columns: share of attempts)");
        }
        if limits {
            let _ = writeln!(
                out,
                "(goodput/s: successes per second; limits: the candidates' mean concurrency \
                 limits, summed)"
            );
        }
        out
    }

    /// The JSON contract (`docs/simulate-json.md`).
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }

    /// Writes the JSON (`to_json`'s text) to `w` as it is produced, without building it in
    /// memory first.
    pub fn write_json<W: std::io::Write>(&self, w: W) -> std::io::Result<()> {
        serde_json::to_writer_pretty(w, self).map_err(std::io::Error::other)
    }
}

/// The table columns a policy and its arms share: requests to ttfb p99.
/// A figure without a value (NaN: no request, attempt or success to take it over) is "-".
fn figures_row(label: &str, a: &ArmReport, shown: &[&String]) -> String {
    let f = |x: f64, width: usize, digits: usize| {
        if x.is_nan() {
            format!(" {:>width$}", "-")
        } else {
            format!(" {x:>width$.digits$}")
        }
    };
    let mut row = format!("{:<22} {:>8.0}", truncate(label, 22), a.requests);
    row += &f(a.error_rate, 8, 4);
    row += &f(a.attempts_per_request, 7, 2);
    for id in shown {
        row += &f(a.share.get(*id).copied().unwrap_or(0.0), 9, 4);
    }
    for x in [
        a.latency_ms.mean,
        a.latency_ms.p99,
        a.ttfb_ms.mean,
        a.ttfb_ms.p99,
    ] {
        row += &f(x, 9, 1);
    }
    row
}

/// `coordinator:<path>` shows the file's stem: several config files under one directory would
/// otherwise truncate to the same text.
fn short_label(label: &str) -> std::borrow::Cow<'_, str> {
    match label.strip_prefix("coordinator:") {
        Some(spec) if spec.contains(['/', '\\']) || spec.ends_with(".toml") => {
            let stem = std::path::Path::new(spec)
                .file_stem()
                .map_or(spec.into(), |s| s.to_string_lossy());
            format!("coordinator:{stem}").into()
        }
        _ => label.into(),
    }
}

fn truncate(s: &str, n: usize) -> &str {
    match s.char_indices().nth(n) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

impl RunStats {
    /// Candidates whose traffic share is kept over time: all of them in small scenarios, else the
    /// ones the timeline names.
    pub(crate) fn tracked_candidates(sc: &Scenario, ids: &[String]) -> Vec<usize> {
        if ids.len() <= ALL_TRACKED_UP_TO {
            return (0..ids.len()).collect();
        }
        let mut out: Vec<usize> = sc
            .timeline
            .iter()
            .filter_map(|e| ids.iter().position(|x| x == e.candidate.get_ref()))
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }
}

//! Running a scenario in fleet mode and what a fleet run reports (`selcoord simulate` with a
//! `[fleet]` table or `--fleet-*` options; `docs/fleet.md`).

use std::fmt::Write as _;
use std::sync::{Arc, Mutex};

use serde::Serialize;

use super::engine::Engine;
use super::fleet::{FleetCounts, FleetPolicy, FleetShare, FleetSpec, Watch};
use super::policy::{Cand, PolicySpec};
use super::report::RunStats;
use super::scenario::{Action, Scenario};
use super::suite::Quantiles;

/// A client has detected the degrade once its probability of drawing the candidate is below
/// this fraction of its own probability over the 5 s before (the single-coordinator detection
/// uses the same 20 %).
const DETECTED: f64 = 0.2;

/// Seconds before the degrade that make a client's normal probability.
const BEFORE_S: f64 = 5.0;

/// 1 s buckets with fewer attempts than this are left out of the busiest-share figure (a
/// handful of attempts says nothing about herding).
const MIN_BUCKET_ATTEMPTS: u64 = 20;

/// The recovery target (`docs/tuning.md`): back to 80 % of its share within 10 s of the heal.
pub const RECOVERY_TARGET_S: f64 = 10.0;

/// Figures of a fleet run, means over seeds. The field names are the JSON contract.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FleetReport {
    /// Scenario name.
    pub scenario: String,
    /// The fleet as run (after command-line overrides).
    pub fleet: FleetSpec,
    /// Seeds run.
    pub seeds: Vec<u64>,
    /// Mean ttfb of successful requests over the whole fleet, ms.
    pub ttfb_ms: f64,
    /// Mean ttfb of the `oracle` policy on the same seeds, ms.
    pub oracle_ttfb_ms: f64,
    /// `ttfb_ms / oracle_ttfb_ms`.
    pub ttfb_vs_oracle: f64,
    /// The worst client's mean ttfb over the oracle's, mean over seeds.
    pub worst_client_ttfb_vs_oracle: f64,
    /// Requests that ended without a success, over all requests.
    pub error_rate: f64,
    /// Digests published per run.
    pub digests: f64,
    /// Copies lost on the way, per run.
    pub copies_lost: f64,
    /// Copies the receiver turned away whole, per run.
    pub copies_rejected: f64,
    /// Entries merged, per run.
    pub entries_applied: f64,
    /// Entries turned away, per run.
    pub entries_rejected: f64,
    /// Detection, recovery and herding, for a scenario that degrades a candidate.
    pub degrade: Option<FleetDegrade>,
}

/// Detection per client, recovery and herding around the timeline's first degrade.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FleetDegrade {
    /// The degraded candidate.
    pub candidate: String,
    /// When it degraded, seconds.
    pub degraded_at_s: f64,
    /// When it healed, seconds.
    pub healed_at_s: Option<f64>,
    /// Clients measured per run (those that drew it with some probability before).
    pub clients: f64,
    /// Of them, the share whose probability of drawing it fell below 20 % of their own
    /// before within 2 digest periods of the degrade (read at every call that moved it).
    pub within_2_periods: f64,
    /// Clients per run that sent nothing to it from the degrade until they stopped drawing it,
    /// or until 2 digest periods had passed if they had not by then: within the time the
    /// target allows they learned only from the others.
    pub quiet_clients: f64,
    /// Of those, the share that detected within 2 digest periods.
    pub quiet_within_2_periods: f64,
    /// Of the clients that detected, the share whose probability came back to 20 % of their
    /// own before or more at some time between their detection and the heal: they drew it
    /// again while it was still degraded.
    pub relapsed: f64,
    /// Mean detection over clients and seeds, seconds (`None`: some client never detected, or
    /// none was measured).
    pub detection_s: Option<f64>,
    /// The slowest client's detection, worst over seeds, seconds.
    pub detection_s_max: Option<f64>,
    /// Heal -> the fleet's 1 s share of it first reaches 80 % of its share before the degrade,
    /// mean over seeds (`None`: not in every seed).
    pub recovery_s: Option<f64>,
    /// The same, worst over seeds.
    pub recovery_s_max: Option<f64>,
    /// Recovery minus the oracle's on the same seed, s: median and 95th percentile over the
    /// seeds where both recovered (the Step 10 target: p50 <= 3 s, p95 <= 10 s).
    pub recovery_excess_s: Quantiles,
    /// The busiest candidate's share of a 1 s bucket, the highest over the run, mean over
    /// seeds (buckets of at least 20 attempts).
    pub busiest_share: f64,
    /// The same with one coordinator taking all the traffic.
    pub single_busiest_share: f64,
    /// `busiest_share / single_busiest_share`.
    pub herding_ratio: f64,
    /// The busiest share over the buckets from the degrade on only (before it the best
    /// candidate may take whole seconds of traffic in both runs), mean over seeds.
    pub busiest_share_after: f64,
    /// The same with one coordinator taking all the traffic.
    pub single_busiest_share_after: f64,
    /// `busiest_share_after / single_busiest_share_after`.
    pub herding_ratio_after: f64,
}

/// One seed's figures.
#[derive(Clone, Debug, Default)]
struct SeedFigures {
    ttfb_ms: f64,
    oracle_ttfb_ms: f64,
    worst_client_ttfb_ms: f64,
    error_rate: f64,
    counts: FleetCounts,
    degrade: Option<SeedDegrade>,
}

#[derive(Clone, Debug, Default)]
struct SeedDegrade {
    clients: usize,
    within: usize,
    quiet: usize,
    quiet_within: usize,
    detected: usize,
    relapsed: usize,
    /// Per measured client: its detection, seconds (`None`: never).
    detections: Vec<Option<f64>>,
    recovery_s: Option<f64>,
    oracle_recovery_s: Option<f64>,
    busiest: f64,
    single_busiest: f64,
    busiest_after: f64,
    single_busiest_after: f64,
}

/// The timeline's first degrade: (candidate index, id, at, heal).
fn first_degrade(sc: &Scenario) -> Option<(Cand, String, f64, Option<f64>)> {
    let ids: Vec<String> = sc.expanded().into_iter().map(|(id, _)| id).collect();
    let ev = sc.timeline.iter().find(|e| e.action == Action::Degrade)?;
    let id = ev.candidate.get_ref().clone();
    let c = ids.iter().position(|x| *x == id)?;
    let heal = sc
        .timeline
        .iter()
        .filter(|e| e.action == Action::Heal && *e.candidate.get_ref() == id && e.at_s >= ev.at_s)
        .map(|e| e.at_s)
        .next();
    Some((c as Cand, id, ev.at_s, heal))
}

/// Runs the fleet once: its run statistics, counts and samples.
fn run_fleet(
    sc: &Scenario,
    spec: &FleetSpec,
    seed: u64,
    watch: Option<(Cand, f64, f64)>,
) -> Result<(RunStats, FleetCounts, Option<Watch>), String> {
    let config = sc
        .coordinator
        .as_ref()
        .map(|c| c.0.clone())
        .unwrap_or_default();
    let results = Arc::new(Mutex::new(None));
    let policy = FleetPolicy::new(&config, sc.limits, spec, seed, watch, Arc::clone(&results))?;
    let label = format!("fleet-{}", spec.share.name());
    let stats = Engine::with_policy(sc, Box::new(policy), &label, seed).run();
    let (counts, watch) = results
        .lock()
        .map_err(|_| "a fleet run panicked".to_string())?
        .take()
        .unwrap_or_default();
    Ok((stats, counts, watch))
}

fn mean(v: &[f64]) -> f64 {
    if v.is_empty() {
        0.0
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

/// The highest share one candidate took of a 1 s bucket starting at `from_s` or later
/// (buckets of at least [`MIN_BUCKET_ATTEMPTS`]); every candidate must be tracked (scenarios
/// of up to 32).
fn busiest_share(stats: &RunStats, from_s: f64) -> f64 {
    stats
        .series
        .seconds()
        .iter()
        .enumerate()
        .filter(|(i, b)| *i as f64 >= from_s - 1e-9 && b.0 >= MIN_BUCKET_ATTEMPTS)
        .map(|(_, b)| b.3.iter().copied().max().unwrap_or(0) as f64 / b.0 as f64)
        .fold(0.0, f64::max)
}

/// One measured client around the degrade.
#[derive(Clone, Copy, Debug, PartialEq)]
struct ClientDetection {
    /// Seconds from the degrade until its probability of drawing the candidate first fell
    /// below [`DETECTED`] of its own before (`None`: not before `until`).
    detection: Option<f64>,
    /// It sent nothing to the candidate from the degrade until its detection or `deadline_s`
    /// after the degrade, whichever came first.
    quiet: bool,
    /// After detecting, its probability came back to [`DETECTED`] of before or more before
    /// `until`.
    relapsed: bool,
}

/// Per-client detection, read from each client's probability at every call that moved it
/// (its normal probability from the samples of the [`BEFORE_S`] before the degrade).
fn detections(w: &Watch, until: f64, deadline_s: f64) -> Vec<ClientDetection> {
    let n = w.grants.len();
    let mut out = Vec::new();
    for k in 0..n {
        let before: Vec<f64> = w
            .times
            .iter()
            .zip(&w.probability)
            .filter(|(t, _)| **t >= w.degraded_at - BEFORE_S && **t < w.degraded_at)
            .map(|(_, p)| p[k])
            .collect();
        let p0 = mean(&before);
        if before.is_empty() || p0 <= 0.0 {
            continue;
        }
        let threshold = DETECTED * p0;
        let steps = w.steps.get(k).map_or(&[][..], Vec::as_slice);
        // The probability in force at the degrade, then every change after it.
        let at_degrade = steps
            .iter()
            .rev()
            .find(|(t, _)| *t < w.degraded_at)
            .map(|&(_, p)| (w.degraded_at, p));
        let after = steps
            .iter()
            .copied()
            .filter(|(t, _)| *t >= w.degraded_at && *t <= until);
        let mut path = at_degrade.into_iter().chain(after);
        let det = path
            .by_ref()
            .find(|&(_, p)| p < threshold)
            .map(|(t, _)| t - w.degraded_at);
        let relapsed = det.is_some() && path.any(|(_, p)| p >= threshold);
        let end = w.degraded_at + det.map_or(deadline_s, |d| d.min(deadline_s));
        let quiet = !w.grants[k].iter().any(|&t| t >= w.degraded_at && t <= end);
        out.push(ClientDetection {
            detection: det,
            quiet,
            relapsed,
        });
    }
    out
}

fn one_seed(sc: &Scenario, spec: &FleetSpec, seed: u64) -> Result<SeedFigures, String> {
    let degrade = first_degrade(sc);
    let end_s = match sc.workload.kind {
        super::scenario::LoopKind::Open => sc.workload.duration_s,
        super::scenario::LoopKind::Closed => f64::INFINITY,
    };
    let watch = degrade
        .as_ref()
        .map(|(c, _, at, heal)| (*c, *at, heal.unwrap_or(end_s)));
    let (stats, counts, watch) = run_fleet(sc, spec, seed, watch)?;
    let oracle = Engine::new(sc, &PolicySpec::Oracle, seed)?.run();
    let ttfb = |s: &RunStats| mean(&s.ttfb_ms);
    let mut fig = SeedFigures {
        ttfb_ms: ttfb(&stats),
        oracle_ttfb_ms: ttfb(&oracle),
        worst_client_ttfb_ms: stats
            .arms
            .iter()
            .filter(|a| !a.ttfb_ms.is_empty())
            .map(ttfb)
            .fold(ttfb(&stats), f64::max),
        error_rate: if stats.requests > 0 {
            stats.errors as f64 / stats.requests as f64
        } else {
            0.0
        },
        counts,
        degrade: None,
    };
    if let (Some((_, _, at, heal)), Some(w)) = (degrade, watch) {
        let until = heal.unwrap_or(end_s);
        let two = 2.0 * spec.period_s;
        let det = detections(&w, until, two);
        let within = |d: &ClientDetection| d.detection.is_some_and(|d| d <= two + 1e-9);
        let single = FleetSpec {
            clients: 1,
            ..spec.clone()
        };
        let (single_stats, ..) = run_fleet(sc, &single, seed, None)?;
        fig.degrade = Some(SeedDegrade {
            clients: det.len(),
            within: det.iter().filter(|d| within(d)).count(),
            quiet: det.iter().filter(|d| d.quiet).count(),
            quiet_within: det.iter().filter(|d| d.quiet && within(d)).count(),
            detected: det.iter().filter(|d| d.detection.is_some()).count(),
            relapsed: det.iter().filter(|d| d.relapsed).count(),
            detections: det.iter().map(|d| d.detection).collect(),
            recovery_s: stats.degradations().first().and_then(|d| d.rec),
            oracle_recovery_s: oracle.degradations().first().and_then(|d| d.rec),
            busiest: busiest_share(&stats, 0.0),
            single_busiest: busiest_share(&single_stats, 0.0),
            busiest_after: busiest_share(&stats, at),
            single_busiest_after: busiest_share(&single_stats, at),
        });
    }
    Ok(fig)
}

/// Runs the scenario in fleet mode on every seed (`threads` at a time; the figures do not
/// depend on it) and returns the means. Each seed also runs the `oracle` policy, and, when
/// the timeline degrades a candidate, one coordinator with all the traffic.
pub fn simulate_fleet(
    sc: &Scenario,
    spec: &FleetSpec,
    seeds: &[u64],
    threads: usize,
) -> Result<FleetReport, String> {
    spec.check()?;
    if seeds.is_empty() {
        return Err("nothing to run: no seed".into());
    }
    let threads = threads.clamp(1, seeds.len());
    let results: Vec<Mutex<Option<Result<SeedFigures, String>>>> =
        seeds.iter().map(|_| Mutex::new(None)).collect();
    let next = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if i >= seeds.len() {
                    break;
                }
                let r = one_seed(sc, spec, seeds[i]);
                if let Ok(mut slot) = results[i].lock() {
                    *slot = Some(r);
                }
            });
        }
    });
    let mut figs = Vec::new();
    for r in results {
        let r = r
            .into_inner()
            .map_err(|_| "a fleet run panicked".to_string())?
            .ok_or("a fleet run did not finish")?;
        figs.push(r?);
    }
    Ok(report(sc, spec, seeds, &figs))
}

fn report(sc: &Scenario, spec: &FleetSpec, seeds: &[u64], figs: &[SeedFigures]) -> FleetReport {
    let m = |f: &dyn Fn(&SeedFigures) -> f64| mean(&figs.iter().map(f).collect::<Vec<_>>());
    let ttfb = m(&|f| f.ttfb_ms);
    let oracle = m(&|f| f.oracle_ttfb_ms);
    let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { 0.0 };
    let degrade = first_degrade(sc).and_then(|(_, id, at, heal)| {
        let ds: Vec<&SeedDegrade> = figs.iter().filter_map(|f| f.degrade.as_ref()).collect();
        if ds.len() != figs.len() {
            return None;
        }
        let share = |a: usize, b: usize| if b > 0 { a as f64 / b as f64 } else { 0.0 };
        let all: Vec<Option<f64>> = ds.iter().flat_map(|d| d.detections.clone()).collect();
        // No client measured (the degrade came after the arrivals): nothing was detected.
        let every = !all.is_empty() && all.iter().all(Option::is_some);
        let dets: Vec<f64> = all.iter().flatten().copied().collect();
        let recs: Vec<Option<f64>> = ds.iter().map(|d| d.recovery_s).collect();
        let recovered = recs.iter().all(Option::is_some);
        let recs: Vec<f64> = recs.into_iter().flatten().collect();
        let busiest = mean(&ds.iter().map(|d| d.busiest).collect::<Vec<_>>());
        let single = mean(&ds.iter().map(|d| d.single_busiest).collect::<Vec<_>>());
        let busiest_after = mean(&ds.iter().map(|d| d.busiest_after).collect::<Vec<_>>());
        let single_after = mean(
            &ds.iter()
                .map(|d| d.single_busiest_after)
                .collect::<Vec<_>>(),
        );
        let excess: Vec<f64> = ds
            .iter()
            .filter_map(|d| Some(d.recovery_s? - d.oracle_recovery_s?))
            .collect();
        Some(FleetDegrade {
            candidate: id,
            degraded_at_s: at,
            healed_at_s: heal,
            clients: mean(&ds.iter().map(|d| d.clients as f64).collect::<Vec<_>>()),
            within_2_periods: share(
                ds.iter().map(|d| d.within).sum(),
                ds.iter().map(|d| d.clients).sum(),
            ),
            quiet_clients: mean(&ds.iter().map(|d| d.quiet as f64).collect::<Vec<_>>()),
            quiet_within_2_periods: share(
                ds.iter().map(|d| d.quiet_within).sum(),
                ds.iter().map(|d| d.quiet).sum(),
            ),
            relapsed: share(
                ds.iter().map(|d| d.relapsed).sum(),
                ds.iter().map(|d| d.detected).sum(),
            ),
            detection_s: every.then(|| mean(&dets)),
            detection_s_max: every.then(|| dets.iter().copied().fold(0.0, f64::max)),
            recovery_s: recovered.then(|| mean(&recs)),
            recovery_s_max: recovered.then(|| recs.iter().copied().fold(0.0, f64::max)),
            recovery_excess_s: Quantiles::of(excess),
            busiest_share: busiest,
            single_busiest_share: single,
            herding_ratio: ratio(busiest, single),
            busiest_share_after: busiest_after,
            single_busiest_share_after: single_after,
            herding_ratio_after: ratio(busiest_after, single_after),
        })
    });
    FleetReport {
        scenario: sc.name.clone(),
        fleet: spec.clone(),
        seeds: seeds.to_vec(),
        ttfb_ms: ttfb,
        oracle_ttfb_ms: oracle,
        ttfb_vs_oracle: ratio(ttfb, oracle),
        worst_client_ttfb_vs_oracle: m(&|f| ratio(f.worst_client_ttfb_ms, f.oracle_ttfb_ms)),
        error_rate: m(&|f| f.error_rate),
        digests: m(&|f| f.counts.digests as f64),
        copies_lost: m(&|f| f.counts.lost as f64),
        copies_rejected: m(&|f| f.counts.rejected as f64),
        entries_applied: m(&|f| f.counts.entries_applied as f64),
        entries_rejected: m(&|f| f.counts.entries_rejected as f64),
        degrade,
    }
}

impl FleetReport {
    /// The report as a short table.
    pub fn table(&self) -> String {
        let mut out = String::new();
        let f = &self.fleet;
        let _ = writeln!(
            out,
            "scenario {}: fleet of {} coordinator{}, share {}, digest every {} s, delay {} ms (+{} ms jitter), loss {}; {} seed{}, means over seeds",
            self.scenario,
            f.clients,
            if f.clients == 1 { "" } else { "s" },
            f.share.name(),
            f.period_s,
            f.delay_ms,
            f.jitter_ms,
            f.loss,
            self.seeds.len(),
            if self.seeds.len() == 1 { "" } else { "s" }
        );
        let _ = writeln!(
            out,
            "ttfb mean {:.1} ms, oracle {:.1} ms: {:.3} x oracle (worst client {:.3} x); error rate {:.4}",
            self.ttfb_ms,
            self.oracle_ttfb_ms,
            self.ttfb_vs_oracle,
            self.worst_client_ttfb_vs_oracle,
            self.error_rate
        );
        if f.share == FleetShare::Digest {
            let _ = writeln!(
                out,
                "digests {:.0} per run ({:.0} copies lost, {:.0} turned away), entries merged {:.0}, turned away {:.0}",
                self.digests,
                self.copies_lost,
                self.copies_rejected,
                self.entries_applied,
                self.entries_rejected
            );
        }
        if let Some(d) = &self.degrade {
            let s = |x: Option<f64>| x.map_or("never".to_string(), |v| format!("{v:.2} s"));
            let _ = writeln!(
                out,
                "degrade of {} at {} s: {:.1} clients measured, {:.1}% stopped drawing it within 2 periods; {:.1} quiet clients (no attempt on it before stopping or 2 periods), {:.1}% of them within 2 periods; detection mean {}, slowest {}; {:.1}% drew it again before the heal",
                d.candidate,
                d.degraded_at_s,
                d.clients,
                100.0 * d.within_2_periods,
                d.quiet_clients,
                100.0 * d.quiet_within_2_periods,
                s(d.detection_s),
                s(d.detection_s_max),
                100.0 * d.relapsed
            );
            let q = |x: Option<f64>| x.map_or("none".to_string(), |v| format!("{v:.2} s"));
            // Without a heal there is nothing to recover from.
            let s = |x: Option<f64>| match (x, d.healed_at_s) {
                (None, None) => "- (no heal)".to_string(),
                _ => s(x),
            };
            let _ = writeln!(
                out,
                "heal: fleet recovery mean {}, worst {} (target {RECOVERY_TARGET_S} s), excess over the oracle p50 {}, p95 {}; busiest 1 s share {:.3} vs {:.3} with one coordinator: {:.3} x ({:.3} vs {:.3} from the degrade on: {:.3} x)",
                s(d.recovery_s),
                s(d.recovery_s_max),
                q(d.recovery_excess_s.p50),
                q(d.recovery_excess_s.p95),
                d.busiest_share,
                d.single_busiest_share,
                d.herding_ratio,
                d.busiest_share_after,
                d.single_busiest_share_after,
                d.herding_ratio_after
            );
        }
        out
    }

    /// The JSON form.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Four clients drawing the candidate at 0.9 before a degrade at 10 s, each with its own
    /// path after it.
    fn watch() -> Watch {
        let times: Vec<f64> = (50..100).map(|i| f64::from(i) * 0.1).collect();
        let probability = times.iter().map(|_| vec![0.9; 4]).collect();
        let before = (5.0, 0.9);
        Watch {
            degraded_at: 10.0,
            times,
            probability,
            grants: vec![vec![], vec![12.3], vec![], vec![10.5]],
            steps: vec![
                // Stops at 1.5 s and stays away.
                vec![before, (11.5, 0.05)],
                // Stops at 2.5 s, having sent to it only after the 2 s the target allows.
                vec![before, (12.5, 0.1)],
                // Stops at 1 s, draws it again at 3 s.
                vec![before, (11.0, 0.1), (13.0, 0.5), (14.0, 0.1)],
                // Sent to it at 0.5 s, stopped at 1 s.
                vec![before, (11.0, 0.1)],
            ],
            ..Watch::default()
        }
    }

    #[test]
    fn quiet_and_within_are_read_as_the_target_words_them() {
        let d = detections(&watch(), 30.0, 2.0);
        let got: Vec<(Option<f64>, bool, bool)> = d
            .iter()
            .map(|c| {
                (
                    c.detection.map(|x| (x * 10.0).round() / 10.0),
                    c.quiet,
                    c.relapsed,
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                (Some(1.5), true, false),
                // Quiet: nothing sent within the 2 s, and it missed them.
                (Some(2.5), true, false),
                (Some(1.0), true, true),
                (Some(1.0), false, false),
            ]
        );
        // A client that never drew it is not measured.
        let mut w = watch();
        for row in &mut w.probability {
            row[0] = 0.0;
        }
        assert_eq!(detections(&w, 30.0, 2.0).len(), 3);
    }

    /// The normal probability is the mean of the 5 s before the degrade (0.5 here, not the
    /// 0.1 before that); detection is a fall below 20 % of it before `until`, a relapse a
    /// return to 20 % or more.
    #[test]
    fn detection_reads_the_five_seconds_before_and_twenty_percent_of_them() {
        let times: Vec<f64> = (0..100).map(|i| f64::from(i) * 0.1).collect();
        let probability = times
            .iter()
            .map(|&t| vec![if t < 5.0 { 0.1 } else { 0.5 }; 4])
            .collect();
        let before = (5.0, 0.5);
        let w = Watch {
            degraded_at: 10.0,
            times,
            probability,
            grants: vec![Vec::new(); 4],
            steps: vec![
                vec![before, (11.0, 0.08)],
                // 30 % of before: not detected.
                vec![before, (11.0, 0.15)],
                vec![before, (11.0, 0.05), (12.0, 0.1)],
                // Only after `until`.
                vec![before, (31.0, 0.05)],
            ],
            ..Watch::default()
        };
        let got: Vec<(Option<f64>, bool)> = detections(&w, 30.0, 2.0)
            .iter()
            .map(|c| (c.detection, c.relapsed))
            .collect();
        assert_eq!(
            got,
            [
                (Some(1.0), false),
                (None, false),
                (Some(1.0), true),
                (None, false)
            ]
        );
    }

    /// Clients and quiet clients are means per run; the shares are over every seed's clients,
    /// quiet clients and detecting clients; the recovery excess is the fleet's minus the
    /// oracle's; one client that never detects leaves no mean detection.
    #[test]
    fn the_report_means_and_shares_are_over_the_right_counts() {
        let text = "name = \"r\"\n[workload]\nloop = \"open\"\nrate_per_s = 1.0\nduration_s = 10.0\n\
            [[candidates]]\nid = \"a\"\nsuccess = 1.0\nttfb_ms = 10.0\n[[candidates]]\nid = \"b\"\nsuccess = 1.0\nttfb_ms = 10.0\n\
            [[timeline]]\nat_s = 2.0\naction = \"degrade\"\ncandidate = \"a\"\nsuccess = 0.0\n\
            [[timeline]]\nat_s = 6.0\naction = \"heal\"\ncandidate = \"a\"\n";
        let sc = Scenario::parse(text, "r").unwrap();
        let fig = |d: SeedDegrade| SeedFigures {
            degrade: Some(d),
            ..SeedFigures::default()
        };
        let a = SeedDegrade {
            clients: 4,
            within: 3,
            quiet: 2,
            quiet_within: 2,
            detected: 4,
            relapsed: 1,
            detections: vec![Some(1.0), Some(1.0), Some(1.0), Some(3.0)],
            recovery_s: Some(5.0),
            oracle_recovery_s: Some(2.0),
            ..SeedDegrade::default()
        };
        let b = SeedDegrade {
            clients: 2,
            within: 1,
            quiet: 0,
            quiet_within: 0,
            detected: 1,
            relapsed: 1,
            detections: vec![Some(1.0), None],
            recovery_s: Some(4.0),
            oracle_recovery_s: Some(3.0),
            ..SeedDegrade::default()
        };
        let spec = FleetSpec::new(4);
        let r = report(&sc, &spec, &[1, 2], &[fig(a.clone()), fig(b)]);
        let d = r.degrade.unwrap();
        assert_eq!((d.degraded_at_s, d.healed_at_s), (2.0, Some(6.0)));
        assert_eq!(d.clients, 3.0);
        assert_eq!(d.within_2_periods, 4.0 / 6.0);
        assert_eq!(d.quiet_clients, 1.0);
        assert_eq!(d.quiet_within_2_periods, 1.0);
        assert_eq!(d.relapsed, 2.0 / 5.0);
        assert_eq!((d.detection_s, d.detection_s_max), (None, None));
        assert_eq!((d.recovery_s, d.recovery_s_max), (Some(4.5), Some(5.0)));
        assert_eq!(d.recovery_excess_s.p95, Some(3.0));
        let r = report(&sc, &spec, &[1], &[fig(a)]);
        let d = r.degrade.unwrap();
        assert_eq!((d.detection_s, d.detection_s_max), (Some(1.5), Some(3.0)));
        assert_eq!(d.recovery_excess_s.p50, Some(3.0));
    }
}

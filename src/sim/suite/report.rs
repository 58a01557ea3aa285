//! The suite's figures: each policy against the oracle on the same scenario, then p50 and p95
//! over a family's scenarios. The JSON field names are a contract (`docs/simulate-json.md`).

use std::fmt::Write as _;

use serde::Serialize;

use super::paired::{self, PairedSummary};
use super::worlds::{self, World, WorldReport};
use crate::sim::{Degraded, PolicyReport};

/// One policy's figures on one scenario (one run).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct InstanceFigures {
    /// The policy's label.
    pub policy: String,
    /// Degrade until the share of every followed candidate this policy used before falls
    /// below 20% of its own share before (the slowest of them, from `simulate --json`'s
    /// `degraded` list); `None` if one never did or no followed candidate degraded; 0 if the
    /// policy used none of them. The followed candidates are the degraded ones the oracle
    /// sent traffic to before their degrade (every degraded one without an oracle).
    pub detection_s: Option<f64>,
    /// Heal until the share of every followed candidate is back at 80% of its own share
    /// before (the slowest); `None` if one never was or no followed candidate healed; 0 if
    /// the policy used none.
    pub recovery_s: Option<f64>,
    /// As in `simulate --json`'s `detection_s`: the first degraded candidate against its fair
    /// share (1 / candidates present). Reported, not summarized: a policy that rightly kept a
    /// slow candidate at a small share never "recovers" to a fair share.
    pub detection_fair_s: Option<f64>,
    /// As in `simulate --json`'s `recovery_s`: the first healed candidate against its fair
    /// share. Reported, not summarized.
    pub recovery_fair_s: Option<f64>,
    /// Requests that ended without a success / requests.
    pub error_rate: f64,
    /// Mean first byte of the successful requests, ms (0 without any).
    pub ttfb_mean_ms: f64,
    /// Virtual seconds the run lasted.
    pub virtual_s: f64,
}

impl InstanceFigures {
    /// The figures of `r`, a one-seed report, under the name `label`. `oracle` is the oracle's
    /// report on the same scenario and seed: detection and recovery follow the degraded
    /// candidates it used (a candidate the oracle never sends to has no return to measure
    /// against); `None` follows every degraded candidate.
    pub fn new(label: &str, r: &PolicyReport, oracle: Option<&PolicyReport>) -> Self {
        let followed = |d: &Degraded| {
            oracle.is_none_or(|o| {
                o.degraded
                    .iter()
                    .any(|od| od.candidate == d.candidate && od.share_before.unwrap_or(0.0) > 0.0)
            })
        };
        InstanceFigures {
            policy: label.to_string(),
            detection_s: slowest(
                &r.degraded,
                followed,
                |d| Some(d.degraded_at_s),
                |d| d.detection_s,
            ),
            recovery_s: slowest(&r.degraded, followed, |d| d.healed_at_s, |d| d.recovery_s),
            detection_fair_s: r.detection_s,
            recovery_fair_s: r.recovery_s,
            error_rate: r.error_rate,
            ttfb_mean_ms: r.ttfb_ms.mean,
            virtual_s: r.virtual_s,
        }
    }
}

/// The slowest `figure` over the `followed` degraded candidates whose `event` happened and
/// that had a share before their degrade; `None` if one of them never got there or no
/// followed `event` happened, 0 if the policy had sent nothing to any of them (nothing to
/// move away from or back to).
fn slowest(
    degraded: &[Degraded],
    followed: impl Fn(&Degraded) -> bool,
    event: impl Fn(&Degraded) -> Option<f64>,
    figure: impl Fn(&Degraded) -> Option<f64>,
) -> Option<f64> {
    let mut out = None;
    for d in degraded
        .iter()
        .filter(|d| followed(d) && event(d).is_some())
    {
        let prev: f64 = out.unwrap_or(0.0);
        if d.share_before.unwrap_or(0.0) <= 0.0 {
            out = Some(prev);
            continue;
        }
        out = Some(prev.max(figure(d)?));
    }
    out
}

/// One generated scenario and what every policy did on it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Instance {
    /// Its family.
    pub family: String,
    /// The scenario's name (`<family>-<index>`).
    pub scenario: String,
    /// What was generated, in a line.
    pub description: String,
    /// The seed it ran with.
    pub seed: u64,
    /// When the degrade that detection follows happened, if any.
    pub degrade_at_s: Option<f64>,
    /// When the heal that recovery follows happened, if any.
    pub heal_at_s: Option<f64>,
    /// The kind of world it is: whether its fleet queues and its requests retry.
    pub world: World,
    /// One entry per policy, the oracle included.
    pub policies: Vec<InstanceFigures>,
}

/// The median and 95th percentile over a family's scenarios (nearest rank); `None` when no
/// scenario gave a figure.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Quantiles {
    /// Median.
    pub p50: Option<f64>,
    /// 95th percentile.
    pub p95: Option<f64>,
}

impl Quantiles {
    pub(crate) fn of(mut v: Vec<f64>) -> Self {
        if v.is_empty() {
            return Quantiles::default();
        }
        v.sort_by(f64::total_cmp);
        let q = |p: f64| Some(v[((v.len() - 1) as f64 * p).round() as usize]);
        Quantiles {
            p50: q(0.5),
            p95: q(0.95),
        }
    }
}

/// One policy over one family, against the oracle.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PolicySummary {
    /// The policy's label.
    pub policy: String,
    /// Recovery minus the oracle's, s, over the scenarios where the oracle recovered; a run
    /// that never recovered counts with the time from the heal to its end (a lower bound).
    pub recovery_excess_s: Quantiles,
    /// Detection minus the oracle's, s, over the scenarios where the oracle detected; a run
    /// that never detected counts with the time from the degrade to its end.
    pub detection_excess_s: Quantiles,
    /// Error rate minus the oracle's.
    pub error_excess: Quantiles,
    /// Mean first byte over the oracle's (scenarios where both had a success).
    pub ttfb_ratio: Quantiles,
    /// Scenarios where the oracle recovered and this policy never did.
    pub never_recovered: usize,
    /// Scenarios where the oracle detected and this policy never did.
    pub never_detected: usize,
    /// Scenarios that entered `recovery_excess_s`.
    pub recovery_scenarios: usize,
    /// Scenarios that entered `detection_excess_s`.
    pub detection_scenarios: usize,
}

/// One family's summary.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FamilyReport {
    /// The family's name.
    pub family: String,
    /// Scenarios run.
    pub scenarios: usize,
    /// One entry per policy but the oracle, in the order asked.
    pub policies: Vec<PolicySummary>,
    /// Each policy after the first (but the oracle) against the first, scenario by scenario;
    /// empty with fewer than two.
    pub paired: Vec<PairedSummary>,
    /// The same figures per kind of world (fleets that queue or not, requests that retry or
    /// not), for the worlds with at least one scenario.
    pub worlds: Vec<WorldReport>,
}

/// How much a suite's table shows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Detail {
    /// Each family's figures and the paired comparisons.
    #[default]
    Families,
    /// The same, and under each family its figures per kind of world ([`World`]).
    Worlds,
}

/// The whole suite.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SuiteReport {
    /// The families run, in order.
    pub suite: Vec<String>,
    /// The suite seed.
    pub seed: u64,
    /// One entry per family.
    pub families: Vec<FamilyReport>,
    /// Every scenario's raw figures, in family order.
    pub instances: Vec<Instance>,
}

/// A figure against the oracle's on one scenario: `(value, censored)`, `None` when the oracle
/// gives no reference.
pub(super) fn excess(
    mine: Option<f64>,
    oracle: Option<f64>,
    event_at: Option<f64>,
    end_s: f64,
) -> Option<(f64, bool)> {
    let (oracle, at) = (oracle?, event_at?);
    Some(match mine {
        Some(v) => (v - oracle, false),
        None => ((end_s - at).max(0.0) - oracle, true),
    })
}

/// Each policy after the first of `names` against the first, over `instances`; empty with
/// fewer than two.
pub(super) fn paired_against_first(names: &[&str], instances: &[&Instance]) -> Vec<PairedSummary> {
    match names.split_first() {
        Some((first, rest)) => rest
            .iter()
            .map(|p| paired::compare(p, first, instances))
            .collect(),
        None => Vec::new(),
    }
}

pub(super) fn summarize(policy: &str, instances: &[&Instance]) -> PolicySummary {
    let (mut rec, mut det, mut err, mut ttfb) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut never_rec, mut never_det) = (0, 0);
    for inst in instances {
        let find = |name: &str| inst.policies.iter().find(|f| f.policy == name);
        let (Some(me), Some(or)) = (find(policy), find("oracle")) else {
            continue;
        };
        if let Some((v, censored)) =
            excess(me.recovery_s, or.recovery_s, inst.heal_at_s, me.virtual_s)
        {
            rec.push(v);
            never_rec += usize::from(censored);
        }
        if let Some((v, censored)) = excess(
            me.detection_s,
            or.detection_s,
            inst.degrade_at_s,
            me.virtual_s,
        ) {
            det.push(v);
            never_det += usize::from(censored);
        }
        err.push(me.error_rate - or.error_rate);
        if me.ttfb_mean_ms > 0.0 && or.ttfb_mean_ms > 0.0 {
            ttfb.push(me.ttfb_mean_ms / or.ttfb_mean_ms);
        }
    }
    PolicySummary {
        policy: policy.to_string(),
        recovery_scenarios: rec.len(),
        detection_scenarios: det.len(),
        recovery_excess_s: Quantiles::of(rec),
        detection_excess_s: Quantiles::of(det),
        error_excess: Quantiles::of(err),
        ttfb_ratio: Quantiles::of(ttfb),
        never_recovered: never_rec,
        never_detected: never_det,
    }
}

impl SuiteReport {
    /// Summarizes the instances per family (in the order they first appear).
    pub fn new(seed: u64, instances: &[Instance]) -> Self {
        let mut names: Vec<String> = Vec::new();
        for i in instances {
            if !names.contains(&i.family) {
                names.push(i.family.clone());
            }
        }
        let families = names
            .iter()
            .map(|fam| {
                let mine: Vec<&Instance> = instances.iter().filter(|i| &i.family == fam).collect();
                let names: Vec<&str> = mine
                    .first()
                    .map(|i| {
                        i.policies
                            .iter()
                            .map(|f| f.policy.as_str())
                            .filter(|p| *p != "oracle")
                            .collect()
                    })
                    .unwrap_or_default();
                FamilyReport {
                    family: fam.clone(),
                    scenarios: mine.len(),
                    policies: names.iter().map(|p| summarize(p, &mine)).collect(),
                    paired: paired_against_first(&names, &mine),
                    worlds: worlds::split(&names, &mine),
                }
            })
            .collect();
        SuiteReport {
            suite: names,
            seed,
            families,
            instances: instances.to_vec(),
        }
    }

    /// One table per family.
    pub fn table(&self) -> String {
        self.table_with(Detail::Families)
    }

    /// One table per family, with as much as `detail` asks.
    pub fn table_with(&self, detail: Detail) -> String {
        let mut out = String::new();
        for fam in &self.families {
            let _ = writeln!(
                out,
                "family {}: {}, suite seed {}; against the oracle, p50 / p95 over scenarios",
                fam.family,
                scenarios(fam.scenarios),
                self.seed
            );
            let _ = writeln!(
                out,
                "{:<22} {:>17} {:>7} {:>17} {:>7} {:>17} {:>13}",
                "policy", "recovery +s", "never", "detection +s", "never", "error +", "ttfb x"
            );
            rows(&mut out, &fam.policies, "");
            paired::table(&mut out, &fam.paired, "");
            if detail == Detail::Worlds {
                for w in &fam.worlds {
                    let _ = writeln!(out, "  {}: {}", w.world, scenarios(w.scenarios));
                    rows(&mut out, &w.policies, "    ");
                    paired::table(&mut out, &w.paired, "    ");
                }
            }
            let _ = writeln!(out);
        }
        out
    }

    /// The JSON contract (`docs/simulate-json.md`).
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }
}

/// "1 scenario", "2 scenarios".
fn scenarios(n: usize) -> String {
    if n == 1 {
        "1 scenario".to_string()
    } else {
        format!("{n} scenarios")
    }
}

/// One row per policy, the name after `indent` and cut to the column.
fn rows(out: &mut String, policies: &[PolicySummary], indent: &str) {
    let f = |x: Option<f64>, prec: usize| x.map_or("-".to_string(), |v| format!("{v:.prec$}"));
    let pair = |q: Quantiles, prec: usize| format!("{} / {}", f(q.p50, prec), f(q.p95, prec));
    let ratio = |n: usize, of: usize| {
        if of == 0 {
            "-".to_string()
        } else {
            format!("{n}/{of}")
        }
    };
    for p in policies {
        let name = format!("{indent}{}", truncate(&p.policy, 22 - indent.len()));
        let _ = writeln!(
            out,
            "{:<22} {:>17} {:>7} {:>17} {:>7} {:>17} {:>13}",
            name,
            pair(p.recovery_excess_s, 1),
            ratio(p.never_recovered, p.recovery_scenarios),
            pair(p.detection_excess_s, 1),
            ratio(p.never_detected, p.detection_scenarios),
            pair(p.error_excess, 4),
            pair(p.ttfb_ratio, 2),
        );
    }
}

pub(super) fn truncate(s: &str, n: usize) -> &str {
    match s.char_indices().nth(n) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deg(share: f64, det: Option<f64>, healed: bool, rec: Option<f64>) -> Degraded {
        Degraded {
            candidate: "c".into(),
            degraded_at_s: 10.0,
            share_before: Some(share),
            detection_s: det,
            healed_at_s: healed.then_some(30.0),
            recovery_s: rec,
        }
    }

    fn det(d: &[Degraded]) -> Option<f64> {
        slowest(d, |_| true, |d| Some(d.degraded_at_s), |d| d.detection_s)
    }

    fn rec(d: &[Degraded]) -> Option<f64> {
        slowest(d, |_| true, |d| d.healed_at_s, |d| d.recovery_s)
    }

    #[test]
    fn the_slowest_used_candidate_counts() {
        let d = [
            deg(0.4, Some(1.0), true, Some(2.0)),
            deg(0.2, Some(3.0), true, Some(1.5)),
        ];
        assert_eq!(det(&d), Some(3.0));
        assert_eq!(rec(&d), Some(2.0));
    }

    #[test]
    fn one_that_never_returns_makes_the_scenario_never() {
        let d = [
            deg(0.4, Some(1.0), true, Some(2.0)),
            deg(0.2, None, true, None),
        ];
        assert_eq!(det(&d), None);
        assert_eq!(rec(&d), None);
    }

    #[test]
    fn a_candidate_the_policy_never_used_has_nothing_to_detect_or_recover() {
        let d = [deg(0.0, None, true, None)];
        assert_eq!(det(&d), Some(0.0));
        assert_eq!(rec(&d), Some(0.0));
        // Unused ones do not hide a used one's figure.
        let d = [deg(0.0, None, true, None), deg(0.3, Some(2.0), true, None)];
        assert_eq!(det(&d), Some(2.0));
        assert_eq!(rec(&d), None);
    }

    #[test]
    fn without_the_event_there_is_no_figure() {
        assert_eq!(det(&[]), None);
        assert_eq!(rec(&[deg(0.4, Some(1.0), false, None)]), None);
    }

    #[test]
    fn quantiles_take_the_nearest_rank() {
        // Ranks 3 x 0.5 = 1.5 -> 2 and 3 x 0.95 = 2.85 -> 3.
        let q = Quantiles::of(vec![40.0, 10.0, 30.0, 20.0]);
        assert_eq!((q.p50, q.p95), (Some(30.0), Some(40.0)));
        // Among 0..=20, ranks 10 and 19.
        let q = Quantiles::of((0..=20).rev().map(f64::from).collect());
        assert_eq!((q.p50, q.p95), (Some(10.0), Some(19.0)));
    }

    fn figs(
        name: &str,
        det: Option<f64>,
        rec: Option<f64>,
        ttfb: f64,
        err: f64,
    ) -> InstanceFigures {
        InstanceFigures {
            policy: name.into(),
            detection_s: det,
            recovery_s: rec,
            detection_fair_s: None,
            recovery_fair_s: None,
            error_rate: err,
            ttfb_mean_ms: ttfb,
            virtual_s: 60.0,
        }
    }

    #[test]
    fn each_figure_is_measured_against_the_oracle_on_the_same_scenario() {
        // Degrade at 10 s, heal at 30 s, runs of 60 s.
        let inst = |me: InstanceFigures, oracle: InstanceFigures| Instance {
            family: "f".into(),
            scenario: "f-0".into(),
            description: String::new(),
            seed: 1,
            degrade_at_s: Some(10.0),
            heal_at_s: Some(30.0),
            world: World::new(false, true),
            policies: vec![me, oracle],
        };
        let insts = [
            // Never recovered: 60 - 30 s from the heal, minus the oracle's 2 s.
            inst(
                figs("p", Some(3.0), None, 20.0, 0.5),
                figs("oracle", Some(1.0), Some(2.0), 10.0, 0.25),
            ),
            // Never detected: 60 - 10 s from the degrade, minus the oracle's 1 s.
            inst(
                figs("p", None, Some(4.0), 10.0, 0.0),
                figs("oracle", Some(1.0), Some(1.0), 10.0, 0.0),
            ),
        ];
        let r = SuiteReport::new(1, &insts);
        let p = &r.families[0].policies[0];
        assert_eq!(p.policy, "p");
        assert_eq!((p.recovery_scenarios, p.never_recovered), (2, 1));
        assert_eq!((p.detection_scenarios, p.never_detected), (2, 1));
        // Two values: the median and the p95 are the larger one (rank 0.5 -> 1).
        assert_eq!(p.recovery_excess_s.p50, Some(28.0));
        assert_eq!(p.detection_excess_s.p50, Some(49.0));
        assert_eq!(p.error_excess.p50, Some(0.25));
        // First bytes twice and as slow as the oracle's.
        assert_eq!((p.ttfb_ratio.p50, p.ttfb_ratio.p95), (Some(2.0), Some(2.0)));
    }

    #[test]
    fn a_candidate_the_oracle_never_used_is_not_followed() {
        let report = |d: Vec<Degraded>| {
            let mut r = crate::sim::aggregate::Acc::default().finish(&[]).0;
            r.degraded = d;
            r
        };
        let named = |id: &str, share: f64, det: f64| Degraded {
            candidate: id.into(),
            ..deg(share, Some(det), true, Some(det))
        };
        let oracle = report(vec![named("a", 0.0, 0.5), named("b", 0.5, 0.5)]);
        let me = report(vec![named("a", 0.4, 5.0), named("b", 0.4, 1.0)]);
        let f = InstanceFigures::new("p", &me, Some(&oracle));
        assert_eq!((f.detection_s, f.recovery_s), (Some(1.0), Some(1.0)));
        let all = InstanceFigures::new("p", &me, None);
        assert_eq!((all.detection_s, all.recovery_s), (Some(5.0), Some(5.0)));
    }
}

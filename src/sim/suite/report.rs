//! The suite's figures: each policy against the oracle on the same scenario, then p50 and p95
//! over a family's scenarios. The JSON field names are a contract (`docs/simulate-json.md`).

use std::fmt::Write as _;

use serde::Serialize;

use crate::sim::PolicyReport;

/// One policy's figures on one scenario (one run).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct InstanceFigures {
    /// The policy's label.
    pub policy: String,
    /// As in `simulate --json`: degrade until the tracked candidate's share falls below 20% of
    /// its fair share; `None` if it never did.
    pub detection_s: Option<f64>,
    /// Heal until its share is back at 80% of its fair share; `None` if it never was.
    pub recovery_s: Option<f64>,
    /// Requests that ended without a success / requests.
    pub error_rate: f64,
    /// Mean first byte of the successful requests, ms (0 without any).
    pub ttfb_mean_ms: f64,
    /// Virtual seconds the run lasted.
    pub virtual_s: f64,
}

impl InstanceFigures {
    /// The figures of `r`, a one-seed report, under the name `label`.
    pub fn new(label: &str, r: &PolicyReport) -> Self {
        InstanceFigures {
            policy: label.to_string(),
            detection_s: r.detection_s,
            recovery_s: r.recovery_s,
            error_rate: r.error_rate,
            ttfb_mean_ms: r.ttfb_ms.mean,
            virtual_s: r.virtual_s,
        }
    }
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
    fn of(mut v: Vec<f64>) -> Self {
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
fn excess(
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

fn summarize(policy: &str, instances: &[&Instance]) -> PolicySummary {
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
                let policies = mine
                    .first()
                    .map(|i| {
                        i.policies
                            .iter()
                            .filter(|f| f.policy != "oracle")
                            .map(|f| summarize(&f.policy, &mine))
                            .collect()
                    })
                    .unwrap_or_default();
                FamilyReport {
                    family: fam.clone(),
                    scenarios: mine.len(),
                    policies,
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
        let mut out = String::new();
        let f = |x: Option<f64>, prec: usize| x.map_or("-".to_string(), |v| format!("{v:.prec$}"));
        for fam in &self.families {
            let _ = writeln!(
                out,
                "family {}: {} scenarios, suite seed {}; against the oracle, p50 / p95 over scenarios",
                fam.family, fam.scenarios, self.seed
            );
            let _ = writeln!(
                out,
                "{:<22} {:>17} {:>7} {:>17} {:>7} {:>17} {:>13}",
                "policy", "recovery +s", "never", "detection +s", "never", "error +", "ttfb x"
            );
            for p in &fam.policies {
                let pair =
                    |q: Quantiles, prec: usize| format!("{} / {}", f(q.p50, prec), f(q.p95, prec));
                let ratio = |n: usize, of: usize| {
                    if of == 0 {
                        "-".to_string()
                    } else {
                        format!("{n}/{of}")
                    }
                };
                let _ = writeln!(
                    out,
                    "{:<22} {:>17} {:>7} {:>17} {:>7} {:>17} {:>13}",
                    truncate(&p.policy, 22),
                    pair(p.recovery_excess_s, 1),
                    ratio(p.never_recovered, p.recovery_scenarios),
                    pair(p.detection_excess_s, 1),
                    ratio(p.never_detected, p.detection_scenarios),
                    pair(p.error_excess, 4),
                    pair(p.ttfb_ratio, 2),
                );
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

fn truncate(s: &str, n: usize) -> &str {
    match s.char_indices().nth(n) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

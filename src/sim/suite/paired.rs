//! Paired comparisons: each policy against the first one asked (the reference), scenario by
//! scenario. Two configs run on the same generated scenarios differ by much less than the
//! scenarios differ from one another, so the per-scenario differences say whether a change
//! helps far sooner than two p95s over the family do (a p95 over 100 scenarios moves by
//! seconds with a handful of them).

use std::fmt::Write as _;

use serde::Serialize;

use super::report::{excess, Instance};

/// 1.96: the two-sided 95 % point of the normal distribution, for the intervals.
const Z95: f64 = 1.96;

/// A paired difference over a family's scenarios: its mean with a 95 % confidence interval
/// (the mean plus or minus 1.96 standard errors of the differences; none below two
/// scenarios), and how many scenarios moved each way.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Paired {
    /// Mean over the scenarios where both policies have the figure.
    pub mean: Option<f64>,
    /// Lower end of the 95 % interval.
    pub low: Option<f64>,
    /// Upper end of the 95 % interval.
    pub high: Option<f64>,
    /// Scenarios where both policies have the figure.
    pub scenarios: usize,
    /// Scenarios where the policy did better than the reference.
    pub better: usize,
    /// Scenarios where it did worse.
    pub worse: usize,
}

impl Paired {
    /// From per-scenario differences, policy minus reference, where lower is better.
    pub(crate) fn of(d: &[f64]) -> Self {
        let n = d.len();
        let better = d.iter().filter(|&&x| x < 0.0).count();
        let worse = d.iter().filter(|&&x| x > 0.0).count();
        if n == 0 {
            return Paired::default();
        }
        let mean = d.iter().sum::<f64>() / n as f64;
        let (low, high) = if n >= 2 {
            let var = d.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
            let half = Z95 * (var / n as f64).sqrt();
            (Some(mean - half), Some(mean + half))
        } else {
            (None, None)
        };
        Paired {
            mean: Some(mean),
            low,
            high,
            scenarios: n,
            better,
            worse,
        }
    }

    /// The same on another scale (`exp` for a mean of logarithms): the counts stay.
    fn map(self, f: impl Fn(f64) -> f64) -> Self {
        Paired {
            mean: self.mean.map(&f),
            low: self.low.map(&f),
            high: self.high.map(&f),
            ..self
        }
    }
}

/// One policy against the reference over one family.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PairedSummary {
    /// The policy's label.
    pub policy: String,
    /// The reference's label (the first policy asked).
    pub against: String,
    /// Mean first byte over the reference's, as the geometric mean of the per-scenario ratios
    /// (its interval too); better below 1.
    pub ttfb_ratio: Paired,
    /// Error rate minus the reference's.
    pub error_diff: Paired,
    /// Recovery minus the reference's, s, where the oracle recovered (a run that never
    /// recovered counts as in `recovery_excess_s`).
    pub recovery_diff_s: Paired,
    /// Detection minus the reference's, s, where the oracle detected.
    pub detection_diff_s: Paired,
}

/// `policy` against `against` over a family's instances.
pub(crate) fn compare(policy: &str, against: &str, instances: &[&Instance]) -> PairedSummary {
    let (mut ttfb, mut err, mut rec, mut det) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for inst in instances {
        let find = |name: &str| inst.policies.iter().find(|f| f.policy == name);
        let (Some(me), Some(base)) = (find(policy), find(against)) else {
            continue;
        };
        if me.ttfb_mean_ms > 0.0 && base.ttfb_mean_ms > 0.0 {
            ttfb.push((me.ttfb_mean_ms / base.ttfb_mean_ms).ln());
        }
        err.push(me.error_rate - base.error_rate);
        if let Some(or) = find("oracle") {
            let heal = |f: &super::InstanceFigures| {
                excess(f.recovery_s, or.recovery_s, inst.heal_at_s, f.virtual_s)
            };
            if let (Some((a, _)), Some((b, _))) = (heal(me), heal(base)) {
                rec.push(a - b);
            }
            let degrade = |f: &super::InstanceFigures| {
                excess(
                    f.detection_s,
                    or.detection_s,
                    inst.degrade_at_s,
                    f.virtual_s,
                )
            };
            if let (Some((a, _)), Some((b, _))) = (degrade(me), degrade(base)) {
                det.push(a - b);
            }
        }
    }
    PairedSummary {
        policy: policy.to_string(),
        against: against.to_string(),
        ttfb_ratio: Paired::of(&ttfb).map(f64::exp),
        error_diff: Paired::of(&err),
        recovery_diff_s: Paired::of(&rec),
        detection_diff_s: Paired::of(&det),
    }
}

/// The table's block for one family: nothing when there is nothing to pair.
pub(crate) fn table(out: &mut String, paired: &[PairedSummary], indent: &str) {
    let Some(first) = paired.first() else {
        return;
    };
    let _ = writeln!(
        out,
        "{indent}paired against {}: mean over the scenarios both have [95% interval] better/worse",
        first.against
    );
    let cell = |p: Paired, prec: usize, signed: bool| match (p.mean, p.low, p.high) {
        (Some(m), Some(l), Some(h)) if signed => {
            format!(
                "{m:+.prec$} [{l:+.prec$}, {h:+.prec$}] {}/{}",
                p.better, p.worse
            )
        }
        (Some(m), Some(l), Some(h)) => {
            format!(
                "{m:.prec$} [{l:.prec$}, {h:.prec$}] {}/{}",
                p.better, p.worse
            )
        }
        (Some(m), _, _) => format!("{m:.prec$} {}/{}", p.better, p.worse),
        _ => "-".to_string(),
    };
    for p in paired {
        let _ = writeln!(
            out,
            "{indent}  {:<24} ttfb x {:<26} error {:<34} recovery s {:<28} detection s {}",
            super::report::truncate(&p.policy, 24),
            cell(p.ttfb_ratio, 3, false),
            cell(p.error_diff, 4, true),
            cell(p.recovery_diff_s, 2, true),
            cell(p.detection_diff_s, 2, true),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::suite::InstanceFigures;

    fn figures(policy: &str, ttfb: f64, err: f64, rec: Option<f64>) -> InstanceFigures {
        InstanceFigures {
            policy: policy.into(),
            detection_s: Some(1.0),
            recovery_s: rec,
            detection_fair_s: None,
            recovery_fair_s: None,
            error_rate: err,
            ttfb_mean_ms: ttfb,
            virtual_s: 60.0,
        }
    }

    fn instance(a: InstanceFigures, b: InstanceFigures) -> Instance {
        Instance {
            family: "degrade-heal".into(),
            scenario: "degrade-heal-0".into(),
            description: String::new(),
            seed: 1,
            degrade_at_s: Some(10.0),
            heal_at_s: Some(30.0),
            world: crate::sim::suite::World::new(false, true),
            policies: vec![a, b, figures("oracle", 10.0, 0.0, Some(1.0))],
        }
    }

    #[test]
    fn the_mean_interval_and_counts_of_paired_differences() {
        let p = Paired::of(&[-1.0, 1.0, 3.0]);
        assert_eq!(p.mean, Some(1.0));
        // Sample sd 2, standard error 2 / sqrt(3).
        let half = 1.96 * 2.0 / 3f64.sqrt();
        assert!((p.low.unwrap() - (1.0 - half)).abs() < 1e-12);
        assert!((p.high.unwrap() - (1.0 + half)).abs() < 1e-12);
        assert_eq!((p.scenarios, p.better, p.worse), (3, 1, 2));
        let one = Paired::of(&[0.5]);
        assert_eq!((one.mean, one.low, one.high), (Some(0.5), None, None));
        assert_eq!(Paired::of(&[]), Paired::default());
    }

    #[test]
    fn a_policy_is_paired_with_the_reference_scenario_by_scenario() {
        // Twice as fast on one scenario, half as fast on the other: a geometric mean of 1.
        let insts = [
            instance(
                figures("ref", 20.0, 0.01, Some(3.0)),
                figures("new", 10.0, 0.0, Some(2.0)),
            ),
            instance(
                figures("ref", 10.0, 0.0, None),
                figures("new", 20.0, 0.0, Some(5.0)),
            ),
        ];
        let refs: Vec<&Instance> = insts.iter().collect();
        let s = compare("new", "ref", &refs);
        assert!((s.ttfb_ratio.mean.unwrap() - 1.0).abs() < 1e-12);
        assert_eq!((s.ttfb_ratio.better, s.ttfb_ratio.worse), (1, 1));
        assert!((s.error_diff.mean.unwrap() + 0.005).abs() < 1e-12);
        // The reference never recovered on the second: it counts until the end of its run
        // (60 - 30 s), as in the recovery excess.
        let rec = s.recovery_diff_s;
        assert_eq!(rec.scenarios, 2);
        assert!((rec.mean.unwrap() - ((2.0 - 3.0) + (5.0 - 30.0)) / 2.0).abs() < 1e-12);
        assert_eq!((rec.better, rec.worse), (2, 0));
        let mut out = String::new();
        table(&mut out, &[s], "");
        assert!(out.starts_with("paired against ref"), "{out}");
        assert!(out.contains("ttfb x 1.000"), "{out}");
    }

    #[test]
    fn an_unchanged_scenario_is_neither_better_nor_worse() {
        let p = Paired::of(&[0.0, -2.0, 0.0, 2.0]);
        assert_eq!((p.scenarios, p.better, p.worse), (4, 1, 1));
    }

    #[test]
    fn the_first_byte_ratio_is_the_policy_over_the_reference() {
        let insts = [instance(
            figures("ref", 10.0, 0.0, Some(1.0)),
            figures("new", 40.0, 0.0, Some(1.0)),
        )];
        let refs: Vec<&Instance> = insts.iter().collect();
        let s = compare("new", "ref", &refs);
        assert!((s.ttfb_ratio.mean.unwrap() - 4.0).abs() < 1e-12);
        assert_eq!((s.ttfb_ratio.better, s.ttfb_ratio.worse), (0, 1));
    }
}

//! Server feedback: what servers piggyback on their responses (their queue and service time,
//! [`ServerFeedback`]), averaged per candidate, and the `feedback` component it gives.
//!
//! C3 (Suresh et al., NSDI 2015) ranks replicas by `q_hat^3 / mu` with
//! `q_hat = 1 + os * n + q`: the queue the server reported, plus what this client has
//! outstanding on it, plus the request itself, times the reported service time. The draw
//! needs a weight rather than a rank, one that falls steeply with the expected completion
//! time, so here the expected completion
//!
//! ```text
//! r = (1 + in_flight + queue) * service / reference
//! ```
//!
//! (in units of the fleet's average reported service time, `reference`) gives the component
//! `feedback = exp(-r)`, and in sum mode the weight is multiplied by
//! `exp(exponent * (1 - r))`: an idle candidate at the average service time keeps its weight,
//! each service time of expected completion beyond that divides it by `e^exponent`. A
//! candidate that never reported scores `exp(-1)`, as if idle at the average, so its weight
//! is exactly what it would be without this component; a fleet where no server reports draws
//! as before.

use serde::{Deserialize, Serialize};

use crate::error::Problem;
use crate::vocab::ServerFeedback;

/// How server feedback ([`ServerFeedback`]) weighs in the draw.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FeedbackConfig {
    /// Sum mode: the weight of a candidate whose server reports is multiplied by
    /// `exp(exponent * (1 - r))`, `r` its expected completion time in average service times
    /// (see `docs/scoring.md`). 0: feedback is averaged and shown, but moves no draw.
    pub exponent: f64,
    /// Weight of the newest report in a candidate's averages of queue and service time, in
    /// (0, 1] (C3: 0.9).
    pub alpha: f64,
}

impl Default for FeedbackConfig {
    fn default() -> Self {
        FeedbackConfig {
            exponent: 3.0,
            alpha: 0.5,
        }
    }
}

impl FeedbackConfig {
    /// Feedback moves no draw (the presets that reproduce other systems exactly).
    pub const OFF: FeedbackConfig = FeedbackConfig {
        exponent: 0.0,
        alpha: 0.5,
    };

    /// Adds a problem per unusable field.
    pub(crate) fn check(&self, problems: &mut Vec<Problem>) {
        let e = self.exponent;
        if !(e.is_finite() && e >= 0.0) {
            problems.push(Problem::new(
                "feedback.exponent",
                format!("must be a finite number >= 0, got {e}"),
            ));
        } else if e > MAX_EXPONENT {
            problems.push(Problem::new(
                "feedback.exponent",
                format!(
                    "must be at most {MAX_EXPONENT} (a weight factor of e^{MAX_EXPONENT}), got {e}"
                ),
            ));
        }
        let a = self.alpha;
        if !(a > 0.0 && a <= 1.0) {
            problems.push(Problem::new(
                "feedback.alpha",
                format!("must be in (0, 1] (the weight of the newest report), got {a}"),
            ));
        }
    }
}

/// The largest `feedback.exponent`: a weight factor of at most `e^64`, far inside `f64`.
const MAX_EXPONENT: f64 = 64.0;

/// One candidate's averages of what its server reported (8 bytes; NaN service: none yet).
#[derive(Clone, Copy, Debug, PartialEq)]
struct Averages {
    queue: f32,
    service_ms: f32,
}

const NONE: Averages = Averages {
    queue: 0.0,
    service_ms: f32::NAN,
};

/// Every candidate's feedback averages and the fleet's reference service time, kept by the
/// core beside its candidate slots (indexed alike) so the slots keep their size.
#[derive(Clone, Debug)]
pub(crate) struct FeedbackBook {
    per: Vec<Averages>,
    /// Moving average of every report's service time, ms (NaN before the first), as of the
    /// last coarse refresh ([`FeedbackBook::settle`]).
    reference_ms: f64,
    /// The same average with every report folded in; it becomes the reference at the next
    /// refresh, so that every candidate's leaf and the evaluated draw read one reference
    /// between two refreshes.
    reference_next_ms: f64,
    /// Whether any report ever came: until one does, nothing is looked up.
    any: bool,
}

impl Default for FeedbackBook {
    fn default() -> Self {
        FeedbackBook {
            per: Vec::new(),
            reference_ms: f64::NAN,
            reference_next_ms: f64::NAN,
            any: false,
        }
    }
}

impl FeedbackBook {
    /// Forgets slot `idx`'s averages (a new candidate in it). The book grows only when a
    /// report comes ([`FeedbackBook::observe`]): a slot past its end never reported, so a
    /// fleet without server feedback keeps no entry per candidate.
    pub(crate) fn reset(&mut self, idx: usize) {
        if let Some(avg) = self.per.get_mut(idx) {
            *avg = NONE;
        }
    }

    /// Folds a report of slot `idx`'s server into its averages (alpha `cfg.alpha`) and the
    /// fleet's reference (alpha `overall_alpha`). The report was checked when it came in.
    pub(crate) fn observe(
        &mut self,
        idx: usize,
        report: &ServerFeedback,
        cfg: &FeedbackConfig,
        overall_alpha: f64,
    ) {
        if self.per.len() <= idx {
            self.per.resize(idx + 1, NONE);
        }
        let queue = report.queue as f32;
        let service = report.service_ms as f32;
        let a = cfg.alpha as f32;
        let avg = &mut self.per[idx];
        *avg = if avg.service_ms.is_nan() {
            Averages {
                queue,
                service_ms: service,
            }
        } else {
            Averages {
                queue: avg.queue + a * (queue - avg.queue),
                service_ms: avg.service_ms + a * (service - avg.service_ms),
            }
        };
        self.reference_next_ms = if self.reference_next_ms.is_nan() {
            report.service_ms
        } else {
            self.reference_next_ms + overall_alpha * (report.service_ms - self.reference_next_ms)
        };
        if self.reference_ms.is_nan() {
            // The first report: no other candidate has reported, so none reads the reference.
            self.reference_ms = self.reference_next_ms;
        }
        self.any = true;
    }

    /// Slot `idx`'s averages as a snapshot keeps them: `(queue, service_ms)`, `None` when it
    /// never reported.
    pub(crate) fn saved(&self, idx: usize) -> Option<(f32, f32)> {
        self.per
            .get(idx)
            .filter(|a| !a.service_ms.is_nan())
            .map(|a| (a.queue, a.service_ms))
    }

    /// Puts back slot `idx`'s averages from a snapshot (checked finite and not negative).
    pub(crate) fn restore(&mut self, idx: usize, queue: f32, service_ms: f32) {
        if self.per.len() <= idx {
            self.per.resize(idx + 1, NONE);
        }
        self.per[idx] = Averages { queue, service_ms };
        self.any = true;
    }

    /// The fleet's reference service time with every report folded in, ms (`None` before
    /// the first report): what a snapshot keeps.
    pub(crate) fn reference(&self) -> Option<f64> {
        (!self.reference_next_ms.is_nan()).then_some(self.reference_next_ms)
    }

    /// Puts back the reference a snapshot kept.
    pub(crate) fn restore_reference(&mut self, ms: f64) {
        self.reference_ms = ms;
        self.reference_next_ms = ms;
    }

    /// Makes the reports since the last refresh count in the reference (a coarse refresh).
    pub(crate) fn settle(&mut self) {
        self.reference_ms = self.reference_next_ms;
    }

    /// Slot `idx`'s expected completion time in reference service times with `in_flight`
    /// attempts of this coordinator on it: `(1 + in_flight + queue) * service / reference`.
    /// `None` when it never reported.
    #[inline]
    pub(crate) fn relative(&self, idx: usize, in_flight: u32) -> Option<f64> {
        if !self.any {
            return None;
        }
        let avg = self.per.get(idx).filter(|a| !a.service_ms.is_nan())?;
        // A fleet that reports only zero service times has no scale: a millisecond is one.
        let reference = if self.reference_ms > 0.0 {
            self.reference_ms
        } else {
            1.0
        };
        let ahead = 1.0 + f64::from(in_flight) + f64::from(avg.queue);
        Some(ahead * f64::from(avg.service_ms) / reference)
    }

    /// Slot `idx`'s averages: `(queue, service_ms)`, `None` when it never reported.
    #[cfg(test)]
    fn averages(&self, idx: usize) -> Option<(f64, f64)> {
        self.per
            .get(idx)
            .filter(|a| !a.service_ms.is_nan())
            .map(|a| (f64::from(a.queue), f64::from(a.service_ms)))
    }
}

/// The component an expected completion `r` (reference service times) gives: `exp(-r)`; a
/// candidate that never reported scores `exp(-1)`, as if idle at the average.
#[inline]
pub(crate) fn component(r: Option<f64>) -> f64 {
    match r {
        Some(r) if r.is_finite() => (-r.max(0.0)).exp(),
        Some(_) => 0.0,
        None => super::AVERAGE_TIME,
    }
}

/// The sum-mode weight factor of a `feedback` component `c` with `exponent` `k`:
/// `(c / exp(-1))^k = exp(k (1 - r))`; exactly 1 for a candidate that never reported.
#[inline]
pub(crate) fn factor(c: f64, k: f64) -> f64 {
    if c == super::AVERAGE_TIME {
        1.0
    } else {
        (k * (1.0 + c.ln())).exp()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn report(queue: u32, ms: u64) -> ServerFeedback {
        ServerFeedback::new(queue, Duration::from_millis(ms))
    }

    #[test]
    fn a_candidate_that_never_reported_keeps_its_weight() {
        let mut book = FeedbackBook::default();
        assert_eq!(book.relative(0, 3), None);
        book.reset(2);
        book.observe(0, &report(0, 4), &FeedbackConfig::default(), 0.2);
        assert_eq!(book.relative(2, 5), None, "slot 2 never reported");
        assert_eq!(book.relative(7, 0), None, "past the book");
        assert_eq!(component(None), super::super::AVERAGE_TIME);
        assert_eq!(factor(component(None), 2.0), 1.0);
        assert_eq!(factor(component(None), 64.0), 1.0);
    }

    #[test]
    fn expected_completion_counts_queue_in_flight_and_service() {
        let cfg = FeedbackConfig::default();
        let mut book = FeedbackBook::default();
        // Reference: the first report's 4 ms, then 0.2 of the way to 1 ms.
        book.observe(0, &report(2, 4), &cfg, 0.2);
        assert_eq!(book.relative(0, 0), Some(3.0 * 4.0 / 4.0));
        book.observe(1, &report(0, 1), &cfg, 0.2);
        // The reference moves at the next refresh: until then every slot reads the old one.
        assert_eq!(book.relative(1, 2), Some(3.0 * 1.0 / 4.0));
        book.settle();
        let reference = 4.0 + 0.2 * (1.0 - 4.0);
        assert!((book.relative(1, 2).unwrap() - 3.0 * 1.0 / reference).abs() < 1e-9);
        // Slot 0's averages move half way to the new report.
        book.observe(0, &report(0, 2), &cfg, 0.2);
        assert_eq!(book.averages(0), Some((1.0, 3.0)));
        // A new candidate in the slot starts afresh.
        book.reset(0);
        assert_eq!(book.averages(0), None);
        // Slots that never reported take no room.
        book.reset(9);
        assert_eq!(book.per.len(), 2);
    }

    #[test]
    fn the_factor_falls_by_e_to_the_exponent_per_service_time() {
        for r in [0.0f64, 0.5, 1.0, 2.0, 7.5] {
            let c = component(Some(r));
            assert!((c - (-r).exp()).abs() < 1e-12);
            let f = factor(c, 3.0);
            assert!(
                (f - (3.0 * (1.0 - r)).exp()).abs() < 1e-9 * f.max(1.0),
                "{r}: {f}"
            );
        }
        // Idle at the average service time: unchanged.
        assert!((factor(component(Some(1.0)), 5.0) - 1.0).abs() < 1e-12);
        assert_eq!(component(Some(f64::INFINITY)), 0.0);
        assert_eq!(factor(0.0, 2.0), 0.0);
    }

    #[test]
    fn config_checks_name_the_field() {
        let mut problems = Vec::new();
        FeedbackConfig::default().check(&mut problems);
        FeedbackConfig::OFF.check(&mut problems);
        assert!(problems.is_empty(), "{problems:?}");
        for (cfg, field) in [
            (
                FeedbackConfig {
                    exponent: f64::NAN,
                    alpha: 0.5,
                },
                "feedback.exponent",
            ),
            (
                FeedbackConfig {
                    exponent: -1.0,
                    alpha: 0.5,
                },
                "feedback.exponent",
            ),
            (
                FeedbackConfig {
                    exponent: 65.0,
                    alpha: 0.5,
                },
                "feedback.exponent",
            ),
            (
                FeedbackConfig {
                    exponent: 1.0,
                    alpha: 0.0,
                },
                "feedback.alpha",
            ),
            (
                FeedbackConfig {
                    exponent: 1.0,
                    alpha: 1.5,
                },
                "feedback.alpha",
            ),
            (
                FeedbackConfig {
                    exponent: 1.0,
                    alpha: f64::NAN,
                },
                "feedback.alpha",
            ),
        ] {
            let mut problems = Vec::new();
            cfg.check(&mut problems);
            assert_eq!(problems.len(), 1, "{cfg:?}");
            assert_eq!(problems[0].path, field);
        }
    }
}

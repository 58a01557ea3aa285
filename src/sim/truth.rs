//! The hidden behaviour of candidates: what an attempt does, given the load it lands on.

use rand::Rng;

use super::dist::{sample, Dist};
use super::scenario::{CandidateSpec, TimelineEvent};
use crate::core::{FailureClass, Outcome};

/// One candidate's current truth.
#[derive(Clone, Debug)]
pub(crate) struct Truth {
    pub(crate) success: f64,
    pub(crate) failure: FailureClass,
    pub(crate) failure_ms: Dist,
    pub(crate) connect_ms: Dist,
    pub(crate) ttfb_ms: Option<Dist>,
    pub(crate) duration_ms: Dist,
    pub(crate) bandwidth_mbps: Option<f64>,
    pub(crate) capacity: Option<u32>,
    pub(crate) overload_per_extra: f64,
}

/// What one attempt did: its outcome for the policy, when it ends and when its first byte came.
#[derive(Clone, Copy, Debug)]
pub(crate) struct AttemptResult {
    pub(crate) outcome: Outcome,
    pub(crate) ok: bool,
    /// From grant to the end, seconds.
    pub(crate) end_s: f64,
    /// From grant to the first byte (successes), seconds.
    pub(crate) first_byte_s: f64,
}

impl Truth {
    pub(crate) fn from_spec(s: &CandidateSpec) -> Self {
        Truth {
            success: s.success,
            failure: s.failure,
            failure_ms: s.failure_ms.clone(),
            connect_ms: s.connect_ms.clone(),
            ttfb_ms: s.ttfb_ms.clone(),
            duration_ms: s.duration_ms.clone(),
            bandwidth_mbps: s.bandwidth_mbps,
            capacity: s.capacity,
            overload_per_extra: s.overload_per_extra,
        }
    }

    /// Applies a `degrade` event's overrides.
    pub(crate) fn degrade(&mut self, ev: &TimelineEvent) {
        if let Some(s) = ev.success {
            self.success = s;
        }
        if let Some(f) = ev.failure {
            self.failure = f;
        }
        if let Some(d) = &ev.failure_ms {
            self.failure_ms = d.clone();
        }
        if let Some(d) = &ev.ttfb_ms {
            self.ttfb_ms = Some(d.clone());
        }
        if let Some(c) = ev.capacity {
            self.capacity = Some(c);
        }
    }

    /// The probability of an overload failure caused by load alone, with `load` attempts in
    /// flight counting the new one.
    pub(crate) fn overload_probability(&self, load: u32) -> f64 {
        match self.capacity {
            Some(c) if load > c => (self.overload_per_extra * (load - c) as f64).min(1.0),
            _ => 0.0,
        }
    }

    /// The probability that an attempt landing on `load` in flight (itself included) succeeds.
    pub(crate) fn success_probability(&self, load: u32) -> f64 {
        self.success * (1.0 - self.overload_probability(load))
    }

    /// Expected time from grant to first byte of a success, ms.
    pub(crate) fn mean_first_byte_ms(&self) -> f64 {
        match &self.ttfb_ms {
            Some(t) => self.connect_ms.mean() + t.mean(),
            None => self.connect_ms.mean() + self.duration_ms.mean(),
        }
    }

    /// Runs one attempt.
    pub(crate) fn attempt<R: Rng + ?Sized>(
        &self,
        load: u32,
        bytes: u64,
        timeout_ms: Option<f64>,
        rng: &mut R,
    ) -> AttemptResult {
        let over = self.overload_probability(load);
        let roll: f64 = rng.gen();
        let fail_class = if roll < over {
            Some(FailureClass::Overload)
        } else if rng.gen::<f64>() >= self.success {
            Some(self.failure)
        } else {
            None
        };
        let mut r = match fail_class {
            Some(class) => AttemptResult {
                outcome: Outcome::failure(class),
                ok: false,
                end_s: sample(&self.failure_ms, rng) / 1000.0,
                first_byte_s: f64::INFINITY,
            },
            None => {
                let connect = sample(&self.connect_ms, rng);
                let ttfb = self.ttfb_ms.as_ref().map(|d| sample(d, rng));
                let transfer = match self.bandwidth_mbps {
                    Some(mbps) if bytes > 0 => bytes as f64 * 8.0 / (mbps * 1e6) * 1000.0,
                    _ => 0.0,
                };
                let duration = transfer + sample(&self.duration_ms, rng);
                let total = connect + ttfb.unwrap_or(0.0) + duration;
                let first_byte = match ttfb {
                    Some(t) => connect + t,
                    None => total,
                };
                let outcome = match ttfb {
                    // Request-response: only the duration is observable.
                    None => Outcome::Success(crate::core::Success {
                        duration_ms: Some(total),
                        ..Default::default()
                    }),
                    // ttfb as a client measures it: from the start of the attempt.
                    Some(t) => Outcome::Success(crate::core::Success {
                        connect_ms: Some(connect),
                        ttfb_ms: Some(connect + t),
                        bytes: (bytes > 0).then_some(bytes),
                        duration_ms: Some(total),
                    }),
                };
                AttemptResult {
                    outcome,
                    ok: true,
                    end_s: total / 1000.0,
                    first_byte_s: first_byte / 1000.0,
                }
            }
        };
        if let Some(t) = timeout_ms {
            let t_s = t / 1000.0;
            if (r.ok && r.first_byte_s > t_s) || (!r.ok && r.end_s > t_s) {
                r = AttemptResult {
                    outcome: Outcome::failure(FailureClass::Timeout),
                    ok: false,
                    end_s: t_s,
                    first_byte_s: f64::INFINITY,
                };
            }
        }
        r
    }
}

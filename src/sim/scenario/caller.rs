//! The `[caller]` section: how the coordinator policy's simulated callers use it.

use serde::Deserialize;

use super::{yes, Scenario};

/// What a caller does when its own timeout fires (`caller.on_timeout`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnTimeout {
    /// It reports the attempt as `FailureClass::Timeout` before the permit goes.
    #[default]
    Report,
    /// It drops the permit with no report (a `tokio::time::timeout` around the whole call).
    Drop,
}

/// How a caller retries after a failed attempt (`caller.retry`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Retry {
    /// Within the request (`Next::Retry`, `Permit::retry`): the candidates it tried are
    /// excluded, and the request keeps its deadline, key and arm.
    #[default]
    Within,
    /// A new request per retry, with the deadline of the first: it may draw the candidate that
    /// just failed.
    Fresh,
}

/// How the callers of the `coordinator` policies (and of their arms) use the coordinator.
/// Every field defaults to what they do without the section; the baselines keep their own
/// callers whatever it says.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Caller {
    /// Each request carries its deadline, arrival + `workload.timeout_ms` (`false`: none; the
    /// caller still gives up then).
    #[serde(default = "yes")]
    pub deadline: bool,
    /// What the caller does on its own timeouts: the request's, the attempt timeout and the
    /// first-byte advice.
    #[serde(default)]
    pub on_timeout: OnTimeout,
    /// The caller reports the first byte (`Permit::first_byte`) when it comes.
    #[serde(default = "yes")]
    pub first_byte: bool,
    /// How a failed attempt is retried.
    #[serde(default)]
    pub retry: Retry,
    /// The caller gives up on an attempt with no first byte by the advised deadline
    /// (`Grant::deadline_ms`); `false`: it waits for its own timeouts only.
    #[serde(default = "yes")]
    pub deadline_advice: bool,
}

impl Default for Caller {
    fn default() -> Self {
        Caller {
            deadline: true,
            on_timeout: OnTimeout::Report,
            first_byte: true,
            retry: Retry::Within,
            deadline_advice: true,
        }
    }
}

impl Caller {
    /// A switch that has nothing to act on in `sc`: the field to name and what to fix.
    pub(crate) fn check(&self, sc: &Scenario) -> Result<(), (&'static str, String)> {
        if *self != Caller::default() && sc.fleet.is_some() {
            return Err((
                "caller",
                "the fleet simulator's callers are the default ones: drop `[caller]` or `[fleet]`"
                    .into(),
            ));
        }
        let w = &sc.workload;
        if !self.deadline && w.timeout_ms.is_none() {
            return Err((
                "caller.deadline",
                "`deadline = false` takes the deadline off requests, and without \
                 `workload.timeout_ms` they have none: set `workload.timeout_ms` or drop \
                 `deadline`"
                    .into(),
            ));
        }
        if self.on_timeout == OnTimeout::Drop
            && w.timeout_ms.is_none()
            && w.attempt_timeout_ms.is_none()
            && !self.deadline_advice
        {
            return Err((
                "caller.on_timeout",
                "`on_timeout = \"drop\"` acts on the caller's own timeouts, and this caller has \
                 none (no `workload.timeout_ms`, no `workload.attempt_timeout_ms`, \
                 `deadline_advice = false`): give it one or drop `on_timeout`"
                    .into(),
            ));
        }
        if self.retry == Retry::Fresh && w.retries == 0 {
            return Err((
                "caller.retry",
                "`retry = \"fresh\"` says how a retry is made, and `workload.retries` is 0: set \
                 `workload.retries` or drop `retry`"
                    .into(),
            ));
        }
        Ok(())
    }
}

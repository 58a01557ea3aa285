//! The discrete-event simulator behind `selcoord simulate`.
//!
//! A [`Scenario`] (TOML, `docs/scenarios.md`) describes candidates with a hidden truth
//! (success probability, latencies, bandwidth, capacity), a timeline of changes and a
//! workload. The engine runs it in **virtual time** — no actors, no sleeping — against each
//! policy: the `coordinator` policy drives the real [`Core`](crate::Core) through
//! `ready / outcome / done / tick` with virtual `Instant`s; the baselines (`random`,
//! `round-robin`, `p2c-opcount`, `mongo-error-bias`, `lassie-pairwise`, `p2c-peak-ewma`,
//! `oracle`) are implemented here as their sources describe them.
//!
//! The hidden truth is public ([`Truth`]) so that `selcoord demo` runs the same candidate
//! model in real time.
//!
//! A run is a pure function of (scenario, policy, seed): the workload, the truth and the policy
//! each draw from their own seeded stream, so every policy sees the same arrivals and subsets
//! and results do not depend on how many threads ran the seeds.
//!
//! ```
//! use selection_coordinator::sim::{simulate, PolicySpec, Scenario};
//!
//! let scenario = Scenario::load("pairwise-deadlock").unwrap();
//! let policies = [PolicySpec::parse("coordinator").unwrap()];
//! let report = simulate(&scenario, &policies, &[1], 1, None).unwrap();
//! assert_eq!(report.policies[0].stalls, 0.0);
//! ```

mod aggregate;
mod baselines;
mod dist;
mod engine;
mod events;
mod fleet;
mod fleet_run;
mod limit_stats;
mod plot;
mod policy;
mod queue;
mod rate_stats;
mod report;
pub(crate) mod scenario;
mod series;
pub mod suite;
mod truth;
mod truths;

use std::collections::BTreeMap;

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};

pub use dist::Dist;
pub use fleet::{FleetShare, FleetSpec, MAX_CLIENTS};
pub use fleet_run::{simulate_fleet, FleetDegrade, FleetReport, RECOVERY_TARGET_S};
pub use limit_stats::{limit_settling, LimitSettle};
pub use plot::plot_svg;
pub use policy::{PolicySpec, POLICY_NAMES};
pub use report::{ArmReport, Degraded, PolicyReport, Report, Seeds, SeriesReport, Summary};
pub use scenario::{
    Action, Arrivals, Caller, CandidateSpec, CoordinatorSpec, Knee, LoopKind, OnTimeout, Retry,
    Scenario, ScenarioError, Slowdown, TimelineEvent, Workload, BUILTIN,
};
pub use truth::{AttemptResult, Truth};

/// Called after each finished run with (runs done, runs in all).
pub type Progress<'a> = &'a (dyn Fn(usize, usize) + Sync);

/// Runs every policy on every seed, `threads` runs at a time, and returns the means.
///
/// Results are identical for any `threads`: each run has its own seeded streams and results
/// are folded in (policy, seed) order.
pub fn simulate(
    scenario: &Scenario,
    policies: &[PolicySpec],
    seeds: &[u64],
    threads: usize,
    progress: Option<Progress<'_>>,
) -> Result<Report, String> {
    simulate_seeds(
        scenario,
        policies,
        Seeds::List(seeds.to_vec()),
        threads,
        progress,
    )
}

/// [`simulate`] over any [`Seeds`], such as a range of a million seeds.
///
/// Memory does not grow with the seed count: each worker reduces its run to a per-seed
/// summary at once, and summaries are folded into running means in (policy, seed) order.
/// A summary that finishes ahead of an earlier one waits in a small buffer; workers pause
/// rather than let that buffer grow past a few runs per thread.
pub fn simulate_seeds(
    scenario: &Scenario,
    policies: &[PolicySpec],
    seeds: Seeds,
    threads: usize,
    progress: Option<Progress<'_>>,
) -> Result<Report, String> {
    if policies.is_empty() || seeds.is_empty() {
        return Err("nothing to run: no policy or no seed".into());
    }
    if threads == 0 {
        return Err("threads must be at least 1".into());
    }
    let first_seed = seeds.get(0).unwrap_or_default();
    // Build every engine first so a bad policy config fails before any work.
    for p in policies {
        engine::Engine::new(scenario, p, first_seed)?;
    }
    let per_policy = seeds.len();
    let total = per_policy.saturating_mul(policies.len() as u64);
    let window = 16 * threads as u64;
    let state = Mutex::new(Fold {
        next: 0,
        pending: BTreeMap::new(),
        accs: vec![aggregate::Acc::default(); policies.len()],
        error: None,
    });
    let folded = Condvar::new();
    let next = AtomicU64::new(0);
    let done = AtomicUsize::new(0);
    std::thread::scope(|scope| {
        for _ in 0..(threads as u64).clamp(1, total) {
            scope.spawn(|| loop {
                let j = next.fetch_add(1, Ordering::Relaxed);
                if j >= total {
                    break;
                }
                // Keep the reorder buffer small: wait while this run is far ahead.
                if let Ok(mut st) = state.lock() {
                    while j >= st.next + window && st.error.is_none() {
                        st = match folded.wait(st) {
                            Ok(st) => st,
                            Err(_) => return,
                        };
                    }
                    if st.error.is_some() {
                        return;
                    }
                }
                let (p, s) = ((j / per_policy) as usize, j % per_policy);
                let seed = seeds.get(s).unwrap_or_default();
                let result =
                    engine::Engine::new(scenario, &policies[p], seed).map(|e| e.run().summary());
                if let Ok(mut st) = state.lock() {
                    match result {
                        Ok(summary) => {
                            st.pending.insert(j, summary);
                            st.fold(per_policy);
                        }
                        Err(e) => {
                            st.error.get_or_insert(e);
                        }
                    }
                }
                folded.notify_all();
                let d = done.fetch_add(1, Ordering::Relaxed) + 1;
                if let Some(cb) = progress {
                    cb(d, total as usize);
                }
            });
        }
    });
    let st = state
        .into_inner()
        .map_err(|_| "a simulation thread panicked".to_string())?;
    if let Some(e) = st.error {
        return Err(e);
    }
    if st.next != total {
        return Err("a run did not finish".into());
    }
    let ids: Vec<String> = scenario.expanded().into_iter().map(|(id, _)| id).collect();
    let mut reports = Vec::new();
    let mut series = Vec::new();
    for acc in st.accs {
        let (r, s) = acc.finish(&ids);
        reports.push(r);
        series.push(s);
    }
    Ok(Report {
        scenario: scenario.name.clone(),
        seeds,
        policies: reports,
        candidates: ids,
        series,
        timeline: scenario
            .timeline
            .iter()
            .any(|e| matches!(e.action, Action::Degrade | Action::Heal)),
    })
}

/// The running means and the runs that finished ahead of their turn.
struct Fold {
    /// The next run (policy-major index) to fold in.
    next: u64,
    pending: BTreeMap<u64, aggregate::RunSummary>,
    accs: Vec<aggregate::Acc>,
    error: Option<String>,
}

impl Fold {
    fn fold(&mut self, per_policy: u64) {
        while let Some(summary) = self.pending.remove(&self.next) {
            self.accs[(self.next / per_policy) as usize].add(summary);
            self.next += 1;
        }
    }
}

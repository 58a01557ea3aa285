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

mod baselines;
mod dist;
mod engine;
mod plot;
mod policy;
mod queue;
mod report;
mod scenario;
pub mod suite;
mod truth;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

pub use dist::Dist;
pub use plot::plot_svg;
pub use policy::{PolicySpec, POLICY_NAMES};
pub use report::{ArmReport, PolicyReport, Report, Summary};
pub use scenario::{
    Action, CandidateSpec, CoordinatorSpec, LoopKind, Scenario, ScenarioError, Slowdown,
    TimelineEvent, Workload, BUILTIN,
};
pub use truth::{AttemptResult, Truth};

/// Called after each finished run with (runs done, runs in all).
pub type Progress<'a> = &'a (dyn Fn(usize, usize) + Sync);

/// Runs every policy on every seed, `threads` runs at a time, and returns the means.
///
/// Results are identical for any `threads`: each run has its own seeded streams and results
/// are collected by (policy, seed) position.
pub fn simulate(
    scenario: &Scenario,
    policies: &[PolicySpec],
    seeds: &[u64],
    threads: usize,
    progress: Option<Progress<'_>>,
) -> Result<Report, String> {
    if policies.is_empty() || seeds.is_empty() {
        return Err("nothing to run: no policy or no seed".into());
    }
    let jobs: Vec<(usize, usize)> = (0..policies.len())
        .flat_map(|p| (0..seeds.len()).map(move |s| (p, s)))
        .collect();
    // Build every engine first so a bad policy config fails before any work.
    for p in policies {
        engine::Engine::new(scenario, p, seeds[0])?;
    }
    let results: Vec<Mutex<Option<report::RunStats>>> =
        jobs.iter().map(|_| Mutex::new(None)).collect();
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let first_error: Mutex<Option<String>> = Mutex::new(None);
    std::thread::scope(|scope| {
        for _ in 0..threads.clamp(1, jobs.len()) {
            scope.spawn(|| loop {
                let j = next.fetch_add(1, Ordering::Relaxed);
                let Some(&(p, s)) = jobs.get(j) else { break };
                match engine::Engine::new(scenario, &policies[p], seeds[s]) {
                    Ok(e) => {
                        let stats = e.run();
                        if let Ok(mut slot) = results[j].lock() {
                            *slot = Some(stats);
                        }
                    }
                    Err(e) => {
                        if let Ok(mut f) = first_error.lock() {
                            f.get_or_insert(e);
                        }
                    }
                }
                let d = done.fetch_add(1, Ordering::Relaxed) + 1;
                if let Some(cb) = progress {
                    cb(d, jobs.len());
                }
            });
        }
    });
    if let Some(e) = first_error.into_inner().ok().flatten() {
        return Err(e);
    }
    let ids: Vec<String> = scenario.expanded().into_iter().map(|(id, _)| id).collect();
    let mut runs: Vec<Option<report::RunStats>> = results
        .into_iter()
        .map(|m| m.into_inner().ok().flatten())
        .collect();
    let mut reports = Vec::new();
    let mut series = Vec::new();
    for p in 0..policies.len() {
        let mut mine: Vec<report::RunStats> = (0..seeds.len())
            .filter_map(|s| runs[p * seeds.len() + s].take())
            .collect();
        if mine.len() != seeds.len() {
            return Err(format!(
                "policy {}: a run did not finish",
                policies[p].label()
            ));
        }
        let (r, s) = report::aggregate(&ids, &mut mine);
        reports.push(r);
        series.push(s);
    }
    Ok(Report {
        scenario: scenario.name.clone(),
        seeds: seeds.to_vec(),
        policies: reports,
        candidates: ids,
        series,
        timeline: scenario
            .timeline
            .iter()
            .any(|e| matches!(e.action, Action::Degrade | Action::Heal)),
    })
}

//! `selcoord demo --discovery`: the candidates reach the coordinator through the discovery
//! actor (`selection_coordinator::discovery`), as in a deployment that fetches each
//! candidate's info in the background, instead of being added to it directly. Each fetch takes
//! a few simulated milliseconds and a few fail, so the discovery panels of the dashboard move.

use std::cell::RefCell;
use std::collections::{BTreeSet, HashMap};
use std::rc::Rc;
use std::sync::Mutex;
use std::time::Duration;

use actix::{Actor, Addr};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use selection_coordinator::actor::{AddCandidate, Coordinator, RemoveCandidate};
use selection_coordinator::discovery::{
    Discovery, DiscoveryConfig, FetchError, Fetcher, SetCandidates,
};
use selection_coordinator::{CandidateId, CandidateInfo};

/// The shortest and longest simulated fetch, scenario milliseconds.
const FETCH_MS: (f64, f64) = (2.0, 40.0);

/// The share of fetches that fail.
const FETCH_FAILURES: f64 = 0.02;

/// The discovery flags of `selcoord demo`.
#[derive(Debug, clap::Args)]
pub(crate) struct DiscoveryArgs {
    /// Add the candidates through the discovery actor: it fetches every candidate's info in
    /// batches (each fetch takes 2-40 simulated ms, 2 % fail), caches it, and refetches it
    /// every `--discovery-interval`; the timeline's joins and leaves change what it knows
    /// (`docs/discovery.md`). Its metrics fill the dashboard's Discovery row.
    #[arg(long)]
    discovery: bool,
    /// Seconds between two discovery refresh passes (real seconds); cached info expires after
    /// two of them.
    #[arg(
        long,
        default_value_t = 5.0,
        requires = "discovery",
        allow_negative_numbers = true
    )]
    discovery_interval: f64,
}

impl DiscoveryArgs {
    /// Seconds between two refresh passes.
    pub(crate) fn interval_s(&self) -> f64 {
        self.discovery_interval
    }

    /// The discovery config the flags ask for, or why it cannot run.
    pub(crate) fn config(&self) -> Result<Option<DiscoveryConfig>, String> {
        if !self.discovery {
            return Ok(None);
        }
        let config = DiscoveryConfig {
            interval_s: self.discovery_interval,
            expiry_s: 2.0 * self.discovery_interval,
            // The demo's workers do not announce their requests to discovery.
            idle_pause_s: None,
            ..DiscoveryConfig::default()
        };
        config
            .validate()
            .map_err(|e| format!("--discovery-interval: {e}"))?;
        Ok(Some(config))
    }
}

/// Fetches a scenario candidate's info after a simulated delay; a few fetches fail.
pub(crate) struct DemoFetcher {
    infos: HashMap<String, CandidateInfo>,
    rng: Mutex<SmallRng>,
    speed: f64,
}

impl Fetcher for DemoFetcher {
    async fn fetch(&self, id: &CandidateId) -> Result<CandidateInfo, FetchError> {
        let (ms, fails) = {
            // A poisoned lock only means another fetch panicked; its generator is still usable.
            let mut rng = self.rng.lock().unwrap_or_else(|p| p.into_inner());
            (
                rng.random_range(FETCH_MS.0..FETCH_MS.1),
                rng.random_bool(FETCH_FAILURES),
            )
        };
        tokio::time::sleep(Duration::from_secs_f64(ms / 1000.0 / self.speed)).await;
        if fails {
            return Err(FetchError::Failed("simulated fetch failure".into()));
        }
        self.infos
            .get(id.as_str())
            .cloned()
            .ok_or_else(|| FetchError::Failed(format!("{id} is not in the scenario")))
    }
}

/// How candidates join and leave the coordinator: directly, or through discovery.
#[derive(Clone)]
pub(crate) enum Membership {
    /// `AddCandidate` and `RemoveCandidate` go straight to the coordinator.
    Direct(Addr<Coordinator>),
    /// Discovery knows the candidates present and adds them once it has their info.
    Discovered {
        discovery: Addr<Discovery<DemoFetcher>>,
        present: Rc<RefCell<BTreeSet<String>>>,
    },
}

impl Membership {
    /// Starts discovery over the `present` candidates (`config`: `None` adds them directly,
    /// which the caller does). `infos` holds every candidate of the scenario, present or not.
    pub(crate) fn start(
        config: Option<DiscoveryConfig>,
        coordinator: &Addr<Coordinator>,
        infos: HashMap<String, CandidateInfo>,
        present: Vec<String>,
        (seed, speed): (u64, f64),
        metrics_name: Option<&str>,
    ) -> Result<Self, String> {
        let Some(config) = config else {
            return Ok(Membership::Direct(coordinator.clone()));
        };
        let fetcher = DemoFetcher {
            infos,
            rng: Mutex::new(SmallRng::seed_from_u64(seed ^ 0xd15c)),
            speed,
        };
        let ids = present.iter().map(CandidateId::new).collect();
        let mut discovery = Discovery::new(config, ids, fetcher, coordinator.clone())
            .map_err(|e| format!("discovery: {e}"))?
            .with_seed(seed);
        if let Some(name) = metrics_name {
            discovery = discovery.with_metrics_name(name);
        }
        let discovery = discovery.start();
        Ok(Membership::Discovered {
            discovery,
            present: Rc::new(RefCell::new(present.into_iter().collect())),
        })
    }

    /// Whether discovery adds the candidates (so the caller does not).
    pub(crate) fn discovers(&self) -> bool {
        matches!(self, Membership::Discovered { .. })
    }

    /// A candidate joins; false if the coordinator is gone.
    pub(crate) async fn join(&self, info: CandidateInfo) -> bool {
        match self {
            Membership::Direct(c) => c.send(AddCandidate(info)).await.is_ok(),
            Membership::Discovered { present, .. } => {
                present.borrow_mut().insert(info.id.to_string());
                self.tell_discovery().await
            }
        }
    }

    /// A candidate leaves.
    pub(crate) async fn leave(&self, id: &str) {
        match self {
            Membership::Direct(c) => {
                let _ = c.send(RemoveCandidate(CandidateId::new(id))).await;
            }
            Membership::Discovered { present, .. } => {
                present.borrow_mut().remove(id);
                self.tell_discovery().await;
            }
        }
    }

    async fn tell_discovery(&self) -> bool {
        let Membership::Discovered { discovery, present } = self else {
            return true;
        };
        let ids = present.borrow().iter().map(CandidateId::new).collect();
        discovery.send(SetCandidates(ids)).await.is_ok()
    }
}

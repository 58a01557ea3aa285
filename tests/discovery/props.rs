//! Random operation sequences against the catalogue.

use proptest::prelude::*;

use super::*;

#[derive(Clone, Debug)]
enum Op {
    Advance(u64),
    Answer(usize, u8),
    Demand(bool),
    PoolLow,
    RefreshNow,
    SetCandidates(Vec<bool>),
    PerfScores(u8),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (1u64..20_000).prop_map(Op::Advance),
        6 => (0usize..64, 0u8..4).prop_map(|(i, k)| Op::Answer(i, k)),
        2 => any::<bool>().prop_map(Op::Demand),
        1 => Just(Op::PoolLow),
        1 => Just(Op::RefreshNow),
        1 => proptest::collection::vec(any::<bool>(), 12).prop_map(Op::SetCandidates),
        1 => (0u8..3).prop_map(Op::PerfScores),
    ]
}

proptest! {
    #![proptest_config(crate::proptest_seed::config(1000))]

    /// Whatever happens: never more fetches than the batch size, never two fetches of one
    /// candidate at once, the coordinator's view (replayed from the actions) is exactly the
    /// published set, nothing expired stays published, and the next deadline is in the
    /// future (a driver never spins).
    #[test]
    fn the_catalogue_keeps_its_promises(ops in proptest::collection::vec(op(), 1..120), seed in 0u64..1000) {
        let t0 = Instant::now();
        let config = DiscoveryConfig {
            interval_s: 30.0,
            batch_size: 4,
            expiry_s: 45.0,
            idle_pause_s: Some(60.0),
            threshold_backoff_s: 5.0,
            ..DiscoveryConfig::default()
        };
        let mut cat = Catalogue::new(config, t0, SmallRng::seed_from_u64(seed)).unwrap();
        let pool = ids(12);
        let mut now = t0;
        let mut running: Vec<CandidateId> = Vec::new();
        let mut coordinator: HashSet<CandidateId> = HashSet::new();
        cat.set_candidates(pool.clone(), now);
        for op in ops {
            match op {
                Op::Advance(ms_) => {
                    now += ms(ms_);
                    cat.tick(now);
                }
                Op::Answer(i, kind) => {
                    if running.is_empty() {
                        continue;
                    }
                    let id = running[i % running.len()].clone();
                    let result = match kind {
                        0 | 1 => Ok(CandidateInfo::new(id.clone()).with_capability("x")),
                        2 => Err(FetchError::Timeout),
                        _ => Err(FetchError::Failed("no".into())),
                    };
                    prop_assert!(cat.fetched(&id, result, now), "{id} was running");
                    running.retain(|r| r != &id);
                }
                Op::Demand(cap) => {
                    let req: Vec<String> = if cap { vec!["x".into()] } else { vec![] };
                    let n = cat.demand(&req, now);
                    prop_assert_eq!(n, cat.eligible_count(&req, now));
                }
                Op::PoolLow => cat.pool_low(now),
                Op::RefreshNow => cat.refresh_now(now),
                Op::SetCandidates(keep) => {
                    let ids: Vec<CandidateId> = pool
                        .iter()
                        .zip(keep)
                        .filter(|(_, k)| *k)
                        .map(|(id, _)| id.clone())
                        .collect();
                    cat.set_candidates(ids, now);
                }
                Op::PerfScores(v) => {
                    let scores = pool.iter().map(|id| (id.clone(), f64::from(v))).collect::<Vec<_>>();
                    cat.set_perf_scores("FRA", scores, now);
                }
            }
            while let Some(a) = cat.poll_action() {
                match a {
                    Action::Fetch(id) => {
                        prop_assert!(!running.contains(&id), "{id} fetched twice at once");
                        running.push(id);
                    }
                    Action::Cancel(id) => {
                        prop_assert!(running.contains(&id), "cancel of {id} not running");
                        running.retain(|r| r != &id);
                    }
                    Action::Add(info) => prop_assert!(coordinator.insert(info.id.clone()), "double add"),
                    Action::Update(info) => prop_assert!(coordinator.contains(&info.id), "update of absent"),
                    Action::Remove(id) => prop_assert!(coordinator.remove(&id), "remove of absent"),
                    Action::RefreshDone(r) => {
                        prop_assert!(r.answered + r.timed_out + r.failed <= r.fetches, "{r:?}")
                    }
                }
            }
            prop_assert!(running.len() <= 4);
            prop_assert_eq!(running.len(), cat.in_flight());
            prop_assert_eq!(coordinator.len(), cat.cache_size());
            prop_assert_eq!(cat.eligible_count(&[], now), cat.cache_size(), "expired info still published");
            for id in &coordinator {
                prop_assert!(cat.entry(id).is_some_and(|e| e.published));
            }
            if let Some(t) = cat.next_deadline() {
                prop_assert!(t > now, "deadline {:?} not after now", t.saturating_duration_since(t0));
            }
        }
    }
}

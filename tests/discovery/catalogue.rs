//! The pure catalogue, driven by hand in virtual time.

use super::*;

#[test]
fn a_pass_fetches_everyone_once_in_batches_of_the_cap() {
    let t0 = Instant::now();
    let config = DiscoveryConfig {
        batch_size: 100,
        ..DiscoveryConfig::default()
    };
    let mut cat = catalogue(config, 7, t0);
    cat.set_candidates(ids(250), t0);
    let mut seen = HashSet::new();
    let mut t = t0;
    let mut batch = fetches(&drain(&mut cat));
    let mut sizes = Vec::new();
    while !batch.is_empty() {
        sizes.push(batch.len());
        assert_eq!(cat.in_flight(), batch.len());
        for id in &batch {
            assert!(seen.insert(id.clone()), "{id} fetched twice in one pass");
        }
        t += ms(50);
        batch = fetches(&answer_all(&mut cat, &batch, t));
    }
    assert_eq!(sizes, vec![100, 100, 50]);
    assert_eq!(seen.len(), 250);
    assert_eq!(cat.stats().passes, 1);
    assert_eq!(cat.stats().peak_in_flight, 100);
    assert_eq!(cat.cache_size(), 250);
    // The next pass starts one interval after the first started, not earlier.
    cat.tick(t0 + Duration::from_secs(899));
    assert!(fetches(&drain(&mut cat)).is_empty());
    cat.tick(t0 + Duration::from_secs(900));
    assert_eq!(fetches(&drain(&mut cat)).len(), 100);
}

#[test]
fn the_order_is_shuffled_by_a_seeded_rng() {
    let t0 = Instant::now();
    let order = |seed| {
        let mut cat = catalogue(DiscoveryConfig::default(), seed, t0);
        cat.set_candidates(ids(50), t0);
        fetches(&drain(&mut cat))
    };
    assert_eq!(order(1), order(1));
    assert_ne!(order(1), order(2));
    assert_ne!(order(1), ids(50), "not shuffled");
}

#[test]
fn the_cutoff_grows_while_nobody_answers_and_stops_once_someone_does() {
    let t0 = Instant::now();
    let mut cat = catalogue(DiscoveryConfig::default(), 1, t0);
    cat.set_candidates(ids(3), t0);
    let batch = fetches(&drain(&mut cat));
    assert_eq!(batch.len(), 3);
    // Nobody answers: the wait grows 0.5 -> 1 -> 2 s without cutting anyone.
    for at in [ms(500), ms(1000)] {
        cat.tick(t0 + at);
        assert!(
            drain(&mut cat).is_empty(),
            "cut at {at:?} with no answer yet"
        );
        assert_eq!(cat.in_flight(), 3);
    }
    assert_eq!(cat.next_deadline(), Some(t0 + secs(2)));
    // One answers at 1.5 s; the others are cut at the next checkpoint (2 s).
    let first = batch[0].clone();
    assert!(cat.fetched(&first, Ok(CandidateInfo::new(first.clone())), t0 + ms(1500)));
    cat.tick(t0 + ms(1999));
    assert_eq!(cat.in_flight(), 2);
    cat.tick(t0 + secs(2));
    let actions = drain(&mut cat);
    let cancelled: HashSet<_> = actions
        .iter()
        .filter_map(|a| match a {
            Action::Cancel(id) => Some(id.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(cancelled, batch[1..].iter().cloned().collect());
    assert_eq!(added(&actions), vec![first]);
    assert_eq!(cat.stats().timeouts, 2);
    // A cut fetch answering late is ignored.
    assert!(!cat.fetched(
        &batch[1],
        Ok(CandidateInfo::new(batch[1].clone())),
        t0 + secs(3)
    ));
    assert_eq!(cat.stats().late, 1);
}

#[test]
fn with_no_answer_at_all_everything_is_cut_at_the_last_checkpoint() {
    let t0 = Instant::now();
    let mut cat = catalogue(DiscoveryConfig::default(), 1, t0);
    cat.set_candidates(ids(4), t0);
    drain(&mut cat);
    let mut t = t0;
    let mut cut_at = None;
    while cut_at.is_none() {
        t = cat.next_deadline().expect("a checkpoint is armed");
        cat.tick(t);
        if drain(&mut cat)
            .iter()
            .any(|a| matches!(a, Action::Cancel(_)))
        {
            cut_at = Some(t);
        }
    }
    assert_eq!(cut_at, Some(t0 + secs(6)));
    assert_eq!(cat.stats().timeouts, 4);
    assert_eq!(cat.cache_size(), 0);
    assert!(t > t0);
}

#[test]
fn answers_are_added_fastest_first_within_a_batch() {
    let t0 = Instant::now();
    let mut cat = catalogue(DiscoveryConfig::default(), 9, t0);
    cat.set_candidates(ids(20), t0);
    let batch = fetches(&drain(&mut cat));
    let mut rng = SmallRng::seed_from_u64(4);
    let mut latency: HashMap<CandidateId, u64> = HashMap::new();
    for id in &batch {
        latency.insert(id.clone(), rng.random_range(1..400));
    }
    // Deliver in an arbitrary order, each at its own latency (all before the 0.5 s cutoff).
    let mut by_arrival: Vec<_> = batch.clone();
    by_arrival.sort_by_key(|id| latency[id]);
    let mut actions = Vec::new();
    for id in &by_arrival {
        cat.fetched(id, Ok(CandidateInfo::new(id.clone())), t0 + ms(latency[id]));
        actions.extend(drain(&mut cat));
    }
    let order = added(&actions);
    assert_eq!(order.len(), 20);
    let lats: Vec<u64> = order.iter().map(|id| latency[id]).collect();
    assert!(lats.windows(2).all(|w| w[0] <= w[1]), "{lats:?}");
    // The catalogue keeps the latency too.
    let eligible: Vec<u64> = cat
        .eligible(&[], t0 + secs(1))
        .iter()
        .map(|i| latency[&i.id])
        .collect();
    assert!(eligible.windows(2).all(|w| w[0] <= w[1]));
    assert_eq!(
        cat.entry(&order[0]).unwrap().latency,
        Some(ms(latency[&order[0]]))
    );
}

#[test]
fn expired_info_is_removed_then_refetched_and_added_back() {
    let t0 = Instant::now();
    let config = DiscoveryConfig {
        interval_s: 100.0,
        expiry_s: 150.0,
        idle_pause_s: None,
        ..DiscoveryConfig::default()
    };
    let (mut cat, _) = answered_pass(config, 3, t0, t0 + ms(10));
    // The refresh at 100 s fails for everyone: the info stays valid until it expires.
    cat.tick(t0 + secs(100));
    for id in fetches(&drain(&mut cat)) {
        cat.fetched(
            &id,
            Err(FetchError::Failed("down".into())),
            t0 + ms(100_001),
        );
    }
    drain(&mut cat);
    assert_eq!(cat.eligible_count(&[], t0 + secs(149)), 3);
    assert_eq!(cat.next_deadline(), Some(t0 + ms(150_010)));
    // At expiry: out of the coordinator and the pool, and refetched at once.
    let at = t0 + ms(150_010);
    assert_eq!(
        cat.eligible_count(&[], at),
        0,
        "expired info is not eligible"
    );
    cat.tick(at);
    let actions = drain(&mut cat);
    let removed: HashSet<_> = actions
        .iter()
        .filter_map(|a| match a {
            Action::Remove(id) => Some(id.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(removed.len(), 3);
    let refetch = fetches(&actions);
    assert_eq!(refetch.len(), 3);
    // One answers, one fails, one is cut: only the first comes back.
    cat.fetched(
        &refetch[0],
        Ok(CandidateInfo::new(refetch[0].clone())),
        at + ms(20),
    );
    cat.fetched(
        &refetch[1],
        Err(FetchError::Failed("refused".into())),
        at + ms(30),
    );
    cat.tick(at + ms(500));
    let back = added(&drain(&mut cat));
    assert_eq!(back, vec![refetch[0].clone()]);
    assert_eq!(cat.eligible_count(&[], at + secs(1)), 1);
    assert_eq!(cat.stats().errors, 3 + 1);
}

#[test]
fn a_failed_refresh_keeps_valid_info_until_it_expires() {
    let t0 = Instant::now();
    let config = DiscoveryConfig {
        interval_s: 100.0,
        expiry_s: 150.0,
        idle_pause_s: None,
        ..DiscoveryConfig::default()
    };
    let (mut cat, batch) = answered_pass(config, 1, t0, t0);
    cat.tick(t0 + secs(100));
    let again = fetches(&drain(&mut cat));
    assert_eq!(again, batch);
    cat.fetched(&again[0], Err(FetchError::Timeout), t0 + secs(101));
    assert_eq!(drain(&mut cat).len(), 1, "only the pass report");
    assert_eq!(cat.eligible_count(&[], t0 + secs(149)), 1);
    assert_eq!(cat.entry(&again[0]).unwrap().failures, 1);
    cat.tick(t0 + secs(150));
    assert!(drain(&mut cat).contains(&Action::Remove(again[0].clone())));
}

#[test]
fn refreshing_pauses_when_idle_and_resumes_on_demand() {
    let t0 = Instant::now();
    let config = DiscoveryConfig {
        interval_s: 50.0,
        expiry_s: 120.0,
        idle_pause_s: Some(100.0),
        ..DiscoveryConfig::default()
    };
    let (mut cat, _) = answered_pass(config, 5, t0, t0 + ms(10));
    cat.tick(t0 + secs(50));
    let batch = fetches(&drain(&mut cat));
    assert_eq!(batch.len(), 5, "second pass before going idle");
    answer_all(&mut cat, &batch, t0 + secs(50) + ms(10));
    // 100 s without a request: the pass due at 100 s does not start.
    assert!(cat.paused(t0 + secs(100)));
    cat.tick(t0 + secs(100));
    assert!(fetches(&drain(&mut cat)).is_empty());
    // Only expiry is left: it removes (at 170.01 s) but does not refetch while idle.
    let mut removed_at = Vec::new();
    while let Some(t) = cat.next_deadline() {
        assert!(
            t <= t0 + secs(171),
            "a deadline past the last expiry: {:?}",
            t - t0
        );
        cat.tick(t);
        let actions = drain(&mut cat);
        assert!(fetches(&actions).is_empty(), "fetched while idle");
        for a in actions {
            if let Action::Remove(_) = a {
                removed_at.push(t - t0);
            }
        }
    }
    assert_eq!(removed_at, vec![secs(170) + ms(10); 5]);
    assert_eq!(cat.next_deadline(), None, "nothing to do until a request");
    // A request resumes at once.
    let eligible = cat.demand(&[], t0 + secs(200));
    assert_eq!(eligible, 0);
    assert!(!cat.paused(t0 + secs(200)));
    assert_eq!(fetches(&drain(&mut cat)).len(), 5);
    assert_eq!(cat.stats().fetches, 15);
}

#[test]
fn a_small_eligible_pool_triggers_an_immediate_refresh_within_the_backoff() {
    let t0 = Instant::now();
    let config = DiscoveryConfig {
        interval_s: 900.0,
        threshold_backoff_s: 10.0,
        idle_pause_s: None,
        ..DiscoveryConfig::default()
    };
    let mut cat = catalogue(config, 1, t0);
    cat.set_candidates(ids(10), t0);
    assert_eq!(cat.threshold(), 5, "min(8, ceil(10/2))");
    let batch = fetches(&drain(&mut cat));
    // Only 4 answer; 6 fail.
    for (k, id) in batch.iter().enumerate() {
        let r = if k < 4 {
            Ok(CandidateInfo::new(id.clone()))
        } else {
            Err(FetchError::Failed("down".into()))
        };
        cat.fetched(id, r, t0 + ms(10));
    }
    drain(&mut cat);
    assert!(!cat.refreshing());
    // A request sees 4 < 5: a pass starts now instead of at 900 s.
    assert_eq!(cat.demand(&[], t0 + secs(1)), 4);
    let actions = drain(&mut cat);
    assert_eq!(fetches(&actions).len(), 10);
    assert_eq!(cat.stats().threshold_refreshes, 1);
    let batch = fetches(&actions);
    for id in &batch {
        cat.fetched(
            id,
            Err(FetchError::Failed("down".into())),
            t0 + secs(1) + ms(10),
        );
    }
    let done = drain(&mut cat);
    assert!(done.iter().any(|a| matches!(
        a,
        Action::RefreshDone(r) if r.reason == RefreshReason::PoolThreshold && r.failed == 10
    )));
    // Still too few, but within the 10 s backoff: no new pass until 11 s.
    cat.demand(&[], t0 + secs(5));
    assert!(fetches(&drain(&mut cat)).is_empty());
    assert_eq!(cat.next_deadline(), Some(t0 + secs(11)));
    cat.tick(t0 + secs(11));
    assert_eq!(fetches(&drain(&mut cat)).len(), 10);
    assert_eq!(cat.stats().threshold_refreshes, 2);
}

#[test]
fn capabilities_are_checked_against_the_cache() {
    let t0 = Instant::now();
    let mut cat = catalogue(DiscoveryConfig::default(), 1, t0);
    cat.set_candidates(ids(3), t0);
    let batch = fetches(&drain(&mut cat));
    for (k, id) in batch.iter().enumerate() {
        let mut info = CandidateInfo::new(id.clone()).with_capability("h264");
        if k == 0 {
            info = info.with_capability("av1");
        }
        cat.fetched(id, Ok(info), t0 + ms(5));
    }
    drain(&mut cat);
    let t = t0 + secs(1);
    assert_eq!(cat.eligible_count(&["h264".into()], t), 3);
    let av1 = cat.eligible(&["h264".into(), "av1".into()], t);
    assert_eq!(av1.len(), 1);
    assert_eq!(av1[0].id, batch[0]);
    assert_eq!(cat.eligible_count(&["vp9".into()], t), 0);
}

#[test]
fn info_for_another_id_or_with_bad_numbers_is_refused() {
    let t0 = Instant::now();
    let mut cat = catalogue(DiscoveryConfig::default(), 1, t0);
    cat.set_candidates(ids(2), t0);
    let batch = fetches(&drain(&mut cat));
    cat.fetched(
        &batch[0],
        Ok(CandidateInfo::new("someone-else")),
        t0 + ms(5),
    );
    cat.fetched(
        &batch[1],
        Ok(CandidateInfo::new(batch[1].clone()).with_stake(f64::NAN)),
        t0 + ms(5),
    );
    assert!(added(&drain(&mut cat)).is_empty());
    assert_eq!(cat.stats().invalid, 2);
}

#[test]
fn perf_scores_are_merged_and_pushed_as_updates() {
    let t0 = Instant::now();
    let (mut cat, batch) = answered_pass(DiscoveryConfig::default(), 2, t0, t0 + ms(5));
    cat.set_perf_scores(
        "FRA",
        vec![(batch[0].clone(), 0.8), (batch[1].clone(), f64::NAN)],
        t0,
    );
    let actions = drain(&mut cat);
    assert_eq!(actions.len(), 1, "{actions:?}");
    match &actions[0] {
        Action::Update(info) => {
            assert_eq!(info.id, batch[0]);
            assert_eq!(info.perf_scores["FRA"], 0.8);
        }
        other => panic!("expected an update, got {other:?}"),
    }
    // The same scores again change nothing.
    cat.set_perf_scores("FRA", vec![(batch[0].clone(), 0.8)], t0);
    assert!(drain(&mut cat).is_empty());
}

#[test]
fn candidates_dropped_by_the_source_are_removed_and_new_ones_fetched() {
    let t0 = Instant::now();
    let (mut cat, _) = answered_pass(DiscoveryConfig::default(), 3, t0, t0 + ms(5));
    let mut next = ids(2);
    next.push(CandidateId::new("new"));
    cat.set_candidates(next, t0 + secs(1));
    let actions = drain(&mut cat);
    assert!(actions.contains(&Action::Remove(CandidateId::new("c0002"))));
    assert_eq!(fetches(&actions), vec![CandidateId::new("new")]);
}

#[test]
fn a_success_resets_the_failure_count() {
    let t0 = Instant::now();
    let config = DiscoveryConfig {
        interval_s: 100.0,
        expiry_s: 150.0,
        idle_pause_s: None,
        ..DiscoveryConfig::default()
    };
    let mut cat = catalogue(config, 1, t0);
    cat.set_candidates(ids(1), t0);
    let batch = fetches(&drain(&mut cat));
    cat.fetched(&batch[0], Err(FetchError::Timeout), t0 + ms(10));
    drain(&mut cat);
    assert_eq!(cat.entry(&batch[0]).unwrap().failures, 1);
    cat.tick(t0 + secs(100));
    let again = fetches(&drain(&mut cat));
    assert_eq!(again, batch);
    answer_all(&mut cat, &again, t0 + secs(100) + ms(10));
    assert_eq!(cat.entry(&batch[0]).unwrap().failures, 0);
}

#[test]
fn a_perf_score_of_zero_is_merged() {
    let t0 = Instant::now();
    let (mut cat, batch) = answered_pass(DiscoveryConfig::default(), 1, t0, t0 + ms(5));
    cat.set_perf_scores("FRA", vec![(batch[0].clone(), 0.0)], t0 + ms(6));
    match drain(&mut cat).as_slice() {
        [Action::Update(info)] => assert_eq!(info.perf_scores.get("FRA"), Some(&0.0)),
        other => panic!("expected one update, got {other:?}"),
    }
}

#[test]
fn candidates_added_while_idle_are_fetched_when_requests_resume() {
    let t0 = Instant::now();
    let config = DiscoveryConfig {
        interval_s: 300.0,
        expiry_s: 600.0,
        idle_pause_s: Some(100.0),
        ..DiscoveryConfig::default()
    };
    let (mut cat, _) = answered_pass(config, 2, t0, t0 + ms(10));
    assert!(cat.paused(t0 + secs(150)));
    cat.set_candidates(ids(3), t0 + secs(150));
    assert!(fetches(&drain(&mut cat)).is_empty(), "fetched while idle");
    cat.demand(&[], t0 + secs(160));
    assert_eq!(fetches(&drain(&mut cat)), vec![CandidateId::new("c0002")]);
}

#[test]
fn a_candidate_that_failed_before_going_idle_is_fetched_when_requests_resume() {
    let t0 = Instant::now();
    let config = DiscoveryConfig {
        interval_s: 300.0,
        expiry_s: 600.0,
        idle_pause_s: Some(100.0),
        ..DiscoveryConfig::default()
    };
    let mut cat = catalogue(config, 1, t0);
    cat.set_candidates(ids(2), t0);
    let batch = fetches(&drain(&mut cat));
    cat.fetched(
        &batch[0],
        Ok(CandidateInfo::new(batch[0].clone())),
        t0 + ms(10),
    );
    cat.fetched(&batch[1], Err(FetchError::Timeout), t0 + ms(10));
    drain(&mut cat);
    // Resumed before the next pass is due: the one without info is fetched at once.
    cat.demand(&[], t0 + secs(150));
    assert_eq!(fetches(&drain(&mut cat)), vec![batch[1].clone()]);
}

#[test]
fn info_that_expires_again_is_refetched_again() {
    let t0 = Instant::now();
    let config = DiscoveryConfig {
        interval_s: 100.0,
        expiry_s: 170.0,
        idle_pause_s: None,
        ..DiscoveryConfig::default()
    };
    let mut cat = catalogue(config, 1, t0);
    cat.set_candidates(ids(1), t0);
    let id = fetches(&drain(&mut cat))[0].clone();
    let ok = || Ok(CandidateInfo::new(ids(1)[0].clone()));
    cat.fetched(&id, ok(), t0);
    drain(&mut cat);
    // Every pass fails; each expiry removes the candidate and fetches it at once.
    let mut refetched_at = Vec::new();
    for s in [100, 170, 200, 300, 340] {
        let t = t0 + secs(s);
        assert_eq!(cat.next_deadline(), Some(t));
        cat.tick(t);
        let actions = drain(&mut cat);
        if actions.contains(&Action::Remove(id.clone())) {
            assert_eq!(fetches(&actions), vec![id.clone()], "at {s} s");
            refetched_at.push(s);
            cat.fetched(&id, ok(), t);
        } else {
            assert_eq!(fetches(&actions), vec![id.clone()], "pass at {s} s");
            cat.fetched(&id, Err(FetchError::Failed("down".into())), t);
        }
        drain(&mut cat);
    }
    assert_eq!(refetched_at, vec![170, 340]);
}

#[test]
fn a_pool_at_the_threshold_triggers_no_refresh() {
    let t0 = Instant::now();
    let config = DiscoveryConfig {
        idle_pause_s: None,
        ..DiscoveryConfig::default()
    };
    let mut cat = catalogue(config, 1, t0);
    cat.set_candidates(ids(10), t0);
    let batch = fetches(&drain(&mut cat));
    for (k, id) in batch.iter().enumerate() {
        let r = if k < 5 {
            Ok(CandidateInfo::new(id.clone()))
        } else {
            Err(FetchError::Failed("down".into()))
        };
        cat.fetched(id, r, t0 + ms(10));
    }
    drain(&mut cat);
    assert_eq!(cat.demand(&[], t0 + secs(1)), 5);
    assert!(fetches(&drain(&mut cat)).is_empty());
    assert_eq!(cat.stats().threshold_refreshes, 0);
}

#[test]
fn a_request_during_a_pass_triggers_no_second_pass() {
    let t0 = Instant::now();
    let config = DiscoveryConfig {
        idle_pause_s: None,
        ..DiscoveryConfig::default()
    };
    let mut cat = catalogue(config, 1, t0);
    cat.set_candidates(ids(10), t0);
    let batch = fetches(&drain(&mut cat));
    // The first fill is running: nothing is eligible yet, and no other pass is asked for.
    assert_eq!(cat.demand(&[], t0 + ms(1)), 0);
    cat.pool_low(t0 + ms(2));
    answer_all(&mut cat, &batch, t0 + ms(10));
    assert!(!cat.refreshing());
    assert_eq!(cat.stats().threshold_refreshes, 0);
    assert_eq!(cat.next_deadline(), Some(t0 + secs(900)));
}

#[test]
fn expired_info_leaves_the_pool_at_its_expiry_instant() {
    let t0 = Instant::now();
    let config = DiscoveryConfig {
        interval_s: 100.0,
        expiry_s: 150.0,
        idle_pause_s: None,
        ..DiscoveryConfig::default()
    };
    let (cat, _) = answered_pass(config, 2, t0, t0);
    let before = t0 + secs(150) - ms(1);
    assert_eq!(cat.eligible(&[], before).len(), 2);
    let at = t0 + secs(150);
    assert!(cat.eligible(&[], at).is_empty());
    assert_eq!(cat.eligible_count(&[], at), 0);
}

#[test]
fn no_deadline_is_given_for_a_refresh_due_as_the_idle_pause_begins() {
    let t0 = Instant::now();
    let config = DiscoveryConfig {
        interval_s: 100.0,
        expiry_s: 200.0,
        idle_pause_s: Some(100.0),
        ..DiscoveryConfig::default()
    };
    let (mut cat, _) = answered_pass(config, 2, t0, t0);
    // The refresh due at 100 s never starts (idle from 100 s): the next thing is the expiry.
    assert_eq!(cat.next_deadline(), Some(t0 + secs(200)));
    cat.tick(t0 + secs(100));
    assert!(drain(&mut cat).is_empty());
}

/// A catalogue (seed 1) over `n` candidates set at `t0`, whose first pass's fetches were all
/// answered at `at`; with the ids fetched.
fn answered_pass(
    config: DiscoveryConfig,
    n: usize,
    t0: Instant,
    at: Instant,
) -> (Catalogue, Vec<CandidateId>) {
    let mut cat = catalogue(config, 1, t0);
    cat.set_candidates(ids(n), t0);
    let batch = fetches(&drain(&mut cat));
    answer_all(&mut cat, &batch, at);
    (cat, batch)
}

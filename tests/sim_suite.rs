//! The generated scenario suite: determinism, dump and rerun, validity of every family over
//! many seeds, the summary arithmetic and the JSON shape.

use std::process::Command;

use selection_coordinator::sim::suite::{
    generate, generate_suite, run_suite, Family, Instance, InstanceFigures, SuiteReport, World,
};
use selection_coordinator::sim::{
    simulate, Action, CandidateSpec, Dist, LoopKind, PolicySpec, Scenario,
};
use selection_coordinator::FailureClass;

/// A few policies keep the debug-build runs short; the oracle is the reference.
const POLICIES: [&str; 3] = ["coordinator", "oracle", "p2c-peak-ewma"];

fn names() -> Vec<String> {
    POLICIES.iter().map(|s| s.to_string()).collect()
}

fn specs() -> Vec<PolicySpec> {
    POLICIES
        .iter()
        .map(|n| PolicySpec::parse(n).unwrap())
        .collect()
}

#[test]
fn the_same_seed_gives_the_same_scenarios_and_figures() {
    let a = generate_suite(&Family::ALL, 1, 11, &names()).unwrap();
    let b = generate_suite(&Family::ALL, 1, 11, &names()).unwrap();
    assert_eq!(a.len(), 7);
    for (x, y) in a.iter().zip(&b) {
        assert_eq!(x.text, y.text);
        assert_eq!(x.seed, y.seed);
    }
    // Another seed gives other scenarios.
    let c = generate_suite(&Family::ALL, 1, 12, &names()).unwrap();
    for (x, z) in a.iter().zip(&c) {
        assert_ne!(x.text, z.text, "{}", x.scenario.name);
    }
    // The thread count changes nothing.
    let r1 = run_suite(11, &a, &specs(), 1, None).unwrap();
    let r2 = run_suite(11, &b, &specs(), 2, None).unwrap();
    assert_eq!(r1, r2);
    assert_eq!(r1.to_json(), r2.to_json());
}

#[test]
fn a_family_does_not_depend_on_the_others_run_with_it() {
    let alone = generate_suite(&[Family::Flap], 3, 5, &names()).unwrap();
    let mixed = generate_suite(&[Family::Churn, Family::Flap], 3, 5, &names()).unwrap();
    let flaps: Vec<_> = mixed.iter().filter(|g| g.family == Family::Flap).collect();
    assert_eq!(flaps.len(), 3);
    for (a, b) in alone.iter().zip(flaps) {
        assert_eq!(a.text, b.text);
    }
}

#[test]
fn family_lists_parse() {
    assert_eq!(Family::parse_list(&["all"]).unwrap(), Family::ALL.to_vec());
    assert_eq!(
        Family::parse_list(&["outage,drift", "outage"]).unwrap(),
        vec![Family::Outage, Family::Drift]
    );
    let e = Family::parse_list(&["outage,nope"]).unwrap_err();
    assert!(e.contains("nope") && e.contains("degrade-heal"), "{e}");
    assert!(Family::parse_list::<&str>(&[]).is_err());
}

/// Every dumped file reruns, through `--scenario` and `--seed`, to the figures the suite
/// reported for it.
#[test]
fn a_dumped_scenario_reruns_to_the_same_figures() {
    let gens = generate_suite(&Family::ALL, 1, 3, &names()).unwrap();
    let report = run_suite(3, &gens, &specs(), 2, None).unwrap();
    let dir = tempfile::tempdir().unwrap();
    for (g, inst) in gens.iter().zip(&report.instances) {
        let path = dir.path().join(format!("{}.toml", g.scenario.name));
        std::fs::write(&path, &g.text).unwrap();
        let sc = Scenario::load(path.to_str().unwrap()).unwrap();
        assert_eq!(sc.policies, names());
        let rerun = simulate(&sc, &specs(), &[g.seed], 1, None).unwrap();
        let oracle = rerun.policies.iter().find(|p| p.policy == "oracle");
        for (p, want) in rerun.policies.iter().zip(&inst.policies) {
            assert_eq!(
                &InstanceFigures::new(&p.policy, p, oracle),
                want,
                "{}",
                sc.name
            );
        }
        assert_eq!(inst.seed, g.seed);
    }
}

fn json_of(path: &std::path::Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The command line: `--suite --count 1 --dump DIR` writes files that
/// `--scenario DIR/x.toml --seed N` reruns with the same figures.
#[test]
fn the_command_line_dumps_and_reruns() {
    let dir = tempfile::tempdir().unwrap();
    let dump = dir.path().join("dump");
    let suite_json = dir.path().join("suite.json");
    let out = Command::new(env!("CARGO_BIN_EXE_selcoord"))
        .args([
            "simulate",
            "--suite",
            "degrade-heal",
            "--count",
            "1",
            "--seed",
            "9",
        ])
        .args([
            "--policies",
            "coordinator,oracle",
            "--threads",
            "2",
            "--dump",
        ])
        .arg(&dump)
        .arg("--json")
        .arg(&suite_json)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("family degrade-heal: 1 scenario,"),
        "{stdout}"
    );
    let suite = json_of(&suite_json);
    let inst = &suite["instances"][0];
    let file = dump.join("degrade-heal-0.toml");
    let text = std::fs::read_to_string(&file).unwrap();
    let seed = inst["seed"].as_u64().unwrap();
    assert!(text.contains(&format!("--seed {seed}")), "{text}");
    let rerun_json = dir.path().join("rerun.json");
    let out = Command::new(env!("CARGO_BIN_EXE_selcoord"))
        .args(["simulate", "--scenario"])
        .arg(&file)
        .args([
            "--seed",
            &seed.to_string(),
            "--policies",
            "coordinator,oracle",
            "--json",
        ])
        .arg(&rerun_json)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rerun = json_of(&rerun_json);
    for (k, p) in rerun["policies"].as_array().unwrap().iter().enumerate() {
        let want = &inst["policies"][k];
        assert_eq!(p["policy"], want["policy"]);
        for (field, theirs) in [
            ("detection_fair_s", &p["detection_s"]),
            ("recovery_fair_s", &p["recovery_s"]),
            ("error_rate", &p["error_rate"]),
            ("ttfb_mean_ms", &p["ttfb_ms"]["mean"]),
            ("virtual_s", &p["virtual_s"]),
        ] {
            assert_eq!(&want[field], theirs, "{field}");
        }
    }
    // --suite and --scenario do not go together.
    let out = Command::new(env!("CARGO_BIN_EXE_selcoord"))
        .args(["simulate", "--suite", "flap", "--scenario", "recovery"])
        .output()
        .unwrap();
    assert!(!out.status.success());
}

fn count_present(sc: &Scenario) -> usize {
    sc.candidates
        .iter()
        .filter(|c| c.present)
        .map(|c| c.count as usize)
        .sum()
}

/// 200 seeds per family: every scenario parses and validates, and has its family's shape.
#[test]
fn every_family_generates_valid_scenarios_for_many_seeds() {
    let (mut heavy_seen, mut all_seen) = (0usize, 0usize);
    for family in Family::ALL {
        for seed in 0..200u64 {
            let g = generate(family, seed, (seed % 7) as usize, &names())
                .unwrap_or_else(|e| panic!("{} seed {seed}: {e}", family.name()));
            let sc = &g.scenario;
            let n = sc.expanded().len();
            let tl = &sc.timeline;
            let degrades = tl.iter().filter(|e| e.action == Action::Degrade).count();
            let heals = tl.iter().filter(|e| e.action == Action::Heal).count();
            let ctx = format!("{} seed {seed}: {}", family.name(), g.text);
            assert!(
                tl.windows(2).all(|w| w[0].at_s <= w[1].at_s),
                "timeline out of order: {ctx}"
            );
            match family {
                Family::DegradeHeal => {
                    assert!((3..=12).contains(&n), "{ctx}");
                    assert_eq!((degrades, heals), (1, 1), "{ctx}");
                    assert_eq!(tl[0].candidate.get_ref(), tl[1].candidate.get_ref());
                }
                Family::Outage => {
                    assert!((5..=20).contains(&n), "{ctx}");
                    assert_eq!(degrades, heals, "{ctx}");
                    let share = degrades as f64 / n as f64;
                    // round(n x uniform 0.2-0.8): within half a candidate of that range.
                    let slack = 0.5 / n as f64 + 1e-9;
                    let range = 0.2 - slack..=0.8 + slack;
                    assert!(degrades < n && range.contains(&share), "{ctx}");
                    assert!(tl[..degrades].iter().all(|e| e.success == Some(0.0)));
                }
                Family::Drift => {
                    assert!(degrades >= 9 && heals == 1, "{ctx}");
                    assert_eq!(tl.last().map(|e| e.action), Some(Action::Heal));
                }
                Family::Flap => {
                    assert!(degrades >= 2 && degrades == heals, "{ctx}");
                    for w in tl.windows(2) {
                        assert_ne!(w[0].action, w[1].action, "{ctx}");
                        let gap = w[1].at_s - w[0].at_s;
                        assert!((0.79..=12.01).contains(&gap), "gap {gap}: {ctx}");
                    }
                }
                Family::Churn => {
                    assert!(!tl.is_empty() && degrades == 0, "{ctx}");
                    let mut live = count_present(sc);
                    assert!(live >= 2, "{ctx}");
                    for e in tl {
                        live = if e.action == Action::Join {
                            live + 1
                        } else {
                            live - 1
                        };
                        assert!(live >= 2, "{ctx}");
                    }
                }
                Family::Population => {
                    assert!((50..=2000).contains(&n), "{n}: {ctx}");
                    let k = sc.workload.subset as usize;
                    assert!((5..=50).contains(&k) && tl.is_empty(), "{ctx}");
                }
                Family::HeavyTail => {
                    assert!((4..=12).contains(&n) && tl.is_empty(), "{ctx}");
                    // Heavy-tailed: exponential, or lognormal with sd at least the mean; the
                    // others' sd is 0.1-0.6 of the mean. No queues.
                    let heavy = |d: &Option<Dist>| match d {
                        Some(Dist::Exp { .. }) => true,
                        Some(Dist::LogNormal { mean, sd }) => *sd >= 0.999 * *mean,
                        _ => false,
                    };
                    assert!(sc.candidates.iter().all(|c| c.servers.is_none()), "{ctx}");
                    let means: Vec<f64> = sc
                        .candidates
                        .iter()
                        .map(|c| c.ttfb_ms.as_ref().map_or(0.0, Dist::mean))
                        .collect();
                    let (lo, hi) = means
                        .iter()
                        .fold((f64::MAX, 0.0f64), |(l, h), &m| (l.min(m), h.max(m)));
                    assert!(lo > 0.0 && hi <= 3.01 * lo, "{ctx}");
                    heavy_seen += sc.candidates.iter().filter(|c| heavy(&c.ttfb_ms)).count();
                    all_seen += n;
                }
            }
        }
    }
    // Half of the heavy-tail family's candidates, each drawn on its own.
    let share = heavy_seen as f64 / all_seen as f64;
    assert!((0.45..0.55).contains(&share), "heavy-tailed share {share}");
}

fn figures(
    policy: &str,
    det: Option<f64>,
    rec: Option<f64>,
    err: f64,
    ttfb: f64,
) -> InstanceFigures {
    InstanceFigures {
        policy: policy.into(),
        detection_s: det,
        recovery_s: rec,
        detection_fair_s: det,
        recovery_fair_s: rec,
        error_rate: err,
        ttfb_mean_ms: ttfb,
        virtual_s: 100.0,
    }
}

fn instance(family: &str, mine: InstanceFigures, oracle: InstanceFigures) -> Instance {
    Instance {
        family: family.into(),
        scenario: "x".into(),
        description: String::new(),
        seed: 1,
        degrade_at_s: Some(20.0),
        heal_at_s: Some(40.0),
        world: World::new(false, true),
        policies: vec![mine, oracle],
    }
}

/// Excess against the oracle on the same scenario, a run that never recovers counted up to
/// its end, scenarios where the oracle gives no reference left out.
#[test]
fn the_summary_is_against_the_oracle_on_the_same_scenario() {
    let insts = vec![
        instance(
            "f",
            figures("p", Some(2.0), Some(5.0), 0.05, 30.0),
            figures("oracle", Some(1.0), Some(1.0), 0.01, 20.0),
        ),
        instance(
            "f",
            figures("p", Some(4.0), None, 0.02, 20.0),
            figures("oracle", Some(1.0), Some(2.0), 0.02, 20.0),
        ),
        // The oracle never recovered here: no recovery figure from this scenario.
        instance(
            "f",
            figures("p", None, Some(9.0), 0.0, 10.0),
            figures("oracle", Some(1.0), None, 0.0, 10.0),
        ),
    ];
    let r = SuiteReport::new(4, &insts);
    assert_eq!(r.suite, ["f"]);
    let f = &r.families[0];
    assert_eq!(f.scenarios, 3);
    assert_eq!(
        f.policies.len(),
        1,
        "the oracle is the reference, not a row"
    );
    let p = &f.policies[0];
    assert_eq!(p.recovery_scenarios, 2);
    assert_eq!(p.never_recovered, 1);
    // 5 - 1 = 4, and (100 - 40) - 2 = 58 for the run that never recovered.
    assert_eq!(p.recovery_excess_s.p50, Some(58.0));
    assert_eq!(p.recovery_excess_s.p95, Some(58.0));
    // Detection: 1, 3 and the never-detected (100 - 20) - 1 = 79.
    assert_eq!(p.detection_scenarios, 3);
    assert_eq!(p.never_detected, 1);
    assert_eq!(p.detection_excess_s.p50, Some(3.0));
    assert_eq!(p.detection_excess_s.p95, Some(79.0));
    let e = p.error_excess.p50.unwrap();
    assert!((e - 0.0).abs() < 1e-12, "{e}");
    assert!((p.error_excess.p95.unwrap() - 0.04).abs() < 1e-12);
    assert_eq!(p.ttfb_ratio.p50, Some(1.0));
    assert_eq!(p.ttfb_ratio.p95, Some(1.5));
}

#[test]
fn the_json_has_the_documented_shape() {
    let gens = generate_suite(&[Family::DegradeHeal, Family::Churn], 2, 21, &names()).unwrap();
    let r = run_suite(21, &gens, &specs(), 2, None).unwrap();
    let v: serde_json::Value = serde_json::from_str(&r.to_json()).unwrap();
    assert_eq!(v["suite"], serde_json::json!(["degrade-heal", "churn"]));
    assert_eq!(v["seed"], 21);
    let fams = v["families"].as_array().unwrap();
    assert_eq!(fams.len(), 2);
    for fam in fams {
        assert_eq!(fam["scenarios"], 2);
        let pols = fam["policies"].as_array().unwrap();
        let labels: Vec<&str> = pols.iter().map(|p| p["policy"].as_str().unwrap()).collect();
        assert_eq!(labels, ["coordinator", "p2c-peak-ewma"]);
        for p in pols {
            for key in [
                "recovery_excess_s",
                "detection_excess_s",
                "error_excess",
                "ttfb_ratio",
            ] {
                let q = p[key].as_object().unwrap_or_else(|| panic!("{key}: {p}"));
                assert!(q.contains_key("p50") && q.contains_key("p95"), "{key}");
            }
            assert!(p["never_recovered"].is_u64());
            assert!(p["ttfb_ratio"]["p50"].as_f64().unwrap() > 0.0);
        }
    }
    // The second policy paired against the first, scenario by scenario.
    for fam in fams {
        let paired = fam["paired"].as_array().unwrap();
        assert_eq!(paired.len(), 1);
        assert_eq!(paired[0]["policy"], "p2c-peak-ewma");
        assert_eq!(paired[0]["against"], "coordinator");
        assert_eq!(paired[0]["ttfb_ratio"]["scenarios"], 2);
        assert!(paired[0]["ttfb_ratio"]["mean"].as_f64().unwrap() > 0.0);
    }
    // Churn has no degrade or heal: no detection or recovery figure.
    let churn = &fams[1]["policies"][0];
    assert!(churn["recovery_excess_s"]["p50"].is_null());
    assert!(churn["detection_excess_s"]["p50"].is_null());
    assert_eq!(churn["never_recovered"], 0);
    // Degrade-heal has both.
    assert!(fams[0]["policies"][0]["detection_excess_s"]["p50"].is_f64());
    assert_eq!(v["instances"].as_array().unwrap().len(), 4);
    // Each instance says its world, read from its scenario: a candidate with a service time
    // is a queue, and retries above 0 retry.
    for (g, inst) in gens.iter().zip(v["instances"].as_array().unwrap()) {
        let queueing = g.scenario.candidates.iter().any(|c| c.service_ms.is_some());
        assert_eq!(inst["world"]["queueing"], queueing, "{}", g.scenario.name);
        assert_eq!(inst["world"]["retries"], g.scenario.workload.retries > 0);
    }
    // Each family splits its scenarios by world: every
    // scenario in exactly one, each world's figures over its own scenarios.
    for (f, fam) in fams.iter().enumerate() {
        let insts = &v["instances"].as_array().unwrap()[2 * f..2 * f + 2];
        let worlds = fam["worlds"].as_array().unwrap();
        let total: u64 = worlds
            .iter()
            .map(|w| w["scenarios"].as_u64().unwrap())
            .sum();
        assert_eq!(total, 2);
        for w in worlds {
            let of = insts
                .iter()
                .filter(|i| {
                    i["world"]["queueing"] == w["queueing"] && i["world"]["retries"] == w["retries"]
                })
                .count();
            assert_eq!(w["scenarios"].as_u64().unwrap() as usize, of, "{w}");
            assert!(w["world"].as_str().unwrap().contains("retries"));
            let labels: Vec<&str> = w["policies"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| p["policy"].as_str().unwrap())
                .collect();
            assert_eq!(labels, ["coordinator", "p2c-peak-ewma"]);
            let paired = w["paired"].as_array().unwrap();
            assert_eq!(paired.len(), 1);
            assert_eq!(paired[0]["against"], "coordinator");
            assert_eq!(
                paired[0]["ttfb_ratio"]["scenarios"].as_u64().unwrap() as usize,
                of
            );
        }
    }
}

/// Detection and recovery follow the degraded candidates the oracle used: suite seed 17's
/// `degrade-heal-10` degrades a middling server (18 ms among four at 10-12 ms) that the
/// oracle never sends to, while the coordinator gave it about one per cent before. Against
/// its own share before, the coordinator detected the degrade and returned to that share
/// (7.1 s after the heal), but the scenario has no reference to measure either against, so
/// it enters neither excess. (This test first read `degrade-heal-17`. The coordinator no
/// longer sends to that scenario's middling server either: the fastest one, 20.5 ms with 1 %
/// of its attempts failing with overload errors at any load, is no longer held to one
/// attempt in flight by its first such failure, docs/tuning.md, "A few overload failures
/// judged by the same test".)
#[test]
fn a_candidate_the_oracle_never_used_is_not_followed() {
    let policies = ["coordinator".to_string(), "oracle".to_string()];
    let g = generate(Family::DegradeHeal, 17, 10, &policies).unwrap();
    let specs: Vec<PolicySpec> = policies
        .iter()
        .map(|n| PolicySpec::parse(n).unwrap())
        .collect();
    let r = simulate(&g.scenario, &specs, &[g.seed], 1, None).unwrap();
    let (me, oracle) = (&r.policies[0], &r.policies[1]);
    assert_eq!(oracle.degraded.len(), 1);
    assert_eq!(oracle.degraded[0].share_before, Some(0.0));
    assert!(me.degraded[0].share_before.unwrap() > 0.0);
    // Unrestricted, the coordinator's figures count; followed as the oracle used, none.
    let all = InstanceFigures::new("coordinator", me, None);
    assert!(all.detection_s.unwrap() > 0.0);
    assert!(me.degraded[0].healed_at_s.is_some());
    let mine = InstanceFigures::new("coordinator", me, Some(oracle));
    let reference = InstanceFigures::new("oracle", oracle, Some(oracle));
    assert_eq!((mine.detection_s, mine.recovery_s), (None, None));
    assert_eq!((reference.detection_s, reference.recovery_s), (None, None));
    let inst = Instance {
        family: "degrade-heal".into(),
        scenario: g.scenario.name.clone(),
        description: String::new(),
        seed: g.seed,
        degrade_at_s: Some(19.648),
        heal_at_s: Some(37.371),
        world: World::new(false, true),
        policies: vec![mine, reference],
    };
    let rep = SuiteReport::new(17, &[inst]);
    let s = &rep.families[0].policies[0];
    assert_eq!((s.recovery_scenarios, s.detection_scenarios), (0, 0));
}

/// The favourite as `docs/scenarios.md` defines it: highest success without retries, else
/// success per expected millisecond (the oracle's order at no load).
fn favourite(sc: &Scenario) -> usize {
    let retries = sc.workload.retries;
    let key = |c: &CandidateSpec| {
        let p = c.success;
        let service = c.service_ms.as_ref().map_or(0.0, Dist::mean);
        let ok = c.connect_ms.mean() + c.ttfb_ms.as_ref().map_or(0.0, Dist::mean) + service;
        let cost = p * ok + (1.0 - p) * c.failure_ms.mean();
        if retries == 0 {
            (p, -cost)
        } else {
            (p / cost.max(1e-3), p)
        }
    };
    let mut b = 0;
    for i in 1..sc.candidates.len() {
        if key(&sc.candidates[i]) > key(&sc.candidates[b]) {
            b = i;
        }
    }
    b
}

fn index_of(sc: &Scenario, id: &str) -> usize {
    sc.candidates.iter().position(|c| c.id == id).unwrap()
}

fn within(x: f64, lo: f64, hi: f64) -> bool {
    (lo - 1e-3..=hi + 1e-3).contains(&x)
}

fn share(hits: usize, of: usize) -> f64 {
    hits as f64 / of.max(1) as f64
}

/// The draws every family but `population` shares, over many scenarios: each value within
/// its documented range, and the documented proportions roughly kept.
#[test]
fn common_draws_stay_in_their_documented_ranges() {
    let (mut cands, mut flaky, mut capped, mut queue_cands, mut limited) = (0, 0, 0, 0, 0);
    let (mut fleets, mut queue_fleets, mut one_retry) = (0, 0, 0);
    let mut classes = std::collections::BTreeSet::new();
    let mut slowdowns = 0;
    for family in [
        Family::DegradeHeal,
        Family::Outage,
        Family::Drift,
        Family::Flap,
        Family::Churn,
    ] {
        for seed in 0..120u64 {
            let g = generate(family, seed, 1, &names()).unwrap();
            let sc = &g.scenario;
            let ctx = format!("{} seed {seed}: {}", family.name(), g.text);
            let w = &sc.workload;
            assert_eq!(w.kind, LoopKind::Open, "{ctx}");
            assert!(within(w.rate_per_s, 50.0, 1000.0), "{ctx}");
            assert!(w.retries <= 2, "{ctx}");
            one_retry += usize::from(w.retries == 1);
            let timeout = w.attempt_timeout_ms.expect("an attempt timeout");
            assert!(within(timeout, 1000.0, 3000.0), "{ctx}");
            fleets += 1;
            let queues = sc.candidates.iter().filter(|c| c.servers.is_some()).count();
            assert!(queues == 0 || queues == sc.candidates.len(), "{ctx}");
            queue_fleets += usize::from(queues > 0);
            for c in &sc.candidates {
                cands += 1;
                assert!(within(c.success, 0.8, 1.0), "{ctx}");
                flaky += usize::from(c.success < 0.98 - 1e-9);
                let Dist::Const(connect) = c.connect_ms else {
                    panic!("connect not constant: {ctx}")
                };
                assert!(within(connect, 0.2, 2.0), "{ctx}");
                classes.insert(c.failure.as_str());
                let fail = if c.failure == FailureClass::Timeout {
                    (100.0, 500.0)
                } else {
                    (0.5, 5.0)
                };
                assert_eq!(
                    c.failure_ms,
                    Dist::Uniform {
                        min: fail.0,
                        max: fail.1
                    },
                    "{ctx}"
                );
                let ttfb = c.ttfb_ms.clone().unwrap();
                // The mean first byte (a queue's service time): base 5-50 x 1-4.
                let speed = match c.servers {
                    Some(servers) => {
                        queue_cands += 1;
                        assert!((1..=8).contains(&servers), "{ctx}");
                        let Dist::Const(t) = ttfb else {
                            panic!("queue first byte not constant: {ctx}")
                        };
                        assert!(within(t, 0.2, 1.0), "{ctx}");
                        if let Some(l) = c.queue_limit {
                            limited += 1;
                            assert!((5..=50).contains(&l), "{ctx}");
                        }
                        if let Some(s) = &c.slowdown {
                            slowdowns += 1;
                            assert!(within(s.period_ms, 200.0, 2000.0), "{ctx}");
                            assert!(within(s.factor, 2.0, 5.0), "{ctx}");
                        }
                        c.service_ms.clone().unwrap()
                    }
                    None => ttfb,
                };
                assert!(within(speed.mean(), 5.0, 200.0), "{ctx}");
                if let Dist::LogNormal { mean, sd } = speed {
                    assert!(within(sd / mean, 0.1, 0.6), "cv {}: {ctx}", sd / mean);
                } else {
                    assert!(matches!(speed, Dist::Exp { .. }), "{ctx}");
                }
                if let Some(cap) = c.capacity {
                    capped += 1;
                    assert!((1..=8).contains(&cap), "{ctx}");
                    assert!(within(c.overload_per_extra, 0.05, 0.3), "{ctx}");
                }
            }
        }
    }
    assert_eq!(classes.len(), 4, "{classes:?}");
    let (f, q, c) = (
        share(flaky, cands),
        share(queue_fleets, fleets),
        share(capped, cands),
    );
    assert!((0.10..=0.20).contains(&f), "flaky {f}");
    assert!((0.25..=0.45).contains(&q), "queueing fleets {q}");
    assert!((0.22..=0.38).contains(&c), "capacity {c}");
    let l = share(limited, queue_cands);
    assert!((0.35..=0.65).contains(&l), "queue limits {l}");
    assert!(slowdowns > 0);
    let r = share(one_retry, fleets);
    assert!((0.4..=0.6).contains(&r), "one retry {r}");
}

/// A bad spell (`degrade-heal`, `flap`): slower 40%, failing 30%, both 30%; slower is a first
/// byte x5-30, a service time x3-15 or a quarter of the servers; failing is a success of
/// 0-0.6, and a `timeout` then takes the whole attempt timeout.
#[test]
fn bad_spells_are_drawn_as_documented() {
    let (mut slower, mut failing, mut both, mut spells) = (0, 0, 0, 0);
    let (mut heals, mut favourites) = (0, 0);
    for family in [Family::DegradeHeal, Family::Flap] {
        for seed in 0..200u64 {
            let g = generate(family, seed, 2, &names()).unwrap();
            let sc = &g.scenario;
            let ctx = format!("{} seed {seed}: {}", family.name(), g.text);
            let ev = &sc.timeline[0];
            assert_eq!(ev.action, Action::Degrade, "{ctx}");
            let c = &sc.candidates[index_of(sc, ev.candidate.get_ref())];
            let mut slow = false;
            if let Some(t) = &ev.ttfb_ms {
                let f = t.mean() / c.ttfb_ms.as_ref().unwrap().mean();
                assert!((4.99..=30.01).contains(&f), "x{f}: {ctx}");
                slow = true;
            }
            if let Some(t) = &ev.service_ms {
                let f = t.mean() / c.service_ms.as_ref().unwrap().mean();
                assert!((2.99..=15.01).contains(&f), "x{f}: {ctx}");
                slow = true;
            }
            if let Some(n) = ev.servers {
                let all = c.servers.unwrap();
                assert!(all >= 4 && n == (all / 4).max(1), "{ctx}");
                slow = true;
            }
            let fail = ev.success.is_some();
            if let Some(s) = ev.success {
                assert!(within(s, 0.0, 0.6), "{ctx}");
                let class = ev.failure.expect("a failure class");
                let ms = ev.failure_ms.clone().expect("a failure time");
                if class == FailureClass::Timeout {
                    let timeout = sc.workload.attempt_timeout_ms.unwrap();
                    assert_eq!(ms, Dist::Const(timeout), "{ctx}");
                } else {
                    assert_eq!(ms, Dist::Uniform { min: 0.5, max: 5.0 }, "{ctx}");
                }
            }
            assert!(slow || fail, "a bad spell that changes nothing: {ctx}");
            spells += 1;
            slower += usize::from(slow && !fail);
            failing += usize::from(fail && !slow);
            both += usize::from(slow && fail);
            if family == Family::DegradeHeal {
                let heal = &sc.timeline[1];
                assert!(within(ev.at_s, 10.0, 30.0), "{ctx}");
                assert!(within(heal.at_s - ev.at_s, 10.0, 30.0), "{ctx}");
                assert!(
                    (sc.workload.duration_s - heal.at_s - 60.0).abs() < 0.01,
                    "{ctx}"
                );
                heals += 1;
                favourites += usize::from(index_of(sc, ev.candidate.get_ref()) == favourite(sc));
            }
        }
    }
    let (s, f, b) = (
        share(slower, spells),
        share(failing, spells),
        share(both, spells),
    );
    assert!((0.33..=0.47).contains(&s), "slower {s}");
    assert!((0.24..=0.36).contains(&f), "failing {f}");
    assert!((0.24..=0.36).contains(&b), "both {b}");
    // The favourite 60% of the time, and sometimes when drawn uniformly.
    let fav = share(favourites, heals);
    assert!((0.55..=0.8).contains(&fav), "favourite {fav}");
}

/// `outage`: the down candidates fail together at 10-30 s for 10-30 s, all fast or all
/// hanging for the attempt timeout; the favourite is among them 70% of the time, and is then
/// the first event.
#[test]
fn an_outage_is_one_failure_of_many_with_the_favourite_first() {
    let (mut runs, mut with_favourite) = (0, 0);
    for seed in 0..200u64 {
        let g = generate(Family::Outage, seed, 3, &names()).unwrap();
        let sc = &g.scenario;
        let ctx = format!("seed {seed}: {}", g.text);
        let down: Vec<_> = sc
            .timeline
            .iter()
            .filter(|e| e.action == Action::Degrade)
            .collect();
        let (t0, t1) = (down[0].at_s, sc.timeline.last().unwrap().at_s);
        assert!(
            within(t0, 10.0, 30.0) && within(t1 - t0, 10.0, 30.0),
            "{ctx}"
        );
        assert!((sc.workload.duration_s - t1 - 60.0).abs() < 0.01, "{ctx}");
        let timeout = sc.workload.attempt_timeout_ms.unwrap();
        let hang = down[0].failure == Some(FailureClass::Timeout);
        for e in &down {
            assert_eq!(e.at_s, t0, "{ctx}");
            if hang {
                assert_eq!(e.failure, Some(FailureClass::Timeout), "{ctx}");
                assert_eq!(e.failure_ms, Some(Dist::Const(timeout)), "{ctx}");
            } else {
                let class = e.failure.unwrap();
                let fast = [FailureClass::Transport, FailureClass::Refused];
                assert!(fast.contains(&class), "{ctx}");
                assert_eq!(
                    e.failure_ms,
                    Some(Dist::Uniform { min: 0.5, max: 5.0 }),
                    "{ctx}"
                );
            }
        }
        let fav = &sc.candidates[favourite(sc)].id;
        if let Some(i) = down.iter().position(|e| e.candidate.get_ref() == fav) {
            assert_eq!(i, 0, "the favourite down is the first event: {ctx}");
            with_favourite += 1;
        }
        runs += 1;
    }
    let f = share(with_favourite, runs);
    assert!((0.6..=0.8).contains(&f), "favourite down {f}");
}

/// `drift`: from 10-20 s, every 1-3 s, the target's time grows geometrically to a peak of
/// x3-20, then shrinks back; each step is a change, the last a heal.
#[test]
fn a_drift_climbs_to_its_peak_and_back() {
    for seed in 0..200u64 {
        let g = generate(Family::Drift, seed, 4, &names()).unwrap();
        let sc = &g.scenario;
        let ctx = format!("seed {seed}: {}", g.text);
        let tl = &sc.timeline;
        assert!(within(tl[0].at_s, 10.0, 20.0), "{ctx}");
        let gap = tl[1].at_s - tl[0].at_s;
        assert!(within(gap, 1.0, 3.0), "{ctx}");
        for w in tl.windows(2) {
            assert!((w[1].at_s - w[0].at_s - gap).abs() < 0.01, "{ctx}");
        }
        let last = tl.last().unwrap();
        assert!(
            (sc.workload.duration_s - last.at_s - 60.0).abs() < 0.01,
            "{ctx}"
        );
        let c = &sc.candidates[index_of(sc, last.candidate.get_ref())];
        let normal = c.service_ms.as_ref().or(c.ttfb_ms.as_ref()).unwrap().mean();
        let factors: Vec<f64> = tl[..tl.len() - 1]
            .iter()
            .map(|e| e.service_ms.as_ref().or(e.ttfb_ms.as_ref()).unwrap().mean() / normal)
            .collect();
        let top = factors.iter().copied().fold(0.0, f64::max);
        let k = factors.iter().position(|&f| f == top).unwrap();
        assert!((2.99..=20.01).contains(&top), "peak x{top}: {ctx}");
        assert!((4..12).contains(&k), "peak at step {k}: {ctx}");
        assert!(factors[0] > 1.0, "{ctx}");
        assert!(
            factors[..=k].windows(2).all(|w| w[0] < w[1]),
            "{factors:?}: {ctx}"
        );
        assert!(
            factors[k..].windows(2).all(|w| w[0] > w[1]),
            "{factors:?}: {ctx}"
        );
        assert!(*factors.last().unwrap() > 1.0, "{ctx}");
    }
}

/// `flap`: from 5-20 s the target alternates between its bad spell and its normal self,
/// at least two bad spells, and ends healed.
#[test]
fn a_flap_starts_in_its_window_and_ends_healed() {
    for seed in 0..200u64 {
        let g = generate(Family::Flap, seed, 7, &names()).unwrap();
        let sc = &g.scenario;
        let ctx = format!("seed {seed}: {}", g.text);
        let tl = &sc.timeline;
        assert!(within(tl[0].at_s, 5.0, 20.0), "{ctx}");
        assert_eq!(tl.last().map(|e| e.action), Some(Action::Heal), "{ctx}");
        let target = tl[0].candidate.get_ref();
        assert!(tl.iter().all(|e| e.candidate.get_ref() == target), "{ctx}");
    }
}

/// `churn`: 70% present at the start, the fastest made absent half the time (so absent
/// about 65% of the time); events from 5 s to 5 s before the end.
#[test]
fn churn_starts_partly_absent_and_keeps_its_events_inside_the_run() {
    let (mut runs, mut fastest_absent, mut some_absent) = (0, 0, 0);
    for seed in 0..200u64 {
        let g = generate(Family::Churn, seed, 5, &names()).unwrap();
        let sc = &g.scenario;
        let ctx = format!("seed {seed}: {}", g.text);
        let end = sc.workload.duration_s;
        assert!(within(end, 60.0, 120.0), "{ctx}");
        assert!(sc.timeline.len() <= 10, "{ctx}");
        for e in &sc.timeline {
            assert!(within(e.at_s, 5.0, end - 5.0), "{ctx}");
        }
        let speed = |c: &CandidateSpec| {
            let service = c.service_ms.as_ref().map_or(0.0, Dist::mean);
            c.connect_ms.mean() + c.ttfb_ms.as_ref().map_or(0.0, Dist::mean) + service
        };
        let fastest = (0..sc.candidates.len())
            .min_by(|&a, &b| speed(&sc.candidates[a]).total_cmp(&speed(&sc.candidates[b])))
            .unwrap();
        fastest_absent += usize::from(!sc.candidates[fastest].present);
        some_absent += usize::from(sc.candidates.iter().any(|c| !c.present));
        runs += 1;
    }
    let f = share(fastest_absent, runs);
    assert!((0.5..=0.8).contains(&f), "fastest absent {f}");
    assert!(share(some_absent, runs) > 0.8);
}

/// `population`: success 0.5-1, capacities of 1-4, 0-3 retries, an open loop of 100-1,000
/// requests/s or a closed loop of 5-50 workers.
#[test]
fn a_population_draws_within_its_ranges() {
    for seed in 0..200u64 {
        let g = generate(Family::Population, seed, 6, &names()).unwrap();
        let sc = &g.scenario;
        let ctx = format!("seed {seed}: {}", g.text);
        let w = &sc.workload;
        assert!(w.retries <= 3, "{ctx}");
        // 2,000-20,000 requests.
        let requests = match w.kind {
            LoopKind::Open => {
                assert!(within(w.rate_per_s, 100.0, 1000.0), "{ctx}");
                w.rate_per_s * w.duration_s
            }
            LoopKind::Closed => {
                assert!((5..=50).contains(&w.workers), "{ctx}");
                f64::from(w.workers * w.operations)
            }
        };
        assert!((1950.0..=20001.0).contains(&requests), "{requests}: {ctx}");
        assert!((5..=20).contains(&sc.candidates.len()), "{ctx}");
        for c in &sc.candidates {
            assert!(within(c.success, 0.5, 1.0), "{ctx}");
            if let Some(cap) = c.capacity {
                assert!((1..=4).contains(&cap), "{ctx}");
            }
        }
    }
}

/// Each family draws from its own stream (scenario 0 of two families runs with different
/// seeds), and the oracle is run even when the policies leave it out.
#[test]
fn families_have_their_own_streams_and_the_oracle_always_runs() {
    let seeds: std::collections::BTreeSet<u64> = Family::ALL
        .iter()
        .map(|&f| generate(f, 21, 0, &names()).unwrap().seed)
        .collect();
    assert_eq!(seeds.len(), Family::ALL.len());
    let g = generate(Family::DegradeHeal, 17, 17, &names()).unwrap();
    let coordinator = [PolicySpec::parse("coordinator").unwrap()];
    let r = run_suite(17, &[g], &coordinator, 1, None).unwrap();
    let ran: Vec<&str> = r.instances[0]
        .policies
        .iter()
        .map(|p| p.policy.as_str())
        .collect();
    assert_eq!(ran, ["coordinator", "oracle"]);
}

//! The figures of every built-in scenario, pinned: the queueing model, the time-varying
//! service and the new report fields must leave scenarios that do not use them exactly as
//! they were. Seeds 1 and 2, every policy the scenario lists; a tolerance of 1e-9 (relative
//! for large figures).
//!
//! The coordinator runs with `tests/data/fixed-weight-averages.toml` (the default config with
//! fixed-weight averages), so retuning the default does not read as a change of the world; the
//! row keeps the name `coordinator`.
//!
//! To print the current figures in this file's format (after a deliberate change), run
//! `SELCOORD_PIN_PRINT=1 cargo test --test sim_pinned -- --nocapture`.

use selection_coordinator::sim::{simulate, PolicyReport, PolicySpec, Scenario};

/// (scenario, policy, [requests, error_rate, latency mean, latency p99, ttfb mean, ttfb p99,
/// attempts per request, share of the first candidate, detection_s, recovery_s]); NaN stands
/// for "never / not applicable".
type Pin = (&'static str, &'static str, [f64; 10]);

const SCENARIOS: [&str; 7] = [
    "mongo-overload",
    "capacity-overload",
    "recovery",
    "lassie-retrieval",
    "livepeer-selection",
    "pairwise-deadlock",
    "large-fleet",
];

fn figures(p: &PolicyReport, first: &str) -> [f64; 10] {
    [
        p.requests,
        p.error_rate,
        p.latency_ms.mean,
        p.latency_ms.p99,
        p.ttfb_ms.mean,
        p.ttfb_ms.p99,
        p.attempts_per_request,
        p.share.get(first).copied().unwrap_or(f64::NAN),
        p.detection_s.unwrap_or(f64::NAN),
        p.recovery_s.unwrap_or(f64::NAN),
    ]
}

fn current() -> Vec<(String, String, [f64; 10])> {
    let mut out = Vec::new();
    for name in SCENARIOS {
        let sc = Scenario::load(name).unwrap();
        let policies: Vec<PolicySpec> = sc
            .policies
            .iter()
            .map(|n| {
                if n == "coordinator" {
                    let fixed = concat!(
                        env!("CARGO_MANIFEST_DIR"),
                        "/tests/data/fixed-weight-averages.toml"
                    );
                    PolicySpec::parse(&format!("coordinator:{fixed}")).unwrap()
                } else {
                    PolicySpec::parse(n).unwrap()
                }
            })
            .collect();
        let seeds: &[u64] = if name == "large-fleet" { &[1] } else { &[1, 2] };
        let report = simulate(&sc, &policies, seeds, 2, None).unwrap();
        let first = sc.expanded()[0].0.clone();
        for p in &report.policies {
            let policy = if p.policy.starts_with("coordinator:") {
                "coordinator".to_string()
            } else {
                p.policy.clone()
            };
            out.push((name.to_string(), policy, figures(p, &first)));
        }
    }
    out
}

fn same(a: f64, b: f64) -> bool {
    (a.is_nan() && b.is_nan()) || (a - b).abs() <= 1e-9 * b.abs().max(1.0)
}

#[test]
fn builtin_scenario_figures_are_unchanged() {
    let now = current();
    if std::env::var_os("SELCOORD_PIN_PRINT").is_some() {
        for (s, p, f) in &now {
            let nums: Vec<String> = f
                .iter()
                .map(|x| {
                    if x.is_nan() {
                        "NAN".to_string()
                    } else {
                        format!("{x:?}")
                    }
                })
                .collect();
            println!("    (\"{s}\", \"{p}\", [{}]),", nums.join(", "));
        }
        return;
    }
    assert_eq!(
        now.len(),
        PINNED.len(),
        "one pinned row per (scenario, policy)"
    );
    for ((s, p, f), (ps, pp, pf)) in now.iter().zip(PINNED) {
        assert_eq!((s.as_str(), p.as_str()), (*ps, *pp));
        for (k, (a, b)) in f.iter().zip(pf).enumerate() {
            assert!(same(*a, *b), "{s} / {p}: figure {k} is {a}, pinned {b}");
        }
    }
}

const NAN: f64 = f64::NAN;

#[rustfmt::skip]
const PINNED: &[Pin] = &[
    ("mongo-overload", "coordinator", [4000.0, 0.00625, 24.849445693125013, 29.673737999999943, 24.99966971267719, 29.673738292511707, 1.0, 0.008625, NAN, NAN]),
    ("mongo-overload", "p2c-opcount", [4000.0, 0.5825, 11.021728068999986, 29.010113999999977, 25.006836804265966, 29.591072897405535, 1.0, 0.7762500000000001, NAN, NAN]),
    ("mongo-overload", "mongo-error-bias", [4000.0, 0.183375, 20.608628168249957, 29.442880000000006, 25.01009431244754, 29.577129169464644, 1.0, 0.24574999999999997, NAN, NAN]),
    ("mongo-overload", "lassie", [4000.0, 0.2855, 18.124310985000022, 29.47535350000008, 24.970252401817397, 29.69916003072229, 1.0, 0.382, NAN, NAN]),
    ("mongo-overload", "livepeer", [4000.0, 0.36725, 16.199399411000005, 29.240411999999992, 25.025545788115434, 29.70425238909069, 1.0, 0.49375, NAN, NAN]),
    ("mongo-overload", "p2c-peak-ewma", [4000.0, 0.578125, 11.104526999999987, 29.00706750000004, 24.947020542383598, 29.58864276805373, 1.0, 0.7793749999999999, NAN, NAN]),
    ("mongo-overload", "round-robin", [4000.0, 0.375625, 15.970718549875007, 29.342223500000042, 24.980014983741963, 29.6593443150337, 1.0, 0.5, NAN, NAN]),
    ("mongo-overload", "random", [4000.0, 0.37025, 16.10885023587499, 29.311141, 24.993363301999203, 29.51279292573905, 1.0, 0.49075, NAN, NAN]),
    ("mongo-overload", "oracle", [4000.0, 0.0, 25.028608922499956, 29.673827499999916, 25.028608925017135, 29.67382752654263, 1.0, 0.0, NAN, NAN]),
    ("capacity-overload", "coordinator", [7200.0, 0.10041666666666667, 18.060811461666688, 26.9227110000001, 19.96480991466842, 26.997589435870037, 1.0, 0.3163888888888889, NAN, NAN]),
    ("capacity-overload", "p2c-opcount", [7200.0, 0.2789583333333333, 14.695317461666702, 26.78020549999993, 19.993723437493887, 27.106802378642143, 1.0, 0.19395833333333334, NAN, NAN]),
    ("capacity-overload", "mongo-error-bias", [7200.0, 0.1990972222222222, 16.2063929096528, 26.58414450000013, 19.98849665487277, 26.848996092024624, 1.0, 0.2420138888888889, NAN, NAN]),
    ("capacity-overload", "p2c-peak-ewma", [7200.0, 0.28284722222222225, 14.584201313541685, 26.543555999999914, 19.93833926159552, 26.899813714205955, 1.0, 0.19465277777777779, NAN, NAN]),
    ("capacity-overload", "round-robin", [7200.0, 0.17916666666666667, 16.627553900486127, 26.769401000000137, 20.040533628833774, 27.01285793815343, 1.0, 0.25, NAN, NAN]),
    ("capacity-overload", "random", [7200.0, 0.23006944444444444, 15.63219491027781, 26.584509999999728, 20.003456626819933, 26.962351604244983, 1.0, 0.2475, NAN, NAN]),
    ("capacity-overload", "oracle", [7200.0, 0.011180555555555555, 19.802132018611132, 26.963614999999997, 20.014974289854635, 26.986549562225512, 1.0, 0.41659722222222223, NAN, NAN]),
    ("recovery", "coordinator", [12025.5, 0.00012455368263721665, 20.011337523048493, 34.32329099999903, 20.013088831861477, 34.32329087122904, 1.0070683281366355, 0.21671292412889814, 1.1000000000000014, 3.5000000000000036]),
    ("recovery", "p2c-opcount", [12025.5, 8.30357884248111e-5, 19.996810081495752, 34.27750750000058, 19.99797113304868, 34.27750762086568, 1.0081067595446762, 0.2210185851052689, 1.0, 1.1500000000000021]),
    ("recovery", "mongo-error-bias", [12025.5, 0.0005818555848869997, 20.11873009527389, 34.534477000002894, 20.126789120249327, 34.53447695300582, 1.03592422234716, 0.20919375767595672, NAN, 4.2500000000000036]),
    ("recovery", "p2c-peak-ewma", [12025.5, 0.0009977606061070416, 20.268917225478518, 34.623955000000706, 20.283364376422746, 34.623954868913565, 1.0905115195422046, 0.19317267752203737, NAN, 1.0]),
    ("recovery", "round-robin", [12025.5, 0.0006651333996771395, 20.211357925919792, 34.7333944999999, 20.221421512599104, 34.733394777898496, 1.0678969839531818, 0.20008564335110718, NAN, 1.0]),
    ("recovery", "random", [12025.5, 0.0005816135585216709, 20.145588741788927, 34.68625350000076, 20.154097680166306, 34.686253371236205, 1.0559628332972737, 0.2026237991463118, NAN, 1.0]),
    ("recovery", "oracle", [12025.5, 4.151789421240555e-5, 20.009437657220456, 34.134514999999865, 20.010018956663675, 34.13451518286337, 1.0053216722633302, 0.1995945622059341, 1.0, 1.0]),
    ("lassie-retrieval", "coordinator", [3018.0, 0.00016512549537648613, 1389.6594457478777, 4423.009862000001, 408.62132226704915, 1648.8022812728682, 1.4568594272604627, 0.0017044396005663613, NAN, NAN]),
    ("lassie-retrieval", "lassie", [3018.0, 0.00016622340425531914, 1949.0854094983983, 7337.880013000004, 1104.8387824856973, 6400.629344560622, 1.5155059866775344, 0.03202126768273998, NAN, NAN]),
    ("lassie-retrieval", "lassie-pairwise", [3018.0, 0.00016622340425531914, 10967.210315349763, 45166.32214650001, 10185.14986791915, 44613.504526684206, 1.5186598397228703, 0.038356800663165005, NAN, NAN]),
    ("lassie-retrieval", "random", [3018.0, 0.0003313488996318053, 2162.1037762259075, 8065.401976499995, 1227.2242813627222, 6772.082161588198, 1.5804350002810645, 0.025803656888905305, NAN, NAN]),
    ("lassie-retrieval", "oracle", [3018.0, 0.0, 1385.2709482634114, 4295.585588499998, 372.7571451102172, 1355.2671308375182, 1.4904347982658308, 0.00022232789964539738, NAN, NAN]),
    ("livepeer-selection", "coordinator", [7242.0, 0.07378989703316705, 579.3281485957953, 1555.5545424999996, 581.2962147825517, 1575.9085275042555, 1.2690918189839808, 0.07675972484073779, NAN, NAN]),
    ("livepeer-selection", "livepeer", [7242.0, 0.21975192333605545, 889.6252449031235, 2069.1230320000004, 984.4002549178756, 2128.183011438109, 1.483210985574553, 0.020152005715035462, NAN, NAN]),
    ("livepeer-selection", "random", [7242.0, 0.12067521692855679, 891.57710274526, 2044.5273005000001, 937.9899863315957, 2057.076735925718, 1.345301055340585, 0.0346419446170117, NAN, NAN]),
    ("livepeer-selection", "round-robin", [7242.0, 0.10459957812003087, 892.7838586752151, 2053.0396015, 931.8030222145892, 2065.9183053396823, 1.3245484002575387, 0.03356737000442685, NAN, NAN]),
    ("livepeer-selection", "p2c-opcount", [7242.0, 0.4399343393549937, 769.5157712105306, 1996.0268139999966, 936.0774679378994, 2107.887932228433, 1.6830310261906392, 0.04233582878110019, NAN, NAN]),
    ("livepeer-selection", "oracle", [7242.0, 0.069868004298463, 484.98301065263155, 990.3556469999985, 480.2301984723904, 997.7186418850649, 1.2613405768092854, 0.12277656018936933, NAN, NAN]),
    ("pairwise-deadlock", "coordinator", [400.0, 0.0, 62.320794949999964, 101.26883999999991, 62.32079493556938, 101.2688402703985, 1.1125, 0.12235385609825072, NAN, NAN]),
    ("pairwise-deadlock", "lassie-pairwise", [400.0, 0.0, 14436.343343833752, 64083.43986799997, 14436.34334381932, 64083.43986791752, 1.1125, 0.14605805356926432, NAN, NAN]),
    ("pairwise-deadlock", "lassie", [400.0, 0.0, 62.320794949999964, 101.26883999999991, 62.32079493556938, 101.2688402703985, 1.1125, 0.13705914434613986, NAN, NAN]),
    ("pairwise-deadlock", "random", [400.0, 0.0, 62.320794949999964, 101.26883999999991, 62.32079493556938, 101.2688402703985, 1.1125, 0.13031248737526763, NAN, NAN]),
    ("pairwise-deadlock", "oracle", [400.0, 0.0, 62.320794949999964, 101.26883999999991, 62.32079493556938, 101.2688402703985, 1.1125, 0.13031248737526763, NAN, NAN]),
    ("large-fleet", "coordinator", [199944.0, 0.020010602968831274, 49.36270059504123, 229.466886, 50.26855160872561, 230.56251834957976, 1.0, 0.0004751330372504301, NAN, NAN]),
];

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
    ("mongo-overload", "coordinator", [4000.0, 0.00725, 24.826183377749988, 29.699317999999586, 25.000105411048857, 29.699317990881546, 1.0, 0.009125, NAN, NAN]),
    ("mongo-overload", "p2c-opcount", [4000.0, 0.57, 11.317401012375003, 29.037527999999924, 24.996456336885323, 29.62169152385716, 1.0, 0.77, NAN, NAN]),
    ("mongo-overload", "mongo-error-bias", [4000.0, 0.19387500000000002, 20.35897150312505, 29.42890850000002, 25.01493255487377, 29.55220529130176, 1.0, 0.25387499999999996, NAN, NAN]),
    ("mongo-overload", "lassie", [4000.0, 0.297125, 17.87475740887499, 29.35770850000008, 25.009012177772682, 29.65860682824556, 1.0, 0.401, NAN, NAN]),
    ("mongo-overload", "livepeer", [4000.0, 0.384625, 15.752507223250014, 29.148213500000075, 24.978583958161558, 29.5927518870609, 1.0, 0.512625, NAN, NAN]),
    ("mongo-overload", "p2c-peak-ewma", [4000.0, 0.58925, 10.847698026749987, 28.978188999999986, 24.990215851603665, 29.562948063457107, 1.0, 0.78775, NAN, NAN]),
    ("mongo-overload", "round-robin", [4000.0, 0.375625, 15.977691065375016, 29.28464949999998, 24.989745531654094, 29.701996249546724, 1.0, 0.5, NAN, NAN]),
    ("mongo-overload", "random", [4000.0, 0.383625, 15.812108437374992, 29.353591500000054, 25.026331714105, 29.710616808892336, 1.0, 0.5117499999999999, NAN, NAN]),
    ("mongo-overload", "oracle", [4000.0, 0.0, 25.007502421499964, 29.584166500000286, 25.007502419729718, 29.58416643689432, 1.0, 0.0, NAN, NAN]),
    ("capacity-overload", "coordinator", [7200.0, 0.10048611111111111, 18.099511201666683, 26.76879300000037, 20.008812666819114, 26.931989049479135, 1.0, 0.31222222222222223, NAN, NAN]),
    ("capacity-overload", "p2c-opcount", [7200.0, 0.2826388888888889, 14.64867610340281, 26.622898500000215, 20.022903253135357, 27.084600901137673, 1.0, 0.195, NAN, NAN]),
    ("capacity-overload", "mongo-error-bias", [7200.0, 0.20027777777777778, 16.226912800555553, 26.714577000000126, 20.03989460487591, 26.99261982863255, 1.0, 0.2425, NAN, NAN]),
    ("capacity-overload", "p2c-peak-ewma", [7200.0, 0.2702777777777778, 14.863219805416666, 26.437102499999867, 19.998186642967966, 26.725655339806753, 1.0, 0.1998611111111111, NAN, NAN]),
    ("capacity-overload", "round-robin", [7200.0, 0.17743055555555554, 16.642270524513915, 26.792136500000062, 20.0143835735485, 27.085760327238834, 1.0, 0.25, NAN, NAN]),
    ("capacity-overload", "random", [7200.0, 0.22340277777777778, 15.75791240652779, 26.790942999999736, 20.004454648414523, 27.074901167020382, 1.0, 0.25006944444444446, NAN, NAN]),
    ("capacity-overload", "oracle", [7200.0, 0.010624999999999999, 19.82473887270836, 26.85805099999991, 20.02660638836555, 26.87147036089477, 1.0, 0.4179861111111111, NAN, NAN]),
    ("recovery", "coordinator", [12019.0, 0.0, 20.005950147535742, 34.28547399999893, 20.00595014676103, 34.28547412324967, 1.0069472759067946, 0.21857210241095154, 1.3000000000000007, 10.050000000000004]),
    ("recovery", "p2c-opcount", [12019.0, 0.0009157618130432181, 20.206025336115935, 34.93978400000053, 20.21876418554153, 34.93978407996501, 1.0780032125423102, 0.2006737602277469, NAN, 1.0]),
    ("recovery", "mongo-error-bias", [12019.0, 0.0003746789196977606, 20.12895779488433, 34.84521350000236, 20.13410895526151, 34.84521367978921, 1.036069231197097, 0.21016314217780105, 16.6, 4.550000000000004]),
    ("recovery", "p2c-peak-ewma", [12019.0, 0.0005825938937605675, 20.24098642927966, 34.63048500000099, 20.24885638279749, 34.630485248762, 1.0861950985175834, 0.19108804136482194, NAN, 1.0]),
    ("recovery", "round-robin", [12019.0, 0.0005822339217733106, 20.20307629587355, 34.81705549999958, 20.211102914549222, 34.817055245419226, 1.0678092592894493, 0.2000934340833519, NAN, 1.0]),
    ("recovery", "random", [12019.0, 0.00045752093453435214, 20.13973763774215, 34.70451649999795, 20.146195894419026, 34.704516444580946, 1.0562885738972474, 0.20393398158048326, NAN, 1.0]),
    ("recovery", "oracle", [12019.0, 0.0, 19.996850899423325, 34.47789550000135, 19.996850899454305, 34.47789562459391, 1.0044515762740662, 0.2016229637949813, 1.0, 1.0]),
    ("lassie-retrieval", "coordinator", [3005.0, 0.0, 1350.8483441666203, 4346.574635000006, 410.0552268448939, 2465.6771180834808, 1.4560399795118846, 0.0009191906399192796, NAN, NAN]),
    ("lassie-retrieval", "lassie", [3005.0, 0.00016528925619834712, 2008.1276821093002, 7321.463627999998, 1152.3768596264822, 6538.785901435241, 1.5700773841660092, 0.031470163545682286, NAN, NAN]),
    ("lassie-retrieval", "lassie-pairwise", [3005.0, 0.0, 11103.00106847097, 44253.68754100001, 10322.156226041367, 42905.65573775555, 1.51716101166992, 0.03882120166871944, NAN, NAN]),
    ("lassie-retrieval", "random", [3005.0, 0.00033500837520938025, 2102.310314853724, 7813.8912745, 1182.8440589812467, 6638.770968291055, 1.5678275675900162, 0.024198999046195706, NAN, NAN]),
    ("lassie-retrieval", "oracle", [3005.0, 0.00016528925619834712, 1362.9129685856528, 4333.666497000001, 367.8380729417151, 1386.9209580960915, 1.4991710619211762, 0.00044175580892253573, NAN, NAN]),
    ("livepeer-selection", "coordinator", [7221.0, 0.08384177120027494, 600.0568585468329, 1611.0147195000004, 604.8927242061814, 1630.0486002352109, 1.2875466795748285, 0.07476714597465905, NAN, NAN]),
    ("livepeer-selection", "livepeer", [7221.0, 0.21187300930983272, 892.6988825028282, 2055.887707, 984.5916344949413, 2097.559284408557, 1.4790830244375437, 0.020366269000371945, NAN, NAN]),
    ("livepeer-selection", "random", [7221.0, 0.1150859218698219, 882.651693550188, 2050.687174, 926.0826703817838, 2076.311874460168, 1.3439924115964799, 0.033692552380507466, NAN, NAN]),
    ("livepeer-selection", "round-robin", [7221.0, 0.10344661728425367, 894.3339385300724, 2081.3911135000008, 934.0293710316064, 2099.3594879656507, 1.3194796704122838, 0.03353309261625937, NAN, NAN]),
    ("livepeer-selection", "p2c-opcount", [7221.0, 0.10150360395468438, 836.541828691951, 2025.5272390000005, 868.883232165151, 2038.881704514747, 1.319211138199158, 0.03621661546531518, NAN, NAN]),
    ("livepeer-selection", "oracle", [7221.0, 0.07208043615676359, 486.2680070557638, 1009.881743000001, 481.5900566069735, 1015.5039216613915, 1.2662340783142882, 0.1229343704861667, NAN, NAN]),
    ("pairwise-deadlock", "coordinator", [400.0, 0.0, 62.7985152175, 94.22633500000015, 62.79851520049802, 94.22633494154223, 1.11375, 0.12716171384202724, NAN, NAN]),
    ("pairwise-deadlock", "lassie-pairwise", [400.0, 0.0, 13727.33446776625, 63061.415760500015, 13727.334467749251, 63061.41576066889, 1.11375, 0.16857838639090844, NAN, NAN]),
    ("pairwise-deadlock", "lassie", [400.0, 0.0, 62.7985152175, 94.22633500000015, 62.79851520049802, 94.22633494154223, 1.11375, 0.12203914529742158, NAN, NAN]),
    ("pairwise-deadlock", "random", [400.0, 0.0, 62.7985152175, 94.22633500000015, 62.79851520049802, 94.22633494154223, 1.11375, 0.12676340388629512, NAN, NAN]),
    ("pairwise-deadlock", "oracle", [400.0, 0.0, 62.7985152175, 94.22633500000015, 62.79851520049802, 94.22633494154223, 1.11375, 0.12676340388629512, NAN, NAN]),
    ("large-fleet", "coordinator", [199650.0, 0.020385674931129475, 49.012554964417546, 231.73968800000006, 49.928451777549895, 232.6092310444432, 1.0, 1.0017530678687704e-5, NAN, NAN]),
];

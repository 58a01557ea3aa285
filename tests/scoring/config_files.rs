//! Config files: bad ones name every bad field, presets overlay, the documented file loads.

use super::*;

#[test]
fn bad_toml_config_names_every_bad_field() {
    let text = r#"
        bogus = 1
        mode = "average"
        floor = nan
        exponent = -2
        [weights]
        success = -1
        connect = "high"
        [ema]
        alpha = 1.5
        overall_alpha = 0
        attempt_time = "last_byte"
        [window]
        buckets = 0
        [tag_weights]
        verified = "yes"
    "#;
    let err = Config::from_toml_str(text).unwrap_err();
    let paths = err.paths();
    for want in [
        "bogus",
        "mode",
        "floor",
        "exponent",
        "weights.success",
        "weights.connect",
        "ema.alpha",
        "ema.overall_alpha",
        "ema.attempt_time",
        "window.buckets",
        "tag_weights.verified",
    ] {
        assert!(paths.contains(&want), "missing {want} in {err}");
    }
    let shown = err.to_string();
    assert!(shown.contains("ema.alpha: must be in (0, 1]"), "{shown}");
    assert!(shown.contains("floor: is NaN"), "{shown}");
    assert!(
        shown.contains(
            "ema.attempt_time: unknown value `last_byte`; expected one of first_byte, completion"
        ),
        "{shown}"
    );
}

#[test]
fn bad_json_config_names_every_bad_field() {
    let text = r#"{
        "preset": "livepeer",
        "weights": {"stake": -0.7, "price": "cheap", "colour": 1},
        "price": {"exp_factor": 0, "max": -5},
        "ejection": {"max_share": 1.5, "consecutive_failures": 2.5},
        "window": {"buckets": 5000000000},
        "refresh_ms": -1
    }"#;
    let err = Config::from_json_str(text).unwrap_err();
    let paths = err.paths();
    for want in [
        "weights.stake",
        "weights.price",
        "weights.colour",
        "price.exp_factor",
        "price.max",
        "ejection.max_share",
        "ejection.consecutive_failures",
        "refresh_ms",
        "window.buckets",
    ] {
        assert!(paths.contains(&want), "missing {want} in {err}");
    }
}

#[test]
fn all_zero_weights_are_refused() {
    let err = Config::from_toml_str(
        "[weights]\nsuccess = 0\nconnect = 0\nttfb = 0\nbandwidth = 0\noverload = 0\nload = 0\n\
         stake = 0\nprice = 0\nuniform = 0\ntime_to_success = 0\n[tag_weights]\n",
    )
    .unwrap_err();
    assert_eq!(err.paths(), ["weights"], "{err}");
    let mut c = Config::livepeer();
    c.weights = Weights::ZERO;
    assert!(Core::new(c, Instant::now()).is_err());
}

#[test]
fn unknown_preset_is_an_error_naming_the_field() {
    let err = Config::preset("envoy").unwrap_err();
    assert_eq!(err.paths(), ["preset"]);
    assert!(
        err.to_string().contains("default, lassie, livepeer"),
        "{err}"
    );
    let err = Config::from_toml_str("preset = \"envoy\"\nfloor = 2\n").unwrap_err();
    assert_eq!(err.paths(), ["preset", "floor"], "{err}");
    let err = Config::from_json_str(r#"{"preset": 3}"#).unwrap_err();
    assert_eq!(err.paths(), ["preset"]);
}

#[test]
fn a_file_overrides_its_preset_field_by_field() {
    let c = Config::from_toml_str("preset = \"lassie\"\n[weights]\nbandwidth = 2\n").unwrap();
    let mut want = Config::lassie();
    want.weights.bandwidth = 2.0;
    assert_eq!(c, want);
    let c = Config::from_json_str(r#"{"preset": "livepeer", "price": {"max": 900}}"#).unwrap();
    assert_eq!(c.price.max, Some(900.0));
    assert_eq!(c.weights, Config::livepeer().weights);
    // Round trip: a serialised config loads back as itself.
    for c in [
        Config::default(),
        Config::lassie(),
        Config::livepeer().deterministic(),
    ] {
        let text = toml::to_string(&c).unwrap();
        assert_eq!(Config::from_toml_str(&text).unwrap(), c, "{text}");
        let text = serde_json::to_string(&c).unwrap();
        assert_eq!(Config::from_json_str(&text).unwrap(), c);
    }
}

fn repo_file(rel: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

#[test]
fn documented_config_loads_and_lists_every_field() {
    let path = repo_file("docs/config.toml");
    let loaded = Config::load(&path).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        loaded,
        Config::default(),
        "docs/config.toml should state the defaults"
    );
    let text = std::fs::read_to_string(&path).unwrap();
    // Every field (optional ones included, possibly commented out) appears under its table.
    let mut shape = serde_json::to_value(Config::default()).unwrap();
    shape["tag_weights"] = serde_json::json!({});
    let mut section = String::new();
    let mut seen = std::collections::HashSet::new();
    for line in text.lines() {
        let l = line.trim_start_matches('#').trim();
        if l.starts_with('[') && l.ends_with(']') {
            section = l.trim_matches(['[', ']']).to_string();
            seen.insert(section.clone());
        } else if let Some((k, _)) = l.split_once('=') {
            let k = k.trim();
            seen.insert(if section.is_empty() {
                k.to_string()
            } else {
                format!("{section}.{k}")
            });
        }
    }
    let serde_json::Value::Object(top) = shape else {
        unreachable!()
    };
    for (k, v) in top {
        match v {
            serde_json::Value::Object(inner) if k != "tag_weights" => {
                for f in inner.keys() {
                    assert!(
                        seen.contains(&format!("{k}.{f}")),
                        "docs/config.toml lacks {k}.{f}"
                    );
                }
            }
            _ => assert!(seen.contains(&k), "docs/config.toml lacks {k}"),
        }
    }
}

#[test]
fn example_configs_load() {
    for rel in [
        "examples/configs/livepeer-case.toml",
        "examples/configs/lassie.toml",
        "benches/configs/uniform-draw.toml",
        "benches/configs/first-scoring.toml",
    ] {
        Config::load(&repo_file(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"));
    }
}

/// Values that pass as numbers but that the core could not work with are refused by name: an
/// overload-window bucket of a femtosecond (its bucket count runs past a u64 within days),
/// weights or arm shares that sum to infinity, and more arms or shadows than a decision can
/// record.
#[test]
fn values_past_what_the_core_can_hold_are_refused() {
    let err = Config::from_toml_str("[window]\nbucket_s = 1e-300\n").unwrap_err();
    assert_eq!(err.paths(), ["window.bucket_s"], "{err}");
    assert!(Config::from_toml_str("[window]\nbucket_s = 0.001\n").is_ok());

    // A drift whose variance overflows froze the estimate at its first sample; an optimism
    // whose bonus underflowed made every candidate's time free.
    let err = Config::from_toml_str("[ema]\ndrift = 1e160\n").unwrap_err();
    assert_eq!(err.paths(), ["ema.drift"], "{err}");
    assert!(Config::from_toml_str("[ema]\ndrift = 100\n").is_ok());
    let err = Config::from_toml_str("[unseen]\noptimism = 1e300\n").unwrap_err();
    assert_eq!(err.paths(), ["unseen.optimism"], "{err}");
    assert!(Config::from_toml_str("[unseen]\noptimism = 10\n").is_ok());

    let err = Config::from_toml_str("[weights]\nsuccess = 1e308\nttfb = 1e308\n").unwrap_err();
    assert_eq!(err.paths(), ["weights"], "{err}");
    assert!(err.to_string().contains("scale them down"), "{err}");

    // Weights so small, or a time exponent so large, that every draw weight is 0.
    let err = Config::from_toml_str("time_exponent = 800\n").unwrap_err();
    assert_eq!(err.paths(), ["time_exponent"], "{err}");
    assert!(err.to_string().contains("lower time_exponent"), "{err}");
    assert!(Config::from_toml_str("time_exponent = 500\n").is_ok());
    let tiny = "[weights]\nsuccess = 2e-20\nttfb = 1e-20\noverload = 6e-20\nload = 16e-20\n";
    let err = Config::from_toml_str(tiny).unwrap_err();
    assert_eq!(err.paths(), ["weights"], "{err}");
    assert!(err.to_string().contains("scale the weights up"), "{err}");
    for name in ["default", "lassie", "livepeer"] {
        Config::preset(name).unwrap().validate().unwrap();
    }
    // Refused while ejection is off too, not first when it is turned on.
    let err = Config::from_toml_str("[ejection]\nconsecutive_failures = 0\n").unwrap_err();
    assert_eq!(err.paths(), ["ejection.consecutive_failures"], "{err}");
    // A value that is not one of its choices is named by its path.
    let err = Config::from_toml_str("[unseen]\nprior = \"pooledd\"\n").unwrap_err();
    assert_eq!(err.paths(), ["unseen.prior"], "{err}");

    let arm = |share: &str, i: usize| {
        format!("[[arms]]\nname = \"a{i}\"\nshare = {share}\nconfig = {{ preset = \"default\" }}\n")
    };
    let err = Config::from_toml_str(&(arm("1e308", 0) + &arm("1e308", 1))).unwrap_err();
    assert_eq!(err.paths(), ["arms"], "{err}");

    let many: String = (0..=MAX_ARMS).map(|i| arm("1", i)).collect();
    let err = Config::from_toml_str(&many).unwrap_err();
    assert_eq!(err.paths(), ["arms"], "{err}");
    let most: String = (0..MAX_ARMS).map(|i| arm("1", i)).collect();
    assert!(Config::from_toml_str(&most).is_ok());

    let shadows: String = (0..=MAX_SHADOWS)
        .map(|i| {
            format!(
                "[[shadows]]\nname = \"s{i}\"\nsample = 0.5\nconfig = {{ preset = \"default\" }}\n"
            )
        })
        .collect();
    let err = Config::from_toml_str(&shadows).unwrap_err();
    assert_eq!(err.paths(), ["shadows"], "{err}");
}

/// A config parses from TOML text with `str::parse`, as `from_toml_str` does, errors and all.
#[test]
fn a_config_parses_from_toml_text() {
    let c: Config = "exponent = 8.0\n[weights]\nload = 3.0\n".parse().unwrap();
    assert_eq!(c.exponent, 8.0);
    assert_eq!(c.weights.load, 3.0);
    let err = "[weights]\nsucess = 1\n".parse::<Config>().unwrap_err();
    assert_eq!(err.paths(), ["weights.sucess"], "{err}");
}

/// A problem in a TOML config file says the file and the line of its field (or of the table
/// holding it); a JSON file's, the file only.
#[test]
fn a_config_files_problems_name_their_lines() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.toml");
    std::fs::write(
        &path,
        "exponent = \"x\"\n\n[weights]\nload = -1.0\nbogus = 2\n",
    )
    .unwrap();
    let text = Config::load(&path).unwrap_err().to_string();
    let file = path.display().to_string();
    for want in [
        format!("exponent: must be a number (in {file}, line 1)"),
        format!("weights.load: is negative (-1) (in {file}, line 4)"),
        format!("(in {file}, line 5)"),
    ] {
        assert!(text.contains(&want), "missing {want:?} in\n{text}");
    }
    let json = dir.path().join("bad.json");
    std::fs::write(&json, r#"{"exponent": "x"}"#).unwrap();
    let text = Config::load(&json).unwrap_err().to_string();
    assert!(
        text.contains(&format!("(in {})", json.display())) && !text.contains("line"),
        "{text}"
    );
}

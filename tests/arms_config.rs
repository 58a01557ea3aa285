//! Arms and shadows in the config: each may start from a preset; problems are named by path.

use selection_coordinator::Config;

const ARMS: &str = r#"
[[arms]]
name = "coordinator"
share = 1
config = { preset = "default" }

[[arms]]
name = "lassie"
share = 3
[arms.config]
preset = "lassie"
exponent = 2.0

[[shadows]]
name = "livepeer"
sample = 0.25
config = { preset = "livepeer" }
"#;

#[test]
fn arms_and_shadows_load_from_their_presets() {
    let c = Config::from_toml_str(ARMS).unwrap();
    assert_eq!(c.arms.len(), 2);
    assert_eq!(c.arms[0].name, "coordinator");
    assert!(c.arms[0].config.draws_like(&Config::default()));
    assert_eq!(c.arms[1].share, 3.0);
    assert_eq!(c.arms[1].config.exponent, 2.0);
    assert_eq!(c.arms[1].config.tag_weights.get("verified"), Some(&3.0));
    assert_eq!(c.shadows[0].sample, 0.25);
    assert!(c.shadows[0].config.draws_like(&Config::livepeer()));
    // The document round-trips through JSON.
    let json = serde_json::to_string(&c).unwrap();
    assert_eq!(Config::from_json_str(&json).unwrap(), c);
}

#[test]
fn bad_arms_are_named_by_path() {
    let bad = r#"
[[arms]]
name = "a"
share = -1
config = { ema = { alpha = 7 } }

[[arms]]
name = "a"
share = 1
colour = "red"

[[shadows]]
name = "s"
sample = 0
config = { preset = "nope" }
"#;
    let err = Config::from_toml_str(bad).unwrap_err();
    let paths = err.paths();
    for want in [
        "arms[0].share",
        "arms[0].config.ema.alpha",
        "arms[1].name",
        "arms[1].colour",
        "shadows[0].sample",
        "shadows[0].config.preset",
    ] {
        assert!(paths.contains(&want), "{want} missing from {err}");
    }
}

#[test]
fn an_arm_cannot_take_what_only_the_top_level_decides() {
    let bad = r#"
[[arms]]
name = "ejecting"
share = 1
config = { ejection = { enabled = true } }

[[arms]]
name = "strict"
share = 1
config = { price = { max = 10.0, ignore_max_if_none_pass = false } }
"#;
    let err = Config::from_toml_str(bad).unwrap_err();
    let paths = err.paths();
    for want in [
        "arms[0].config.ejection.enabled",
        "arms[1].config.price.ignore_max_if_none_pass",
    ] {
        assert!(paths.contains(&want), "{want} missing from {err}");
    }
    // With ejection on at the top level, an arm may switch it on or off; a maximum price that
    // falls back is the arm's own.
    let good = r#"
ejection = { enabled = true }

[[arms]]
name = "ejecting"
share = 1
config = { ejection = { enabled = true } }

[[arms]]
name = "priced"
share = 1
config = { ejection = { enabled = false }, price = { max = 10.0 } }
"#;
    Config::from_toml_str(good).unwrap();
}

#[test]
fn a_negative_share_is_named_without_a_misleading_sum() {
    let err = Config::from_toml_str("[[arms]]\nname = \"a\"\nshare = -1\n").unwrap_err();
    let text = err.to_string();
    assert!(text.contains("arms[0].share"), "{text}");
    assert!(!text.contains("sum to 0"), "{text}");
}

/// One problem per field, said as what to fix: an arm without a name or a share is reported
/// as missing them (not also as an empty name and a NaN share), a list entry that is no table
/// names the fields it needs, and a field two checks refuse is listed once.
#[test]
fn each_missing_or_bad_field_is_reported_once() {
    let text = r#"
[ejection]
enabled = true
max_s = -1

[[arms]]
config = { preset = "default" }

[[shadows]]
name = "s"
sample = 0.5
"#;
    let e = Config::from_toml_str(text).unwrap_err();
    let paths: Vec<&str> = e.problems.iter().map(|p| p.path.as_str()).collect();
    assert_eq!(
        paths,
        ["arms[0].name", "arms[0].share", "ejection.max_s"],
        "{e}"
    );
    assert!(e.problems[0].message.contains("is missing"), "{e}");
    assert!(e.problems[1].message.contains("needs a share"), "{e}");
    let e = Config::from_toml_str("arms = [1]").unwrap_err();
    assert!(
        e.problems[0]
            .message
            .contains("must be a table with name, share and config"),
        "{e}"
    );
}

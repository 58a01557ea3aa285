//! Reading a [`Config`] from TOML or JSON: a preset overlaid with the file's fields, every
//! problem collected with its field path before anything is refused.
//!
//! Serde alone stops at the first bad field and often does not say which one ("invalid type:
//! string, expected f64"), so the document is first checked against the shape of a fully
//! populated config; only what passes is deserialised, then [`Config::validate`] checks values.

use std::path::Path;

use serde::Serialize;
use serde_json::{Map, Value};

use super::config::{Arm, Config, Shadow};
use crate::error::{ConfigError, Problem};

/// Fields that may be absent or `null` (each is an `Option` in [`Config`]).
const OPTIONAL: [&str; 5] = [
    "preset",
    "ema.half_life_s",
    "price.max",
    "perf.region",
    "perf.min_score",
];

/// Fields whose value is one of a fixed set of strings.
const CHOICES: [(&str, &[&str]); 3] = [
    ("mode", &["sum", "mixture"]),
    ("unseen.prior", &["average", "pooled"]),
    ("ema.attempt_time", &["first_byte", "completion"]),
];

/// Whole-number fields stored in 32 bits (the others take any `u64`).
const U32_FIELDS: [&str; 8] = [
    "load.unknown_samples",
    "window.buckets",
    "window.min_samples",
    "ejection.consecutive_failures",
    "adaptive.initial",
    "adaptive.min",
    "adaptive.max",
    "adaptive.window_samples",
];

/// Fields that are maps from a free-form key to a number.
const NUMBER_MAPS: [&str; 1] = ["tag_weights"];

/// Parses a config written in TOML, the format of `docs/config.toml`, as
/// [`Config::from_toml_str`] does: `"exponent = 8".parse::<Config>()`.
impl std::str::FromStr for Config {
    type Err = ConfigError;

    fn from_str(text: &str) -> Result<Self, ConfigError> {
        Self::from_toml_str(text)
    }
}

impl Config {
    /// Parses TOML; `preset = "..."` starts from that preset and the file overrides fields.
    /// Reports every problem (unknown field, wrong type, bad value) with its field path.
    ///
    /// ```
    /// use selection_coordinator::Config;
    ///
    /// let c = Config::from_toml_str("preset = \"lassie\"\nexponent = 8.0\n").unwrap();
    /// assert_eq!(c.exponent, 8.0);
    /// // Every problem at once, each with its path.
    /// let e = Config::from_toml_str("exponnet = 8.0\nfloor = 5.0\n").unwrap_err();
    /// let text = e.to_string();
    /// assert!(text.contains("exponnet") && text.contains("floor"), "{text}");
    /// ```
    pub fn from_toml_str(text: &str) -> Result<Self, ConfigError> {
        let doc: toml::Value =
            toml::from_str(text).map_err(|e| ConfigError::single("", e.to_string().trim_end()))?;
        let mut problems = Vec::new();
        let json = toml_to_json(doc, "", &mut problems);
        Self::from_document(json, problems)
    }

    /// Parses JSON; `"preset": "..."` starts from that preset. Reports every problem at once.
    pub fn from_json_str(text: &str) -> Result<Self, ConfigError> {
        let json: Value = serde_json::from_str(text).map_err(|e| ConfigError::single("", e))?;
        Self::from_document(json, Vec::new())
    }

    /// Builds from an already parsed document (the JSON data model), as the file loaders do.
    pub fn from_json_value(json: Value) -> Result<Self, ConfigError> {
        Self::from_document(json, Vec::new())
    }

    /// Reads a config nested in a document of the caller's own, as the loaders read a file:
    /// the preset applied, every problem reported by path. Name it on the field,
    /// `#[serde(deserialize_with = "Config::deserialize_with_presets")]`, since `Config`'s own
    /// derived `Deserialize` maps fields only: it does not apply `preset` and checks no value.
    ///
    /// ```
    /// use selection_coordinator::Config;
    ///
    /// #[derive(Debug, serde::Deserialize)]
    /// struct App {
    ///     #[serde(deserialize_with = "Config::deserialize_with_presets")]
    ///     selection: Config,
    /// }
    ///
    /// let app: App = toml::from_str("[selection]\npreset = \"lassie\"\n").unwrap();
    /// assert_eq!(app.selection, Config::preset("lassie").unwrap());
    /// let bad = toml::from_str::<App>("[selection]\nexponent = -1.0\n");
    /// assert!(bad.unwrap_err().to_string().contains("exponent"));
    /// ```
    pub fn deserialize_with_presets<'de, D>(deserializer: D) -> Result<Self, D::Error>
    where
        D: serde::Deserializer<'de>,
    {
        let doc = <Value as serde::Deserialize>::deserialize(deserializer)?;
        Self::from_json_value(doc).map_err(serde::de::Error::custom)
    }

    /// Loads a `.json` file (any case), or a TOML file (any other extension).
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = crate::input::read_text(path)
            .map_err(|e| ConfigError::single("", format!("cannot read {}: {e}", path.display())))?;
        if path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("json"))
        {
            Self::from_json_str(&text).map_err(|e| in_file(e, path, None))
        } else {
            Self::from_toml_str(&text).map_err(|e| in_file(e, path, Some(&text)))
        }
    }

    fn from_document(mut doc: Value, mut problems: Vec<Problem>) -> Result<Self, ConfigError> {
        let Value::Object(fields) = &mut doc else {
            return Err(ConfigError::single(
                "",
                "a config must be a table of fields",
            ));
        };
        let base = match fields.get("preset") {
            None | Some(Value::Null) => Config::default(),
            Some(Value::String(name)) => match Config::preset(name) {
                Ok(c) => c,
                Err(e) => {
                    problems.extend(e.problems);
                    fields.remove("preset");
                    Config::default()
                }
            },
            Some(_) => {
                problems.push(Problem::new("preset", "must be a string naming a preset"));
                fields.remove("preset");
                Config::default()
            }
        };
        // Arms and shadows hold whole configs (each may start from its own preset): they are
        // read one by one, then put in place of the base's.
        let arms = fields
            .remove("arms")
            .map(|v| variants(v, "arms", "share", &mut problems));
        let shadows = fields
            .remove("shadows")
            .map(|v| variants(v, "shadows", "sample", &mut problems));
        let shape = to_json(&Config::shape());
        check_shape(&shape, fields, "", &mut problems);
        let mut merged = to_json(&base);
        merge(&mut merged, doc);
        match serde_json::from_value::<Config>(merged) {
            Ok(mut config) => {
                if let Some(arms) = arms {
                    config.arms = arms
                        .into_iter()
                        .map(|(name, share, config)| Arm {
                            name,
                            share,
                            config,
                        })
                        .collect();
                }
                if let Some(shadows) = shadows {
                    config.shadows = shadows
                        .into_iter()
                        .map(|(name, sample, config)| Shadow {
                            name,
                            sample,
                            config,
                        })
                        .collect();
                }
                // One problem per field: a value the reading already refused (an arm's missing
                // share, read as NaN) is not reported again by the validation, nor is a field
                // twice (a negative `ejection.max_s` is also below `base_s`).
                if let Err(e) = config.validate() {
                    for p in e.problems {
                        if !problems.iter().any(|q| q.path == p.path) {
                            problems.push(p);
                        }
                    }
                }
                if problems.is_empty() {
                    Ok(config)
                } else {
                    Err(ConfigError { problems })
                }
            }
            Err(e) => {
                // Shape checking removed every field it could name; what is left (a number
                // too large for its integer field) is reported as serde says it.
                problems.push(Problem::new("", e));
                Err(ConfigError { problems })
            }
        }
    }

    /// A config with every optional field present, so its JSON form shows every field's type.
    fn shape() -> Config {
        let mut c = Config {
            preset: Some(String::new()),
            ..Config::default()
        };
        c.ema.half_life_s = Some(1.0);
        c.price.max = Some(1.0);
        c.perf.region = Some(String::new());
        c.perf.min_score = Some(1.0);
        c
    }
}

/// Reads a list of `{ name, <amount>, config }` tables (arms or shadows), each config through
/// the same loader (so it may name a preset), collecting problems under `list[i]`.
fn variants(
    list: Value,
    key: &str,
    amount: &str,
    problems: &mut Vec<Problem>,
) -> Vec<(String, f64, Config)> {
    let Value::Array(items) = list else {
        problems.push(Problem::new(key, "must be a list of tables"));
        return Vec::new();
    };
    let mut out = Vec::new();
    for (i, item) in items.into_iter().enumerate() {
        let path = format!("{key}[{i}]");
        let Value::Object(mut t) = item else {
            problems.push(Problem::new(
                &path,
                format!("must be a table with name, {amount} and config"),
            ));
            continue;
        };
        let name = match t.remove("name") {
            Some(Value::String(n)) => n,
            None => {
                problems.push(Problem::new(
                    &format!("{path}.name"),
                    "is missing: each entry needs a name (a string)",
                ));
                String::new()
            }
            Some(_) => {
                problems.push(Problem::new(&format!("{path}.name"), "must be a string"));
                String::new()
            }
        };
        let value = match t.remove(amount) {
            Some(Value::Number(n)) => n.as_f64().unwrap_or(f64::NAN),
            None => {
                problems.push(Problem::new(
                    &format!("{path}.{amount}"),
                    format!("is missing: each entry needs a {amount} (a number)"),
                ));
                f64::NAN
            }
            Some(_) => {
                problems.push(Problem::new(
                    &format!("{path}.{amount}"),
                    "must be a number",
                ));
                f64::NAN
            }
        };
        let config = match t.remove("config") {
            None => Ok(Config::default()),
            Some(v) => Config::from_document(v, Vec::new()),
        };
        for unknown in t.keys() {
            problems.push(Problem::new(
                &format!("{path}.{unknown}"),
                format!("unknown field; expected name, {amount}, config"),
            ));
        }
        // A bad config is reported here and replaced by the default, so validation still
        // checks the rest of the entry (its name and share).
        let config = config.unwrap_or_else(|e| {
            problems.extend(e.problems.into_iter().map(|p| {
                let sub = if p.path.is_empty() {
                    format!("{path}.config")
                } else {
                    format!("{path}.config.{}", p.path)
                };
                Problem::new(&sub, p.message)
            }));
            Config::default()
        });
        out.push((name, value, config));
    }
    out
}

fn to_json<T: Serialize>(value: &T) -> Value {
    // Config holds only numbers, strings, bools and maps with string keys: it always converts.
    serde_json::to_value(value).unwrap_or(Value::Null)
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// Converts TOML to JSON, reporting what JSON cannot hold (NaN, infinities, dates) by path and
/// leaving it out.
fn toml_to_json(v: toml::Value, path: &str, problems: &mut Vec<Problem>) -> Value {
    match v {
        toml::Value::String(s) => Value::String(s),
        toml::Value::Integer(i) => Value::from(i),
        toml::Value::Float(f) => match serde_json::Number::from_f64(f) {
            Some(n) => Value::Number(n),
            None => {
                let what = if f.is_nan() { "is NaN" } else { "is infinite" };
                problems.push(Problem::new(path, what));
                Value::Null
            }
        },
        toml::Value::Boolean(b) => Value::Bool(b),
        toml::Value::Datetime(d) => {
            problems.push(Problem::new(path, format!("is a date ({d}), not a value")));
            Value::Null
        }
        toml::Value::Array(items) => Value::Array(
            items
                .into_iter()
                .enumerate()
                .map(|(i, x)| toml_to_json(x, &format!("{path}[{i}]"), problems))
                .collect(),
        ),
        toml::Value::Table(t) => {
            let mut out = Map::new();
            for (k, x) in t {
                let p = join(path, &k);
                let before = problems.len();
                let x = toml_to_json(x, &p, problems);
                // A value already reported is dropped so it is not reported twice.
                if problems.len() == before || !x.is_null() {
                    out.insert(k, x);
                }
            }
            Value::Object(out)
        }
    }
}

/// Checks `doc` against `shape` (a fully populated config), reports each unknown field and each
/// value of the wrong type by path, and removes them so the rest can still be read.
fn check_shape(shape: &Value, doc: &mut Map<String, Value>, path: &str, out: &mut Vec<Problem>) {
    let Value::Object(shape) = shape else { return };
    let mut bad = Vec::new();
    for (key, value) in doc.iter_mut() {
        let p = join(path, key);
        let Some(expected) = shape.get(key) else {
            let known: Vec<&str> = shape.keys().map(String::as_str).collect();
            out.push(Problem::new(
                &p,
                format!("unknown field; expected one of {}", known.join(", ")),
            ));
            bad.push(key.clone());
            continue;
        };
        let problem = if value.is_null() {
            (!OPTIONAL.contains(&p.as_str())).then(|| "must not be null".to_string())
        } else if NUMBER_MAPS.contains(&p.as_str()) {
            match value {
                Value::Object(m) => {
                    let mut wrong = Vec::new();
                    for (k, v) in m.iter() {
                        if !v.is_number() {
                            out.push(Problem::new(&join(&p, k), "must be a number"));
                            wrong.push(k.clone());
                        }
                    }
                    for k in wrong {
                        m.remove(&k);
                    }
                    None
                }
                _ => Some("must be a table of numbers".to_string()),
            }
        } else {
            match (expected, &mut *value) {
                (Value::Object(_), Value::Object(inner)) => {
                    check_shape(expected, inner, &p, out);
                    None
                }
                (Value::Object(_), _) => Some("must be a table".to_string()),
                (Value::Number(n), Value::Number(v)) if n.is_u64() => {
                    let max = if U32_FIELDS.contains(&p.as_str()) {
                        u64::from(u32::MAX)
                    } else {
                        u64::MAX
                    };
                    match v.as_u64() {
                        Some(x) if x <= max => None,
                        _ => Some(format!("must be a whole number from 0 to {max}, got {v}")),
                    }
                }
                (Value::Number(_), Value::Number(_)) => None,
                (Value::Number(_), _) => Some("must be a number".to_string()),
                (Value::Bool(_), Value::Bool(_)) => None,
                (Value::Bool(_), _) => Some("must be true or false".to_string()),
                (Value::String(_), Value::String(s)) => CHOICES
                    .iter()
                    .find(|(field, _)| *field == p)
                    .filter(|(_, allowed)| !allowed.contains(&s.as_str()))
                    .map(|(_, allowed)| {
                        format!(
                            "unknown value `{s}`; expected one of {}",
                            allowed.join(", ")
                        )
                    }),
                (Value::String(_), _) => Some("must be a string".to_string()),
                _ => None,
            }
        };
        if let Some(message) = problem {
            out.push(Problem::new(&p, message));
            bad.push(key.clone());
        }
    }
    for key in bad {
        doc.remove(&key);
    }
}

/// Overlays `patch` onto `base`, table by table.
fn merge(base: &mut Value, patch: Value) {
    match (base, patch) {
        (Value::Object(b), Value::Object(p)) => {
            for (k, v) in p {
                match b.get_mut(&k) {
                    // A map of free-form keys (tag weights) is replaced, not merged: a file
                    // that lists its tags means exactly those.
                    Some(slot)
                        if slot.is_object()
                            && v.is_object()
                            && !NUMBER_MAPS.contains(&k.as_str()) =>
                    {
                        merge(slot, v)
                    }
                    _ => {
                        b.insert(k, v);
                    }
                }
            }
        }
        (b, p) => *b = p,
    }
}

/// Says which file each problem is in and, for a TOML file, on which line: the field's own,
/// or else that of the nearest enclosing table present (`[weights]` for a missing weight).
fn in_file(mut e: ConfigError, path: &Path, toml: Option<&str>) -> ConfigError {
    for p in &mut e.problems {
        let line = toml.filter(|_| !p.path.is_empty()).and_then(|text| {
            Some(crate::input::line_of(
                text,
                crate::input::span_of(text, &p.path)?.start,
            ))
        });
        p.message = match line {
            Some(n) => format!("{} (in {}, line {n})", p.message, path.display()),
            None => format!("{} (in {})", p.message, path.display()),
        };
    }
    e
}

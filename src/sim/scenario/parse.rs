//! Reading a scenario: parsing the TOML with field paths and lines in errors, loading a
//! built-in by name or a file by path, and validating what serde cannot check alone.

#[allow(clippy::wildcard_imports)]
use super::*;
use crate::input::{line_of, snippet, span_of, Num};
use crate::sim::report::MAX_SERIES_BUCKETS;

/// The built-in discovery scenario (see `crate::discovery::sim`): listed with the others, run
/// by the discovery simulator.
const DISCOVERY_BUILTIN: &str = "livepeer-discovery";

/// "did you mean `x`? " for the name in `names` closest to `name` (see [`closest`]), or
/// nothing when none is close.
pub(crate) fn did_you_mean(name: &str, names: &[&str]) -> String {
    closest(name, names)
        .map(|n| format!("did you mean `{n}`? "))
        .unwrap_or_default()
}

/// The name in `names` closest to `name` by edit distance, if it is close enough to be a typo
/// (at most a third of the longer name's characters differ, and at most 3).
fn closest<'a>(name: &str, names: &[&'a str]) -> Option<&'a str> {
    let distance = |a: &str, b: &str| {
        let b: Vec<char> = b.chars().collect();
        let mut row: Vec<usize> = (0..=b.len()).collect();
        for (i, ca) in a.chars().enumerate() {
            let mut diagonal = row[0];
            row[0] = i + 1;
            for (j, &cb) in b.iter().enumerate() {
                let next = (diagonal + usize::from(ca != cb))
                    .min(row[j] + 1)
                    .min(row[j + 1] + 1);
                diagonal = row[j + 1];
                row[j + 1] = next;
            }
        }
        row[b.len()]
    };
    names
        .iter()
        .map(|n| (distance(name, n), *n))
        .filter(|(d, n)| *d <= 3 && *d * 3 <= name.chars().count().max(n.chars().count()))
        .min_by_key(|(d, _)| *d)
        .map(|(_, n)| n)
}

/// Reads scenario `text` (from `source_name`) as a `T`: a syntax error or a value serde refuses
/// names the field path and the line, and quotes the line with the value underlined.
pub(crate) fn deserialize<T: serde::de::DeserializeOwned>(
    text: &str,
    source_name: &str,
) -> Result<T, ScenarioError> {
    let from_toml = |path: String, inner: toml::de::Error| {
        let span = inner.span();
        let field = if path == "." || path.is_empty() {
            "(document)".to_string()
        } else {
            path
        };
        let mut message = inner.message().trim().to_string();
        if let Some(span) = &span {
            message.push('\n');
            message.push_str(&snippet(text, span.clone()));
        }
        ScenarioError {
            source_name: source_name.to_string(),
            field,
            line: span.map(|s| line_of(text, s.start)),
            message,
        }
    };
    let de = toml::Deserializer::parse(text).map_err(|e| from_toml(String::new(), e))?;
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        from_toml(path, e.into_inner())
    })
}

impl ScenarioError {
    /// An error about `field` of the scenario `text` from `source_name`: at the field's value
    /// (or the nearest enclosing one present, see [`span_of`]), with its line, and the line
    /// quoted with the value underlined, as a TOML error is shown.
    pub(crate) fn at(source_name: &str, text: &str, field: &str, message: String) -> Self {
        let mut message = message;
        let span = span_of(text, field);
        if let Some(span) = &span {
            message.push('\n');
            message.push_str(&snippet(text, span.clone()));
        }
        ScenarioError {
            source_name: source_name.to_string(),
            field: field.to_string(),
            line: span.map(|s| line_of(text, s.start)),
            message,
        }
    }

    /// `line` when the error has none.
    fn or_line(mut self, line: Option<usize>) -> Self {
        self.line = self.line.or(line);
        self
    }
}

impl Scenario {
    /// Parses and validates scenario text; `source_name` is used in errors.
    pub fn parse(text: &str, source_name: &str) -> Result<Self, ScenarioError> {
        check_kind(text, source_name)?;
        let scenario: Scenario = deserialize(text, source_name)?;
        scenario.validate(text, source_name)?;
        Ok(scenario)
    }

    /// Loads a built-in scenario by name, or a file by path.
    ///
    /// A name that is neither a built-in nor a file is an "unknown scenario" error listing the
    /// built-ins, with the closest one suggested; a path that cannot be read says why.
    pub fn load(name_or_path: &str) -> Result<Self, ScenarioError> {
        if let Some((name, text)) = BUILTIN.iter().find(|(n, _)| *n == name_or_path) {
            return Self::parse(text, &format!("builtin:{name}"));
        }
        let whole = |message: String| ScenarioError {
            source_name: name_or_path.to_string(),
            field: "(document)".into(),
            line: None,
            message,
        };
        let builtins = || {
            let mut names: Vec<&str> = BUILTIN.iter().map(|(n, _)| *n).collect();
            names.push(DISCOVERY_BUILTIN);
            names
        };
        if name_or_path == DISCOVERY_BUILTIN {
            return Err(whole(format!(
                "`{DISCOVERY_BUILTIN}` is a discovery scenario (kind = \"discovery\"): it compares \
                 discovery modes and runs with `selcoord simulate` (`discovery::sim::run`), not as \
                 a selection scenario"
            )));
        }
        let path = Path::new(name_or_path);
        let text = crate::input::read_text(path).map_err(|e| {
            let looks_like_a_name = e.kind() == std::io::ErrorKind::NotFound
                && path.extension().is_none()
                && path.components().count() == 1;
            let list = builtins().join(", ");
            if looks_like_a_name {
                let hint = did_you_mean(name_or_path, &builtins());
                whole(format!(
                    "unknown scenario `{name_or_path}`: {hint}built-in scenarios: {list}; or give \
                     the path of a scenario TOML file"
                ))
            } else if e.kind() == std::io::ErrorKind::NotFound {
                whole(format!("cannot read it ({e}); built-in scenarios: {list}"))
            } else if e.kind() == std::io::ErrorKind::InvalidData {
                whole(format!(
                    "cannot read it: a scenario file is UTF-8 text (TOML), and this file is not \
                     ({e})"
                ))
            } else {
                whole(format!("cannot read it ({e})"))
            }
        })?;
        let mut scenario = with_scenario_dir(path.parent(), || Self::parse(&text, name_or_path))?;
        scenario.source_dir = path.parent().map(Path::to_path_buf);
        Ok(scenario)
    }

    /// The directory of the scenario file it was loaded from ([`Scenario::load`]; none for a
    /// built-in or parsed text): relative config paths in it are read from there.
    pub fn source_dir(&self) -> Option<&Path> {
        self.source_dir.as_deref()
    }

    /// The scenario's own `policies`, parsed; a `coordinator:<file>` entry's relative path is
    /// read beside the scenario file when the config is there (as `coordinator = "<file>"`
    /// is), else from the working directory.
    pub fn policy_specs(&self) -> Result<Vec<crate::sim::policy::PolicySpec>, String> {
        with_scenario_dir(self.source_dir(), || {
            (self.policies.iter())
                .map(|p| crate::sim::policy::PolicySpec::parse(p))
                .collect()
        })
    }

    /// Every candidate id in order (replicas expanded) with its spec index.
    pub fn expanded(&self) -> Vec<(String, usize)> {
        let mut out = Vec::new();
        for (i, c) in self.candidates.iter().enumerate() {
            if c.count == 1 {
                out.push((c.id.clone(), i));
            } else {
                for k in 0..c.count {
                    out.push((format!("{}-{k}", c.id), i));
                }
            }
        }
        out
    }

    fn validate(&self, text: &str, source_name: &str) -> Result<(), ScenarioError> {
        // Where the field's value is in the file (an inline table's too), with the line
        // quoted and the value underlined; else the line a search for its key finds.
        let err = |field: &str, line: Option<usize>, message: String| {
            ScenarioError::at(source_name, text, field, message).or_line(line)
        };
        let whole_key = |key: &str| {
            text.lines()
                .position(|l| l.trim_start().starts_with(key))
                .map(|i| i + 1)
        };
        if self.candidates.is_empty() {
            return Err(err(
                "candidates",
                None,
                "at least one [[candidates]] entry is needed".into(),
            ));
        }
        let w = &self.workload;
        match w.kind {
            LoopKind::Closed if w.workers == 0 || w.operations == 0 => {
                return Err(err(
                    "workload.workers",
                    whole_key("workers").or(whole_key("[workload]")),
                    "a closed loop needs workers >= 1 and operations >= 1".into(),
                ))
            }
            LoopKind::Open if w.rate_per_s <= 0.0 || w.duration_s <= 0.0 => {
                return Err(err(
                    "workload.rate_per_s",
                    whole_key("rate_per_s").or(whole_key("[workload]")),
                    "an open loop needs rate_per_s > 0 and duration_s > 0".into(),
                ))
            }
            _ => {}
        }
        // A field of the other kind of loop would be ignored: say so rather than run without it
        // (a file whose `loop` was switched keeps the old loop's fields).
        let other: &[(&str, bool)] = match w.kind {
            LoopKind::Closed => &[
                ("rate_per_s", w.rate_per_s != 0.0),
                ("duration_s", w.duration_s != 0.0),
                ("arrivals", w.arrivals != Arrivals::Poisson),
            ],
            LoopKind::Open => &[
                ("workers", w.workers != 0),
                ("operations", w.operations != 0),
                ("think_ms", w.think_ms != 0.0),
            ],
        };
        if let Some((field, _)) = other.iter().find(|f| f.1) {
            let (this, that) = match w.kind {
                LoopKind::Closed => ("a closed", "an open"),
                LoopKind::Open => ("an open", "a closed"),
            };
            return Err(err(
                &format!("workload.{field}"),
                whole_key(field),
                format!(
                    "`{field}` is for {that} loop and this is {this} one (`loop`): drop it, or \
                     change `loop`"
                ),
            ));
        }
        if w.kind == LoopKind::Closed && w.workers > MAX_WORKERS {
            return Err(err(
                "workload.workers",
                whole_key("workers").or(whole_key("[workload]")),
                format!(
                    "{} workers; a closed loop may have at most {MAX_WORKERS} (each holds its \
                     pending request from the start): lower it",
                    w.workers
                ),
            ));
        }
        // Every request's figures are kept for the percentiles: a typo in a rate or a
        // duration would otherwise run for hours and exhaust memory before saying anything.
        let (requests, key, product) = match w.kind {
            LoopKind::Closed => (
                f64::from(w.workers) * f64::from(w.operations),
                "workers",
                "workers x operations",
            ),
            LoopKind::Open => (
                w.rate_per_s * w.duration_s,
                "rate_per_s",
                "rate_per_s x duration_s",
            ),
        };
        // Fewer than one request expected: most runs of it would measure nothing.
        if w.kind == LoopKind::Open && requests < 1.0 {
            return Err(err(
                "workload.rate_per_s",
                whole_key("rate_per_s").or(whole_key("[workload]")),
                format!(
                    "rate_per_s = {} over duration_s = {} expects {} requests \
                     (rate_per_s x duration_s): an open loop needs at least 1; raise rate_per_s \
                     or duration_s",
                    Num(w.rate_per_s),
                    Num(w.duration_s),
                    Num(requests)
                ),
            ));
        }
        if requests > MAX_REQUESTS {
            return Err(err(
                &format!("workload.{key}"),
                whole_key(key).or(whole_key("[workload]")),
                format!(
                    "{requests:.3e} requests expected ({product}); a scenario may have at most \
                     {MAX_REQUESTS:.0e}: lower it"
                ),
            ));
        }
        // A fresh retry excludes nothing, so each request may make every attempt its
        // retries allow (within a request, retries end once every candidate was tried).
        let attempts = requests * (f64::from(w.retries) + 1.0);
        if self.caller.retry == Retry::Fresh && attempts > MAX_FRESH_ATTEMPTS {
            return Err(err(
                "workload.retries",
                whole_key("retries").or(whole_key("[workload]")),
                format!(
                    "{} retries with `caller.retry = \"fresh\"` allow {attempts:.3e} attempts \
                     ({product} x (retries + 1)); a scenario may have at most \
                     {MAX_FRESH_ATTEMPTS:.0e}: lower `workload.retries`",
                    w.retries
                ),
            ));
        }
        let buckets = match w.kind {
            LoopKind::Open => w.duration_s / self.series_bucket_s,
            LoopKind::Closed => 0.0,
        };
        // An open loop's duration may span at most as many buckets as a run's series keep.
        let max_buckets = MAX_SERIES_BUCKETS as f64;
        if self.series_bucket_s < MIN_BUCKET_S || buckets > max_buckets {
            return Err(err(
                "series_bucket_s",
                whole_key("series_bucket_s"),
                format!(
                    "{} s buckets are too narrow: the time series keep a row per bucket; use \
                     at least {MIN_BUCKET_S} s and at most {max_buckets:.0e} buckets over the \
                     run (duration_s / series_bucket_s)",
                    Num(self.series_bucket_s)
                ),
            ));
        }
        // Detection and recovery read 1 s windows of whole buckets, and the share before a
        // degrade 5 s of them: a bucket must divide one second.
        let per_s = 1.0 / self.series_bucket_s;
        if self.series_bucket_s > 1.0 || (per_s - per_s.round()).abs() > 1e-6 * per_s {
            return Err(err(
                "series_bucket_s",
                whole_key("series_bucket_s"),
                format!(
                    "{} s does not divide one second: detection and recovery are measured over \
                     1 s windows of whole buckets; use 1 s divided by a whole number (1, 0.5, \
                     0.25, 0.2, 0.1, ...)",
                    Num(self.series_bucket_s)
                ),
            ));
        }
        let total: u64 = self.candidates.iter().map(|c| c.count as u64).sum();
        if total > MAX_CANDIDATES {
            let i = self
                .candidates
                .iter()
                .position(|c| c.count as u64 > MAX_CANDIDATES / 2)
                .unwrap_or(0);
            return Err(err(
                &format!("candidates[{i}].count"),
                whole_key("count"),
                format!("{total} candidates in all; a scenario may have at most {MAX_CANDIDATES}"),
            ));
        }
        // Candidates that join later are listed too (`present = false`): `total` is every
        // candidate the scenario can ever have, replicas counted.
        if u64::from(w.subset) > total {
            return Err(err(
                "workload.subset",
                whole_key("subset").or(whole_key("[workload]")),
                format!(
                    "a subset of {} candidates, but the fleet has {total} in all (`count` \
                     replicas included, those that join later too): a request could never get \
                     that many; lower it to at most {total}, or 0 for all",
                    w.subset
                ),
            ));
        }
        for (i, c) in self.candidates.iter().enumerate() {
            if let Err(p) = overrides::check_candidate(c, w.bytes) {
                let key = p.field.split('.').next().unwrap_or(p.field);
                return Err(err(
                    &format!("candidates[{i}].{}", p.field),
                    whole_key(key),
                    p.message,
                ));
            }
        }
        let ids = self.expanded();
        let mut seen = std::collections::HashSet::new();
        for (id, spec) in &ids {
            if !seen.insert(id.as_str()) {
                // The line of this entry's id: the n-th line that names it, n counting the
                // entries up to this one that carry the same id.
                let own = &self.candidates[*spec].id;
                let nth = self.candidates[..*spec]
                    .iter()
                    .filter(|c| c.id == *own)
                    .count();
                let key = format!("id = \"{own}\"");
                let line = text
                    .lines()
                    .enumerate()
                    .filter(|(_, l)| l.trim_start().starts_with(&key))
                    .nth(nth)
                    .map(|(i, _)| i + 1);
                return Err(err(
                    &format!("candidates[{spec}].id"),
                    line.or_else(|| whole_key(&key)),
                    format!("duplicate candidate id `{id}`"),
                ));
            }
        }
        for (i, ev) in self.timeline.iter().enumerate() {
            let name = ev.candidate.get_ref().as_str();
            if !seen.contains(name) {
                // A group of replicas is addressed one replica at a time.
                let replicas = self
                    .candidates
                    .iter()
                    .find(|c| c.id == name && c.count > 1)
                    .map(|c| {
                        format!(
                            ": `{name}` has {} replicas, named `{name}-0` to `{name}-{}`; an \
                             event names one of them",
                            c.count,
                            c.count - 1
                        )
                    })
                    .unwrap_or_default();
                return Err(err(
                    &format!("timeline[{i}].candidate"),
                    Some(line_of(text, ev.candidate.span().start)),
                    format!("unknown candidate `{name}`{replicas}"),
                ));
            }
        }
        if let Err((field, e)) = overrides::check_timeline(self) {
            let line = field
                .split('.')
                .next()
                .and_then(|entry| entry.strip_prefix("timeline["))
                .and_then(|n| n.trim_end_matches(']').parse::<usize>().ok())
                .and_then(|n| self.timeline.get(n))
                .map(|ev| line_of(text, ev.candidate.span().start));
            return Err(err(&field, line, e));
        }
        for (i, name) in self.policies.iter().enumerate() {
            if let Err(e) = crate::sim::policy::PolicySpec::parse(name) {
                return Err(err(&format!("policies[{i}]"), whole_key("policies"), e));
            }
            if self.policies[..i].contains(name) {
                return Err(err(
                    &format!("policies[{i}]"),
                    whole_key("policies"),
                    format!("`{name}` is listed twice: each policy runs once; drop the repeat"),
                ));
            }
        }
        if let Some(Err(e)) = self.fleet.as_ref().map(|f| f.check()) {
            let field = e.split_whitespace().next().unwrap_or("fleet").to_string();
            return Err(err(&field, whole_key("[fleet]"), e));
        }
        if let Err((field, e)) = self.caller.check(self) {
            return Err(err(field, whole_key("[caller]"), e));
        }
        if let Err(e) = check_limits(self.limits) {
            return Err(err("limits", whole_key("[limits]"), e));
        }
        Ok(())
    }
}

/// The core's own check of the limits (it refuses bad ones when they are set).
fn check_limits(limits: Limits) -> Result<(), String> {
    crate::core::Core::new(Config::default(), std::time::Instant::now())
        .and_then(|c| c.with_limits(limits))
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// A top-level `kind` is not a field of a selection scenario but says which format the file is
/// in: one that names no kind there is (a typo of `discovery`, say) is refused as an unknown
/// kind listing the kinds, rather than as an unknown field.
fn check_kind(text: &str, source_name: &str) -> Result<(), ScenarioError> {
    // `crate::discovery::sim::KIND`, spelled here: the discovery simulator builds on this one.
    const DISCOVERY: &str = "discovery";
    // A file that is not TOML is left to the reader, which says where it breaks.
    let Some(kind) = toml::from_str::<toml::Table>(text)
        .ok()
        .and_then(|t| t.get("kind").cloned())
    else {
        return Ok(());
    };
    let shown = match &kind {
        toml::Value::String(k) if k == DISCOVERY => {
            return Err(ScenarioError::at(
                source_name,
                text,
                "kind",
                format!(
                    "a discovery scenario (kind = \"{DISCOVERY}\") runs with `selcoord simulate \
                     --scenario <file>` in its own format (docs/discovery.md), not as a selection \
                     scenario"
                ),
            ))
        }
        toml::Value::String(k) => format!("`{k}`"),
        other => format!("{other}"),
    };
    let hint = match &kind {
        toml::Value::String(k) => did_you_mean(k, &[DISCOVERY]),
        _ => String::new(),
    };
    Err(ScenarioError::at(
        source_name,
        text,
        "kind",
        format!(
            "unknown scenario kind {shown}: {hint}the kinds are `{DISCOVERY}` (a discovery \
             scenario, docs/discovery.md) and none: a file without `kind` is a selection \
             scenario (docs/scenarios.md); fix the kind or drop it"
        ),
    ))
}

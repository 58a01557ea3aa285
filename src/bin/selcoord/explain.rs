//! `selcoord explain`: what one draw would do for a set of candidates under a config.
//!
//! The candidates (static info plus optional recorded statistics) are loaded into a real
//! [`Core`] and [`Core::explain`] answers, so the numbers are those a live coordinator would
//! draw with. The file format is documented in `docs/explain.md`.

use std::collections::hash_map::{Entry, HashMap};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

use rand::rngs::SmallRng;
use rand::SeedableRng;
use selection_coordinator::decision::{ConsideredCandidate, Fallback, FilterNote};
use selection_coordinator::input::Num;
use selection_coordinator::score::{Components, Overall, ScoreModel};
use selection_coordinator::snapshot::{
    CandidateSnapshot, Snapshot, StatsSnapshot, SNAPSHOT_VERSION,
};
use selection_coordinator::{CandidateId, CandidateInfo, Config, Core, Mode, Request};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Arguments of `selcoord explain`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Scoring config: a preset name (default, lassie, livepeer) or a TOML/JSON file.
    #[arg(long, default_value = "default")]
    config: String,
    /// Candidates: a TOML or JSON file with static info and optional recorded statistics
    /// (format: docs/explain.md).
    #[arg(long)]
    candidates: PathBuf,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

/// Runs the subcommand.
pub(crate) fn run(args: Args) -> Result<(), String> {
    let config = Config::from_name_or_path(&args.config).map_err(|e| e.to_string())?;
    let file = CandidatesFile::load(&args.candidates)?;
    let arms = arms_note(&config);
    let explained = explain(config, &file)?;
    let out = if args.json {
        // The JSON stays the documented object; the note goes to stderr.
        if let Some(note) = &arms {
            eprintln!("selcoord explain: {note}");
        }
        serde_json::to_string_pretty(&explained.to_json()).map_err(|e| e.to_string())?
    } else {
        match &arms {
            Some(note) => format!("{}\nnote: {note}", explained.table()),
            None => explained.table(),
        }
    };
    crate::out::println(&out)
}

/// What the answer leaves out when the config has `[[arms]]` or `[[shadows]]`: only the
/// top-level config's draw is explained.
fn arms_note(config: &Config) -> Option<String> {
    let total: f64 = config.arms.iter().map(|a| a.share).sum();
    let arms: Vec<String> = config
        .arms
        .iter()
        .map(|a| {
            let pct = if total > 0.0 {
                a.share / total * 100.0
            } else {
                0.0
            };
            format!("{} {pct:.0}%", a.name)
        })
        .collect();
    let shadows: Vec<&str> = config.shadows.iter().map(|s| s.name.as_str()).collect();
    let mut parts = Vec::new();
    if !arms.is_empty() {
        parts.push(format!(
            "the config splits requests between {} arms ({}), each drawn with its own config; \
             the arms are not explained, only the top-level config",
            arms.len(),
            arms.join(", ")
        ));
    }
    if !shadows.is_empty() {
        parts.push(format!(
            "its shadows ({}) are not explained either",
            shadows.join(", ")
        ));
    }
    if parts.is_empty() {
        return None;
    }
    Some(format!(
        "{}. To see how one would draw, put its `config` table in a file of its own and pass \
         that file as --config (the candidates' statistics are the same for all).",
        parts.join("; ")
    ))
}

/// The candidates file: `[[candidates]]` entries and optional `[overall]` averages.
#[derive(Debug)]
struct CandidatesFile {
    overall: Option<Overall>,
    candidates: Vec<(CandidateInfo, Option<RecordedStats>)>,
}

/// Recorded statistics of one candidate, in the units a user has at hand.
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct RecordedStats {
    /// Success EMA, 0 to 1.
    success: Option<f64>,
    /// Connect time EMA, ms.
    connect_ms: Option<f64>,
    /// Time-to-first-byte EMA, ms.
    ttfb_ms: Option<f64>,
    /// Bandwidth EMA, bytes per second.
    bandwidth_bps: Option<f64>,
    /// EMA of attempt time to a result (first byte or failure), ms.
    attempt_ms: Option<f64>,
    /// Overload errors in the current window.
    overload_errors: u32,
    /// Outcomes in the current window (overload errors included).
    outcomes: u32,
    /// Failures in a row.
    consecutive_failures: u32,
    /// Times ejected so far.
    ejections: u32,
    /// Seconds of ejection left (0 or absent: not ejected).
    ejected_for_s: f64,
    /// Seconds since the last sample (statistics decay over it when a half-life is set).
    age_s: f64,
}

fn empty_stats() -> StatsSnapshot {
    RecordedStats::default().snapshot_with_age(None)
}

impl RecordedStats {
    fn snapshot(&self) -> StatsSnapshot {
        self.snapshot_with_age(Some(self.age_s))
    }

    fn snapshot_with_age(&self, age_s: Option<f64>) -> StatsSnapshot {
        StatsSnapshot {
            success: self.success,
            connect_ms: self.connect_ms,
            ttfb_ms: self.ttfb_ms,
            bandwidth_bps: self.bandwidth_bps,
            attempt_ms: self.attempt_ms,
            last_sample_age_s: age_s,
            window: vec![(self.overload_errors, self.outcomes)],
            consecutive_failures: self.consecutive_failures,
            ejections: self.ejections,
            ejected_for_s: (self.ejected_for_s > 0.0).then_some(self.ejected_for_s),
            attempts: 0,
            successes: 0,
            // The record keeps the window, not the long evidence: its share stands in.
            overload_evidence: if self.outcomes > 0 {
                self.overload_errors.min(self.outcomes) as f32 / self.outcomes as f32
            } else {
                0.0
            },
            // A candidates file gives averages, not their variances: unknown.
            attempt_var: 0.0,
            attempt_noise: 0.0,
            attempt_surprise: false,
            attempt_lag: 0.0,
        }
    }

    fn problems(&self, path: &str, out: &mut Vec<String>) {
        let mut check = |field: &str, v: Option<f64>| {
            if let Some(v) = v {
                if !v.is_finite() || v < 0.0 {
                    out.push(format!(
                        "{path}.{field}: must be a finite number >= 0, got {}",
                        Num(v)
                    ));
                }
            }
        };
        check("connect_ms", self.connect_ms);
        check("ttfb_ms", self.ttfb_ms);
        check("bandwidth_bps", self.bandwidth_bps);
        check("attempt_ms", self.attempt_ms);
        check("ejected_for_s", Some(self.ejected_for_s));
        check("age_s", Some(self.age_s));
        if let Some(s) = self.success {
            if !(0.0..=1.0).contains(&s) {
                out.push(format!("{path}.success: must be in [0, 1], got {}", Num(s)));
            }
        }
        if self.overload_errors > self.outcomes {
            out.push(format!(
                "{path}.overload_errors: {} is more than outcomes ({})",
                self.overload_errors, self.outcomes
            ));
        }
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct OverallIn {
    connect_ms: Option<f64>,
    ttfb_ms: Option<f64>,
    bandwidth_bps: Option<f64>,
    attempt_ms: Option<f64>,
    ttfb_spread: Option<f64>,
}

/// Reads `v` as a `T`; an error names the field under `path` (`candidates[0].stake`) and the
/// type it wants in words.
fn typed<T: serde::de::DeserializeOwned>(v: Value, path: &str) -> Result<T, String> {
    serde_path_to_error::deserialize::<_, T>(v).map_err(|e| described(&e, path))
}

/// A deserialization error as [`typed`] reports it.
fn described(e: &serde_path_to_error::Error<serde_json::Error>, path: &str) -> String {
    let field = e.path().to_string();
    let at = if field.is_empty() || field == "." {
        path.to_string()
    } else {
        format!("{path}.{field}")
    };
    let msg = e
        .inner()
        .to_string()
        .replace("expected f64", "expected a number")
        .replace("expected f32", "expected a number")
        .replace("expected u64", "expected a whole number")
        .replace("expected u32", "expected a whole number")
        .replace("expected a sequence", "expected a list");
    format!("{at}: {msg}")
}

/// [`typed`], reporting every unknown field of the table at `path` rather than the first:
/// each is reported and left out, and the rest is read again, so the known fields' own
/// problems are found in the same pass. `None` when it still cannot be read.
fn typed_all<T: serde::de::DeserializeOwned>(
    mut v: Value,
    path: &str,
    problems: &mut Vec<String>,
) -> Option<T> {
    loop {
        let e = match serde_path_to_error::deserialize::<_, T>(&v) {
            Ok(t) => return Some(t),
            Err(e) => e,
        };
        problems.push(described(&e, path));
        // An unknown key of this very table (not of one nested in it) can be left out.
        let unknown = e.inner().to_string().starts_with("unknown field");
        let key = e.path().to_string();
        let removed = unknown
            && !key.contains(['.', '['])
            && v.as_object_mut()
                .is_some_and(|table| table.remove(&key).is_some());
        if !removed {
            return None;
        }
    }
}

impl CandidatesFile {
    fn load(path: &Path) -> Result<Self, String> {
        let text = selection_coordinator::input::read_text(path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let invalid = |problems: Vec<String>| {
            format!(
                "invalid candidates file {}:\n  - {}",
                path.display(),
                problems.join("\n  - ")
            )
        };
        let json = path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("json"));
        let doc: Value = if json {
            serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?
        } else {
            let t: toml::Value =
                toml::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
            // JSON has no NaN or infinity: converted, they would become null and read as a
            // missing value or a type error. Refused here, by field.
            let mut problems = Vec::new();
            for (path, x) in selection_coordinator::input::non_finite(&t, "") {
                problems.push(format!(
                    "{path}: must be a finite number, got {}",
                    toml::Value::Float(x)
                ));
            }
            if !problems.is_empty() {
                return Err(invalid(problems));
            }
            serde_json::to_value(t).map_err(|e| format!("{}: {e}", path.display()))?
        };
        Self::from_value(doc).map_err(invalid)
    }

    /// Reads the document, collecting every problem with its path.
    fn from_value(doc: Value) -> Result<Self, Vec<String>> {
        let mut problems = Vec::new();
        let Value::Object(mut top) = doc else {
            return Err(vec!["the file must be a table with `candidates`".into()]);
        };
        let overall = match top.remove("overall") {
            None => None,
            Some(v) => match typed::<OverallIn>(v, "overall") {
                Ok(o) => Some(Overall {
                    connect_ms: o.connect_ms,
                    ttfb_ms: o.ttfb_ms,
                    bandwidth_bps: o.bandwidth_bps,
                    attempt_ms: o.attempt_ms,
                    ttfb_spread: o.ttfb_spread,
                    ..Overall::default()
                }),
                Err(e) => {
                    problems.push(e);
                    None
                }
            },
        };
        let entries = match top.remove("candidates") {
            Some(Value::Array(a)) => a,
            Some(_) => return Err(vec!["candidates: must be a list of tables".into()]),
            None => return Err(vec!["candidates: missing (a list of candidates)".into()]),
        };
        for key in top.keys() {
            problems.push(format!(
                "{key}: unknown field; expected candidates, overall"
            ));
        }
        let mut candidates = Vec::new();
        // Where each id was first seen: a second entry with the same id is refused, as the
        // coordinator refuses adding a candidate twice.
        let mut first_seen: HashMap<String, usize> = HashMap::new();
        for (i, mut entry) in entries.into_iter().enumerate() {
            let path = format!("candidates[{i}]");
            // A repeated id is reported even when the entries have other problems too.
            if let Some(id) = entry.get("id").and_then(Value::as_str) {
                match first_seen.entry(id.to_string()) {
                    Entry::Occupied(first) => problems.push(format!(
                        "{path}.id: duplicate candidate id `{id}` (first at candidates[{}]); \
                         every id must be unique",
                        first.get()
                    )),
                    Entry::Vacant(slot) => {
                        slot.insert(i);
                    }
                }
            }
            let stats = entry
                .as_object_mut()
                .and_then(|o| o.remove("stats"))
                .and_then(|v| {
                    let at = format!("{path}.stats");
                    let s = typed_all::<RecordedStats>(v, &at, &mut problems)?;
                    s.problems(&at, &mut problems);
                    Some(s)
                });
            if let Some(info) = typed_all::<CandidateInfo>(entry, &path, &mut problems) {
                let found = info.problems();
                if found.is_empty() {
                    candidates.push((info, stats));
                }
                for e in found {
                    problems.push(match e {
                        selection_coordinator::Error::InvalidCandidate {
                            field, problem, ..
                        } => {
                            format!("{path}.{field}: {problem}")
                        }
                        other => format!("{path}: {other}"),
                    });
                }
            }
        }
        if candidates.is_empty() && problems.is_empty() {
            problems.push("candidates: the list is empty".into());
        }
        if problems.is_empty() {
            Ok(CandidatesFile {
                overall,
                candidates,
            })
        } else {
            Err(problems)
        }
    }

    /// The all-candidate averages: as given, or else the mean of the recorded values.
    fn overall(&self) -> Overall {
        let mean = |f: fn(&RecordedStats) -> Option<f64>| {
            let xs: Vec<f64> = self
                .candidates
                .iter()
                .filter_map(|(_, s)| s.as_ref().and_then(f))
                .collect();
            (!xs.is_empty()).then(|| xs.iter().sum::<f64>() / xs.len() as f64)
        };
        let given = self.overall.unwrap_or_default();
        Overall {
            connect_ms: given.connect_ms.or_else(|| mean(|s| s.connect_ms)),
            ttfb_ms: given.ttfb_ms.or_else(|| mean(|s| s.ttfb_ms)),
            bandwidth_bps: given.bandwidth_bps.or_else(|| mean(|s| s.bandwidth_bps)),
            attempt_ms: given.attempt_ms.or_else(|| mean(|s| s.attempt_ms)),
            ttfb_spread: given.ttfb_spread,
            ..given
        }
    }
}

/// One candidate's line of the answer.
#[derive(Debug, Serialize)]
struct Line {
    id: String,
    probability: f64,
    score: f64,
    weight: f64,
    components: Components,
    /// `false`, or why a filter removed it.
    filtered: Value,
    /// Its in-flight limit in force (the lower of the static and the learned one); absent
    /// for unlimited.
    #[serde(skip_serializing_if = "Option::is_none")]
    limit: Option<u32>,
    /// The deadline a grant to it advises a request's first attempt, ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    deadline_ms: Option<f64>,
}

#[derive(Debug)]
struct Explained {
    config: Config,
    lines: Vec<Line>,
    filters: Vec<FilterNote>,
    fallbacks: Vec<Fallback>,
}

fn explain(config: Config, file: &CandidatesFile) -> Result<Explained, String> {
    let model = ScoreModel::new(config.clone()).map_err(|e| e.to_string())?;
    let now = Instant::now();
    let mut core = Core::new(config.clone(), now).map_err(|e| e.to_string())?;
    // Recorded statistics enter as a snapshot: ages and windows are relative to `now`.
    let snapshot = Snapshot {
        version: SNAPSHOT_VERSION,
        saved_at_unix_ms: None,
        overall: file.overall(),
        candidates: file
            .candidates
            .iter()
            .map(|(info, recorded)| CandidateSnapshot {
                info: info.clone(),
                stats: recorded
                    .as_ref()
                    .map_or_else(empty_stats, RecordedStats::snapshot),
                limit: None,
            })
            .collect(),
    };
    // Restoring draws nothing (no request waits), so the seed only satisfies the signature.
    let mut rng = SmallRng::seed_from_u64(0);
    core.restore(&snapshot, now, &mut rng)
        .map_err(|e| e.to_string())?;
    let record = core
        .explain(&Request::any(), now)
        .map_err(|e| e.to_string())?;
    // Each candidate's entry and the first filter that removed it, by id: a lookup per
    // candidate instead of a scan (tens of thousands of candidates took seconds).
    let drawn: HashMap<&CandidateId, usize> = record
        .candidates
        .iter()
        .enumerate()
        .map(|(i, c)| (&c.id, i))
        .collect();
    let mut removed_by: HashMap<&CandidateId, usize> = HashMap::new();
    for (i, f) in record.filters.iter().enumerate() {
        for id in &f.removed {
            removed_by.entry(id).or_insert(i);
        }
    }
    let lines = file
        .candidates
        .iter()
        .map(|(info, _)| {
            let drawn = drawn.get(&info.id).map(|&i| &record.candidates[i]);
            let filter = removed_by.get(&info.id).map(|&i| &record.filters[i]);
            line(drawn, filter, &core, &model, info)
        })
        .collect();
    Ok(Explained {
        config,
        lines,
        filters: record.filters,
        fallbacks: record.fallbacks,
    })
}

/// The line of `info`: its entry in the decision record (`drawn`) if it has one, else why it
/// was not drawable (`filter`: the first filter that removed it).
fn line(
    drawn: Option<&ConsideredCandidate>,
    filter: Option<&FilterNote>,
    core: &Core,
    model: &ScoreModel,
    info: &CandidateInfo,
) -> Line {
    if let Some(c) = drawn {
        return Line {
            id: c.id.to_string(),
            probability: c.probability,
            score: c.score,
            weight: c.weight,
            components: c.components,
            filtered: Value::Bool(false),
            limit: c.limit,
            deadline_ms: c.deadline_ms,
        };
    }
    let why = filter.map_or_else(
        || "not drawable".to_string(),
        |f| format!("{}: {}", f.filter, f.why),
    );
    let components = core
        .candidate(&info.id)
        .map(|v| v.components)
        .unwrap_or_default();
    Line {
        id: info.id.to_string(),
        probability: 0.0,
        score: model.score(&components),
        weight: 0.0,
        components,
        filtered: Value::String(why),
        limit: core.candidate(&info.id).and_then(|v| v.limit()),
        deadline_ms: None,
    }
}

impl Explained {
    fn to_json(&self) -> Value {
        serde_json::json!({
            "candidates": self.lines,
            "filters": self.filters,
            "fallbacks": self.fallbacks,
        })
    }

    fn table(&self) -> String {
        let c = &self.config;
        let mut out = String::new();
        let mode = match c.mode {
            Mode::Sum => "sum",
            Mode::Mixture => "mixture",
        };
        let _ = writeln!(
            out,
            "config: preset {}, mode {mode}, exponent {}, floor {}",
            c.preset.as_deref().unwrap_or("default"),
            c.exponent,
            c.floor
        );
        // Only the components the config weighs: the others cannot move a probability.
        let weighed = weighed_components(c);
        let id_w = self
            .lines
            .iter()
            .map(|l| l.id.len())
            .max()
            .unwrap_or(2)
            .max(2);
        let _ = write!(
            out,
            "{:<id_w$}  {:>11}  {:>10}  {:>10}",
            "id", "probability", "score", "weight"
        );
        for (_, n) in &weighed {
            let _ = write!(out, "  {n:>9}");
        }
        // The limit column only when some candidate has a limit.
        let limits = self.lines.iter().any(|l| l.limit.is_some());
        if limits {
            let _ = write!(out, "  {:>6}", "limit");
        }
        // The deadline column only when some candidate's grant would advise one.
        let deadlines = self.lines.iter().any(|l| l.deadline_ms.is_some());
        if deadlines {
            let _ = write!(out, "  {:>11}", "deadline ms");
        }
        let _ = writeln!(out, "  note");
        for l in &self.lines {
            let _ = write!(
                out,
                "{:<id_w$}  {:>11.6}  {:>10}  {:>10}",
                l.id,
                l.probability,
                readable(l.score),
                readable(l.weight)
            );
            let entries = l.components.entries();
            for (k, _) in &weighed {
                let _ = write!(out, "  {:>9.6}", entries[*k].1);
            }
            if limits {
                let shown = l.limit.map_or_else(|| "-".to_string(), |n| n.to_string());
                let _ = write!(out, "  {shown:>6}");
            }
            if deadlines {
                let shown = l
                    .deadline_ms
                    .map_or_else(|| "-".to_string(), |d| format!("{d:.1}"));
                let _ = write!(out, "  {shown:>11}");
            }
            let note = match &l.filtered {
                Value::String(s) => format!("filtered ({s})"),
                _ => String::new(),
            };
            let _ = writeln!(out, "  {note}");
        }
        let _ = writeln!(
            out,
            "(weights are relative: only their ratios matter; components with weight 0 are not \
             shown; --json lists all)\nfilters:"
        );
        if self.filters.is_empty() {
            let _ = writeln!(out, "  (none removed anything)");
        }
        for f in &self.filters {
            let ids: Vec<&str> = f.removed.iter().map(|id| id.as_str()).collect();
            let _ = writeln!(
                out,
                "  {}: removed {} ({})",
                f.filter,
                ids.join(", "),
                f.why
            );
        }
        let _ = writeln!(out, "fallbacks:");
        if self.fallbacks.is_empty() {
            let _ = writeln!(out, "  (none)");
        }
        for f in &self.fallbacks {
            let _ = writeln!(out, "  {}: {}", f.filter, f.action);
        }
        out.trim_end().to_string()
    }
}

/// `(index into Components::entries, name)` of each component with a weight above 0.
fn weighed_components(c: &Config) -> Vec<(usize, &'static str)> {
    let weights = c.component_weights();
    Components::default()
        .entries()
        .iter()
        .enumerate()
        .filter(|(k, _)| weights[*k] > 0.0)
        .map(|(k, (name, _))| (k, *name))
        .collect()
}

/// A number for the table: six decimals in [0.0001, 10000), else scientific notation with five
/// significant digits, so a weight raised to a high exponent stays one short column.
fn readable(x: f64) -> String {
    let a = x.abs();
    if a == 0.0 || (1e-4..1e4).contains(&a) {
        format!("{x:.6}")
    } else {
        format!("{x:.4e}")
    }
}

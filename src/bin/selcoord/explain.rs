//! `selcoord explain`: what one draw would do for a set of candidates under a config.
//!
//! The candidates (static info plus optional recorded statistics) are loaded into a real
//! [`Core`] and [`Core::explain`] answers, so the numbers are those a live coordinator would
//! draw with. The file format is documented in `docs/explain.md`.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Instant;

use rand::rngs::SmallRng;
use rand::SeedableRng;
use selection_coordinator::decision::{ConsideredCandidate, DecisionReason, Fallback, FilterNote};
use selection_coordinator::score::{Components, ScoreModel};
use selection_coordinator::snapshot::{CandidateSnapshot, Snapshot, SNAPSHOT_VERSION};
use selection_coordinator::{CandidateId, CandidateInfo, Config, Core, Mode, Request};
use serde::Serialize;
use serde_json::Value;
use unicode_width::UnicodeWidthStr as _;

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
    let arms = [arms_note(&config), ejection_note(&config, &file)]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>();
    let explained = explain(config, &file)?;
    let out = if args.json {
        // The JSON stays the documented object; the note goes to stderr.
        for note in &arms {
            eprintln!("selcoord explain: {note}");
        }
        serde_json::to_string_pretty(&explained.to_json()).map_err(|e| e.to_string())?
    } else {
        let mut table = explained.table();
        for note in &arms {
            table.push_str("\nnote: ");
            table.push_str(note);
        }
        table
    };
    crate::out::println(&out)
}

/// A recorded ejection that the config ignores: `stats.ejected_for_s` counts only with
/// `[ejection] enabled = true`.
fn ejection_note(config: &Config, file: &CandidatesFile) -> Option<String> {
    if config.ejection.enabled {
        return None;
    }
    let ejected: Vec<String> = file
        .candidates
        .iter()
        .enumerate()
        .filter(|(_, (_, s))| s.as_ref().is_some_and(|s| s.ejected_for_s > 0.0))
        .map(|(i, (info, _))| format!("candidates[{i}] (`{}`)", info.id))
        .collect();
    let first = ejected.first()?;
    let (more, verb, drawn) = match ejected.len() {
        1 => (String::new(), "sets", "the candidate is"),
        n => (format!(" and {} more", n - 1), "set", "they are"),
    };
    Some(format!(
        "{first}{more} {verb} stats.ejected_for_s, but ejection is off in this config, so it is \
         ignored and {drawn} drawn as if not ejected; set [ejection] enabled = true in the \
         config to explain with it"
    ))
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

#[path = "explain_file.rs"]
mod file;
use file::{empty_stats, CandidatesFile, RecordedStats};

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
    /// How the winner would be chosen (the record's reason).
    reason: DecisionReason,
    /// The candidate a deterministic draw takes (the most probable, ties to the earliest
    /// added), as the record names it.
    winner: Option<CandidateId>,
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
                load_fit: None,
                feedback: None,
            })
            .collect(),
        feedback_reference_ms: None,
        rates: None,
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
        reason: record.reason,
        winner: record.winner,
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
            "reason": self.reason,
            "winner": self.winner,
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
        if self.reason == DecisionReason::Deterministic {
            let _ = match &self.winner {
                Some(w) => writeln!(
                    out,
                    "draw: deterministic: `{w}` wins every time, the most probable (ties go to \
                     the first in the file, the earliest added); the probabilities are those a \
                     random draw would give"
                ),
                None => writeln!(out, "draw: deterministic: no candidate can win now"),
            };
        }
        // Only the components that can move a probability under this config.
        let weighed = shown_components(c);
        // Sized by width on screen: a CJK character takes two columns, an accent none.
        let id_w = self
            .lines
            .iter()
            .map(|l| l.id.width())
            .max()
            .unwrap_or(2)
            .max(2);
        let _ = write!(
            out,
            "{:<id_w$}  {:>11}  {:>10}  {:>10}",
            "id", "probability", "score", "weight"
        );
        for (_, n) in &weighed {
            let w = n.len().max(9);
            let _ = write!(out, "  {n:>w$}");
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
            let pad = id_w.saturating_sub(l.id.width());
            let _ = write!(
                out,
                "{}{:pad$}  {:>11.6}  {:>10}  {:>10}",
                l.id,
                "",
                l.probability,
                readable(l.score),
                readable(l.weight)
            );
            let entries = l.components.entries();
            for (k, n) in &weighed {
                let w = n.len().max(9);
                let _ = write!(out, "  {:>w$.6}", entries[*k].1);
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
            "(weights are relative: only their ratios matter; components that cannot change a \
             probability under this config are not shown; --json lists all)\nfilters:"
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
        // No line ends in spaces (an empty note column).
        let lines: Vec<&str> = out.trim_end().lines().map(str::trim_end).collect();
        lines.join("\n")
    }
}

/// `(index into Components::entries, name)` of each component that can change a probability
/// under the config: those with a weight above 0 and, in sum mode, those that act as factors of
/// the weight whatever their own weight (`time_to_success` through `time_exponent`, `feedback`
/// through `feedback.exponent`: `ScoreModel`'s sum channel).
fn shown_components(c: &Config) -> Vec<(usize, &'static str)> {
    let weights = c.component_weights();
    let factor = |name: &str| {
        c.mode == Mode::Sum
            && match name {
                "time_to_success" => c.time_exponent > 0.0,
                "feedback" => c.feedback.exponent > 0.0,
                _ => false,
            }
    };
    Components::default()
        .entries()
        .iter()
        .enumerate()
        .filter(|(k, (name, _))| weights[*k] > 0.0 || factor(name))
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

//! The candidates file of `selcoord explain` (format: `docs/explain.md`): read with every
//! problem found at once, each named by its place.

use std::collections::hash_map::{Entry, HashMap};
use std::path::Path;

use selection_coordinator::input::Num;
use selection_coordinator::score::Overall;
use selection_coordinator::snapshot::{Snapshot, StatsSnapshot, SNAPSHOT_VERSION};
use selection_coordinator::CandidateInfo;
use serde::Deserialize;
use serde_json::Value;

/// The candidates file: `[[candidates]]` entries and optional `[overall]` averages.
#[derive(Debug)]
pub(super) struct CandidatesFile {
    pub(super) overall: Option<Overall>,
    pub(super) candidates: Vec<(CandidateInfo, Option<RecordedStats>)>,
}

/// Recorded statistics of one candidate, in the units a user has at hand.
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(super) struct RecordedStats {
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
    pub(super) ejected_for_s: f64,
    /// Seconds since the last sample (statistics decay over it when a half-life is set).
    age_s: f64,
}

pub(super) fn empty_stats() -> StatsSnapshot {
    RecordedStats::default().snapshot_with_age(None)
}

impl RecordedStats {
    pub(super) fn snapshot(&self) -> StatsSnapshot {
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

/// Sets one field of [`Overall`].
type SetField = fn(&mut Overall, Option<f64>);

/// The library's own checks of the averages (those a snapshot's restore applies), each field
/// checked alone so that every bad one is reported, as `overall.<field>: ...`; then all of
/// them together, for a check across fields.
fn overall_problems(given: &Overall, out: &mut Vec<String>) {
    let check = |overall: Overall| {
        let snapshot = Snapshot {
            version: SNAPSHOT_VERSION,
            saved_at_unix_ms: None,
            overall,
            feedback_reference_ms: None,
            rates: None,
            candidates: Vec::new(),
        };
        snapshot.validate().err().map(|e| match e {
            selection_coordinator::Error::InvalidSnapshot(msg) => msg,
            other => other.to_string(),
        })
    };
    let alone = |set: SetField, v: Option<f64>| {
        let mut o = Overall::default();
        set(&mut o, v);
        v.and_then(|_| check(o))
    };
    let fields: [(&str, Option<f64>, SetField); 5] = [
        ("connect_ms", given.connect_ms, |o, v| o.connect_ms = v),
        ("ttfb_ms", given.ttfb_ms, |o, v| o.ttfb_ms = v),
        ("bandwidth_bps", given.bandwidth_bps, |o, v| {
            o.bandwidth_bps = v
        }),
        ("attempt_ms", given.attempt_ms, |o, v| o.attempt_ms = v),
        ("ttfb_spread", given.ttfb_spread, |o, v| o.ttfb_spread = v),
    ];
    let before = out.len();
    for (field, v, set) in fields {
        let Some(msg) = alone(set, v) else { continue };
        let at = format!("overall.{field}");
        // The library says `overall.ttfb_ms = -300: must be ...`: the value goes last.
        let said = v.map(|x| format!("{at} = {x}: "));
        out.push(match said.as_deref().and_then(|s| msg.strip_prefix(s)) {
            Some(problem) => format!("{at}: {problem}, got {}", Num(v.unwrap_or_default())),
            None if msg.starts_with(&at) => msg,
            None => format!("{at}: {msg}"),
        });
    }
    if out.len() == before {
        if let Some(msg) = check(*given) {
            out.push(format!("overall: {msg}"));
        }
    }
}

/// A deserialization error as [`typed_all`] reports it: the field under `path`
/// (`candidates[0].stake`) and the type it wants in words.
fn described(e: &serde_path_to_error::Error<serde_json::Error>, path: &str) -> String {
    let field = e.path().to_string();
    let at = if field.is_empty() || field == "." {
        path.to_string()
    } else {
        format!("{path}.{field}")
    };
    let inner = e.inner().to_string();
    // An integer the field's type cannot hold: serde says `invalid value: integer `N`,
    // expected u32`; said as a range instead.
    let range = |ty: &str| match ty {
        "u8" => Some(u64::from(u8::MAX)),
        "u16" => Some(u64::from(u16::MAX)),
        "u32" => Some(u64::from(u32::MAX)),
        "u64" => Some(u64::MAX),
        _ => None,
    };
    let out_of_range = inner
        .strip_prefix("invalid value: integer `")
        .and_then(|rest| rest.split_once("`, expected "))
        .and_then(|(n, ty)| Some((n, range(ty.split_whitespace().next()?)?)));
    if let Some((n, max)) = out_of_range {
        return format!("{at}: {n} is out of range (0 to {max})");
    }
    let msg = inner
        .replace("expected f64", "expected a number")
        .replace("expected f32", "expected a number")
        .replace("expected u64", "expected a whole number")
        .replace("expected u32", "expected a whole number")
        .replace("expected a sequence", "expected a list");
    format!("{at}: {msg}")
}

/// Reads `v` as a `T`, reporting every unknown field of the table at `path` rather than the first:
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
    pub(super) fn load(path: &Path) -> Result<Self, String> {
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
                let line = selection_coordinator::input::toml_line(&text, &path)
                    .map_or_else(String::new, |n| format!(" (line {n})"));
                problems.push(format!(
                    "{path}: must be a finite number, got {}{line}",
                    toml::Value::Float(x)
                ));
            }
            if !problems.is_empty() {
                return Err(invalid(problems));
            }
            serde_json::to_value(t).map_err(|e| format!("{}: {e}", path.display()))?
        };
        Self::from_value(doc).map_err(|problems| {
            // Each problem starts with its field's place: the line of that field is added.
            let lined = problems.into_iter().map(|p| {
                let field = p.split_once(": ").map_or("", |(at, _)| at);
                let line = if field.is_empty() {
                    None
                } else if json {
                    json_line(&text, field)
                } else {
                    selection_coordinator::input::toml_line(&text, field)
                };
                match line {
                    Some(n) => format!("{p} (line {n})"),
                    None => p,
                }
            });
            invalid(lined.collect())
        })
    }

    /// Reads the document, collecting every problem with its path.
    fn from_value(doc: Value) -> Result<Self, Vec<String>> {
        let mut problems = Vec::new();
        let Value::Object(mut top) = doc else {
            return Err(vec!["the file must be a table with `candidates`".into()]);
        };
        let overall = top
            .remove("overall")
            .and_then(|v| typed_all::<OverallIn>(v, "overall", &mut problems))
            .map(|o| {
                let overall = Overall {
                    connect_ms: o.connect_ms,
                    ttfb_ms: o.ttfb_ms,
                    bandwidth_bps: o.bandwidth_bps,
                    attempt_ms: o.attempt_ms,
                    ttfb_spread: o.ttfb_spread,
                    ..Overall::default()
                };
                overall_problems(&overall, &mut problems);
                overall
            });
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
    pub(super) fn overall(&self) -> Overall {
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

/// One step of a field's place: a key of a table or an index into a list.
enum Step<'a> {
    Key(&'a str),
    Index(usize),
}

/// The steps of `field` (`candidates[1].stats.success`); `None` when it is not such a place.
fn steps(field: &str) -> Option<Vec<Step<'_>>> {
    let mut out = Vec::new();
    for part in field.split('.') {
        let mut pieces = part.split('[');
        let key = pieces.next()?;
        if !key.is_empty() {
            out.push(Step::Key(key));
        }
        for index in pieces {
            out.push(Step::Index(index.strip_suffix(']')?.parse().ok()?));
        }
    }
    Some(out)
}

/// The 1-based line of the value at `field` in the JSON `text` (already parsed, so well
/// formed), or of the nearest enclosing value present; `None` when the place cannot be read.
/// serde_json keeps no positions in a `Value`: the text is scanned for the place.
fn json_line(text: &str, field: &str) -> Option<usize> {
    let b = text.as_bytes();
    let mut pos = skip_ws(b, 0);
    'steps: for step in steps(field)? {
        match (b.get(pos)?, step) {
            (b'{', Step::Key(key)) => {
                let mut at = skip_ws(b, pos + 1);
                while b.get(at) == Some(&b'"') {
                    let end = skip_string(b, at);
                    let name = text.get(at + 1..end.checked_sub(1)?)?;
                    at = skip_ws(b, end);
                    if b.get(at) != Some(&b':') {
                        return None;
                    }
                    at = skip_ws(b, at + 1);
                    if name == key {
                        pos = at;
                        continue 'steps;
                    }
                    at = skip_ws(b, skip_value(b, at));
                    if b.get(at) == Some(&b',') {
                        at = skip_ws(b, at + 1);
                    }
                }
                break;
            }
            (b'[', Step::Index(i)) => {
                let mut at = skip_ws(b, pos + 1);
                for _ in 0..i {
                    at = skip_ws(b, skip_value(b, at));
                    if b.get(at) != Some(&b',') {
                        break 'steps;
                    }
                    at = skip_ws(b, at + 1);
                }
                pos = at;
            }
            _ => break,
        }
    }
    let upto = text.get(..pos.min(text.len()))?;
    Some(upto.bytes().filter(|&c| c == b'\n').count() + 1)
}

fn skip_ws(b: &[u8], mut at: usize) -> usize {
    while b.get(at).is_some_and(u8::is_ascii_whitespace) {
        at += 1;
    }
    at
}

/// Past the string starting at `at` (its opening quote), escapes included.
fn skip_string(b: &[u8], mut at: usize) -> usize {
    at += 1;
    while let Some(&c) = b.get(at) {
        at += if c == b'\\' { 2 } else { 1 };
        if c == b'"' {
            break;
        }
    }
    at
}

/// Past the value starting at `at`.
fn skip_value(b: &[u8], mut at: usize) -> usize {
    let mut depth = 0usize;
    while let Some(&c) = b.get(at) {
        match c {
            b'"' => {
                at = skip_string(b, at);
                if depth == 0 {
                    return at;
                }
                continue;
            }
            b'{' | b'[' => depth += 1,
            b'}' | b']' if depth == 0 => return at,
            b'}' | b']' => {
                depth -= 1;
                if depth == 0 {
                    return at + 1;
                }
            }
            b',' if depth == 0 => return at,
            _ => {}
        }
        at += 1;
    }
    at
}

//! Files users hand us never panic the parsers: real files, edited at random (fragments of
//! TOML syntax, line endings, numbers out of range inserted; spans cut; the text truncated),
//! give a value or a typed error. A scenario that parses keeps what the simulator relies on
//! (unique replica ids, every candidate's info valid for the core); a config that parses is
//! valid. The fuzz targets (`docs/fuzzing.md`) search the same property much further; this
//! keeps it checked on every run.

#[path = "support/props.rs"]
mod proptest_seed;

use std::collections::HashSet;

use proptest::prelude::*;
use proptest::sample::Index;
use selection_coordinator::discovery::sim::{DiscoveryScenario, LIVEPEER_DISCOVERY};
use selection_coordinator::sim::{Scenario, BUILTIN};
use selection_coordinator::Config;

/// What an edit may insert: TOML's punctuation, line endings (a lone carriage return among
/// them), values a field may refuse, and characters wider than a byte.
const FRAGMENTS: [&str; 28] = [
    "\r",
    "\n",
    "\r\n",
    "\r\r",
    "\t",
    " ",
    "[",
    "]",
    "[[",
    "]]",
    "=",
    "\"",
    "'",
    "{",
    "}",
    ",",
    "#",
    ".",
    "0",
    "-1",
    "1e999",
    "nan",
    "inf",
    "4294967296",
    "é",
    "\u{2028}",
    "x = 1\n",
    "kind = \"discovery\"\n",
];

/// Replicas a parsed scenario may expand to before the test stops checking them (memory, not
/// correctness: a count is a number an edit can make large).
const MAX_EXPANDED: u64 = 100_000;

#[derive(Debug, Clone)]
enum Edit {
    /// Insert a fragment before the character at this index.
    Insert(Index, usize),
    /// Insert a fragment where the line this index picks ends (before its newline), where
    /// line endings and the error snippets meet.
    AtLineEnd(Index, usize),
    /// Remove up to this many characters from the index on.
    Remove(Index, usize),
    /// Keep the text up to the index.
    Truncate(Index),
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        4 => (any::<Index>(), 0..FRAGMENTS.len()).prop_map(|(at, f)| Edit::Insert(at, f)),
        2 => (any::<Index>(), 0..FRAGMENTS.len()).prop_map(|(at, f)| Edit::AtLineEnd(at, f)),
        2 => (any::<Index>(), 1..40usize).prop_map(|(at, n)| Edit::Remove(at, n)),
        1 => any::<Index>().prop_map(Edit::Truncate),
    ]
}

/// `text` with the edits applied in turn, at character boundaries.
fn edited(text: &str, edits: &[Edit]) -> String {
    let mut chars: Vec<char> = text.chars().collect();
    for e in edits {
        let at = |i: &Index| i.index(chars.len() + 1);
        match e {
            Edit::Insert(i, f) => {
                let at = at(i);
                chars.splice(at..at, FRAGMENTS[*f].chars());
            }
            Edit::AtLineEnd(i, f) => {
                let ends: Vec<usize> = (0..chars.len()).filter(|&k| chars[k] == '\n').collect();
                let at = if ends.is_empty() {
                    chars.len()
                } else {
                    ends[i.index(ends.len())]
                };
                chars.splice(at..at, FRAGMENTS[*f].chars());
            }
            Edit::Remove(i, n) => {
                let at = at(i);
                let end = (at + n).min(chars.len());
                chars.drain(at..end);
            }
            Edit::Truncate(i) => {
                let at = at(i);
                chars.truncate(at);
            }
        }
    }
    chars.into_iter().collect()
}

/// Every scenario file we ship, the discovery one included.
fn scenario_files() -> Vec<&'static str> {
    let mut files: Vec<&str> = BUILTIN.iter().map(|(_, text)| *text).collect();
    files.push(LIVEPEER_DISCOVERY);
    files
}

proptest! {
    #![proptest_config(proptest_seed::config(300))]

    #[test]
    fn an_edited_scenario_parses_or_is_refused(
        file in any::<Index>(),
        edits in proptest::collection::vec(edit(), 1..6),
    ) {
        let files = scenario_files();
        let text = edited(files[file.index(files.len())], &edits);
        if DiscoveryScenario::is_discovery(&text) {
            // Either way, no panic; an error names the file.
            if let Err(e) = DiscoveryScenario::parse(&text, "edited.toml") {
                prop_assert!(e.to_string().contains("edited.toml"), "{e}");
            }
            return Ok(());
        }
        let scenario = match Scenario::parse(&text, "edited.toml") {
            Ok(s) => s,
            Err(e) => {
                prop_assert!(e.to_string().contains("edited.toml"), "{e}");
                return Ok(());
            }
        };
        let replicas: u64 = scenario.candidates.iter().map(|c| u64::from(c.count)).sum();
        if replicas > MAX_EXPANDED {
            return Ok(());
        }
        let mut seen = HashSet::new();
        for (id, spec) in scenario.expanded() {
            let info = scenario.candidates[spec].info(&id);
            prop_assert!(info.validate().is_ok(), "accepted invalid info {info:?}");
            prop_assert!(seen.insert(id.clone()), "accepted a duplicate id {id}");
        }
    }

    #[test]
    fn an_edited_config_parses_or_is_refused(
        edits in proptest::collection::vec(edit(), 1..6),
    ) {
        let text = edited(include_str!("../docs/config.toml"), &edits);
        if let Ok(config) = Config::from_toml_str(&text) {
            prop_assert!(config.validate().is_ok(), "accepted an invalid config");
        }
    }
}

/// The files edited are valid as shipped, and a lone carriage return put at the end of a line
/// (before the CRLF it then makes: what fuzzing found) gives an error at that line.
#[test]
fn the_files_edited_parse_and_a_lone_carriage_return_is_refused_at_its_line() {
    for text in scenario_files() {
        if DiscoveryScenario::is_discovery(text) {
            DiscoveryScenario::parse(text, "shipped.toml").unwrap();
        } else {
            Scenario::parse(text, "shipped.toml").unwrap();
        }
    }
    Config::from_toml_str(include_str!("../docs/config.toml")).unwrap();
    let text = BUILTIN[0].1;
    let line_end = text.find('\n').unwrap();
    let broken = format!("{}\r\r{}", &text[..line_end], &text[line_end..]);
    let e = Scenario::parse(&broken, "edited.toml").unwrap_err();
    assert_eq!(e.line, Some(1), "{e}");
}

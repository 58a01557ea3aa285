//! The crate's layering: which top-level modules of `src/` may name which.
//!
//! Reads every `.rs` file under `src/` (the binary excepted), collects the top-level modules its
//! code names through `crate::` paths (`use` lines and paths in code alike; comments are
//! skipped), and checks the rules below, plus that the graph of top-level modules has no cycle.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// Modules at the bottom: the vocabulary, the errors, the limit estimator, the scoring model,
/// decision records and the digests coordinators share.
const BELOW_CORE: [&str; 6] = ["vocab", "error", "limit", "score", "decision", "digest"];
/// The pure layers: none of them may name the drivers above.
const PURE: [&str; 7] = [
    "vocab", "error", "limit", "score", "decision", "digest", "core",
];
/// The drivers and their helpers.
const DRIVERS: [&str; 4] = ["actor", "metrics", "sim", "discovery"];

type Graph = BTreeMap<String, BTreeSet<String>>;

/// The top-level module a file under `src/` belongs to (`None` for `lib.rs` and the binary).
fn module_of(rel: &Path) -> Option<String> {
    let mut parts = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned());
    let first = parts.next()?;
    if first == "bin" || first == "lib.rs" {
        return None;
    }
    Some(first.trim_end_matches(".rs").to_string())
}

/// The code of a file with line comments (and doc comments) removed.
fn code_of(text: &str) -> String {
    text.lines()
        .map(|l| match l.find("//") {
            Some(i) => &l[..i],
            None => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn ident_at(s: &str) -> String {
    s.chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect()
}

/// Every top-level module named through `crate::` in `code`.
fn named_modules(code: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = code;
    while let Some(i) = rest.find("crate::") {
        let macro_crate = rest[..i].ends_with('$');
        let ident_char_before = rest[..i]
            .chars()
            .last()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
        let after = &rest[i + "crate::".len()..];
        rest = after;
        if macro_crate || ident_char_before {
            continue;
        }
        if let Some(group) = after.strip_prefix('{') {
            // `crate::{a::X, b}`: the first name of each item at depth one.
            let mut depth = 1;
            let mut start = true;
            for (j, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => {
                        depth -= 1;
                        if depth == 0 {
                            break;
                        }
                    }
                    ',' if depth == 1 => start = true,
                    c if c.is_whitespace() => {}
                    _ if depth == 1 && start => {
                        let name = ident_at(&group[j..]);
                        if !name.is_empty() {
                            out.insert(name);
                        }
                        start = false;
                    }
                    _ => {}
                }
            }
        } else {
            let name = ident_at(after);
            if !name.is_empty() {
                out.insert(name);
            }
        }
    }
    out
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The graph of top-level modules of the crate's `src/`, with the file behind each edge.
fn crate_graph() -> (Graph, BTreeMap<(String, String), String>) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut modules: BTreeSet<String> = BTreeSet::new();
    let mut named: Vec<(String, String, BTreeSet<String>)> = Vec::new();
    for f in &files {
        let rel = f.strip_prefix(&src).expect("under src");
        let Some(m) = module_of(rel) else { continue };
        modules.insert(m.clone());
        let text = fs::read_to_string(f).expect("readable source");
        named.push((m, rel.display().to_string(), named_modules(&code_of(&text))));
    }
    let mut graph = Graph::new();
    let mut witness = BTreeMap::new();
    for (m, file, names) in named {
        let edges = graph.entry(m.clone()).or_default();
        for n in names {
            if n != m && modules.contains(&n) {
                edges.insert(n.clone());
                witness.entry((m.clone(), n)).or_insert(file.clone());
            }
        }
    }
    (graph, witness)
}

/// The rules; each violation as a line naming the edge and a file that makes it.
fn violations(graph: &Graph, witness: &BTreeMap<(String, String), String>) -> Vec<String> {
    let mut bad = Vec::new();
    let why = |from: &str, to: &str| {
        witness
            .get(&(from.to_string(), to.to_string()))
            .cloned()
            .unwrap_or_default()
    };
    for (from, tos) in graph {
        for to in tos {
            if PURE.contains(&from.as_str()) && DRIVERS.contains(&to.as_str()) {
                bad.push(format!("{from} names {to} (in {})", why(from, to)));
            }
            if BELOW_CORE.contains(&from.as_str()) && to == "core" {
                bad.push(format!("{from} names core (in {})", why(from, to)));
            }
            if from == "limit" && !["vocab", "error"].contains(&to.as_str()) {
                bad.push(format!(
                    "limit names {to} (in {}); it may name only vocab and error",
                    why(from, to)
                ));
            }
            if from == "vocab" {
                bad.push(format!(
                    "vocab names {to} (in {}); it is the bottom layer",
                    why(from, to)
                ));
            }
        }
    }
    if let Some(cycle) = find_cycle(graph) {
        bad.push(format!("import cycle: {}", cycle.join(" -> ")));
    }
    bad
}

/// A cycle in the graph, if there is one (depth-first search).
fn find_cycle(graph: &Graph) -> Option<Vec<String>> {
    fn visit(
        n: &str,
        graph: &Graph,
        state: &mut BTreeMap<String, u8>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        match state.get(n) {
            Some(2) => return None,
            Some(1) => {
                let start = path.iter().position(|p| p == n).unwrap_or(0);
                let mut cycle = path[start..].to_vec();
                cycle.push(n.to_string());
                return Some(cycle);
            }
            _ => {}
        }
        state.insert(n.to_string(), 1);
        path.push(n.to_string());
        for m in graph.get(n).into_iter().flatten() {
            if let Some(c) = visit(m, graph, state, path) {
                return Some(c);
            }
        }
        path.pop();
        state.insert(n.to_string(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for n in graph.keys() {
        if let Some(c) = visit(n, graph, &mut state, &mut Vec::new()) {
            return Some(c);
        }
    }
    None
}

#[test]
fn the_layers_import_only_downward() {
    let (graph, witness) = crate_graph();
    // The check reads what it should: the core and the vocabulary are there, and the core
    // names the scoring model.
    assert!(graph.contains_key("vocab") && graph.contains_key("core"));
    assert!(graph["core"].contains("score"), "graph: {graph:?}");
    let bad = violations(&graph, &witness);
    assert!(bad.is_empty(), "layering violations:\n{}", bad.join("\n"));
}

fn edge(graph: &mut Graph, witness: &mut BTreeMap<(String, String), String>, a: &str, b: &str) {
    graph
        .entry(a.to_string())
        .or_default()
        .insert(b.to_string());
    witness.insert((a.to_string(), b.to_string()), format!("{a}.rs"));
}

#[test]
fn the_check_catches_a_violation() {
    let mut graph = Graph::new();
    let mut witness = BTreeMap::new();
    edge(&mut graph, &mut witness, "core", "score");
    edge(&mut graph, &mut witness, "score", "vocab");
    assert!(violations(&graph, &witness).is_empty());
    edge(&mut graph, &mut witness, "score", "core");
    let bad = violations(&graph, &witness);
    assert!(
        bad.iter().any(|b| b.starts_with("score names core")),
        "{bad:?}"
    );
    assert!(bad.iter().any(|b| b.starts_with("import cycle")), "{bad:?}");
    edge(&mut graph, &mut witness, "core", "metrics");
    assert!(violations(&graph, &witness)
        .iter()
        .any(|b| b.starts_with("core names metrics")));
}

#[test]
fn paths_are_read_from_use_lines_groups_and_code() {
    let code = code_of(
        "use crate::score::X;\nuse crate::{decision::Y, error::{Error, Rejection}};\n\
         // crate::sim::Z in a comment\nfn f() { crate::metrics::emit(); $crate::actor::g() }",
    );
    let names = named_modules(&code);
    let want: BTreeSet<String> = ["score", "decision", "error", "metrics"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    assert_eq!(names, want);
}

/// The longest a file under `src/` may be: past it, a file is doing the work of several.
const MAX_LINES: usize = 700;

#[test]
fn no_source_file_is_over_700_lines() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    assert!(files.len() > 50, "read only {} files", files.len());
    let long: Vec<String> = files
        .iter()
        .filter_map(|p| {
            let n = fs::read_to_string(p).ok()?.lines().count();
            (n > MAX_LINES).then(|| format!("{} has {n} lines", p.display()))
        })
        .collect();
    assert!(
        long.is_empty(),
        "over {MAX_LINES} lines:\n{}",
        long.join("\n")
    );
}

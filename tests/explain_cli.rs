//! `selcoord explain` run as a user would: the Livepeer published case from the example files,
//! and a bad config whose error names each bad field.

use std::path::Path;

fn repo(rel: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(rel)
        .to_string_lossy()
        .into_owned()
}

#[path = "support/cli.rs"]
mod cli;
use cli::selcoord;

#[test]
fn livepeer_published_case_through_the_cli() {
    let out = selcoord(&[
        "explain",
        "--config",
        &repo("examples/configs/livepeer-case.toml"),
        "--candidates",
        &repo("examples/candidates/livepeer-case.toml"),
        "--json",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "selcoord failed: {stderr}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON output");
    let candidates = v["candidates"].as_array().expect("candidates list");
    let want = [("o1", 0.665530), ("o2", 0.331925), ("o3", 0.002545)];
    assert_eq!(candidates.len(), want.len());
    for (c, (id, p)) in candidates.iter().zip(want) {
        assert_eq!(c["id"], id);
        let got = c["probability"].as_f64().unwrap();
        assert!((got - p).abs() < 1e-4, "{id}: {got} vs {p}");
        assert_eq!(c["filtered"], false);
        assert!(c["components"]["stake"].is_number() && c["score"].is_number());
    }
    // No candidate reaches the perf minimum: Livepeer's fallback keeps them all, and says so.
    let fallbacks = v["fallbacks"].as_array().unwrap();
    assert_eq!(fallbacks.len(), 1);
    assert_eq!(fallbacks[0]["filter"], "perf");
}

#[test]
fn the_table_shows_probabilities_and_the_fallback() {
    let out = selcoord(&[
        "explain",
        "--config",
        &repo("examples/configs/livepeer-case.toml"),
        "--candidates",
        &repo("examples/candidates/livepeer-case.toml"),
    ]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    for want in ["0.665530", "0.331925", "0.002545", "perf: none passed"] {
        assert!(text.contains(want), "missing {want} in\n{text}");
    }
}

#[test]
fn filtered_candidates_appear_with_their_reason_and_probability_zero() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("strict.toml");
    std::fs::write(
        &config,
        "preset = \"livepeer\"\n[price]\nmax = 800\n[perf]\nregion = \"FRA\"\nmin_score = 0.55\n",
    )
    .unwrap();
    let out = selcoord(&[
        "explain",
        "--config",
        config.to_str().unwrap(),
        "--candidates",
        &repo("examples/candidates/livepeer-case.toml"),
        "--json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let c = &v["candidates"];
    // o1 fails the perf filter (0.5 < 0.55), o3 the strict price limit (1000 > 800).
    assert!(
        c[0]["filtered"].as_str().unwrap().starts_with("perf"),
        "{c}"
    );
    assert!(
        c[2]["filtered"].as_str().unwrap().starts_with("price"),
        "{c}"
    );
    assert_eq!(c[0]["probability"], 0.0);
    assert_eq!(c[2]["probability"], 0.0);
    assert_eq!(c[1]["probability"], 1.0);
    assert_eq!(v["filters"].as_array().unwrap().len(), 2);
}

#[test]
fn a_bad_config_is_refused_naming_each_bad_field() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("bad.toml");
    std::fs::write(
        &config,
        "mode = \"avg\"\nfloor = -1\n[ema]\nalpha = 2\n[weights]\nstak = 1\n",
    )
    .unwrap();
    let out = selcoord(&[
        "explain",
        "--config",
        config.to_str().unwrap(),
        "--candidates",
        &repo("examples/candidates/livepeer-case.toml"),
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    for field in ["mode:", "floor:", "ema.alpha:", "weights.stak:"] {
        assert!(err.contains(field), "missing {field} in\n{err}");
    }
}

#[test]
fn a_bad_candidates_file_names_each_bad_entry() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("c.json");
    std::fs::write(
        &file,
        r#"{"candidates": [
            {"id": "a", "stake": -1},
            {"id": "b", "stats": {"success": 2, "conect_ms": 3}},
            {"id": "c", "colour": "red"}
        ]}"#,
    )
    .unwrap();
    let out = selcoord(&[
        "explain",
        "--config",
        "default",
        "--candidates",
        file.to_str().unwrap(),
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    for want in [
        "candidates[0]",
        "stake",
        "candidates[1].stats",
        "conect_ms",
        "candidates[2]",
        "colour",
    ] {
        assert!(err.contains(want), "missing {want} in\n{err}");
    }
}

#[test]
fn recorded_statistics_enter_the_components_and_decay_with_their_age() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("c.toml");
    std::fs::write(
        &config,
        "[ema]\nhalf_life_s = 5\nsuccess_prior = 1.0\n[window]\nmin_samples = 10\n",
    )
    .unwrap();
    let out = selcoord(&[
        "explain",
        "--config",
        config.to_str().unwrap(),
        "--candidates",
        &repo("examples/candidates/recorded.toml"),
        "--json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let sp1 = &v["candidates"][0]["components"];
    let close = |got: &serde_json::Value, want: f64| (got.as_f64().unwrap() - want).abs() < 1e-9;
    // Recorded 5 s ago with a 5 s half-life: halfway back to the prior / to the average.
    assert!(close(&sp1["success"], 1.0 + (0.75 - 1.0) * 0.5), "{sp1}");
    let connect = 120.0 + (80.0 - 120.0) * 0.5;
    assert!(close(&sp1["connect"], (-connect / 120.0f64).exp()), "{sp1}");
    // 2 overload errors in 20 outcomes; the window does not decay, it forgets.
    assert!(close(&sp1["overload"], 0.9), "{sp1}");
    // A grant to sp-1 advises a multiple of its first bytes (250 ms recorded), sp-2, without
    // any, the same multiple of the fleet's 300 ms: the multiple the fleet's recorded spread
    // (0.05) gives, below the factor of 10.
    let deadline = |i: usize| v["candidates"][i]["deadline_ms"].as_f64().unwrap();
    let multiple = deadline(0) / 250.0;
    assert!(multiple > 1.0 && multiple < 10.0, "{}", v["candidates"][0]);
    assert!(
        (deadline(1) - 300.0 * multiple).abs() < 1e-6,
        "{}",
        v["candidates"][1]
    );
    // sp-2 has no statistics: the prior and the averages.
    let sp2 = &v["candidates"][1]["components"];
    assert!(
        close(&sp2["success"], 1.0) && close(&sp2["connect"], (-1.0f64).exp()),
        "{sp2}"
    );
    let total: f64 = v["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["probability"].as_f64().unwrap())
        .sum();
    assert!((total - 1.0).abs() < 1e-9);
}

#[test]
fn duplicate_candidate_ids_are_refused_naming_the_id() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("dup.toml");
    std::fs::write(
        &file,
        "[[candidates]]\nid = \"a\"\n[[candidates]]\nid = \"b\"\n[[candidates]]\nid = \"a\"\n",
    )
    .unwrap();
    for json in [false, true] {
        let mut args = vec![
            "explain",
            "--config",
            "default",
            "--candidates",
            file.to_str().unwrap(),
        ];
        if json {
            args.push("--json");
        }
        let out = selcoord(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "accepted duplicate ids: {err}");
        assert!(out.stdout.is_empty(), "printed a result for duplicate ids");
        for want in [
            "candidates[2].id",
            "duplicate candidate id `a`",
            "candidates[0]",
        ] {
            assert!(err.contains(want), "missing {want} in\n{err}");
        }
    }
}

#[test]
fn large_weights_are_shown_in_scientific_notation() {
    // The default config raises the score to the 24th power: weights of order 1e28.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("two.toml");
    std::fs::write(
        &file,
        "[[candidates]]\nid = \"a\"\n[[candidates]]\nid = \"b\"\n",
    )
    .unwrap();
    let args = [
        "explain",
        "--config",
        "default",
        "--candidates",
        file.to_str().unwrap(),
    ];
    let json = selcoord(&[&args[..], &["--json"]].concat());
    assert!(json.status.success());
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let weight = v["candidates"][0]["weight"].as_f64().unwrap();
    assert!(weight > 1e6, "the case needs a large weight, got {weight}");
    let out = selcoord(&args);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    let row = text
        .lines()
        .find(|l| l.starts_with("a "))
        .unwrap_or_else(|| panic!("no row for a in\n{text}"));
    let cells: Vec<&str> = row.split_whitespace().collect();
    // id, probability, score, weight, components...
    let shown = cells[3];
    assert!(
        shown.contains('e') && shown.len() <= 10,
        "weight cell {shown:?} in\n{text}"
    );
    let parsed: f64 = shown.parse().unwrap();
    assert!((parsed / weight - 1.0).abs() < 1e-4, "{shown} vs {weight}");
    assert!(cells[1] == "0.500000", "{row}");
}

/// Runs `selcoord explain` on candidates `text` (TOML) under the config `config` (TOML text,
/// or a preset name when it has no `=`), with `extra` flags.
fn explain_text(config: &str, text: &str, extra: &[&str]) -> std::process::Output {
    let dir = tempfile::tempdir().unwrap();
    let candidates = dir.path().join("c.toml");
    std::fs::write(&candidates, text).unwrap();
    let config = if config.contains('=') {
        let path = dir.path().join("config.toml");
        std::fs::write(&path, config).unwrap();
        path.to_string_lossy().into_owned()
    } else {
        config.to_string()
    };
    let mut args = vec![
        "explain",
        "--config",
        &config,
        "--candidates",
        candidates.to_str().unwrap(),
    ];
    args.extend(extra);
    selcoord(&args)
}

/// The table's component columns, by header name, of the candidate line starting with `id`.
fn columns(table: &str, id: &str) -> Vec<(String, String)> {
    let lines: Vec<&str> = table.lines().collect();
    let header: Vec<&str> = lines[1].split_whitespace().collect();
    let row = lines
        .iter()
        .find(|l| l.starts_with(id))
        .unwrap_or_else(|| panic!("no line for {id} in\n{table}"));
    header
        .iter()
        .zip(row.split_whitespace())
        .map(|(h, v)| (h.to_string(), v.to_string()))
        .collect()
}

/// Two candidates that differ only in their attempt time draw very differently under the
/// default config, through `time_exponent` although `time_to_success` has weight 0: the table
/// shows that column (and `feedback` where `feedback.exponent` acts), so the difference is seen.
#[test]
fn the_table_shows_the_components_that_act_through_an_exponent() {
    let text = "[overall]\nattempt_ms = 300\nttfb_ms = 300\n\
                [[candidates]]\nid = \"quick\"\n[candidates.stats]\nattempt_ms = 150\n\
                [[candidates]]\nid = \"sluggish\"\n[candidates.stats]\nattempt_ms = 900\n";
    let out = explain_text("default", text, &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let table = String::from_utf8(out.stdout).unwrap();
    let quick = columns(&table, "quick");
    let sluggish = columns(&table, "sluggish");
    let tts = |cols: &[(String, String)]| {
        cols.iter()
            .find(|(h, _)| h == "time_to_success")
            .map(|(_, v)| v.parse::<f64>().unwrap())
            .unwrap_or_else(|| panic!("no time_to_success column in\n{table}"))
    };
    assert!(tts(&quick) > tts(&sluggish), "{table}");
    // The default's feedback exponent acts on a candidate whose server reports.
    assert!(quick.iter().any(|(h, _)| h == "feedback"), "{table}");
    assert!(
        !table.contains("components with weight 0 are not shown"),
        "{table}"
    );
    // Without the exponents, neither acts and neither is shown.
    let out = explain_text(
        "time_exponent = 0.0\n[feedback]\nexponent = 0.0\n",
        text,
        &[],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let table = String::from_utf8(out.stdout).unwrap();
    let header = table.lines().nth(1).unwrap();
    assert!(
        !header.contains("time_to_success") && !header.contains("feedback"),
        "{table}"
    );
    // Mixture mode draws each weighed component on its own: the exponents do not act there.
    let out = explain_text("livepeer", text, &[]);
    let table = String::from_utf8(out.stdout).unwrap();
    assert!(
        !table.lines().nth(1).unwrap().contains("time_to_success"),
        "{table}"
    );
}

/// Under a deterministic config the header says the draw is deterministic and which candidate
/// wins, ties going to the first in the file; the JSON carries the record's reason and winner.
#[test]
fn a_deterministic_draw_says_who_wins() {
    let ties =
        "[[candidates]]\nid = \"z\"\n[[candidates]]\nid = \"a\"\n[[candidates]]\nid = \"m\"\n";
    let config = "deterministic = true\n";
    let out = explain_text(config, ties, &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let table = String::from_utf8(out.stdout).unwrap();
    let head = table.lines().take(2).collect::<Vec<_>>().join("\n");
    assert!(head.contains("deterministic"), "{table}");
    assert!(head.contains("`z` wins"), "{table}");
    assert!(head.contains("first in the file"), "{table}");
    let out = explain_text(config, ties, &["--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON output");
    assert_eq!(v["reason"], "deterministic", "{v}");
    assert_eq!(v["winner"], "z", "{v}");
    // A random draw says so too, and names no winner in the table's header.
    let out = explain_text("default", ties, &["--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON output");
    assert_eq!(v["reason"], "draw", "{v}");
    let out = explain_text("default", ties, &[]);
    let table = String::from_utf8(out.stdout).unwrap();
    assert!(!table.contains("wins"), "{table}");
}

/// A recorded ejection (`stats.ejected_for_s`) counts only with `[ejection] enabled = true`:
/// with ejection off, the table notes that it is ignored (the JSON on stderr).
#[test]
fn an_ejection_is_noted_as_ignored_while_ejection_is_off() {
    let text = "[[candidates]]\nid = \"a\"\n[candidates.stats]\nejected_for_s = 10\n\
                [[candidates]]\nid = \"b\"\n";
    let out = explain_text("default", text, &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let table = String::from_utf8(out.stdout).unwrap();
    assert!(
        table.contains("note: candidates[0] (`a`) sets stats.ejected_for_s"),
        "{table}"
    );
    assert!(table.contains("[ejection] enabled = true"), "{table}");
    let out = explain_text("default", text, &["--json"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("ejected_for_s"));
    serde_json::from_slice::<serde_json::Value>(&out.stdout).expect("JSON output");
    let out = explain_text("[ejection]\nenabled = true\nmax_share = 1.0\n", text, &[]);
    let table = String::from_utf8(out.stdout).unwrap();
    assert!(!table.contains("note:"), "{table}");
    assert!(table.contains("ejection: removed a"), "{table}");
}

/// examples/candidates/recorded.toml is the annotated example of docs/explain.md: the file, past
/// its first comment line, is the document's example, field for field.
#[test]
fn the_recorded_example_is_the_documents() {
    let doc = std::fs::read_to_string(repo("docs/explain.md")).unwrap();
    let start = doc.find("```toml\n").expect("the document's example") + "```toml\n".len();
    let block = &doc[start..start + doc[start..].find("```").unwrap()];
    let file = std::fs::read_to_string(repo("examples/candidates/recorded.toml")).unwrap();
    let (_, rest) = file.split_once('\n').unwrap();
    assert_eq!(
        rest, block,
        "examples/candidates/recorded.toml and docs/explain.md differ"
    );
}

/// The id column is as wide on screen as the longest id, so ids beyond ASCII (double-width
/// CJK characters too) keep the columns aligned; no line ends in spaces (an empty note column).
#[test]
fn the_table_aligns_ids_beyond_ascii_and_trims_its_lines() {
    let text = "[[candidates]]\nid = \"ünïcødé-节点-1\"\n[[candidates]]\nid = \"b\"\n";
    let out = explain_text("default", text, &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let table = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = table.lines().collect();
    // Where the probability column ends on screen, on the header and both rows: a CJK
    // character takes two columns of a terminal, the others here one.
    let width = |s: &str| {
        s.chars()
            .map(|c| {
                if ('\u{4e00}'..='\u{9fff}').contains(&c) {
                    2
                } else {
                    1
                }
            })
            .sum::<usize>()
    };
    let end = |l: &str| {
        let word = if l.starts_with("id") {
            "probability"
        } else {
            "0."
        };
        let at = l.find(word).unwrap();
        let len = l[at..].find(char::is_whitespace).unwrap_or(l.len() - at);
        width(&l[..at + len])
    };
    assert_eq!(end(lines[1]), end(lines[2]), "{table}");
    assert_eq!(end(lines[1]), end(lines[3]), "{table}");
    for l in &lines {
        assert_eq!(l.trim_end(), *l, "a line ends in spaces:\n{table}");
    }
}

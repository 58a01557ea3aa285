//! Reading an input file (a config, a scenario, a candidates file) with a size cap: a path
//! such as a device or a runaway file fails at once instead of filling memory; and finding
//! the numbers in a TOML document that JSON cannot hold; showing a number given in one
//! compactly in a message; and finding where a field is in a TOML document, to point a
//! message at its line.

use std::io::Read;
use std::path::Path;

/// The largest input file read: 256 MiB, well above any real one (a scenario listing a
/// million candidates one by one, or a million candidates with their statistics, is some
/// 100-300 MB).
pub const MAX_FILE_BYTES: u64 = 256 << 20;

/// Reads `path` as UTF-8 text: a regular file of at most [`MAX_FILE_BYTES`]. Anything else (a
/// directory, a device such as `/dev/zero`, a pipe, a larger file) is an `InvalidInput` error
/// that says what was found; text that is not UTF-8 is `InvalidData`, as from
/// [`std::fs::read_to_string`].
pub fn read_text(path: &Path) -> std::io::Result<String> {
    let invalid = |what: String| std::io::Error::new(std::io::ErrorKind::InvalidInput, what);
    // The kind is checked before opening: opening a named pipe would block until someone
    // writes to it.
    let meta = std::fs::metadata(path)?;
    if !meta.is_file() {
        let kind = if meta.is_dir() {
            "a directory"
        } else {
            "not a regular file (a device, a pipe or a socket)"
        };
        return Err(invalid(format!("it is {kind}; give the path of a file")));
    }
    let too_big = |len: u64| {
        invalid(format!(
            "it has {len} bytes or more, past the {} MiB an input file may have",
            MAX_FILE_BYTES >> 20
        ))
    };
    if meta.len() > MAX_FILE_BYTES {
        return Err(too_big(meta.len()));
    }
    let mut text = String::new();
    let file = std::fs::File::open(path)?;
    file.take(MAX_FILE_BYTES + 1).read_to_string(&mut text)?;
    if text.len() as u64 > MAX_FILE_BYTES {
        return Err(too_big(text.len() as u64));
    }
    Ok(text)
}

/// Every float in `v` that is NaN or infinite, with its path under `path` (`a.b[2].c`; no
/// leading dot when `path` is empty): JSON, which the documents are read through, cannot hold
/// them, so they are refused by path before the conversion.
pub fn non_finite(v: &toml::Value, path: &str) -> Vec<(String, f64)> {
    let mut out = Vec::new();
    walk(v, path, &mut out);
    out
}

fn walk(v: &toml::Value, path: &str, out: &mut Vec<(String, f64)>) {
    match v {
        toml::Value::Float(x) if !x.is_finite() => out.push((path.to_string(), *x)),
        toml::Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                walk(item, &format!("{path}[{i}]"), out);
            }
        }
        toml::Value::Table(table) => {
            for (key, item) in table {
                let path = if path.is_empty() {
                    key.clone()
                } else {
                    format!("{path}.{key}")
                };
                walk(item, &path, out);
            }
        }
        _ => {}
    }
}

/// A number as a message shows it: as `{}` shows an `f64` when that is short, and in
/// scientific notation (`1e300`, `2.5e-7`) from 1e16 up and below 1e-4, where `{}` would
/// write every digit (a typo such as `1e300` would take three hundred). Width, alignment and,
/// for the short form, precision are honoured, so a table column keeps its layout.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Num(pub f64);

impl std::fmt::Display for Num {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let x = self.0;
        let magnitude = x.abs();
        if !(x.is_finite() && x != 0.0 && !(1e-4..1e16).contains(&magnitude)) {
            return std::fmt::Display::fmt(&x, f);
        }
        let shown = match f.precision() {
            Some(p) => format!("{x:.p$e}"),
            None => format!("{x:e}"),
        };
        let width = f.width().unwrap_or(0);
        match f.align() {
            Some(std::fmt::Alignment::Left) => write!(f, "{shown:<width$}"),
            Some(std::fmt::Alignment::Center) => write!(f, "{shown:^width$}"),
            _ => write!(f, "{shown:>width$}"),
        }
    }
}

/// Where `span` starts in `text`, as TOML's own errors show it: the column, then the line with
/// carets under the span (cut at the line's end).
#[cfg(feature = "sim")]
pub(crate) fn snippet(text: &str, span: std::ops::Range<usize>) -> String {
    let boundary = |mut i: usize| {
        i = i.min(text.len());
        while !text.is_char_boundary(i) {
            i -= 1;
        }
        i
    };
    let start = boundary(span.start);
    let line_start = text[..start].rfind('\n').map_or(0, |i| i + 1);
    let line_end = text[start..].find('\n').map_or(text.len(), |i| start + i);
    let line = text[line_start..line_end].trim_end_matches('\r');
    let column = text[line_start..start].chars().count() + 1;
    let number = line_of(text, start).to_string();
    let pad = " ".repeat(number.len());
    // The line is shown without its carriage returns, so the span may start past its end.
    let shown_end = (line_start + line.len()).max(start);
    let end = boundary(span.end.clamp(start, shown_end));
    let carets = text[start..end].chars().count().max(1);
    format!(
        "at line {number}, column {column}:\n{pad} |\n{number} | {line}\n{pad} | {}{}",
        " ".repeat(column - 1),
        "^".repeat(carets)
    )
}

/// The span of the value at `field` (`candidates[1].servers`, `workload.workers`) in the TOML
/// `text`, or of the nearest enclosing value there when it is absent (`workload` for a
/// defaulted `workload.workers`); `None` for the document itself. A check on the parsed
/// scenario points there, in an inline table as in an ordinary one.
pub(crate) fn span_of(text: &str, field: &str) -> Option<std::ops::Range<usize>> {
    use toml::de::{DeTable, DeValue};
    let root = DeTable::parse(text).ok()?;
    let mut here: Option<&toml::Spanned<DeValue<'_>>> = None;
    let mut table: Option<&DeTable<'_>> = Some(root.get_ref());
    for part in field.split('.') {
        let mut pieces = part.split('[');
        let key = pieces.next().unwrap_or_default();
        let Some(next) = table.and_then(|t| {
            t.iter()
                .find(|(k, _)| k.get_ref().as_ref() == key)
                .map(|(_, v)| v)
        }) else {
            break;
        };
        here = Some(next);
        for index in pieces {
            let item = index
                .trim_end_matches(']')
                .parse::<usize>()
                .ok()
                .and_then(|i| match here.map(toml::Spanned::get_ref) {
                    Some(DeValue::Array(items)) => items.get(i),
                    _ => None,
                });
            match item {
                Some(item) => here = Some(item),
                None => return here.map(toml::Spanned::span),
            }
        }
        table = match here.map(toml::Spanned::get_ref) {
            Some(DeValue::Table(t)) => Some(t),
            _ => None,
        };
    }
    here.map(toml::Spanned::span)
}

/// The 1-based line of the value at `field` (`candidates[1].stake`) in the TOML `text`, or of
/// the nearest enclosing value present (`span_of`); `None` for the document itself or a
/// text that does not parse. For a message about a field read from a TOML file.
pub fn toml_line(text: &str, field: &str) -> Option<usize> {
    span_of(text, field).map(|span| line_of(text, span.start))
}

/// The 1-based line of byte `offset` in `text`.
pub(crate) fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())]
        .bytes()
        .filter(|&b| b == b'\n')
        .count()
        + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_shown_compactly_only_when_long() {
        for (x, shown) in [
            (1e300, "1e300"),
            (-1e300, "-1e300"),
            (1.5e16, "1.5e16"),
            (2.5e-7, "2.5e-7"),
            (5000.0, "5000"),
            (0.25, "0.25"),
            (-5.0, "-5"),
            (0.0, "0"),
            (1e15, "1000000000000000"),
            (f64::INFINITY, "inf"),
            (f64::NAN, "NaN"),
        ] {
            assert_eq!(Num(x).to_string(), shown, "{x:e}");
        }
        // A table's width and precision.
        assert_eq!(format!("{:>8.1}", Num(3.26)), "     3.3");
        assert_eq!(format!("{:>8.1}", Num(1e300)), " 1.0e300");
        assert_eq!(format!("{:<8}|", Num(1e300)), "1e300   |");
    }

    #[test]
    fn non_finite_floats_are_found_by_their_path() {
        let v: toml::Value = toml::from_str(
            "a = nan\nb = [1.0, inf]\nok = 2.5\n[c]\nd = -inf\ne = 2.0\n[[f]]\ng = 1.0\n[[f]]\ng = nan\n",
        )
        .unwrap();
        let paths = |prefix: &str| -> Vec<(String, bool)> {
            let mut got: Vec<(String, bool)> = non_finite(&v, prefix)
                .into_iter()
                .map(|(path, x)| (path, x.is_nan()))
                .collect();
            got.sort();
            got
        };
        let want = |prefix: &str| -> Vec<(String, bool)> {
            [
                ("a", true),
                ("b[1]", false),
                ("c.d", false),
                ("f[1].g", true),
            ]
            .iter()
            .map(|(p, nan)| (format!("{prefix}{p}"), *nan))
            .collect()
        };
        assert_eq!(paths(""), want(""));
        assert_eq!(paths("doc"), want("doc."));
    }

    #[test]
    fn devices_and_directories_are_refused_and_files_read() {
        let e = read_text(Path::new("/dev/zero")).unwrap_err();
        assert!(e.to_string().contains("not a regular file"), "{e}");
        let dir = tempfile::tempdir().unwrap();
        let e = read_text(dir.path()).unwrap_err();
        assert!(e.to_string().contains("a directory"), "{e}");
        let file = dir.path().join("c.json");
        std::fs::write(&file, "[]").unwrap();
        assert_eq!(read_text(&file).unwrap(), "[]");
        // A sparse file past the cap is refused from its size, without reading it.
        let big = dir.path().join("big.json");
        std::fs::File::create(&big)
            .unwrap()
            .set_len(MAX_FILE_BYTES + 1)
            .unwrap();
        let e = read_text(&big).unwrap_err();
        assert!(e.to_string().contains("256 MiB"), "{e}");
        // A named pipe is refused without being opened (opening it would block).
        let fifo = dir.path().join("fifo");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        if made.is_ok_and(|s| s.success()) {
            let e = read_text(&fifo).unwrap_err();
            assert!(e.to_string().contains("not a regular file"), "{e}");
        }
    }
}

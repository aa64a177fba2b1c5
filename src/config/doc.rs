//! A TOML document as a list of leaves (a key path, its value, its line), and back.
//!
//! Layers merge key by key, so each file is first cut into the values a layer can
//! override on its own: a top-level key, a key of a section, a key of
//! `[sandbox.limits]`, one model's `[prices."m"]` entry. A leaf keeps the line it
//! stood on, which is what every error and `io-harness config` names. The merged
//! leaves are written back as one document, one leaf per line, so a line of that
//! document still says which leaf (and so which file and line) it came from.

use std::fmt::Write as _;
use std::ops::Range;

use toml::de::{DeTable, DeValue};
use toml::{Spanned, Value};

use crate::contract::line_of;

/// A key path: `["sandbox", "limits", "memory"]`.
pub type KeyPath = Vec<String>;

/// One overridable value of a document.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Leaf {
    pub(super) path: KeyPath,
    pub(super) value: Value,
    /// 1-based line of its key.
    pub(super) line: usize,
}

/// Parses `text` and cuts it into leaves, in document order. A syntax error comes
/// back with its line.
pub(super) fn leaves(text: &str) -> Result<Vec<Leaf>, (usize, String)> {
    let doc = DeTable::parse(text).map_err(|e| {
        let line = e.span().map_or(1, |s| line_of(text, s.start));
        (line, e.message().trim().to_string())
    })?;
    let mut out = Vec::new();
    for (k, v) in doc.into_inner() {
        let key = k.get_ref().to_string();
        let line = line_of(text, k.span().start);
        if let DeValue::Table(t) = v.get_ref()
            && key != "prices"
        {
            section(text, &key, line, t, &mut out)?;
            continue;
        }
        if key == "prices"
            && let DeValue::Table(t) = v.get_ref()
        {
            for (m, p) in t {
                let path = vec![key.clone(), m.get_ref().to_string()];
                out.push(leaf(text, path, m.span(), p.clone())?);
            }
            continue;
        }
        out.push(Leaf {
            path: vec![key],
            value: value(v)?,
            line,
        });
    }
    out.sort_by_key(|l| l.line);
    Ok(out)
}

/// The keys of one `[section]`; `[sandbox.limits]` goes one level deeper.
fn section(
    text: &str,
    name: &str,
    line: usize,
    table: &DeTable<'_>,
    out: &mut Vec<Leaf>,
) -> Result<(), (usize, String)> {
    if table.is_empty() {
        // Kept, so the loader still sees the section (and says what it lacks).
        out.push(Leaf {
            path: vec![name.to_string()],
            value: Value::Table(toml::Table::new()),
            line,
        });
    }
    for (k, v) in table {
        let key = k.get_ref().to_string();
        if name == "sandbox"
            && key == "limits"
            && let DeValue::Table(limits) = v.get_ref()
        {
            for (lk, lv) in limits {
                let path = vec![name.to_string(), key.clone(), lk.get_ref().to_string()];
                out.push(leaf(text, path, lk.span(), lv.clone())?);
            }
            continue;
        }
        out.push(leaf(
            text,
            vec![name.to_string(), key],
            k.span(),
            v.clone(),
        )?);
    }
    Ok(())
}

fn leaf(
    text: &str,
    path: KeyPath,
    key_span: Range<usize>,
    v: Spanned<DeValue<'_>>,
) -> Result<Leaf, (usize, String)> {
    Ok(Leaf {
        path,
        value: value(v)?,
        line: line_of(text, key_span.start),
    })
}

fn value(v: Spanned<DeValue<'_>>) -> Result<Value, (usize, String)> {
    use serde::Deserialize;
    let d = toml::de::ValueDeserializer::from(v);
    Value::deserialize(d).map_err(|e| (1, e.message().to_string()))
}

/// `sandbox.limits.memory`, `prices."gpt-4.1"`: a path as a person reads it.
pub fn dotted(path: &[String]) -> String {
    path.iter().map(|s| key(s)).collect::<Vec<_>>().join(".")
}

/// A bare key when TOML allows one, else a quoted one.
fn key(s: &str) -> String {
    let bare = !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if bare { s.to_string() } else { quoted(s) }
}

/// A TOML basic string. JSON's escapes are a subset of TOML's, and serde_json never
/// writes `\/`.
fn quoted(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into())
}

/// A value on one line: strings quoted and escaped, tables inline.
pub fn inline(v: &Value) -> String {
    match v {
        Value::String(s) => quoted(s),
        Value::Integer(i) => i.to_string(),
        Value::Float(f) if f.is_nan() => "nan".into(),
        Value::Float(f) if f.is_infinite() => if *f > 0.0 { "inf" } else { "-inf" }.into(),
        Value::Float(f) => format!("{f:?}"),
        Value::Boolean(b) => b.to_string(),
        Value::Datetime(d) => d.to_string(),
        Value::Array(a) => format!("[{}]", a.iter().map(inline).collect::<Vec<_>>().join(", ")),
        Value::Table(t) => {
            let items: Vec<String> = t
                .iter()
                .map(|(k, v)| format!("{} = {}", key(k), inline(v)))
                .collect();
            if items.is_empty() {
                "{}".into()
            } else {
                format!("{{ {} }}", items.join(", "))
            }
        }
    }
}

/// The merged document: top-level keys, then each section's keys under its header,
/// one leaf per line. Returns the text and, per line (0-based), the leaf written
/// there (`None` for a header).
pub(super) fn render(leaves: &[Leaf]) -> (String, Vec<Option<usize>>) {
    let mut text = String::new();
    let mut lines = Vec::new();
    let mut top: Vec<usize> = Vec::new();
    let mut sections: Vec<(KeyPath, Vec<usize>)> = Vec::new();
    for (i, l) in leaves.iter().enumerate() {
        if l.path.len() == 1 {
            top.push(i);
            continue;
        }
        let header = l.path[..l.path.len() - 1].to_vec();
        match sections.iter_mut().find(|(h, _)| *h == header) {
            Some((_, v)) => v.push(i),
            None => sections.push((header, vec![i])),
        }
    }
    // A parent section is written before its subsection (`[sandbox]` then
    // `[sandbox.limits]`), which TOML allows in either order; this is only tidier.
    sections.sort_by(|a, b| a.0.cmp(&b.0));
    for i in top {
        let _ = writeln!(
            text,
            "{} = {}",
            key(&leaves[i].path[0]),
            inline(&leaves[i].value)
        );
        lines.push(Some(i));
    }
    for (header, items) in sections {
        let _ = writeln!(text, "[{}]", dotted(&header));
        lines.push(None);
        for i in items {
            let l = &leaves[i];
            let _ = writeln!(
                text,
                "{} = {}",
                key(&l.path[l.path.len() - 1]),
                inline(&l.value)
            );
            lines.push(Some(i));
        }
    }
    (text, lines)
}

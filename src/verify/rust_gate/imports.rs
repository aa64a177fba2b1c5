//! Glob imports of the subject, made explicit. A criterion's `use subject::*;` brings
//! in every public item of the subject, and two kinds of them change what the
//! criterion's own code means without any name of the criterion pointing at them:
//!
//! - a **trait** (with a blanket impl): its methods join method resolution, and a
//!   by-value `fn eq(self, …)`, `fn to_string(self)` or `fn len(self)` is found before
//!   std's `&self` methods, so `add(2, 3).eq(&5)` calls the subject's;
//! - a **lowercase `const`** (or unit struct): a binding in the criterion's patterns
//!   (`if let Err(e) = …`, a `match` arm `n => …`) becomes a constant pattern that
//!   never matches, so the arm meant to fail the test is skipped.
//!
//! So the harness replaces each glob of the subject (`use subject::*;`,
//! `use subject::path::*;`) in its copy of the criterion by an explicit list: the names
//! the criterion uses outside its patterns' bindings that the subject really has at that
//! path (asked of the compiler: a harness-written probe crate imports each candidate on
//! its own line, and a line with an error is a name the subject does not have). A
//! trait the criterion does not name is then not in scope, and a name the criterion
//! only binds stays a binding. A criterion that calls a subject trait's methods names
//! the trait (`Shape::area(&s)`, or `use subject::Shape;`); prelude names, primitives
//! and std macros stay pinned to std (module `guard`).

use std::collections::{BTreeMap, BTreeSet};

use super::{guard, scan};

/// A glob import of the subject: the byte range of its `use … ;` item and the path
/// the glob hangs from (`subject`, `subject::m`).
pub(crate) struct SubjectGlob {
    start: usize,
    end: usize,
    path: String,
}

/// Rust's keywords, never an item name to import.
const KEYWORDS: &[&str] = &[
    "as", "async", "await", "break", "const", "continue", "crate", "dyn", "else", "enum", "extern",
    "false", "fn", "for", "if", "impl", "in", "let", "loop", "match", "mod", "move", "mut", "pub",
    "ref", "return", "self", "Self", "static", "struct", "super", "trait", "true", "type",
    "unsafe", "use", "where", "while", "box", "try", "yield", "macro", "union", "_",
];

/// The globs of crate `krate` in `code` (blanked by [`scan::code_only`]): `use` items
/// whose whole tree is `[::]krate[::seg]*::*`.
pub(crate) fn subject_globs(code: &str, krate: &str) -> Vec<SubjectGlob> {
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(i) = find_use(&code[from..]) {
        let start = from + i;
        let Some(len) = code[start..].find(';') else {
            break;
        };
        let end = start + len + 1;
        from = end;
        let tree: String = code[start + 3..end - 1]
            .chars()
            .filter(|c| !c.is_whitespace())
            .collect();
        let tree = tree.strip_prefix("::").unwrap_or(&tree);
        let Some(path) = tree
            .strip_suffix("::*")
            .or_else(|| tree.strip_suffix("::{*}"))
        else {
            continue;
        };
        let mut segs = path.split("::");
        let simple = path
            .split("::")
            .all(|s| !s.is_empty() && s.chars().all(|c| c.is_alphanumeric() || c == '_'));
        if segs.next() == Some(krate) && simple {
            out.push(SubjectGlob {
                start,
                end,
                path: path.to_string(),
            });
        }
    }
    out
}

/// The offset of the next `use` keyword (a whole word) in `hay`.
fn find_use(hay: &str) -> Option<usize> {
    let b = hay.as_bytes();
    let word = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let mut from = 0;
    while let Some(i) = hay[from..].find("use") {
        let at = from + i;
        let before_ok = at == 0 || !word(b[at - 1]);
        let after_ok = b.get(at + 3).is_none_or(|c| !word(*c));
        if before_ok && after_ok {
            return Some(at);
        }
        from = at + 3;
    }
    None
}

/// An identifier token of `code`: its start, its end and its text.
fn idents(code: &str) -> Vec<(usize, usize)> {
    let b = code.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_alphabetic() || c == b'_' {
            let s = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            // A lifetime (`'a`) or a raw identifier (`r#x`) is no item name.
            let lifetime = s > 0 && b[s - 1] == b'\'';
            let raw_prefix = b.get(i) == Some(&b'#') && &code[s..i] == "r";
            let raw = s >= 2 && b[s - 1] == b'#' && b[s - 2] == b'r';
            if !lifetime && !raw_prefix && !raw {
                out.push((s, i));
            }
        } else if c.is_ascii_digit() {
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
        } else {
            i += 1;
        }
    }
    out
}

/// The byte ranges of `code` that are patterns: after `let` up to its `=`, `:`, `;`
/// or `else`; after `for` up to `in`; a closure's `|…|` parameters; a function's
/// parameter names; and each `match` arm (or `if`-less arm) before its `=>`.
fn pattern_ranges(code: &str) -> Vec<(usize, usize)> {
    let b = code.as_bytes();
    let mut out = Vec::new();
    for (s, e) in idents(code) {
        match &code[s..e] {
            "let" => {
                let mut depth = 0i32;
                let mut j = e;
                while j < b.len() {
                    match b[j] {
                        b'(' | b'[' | b'{' => depth += 1,
                        b')' | b']' | b'}' => depth -= 1,
                        b'=' if depth == 0 && b.get(j + 1) != Some(&b'=') => break,
                        b':' if depth == 0 && b.get(j + 1) != Some(&b':') => break,
                        b';' if depth == 0 => break,
                        _ => {}
                    }
                    if depth < 0 {
                        break;
                    }
                    j += 1;
                }
                out.push((e, j));
            }
            "for" => {
                if let Some(k) = code[e..].find(" in ") {
                    out.push((e, e + k));
                }
            }
            _ => {}
        }
    }
    // Closure parameters: `|` after `(`, `,`, `=` or `move`, up to the next `|`.
    for (i, _) in code.match_indices('|') {
        let before = code[..i].trim_end();
        let opens =
            before.ends_with(['(', ',', '=']) || before.ends_with("move") || before.ends_with("=>");
        if opens
            && b.get(i + 1) != Some(&b'|')
            && let Some(k) = code[i + 1..].find('|')
        {
            out.push((i + 1, i + 1 + k));
        }
    }
    // Match arms: back from each `=>` over balanced brackets to the arm's start.
    for (i, _) in code.match_indices("=>") {
        let mut depth = 0i32;
        let mut j = i;
        while j > 0 {
            j -= 1;
            match b[j] {
                b')' | b']' | b'}' => depth += 1,
                b'(' | b'[' | b'{' => {
                    depth -= 1;
                    if depth < 0 {
                        break;
                    }
                }
                b',' if depth == 0 => break,
                _ => {}
            }
            // A block body of the arm before ended here.
            if depth == 0 && b[j] == b'{' && code[..j].trim_end().ends_with("=>") {
                if let Some(close) = matching_close(b, j) {
                    j = close;
                }
                break;
            }
        }
        out.push((j, i));
    }
    out
}

fn matching_close(b: &[u8], open: usize) -> Option<usize> {
    let mut depth = 0usize;
    for (k, &c) in b.iter().enumerate().skip(open) {
        match c {
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    return Some(k);
                }
            }
            _ => {}
        }
    }
    None
}

/// The names the criterion binds in a pattern (lowercase identifiers there that are
/// not a path, a call or a struct pattern's head).
fn bindings(code: &str) -> BTreeSet<String> {
    let ranges = pattern_ranges(code);
    let mut out = BTreeSet::new();
    for (s, e) in idents(code) {
        if !ranges.iter().any(|&(a, z)| s >= a && e <= z) {
            continue;
        }
        let name = &code[s..e];
        let lower = name.starts_with(|c: char| c.is_ascii_lowercase() || c == '_');
        let after = code[e..].trim_start();
        let head = after.starts_with("::") || after.starts_with(['(', '{', '!']);
        let pathed = code[..s].trim_end().ends_with("::");
        if lower && !head && !pathed && !KEYWORDS.contains(&name) {
            out.insert(name.to_string());
        }
    }
    out
}

/// The names worth importing from the subject: identifiers of `code` that are not a
/// field or method (`.x`), not the tail of a path (`a::x`), not a binding, not a
/// keyword, not pinned to std by the guard, and not the criterion's own.
fn wanted(code: &str, own: &BTreeSet<String>, krate: &str) -> BTreeSet<String> {
    let b = code.as_bytes();
    let bound = bindings(code);
    let pinned = |n: &str| {
        guard::PRELUDE.contains(&n)
            || guard::PRIMITIVES.contains(&n)
            || guard::ALWAYS.contains(&n)
            || guard::STD_MACROS.contains(&n)
            || ["std", "core", "alloc", "test"].contains(&n)
    };
    let mut out = BTreeSet::new();
    for (s, e) in idents(code) {
        let name = &code[s..e];
        let before = code[..s].trim_end();
        let member = before.ends_with('.') && !before.ends_with("..");
        let tail = before.ends_with("::");
        let attr = before.ends_with("#[") || before.ends_with("#![");
        if member || tail || attr || b.get(e) == Some(&b'\'') {
            continue;
        }
        if KEYWORDS.contains(&name)
            || pinned(name)
            || bound.contains(name)
            || own.contains(name)
            || name == krate
        {
            continue;
        }
        out.insert(name.to_string());
    }
    out
}

/// The probe crate: one import per (glob path, candidate name) on its own line, and
/// for each line what it imports.
pub(crate) struct Probe {
    pub(crate) text: String,
    lines: Vec<(String, String)>,
}

/// The globs of `krate` in `criterion` and the probe asking which candidates exist,
/// or `None` when the criterion has no such glob.
pub(crate) fn probe(criterion: &str, krate: &str) -> Option<(Vec<SubjectGlob>, Probe)> {
    let code = scan::code_only(criterion);
    let globs = subject_globs(&code, krate);
    if globs.is_empty() {
        return None;
    }
    let mut own = scan::explicit_imports(criterion);
    own.extend(scan::module_items(&code));
    let names = wanted(&code, &own, krate);
    let paths: BTreeSet<&str> = globs.iter().map(|g| g.path.as_str()).collect();
    let mut text = String::new();
    let mut lines = Vec::new();
    for path in paths {
        for name in &names {
            text.push_str(&format!(
                "mod __p{} {{ #[allow(unused_imports)] use ::{path}::{name}; }}\n",
                lines.len()
            ));
            lines.push((path.to_string(), name.clone()));
        }
    }
    Some((globs, Probe { text, lines }))
}

/// The names each glob path resolved to, from the probe's `--error-format=short`
/// diagnostics `out` (`…/imports.rs:LINE:COL: error…`): a line an error points at is
/// a name the subject lacks there.
pub(crate) fn resolved(probe: &Probe, out: &str) -> BTreeMap<String, Vec<String>> {
    let mut bad = BTreeSet::new();
    for line in out.lines() {
        let Some(at) = line.find("imports.rs:") else {
            continue;
        };
        let rest = &line[at + "imports.rs:".len()..];
        if !rest.contains(": error") {
            continue;
        }
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        if let Ok(n) = digits.parse::<usize>() {
            bad.insert(n);
        }
    }
    let mut map: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (i, (path, name)) in probe.lines.iter().enumerate() {
        let names = map.entry(path.clone()).or_default();
        if !bad.contains(&(i + 1)) {
            names.push(name.clone());
        }
    }
    map
}

/// `criterion` with each subject glob replaced by the explicit list its path
/// resolved to (line breaks kept, so the compiler's line numbers stay the operator's).
pub(crate) fn rewrite(
    criterion: &str,
    globs: &[SubjectGlob],
    names: &BTreeMap<String, Vec<String>>,
) -> String {
    let mut out = String::with_capacity(criterion.len());
    let mut last = 0;
    for g in globs {
        out.push_str(&criterion[last..g.start]);
        let list = names.get(&g.path).map(|v| v.join(", ")).unwrap_or_default();
        out.push_str(&format!(
            "#[allow(unused_imports)] use ::{}::{{{list}}};",
            g.path
        ));
        let breaks = criterion[g.start..g.end].matches('\n').count();
        out.push_str(&"\n".repeat(breaks));
        last = g.end;
    }
    out.push_str(&criterion[last..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bindings_are_not_imported_and_used_names_are() {
        let src = "use subject::*;\n#[test] fn t() {\n if let Err(e) = validate(\"x\") { panic!(\"{e:?}\") }\n \
                   match count(3) { n if n > 2 => {}, other => panic!(\"{other}\") }\n \
                   let total = Point { x: 1 }; let v: Vec<i32> = evens(&[1]);\n \
                   assert!(Shape::area(&total) > 0.0 && v.len() == 1);\n}\n";
        let (globs, probe) = probe(src, "subject").expect("a glob");
        assert_eq!(globs.len(), 1);
        let names: Vec<&str> = probe.lines.iter().map(|(_, n)| n.as_str()).collect();
        for want in ["validate", "count", "Point", "evens", "Shape"] {
            assert!(names.contains(&want), "{want} in {names:?}");
        }
        // (`x`, a field name, may be asked about: the probe drops what is no item.)
        for not in [
            "e", "n", "other", "total", "v", "len", "area", "Vec", "Err", "t",
        ] {
            assert!(!names.contains(&not), "{not} in {names:?}");
        }
    }

    #[test]
    fn a_glob_is_rewritten_on_its_own_lines() {
        let src = "use subject::{\n    *\n};\nfn a() {}\n";
        let code = scan::code_only(src);
        let globs = subject_globs(&code, "subject");
        assert_eq!(globs.len(), 1);
        let mut names = BTreeMap::new();
        names.insert("subject".to_string(), vec!["add".to_string()]);
        let out = rewrite(src, &globs, &names);
        assert_eq!(out.lines().count(), src.lines().count(), "{out}");
        assert!(out.contains("use ::subject::{add};"), "{out}");
        assert!(subject_globs(&scan::code_only("use other::*;"), "subject").is_empty());
    }
}

//! Lists a criterion's tests from its source, before anything of the subject runs, so
//! the list cannot be forged by the subject.
//!
//! A light scan, not a parser: `#[test]` (possibly followed by more attributes) then
//! `fn name`, with `mod name {` blocks giving the path, over the source with its
//! comments and string contents blanked (a test in a comment is no test). A brace in a
//! char literal can still confuse the module tracking; a test it misnames does not
//! run under its wrong name, which fails the gate rather than passing it.

/// `source` with its comments (line and nested block comments) and the contents of
/// its string literals blanked, newlines kept: a `#[test]` inside a comment is no test,
/// and a `{` in a string opens no module.
pub(crate) fn code_only(source: &str) -> String {
    let mut out = String::with_capacity(source.len());
    let mut chars = source.chars().peekable();
    let mut block = 0usize;
    while let Some(c) = chars.next() {
        if block > 0 {
            match (c, chars.peek()) {
                ('*', Some('/')) => {
                    chars.next();
                    block -= 1;
                }
                ('/', Some('*')) => {
                    chars.next();
                    block += 1;
                }
                ('\n', _) => out.push('\n'),
                _ => {}
            }
            continue;
        }
        match (c, chars.peek()) {
            ('/', Some('/')) => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        out.push('\n');
                        break;
                    }
                }
            }
            ('/', Some('*')) => {
                chars.next();
                block = 1;
            }
            ('"', _) => {
                out.push('"');
                let mut escaped = false;
                for c in chars.by_ref() {
                    match (escaped, c) {
                        (false, '\\') => escaped = true,
                        (false, '"') => break,
                        (_, '\n') => {
                            out.push('\n');
                            escaped = false;
                        }
                        _ => escaped = false,
                    }
                }
                out.push('"');
            }
            _ => out.push(c),
        }
    }
    out
}

/// The names `use` items of `source` bind explicitly (`use std::panic;` → `panic`,
/// `use a::{b, c as d};` → `b`, `d`; `use std::panic::{self};` → `panic`); globs
/// bind none.
pub(crate) fn explicit_imports(source: &str) -> std::collections::BTreeSet<String> {
    let code = code_only(source);
    let mut names = std::collections::BTreeSet::new();
    let mut rest = code.as_str();
    while let Some(at) = find_word(rest, "use") {
        let item = &rest[at + 3..];
        let end = item.find(';').unwrap_or(item.len());
        // The last segment of the path a group hangs from, for `self` inside it.
        let mut group_of = String::new();
        for piece in item[..end].split([',', '{', '}']) {
            let piece = piece.trim();
            if let Some(prefix) = piece.strip_suffix("::") {
                group_of = prefix
                    .rsplit("::")
                    .next()
                    .unwrap_or(prefix)
                    .trim()
                    .to_string();
                continue;
            }
            let bound = match piece.rsplit_once(" as ") {
                Some((_, alias)) => alias.trim(),
                None => piece.rsplit("::").next().unwrap_or(piece).trim(),
            };
            match bound {
                "" | "*" | "_" => {}
                "self" if !group_of.is_empty() => {
                    names.insert(group_of.clone());
                }
                name => {
                    names.insert(name.to_string());
                }
            }
        }
        rest = &item[end..];
    }
    names
}

fn find_word(hay: &str, word: &str) -> Option<usize> {
    let bytes = hay.as_bytes();
    let mut from = 0;
    while let Some(i) = hay[from..].find(word) {
        let at = from + i;
        let before = at.checked_sub(1).map(|b| bytes[b]);
        let after = bytes.get(at + word.len()).copied();
        let boundary = |b: Option<u8>| b.is_none_or(|b| !(b.is_ascii_alphanumeric() || b == b'_'));
        if boundary(before) && boundary(after) {
            return Some(at);
        }
        from = at + word.len();
    }
    None
}

/// The full test names (`tests::adds`) of the criterion source, in source order.
pub(crate) fn test_names(source: &str) -> Vec<String> {
    let code = code_only(source);
    let source = code.as_str();
    let mut names = Vec::new();
    // Open modules: (name, brace depth inside the module).
    let mut mods: Vec<(String, usize)> = Vec::new();
    let mut depth = 0usize;
    let mut pending_test = false;
    for raw in source.lines() {
        let line = raw.split("//").next().unwrap_or("").trim();
        let mut rest = line;
        while let Some(attr) = rest.strip_prefix("#[") {
            let end = attr.find(']').map_or(attr.len(), |i| i + 1);
            if attr.trim_start().starts_with("test]") {
                pending_test = true;
            }
            rest = attr[end..].trim_start();
        }
        if pending_test && let Some(name) = fn_name(rest) {
            let mut full: Vec<&str> = mods.iter().map(|(m, _)| m.as_str()).collect();
            full.push(name);
            names.push(full.join("::"));
            pending_test = false;
        }
        let mut opens_mod = mod_name(rest);
        for ch in line.chars() {
            match ch {
                '{' => {
                    depth += 1;
                    if let Some(m) = opens_mod.take() {
                        mods.push((m, depth));
                    }
                }
                '}' => {
                    if mods.last().is_some_and(|(_, d)| *d == depth) {
                        mods.pop();
                    }
                    depth = depth.saturating_sub(1);
                }
                _ => {}
            }
        }
    }
    names
}

fn ident(s: &str) -> Option<&str> {
    let end = s
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(s.len());
    (end > 0).then(|| &s[..end])
}

fn strip_vis_and_qualifiers(mut s: &str) -> &str {
    loop {
        let before = s;
        for kw in [
            "pub(crate) ",
            "pub(super) ",
            "pub ",
            "async ",
            "unsafe ",
            "const ",
        ] {
            if let Some(r) = s.strip_prefix(kw) {
                s = r.trim_start();
            }
        }
        if s == before {
            return s;
        }
    }
}

fn fn_name(s: &str) -> Option<&str> {
    let s = strip_vis_and_qualifiers(s);
    ident(s.strip_prefix("fn ")?.trim_start())
}

fn mod_name(s: &str) -> Option<String> {
    let s = strip_vis_and_qualifiers(s);
    let rest = s.strip_prefix("mod ")?.trim_start();
    let name = ident(rest)?;
    rest[name.len()..]
        .trim_start()
        .starts_with('{')
        .then(|| name.to_string())
}

#[cfg(test)]
mod tests {
    use super::test_names;

    #[test]
    fn a_test_inside_a_comment_is_no_test() {
        let src = "/* an old test, kept for reference:\n#[test]\nfn gone() {}\n/* nested */ */\n\
                   #[test]\nfn here() { let s = \"{ /* not a comment\"; }\n#[test]\nfn also() {}\n";
        assert_eq!(test_names(src), ["here", "also"]);
    }

    #[test]
    fn explicit_imports_are_the_names_use_binds() {
        let got = super::explicit_imports(
            "use std::panic;\nuse a::{b, c as d, e::*};\nuse std::fmt::{self, Write as _};\n// use x::y;\n",
        );
        let want: Vec<&str> = vec!["b", "d", "fmt", "panic"];
        assert_eq!(got.iter().map(String::as_str).collect::<Vec<_>>(), want);
    }

    #[test]
    fn finds_top_level_and_module_tests() {
        let src = "use subject::add;\n#[test]\nfn adds() { assert_eq!(add(1, 2), 3); }\n\
                   #[test] #[should_panic]\nfn panics() {}\n\
                   mod more {\n    use super::*;\n    #[test]\n    pub fn inner() {\n        if true { }\n    }\n}\n\
                   // #[test]\nfn helper() {}\n#[test] fn last() {}\n";
        assert_eq!(test_names(src), ["adds", "panics", "more::inner", "last"]);
    }

    #[test]
    fn no_tests_is_empty() {
        assert!(test_names("fn main() {}\n").is_empty());
    }
}

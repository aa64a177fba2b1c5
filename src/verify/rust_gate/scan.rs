//! Lists a criterion's tests from its source, before anything of the subject runs, so
//! the list cannot be forged by the subject.
//!
//! A light scan, not a parser: `#[test]` (possibly followed by more attributes) then
//! `fn name`, with `mod name {` blocks giving the path, over the source with its
//! comments and string contents blanked (a test in a comment is no test). A brace in a
//! char literal can still confuse the module tracking; a test it misnames does not
//! run under its wrong name, which fails the gate rather than passing it.

/// `source` with its comments (line and nested block comments) and the contents of
/// its string and char literals (raw strings included) blanked to spaces, newlines
/// kept and every byte at its offset: a `#[test]` inside a comment is no test, a `{`
/// in a string opens no module, and a position found in the result is the same
/// position in `source` (the harness inserts its code there).
pub(crate) fn code_only(source: &str) -> String {
    let b = source.as_bytes();
    let mut out = b.to_vec();
    let blank = |out: &mut Vec<u8>, from: usize, to: usize| {
        for o in &mut out[from..to.min(b.len())] {
            if *o != b'\n' {
                *o = b' ';
            }
        }
    };
    let mut i = 0;
    while i < b.len() {
        match (b[i], b.get(i + 1).copied()) {
            (b'/', Some(b'/')) => {
                let end = b[i..]
                    .iter()
                    .position(|&c| c == b'\n')
                    .map_or(b.len(), |e| i + e);
                blank(&mut out, i, end);
                i = end;
            }
            (b'/', Some(b'*')) => {
                let mut depth = 0usize;
                let mut j = i;
                while j < b.len() {
                    match (b[j], b.get(j + 1).copied()) {
                        (b'/', Some(b'*')) => {
                            depth += 1;
                            j += 2;
                        }
                        (b'*', Some(b'/')) => {
                            depth -= 1;
                            j += 2;
                            if depth == 0 {
                                break;
                            }
                        }
                        _ => j += 1,
                    }
                }
                blank(&mut out, i, j);
                i = j;
            }
            (b'r', Some(b'"' | b'#')) if raw_start(b, i).is_some() => {
                let (hashes, open) = raw_start(b, i).unwrap_or((0, i));
                let close: Vec<u8> = std::iter::once(b'"')
                    .chain(std::iter::repeat_n(b'#', hashes))
                    .collect();
                let end = b[open + 1..]
                    .windows(close.len())
                    .position(|w| w == close.as_slice())
                    .map_or(b.len(), |e| open + 1 + e);
                blank(&mut out, open + 1, end);
                i = end + close.len();
            }
            (b'"', _) => {
                let mut j = i + 1;
                while j < b.len() && b[j] != b'"' {
                    j += if b[j] == b'\\' { 2 } else { 1 };
                }
                blank(&mut out, i + 1, j);
                i = j + 1;
            }
            (b'\'', _) => {
                i = char_literal(b, i).map_or(i + 1, |end| {
                    blank(&mut out, i + 1, end);
                    end + 1
                })
            }
            _ => i += 1,
        }
    }
    // Only ASCII bytes were replaced, and only whole characters: still UTF-8.
    String::from_utf8(out).unwrap_or_default()
}

/// `r"` / `r#"` starting at `i` (not the end of an identifier): the number of `#`
/// and the offset of the opening quote.
fn raw_start(b: &[u8], i: usize) -> Option<(usize, usize)> {
    if i > 0 && (b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_') && b[i - 1] != b'b' {
        return None;
    }
    let hashes = b[i + 1..].iter().take_while(|&&c| c == b'#').count();
    (b.get(i + 1 + hashes) == Some(&b'"')).then_some((hashes, i + 1 + hashes))
}

/// The offset of the closing quote of a char literal opening at `i`, or `None` for
/// a lifetime or label (`'a`).
fn char_literal(b: &[u8], i: usize) -> Option<usize> {
    match b.get(i + 1)? {
        b'\\' => {
            let end = b[i + 2..].iter().take(12).position(|&c| c == b'\'')?;
            Some(i + 2 + end.max(1))
        }
        _ => {
            // One character, then the quote. `i + 1` follows an ASCII quote, so it is
            // a character boundary.
            let len = std::str::from_utf8(&b[i + 1..(i + 5).min(b.len())])
                .unwrap_or_else(|e| {
                    std::str::from_utf8(&b[i + 1..i + 1 + e.valid_up_to()]).unwrap_or("")
                })
                .chars()
                .next()
                .map(char::len_utf8)?;
            (b.get(i + 1 + len) == Some(&b'\'')).then_some(i + 1 + len)
        }
    }
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

/// The brace depth before each byte of `code` (blanked by [`code_only`]) and whether
/// each open brace opened a module (`mod name {`), the file root counting as one.
fn in_module_scope(code: &str) -> Vec<bool> {
    let mut scopes = vec![true];
    let mut at = Vec::with_capacity(code.len());
    for (i, c) in code.bytes().enumerate() {
        at.push(scopes.last().copied().unwrap_or(true));
        match c {
            b'{' => {
                let before = code[..i].trim_end();
                let word_start = before
                    .rfind(|c: char| !(c.is_alphanumeric() || c == '_'))
                    .map_or(0, |s| s + 1);
                let is_mod = before[..word_start].trim_end().ends_with("mod")
                    && find_word(&before[..word_start], "mod").is_some();
                scopes.push(is_mod);
            }
            b'}' if scopes.len() > 1 => {
                scopes.pop();
            }
            _ => {}
        }
    }
    at
}

/// The names items directly in a module (or the file root) of `code` define:
/// `fn`, `struct`, `enum`, `union`, `trait`, `type`, `const`, `static`, `mod`,
/// `macro_rules!`. Items inside functions and impls are not the module's names.
pub(crate) fn module_items(code: &str) -> std::collections::BTreeSet<String> {
    let scope = in_module_scope(code);
    let mut names = std::collections::BTreeSet::new();
    for kw in [
        "fn", "struct", "enum", "union", "trait", "type", "const", "static", "mod",
    ] {
        let mut from = 0;
        while let Some(i) = find_word(&code[from..], kw) {
            let at = from + i;
            from = at + kw.len();
            if !scope[at] {
                continue;
            }
            let rest = code[from..].trim_start();
            let rest = rest.strip_prefix("mut ").unwrap_or(rest).trim_start();
            if let Some(name) = ident(rest) {
                names.insert(name.to_string());
            }
        }
    }
    let mut from = 0;
    while let Some(i) = code[from..].find("macro_rules!") {
        from += i + "macro_rules!".len();
        if let Some(name) = ident(code[from..].trim_start()) {
            names.insert(name.to_string());
        }
    }
    names
}

/// How many tests the macros of `source` write at least: for each `macro_rules!`
/// whose body holds a test function, the number of its invocations (`name!`) outside
/// its own definition. A list of the compiled criterion's tests with fewer than that
/// beyond the declared ones was cut short by the code in the process that printed it.
pub(crate) fn macro_written_tests(source: &str) -> usize {
    let code = code_only(source);
    let b = code.as_bytes();
    let mut total = 0;
    let mut from = 0;
    while let Some(i) = code[from..].find("macro_rules!") {
        let start = from + i;
        from = start + "macro_rules!".len();
        let Some(name) = ident(code[from..].trim_start()) else {
            continue;
        };
        let Some(open) = code[from..].find(['{', '(', '[']).map(|o| from + o) else {
            continue;
        };
        let (o, c) = match b[open] {
            b'{' => (b'{', b'}'),
            b'(' => (b'(', b')'),
            _ => (b'[', b']'),
        };
        let Some(close) = matching(b, open, o, c) else {
            continue;
        };
        if test_sites(&code[open..=close]).is_empty() {
            continue;
        }
        let call = format!("{name}!");
        total += code
            .match_indices(&call)
            .filter(|(at, _)| {
                (*at < start || *at > close)
                    && !code[..*at].ends_with(|ch: char| ch.is_alphanumeric() || ch == '_')
            })
            .count();
    }
    total
}

/// The offsets just past each glob `use` item (`use subject::*;`) of `code` that is
/// not at the file root: there the guard's pins go in the same scope.
pub(crate) fn nested_glob_imports(code: &str) -> Vec<usize> {
    let mut depth = vec![0usize; code.len() + 1];
    let mut d = 0usize;
    for (i, c) in code.bytes().enumerate() {
        depth[i] = d;
        match c {
            b'{' => d += 1,
            b'}' => d = d.saturating_sub(1),
            _ => {}
        }
    }
    let mut ends = Vec::new();
    let mut from = 0;
    while let Some(i) = find_word(&code[from..], "use") {
        let at = from + i;
        let item = &code[at..];
        let end = item.find(';').map_or(code.len(), |e| at + e + 1);
        from = end.min(code.len());
        if depth[at] > 0 && code[at..end.min(code.len())].contains('*') {
            ends.push(end.min(code.len()));
        }
        if from >= code.len() {
            break;
        }
    }
    ends
}

/// Where a test function's body starts, for the harness's guard.
pub(crate) enum Body {
    /// Just past the body's opening `{` (and its inner attributes), the offset of its
    /// closing `}`, and the function's return type as written (`None`: `()`).
    Block {
        open: usize,
        close: usize,
        ret: Option<String>,
    },
    /// A `$body` fragment of a `macro_rules!` (start and end offsets), wrapped whole.
    Fragment(usize, usize),
}

/// A `#[test]` function as written in the source (maybe inside a macro body).
pub(crate) struct TestSite {
    /// Its name token: an identifier or a macro variable (`$name`).
    pub(crate) name: String,
    /// It carries `#[should_panic]`.
    pub(crate) should_panic: bool,
    /// It is an `async fn` (a runtime's test attribute).
    pub(crate) is_async: bool,
    pub(crate) body: Body,
}

/// Each function of `code` (blanked by [`code_only`]) under an attribute run holding
/// a test attribute: `#[test]`, `# [ test ]`, any path ending in `test`
/// (`#[core::prelude::v1::test]`, `#[tokio::test]`).
pub(crate) fn test_sites(code: &str) -> Vec<TestSite> {
    let b = code.as_bytes();
    let mut sites = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'#' || !code[i + 1..].trim_start().starts_with('[') {
            i += 1;
            continue;
        }
        // An attribute run: `#[…]` items separated by whitespace.
        let (mut test, mut should_panic, mut j) = (false, false, i);
        while j < b.len() && b[j] == b'#' {
            let Some(open) = code[j + 1..].find('[').map(|o| j + 1 + o) else {
                break;
            };
            if !code[j + 1..open].trim().is_empty() {
                break;
            }
            let Some(close) = matching(b, open, b'[', b']') else {
                break;
            };
            let attr: String = code[open + 1..close]
                .chars()
                .filter(|c| !c.is_whitespace())
                .collect();
            test |= attr == "test" || (attr.ends_with("::test") && !attr.contains('('));
            should_panic |= attr == "should_panic" || attr.starts_with("should_panic(");
            j = close + 1;
            j += code[j..].len() - code[j..].trim_start().len();
        }
        if test && let Some(site) = site_at(code, j, should_panic) {
            sites.push(site);
        }
        i = j.max(i + 1);
    }
    sites
}

/// The function header starting at `at` (after its attributes): its name and body.
fn site_at(code: &str, at: usize, should_panic: bool) -> Option<TestSite> {
    let mut rest = code[at..].trim_start();
    let mut is_async = false;
    loop {
        let before = rest;
        for kw in ["pub", "async", "unsafe", "const", "extern"] {
            if let Some(r) = rest
                .strip_prefix(kw)
                .filter(|r| !r.starts_with(|c: char| c.is_alphanumeric() || c == '_'))
            {
                is_async |= kw == "async";
                rest = r.trim_start();
            }
        }
        // `pub(crate)`, and `extern "C"` (its string is blanked to `"   "`).
        if let Some(r) = rest.strip_prefix('(') {
            rest = r.split_once(')').map_or(r, |(_, r)| r).trim_start();
        } else if let Some(r) = rest.strip_prefix('"') {
            rest = r.split_once('"').map_or(r, |(_, r)| r).trim_start();
        }
        if rest == before {
            break;
        }
    }
    let rest = rest.strip_prefix("fn")?.trim_start();
    let dollar = rest.starts_with('$');
    let name_len = ident(rest.trim_start_matches('$'))?.len() + usize::from(dollar);
    let name = rest[..name_len].to_string();
    let b = code.as_bytes();
    let after_name = code.len() - rest.len() + name_len;
    let open = after_name + code[after_name..].find('(')?;
    let close = matching(b, open, b'(', b')')?;
    // The body: the first `{` (or `$fragment`) after the parameters; `;` ends a
    // declaration without one.
    let tail = &code[close + 1..];
    let k = tail.find(['{', '$', ';'])?;
    let at = close + 1 + k;
    let body = match b[at] {
        b'{' => Body::Block {
            open: after_inner_attributes(code, at + 1),
            close: matching(b, at, b'{', b'}')?,
            ret: return_type(&code[close + 1..at]),
        },
        b'$' => {
            let len = 1 + ident(&code[at + 1..])?.len();
            Body::Fragment(at, at + len)
        }
        _ => return None,
    };
    Some(TestSite {
        name,
        should_panic,
        is_async,
        body,
    })
}

/// The return type in a signature's tail (what follows the parameters up to the
/// body): the text after `->`, up to a `where` clause.
fn return_type(tail: &str) -> Option<String> {
    let (_, ret) = tail.split_once("->")?;
    let ret = match ret.find("where") {
        Some(w)
            if ret[..w].ends_with(char::is_whitespace)
                && ret[w + 5..].starts_with(char::is_whitespace) =>
        {
            &ret[..w]
        }
        _ => ret,
    };
    let ret = ret.trim();
    (!ret.is_empty()).then(|| ret.to_string())
}

/// Past the inner attributes (`#![allow(…)]`) that open a body at `at`: the guard
/// goes after them, where a statement may stand.
fn after_inner_attributes(code: &str, mut at: usize) -> usize {
    loop {
        let rest = &code[at..];
        let skipped = rest.len() - rest.trim_start().len();
        let Some(open) = rest.trim_start().strip_prefix("#!").map(str::trim_start) else {
            return at;
        };
        if !open.starts_with('[') {
            return at;
        }
        let bracket = code.len() - open.len();
        match matching(code.as_bytes(), bracket, b'[', b']') {
            Some(close) if close > at + skipped => at = close + 1,
            _ => return at,
        }
    }
}

/// The offset of the bracket closing the one at `open`.
fn matching(b: &[u8], open: usize, o: u8, c: u8) -> Option<usize> {
    let mut depth = 0usize;
    for (k, &ch) in b.iter().enumerate().skip(open) {
        if ch == o {
            depth += 1;
        } else if ch == c {
            depth -= 1;
            if depth == 0 {
                return Some(k);
            }
        }
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

/// The identifier `s` starts with, a raw one (`r#match`) with its `r#`, as libtest
/// names a test so declared.
fn ident(s: &str) -> Option<&str> {
    let raw = if s.starts_with("r#") { 2 } else { 0 };
    let end = s[raw..]
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .map_or(s.len(), |e| e + raw);
    (end > raw).then(|| &s[..end])
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
    fn test_sites_are_found_in_plain_code_and_macro_bodies() {
        let src = "#[test]\nfn a() { #![allow(unused)] x(); }\n# [ test ] #[should_panic(expected = \"}\")]\npub fn b() {}\n\
                   // #[test] fn c() {}\nmacro_rules! m { ($n:ident, $body:block) => { #[test] fn $n() $body }; }\n\
                   #[::core::prelude::v1::test] async fn d() -> Result<(), ()> { Ok(()) }\n";
        let code = super::code_only(src);
        let sites = super::test_sites(&code);
        let got: Vec<(&str, bool)> = sites
            .iter()
            .map(|s| (s.name.as_str(), s.should_panic))
            .collect();
        assert_eq!(
            got,
            [("a", false), ("b", true), ("$n", false), ("d", false)]
        );
        match &sites[0].body {
            super::Body::Block { open, close, ret } => {
                assert_eq!(&src[..*open], "#[test]\nfn a() { #![allow(unused)]");
                assert_eq!(&src[*close..=*close], "}");
                assert_eq!(ret, &None);
            }
            super::Body::Fragment(..) => panic!("a block"),
        }
        match &sites[2].body {
            super::Body::Fragment(s, e) => assert_eq!(&src[*s..*e], "$body"),
            super::Body::Block { .. } => panic!("a fragment"),
        }
        match &sites[3].body {
            super::Body::Block { ret, .. } => assert_eq!(ret.as_deref(), Some("Result<(), ()>")),
            super::Body::Fragment(..) => panic!("a block"),
        }
        assert!(sites[3].is_async && !sites[0].is_async);
    }

    #[test]
    fn code_only_keeps_offsets_and_blanks_char_and_raw_string_literals() {
        let src = "let a = '\"'; let b = r#\"{ \"x\" }\"#; fn f<'a>(x: &'a str) {} // é\n";
        let code = super::code_only(src);
        assert_eq!(code.len(), src.len());
        assert_eq!(code.matches('\"').count(), 2, "{code}");
        assert_eq!(code.matches('{').count(), 1, "{code}");
        assert!(code.contains("fn f<'a>(x: &'a str) {}"), "{code}");
    }

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

    #[test]
    fn macro_written_tests_count_invocations_of_test_writing_macros() {
        let src = "macro_rules! case { ($n:ident) => { #[test] fn $n() {} } }\n\
                   macro_rules! helper { () => { 1 } }\n\
                   case!(a);\ncase!(b);\n// case!(c);\nfn f() -> i32 { helper!() }\n\
                   fn g() { my_case!(x); }\n";
        assert_eq!(super::macro_written_tests(src), 2);
        assert_eq!(super::macro_written_tests("#[test] fn t() {}\n"), 0);
    }
}

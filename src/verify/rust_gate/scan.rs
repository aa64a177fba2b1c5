//! Lists a criterion's tests from its source, before anything of the subject runs, so
//! the list cannot be forged by the subject.
//!
//! A light scan, not a parser: `#[test]` (possibly followed by more attributes) then
//! `fn name`, with `mod name {` blocks giving the path. Braces inside string literals or
//! comments can confuse the module tracking; a test it misnames does not run under its
//! wrong name, which fails the gate rather than passing it.

/// The full test names (`tests::adds`) of the criterion source, in source order.
pub(crate) fn test_names(source: &str) -> Vec<String> {
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

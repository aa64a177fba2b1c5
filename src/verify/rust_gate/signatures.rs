//! Pinned signatures, checked by code the harness writes: one
//! `const _: <type> = ::<crate>::<path>;` line per entry, in a module that sees the
//! subject's items through a glob and the prelude and primitives pinned over it (a
//! subject cannot redefine `Option` or `i32` for the check). The line compiles only
//! when the item coerces to exactly that function-pointer type, so a return type that
//! lies about its `PartialEq`, an extra parameter or a different integer type fails
//! the gate in `criterion-compile` with the entry named.

use std::collections::BTreeSet;

use super::guard;

/// The harness-written check: its text, and the 1-based line of each entry in it
/// after `first_line - 1` lines that precede it in its file.
pub(crate) struct Check {
    pub(crate) text: String,
    pub(crate) lines: Vec<(usize, String)>,
}

/// The check of `entries` against crate `krate`, as a module named `module`, for a
/// file whose first line of this text is `first_line`.
pub(crate) fn check(krate: &str, entries: &[String], module: &str, first_line: usize) -> Check {
    let mut text = format!(
        "#[doc(hidden)]\n#[allow(dead_code, unused_imports, non_upper_case_globals)]\nmod {module} {{\n\
         #[allow(unused_imports)] use ::{krate}::*;\n{}",
        guard::pins(&BTreeSet::new(), &[])
    );
    let mut lines = Vec::with_capacity(entries.len());
    for e in entries {
        // Validated when the contract loaded; an entry that no longer parses is
        // refused here the same way, as a line that cannot compile.
        let line = match crate::contract::Signature::parse(e) {
            Ok(sig) => format!("const _: {} = ::{krate}::{};\n", sig.ty, sig.path),
            Err(why) => format!("::std::compile_error!({:?});\n", why.to_string()),
        };
        lines.push((first_line + text.lines().count(), e.clone()));
        text.push_str(&line);
    }
    text.push_str("}\n");
    Check { text, lines }
}

/// The pinned entries a failed compile's `output` points at (`file:LINE:`); empty
/// when it names none of the check's lines.
pub(crate) fn failing<'a>(check: &'a Check, file: &str, output: &str) -> Vec<&'a str> {
    let named: Vec<&str> = check
        .lines
        .iter()
        .filter(|(line, _)| output.contains(&format!("{file}:{line}:")))
        .map(|(_, e)| e.as_str())
        .collect();
    named
}

/// The gate's sentence for `entries` the subject does not match.
pub(crate) fn mismatch(entries: &[&str]) -> String {
    format!(
        "the subject does not have the signature the contract pins: {}",
        entries
            .iter()
            .map(|e| format!("`{e}`"))
            .collect::<Vec<_>>()
            .join(", ")
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn each_entry_is_one_line_whose_number_is_known() {
        let entries = ["add: fn(i32, i32) -> i32".to_string(), "m::f: fn()".into()];
        let c = super::check("subject", &entries, "sigs", 1);
        let lines: Vec<&str> = c.text.lines().collect();
        for (n, e) in &c.lines {
            let path = e.split_once(": ").map_or("", |(p, _)| p);
            assert!(
                lines[n - 1].contains(&format!("::subject::{path};")),
                "{n}: {}",
                c.text
            );
        }
        let out = format!(
            "error[E0308]: mismatched types\n --> /g/sig.rs:{}:1",
            c.lines[1].0
        );
        assert_eq!(super::failing(&c, "/g/sig.rs", &out), ["m::f: fn()"]);
    }
}

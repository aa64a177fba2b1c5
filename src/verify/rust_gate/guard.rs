//! The guard: explicit imports the harness adds to its copy of a criterion so that no
//! import of the subject can change what the criterion's names mean. A glob import
//! (`use subject::*`) silently shadows the prelude (a subject's `pub struct Some<T>`
//! replaces std's for the criterion) and `#[macro_use] extern crate subject;` puts
//! the subject's `vec!` over std's, but an explicit import beats both in its scope, so
//! the guard pins explicitly, in every scope that has a glob import and at the crate
//! root:
//!
//! - every name of the Rust 2021 prelude (`Some`, `Ok`, `Vec`, `String`, `PartialEq`,
//!   `drop`, the derive macros…) and the primitive types (a glob can shadow `i32` too),
//! - the std assertion macros, and every std macro the criterion's source invokes
//!   (`vec!`, `format!`, `println!`…).
//!
//! Names the criterion itself imports explicitly (`use std::panic;`,
//! `use subject::Result;`) or defines as an item of a module (`struct Vec`) are left to
//! it: the operator chose them, and a second binding would collide (E0252, E0255). A
//! criterion that wants the subject's own `Result` alias names it explicitly; through a
//! glob it gets std's.

use std::collections::BTreeSet;

use super::scan;

/// The Rust 2021 prelude (`std::prelude::rust_2021`): types, traits, functions, enum
/// variants and the derive macros of the same names.
pub(crate) const PRELUDE: &[&str] = &[
    "Copy",
    "Send",
    "Sized",
    "Sync",
    "Unpin",
    "Drop",
    "Fn",
    "FnMut",
    "FnOnce",
    "drop",
    "Box",
    "ToOwned",
    "Clone",
    "PartialEq",
    "PartialOrd",
    "Eq",
    "Ord",
    "AsRef",
    "AsMut",
    "Into",
    "From",
    "Default",
    "Iterator",
    "Extend",
    "IntoIterator",
    "DoubleEndedIterator",
    "ExactSizeIterator",
    "Option",
    "Some",
    "None",
    "Result",
    "Ok",
    "Err",
    "String",
    "ToString",
    "Vec",
    "TryFrom",
    "TryInto",
    "FromIterator",
    "Debug",
    "Hash",
    // In every edition's prelude since Rust 1.80.
    "size_of",
    "size_of_val",
    "align_of",
    "align_of_val",
];

/// The crates every criterion links by name: a glob-imported `mod std` of the
/// subject's would otherwise stand in for them in `std::cmp::max(…)`.
const CRATES: &[&str] = &["std", "core"];

/// The primitive types (`std::primitive`): an item named `i32` shadows the primitive.
pub(crate) const PRIMITIVES: &[&str] = &[
    "bool", "char", "f32", "f64", "i8", "i16", "i32", "i64", "i128", "isize", "str", "u8", "u16",
    "u32", "u64", "u128", "usize",
];

/// The macros the guard pins to `std` whether the criterion invokes them or not.
pub(crate) const ALWAYS: &[&str] = &[
    "assert",
    "assert_eq",
    "assert_ne",
    "debug_assert",
    "debug_assert_eq",
    "debug_assert_ne",
    "panic",
    "unreachable",
    "matches",
];

/// Std macros at the crate root of `std`, pinned when the criterion invokes them.
pub(crate) const STD_MACROS: &[&str] = &[
    "vec",
    "format",
    "format_args",
    "print",
    "println",
    "eprint",
    "eprintln",
    "write",
    "writeln",
    "dbg",
    "todo",
    "unimplemented",
    "concat",
    "stringify",
    "line",
    "column",
    "file",
    "module_path",
    "include_str",
    "include_bytes",
    "option_env",
    "env",
    "compile_error",
    "thread_local",
];

/// The guard for a criterion: `(offset, text)` insertions, one after each glob import
/// below the crate root (its scope), and the text appended at the crate root.
pub(crate) struct Guard {
    pub(crate) inserts: Vec<(usize, String)>,
    pub(crate) root: String,
}

/// The guard of `criterion` (see the module docs).
pub(crate) fn guard(criterion: &str) -> Guard {
    let code = scan::code_only(criterion);
    let mut own = scan::explicit_imports(criterion);
    own.extend(scan::module_items(&code));
    let invoked = invoked_macros(&code);
    let macros: Vec<&str> = ALWAYS
        .iter()
        .chain(STD_MACROS.iter().filter(|m| invoked.contains(**m)))
        .copied()
        .filter(|n| !own.contains(*n))
        .collect();
    let text = pins(&own, &macros);
    let inserts = scan::nested_glob_imports(&code)
        .into_iter()
        .map(|end| (end, format!(" {}", text.replace('\n', " "))))
        .collect();
    Guard {
        inserts,
        root: format!("\n{text}"),
    }
}

/// The `use` lines pinning the prelude, the primitives and `macros`, minus `own`.
pub(crate) fn pins(own: &BTreeSet<String>, macros: &[&str]) -> String {
    let keep = |list: &[&str]| -> Vec<String> {
        list.iter()
            .filter(|n| !own.contains(**n))
            .map(|n| n.to_string())
            .collect()
    };
    let mut out = String::new();
    for krate in CRATES.iter().filter(|c| !own.contains(**c)) {
        out.push_str(&format!("#[allow(unused_imports)] use ::{krate};\n"));
    }
    for (path, names) in [
        ("::std::prelude::rust_2021", keep(PRELUDE)),
        ("::std::primitive", keep(PRIMITIVES)),
        ("::std", macros.iter().map(|m| m.to_string()).collect()),
    ] {
        if !names.is_empty() {
            out.push_str(&format!(
                "#[allow(unused_imports)] use {path}::{{{}}};\n",
                names.join(", ")
            ));
        }
    }
    out
}

/// The names `code` (blanked by [`scan::code_only`]) invokes as macros (`name!`).
fn invoked_macros(code: &str) -> BTreeSet<String> {
    let b = code.as_bytes();
    let mut names = BTreeSet::new();
    for (i, _) in code.match_indices('!') {
        if b.get(i + 1) == Some(&b'=') {
            continue;
        }
        let start = code[..i]
            .rfind(|c: char| !(c.is_alphanumeric() || c == '_'))
            .map_or(0, |s| s + 1);
        if start < i {
            names.insert(code[start..i].to_string());
        }
    }
    names
}

#[cfg(test)]
mod tests {
    use super::guard;

    #[test]
    fn pins_the_prelude_and_the_invoked_macros_but_not_the_criterions_own() {
        let g = guard(
            "use std::panic;\nuse subject::Result;\nstruct Vec;\n\
             #[test] fn t() { let v = vec![1]; let s = format!(\"{v:?}\"); assert!(s != \"\"); }\n",
        );
        for pinned in ["Some", "Ok", "String", "i32", "vec", "format", "assert_eq"] {
            assert!(
                g.root.contains(&format!(" {pinned},")) || g.root.contains(&format!(" {pinned}}}")),
                "{pinned} in {}",
                g.root
            );
        }
        for own in ["panic", "Result", "Vec", "println"] {
            assert!(!g.root.contains(&format!(" {own},")), "{own} in {}", g.root);
            assert!(
                !g.root.contains(&format!(" {own}}}")),
                "{own} in {}",
                g.root
            );
        }
        assert!(g.inserts.is_empty());
    }

    #[test]
    fn a_glob_below_the_root_gets_the_pins_in_its_own_scope() {
        let src = "mod tests {\n    use subject::*;\n    #[test] fn t() {}\n}\n";
        let g = guard(src);
        assert_eq!(g.inserts.len(), 1);
        let (at, text) = &g.inserts[0];
        assert_eq!(&src[..*at], "mod tests {\n    use subject::*;");
        assert!(text.contains("::std::prelude::rust_2021::{"), "{text}");
    }
}

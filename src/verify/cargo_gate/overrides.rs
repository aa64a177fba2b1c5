//! The crates a criterion links belong to the operator, not to the agent's manifest.
//!
//! A criterion links the sysroot crates (`std`, `core`, `alloc`, `test`, `proc_macro`)
//! and whatever crates its source names (`use regex::…`, `extern crate serde`, a path
//! `itertools::…`). The agent's manifests decide what those names resolve to, so one
//! line could hand the criterion a fake: a `[dev-dependencies] std = { path = "fake",
//! package = "fake" }` whose `assert!` does nothing, or a `[patch.crates-io]` of the
//! crate the criterion uses as its reference. Before anything builds, the gate refuses
//! a manifest that:
//! - declares a dependency under a sysroot crate's name, or renames one to it;
//! - points a name the criteria link at a git repository or at another package;
//! - patches (`[patch.*]`) or replaces (`[replace]`) a crate the criteria link.
//!
//! The agent may still add, remove and upgrade registry dependencies, and keep path
//! dependencies (a workspace's member crates, which criteria rightly link). Names are
//! compared as Cargo does, `-` and `_` alike.
//!
//! A path dependency under a linked crate's own name (a local crate called `regex`)
//! cannot be told from a member crate by one manifest: `baseline` compares it with the
//! manifests as they were when the run started.

use std::collections::BTreeSet;

use toml::{Table, Value};

/// The crates of the Rust distribution a test binary links.
pub(crate) const SYSROOT: &[&str] = &["std", "core", "alloc", "test", "proc_macro"];

/// The dependency tables of a manifest: `[dependencies]` and its kin, per target too.
const DEP_TABLES: &[&str] = &["dependencies", "dev-dependencies", "build-dependencies"];

pub(crate) fn norm(name: &str) -> String {
    name.replace('-', "_")
}

/// Every crate name the criteria's sources link: the sysroot and each identifier that
/// roots a path (`name::`), follows `extern crate`, or is `use`d.
pub(crate) fn linked(sources: &[&str]) -> BTreeSet<String> {
    let mut names: BTreeSet<String> = SYSROOT.iter().map(|s| (*s).to_string()).collect();
    for src in sources {
        let words = tokens(src);
        for (i, w) in words.iter().enumerate() {
            let next = words.get(i + 1).map(String::as_str);
            let prev = i
                .checked_sub(1)
                .and_then(|p| words.get(p))
                .map(String::as_str);
            let rooted = next == Some("::") && prev != Some("::");
            let declared = matches!(prev, Some("crate") | Some("use"));
            if (rooted || declared) && is_ident(w) && !is_keyword(w) {
                names.insert(norm(w));
            }
        }
    }
    names
}

/// Identifiers and `::` of `src`, with comments and string literals left out.
fn tokens(src: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut chars = src.chars().peekable();
    let mut word = String::new();
    while let Some(c) = chars.next() {
        if c.is_alphanumeric() || c == '_' {
            word.push(c);
            continue;
        }
        if !word.is_empty() {
            out.push(std::mem::take(&mut word));
        }
        match c {
            ':' if chars.peek() == Some(&':') => {
                chars.next();
                out.push("::".into());
            }
            '/' if chars.peek() == Some(&'/') => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        break;
                    }
                }
            }
            '"' => {
                let mut escaped = false;
                for c in chars.by_ref() {
                    match (escaped, c) {
                        (false, '\\') => escaped = true,
                        (false, '"') => break,
                        _ => escaped = false,
                    }
                }
            }
            _ => {}
        }
    }
    if !word.is_empty() {
        out.push(word);
    }
    out
}

fn is_ident(w: &str) -> bool {
    w.chars()
        .next()
        .is_some_and(|c| c.is_alphabetic() || c == '_')
}

/// Path roots that are not crates.
fn is_keyword(w: &str) -> bool {
    matches!(w, "crate" | "self" | "super" | "Self")
}

/// Every dependency table of a manifest: the three kinds, plain and per target.
pub(crate) fn dep_tables(t: &Table) -> Vec<&Table> {
    let mut tables: Vec<&Table> = DEP_TABLES
        .iter()
        .filter_map(|k| t.get(*k).and_then(Value::as_table))
        .collect();
    if let Some(targets) = t.get("target").and_then(Value::as_table) {
        for cfg in targets.values().filter_map(Value::as_table) {
            tables.extend(
                DEP_TABLES
                    .iter()
                    .filter_map(|k| cfg.get(*k).and_then(Value::as_table)),
            );
        }
    }
    tables
}

/// Why `manifest` may not be built with the criteria, if it re-points a crate they
/// link (see the module docs). `what` names the manifest in the message.
pub(crate) fn refused(manifest: &str, linked: &BTreeSet<String>, what: &str) -> Option<String> {
    let t: Table = manifest.parse().ok()?;
    let mut tables = dep_tables(&t);
    if let Some(ws) = t.get("workspace").and_then(Value::as_table) {
        tables.extend(ws.get("dependencies").and_then(Value::as_table));
    }
    for deps in tables {
        for (key, spec) in deps {
            if let Some(why) = repointed(key, spec, linked) {
                return Some(format!("{what}: {why}"));
            }
        }
    }
    if let Some(patches) = t.get("patch").and_then(Value::as_table) {
        for (source, entries) in patches {
            let hit = entries
                .as_table()
                .into_iter()
                .flat_map(|e| e.keys())
                .find(|k| linked.contains(&norm(k)));
            if let Some(k) = hit {
                return Some(format!(
                    "{what}: [patch.{source}] overrides `{k}`, a crate the criteria link; the gate builds them against the registry's"
                ));
            }
        }
    }
    if let Some(replace) = t.get("replace").and_then(Value::as_table) {
        let hit = replace
            .keys()
            .find(|k| linked.contains(&norm(k.split(':').next().unwrap_or(k))));
        if let Some(k) = hit {
            return Some(format!(
                "{what}: [replace] overrides `{k}`, a crate the criteria link"
            ));
        }
    }
    None
}

/// Why the dependency `key = spec` re-points a linked crate, if it does.
fn repointed(key: &str, spec: &Value, linked: &BTreeSet<String>) -> Option<String> {
    let package = spec
        .as_table()
        .and_then(|s| s.get("package"))
        .and_then(Value::as_str);
    let name = norm(key);
    if SYSROOT.contains(&name.as_str()) {
        return Some(format!(
            "a dependency named `{key}` would replace the sysroot crate the criteria link"
        ));
    }
    if let Some(p) = package
        && SYSROOT.contains(&norm(p).as_str())
    {
        return Some(format!(
            "the dependency `{key}` is renamed to the sysroot crate `{p}`"
        ));
    }
    if !linked.contains(&name) {
        return None;
    }
    let git = spec.as_table().is_some_and(|s| s.contains_key("git"));
    let renamed = package.is_some_and(|p| norm(p) != name);
    (git || renamed).then(|| {
        format!(
            "the criteria link `{key}`, and the manifest points it at {}; it must be the crate of that name",
            if renamed {
                format!("the package `{}`", package.unwrap_or_default())
            } else {
                "a git source".to_string()
            }
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(src: &str) -> BTreeSet<String> {
        linked(&[src])
    }

    #[test]
    fn the_criteria_link_the_sysroot_and_the_crates_they_name() {
        let n = names(
            "use regex::Regex;\nextern crate serde_json as j;\n// use fake::x;\n\
             #[test] fn t() { let s = \"itoa::x\"; assert!(memchr::memchr(b'a', b\"a\").is_some()); \
             crate::helper(); self::x(); std::mem::drop(1); }",
        );
        for want in ["std", "core", "test", "regex", "serde_json", "memchr"] {
            assert!(n.contains(want), "{want}: {n:?}");
        }
        for not in ["fake", "itoa", "crate", "self", "mem"] {
            assert!(!n.contains(not), "{not}: {n:?}");
        }
    }

    #[test]
    fn a_manifest_that_re_points_a_linked_crate_is_refused() {
        let linked = names("use regex::Regex;");
        for bad in [
            "[package]\nname = \"a\"\n[dev-dependencies]\nstd = { path = \"fake\", package = \"fake\" }\n",
            "[package]\nname = \"a\"\n[dependencies]\nmy_core = { path = \"fake\", package = \"core\" }\n",
            "[package]\nname = \"a\"\n[target.'cfg(unix)'.dev-dependencies]\nproc-macro = { path = \"x\" }\n",
            "[package]\nname = \"a\"\n[dev-dependencies]\nregex = { git = \"https://example.invalid/r\" }\n",
            "[package]\nname = \"a\"\n[dev-dependencies]\nregex = { version = \"1\", package = \"fancy-regex\" }\n",
            "[package]\nname = \"a\"\n[patch.crates-io]\nregex = { path = \"fake\" }\n",
            "[package]\nname = \"a\"\n[replace]\n\"regex:1.10.0\" = { path = \"fake\" }\n",
            "[workspace]\n[workspace.dependencies]\nregex = { git = \"https://example.invalid/r\" }\n",
        ] {
            assert!(refused(bad, &linked, "Cargo.toml").is_some(), "{bad}");
        }
    }

    #[test]
    fn the_agent_may_still_change_its_other_dependencies() {
        let linked = names("use regex::Regex; use mycrate::parse;");
        for ok in [
            "[package]\nname = \"mycrate\"\n[dependencies]\nregex = \"1\"\nitoa = { path = \"vendor/itoa\" }\n",
            "[package]\nname = \"mycrate\"\n[dependencies]\nregex = { version = \"1.11\", features = [\"unicode\"] }\n[patch.crates-io]\nitoa = { path = \"vendor/itoa\" }\n",
        ] {
            assert_eq!(refused(ok, &linked, "Cargo.toml"), None, "{ok}");
        }
    }
}

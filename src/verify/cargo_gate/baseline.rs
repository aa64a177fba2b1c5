//! The crates a criterion links resolve as they did before the agent worked.
//!
//! `overrides` refuses what re-points a linked crate by itself (a git source, another
//! package, a `[patch]`). One route is left that no single manifest shows: a *path*
//! dependency under a linked crate's own name (`regex = { path = "my_regex" }`, a local
//! crate called `regex` whose functions agree with anything). A workspace's member
//! crates are linked by path too, so the manifest alone cannot tell a fake from a
//! member. The run's start can: the manifests as they were then (kept in the contract,
//! [`Verification::CargoTest::baseline_manifests`](crate::contract::Verification)) say
//! where each linked name came from, and the gate refuses a linked name that now comes
//! from a path it did not come from then. Versions may change (the agent may upgrade a
//! registry crate); the kind of source and the path may not.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};

use toml::{Table, Value};

use super::overrides::{SYSROOT, dep_tables, norm};
use crate::contract::OperatorFile;

/// Where a dependency name comes from.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Source {
    /// A registry (any version).
    Registry,
    /// A local path, normalised relative to the workspace root.
    Path(PathBuf),
    /// A git repository (refused for linked crates by `overrides`).
    Git,
}

/// A crate's manifest and its workspace root's, as text with their workspace-relative
/// paths.
pub(crate) struct Manifests<'a> {
    /// The crate's `Cargo.toml`, relative to the workspace root.
    pub crate_rel: &'a Path,
    /// Its text.
    pub crate_text: &'a str,
    /// The workspace root's `Cargo.toml` (relative) and text, when it is another file.
    pub root: Option<(PathBuf, &'a str)>,
}

/// The baseline manifests kept at the run's start, owned.
pub(crate) struct Kept<'a> {
    crate_rel: &'a Path,
    crate_text: &'a str,
    root: Option<(PathBuf, &'a str)>,
}

impl Kept<'_> {
    /// As [`Manifests`].
    pub(crate) fn view(&self) -> Manifests<'_> {
        Manifests {
            crate_rel: self.crate_rel,
            crate_text: self.crate_text,
            root: self.root.clone(),
        }
    }
}

/// The crate's manifest (empty when it did not exist at the start) and the nearest
/// kept manifest above it that declares a `[workspace]`.
pub(crate) fn from_kept<'a>(crate_rel: &'a Path, kept: &'a [OperatorFile]) -> Kept<'a> {
    let crate_text = kept
        .iter()
        .find(|f| f.path == crate_rel)
        .map_or("", |f| f.source.as_str());
    let root = kept
        .iter()
        .filter(|f| f.path != crate_rel)
        .find(|f| {
            f.source
                .parse::<Table>()
                .is_ok_and(|t| t.contains_key("workspace"))
        })
        .map(|f| (f.path.clone(), f.source.as_str()));
    Kept {
        crate_rel,
        crate_text,
        root,
    }
}

/// `base` joined with `rel` without touching the disk (`..` pops).
fn lexical(base: &Path, rel: &str) -> PathBuf {
    let mut out = PathBuf::new();
    for c in base.join(rel).components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// The source a dependency spec names; `dir` is the manifest's directory
/// (workspace-relative) for a `path`.
fn source_of(spec: &Value, dir: &Path) -> Source {
    let Some(t) = spec.as_table() else {
        return Source::Registry;
    };
    if let Some(p) = t.get("path").and_then(Value::as_str) {
        Source::Path(lexical(dir, p))
    } else if t.contains_key("git") {
        Source::Git
    } else {
        Source::Registry
    }
}

/// Where each name of `linked` comes from in `m` (names it does not declare are
/// absent). A `name.workspace = true` entry takes the root's `[workspace.dependencies]`.
fn sources(m: &Manifests<'_>, linked: &BTreeSet<String>) -> BTreeMap<String, BTreeSet<Source>> {
    let mut out: BTreeMap<String, BTreeSet<Source>> = BTreeMap::new();
    let Ok(crate_t) = m.crate_text.parse::<Table>() else {
        return out;
    };
    let crate_dir = m.crate_rel.parent().unwrap_or(Path::new(""));
    // The workspace root is another manifest, or the crate's own (a root package).
    let root: Option<(PathBuf, Table)> = match &m.root {
        Some((p, text)) => p
            .parent()
            .zip(text.parse::<Table>().ok())
            .map(|(d, t)| (d.to_path_buf(), t)),
        None => Some((crate_dir.to_path_buf(), crate_t.clone())),
    };
    let inherited = root.as_ref().and_then(|(dir, t)| {
        let deps = t.get("workspace")?.get("dependencies")?.as_table()?;
        Some((dir, deps))
    });
    for deps in dep_tables(&crate_t) {
        for (key, spec) in deps {
            let name = norm(key);
            if !linked.contains(&name) {
                continue;
            }
            let from_root = spec
                .get("workspace")
                .and_then(Value::as_bool)
                .unwrap_or(false);
            let src = match (from_root, inherited) {
                (true, Some((dir, ws))) => ws
                    .iter()
                    .find(|(k, _)| norm(k) == name)
                    .map_or(Source::Registry, |(_, s)| source_of(s, dir)),
                _ => source_of(spec, crate_dir),
            };
            out.entry(name).or_default().insert(src);
        }
    }
    out
}

/// Why the agent's manifests may not be built with the criteria: a name they link
/// now comes from a path it did not come from in the baseline.
pub(crate) fn moved(
    linked: &BTreeSet<String>,
    baseline: &Manifests<'_>,
    now: &Manifests<'_>,
) -> Option<String> {
    let linked: BTreeSet<String> = linked
        .iter()
        .filter(|n| !SYSROOT.contains(&n.as_str()))
        .cloned()
        .collect();
    let before = sources(baseline, &linked);
    let after = sources(now, &linked);
    for (name, srcs) in &after {
        for src in srcs {
            let Source::Path(p) = src else { continue };
            if before.get(name).is_some_and(|b| b.contains(src)) {
                continue;
            }
            let was = match before.get(name).and_then(|b| b.iter().next()) {
                Some(Source::Registry) => "the registry's crate".to_string(),
                Some(Source::Path(q)) => format!("the local crate at {}", q.display()),
                Some(Source::Git) => "a git source".to_string(),
                None => "not a dependency at all".to_string(),
            };
            return Some(format!(
                "the criteria link `{name}`, which the manifest now takes from the path {}; \
                 when the run started it was {was}",
                p.display()
            ));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn linked() -> BTreeSet<String> {
        ["std", "regex", "calc"]
            .iter()
            .map(|s| s.to_string())
            .collect()
    }

    fn m<'a>(text: &'a str, root: Option<&'a str>) -> Manifests<'a> {
        Manifests {
            crate_rel: Path::new("app/Cargo.toml"),
            crate_text: text,
            root: root.map(|r| (PathBuf::from("Cargo.toml"), r)),
        }
    }

    const BASE: &str =
        "[package]\nname = \"app\"\n[dependencies]\nregex = \"1\"\ncalc = { path = \"../calc\" }\n";

    #[test]
    fn a_linked_registry_crate_moved_to_a_path_is_named() {
        let now = "[package]\nname = \"app\"\n[dev-dependencies]\nregex = { path = \"fake\" }\ncalc = { path = \"../calc\" }\n";
        let why = moved(&linked(), &m(BASE, None), &m(now, None)).unwrap();
        assert!(why.contains("`regex`") && why.contains("app/fake"), "{why}");
        assert!(why.contains("registry"), "{why}");
    }

    #[test]
    fn the_member_crate_at_its_old_path_and_upgrades_stay_allowed() {
        let now = "[package]\nname = \"app\"\n[dependencies]\nregex = \"1.11\"\ncalc = { path = \"../calc/\" }\nserde = { path = \"../serde\" }\n";
        assert_eq!(moved(&linked(), &m(BASE, None), &m(now, None)), None);
    }

    #[test]
    fn a_member_moved_elsewhere_or_a_new_local_crate_under_a_linked_name_is_refused() {
        let now = "[package]\nname = \"app\"\n[dependencies]\nregex = \"1\"\ncalc = { path = \"../calc2\" }\n";
        assert!(moved(&linked(), &m(BASE, None), &m(now, None)).is_some());
        let base = "[package]\nname = \"app\"\n";
        let now = "[package]\nname = \"app\"\n[target.'cfg(unix)'.dependencies]\nregex = { path = \"r\" }\n";
        let why = moved(&linked(), &m(base, None), &m(now, None)).unwrap();
        assert!(why.contains("not a dependency at all"), "{why}");
    }

    #[test]
    fn workspace_inherited_entries_resolve_through_the_root() {
        let krate = "[package]\nname = \"app\"\n[dependencies]\nregex.workspace = true\n";
        let root_base =
            "[workspace]\nmembers = [\"app\"]\n[workspace.dependencies]\nregex = \"1\"\n";
        let root_now = "[workspace]\nmembers = [\"app\"]\n[workspace.dependencies]\nregex = { path = \"vendor/regex\" }\n";
        let why = moved(
            &linked(),
            &m(krate, Some(root_base)),
            &m(krate, Some(root_now)),
        )
        .unwrap();
        assert!(why.contains("vendor/regex"), "{why}");
        assert_eq!(
            moved(
                &linked(),
                &m(krate, Some(root_base)),
                &m(krate, Some(root_base))
            ),
            None
        );
        // A root package inherits from its own [workspace.dependencies].
        let own_base = format!("{krate}{root_base}");
        let own_now = format!("{krate}{root_now}");
        assert!(moved(&linked(), &m(&own_base, None), &m(&own_now, None)).is_some());
    }
}

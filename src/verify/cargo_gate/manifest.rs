//! The two manifests a workspace-form gate writes.
//!
//! **The gate manifest** is the agent's `Cargo.toml` with the harness's criterion
//! targets declared explicitly (`[[test]]` with a name the agent cannot predict, the
//! harness's path, `harness = true`, `test = true`) and the agent's `[profile]`
//! tables dropped. Explicit targets are built whatever `autotests` says, and their
//! settings are the harness's, so `autotests = false` or a `[[test]] harness = false`
//! in the agent's manifest cannot drop or disarm a criterion; without the profiles,
//! `debug-assertions = false` or `overflow-checks = false` cannot weaken its
//! assertions (the gate also passes those settings with `--config`, which beats a
//! workspace root's manifest).
//!
//! **The stub manifest** builds the dependency cache: a package of the harness's own
//! with an empty library and only the agent's *registry* dependencies (normal, dev and
//! build, per target too), so no code of the agent's — its crate, path or git
//! dependencies, `[patch]`, a build script — runs while the cache is built. Anything
//! it cannot express (a `workspace = true` dependency) is left out: the gate then
//! builds that dependency itself, which is slower but never wrong.

use toml::{Table, Value};

/// The package name of the dependency stub.
pub(crate) const STUB_NAME: &str = "io_harness_dep_stub";

/// Why the agent's manifest cannot be used.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ManifestError {
    /// Not TOML.
    #[error("Cargo.toml is not valid TOML: {0}")]
    Syntax(String),
    /// A virtual manifest or a table of the wrong shape.
    #[error("Cargo.toml {0}")]
    Shape(&'static str),
    /// The rewritten manifest could not be written.
    #[error("cannot write the rewritten manifest: {0}")]
    Write(String),
}

/// A workspace root's manifest without its `[profile]` tables.
pub(crate) fn without_profiles(text: &str) -> Result<String, ManifestError> {
    let mut t: Table = text
        .parse()
        .map_err(|e: toml::de::Error| ManifestError::Syntax(e.message().to_string()))?;
    t.remove("profile");
    Ok(t.to_string())
}

/// The agent's manifest with the criterion targets `(name, absolute path)` declared
/// and its profiles removed.
pub(crate) fn gate_manifest(
    text: &str,
    tests: &[(String, String)],
) -> Result<String, ManifestError> {
    let mut t: Table = text
        .parse()
        .map_err(|e: toml::de::Error| ManifestError::Syntax(e.message().to_string()))?;
    if !t.get("package").is_some_and(Value::is_table) {
        return Err(ManifestError::Shape(
            "has no [package]: the gate needs the crate's own manifest",
        ));
    }
    t.remove("profile");
    let targets = t.entry("test").or_insert_with(|| Value::Array(Vec::new()));
    let Value::Array(targets) = targets else {
        return Err(ManifestError::Shape(
            "has a `test` key that is not [[test]] tables",
        ));
    };
    for (name, path) in tests {
        let mut target = Table::new();
        target.insert("name".into(), Value::String(name.clone()));
        target.insert("path".into(), Value::String(path.clone()));
        target.insert("harness".into(), Value::Boolean(true));
        target.insert("test".into(), Value::Boolean(true));
        target.insert("doctest".into(), Value::Boolean(false));
        targets.push(Value::Table(target));
    }
    Ok(t.to_string())
}

/// The name the crate's library is linked under (`[lib] name`, else the package name
/// with `-` as `_`), for the harness's signature check; `None` when the manifest does
/// not say.
pub(crate) fn lib_crate_name(text: &str) -> Option<String> {
    let t: Table = text.parse().ok()?;
    let lib = t
        .get("lib")
        .and_then(|l| l.get("name"))
        .and_then(Value::as_str);
    let package = t
        .get("package")
        .and_then(|p| p.get("name"))
        .and_then(Value::as_str);
    lib.or(package).map(|n| n.replace('-', "_"))
}

/// The stub manifest for the dependency cache, or `None` when the crate has no
/// registry dependency (nothing to cache) or the manifest cannot be read.
/// `workspace_root` is the text of the manifest holding `[workspace]` when the crate
/// is a member: its `[workspace.dependencies]` resolve `dep.workspace = true`.
pub(crate) fn stub_manifest(text: &str, workspace_root: Option<&str>) -> Option<String> {
    let t: Table = text.parse().ok()?;
    let root: Option<Table> = workspace_root.and_then(|r| r.parse().ok());
    let inherited = root
        .as_ref()
        .or(Some(&t))
        .and_then(|r| r.get("workspace"))
        .and_then(|w| w.get("dependencies"))
        .and_then(Value::as_table)
        .cloned()
        .unwrap_or_default();
    let registry_only = |deps: &Table| registry_only(deps, &inherited);
    let pkg = t.get("package")?.as_table()?;
    let edition = pkg
        .get("edition")
        .and_then(Value::as_str)
        .unwrap_or("2021")
        .to_string();
    let mut out = Table::new();
    let mut package = Table::new();
    package.insert("name".into(), Value::String(STUB_NAME.into()));
    package.insert("version".into(), Value::String("0.0.0".into()));
    package.insert("edition".into(), Value::String(edition));
    package.insert("publish".into(), Value::Boolean(false));
    if let Some(r) = pkg.get("resolver").and_then(Value::as_str) {
        package.insert("resolver".into(), Value::String(r.into()));
    }
    let mut any = false;
    let mut build_deps = false;
    for key in ["dependencies", "dev-dependencies", "build-dependencies"] {
        if let Some(deps) = t.get(key).and_then(Value::as_table).map(&registry_only)
            && !deps.is_empty()
        {
            any = true;
            build_deps |= key == "build-dependencies";
            out.insert(key.into(), Value::Table(deps));
        }
    }
    if let Some(targets) = t.get("target").and_then(Value::as_table) {
        let mut kept = Table::new();
        for (cfg, tables) in targets {
            let Some(tables) = tables.as_table() else {
                continue;
            };
            let mut per = Table::new();
            for key in ["dependencies", "dev-dependencies", "build-dependencies"] {
                if let Some(deps) = tables
                    .get(key)
                    .and_then(Value::as_table)
                    .map(&registry_only)
                    && !deps.is_empty()
                {
                    any = true;
                    build_deps |= key == "build-dependencies";
                    per.insert(key.into(), Value::Table(deps));
                }
            }
            if !per.is_empty() {
                kept.insert(cfg.clone(), Value::Table(per));
            }
        }
        if !kept.is_empty() {
            out.insert("target".into(), Value::Table(kept));
        }
    }
    if !any {
        return None;
    }
    if build_deps {
        package.insert("build".into(), Value::String("build.rs".into()));
    }
    out.insert("package".into(), Value::Table(package));
    let mut lib = Table::new();
    lib.insert("path".into(), Value::String("lib.rs".into()));
    out.insert("lib".into(), Value::Table(lib));
    // A workspace of its own: the stub never joins one above it.
    out.insert("workspace".into(), Value::Table(Table::new()));
    Some(out.to_string())
}

/// The dependencies that come from the default registry, made non-optional; a
/// `workspace = true` entry takes its spec from `inherited` (the workspace's
/// dependencies), with the member's own features added.
fn registry_only(deps: &Table, inherited: &Table) -> Table {
    let mut out = Table::new();
    for (name, spec) in deps {
        let resolved;
        let spec = match spec {
            Value::Table(d) if d.get("workspace").and_then(Value::as_bool) == Some(true) => {
                let mut base = match inherited.get(name) {
                    Some(Value::String(v)) => {
                        let mut t = Table::new();
                        t.insert("version".into(), Value::String(v.clone()));
                        t
                    }
                    Some(Value::Table(t)) => t.clone(),
                    _ => continue,
                };
                if let Some(Value::Array(extra)) = d.get("features") {
                    let mut features = base
                        .get("features")
                        .and_then(Value::as_array)
                        .cloned()
                        .unwrap_or_default();
                    features.extend(extra.iter().cloned());
                    base.insert("features".into(), Value::Array(features));
                }
                resolved = Value::Table(base);
                &resolved
            }
            other => other,
        };
        match spec {
            Value::String(_) => {
                out.insert(name.clone(), spec.clone());
            }
            Value::Table(d) => {
                let foreign = [
                    "path",
                    "git",
                    "workspace",
                    "registry",
                    "registry-index",
                    "base",
                ]
                .iter()
                .any(|k| d.contains_key(*k));
                if foreign || !d.contains_key("version") {
                    continue;
                }
                let mut d = d.clone();
                d.remove("optional");
                out.insert(name.clone(), Value::Table(d));
            }
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const AGENT: &str = r#"
[package]
name = "parse"
version = "0.1.0"
edition = "2021"
autotests = false
build = "build.rs"

[dependencies]
itoa = "1"
memchr = { version = "2", optional = true, default-features = false }
local = { path = "../local" }
remote = { git = "https://example.com/x" }
inherited = { workspace = true }

[dev-dependencies]
fastrand = "2"

[target.'cfg(unix)'.dependencies]
cfg-if = "1"

[[test]]
name = "mine"
harness = false

[profile.test]
debug-assertions = false

[patch.crates-io]
itoa = { path = "evil" }
"#;

    #[test]
    fn stub_resolves_workspace_dependencies_from_the_root() {
        let member = "[package]\nname = \"m\"\n[dependencies]\n\
                      itoa = { workspace = true, features = [\"x\"] }\n\
                      local = { workspace = true }\nmissing = { workspace = true }\n";
        let root = "[workspace]\nmembers = [\"m\"]\n[workspace.dependencies]\n\
                    itoa = \"1\"\nlocal = { path = \"local\" }\n";
        let out = stub_manifest(member, Some(root)).unwrap();
        let t: Table = out.parse().unwrap();
        let deps = t["dependencies"].as_table().unwrap();
        assert_eq!(deps.keys().collect::<Vec<_>>(), ["itoa"]);
        assert_eq!(deps["itoa"]["version"].as_str(), Some("1"));
        assert_eq!(deps["itoa"]["features"].as_array().unwrap().len(), 1);
        assert!(stub_manifest(member, None).is_none());
    }

    #[test]
    fn gate_manifest_declares_the_criteria_and_drops_profiles() {
        let out =
            gate_manifest(AGENT, &[("crit_1".into(), "/g/criteria/crit_1.rs".into())]).unwrap();
        let t: Table = out.parse().unwrap();
        assert!(t.get("profile").is_none());
        let tests = t["test"].as_array().unwrap();
        assert_eq!(tests.len(), 2);
        let ours = tests[1].as_table().unwrap();
        assert_eq!(ours["name"].as_str(), Some("crit_1"));
        assert_eq!(ours["path"].as_str(), Some("/g/criteria/crit_1.rs"));
        assert_eq!(ours["harness"].as_bool(), Some(true));
        assert_eq!(ours["test"].as_bool(), Some(true));
    }

    #[test]
    fn a_workspace_root_loses_its_profiles_and_keeps_the_rest() {
        let root = "[workspace]\nmembers = [\"m\"]\n\
                    [profile.test.package.m]\ndebug-assertions = false\n";
        let t: Table = without_profiles(root).unwrap().parse().unwrap();
        assert!(t.get("profile").is_none());
        assert!(t["workspace"].get("members").is_some());
    }

    #[test]
    fn a_virtual_or_broken_manifest_is_refused() {
        assert!(matches!(
            gate_manifest("[workspace]\nmembers = []\n", &[]),
            Err(ManifestError::Shape(_))
        ));
        assert!(matches!(
            gate_manifest("[package\n", &[]),
            Err(ManifestError::Syntax(_))
        ));
        assert!(matches!(
            gate_manifest("test = 3\n[package]\nname = \"x\"\n", &[]),
            Err(ManifestError::Shape(_))
        ));
    }

    #[test]
    fn stub_keeps_registry_dependencies_only() {
        let out = stub_manifest(AGENT, None).unwrap();
        let t: Table = out.parse().unwrap();
        assert_eq!(t["package"]["name"].as_str(), Some(STUB_NAME));
        assert!(t["package"].get("build").is_none());
        let deps = t["dependencies"].as_table().unwrap();
        let names: Vec<&str> = deps.keys().map(String::as_str).collect();
        assert_eq!(names, ["itoa", "memchr"]);
        assert!(deps["memchr"].get("optional").is_none());
        assert!(t["dev-dependencies"].get("fastrand").is_some());
        assert!(
            t["target"]["cfg(unix)"]["dependencies"]
                .get("cfg-if")
                .is_some()
        );
        for gone in ["patch", "profile", "test", "features"] {
            assert!(t.get(gone).is_none(), "{gone}");
        }
        assert!(
            stub_manifest(
                "[package]\nname = \"x\"\n[dependencies]\nl = { path = \"l\" }\n",
                None
            )
            .is_none()
        );
    }
}

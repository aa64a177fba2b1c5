//! The key of a shared dependency cache entry: everything the compiled dependencies
//! depend on, so two builds with one key produce interchangeable artifacts.
//!
//! It hashes the stub manifest (which dependencies, their features and
//! `default-features`, the edition), the lock entries of the stub's resolution (name,
//! version, source and `Cargo.lock` checksum of each registry package reachable from
//! the stub's dependencies), the toolchain (`rustc -vV` with its commit hash and host
//! triple, `cargo -vV`), the arguments every gate build passes (profile settings,
//! the rustc and rustdoc paths), the environment the sandboxed build receives
//! (`RUSTFLAGS`, `CARGO_ENCODED_RUSTFLAGS`, `CARGO_BUILD_TARGET`, `CC`… — every
//! variable the contract passes, with its value) and the cargo configuration files
//! the build can read. A package without a checksum or from anything but a registry
//! makes the resolution unshareable: path and git code never enters a shared entry.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use sha2::{Digest, Sha256};
use toml::{Table, Value};

use crate::digest::hex;

/// Bumped when what an entry holds or how it is keyed changes.
const KEY_VERSION: &str = "io-harness-deps-v1";

/// One locked registry package.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct LockEntry {
    pub(crate) name: String,
    pub(crate) version: String,
    pub(crate) source: String,
    pub(crate) checksum: String,
}

/// Everything a key is made of.
pub(crate) struct KeyParts<'a> {
    pub(crate) stub: &'a str,
    pub(crate) locked: &'a BTreeSet<LockEntry>,
    pub(crate) toolchain: &'a str,
    pub(crate) common: &'a [String],
    pub(crate) env: &'a [(String, String)],
    pub(crate) configs: &'a [(PathBuf, Vec<u8>)],
}

impl KeyParts<'_> {
    /// The key: 32 hex digits of SHA-256 over every part, each length-prefixed.
    pub(crate) fn key(&self) -> String {
        let mut h = Sha256::new();
        let mut put = |b: &[u8]| {
            h.update((b.len() as u64).to_le_bytes());
            h.update(b);
        };
        put(KEY_VERSION.as_bytes());
        put(self.stub.as_bytes());
        for e in self.locked {
            for f in [&e.name, &e.version, &e.source, &e.checksum] {
                put(f.as_bytes());
            }
        }
        // The build the entry holds: `cargo test --no-run`, the test profile.
        put(b"cargo test --no-run");
        put(b"toolchain");
        put(self.toolchain.as_bytes());
        for a in self.common {
            put(a.as_bytes());
        }
        put(b"env");
        let mut env: Vec<&(String, String)> = self.env.iter().collect();
        env.sort();
        for (n, v) in env {
            put(n.as_bytes());
            put(v.as_bytes());
        }
        put(b"configs");
        for (p, text) in self.configs {
            put(p.as_os_str().as_encoded_bytes());
            put(text);
        }
        hex(&h.finalize()[..16])
    }
}

/// The registry packages the stub resolves to, from the agent's lockfile: every
/// package reachable from the stub's dependencies. `Err` says why the resolution
/// cannot be shared.
pub(crate) fn locked_entries(stub: &str, lock: &[u8]) -> Result<BTreeSet<LockEntry>, String> {
    let lock: Table = std::str::from_utf8(lock)
        .ok()
        .and_then(|t| t.parse().ok())
        .ok_or("Cargo.lock does not parse")?;
    let packages: Vec<&Table> = lock
        .get("package")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_table).collect())
        .unwrap_or_default();
    let field = |p: &Table, k: &str| p.get(k).and_then(Value::as_str).map(str::to_string);
    let mut by_name: HashMap<String, Vec<usize>> = HashMap::new();
    for (i, p) in packages.iter().enumerate() {
        if let Some(n) = field(p, "name") {
            by_name.entry(n).or_default().push(i);
        }
    }
    let find = |spec: &str| -> Result<Vec<usize>, String> {
        let mut words = spec.split_whitespace();
        let name = words.next().unwrap_or_default();
        let version = words.next();
        let hits: Vec<usize> = by_name
            .get(name)
            .into_iter()
            .flatten()
            .copied()
            .filter(|&i| version.is_none() || field(packages[i], "version").as_deref() == version)
            .collect();
        if hits.is_empty() {
            return Err(format!("Cargo.lock does not pin {spec}"));
        }
        Ok(hits)
    };
    let mut todo = Vec::new();
    for root in stub_roots(stub)? {
        todo.extend(find(&root)?);
    }
    let mut seen = BTreeSet::new();
    let mut out = BTreeSet::new();
    while let Some(i) = todo.pop() {
        if !seen.insert(i) {
            continue;
        }
        let p = packages[i];
        let name = field(p, "name").unwrap_or_default();
        let source = field(p, "source").unwrap_or_default();
        if !(source.starts_with("registry+") || source.starts_with("sparse+")) {
            return Err(format!("{name} is not a registry package"));
        }
        let Some(checksum) = field(p, "checksum") else {
            return Err(format!("{name} has no checksum in Cargo.lock"));
        };
        out.insert(LockEntry {
            name,
            version: field(p, "version").unwrap_or_default(),
            source,
            checksum,
        });
        for d in p
            .get("dependencies")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            todo.extend(find(d.as_str().unwrap_or_default())?);
        }
    }
    Ok(out)
}

/// Every package of a lockfile the stub build wrote, except the stub itself: what
/// the build really resolved to.
pub(crate) fn built_entries(lock: &[u8]) -> Option<BTreeSet<LockEntry>> {
    let lock: Table = std::str::from_utf8(lock).ok()?.parse().ok()?;
    let field = |p: &Table, k: &str| p.get(k).and_then(Value::as_str).map(str::to_string);
    let mut out = BTreeSet::new();
    for p in lock
        .get("package")?
        .as_array()?
        .iter()
        .filter_map(Value::as_table)
    {
        let name = field(p, "name")?;
        if name == super::super::manifest::STUB_NAME {
            continue;
        }
        out.insert(LockEntry {
            name,
            version: field(p, "version")?,
            source: field(p, "source")?,
            checksum: field(p, "checksum")?,
        });
    }
    Some(out)
}

/// The package names the stub depends on directly (`package = …` renames included).
fn stub_roots(stub: &str) -> Result<Vec<String>, String> {
    let t: Table = stub
        .parse()
        .map_err(|_| "the stub manifest does not parse")?;
    let mut tables: Vec<&Table> = Vec::new();
    let kinds = ["dependencies", "dev-dependencies", "build-dependencies"];
    for k in kinds {
        tables.extend(t.get(k).and_then(Value::as_table));
    }
    for per in t
        .get("target")
        .and_then(Value::as_table)
        .into_iter()
        .flatten()
    {
        for k in kinds {
            tables.extend(per.1.get(k).and_then(Value::as_table));
        }
    }
    let mut roots = Vec::new();
    for deps in tables {
        for (name, spec) in deps {
            let package = spec.get("package").and_then(Value::as_str).unwrap_or(name);
            roots.push(package.to_string());
        }
    }
    Ok(roots)
}

/// Whether the agent's manifest declares a path or git dependency (normal, dev or
/// build, per target too): those are never part of a cache.
pub(crate) fn has_local_deps(manifest: &str) -> bool {
    let Ok(t) = manifest.parse::<Table>() else {
        return false;
    };
    let kinds = ["dependencies", "dev-dependencies", "build-dependencies"];
    let mut tables: Vec<&Table> = kinds
        .iter()
        .filter_map(|k| t.get(*k).and_then(Value::as_table))
        .collect();
    for per in t
        .get("target")
        .and_then(Value::as_table)
        .into_iter()
        .flatten()
    {
        tables.extend(
            kinds
                .iter()
                .filter_map(|k| per.1.get(*k).and_then(Value::as_table)),
        );
    }
    tables
        .iter()
        .flat_map(|d| d.values())
        .any(|spec| spec.get("path").is_some() || spec.get("git").is_some())
}

/// `rustc -vV` and `cargo -vV` of the gate's toolchain (once per process); `None`
/// when either fails, which makes nothing shareable.
pub(crate) fn toolchain(rustc: &str, cargo: &str) -> Option<String> {
    type Seen = std::sync::Mutex<HashMap<(String, String), Option<String>>>;
    static SEEN: OnceLock<Seen> = OnceLock::new();
    let map = SEEN.get_or_init(Default::default);
    let k = (rustc.to_string(), cargo.to_string());
    if let Some(v) = map.lock().ok().and_then(|m| m.get(&k).cloned()) {
        return v;
    }
    let vv = |prog: &str| {
        crate::verify::command::host_tool(prog)
            .arg("-vV")
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
    };
    let v = vv(rustc).zip(vv(cargo)).map(|(r, c)| format!("{r}\n{c}"));
    if let Ok(mut m) = map.lock() {
        m.insert(k, v.clone());
    }
    v
}

/// The cargo configuration files a build under `root` can read: `.cargo/config.toml`
/// (and `.cargo/config`) of `root` and each ancestor, and of `CARGO_HOME` when the
/// build's environment names one (its `HOME` is private, so no other).
pub(crate) fn cargo_configs(root: &Path, env: &[(String, String)]) -> Vec<(PathBuf, Vec<u8>)> {
    let mut dirs: Vec<PathBuf> = root.ancestors().map(|a| a.join(".cargo")).collect();
    if let Some((_, home)) = env.iter().find(|(n, _)| n == "CARGO_HOME") {
        dirs.push(PathBuf::from(home));
    }
    let mut out = Vec::new();
    for d in dirs {
        for name in ["config.toml", "config"] {
            let p = d.join(name);
            if let Ok(text) = std::fs::read(&p) {
                out.push((p, text));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const STUB: &str = "[package]\nname = \"io_harness_dep_stub\"\nversion = \"0.0.0\"\n\n\
                        [dependencies]\nnum = { package = \"itoa\", version = \"1\" }\n";

    fn lock(checksum: &str, extra: &str) -> String {
        format!(
            "version = 4\n\n[[package]]\nname = \"itoa\"\nversion = \"1.0.15\"\n\
             source = \"registry+https://github.com/rust-lang/crates.io-index\"\n\
             checksum = \"{checksum}\"\n{extra}\n\
             [[package]]\nname = \"wsnum\"\nversion = \"0.1.0\"\ndependencies = [\"itoa\"]\n\n\
             [[package]]\nname = \"other\"\nversion = \"2.0.0\"\n\
             source = \"registry+https://github.com/rust-lang/crates.io-index\"\n\
             checksum = \"ff\"\n"
        )
    }

    fn key_of(
        stub: &str,
        locked: &BTreeSet<LockEntry>,
        tc: &str,
        common: &[&str],
        env: &[(&str, &str)],
    ) -> String {
        let common: Vec<String> = common.iter().map(|s| s.to_string()).collect();
        let env: Vec<(String, String)> = env
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect();
        KeyParts {
            stub,
            locked,
            toolchain: tc,
            common: &common,
            env: &env,
            configs: &[],
        }
        .key()
    }

    #[test]
    fn the_resolution_is_the_reachable_registry_packages_with_checksums() {
        let got = locked_entries(STUB, lock("aa", "").as_bytes()).unwrap();
        let names: Vec<&str> = got.iter().map(|e| e.name.as_str()).collect();
        // The agent's own crate and the unreached `other` are not part of it.
        assert_eq!(names, ["itoa"]);
        assert_eq!(got.first().unwrap().checksum, "aa");
        let no_sum = lock("aa", "").replace("checksum = \"aa\"\n", "");
        assert!(
            locked_entries(STUB, no_sum.as_bytes())
                .unwrap_err()
                .contains("no checksum")
        );
        let git = lock("aa", "").replacen(
            "registry+https://github.com/rust-lang/crates.io-index",
            "git+https://example.com/itoa#abc",
            1,
        );
        assert!(
            locked_entries(STUB, git.as_bytes())
                .unwrap_err()
                .contains("not a registry")
        );
        let stub2 = STUB.replace("itoa", "missing");
        assert!(
            locked_entries(&stub2, lock("aa", "").as_bytes())
                .unwrap_err()
                .contains("does not pin")
        );
        // A transitive dependency the lock lacks is no resolution either.
        let dangling = lock("aa", "dependencies = [\"gone 1.0.0\"]\n");
        assert!(locked_entries(STUB, dangling.as_bytes()).is_err());
    }

    #[test]
    fn path_and_git_dependencies_are_seen_wherever_declared() {
        let plain = "[package]\nname = \"a\"\n[dependencies]\nitoa = \"1\"\n";
        assert!(!has_local_deps(plain));
        for extra in [
            "[dev-dependencies]\nx = { path = \"x\" }\n",
            "[build-dependencies]\nx = { git = \"https://example.com/x\" }\n",
            "[target.'cfg(unix)'.dependencies]\nx = { path = \"x\" }\n",
        ] {
            assert!(has_local_deps(&format!("{plain}{extra}")), "{extra}");
        }
    }

    #[test]
    fn changing_any_part_changes_the_key() {
        let a = locked_entries(STUB, lock("aa", "").as_bytes()).unwrap();
        let b = locked_entries(STUB, lock("bb", "").as_bytes()).unwrap();
        let base = key_of(
            STUB,
            &a,
            "rustc 1.95.0 (abc)",
            &["--offline"],
            &[("PATH", "/bin")],
        );
        assert_eq!(
            base,
            key_of(
                STUB,
                &a,
                "rustc 1.95.0 (abc)",
                &["--offline"],
                &[("PATH", "/bin")]
            )
        );
        let featured = STUB.replace("version = \"1\"", "version = \"1\", features = [\"x\"]");
        for other in [
            key_of(
                STUB,
                &b,
                "rustc 1.95.0 (abc)",
                &["--offline"],
                &[("PATH", "/bin")],
            ),
            key_of(
                STUB,
                &a,
                "rustc 1.95.0 (abd)",
                &["--offline"],
                &[("PATH", "/bin")],
            ),
            key_of(
                STUB,
                &a,
                "rustc 1.95.0 (abc)",
                &["--offline", "--release"],
                &[("PATH", "/bin")],
            ),
            key_of(
                STUB,
                &a,
                "rustc 1.95.0 (abc)",
                &["--offline"],
                &[("PATH", "/bin"), ("RUSTFLAGS", "-Copt-level=3")],
            ),
            key_of(
                STUB,
                &a,
                "rustc 1.95.0 (abc)",
                &["--offline"],
                &[("PATH", "/bin"), ("CARGO_ENCODED_RUSTFLAGS", "-g")],
            ),
            key_of(
                &featured,
                &a,
                "rustc 1.95.0 (abc)",
                &["--offline"],
                &[("PATH", "/bin")],
            ),
        ] {
            assert_ne!(base, other);
        }
        // What a stub build wrote: the stub and the registry packages. A path package
        // in it makes it unshareable.
        assert_eq!(built_entries(lock("aa", "").as_bytes()), None);
        let stub_lock = lock("aa", "")
            .replace("name = \"wsnum\"", "name = \"io_harness_dep_stub\"")
            .replace(
                "[[package]]\nname = \"other\"",
                "[[ignored]]\nname = \"other\"",
            );
        assert_eq!(built_entries(stub_lock.as_bytes()), Some(a));
    }
}

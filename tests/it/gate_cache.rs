//! The dependency cache shared across runs (issue 14, class 7), through the binary:
//! each run is its own `io-harness run` process with its own store, all sharing one
//! `XDG_CACHE_HOME` (a temp dir of the test's), in the real sandbox with real cargo
//! building `itoa` offline from the local registry.
//!
//! Observed from the record: the dependency stub's build is an `exec` event
//! (`…/stub/Cargo.toml`), and the gate's summary (`dependencies: …`) is in the
//! observation a failing second criterion (`file_contains` of a file that never
//! exists) puts in the record.

use crate::gates_workspace::copy_dir;
use std::path::{Path, PathBuf};
use std::process::Command;

use io_harness::Store;

/// The crate, the criterion and the lockfile `gates_workspace` uses.
fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/gates/workspace")
}

/// A test's world: one cache directory shared by its runs.
struct World {
    dir: tempfile::TempDir,
}

/// What one run left on record.
struct Seen {
    code: Option<i32>,
    stub_builds: usize,
    observation: String,
}

impl World {
    fn new() -> Self {
        Self {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn cache(&self) -> PathBuf {
        self.dir.path().join("cache/io-harness/deps")
    }

    /// A task `name` judging the fixture crate (its manifest replaced by `manifest`
    /// when given), with `extra` lines in `[verify]`.
    fn task(&self, name: &str, manifest: Option<&str>, extra: &str) -> PathBuf {
        let base = self.dir.path().join(name);
        copy_dir(&fixtures().join("base"), &base.join("ws"));
        if let Some(m) = manifest {
            std::fs::write(base.join("ws/Cargo.toml"), m).unwrap();
        }
        std::fs::create_dir_all(base.join("criteria")).unwrap();
        std::fs::copy(
            fixtures().join("criteria/num_test.rs"),
            base.join("criteria/num_test.rs"),
        )
        .unwrap();
        std::fs::write(base.join("script.jsonl"), "{\"text\": \"done\"}\n").unwrap();
        let task = base.join("task.toml");
        std::fs::write(
            &task,
            format!(
                "goal = \"render numbers\"\nroot = \"ws\"\nworkspace = \"copy\"\n\n\
                 [verify]\ncargo_test = {{ criteria = [\"criteria/num_test.rs\"] }}\n\
                 file_contains = {{ file = \"never.txt\", needle = \"x\" }}\n\
                 max_attempts = 1\n{extra}\n\
                 [provider]\nkind = \"scripted\"\nscript = \"script.jsonl\"\n"
            ),
        )
        .unwrap();
        task
    }

    fn command(&self, task: &Path, store: &Path) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_io-harness"));
        c.arg("run")
            .arg(task)
            .env_remove("IO_HARNESS_FAILPOINT")
            .env("XDG_CACHE_HOME", self.dir.path().join("cache"))
            .env("XDG_DATA_HOME", self.dir.path().join("data"))
            .env("IO_HARNESS_STORE", store);
        c
    }

    fn store_path(&self) -> PathBuf {
        let n = std::fs::read_dir(self.dir.path()).unwrap().count();
        self.dir.path().join(format!("store-{n}.db"))
    }

    /// Runs `task` in a process of its own, with a store of its own.
    fn run(&self, task: &Path) -> Seen {
        let store = self.store_path();
        let out = self.command(task, &store).output().unwrap();
        seen(
            &store,
            out.status.code(),
            &String::from_utf8_lossy(&out.stderr),
        )
    }

    /// The shared entries now in the store.
    fn entries(&self) -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = std::fs::read_dir(self.cache())
            .map(|d| {
                d.flatten()
                    .map(|e| e.path())
                    .filter(|p| p.is_dir())
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v
    }
}

fn seen(store: &Path, code: Option<i32>, stderr: &str) -> Seen {
    let store = Store::open(store).unwrap_or_else(|e| panic!("{e}: {stderr}"));
    let run_id = 1;
    let stub_builds = store
        .sandbox_events(run_id)
        .unwrap()
        .iter()
        .filter(|e| e.kind == "exec")
        .filter(|e| {
            e.detail
                .as_deref()
                .is_some_and(|d| d.contains("stub/Cargo.toml"))
        })
        .count();
    let observation = store
        .steps(run_id)
        .unwrap()
        .iter()
        .map(|s| s.messages_json.clone())
        .collect::<Vec<_>>()
        .join("\n");
    Seen {
        code,
        stub_builds,
        observation,
    }
}

/// The cargo_test gate passed (the run failed on the never-passing `file_contains`
/// only) with its dependencies from `source`.
fn assert_gate_passed(seen: &Seen, source: &str) {
    assert_ne!(
        seen.code,
        Some(0),
        "the file_contains criterion never passes"
    );
    let line = seen
        .observation
        .split("\\n")
        .find(|l| l.contains("cargo_test Cargo.toml"))
        .unwrap_or_else(|| panic!("no cargo_test line in {}", seen.observation));
    assert!(line.contains("[PASS]"), "{line}");
    assert!(line.contains(&format!("dependencies: {source}")), "{line}");
}

/// The files of an entry's target directory whose name starts with `prefix`.
fn files_named(entry: &Path, prefix: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![entry.join("target")];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            if e.file_type().unwrap().is_dir() {
                stack.push(e.path());
            } else if e.file_name().to_string_lossy().starts_with(prefix) {
                out.push(e.path());
            }
        }
    }
    out.sort();
    out
}

/// A second run — another process, another store — copies the first run's sealed
/// entry and builds no dependency; an entry edited on disk between runs is
/// discarded, rebuilt, and the gate is still right.
#[test]
fn a_second_run_reuses_the_dependencies_and_a_tampered_entry_is_rebuilt() {
    let w = World::new();
    let task = w.task("t", None, "");
    let first = w.run(&task);
    assert_eq!(first.stub_builds, 1);
    assert_gate_passed(&first, "built and shared");
    let entries = w.entries();
    assert_eq!(entries.len(), 1, "{entries:?}");
    assert!(entries[0].join("seal.json").is_file());

    let second = w.run(&task);
    assert_eq!(
        second.stub_builds, 0,
        "the second run rebuilt its dependencies"
    );
    assert_gate_passed(&second, "shared cache hit");

    // Somebody with the user's rights edits a compiled dependency between runs.
    let rlib = files_named(&entries[0], "libitoa-")
        .into_iter()
        .find(|p| p.extension().is_some_and(|e| e == "rlib"))
        .expect("itoa's rlib in the entry");
    let sealed = std::fs::read(&rlib).unwrap();
    std::fs::write(&rlib, b"poison").unwrap();
    let third = w.run(&task);
    assert_eq!(third.stub_builds, 1, "the tampered entry was not rebuilt");
    assert_gate_passed(
        &third,
        "shared cache entry failed its seal: discarded, rebuilt and shared",
    );
    let rebuilt = files_named(&w.entries()[0], "libitoa-")
        .into_iter()
        .find(|p| p.extension().is_some_and(|e| e == "rlib"))
        .unwrap();
    let rebuilt = std::fs::read(&rebuilt).unwrap();
    assert_ne!(rebuilt, b"poison");
    assert!(rebuilt.starts_with(&sealed[..8]), "an rlib again");
}

/// Two runs filling one key at once both pass, the dependencies are built once, and
/// one entry is left (no fill directory behind).
#[test]
fn two_concurrent_fillers_of_one_key_both_pass_and_leave_one_entry() {
    let w = World::new();
    let a = w.task("a", None, "");
    let b = w.task("b", None, "");
    let (sa, sb) = (w.store_path(), w.dir.path().join("store-b.db"));
    let mut pa = w.command(&a, &sa).spawn().unwrap();
    let mut pb = w.command(&b, &sb).spawn().unwrap();
    let (ca, cb) = (pa.wait().unwrap().code(), pb.wait().unwrap().code());
    let (ra, rb) = (seen(&sa, ca, ""), seen(&sb, cb, ""));
    assert_eq!(ra.stub_builds + rb.stub_builds, 1);
    for r in [&ra, &rb] {
        let line = r.observation.contains("dependencies: built and shared")
            || r.observation.contains("dependencies: shared cache hit");
        assert!(line, "{}", r.observation);
        assert_gate_passed(
            r,
            if r.stub_builds == 1 {
                "built and shared"
            } else {
                "shared cache hit"
            },
        );
    }
    assert_eq!(w.entries().len(), 1);
    let fills = w.dir.path().join("cache/io-harness/deps-fill");
    assert_eq!(std::fs::read_dir(fills).unwrap().count(), 0);
}

/// Under a bound smaller than one entry, filling a second key evicts the least
/// recently used one; the entry just filled stays.
#[test]
fn a_tiny_bound_evicts_the_least_recently_used_entry() {
    let w = World::new();
    let one = w.task("one", None, "dep_cache_max = \"1KiB\"");
    // Another key: the same crate with its dependency declared per target.
    let other = "[package]\nname = \"wsnum\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n\
                 [target.'cfg(all())'.dependencies]\nitoa = \"1\"\n";
    let two = w.task("two", Some(other), "dep_cache_max = \"1KiB\"");
    assert_gate_passed(&w.run(&one), "built and shared");
    let first = w.entries();
    assert_eq!(first.len(), 1);
    assert_gate_passed(&w.run(&two), "built and shared");
    let now = w.entries();
    assert_eq!(now.len(), 1, "{now:?}");
    assert_ne!(now, first, "the older entry was evicted, the new one kept");
    // The evicted key is built again, and evicts the other in turn.
    let again = w.run(&one);
    assert_eq!(again.stub_builds, 1);
    assert_eq!(w.entries(), first);
}

/// A path dependency is never part of a shared entry: the gate builds it, and says
/// so; the registry dependency beside it is shared.
#[test]
fn a_path_dependency_is_not_shared() {
    let w = World::new();
    let manifest = "[package]\nname = \"wsnum\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n\
                    [dependencies]\nitoa = \"1\"\nlocaldep = { path = \"localdep\" }\n";
    let task = w.task("p", Some(manifest), "");
    let ws = w.dir.path().join("p/ws");
    std::fs::create_dir_all(ws.join("localdep/src")).unwrap();
    std::fs::write(
        ws.join("localdep/Cargo.toml"),
        "[package]\nname = \"localdep\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    )
    .unwrap();
    std::fs::write(
        ws.join("localdep/src/lib.rs"),
        "pub fn one() -> u32 { 1 }\n",
    )
    .unwrap();
    let seen = w.run(&task);
    assert_gate_passed(
        &seen,
        "built and shared; path and git dependencies are never cached, the gate builds them",
    );
    let entries = w.entries();
    assert_eq!(entries.len(), 1);
    assert!(files_named(&entries[0], "liblocaldep").is_empty());
    assert!(!files_named(&entries[0], "libitoa-").is_empty());
}

/// A bad bound is refused at load, naming the file, the line and the key.
#[test]
fn a_bad_dep_cache_max_names_file_line_and_key() {
    let w = World::new();
    let task = w.task("bad", None, "dep_cache_max = \"lots\"");
    let e = io_harness::TaskContract::from_file(&task)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("task.toml:9:") && e.contains("verify.dep_cache_max"),
        "{e}"
    );
    let ok = w.task("ok", None, "dep_cache_max = \"2GiB\"");
    let c = io_harness::TaskContract::from_file(&ok).unwrap();
    assert_eq!(c.verify.dep_cache_max, Some(2 << 30));
}

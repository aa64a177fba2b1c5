//! Before every run of a command gate: the criterion set put back to its baseline in
//! the live workspace. Whole files differing from their kept copy are rewritten from
//! the copy, files of the set the agent added are removed, sections are rewritten
//! with the rest of their file left as the agent made it, and bytecode is removed.
//! Restoring in place (rather than on a copy) means the gate runs where it always
//! ran, and the final diff and the model see exactly what the gate saw; the model is
//! told which files were put back and that they are not part of its work area.
//!
//! A file of the set kept by hash alone (the policy denies reading it, so its content
//! is not kept) cannot be put back: it is pinned instead, and [`changed_pins`] names
//! it when it changed, so the gate fails unrun as it does for a changed gate script.

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::PermissionsExt;

use io_harness_confine::Follow;

use super::baseline::{kept_bytes, link_target, read_file};
use super::rules::Selection;
use super::{sections, walk};
use crate::contract::{CriterionSet, KeptFile};
use crate::tools::Workspace;

/// What a restore did.
#[derive(Debug, Default)]
pub(crate) struct Restored {
    /// One line per action, for the record (`restored conftest.py`, `removed
    /// .cargo/config.toml`, `restored pyproject.toml [tool.pytest]`).
    pub actions: Vec<String>,
    /// The files the agent had changed there, for the model.
    pub files: Vec<String>,
    /// The files of the set as the gate will see them (kept whole, sectioned or
    /// put back): sealed read-only in the gate's sandbox view, so nothing the gate
    /// runs (a build script, an earlier test) can rewrite one before it is read.
    pub sealed: Vec<String>,
}

impl Restored {
    fn did(&mut self, action: &str, rel: &str, section: Option<&str>) {
        self.actions.push(match section {
            Some(s) => format!("{action} {rel} [{s}]"),
            None => format!("{action} {rel}"),
        });
        if !self.files.iter().any(|f| f == rel) {
            self.files.push(rel.to_string());
        }
    }

    /// The sentence appended to the gate's summary when the agent had changed the
    /// criterion set (`None` when it had not).
    pub(crate) fn note(&self) -> Option<String> {
        (!self.files.is_empty()).then(|| {
            format!(
                "restored before the gate ran, not part of your work area: {}",
                self.files.join(", ")
            )
        })
    }
}

/// Removes `rel` (a file or symlink, never what it points to).
fn remove(ws: &Workspace, rel: &str) -> Result<(), String> {
    match ws.confined().remove_file(rel) {
        Ok(()) | Err(io_harness_confine::Error::NotFound(_)) => Ok(()),
        Err(e) => Err(format!("cannot remove {rel}: {e}")),
    }
}

/// Writes `bytes` to `rel` as a regular file (whatever stood there first removed).
fn put(ws: &Workspace, rel: &str, bytes: &[u8], executable: bool) -> Result<(), String> {
    remove(ws, rel)?;
    ws.write(rel, bytes)
        .map_err(|e| format!("cannot restore {rel}: {e}"))?;
    let (file, _) = ws
        .confined()
        .open_file(rel, Follow::Never)
        .map_err(|e| format!("cannot reopen {rel}: {e}"))?;
    let mode = if executable { 0o755 } else { 0o644 };
    file.set_permissions(std::fs::Permissions::from_mode(mode))
        .map_err(|e| format!("cannot set the mode of {rel}: {e}"))
}

/// Marks `rel` modified now (best effort): a kept file whose content is the
/// baseline's may still carry an old time the agent set, and a build tool that
/// trusts times (cargo's fingerprints) would then run an artefact the agent built
/// from other content (an adversary's stale `target/`).
fn touch(ws: &Workspace, rel: &str) {
    if let Ok((file, _)) = ws.confined().open_file(rel, Follow::Never) {
        let _ = file.set_modified(std::time::SystemTime::now());
    }
}

/// The first file of `set` kept by hash alone that is missing, not a regular file,
/// or differs from its hash, named for the gate's failure (`None` when all are as
/// they were, or the set has no baseline yet).
pub(crate) fn changed_pins(ws: &Workspace, set: &CriterionSet) -> Option<String> {
    let base = set.baseline.as_ref()?;
    base.pinned
        .iter()
        .find_map(|p| match read_file(ws, &p.path) {
            Some((bytes, _)) if crate::digest::sha256_hex(&bytes) == p.sha256 => None,
            Some(_) => Some(format!(
                "{} changed since the run started (a criterion file the policy denies \
             reading is pinned, not restored)",
                p.path
            )),
            None => Some(format!(
                "{} is gone since the run started (a criterion file the policy denies \
             reading is pinned, not restored)",
                p.path
            )),
        })
}

/// Restores the criterion set of the gate `argv` in `ws` from `set.baseline`. A set
/// without a baseline (a contract checked outside a run) is left alone. An error
/// means the set could not be restored, and the gate must not run.
pub(crate) fn restore(
    ws: &Workspace,
    argv: &[String],
    set: &CriterionSet,
) -> Result<Restored, String> {
    let mut done = Restored::default();
    let Some(base) = &set.baseline else {
        return Ok(done);
    };
    let sel = Selection::new(argv, set)?;
    let kept: BTreeMap<&str, &KeptFile> = base.files.iter().map(|k| (k.path.as_str(), k)).collect();
    // Pinned files are checked before the gate (`changed_pins`), never rewritten.
    let pinned: BTreeSet<&str> = base.pinned.iter().map(|p| p.path.as_str()).collect();
    let live = walk::files(ws)?;
    let mut purged = 0usize;
    let mut present = BTreeSet::new();
    for entry in &live {
        let rel = entry.rel.as_str();
        if pinned.contains(rel) {
            present.insert(rel);
        } else if entry.symlink {
            // A file kept by content is put back below, whatever stands there now.
            if sel.link_matters(rel) && !kept.contains_key(rel) {
                let target = link_target(ws, rel);
                let kept_link = base
                    .links
                    .iter()
                    .any(|l| l.path == rel && Some(&l.target) == target.as_ref());
                if !kept_link {
                    remove(ws, rel)?;
                    done.did("removed", rel, None);
                }
            }
        } else if sel.purge(rel) {
            remove(ws, rel)?;
            purged += 1;
        } else if sel.whole(rel) {
            present.insert(rel);
            if !kept.contains_key(rel) {
                remove(ws, rel)?;
                done.did("removed", rel, None);
            }
        } else if let Some((format, names)) = sel.sections_of(rel) {
            present.insert(rel);
            restore_sections(ws, rel, format, names, set, &mut done)?;
        }
    }
    for (rel, k) in &kept {
        let want = kept_bytes(k);
        match read_file(ws, rel) {
            Some((bytes, exec)) if bytes == want && exec == k.executable => touch(ws, rel),
            _ => {
                put(ws, rel, &want, k.executable)?;
                done.did("restored", rel, None);
            }
        }
    }
    // A sectioned file the agent deleted comes back with its kept sections alone.
    let mut gone: BTreeMap<&str, Vec<(&str, &str)>> = BTreeMap::new();
    for s in &base.sections {
        if let Some(t) = &s.text
            && !present.contains(s.path.as_str())
        {
            gone.entry(&s.path).or_default().push((&s.section, t));
        }
    }
    for (rel, secs) in gone {
        let Some((format, _)) = sel.sections_of(rel) else {
            continue;
        };
        let mut text = if format == super::rules::Format::Json {
            "{}".to_string()
        } else {
            String::new()
        };
        for (name, t) in &secs {
            text = sections::replace(format, &text, name, Some(t))
                .map_err(|e| format!("{rel}: {e}"))?;
        }
        put(ws, rel, text.as_bytes(), false)?;
        done.did("restored", rel, None);
    }
    done.sealed = kept.keys().map(|r| r.to_string()).collect();
    for s in &base.sections {
        if !done.sealed.contains(&s.path) {
            done.sealed.push(s.path.clone());
        }
    }
    if purged > 0 {
        done.actions.push(format!(
            "removed {purged} bytecode file(s) (__pycache__, *.pyc)"
        ));
    }
    Ok(done)
}

/// Puts the kept sections of `rel` back, rewriting it only when one differs.
fn restore_sections(
    ws: &Workspace,
    rel: &str,
    format: super::rules::Format,
    names: &[&str],
    set: &CriterionSet,
    done: &mut Restored,
) -> Result<(), String> {
    let Some((bytes, exec)) = read_file(ws, rel) else {
        // A symlink where a sectioned file was expected: its target is not ours to
        // judge, so it goes.
        remove(ws, rel)?;
        done.did("removed", rel, None);
        return Ok(());
    };
    let mut text = String::from_utf8_lossy(&bytes).into_owned();
    let mut changed = false;
    for name in names {
        let kept = set
            .baseline
            .as_ref()
            .and_then(|b| {
                b.sections
                    .iter()
                    .find(|s| s.path == rel && s.section == *name)
            })
            .and_then(|s| s.text.as_deref());
        let live = sections::extract(format, &text, name).map_err(|e| {
            format!("{rel} {e}, so its criterion section [{name}] cannot be restored")
        })?;
        if live.as_deref() != kept {
            text =
                sections::replace(format, &text, name, kept).map_err(|e| format!("{rel}: {e}"))?;
            done.did("restored", rel, Some(name));
            changed = true;
        }
    }
    if changed {
        put(ws, rel, text.as_bytes(), exec)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verify::criterion_set::baseline::capture;

    fn set_up(files: &[(&str, &str)]) -> (tempfile::TempDir, Workspace) {
        let dir = tempfile::tempdir().unwrap();
        for (rel, text) in files {
            let p = dir.path().join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }
        let ws = Workspace::open(dir.path()).unwrap();
        (dir, ws)
    }

    fn kept(ws: &Workspace, argv: &[&str], paths: &[&str]) -> (Vec<String>, CriterionSet) {
        let argv: Vec<String> = argv.iter().map(|s| s.to_string()).collect();
        let mut set = CriterionSet {
            paths: paths.iter().map(|s| s.to_string()).collect(),
            ..CriterionSet::default()
        };
        let sel = Selection::new(&argv, &set).unwrap();
        set.baseline = Some(capture(ws, &sel, &|_| false).unwrap().0);
        (argv, set)
    }

    #[test]
    fn restores_from_the_kept_copy_removes_additions_and_purges_bytecode() {
        let (dir, ws) = set_up(&[
            ("conftest.py", "import pytest\n"),
            ("check.sh", "test -f done\n"),
            ("pyproject.toml", "[project]\nname = \"a\"\n"),
        ]);
        let root = dir.path();
        let (argv, set) = kept(&ws, &["pytest"], &["check.sh"]);
        // The agent's changes: a rewritten criterion file, a new nested conftest, a
        // symlink planted where a criterion script was, bytecode, a pytest section
        // added to a file that had none, and its own honest work.
        std::fs::write(root.join("conftest.py"), "import os\n").unwrap();
        std::fs::create_dir_all(root.join("tests/__pycache__")).unwrap();
        std::fs::write(root.join("tests/conftest.py"), "x = 1\n").unwrap();
        std::fs::write(root.join("tests/__pycache__/t.cpython-311.pyc"), "pyc").unwrap();
        std::fs::remove_file(root.join("check.sh")).unwrap();
        std::os::unix::fs::symlink("/bin/true", root.join("check.sh")).unwrap();
        std::fs::write(
            root.join("pyproject.toml"),
            "[project]\nname = \"a\"\ndependencies = [\"b\"]\n[tool.pytest.ini_options]\naddopts = \"--co\"\n",
        )
        .unwrap();
        std::fs::write(root.join("app.py"), "x = 2\n").unwrap();
        let done = restore(&ws, &argv, &set).unwrap();
        let read = |rel: &str| std::fs::read_to_string(root.join(rel)).unwrap();
        assert_eq!(read("conftest.py"), "import pytest\n");
        assert_eq!(read("check.sh"), "test -f done\n");
        assert!(!root.join("check.sh").is_symlink());
        assert!(!root.join("tests/conftest.py").exists());
        assert!(!root.join("tests/__pycache__/t.cpython-311.pyc").exists());
        let pyproject = read("pyproject.toml");
        assert!(
            pyproject.contains("dependencies") && !pyproject.contains("--co"),
            "{pyproject}"
        );
        assert_eq!(read("app.py"), "x = 2\n");
        assert_eq!(
            done.actions,
            [
                "restored pyproject.toml [tool.pytest]",
                "removed tests/conftest.py",
                "restored check.sh",
                "restored conftest.py",
                "removed 1 bytecode file(s) (__pycache__, *.pyc)",
            ]
        );
        let note = done.note().unwrap();
        assert!(
            note.contains("not part of your work area") && note.contains("check.sh"),
            "{note}"
        );
        // Restored, the set is at rest: a second restore does nothing.
        let again = restore(&ws, &argv, &set).unwrap();
        assert!(
            again.actions.is_empty() && again.note().is_none(),
            "{:?}",
            again.actions
        );
    }

    #[test]
    fn deleted_sectioned_file_comes_back_with_its_sections_and_no_baseline_is_no_restore() {
        let (dir, ws) = set_up(&[(
            "package.json",
            "{\"name\":\"a\",\"scripts\":{\"test\":\"node --test\"}}",
        )]);
        let (argv, set) = kept(&ws, &["npm", "test"], &[]);
        std::fs::remove_file(dir.path().join("package.json")).unwrap();
        let done = restore(&ws, &argv, &set).unwrap();
        assert_eq!(done.actions, ["restored package.json"]);
        let back = std::fs::read_to_string(dir.path().join("package.json")).unwrap();
        assert!(back.contains("node --test"), "{back}");

        std::fs::write(dir.path().join(".npmrc"), "script-shell=/bin/true\n").unwrap();
        let unstarted = CriterionSet::default();
        assert!(restore(&ws, &argv, &unstarted).unwrap().actions.is_empty());
        // An unparseable sectioned file cannot be restored: the gate must not run.
        std::fs::write(dir.path().join("package.json"), "{not json").unwrap();
        let e = restore(&ws, &argv, &set).unwrap_err();
        assert!(
            e.contains("package.json") && e.contains("cannot be restored"),
            "{e}"
        );
    }

    #[test]
    fn go_replace_and_vendor_are_undone_and_a_required_version_kept() {
        let (dir, ws) = set_up(&[
            (
                "go.mod",
                "module x\n\ngo 1.22\n\nrequire example.com/a v1.0.0\n",
            ),
            ("main_test.go", "package x\n"),
        ]);
        let (argv, set) = kept(&ws, &["go", "test", "./..."], &[]);
        let root = dir.path();
        std::fs::write(
            root.join("go.mod"),
            "module x\n\ngo 1.22\n\nrequire example.com/a v1.2.0\nreplace example.com/a => ./fake\n",
        )
        .unwrap();
        std::fs::create_dir_all(root.join("vendor/example.com/a")).unwrap();
        std::fs::write(root.join("vendor/modules.txt"), "# example.com/a v1.2.0\n").unwrap();
        std::fs::write(root.join("go.work"), "go 1.22\nuse ./fake\n").unwrap();
        let done = restore(&ws, &argv, &set).unwrap();
        let gomod = std::fs::read_to_string(root.join("go.mod")).unwrap();
        assert!(
            !gomod.contains("replace") && gomod.contains("v1.2.0"),
            "{gomod}"
        );
        assert!(!root.join("vendor/modules.txt").exists() && !root.join("go.work").exists());
        assert_eq!(
            done.actions,
            [
                "restored go.mod [replace]",
                "removed go.work",
                "removed vendor/modules.txt"
            ]
        );
    }

    #[test]
    fn symlinks_the_agent_plants_are_removed_and_the_baselines_kept() {
        let (dir, ws) = set_up(&[
            ("Cargo.toml", "[package]\nname = \"a\"\n"),
            ("node_modules/jest/bin/jest.js", "x"),
        ]);
        let root = dir.path();
        let link = |target: &str, at: &str| {
            std::fs::create_dir_all(root.join(at).parent().unwrap()).unwrap();
            std::os::unix::fs::symlink(target, root.join(at)).unwrap();
        };
        link("../jest/bin/jest.js", "node_modules/.bin/jest");
        let (argv, set) = kept(&ws, &["npm", "test"], &[]);
        assert_eq!(set.baseline.as_ref().unwrap().links.len(), 1);
        link("/bin/true", "node_modules/.bin/node");
        let done = restore(&ws, &argv, &set).unwrap();
        assert_eq!(done.actions, ["removed node_modules/.bin/node"]);
        assert!(root.join("node_modules/.bin/jest").is_symlink());

        // Cargo: `.cargo` as a link to a directory holding a runner config.
        let (argv, set) = kept(&ws, &["cargo", "test"], &[]);
        std::fs::create_dir_all(root.join("evil")).unwrap();
        std::fs::write(root.join("evil/config.toml"), "[build]\nrustc = \"x\"\n").unwrap();
        link("evil", ".cargo");
        let done = restore(&ws, &argv, &set).unwrap();
        assert_eq!(done.actions, ["removed .cargo"]);
        assert!(!root.join(".cargo").exists() && root.join("evil/config.toml").exists());
    }

    /// Adversary break: the agent built a stub of a criterion test, put the original
    /// bytes back with a time from 2001, and cargo ran the stale stub as fresh. A kept
    /// file equal to its baseline is marked modified now.
    #[test]
    fn a_kept_file_with_its_baseline_content_gets_a_fresh_time() {
        let (dir, ws) = set_up(&[("tests/add.rs", "#[test] fn t() {}\n")]);
        let (argv, set) = kept(&ws, &["cargo", "test"], &["tests/add.rs"]);
        let path = dir.path().join("tests/add.rs");
        let old = std::time::UNIX_EPOCH + std::time::Duration::from_secs(978_307_200);
        std::fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_modified(old)
            .unwrap();
        let done = restore(&ws, &argv, &set).unwrap();
        assert!(done.actions.is_empty(), "{:?}", done.actions);
        let now = std::fs::metadata(&path).unwrap().modified().unwrap();
        assert!(
            now > old + std::time::Duration::from_secs(86_400 * 365 * 20),
            "{now:?}"
        );
    }

    /// Issue 16, C1: an `.npmrc` of a Node gate's set that holds a token (the policy
    /// denies reading it) is kept by hash only, never by content; it is not restored,
    /// and once changed or removed it is named and the gate fails.
    #[test]
    fn c1_criterion_baseline_stores_npmrc() {
        let secret = "CANARY_C1_npmrc_token";
        let (dir, ws) = set_up(&[
            (
                ".npmrc",
                &format!("//registry.npmjs.org/:_authToken={secret}\n"),
            ),
            ("web/.npmrc", "script-shell=/bin/sh\n"),
            ("package.json", "{\"scripts\": {\"test\": \"node -e 1\"}}\n"),
        ]);
        let root = dir.path();
        let argv: Vec<String> = ["npm", "test"].iter().map(|s| s.to_string()).collect();
        let mut set = CriterionSet::default();
        let sel = Selection::new(&argv, &set).unwrap();
        let gate = crate::policy::CredentialContent::new(
            std::sync::Arc::new(crate::policy::Policy::builtin()),
            root,
        );
        let denied = |rel: &str| {
            use crate::policy::{Act, Action, Decision, PolicyGate};
            gate.decide(&Action::new(Act::Read, rel)).decision == Decision::Deny
        };
        let base = capture(&ws, &sel, &denied).unwrap().0;
        let stored = serde_json::to_string(&base).unwrap();
        assert!(
            !stored.contains(secret),
            "the baseline holds the token: {stored}"
        );
        assert_eq!(base.pinned.len(), 1, "{stored}");
        assert_eq!(base.pinned[0].path, ".npmrc");
        assert!(
            base.files.iter().any(|k| k.path == "web/.npmrc"),
            "a settings-only .npmrc is still kept and restored: {stored}"
        );
        set.baseline = Some(base);
        assert_eq!(changed_pins(&ws, &set), None);
        let done = restore(&ws, &argv, &set).unwrap();
        assert!(done.actions.is_empty(), "{:?}", done.actions);
        std::fs::write(root.join(".npmrc"), "script-shell=./evil.sh\n").unwrap();
        let why = changed_pins(&ws, &set).unwrap();
        assert!(why.starts_with(".npmrc changed"), "{why}");
        std::fs::remove_file(root.join(".npmrc")).unwrap();
        let why = changed_pins(&ws, &set).unwrap();
        assert!(why.starts_with(".npmrc is gone"), "{why}");
    }
}

//! What the executor checks in the workspace around every sandbox session: before it,
//! the paths to mask (what `read_file` would deny, where those files are now) and the
//! pre-existing nested repositories to make read-only; after it, any `.git` or
//! `.io-harness` a command created, which is moved out of the workspace.
//!
//! Why after every session: a `.git` with `core.fsmonitor` or a hook runs code on the
//! host the next time the operator types `git status` there — in a nested directory,
//! or at the workspace's root when the workspace is a subdirectory of a repository.
//! The harness itself runs no host `git`; the check comes before the next session and
//! before the run's final diff, so nothing the harness does reads such a repository
//! first. Which entries are the operator's is fixed by the first look at the tree
//! (same path, same inode); anything else with those names is new.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::repos::{self, Quarantined};
use super::tree::{Kind, ScanError, TreeIndex};
use crate::policy::{Act, Action, Decision, PolicyGate};

/// Names of the entries that run or steer code on the host when found in a tree.
const GUARDED: [&str; 2] = [".git", ".io-harness"];

/// Whether `name` is one of [`GUARDED`] (case-insensitively: a case-folding
/// filesystem's `git` reads `.GIT` as `.git`).
pub(crate) fn guarded(name: &std::ffi::OsStr) -> bool {
    let name = name.to_string_lossy();
    GUARDED.iter().any(|g| name.eq_ignore_ascii_case(g))
}

/// What a session is started with.
#[derive(Debug, Clone, Default)]
pub(crate) struct SessionPaths {
    /// Workspace paths (relative) the policy denies reading, where they are now.
    pub masked: Vec<PathBuf>,
    /// Pre-existing nested `.git` / `.io-harness` (relative) to make read-only.
    pub protected: Vec<PathBuf>,
}

/// The executor's view of its workspace between sessions.
pub(crate) struct WorkspaceGuard {
    index: TreeIndex,
    /// The run's policy; without one the masks are the fixed list given.
    gate: Option<Arc<dyn PolicyGate>>,
    fixed: Vec<PathBuf>,
    /// The masks of the last session started.
    pub last: Vec<PathBuf>,
    /// `(path, inode)` of the guarded entries the first look found.
    known: Option<HashSet<(PathBuf, u64)>>,
    /// `[sandbox] allow_new_repos`: new repositories stay.
    allow_new: bool,
    /// Where quarantined entries go (`…/quarantine/run-<id>`).
    quarantine: PathBuf,
    /// What the model has not been told yet.
    notices: Vec<String>,
    /// Where the first look's `known` is kept for a resumed run (the run's scratch
    /// directory), so a session killed before its check cannot make its repository
    /// the operator's.
    state: Option<PathBuf>,
}

/// The file in the run's scratch directory holding the first look's entries.
const KNOWN_FILE: &str = "known-repos.json";

impl WorkspaceGuard {
    pub(crate) fn new(
        work: &Path,
        limit: usize,
        fixed: Vec<PathBuf>,
        allow_new: bool,
        quarantine: PathBuf,
    ) -> Self {
        Self {
            index: TreeIndex::new(work, limit),
            gate: None,
            last: fixed.clone(),
            fixed,
            known: None,
            allow_new,
            quarantine,
            notices: Vec::new(),
            state: None,
        }
    }

    /// Keeps the first look's entries in `dir` (and takes them from there when a
    /// resumed run finds them).
    pub(crate) fn set_state_dir(&mut self, dir: &Path) {
        self.state = Some(dir.join(KNOWN_FILE));
    }

    /// The kept first look, when a earlier session of this run wrote one.
    fn load_known(&self) -> Option<HashSet<(PathBuf, u64)>> {
        let text = std::fs::read_to_string(self.state.as_ref()?).ok()?;
        let list: Vec<(PathBuf, u64)> = serde_json::from_str(&text).ok()?;
        Some(list.into_iter().collect())
    }

    fn save_known(&self, known: &HashSet<(PathBuf, u64)>) {
        let Some(file) = &self.state else {
            return;
        };
        let mut list: Vec<&(PathBuf, u64)> = known.iter().collect();
        list.sort();
        let written = serde_json::to_vec(&list)
            .map_err(std::io::Error::other)
            .and_then(|b| std::fs::write(file, b));
        if let Err(e) = written {
            tracing::warn!(error = %e, path = %file.display(), "could not keep the workspace's repositories");
        }
    }

    pub(crate) fn set_gate(&mut self, gate: Arc<dyn PolicyGate>) {
        self.gate = Some(gate);
    }

    /// Where quarantined entries go.
    pub(crate) fn quarantine_dir(&self) -> &Path {
        &self.quarantine
    }

    fn refresh(&mut self) -> Result<(), ScanError> {
        let gate = self.gate.clone();
        let redecide = gate.as_ref().is_some_and(|g| !g.denials_fixed());
        let denies = move |target: &str| {
            gate.as_ref().is_some_and(|g| {
                g.decide(&Action::new(Act::Read, target.to_string()))
                    .decision
                    == Decision::Deny
            })
        };
        self.index.refresh(&denies, redecide)?;
        if self.known.is_none() {
            let known = match self.load_known() {
                Some(k) => k,
                None => {
                    let k = self.guarded_entries().map(|(p, ino, _)| (p, ino)).collect();
                    self.save_known(&k);
                    k
                }
            };
            self.known = Some(known);
        }
        Ok(())
    }

    fn guarded_entries(&self) -> impl Iterator<Item = (PathBuf, u64, Kind)> + '_ {
        self.index
            .entries()
            .filter(|(_, e)| guarded(&e.name))
            .map(|(p, e)| (p, e.ino, e.kind))
    }

    /// The tree as it is now: what to mask and what to protect in the next session.
    pub(crate) fn before_session(&mut self) -> Result<SessionPaths, ScanError> {
        self.refresh()?;
        let masked = match self.gate {
            Some(_) => self.index.denied(),
            None => self.fixed.clone(),
        };
        let known = self.known.clone().unwrap_or_default();
        let protected = self
            .guarded_entries()
            .filter(|(p, ino, kind)| {
                *kind != Kind::Link
                    && p.components().count() > 1
                    && known.contains(&(p.clone(), *ino))
            })
            .map(|(p, _, _)| p)
            .collect();
        self.last = masked.clone();
        Ok(SessionPaths { masked, protected })
    }

    /// After a session: every guarded entry the first look did not find is moved to
    /// the quarantine (unless new repositories are allowed). `step` names the
    /// directory it goes to.
    pub(crate) fn after_session(&mut self, step: u32) -> Result<Vec<Quarantined>, ScanError> {
        if self.allow_new {
            return Ok(Vec::new());
        }
        self.refresh()?;
        let known = self.known.clone().unwrap_or_default();
        let mut fresh: Vec<PathBuf> = self
            .guarded_entries()
            .filter(|(p, ino, _)| !known.contains(&(p.clone(), *ino)))
            .map(|(p, _, _)| p)
            .collect();
        // Outermost first: a new `.git` inside a new `.io-harness` goes with it.
        fresh.sort_by_key(|p| p.components().count());
        let mut moved: Vec<Quarantined> = Vec::new();
        for rel in fresh {
            if moved.iter().any(|m| rel.starts_with(&m.rel)) {
                continue;
            }
            let q = repos::quarantine(self.index_root(), &rel, &self.quarantine, step);
            self.notices.push(q.notice());
            moved.push(q);
        }
        if !moved.is_empty() {
            // The moves changed the tree: their directories are read again now.
            self.refresh()?;
        }
        Ok(moved)
    }

    fn index_root(&self) -> &Path {
        self.index.root()
    }
    /// What the model should be told, once.
    pub(crate) fn take_notices(&mut self) -> Vec<String> {
        std::mem::take(&mut self.notices)
    }

    /// Notes for the model that a check could not be made.
    pub(crate) fn notice(&mut self, text: String) {
        self.notices.push(text);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guard(ws: &Path, q: &Path, state: &Path) -> WorkspaceGuard {
        let mut g = WorkspaceGuard::new(ws, 1000, Vec::new(), false, q.to_path_buf());
        g.set_state_dir(state);
        g
    }

    /// A run killed between a session and its check: the resumed run's first look
    /// must not take the repository that session made for the operator's.
    #[test]
    fn a_resumed_run_judges_new_repositories_against_the_first_look_of_the_run() {
        let d = tempfile::tempdir().unwrap();
        let (ws, q, state) = (d.path().join("ws"), d.path().join("q"), d.path().join("s"));
        std::fs::create_dir_all(ws.join("vendor/.git")).unwrap();
        std::fs::create_dir_all(&state).unwrap();
        let mut first = guard(&ws, &q, &state);
        let paths = first.before_session().unwrap();
        assert_eq!(paths.protected, [PathBuf::from("vendor/.git")]);
        // The session made a repository, and the process died before the check.
        std::fs::create_dir_all(ws.join("sub/.git/hooks")).unwrap();
        drop(first);
        let mut resumed = guard(&ws, &q, &state);
        resumed.before_session().unwrap();
        let moved = resumed.after_session(4).unwrap();
        let rels: Vec<&Path> = moved.iter().map(|m| m.rel.as_path()).collect();
        assert_eq!(rels, [Path::new("sub/.git")]);
        assert!(ws.join("vendor/.git").is_dir() && !ws.join("sub/.git").exists());
        assert!(q.join("step-4/sub/.git/hooks").is_dir());
    }
}

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
}

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
        let denies = move |target: &str| {
            gate.as_ref().is_some_and(|g| {
                g.decide(&Action::new(Act::Read, target.to_string())).decision == Decision::Deny
            })
        };
        self.index.refresh(&denies)?;
        if self.known.is_none() {
            self.known = Some(self.guarded_entries().map(|(p, ino, _)| (p, ino)).collect());
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

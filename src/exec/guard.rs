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
use super::tree::{self, Access, Entry, Kind, ScanError, TreeIndex};
use crate::policy::PolicyGate;

/// Names of the entries that run or steer code on the host when found in a tree.
const GUARDED: [&str; 2] = [".git", ".io-harness"];

/// Whether `name` is one of [`GUARDED`] (case-insensitively: a case-folding
/// filesystem's `git` reads `.GIT` as `.git`).
pub(crate) fn guarded(name: &std::ffi::OsStr) -> bool {
    let name = name.to_string_lossy();
    GUARDED.iter().any(|g| name.eq_ignore_ascii_case(g))
}

/// Whether the entries of a directory make it one git would take for a git directory
/// (its `is_git_directory`: a `HEAD`, an `objects` and a `refs`, whatever they are —
/// links included), so a `config` beside them steers `git` run there.
fn looks_like_git_dir(entries: &[Entry]) -> Option<&Entry> {
    let has = |n: &str| {
        entries
            .iter()
            .find(|e| e.name.to_string_lossy().eq_ignore_ascii_case(n))
    };
    let head = has("HEAD")?;
    (has("objects").is_some() && has("refs").is_some()).then_some(head)
}

/// An entry the checks look for: a guarded name, or the `HEAD` of a directory that
/// looks like a git directory (keyed by that directory's inode, which a rewrite of
/// `HEAD` by `git` does not change).
struct Suspect {
    path: PathBuf,
    ino: u64,
    /// For a git-directory layout: its other entries that steer `git` (`config`,
    /// `hooks`), moved out with its `HEAD`.
    with: Option<Vec<PathBuf>>,
}

/// The suspects in one directory (`rel`, inode `ino`) into `out`. An entry the policy
/// denies writing is one too: a command that creates it (the instructions file where
/// there was none, a gate's file, a path under an operator's `deny write`) made what
/// the policy would not let the agent write.
fn suspects_in(rel: &Path, ino: u64, entries: &[Entry], out: &mut Vec<Suspect>) {
    for e in entries
        .iter()
        .filter(|e| guarded(&e.name) || e.access == Access::ReadOnly)
    {
        out.push(Suspect {
            path: rel.join(&e.name),
            ino: e.ino,
            with: None,
        });
    }
    // Inside a `.git` the layout is expected: that entry is judged as a whole.
    if rel.components().any(|c| guarded(c.as_os_str())) {
        return;
    }
    if let Some(head) = looks_like_git_dir(entries) {
        let with = entries
            .iter()
            .filter(|e| {
                let n = e.name.to_string_lossy();
                n.eq_ignore_ascii_case("config") || n.eq_ignore_ascii_case("hooks")
            })
            .map(|e| rel.join(&e.name))
            .collect();
        out.push(Suspect {
            path: rel.join(&head.name),
            ino,
            with: Some(with),
        });
    }
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
    /// Bytes the quarantine keeps for this run (bounded by
    /// [`repos::QUARANTINE_BOUND`]).
    kept: u64,
    /// Why the last check after a session could not be made, while it could not: the
    /// next session does not start before a check succeeds.
    pub(crate) unchecked: Option<String>,
    /// [`denied_programs`] of the gate, looked up at the first session (the system
    /// directories are read-only in every view: they do not change within a run).
    programs: Option<Vec<PathBuf>>,
    /// The host trees an operator makes visible (`[sandbox] read_only_paths`), and
    /// what the policy denies reading in them (absolute), looked at once per run:
    /// they are read-only in every view.
    visible: Vec<PathBuf>,
    visible_masks: Option<Vec<PathBuf>>,
    /// The most entries one look walks (`[sandbox] scan_limit`).
    limit: usize,
}

/// The most write-denied paths a session holds read-only (each is a bind mount).
const MAX_READ_ONLY: usize = 1024;

/// The system directories of every sandbox's view where programs live: what a
/// command's default `PATH` searches.
const PROGRAM_DIRS: [&str; 6] = [
    "/usr/local/sbin",
    "/usr/local/bin",
    "/usr/sbin",
    "/usr/bin",
    "/sbin",
    "/bin",
];

/// The most entries of those directories looked at (a few thousand on a full system).
const MAX_PROGRAM_ENTRIES: usize = 50_000;

/// The programs in the view's system directories that `gate` denies running with any
/// arguments (an operator's `deny exec curl`), as the files they are (links
/// resolved): masked in every session, so the rule holds structurally — a copy, a
/// symlink, an interpreter's `exec` or a shell script cannot run what is not there.
/// Nothing is looked at when the gate says no program is limited.
pub(crate) fn denied_programs(gate: &dyn PolicyGate) -> Vec<PathBuf> {
    use crate::policy::{Act, Action, Decision};
    if !gate.limits_programs() {
        return Vec::new();
    }
    let mut out: Vec<PathBuf> = Vec::new();
    let mut seen = 0usize;
    for dir in PROGRAM_DIRS {
        let Ok(entries) = std::fs::read_dir(dir) else {
            continue;
        };
        for e in entries.flatten() {
            seen += 1;
            if seen > MAX_PROGRAM_ENTRIES {
                return out;
            }
            let Some(name) = e.file_name().to_str().map(str::to_owned) else {
                continue;
            };
            let line = crate::policy::command_line::quote(&[name]);
            if gate.decide(&Action::new(Act::Exec, line)).decision != Decision::Deny {
                continue;
            }
            if let Ok(real) = std::fs::canonicalize(e.path())
                && real.is_file()
                && !out.contains(&real)
            {
                out.push(real);
            }
        }
    }
    out.sort();
    out
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
            kept: 0,
            unchecked: None,
            programs: None,
            visible: Vec::new(),
            visible_masks: None,
            limit,
        }
    }

    /// The host trees the view shows beside the workspace, whose denied files are
    /// masked too (see [`super::outside`]).
    pub(crate) fn set_visible_trees(&mut self, roots: Vec<PathBuf>) {
        self.visible = roots;
        self.visible_masks = None;
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
        let judge = move |target: &str| {
            gate.as_ref()
                .map_or(Access::Open, |g| Access::decided_by(g.as_ref(), target))
        };
        self.index.refresh(&judge, redecide)?;
        if self.follow_denied()? {
            // A file judged before its twin was recorded (a hard link listed first)
            // is judged again.
            self.index.refresh(&judge, true)?;
        }
        if self.known.is_none() {
            let known = match self.load_known() {
                Some(k) => k,
                None => {
                    let k = self.suspects().map(|s| (s.path, s.ino)).collect();
                    self.save_known(&k);
                    k
                }
            };
            self.known = Some(known);
        }
        Ok(())
    }

    /// Records every regular file the last look found denied reading in the gate's
    /// [`DeniedFiles`](crate::policy::DeniedFiles), so its denial follows it wherever
    /// a command moves or links it. Whether any was new.
    fn follow_denied(&self) -> Result<bool, ScanError> {
        let Some(gate) = &self.gate else {
            return Ok(false);
        };
        if gate.denied_files().is_none() {
            return Ok(false);
        }
        let mut new = false;
        for rel in self.index.denied_files() {
            let target = tree::slashed(&rel);
            new |= crate::policy::record_denied(gate.as_ref(), self.index.root(), &target)?;
        }
        Ok(new)
    }

    /// Every suspect of the index.
    fn suspects(&self) -> impl Iterator<Item = Suspect> {
        let mut out = Vec::new();
        for (rel, ino, entries) in self.index.listings() {
            suspects_in(rel, ino, entries, &mut out);
        }
        out.into_iter()
    }

    fn guarded_entries(&self) -> impl Iterator<Item = (PathBuf, u64, Kind)> + '_ {
        self.index
            .entries()
            .filter(|(_, e)| guarded(&e.name))
            .map(|(p, e)| (p, e.ino, e.kind))
    }

    /// The tree as it is now: what to mask and what to protect in the next session.
    pub(crate) fn before_session(&mut self) -> Result<SessionPaths, ScanError> {
        if let Some(why) = &self.unchecked {
            return Err(ScanError::Io {
                path: self.index.root().to_path_buf(),
                source: std::io::Error::other(format!(
                    "the check for repositories a command created could not be made ({why}); \
                     no session runs before it is"
                )),
            });
        }
        self.refresh()?;
        let mut masked = match self.gate {
            Some(_) => self.index.denied(),
            None => self.fixed.clone(),
        };
        if let Some(gate) = &self.gate {
            let programs = self
                .programs
                .get_or_insert_with(|| denied_programs(gate.as_ref()));
            masked.extend(programs.iter().cloned());
            if self.visible_masks.is_none() {
                let m = super::outside::masks(&self.visible, gate.as_ref(), self.limit)?;
                self.visible_masks = Some(m);
            }
            masked.extend(self.visible_masks.iter().flatten().cloned());
        }
        let known = self.known.clone().unwrap_or_default();
        let mut protected: Vec<PathBuf> = self
            .guarded_entries()
            .filter(|(p, ino, kind)| {
                *kind != Kind::Link
                    && p.components().count() > 1
                    && known.contains(&(p.clone(), *ino))
            })
            .map(|(p, _, _)| p)
            .collect();
        // What the policy denies writing is read-only for commands too. Inside a
        // repository directory the whole directory is held already (the root's by
        // the sandbox, a nested one's above).
        let held: Vec<PathBuf> = self
            .index
            .read_only()
            .into_iter()
            .filter(|p| !p.components().any(|c| guarded(c.as_os_str())))
            .collect();
        if held.len() > MAX_READ_ONLY {
            return Err(ScanError::Io {
                path: self.index.root().to_path_buf(),
                source: std::io::Error::other(format!(
                    "{} workspace paths are denied writing; a command's view holds at most \
                     {MAX_READ_ONLY} read-only (deny a directory instead of its files)",
                    held.len()
                )),
            });
        }
        protected.extend(held);
        self.last = masked.clone();
        Ok(SessionPaths { masked, protected })
    }

    /// After a session: every guarded entry the first look did not find is moved to
    /// the quarantine (unless new repositories are allowed), and every directory that
    /// newly looks like a git directory loses its `HEAD` (and `config`, `hooks`) to
    /// it. `step` names the directory they go to. A tree past the scan limit is still
    /// checked, by an unlimited pass that looks for these names only (the limit bounds
    /// the masks' index, never this check). A check that cannot be made is an error
    /// and is remembered: the next session does not start before one succeeds.
    pub(crate) fn after_session(&mut self, step: u32) -> Result<Vec<Quarantined>, ScanError> {
        if self.allow_new {
            return Ok(Vec::new());
        }
        match self.check(step) {
            Ok(moved) => {
                // An entry left in place blocks the next session like a failed check.
                self.unchecked = moved.iter().find(|q| q.left).map(|q| q.detail());
                Ok(moved)
            }
            Err(e) => {
                self.unchecked = Some(e.to_string());
                Err(e)
            }
        }
    }

    fn check(&mut self, step: u32) -> Result<Vec<Quarantined>, ScanError> {
        let suspects: Vec<Suspect> = match self.refresh() {
            Ok(()) => self.suspects().collect(),
            Err(ScanError::TooManyEntries { .. }) => {
                let mut out = Vec::new();
                tree::scan_all(self.index.root(), &mut |rel, ino, entries| {
                    suspects_in(rel, ino, entries, &mut out);
                })?;
                if self.known.is_none() {
                    // No session ran on this tree (its own look failed first).
                    let k = out.iter().map(|s| (s.path.clone(), s.ino)).collect();
                    self.save_known(&k);
                    self.known = Some(k);
                }
                out
            }
            Err(e) => return Err(e),
        };
        let known = self.known.clone().unwrap_or_default();
        let mut fresh: Vec<Suspect> = suspects
            .into_iter()
            .filter(|s| !known.contains(&(s.path.clone(), s.ino)))
            .collect();
        // Outermost first: a new `.git` inside a new `.io-harness` goes with it.
        fresh.sort_by_key(|s| s.path.components().count());
        let mut moved: Vec<Quarantined> = Vec::new();
        for s in fresh {
            if moved.iter().any(|m| s.path.starts_with(&m.rel)) {
                continue;
            }
            let mut rels = vec![s.path];
            rels.extend(s.with.unwrap_or_default());
            for rel in rels {
                let q = repos::quarantine(
                    self.index.root(),
                    &rel,
                    &self.quarantine,
                    step,
                    &mut self.kept,
                );
                self.notices.push(q.notice());
                moved.push(q);
            }
        }
        if !moved.is_empty() {
            // The moves changed the tree: their directories are read again now (a
            // tree past the limit fails the next session's own look instead).
            let _ = self.refresh();
        }
        Ok(moved)
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

//! A read denial that follows the file, not only its path.
//!
//! Why: the policy names paths, but a command can move a file out from under its
//! rule (`mv config cfg2` takes `config/secret.txt` past a `deny read config/**`) or
//! give it a second name (`ln config/secret.txt notes.txt`). The workspace guard
//! looks at the tree before every sandbox session and records in a [`DeniedFiles`]
//! the identity (device, inode) of every regular file the policy denied reading at
//! that look; [`FollowDenied`] wraps the run's gate and denies a read or write of any
//! workspace path that reaches one of them, naming where it came from. Every consumer
//! of the gate (the tools, the masks of later sessions, the final diff) then follows
//! the file. A hard link shares the inode, so it is covered too.
//!
//! The path is looked at through the confined workspace without following a link at
//! its end: a link is judged by its name, and a read through one is judged by the
//! file it reaches as well (`read_file`'s second action), which is where the
//! identity is checked. So a link is never masked for what it points to (its target
//! is, where it is), and a write, which never goes through a link, is judged by the
//! file it would replace.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use io_harness_confine::{FileId, Follow, Workspace};

use super::{Act, Action, Decision, PolicyDecision, PolicyGate};

/// Where a denied file was when the policy first denied it, and by which layer.
#[derive(Debug, Clone)]
struct Origin {
    path: String,
    layer: String,
}

/// The set was full: a file could not be added, so its denial would not follow it.
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error(
    "more than {limit} files the policy denies reading were seen in this run; a denial \
     could no longer follow a moved file, so no sandbox session runs"
)]
pub struct DeniedFilesFull {
    /// The bound in force.
    pub limit: usize,
}

/// The files (by identity) the policy denied reading at any look of a run, bounded.
#[derive(Debug)]
pub struct DeniedFiles {
    files: Mutex<HashMap<FileId, Origin>>,
    limit: usize,
}

impl DeniedFiles {
    /// An empty set holding at most `limit` files (the run's scan limit: one look
    /// cannot see more entries than that).
    pub fn new(limit: usize) -> Self {
        Self {
            files: Mutex::new(HashMap::new()),
            limit,
        }
    }

    /// Records that `id`, at `path`, was denied reading by `layer`; the first path
    /// seen is kept. Whether it was new; an error when the set is full.
    pub fn record(&self, id: FileId, path: &str, layer: &str) -> Result<bool, DeniedFilesFull> {
        let mut files = self.files.lock().unwrap_or_else(PoisonError::into_inner);
        if files.contains_key(&id) {
            return Ok(false);
        }
        if files.len() >= self.limit {
            return Err(DeniedFilesFull { limit: self.limit });
        }
        files.insert(
            id,
            Origin {
                path: path.to_string(),
                layer: layer.to_string(),
            },
        );
        Ok(true)
    }

    fn origin(&self, id: &FileId) -> Option<Origin> {
        let files = self.files.lock().unwrap_or_else(PoisonError::into_inner);
        files.get(id).cloned()
    }

    /// Whether no file is held (nothing to look up).
    pub fn is_empty(&self) -> bool {
        self.files
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_empty()
    }

    /// How many files are held.
    pub fn len(&self) -> usize {
        self.files
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

/// A gate that also denies a read or write of a workspace path reaching a file in
/// its [`DeniedFiles`] (see the module docs).
///
/// ```
/// use std::sync::Arc;
/// use io_harness::policy::{Act, Action, Decision, FollowDenied, Policy, PolicyGate};
/// let ws = tempfile::tempdir().unwrap();
/// std::fs::write(ws.path().join(".env"), "S=1").unwrap();
/// let gate = FollowDenied::new(Arc::new(Policy::builtin()), ws.path(), 100);
/// assert!(gate.record(".env").unwrap());
/// std::fs::rename(ws.path().join(".env"), ws.path().join("notes.txt")).unwrap();
/// let d = gate.decide(&Action::new(Act::Read, "notes.txt"));
/// assert_eq!(d.decision, Decision::Deny);
/// assert_eq!(d.rule, "moved from .env");
/// ```
pub struct FollowDenied {
    inner: Arc<dyn PolicyGate>,
    /// The workspace, opened once; `None` when it could not be (every read or write
    /// is then denied while the set holds a file: it cannot be told apart).
    ws: Option<Workspace>,
    root: PathBuf,
    files: Arc<DeniedFiles>,
}

impl FollowDenied {
    /// `inner`, with denied files under `root` followed (at most `limit` of them).
    pub fn new(inner: Arc<dyn PolicyGate>, root: &Path, limit: usize) -> Self {
        Self {
            inner,
            ws: Workspace::open(root).ok(),
            root: root.to_path_buf(),
            files: Arc::new(DeniedFiles::new(limit)),
        }
    }

    /// Records the file at `target` when the gate denies reading it (see
    /// [`record_denied`]).
    pub fn record(&self, target: &str) -> Result<bool, DeniedFilesFull> {
        record_denied(self, &self.root, target)
    }

    /// The identity of the regular file at `target` (a link at its end not followed);
    /// `Err` when the workspace could not be opened to tell.
    fn id_of(&self, target: &str) -> Result<Option<FileId>, ()> {
        let Some(ws) = &self.ws else {
            return Err(());
        };
        Ok(ws
            .file_id(target.trim_start_matches('/'), Follow::Never)
            .ok()
            .flatten())
    }
}

/// Records the file at `target` (relative to `root`) in the [`DeniedFiles`] of
/// `gate`, when it keeps one, the gate denies reading `target` and a regular file is
/// there (a link is not followed: the file it reaches is recorded at its own path).
/// What the workspace guard does at each look. Whether it was new.
pub fn record_denied(
    gate: &dyn PolicyGate,
    root: &Path,
    target: &str,
) -> Result<bool, DeniedFilesFull> {
    let Some(files) = gate.denied_files() else {
        return Ok(false);
    };
    let d = gate.decide(&Action::new(Act::Read, target.to_string()));
    if d.decision != Decision::Deny {
        return Ok(false);
    }
    let Ok(meta) = std::fs::symlink_metadata(root.join(target.trim_start_matches('/'))) else {
        return Ok(false);
    };
    if !meta.file_type().is_file() {
        return Ok(false);
    }
    let id = FileId {
        dev: meta.dev(),
        ino: meta.ino(),
    };
    files.record(id, target, &d.layer)
}

impl PolicyGate for FollowDenied {
    fn decide(&self, action: &Action) -> PolicyDecision {
        let d = self.inner.decide(action);
        if d.decision != Decision::Allow
            || !matches!(action.act, Act::Read | Act::Write)
            || d.layer == "override"
            || self.files.is_empty()
        {
            return d;
        }
        let origin = match self.id_of(&action.target) {
            Ok(Some(id)) => self.files.origin(&id),
            Ok(None) => None,
            Err(()) => Some(Origin {
                path: "a file the workspace could not be opened to tell apart".into(),
                layer: "builtin".into(),
            }),
        };
        match origin {
            Some(o) => PolicyDecision {
                action: action.clone(),
                decision: Decision::Deny,
                rule: format!("moved from {}", o.path),
                layer: o.layer,
            },
            None => d,
        }
    }

    fn remember(&self, action: &Action) -> bool {
        self.inner.remember(action)
    }

    fn remember_program(&self, action: &Action) -> bool {
        self.inner.remember_program(action)
    }

    fn limits_programs(&self) -> bool {
        self.inner.limits_programs()
    }

    fn denied_files(&self) -> Option<&DeniedFiles> {
        Some(&self.files)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::Policy;

    fn gate_with_deny(root: &Path, target: &str) -> FollowDenied {
        let contract = crate::contract::TaskContract::workspace(
            "g",
            root,
            crate::contract::Verification::command(["true"]),
        )
        .policy_rule(crate::policy::Rule::deny(Act::Read, target));
        let p = Policy::for_contract(&contract).unwrap();
        FollowDenied::new(Arc::new(p), root, 10)
    }

    /// OP1: an operator's `deny read config/**` follows `config/secret.txt` through a
    /// rename of its directory and to a hard link, for reads and writes alike.
    #[test]
    fn op1_a_read_deny_follows_a_renamed_directory_and_a_hard_link() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir(d.path().join("config")).unwrap();
        std::fs::write(d.path().join("config/secret.txt"), "S").unwrap();
        std::fs::write(d.path().join("plain.txt"), "P").unwrap();
        let gate = gate_with_deny(d.path(), "config/**");
        assert!(gate.record("config/secret.txt").unwrap());
        assert!(!gate.record("plain.txt").unwrap(), "allowed: not recorded");
        std::fs::hard_link(
            d.path().join("config/secret.txt"),
            d.path().join("linked.txt"),
        )
        .unwrap();
        std::fs::rename(d.path().join("config"), d.path().join("cfg2")).unwrap();
        for (act, target) in [
            (Act::Read, "cfg2/secret.txt"),
            (Act::Write, "cfg2/secret.txt"),
            (Act::Read, "linked.txt"),
        ] {
            let got = gate.decide(&Action::new(act, target));
            assert_eq!(got.decision, Decision::Deny, "{target}");
            assert_eq!(got.rule, "moved from config/secret.txt");
        }
        let plain = gate.decide(&Action::new(Act::Read, "plain.txt"));
        assert_eq!(plain.decision, Decision::Allow);
    }

    #[test]
    fn a_full_set_is_an_error_never_a_silent_drop() {
        let files = DeniedFiles::new(1);
        assert!(
            files
                .record(FileId { dev: 1, ino: 1 }, "a", "task")
                .unwrap()
        );
        assert!(
            !files
                .record(FileId { dev: 1, ino: 1 }, "b", "task")
                .unwrap()
        );
        assert!(
            files
                .record(FileId { dev: 1, ino: 2 }, "c", "task")
                .is_err()
        );
    }
}

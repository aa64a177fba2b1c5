//! The final diff of a copy run taken back into its original workspace, three-way.
//!
//! For each changed path there are three texts: the base (the file as the agent found
//! it, from the run's baseline snapshot), theirs (the agent's: the stored diff applied
//! to that base, exact because the diff was made from it), and ours (what is in the
//! target now — the operator may have changed it since the run started). Where ours is
//! still the base, theirs is taken; where both changed, the lines are merged; where
//! they changed the same lines differently, the path is a conflict. The whole plan is
//! made before anything is written, and a plan with a conflict writes nothing.
//!
//! A run whose snapshot is gone (pruned, or stored before copies kept one) has no base:
//! its hunks must then apply exactly to ours, else it is a conflict. What the diff
//! holds no content for — a file the policy withheld, a binary or large file, a
//! symlink — is listed as not applied, never guessed.

use std::path::{Path, PathBuf};

use io_harness_confine::{Follow, Workspace};

use super::super::snapshot_file;
use super::super::workdir::{Node, Snapshot, baseline_file};
use super::merge::merge3;
use super::patch::{self, Piece};
use crate::store::{RunRecord, Store, StoreError};

/// Why a run's changes cannot be taken.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TakeError {
    /// No such run.
    #[error("no run with id {0}")]
    NoSuchRun(i64),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The run has not finished, so it has no final diff yet.
    #[error("run {run_id} has not finished ({status}): it has no final diff yet")]
    NotFinished {
        /// The run.
        run_id: i64,
        /// What `runs` shows for it.
        status: String,
    },
    /// The run worked in place: its changes are already in its workspace.
    #[error("run {run_id} worked in place: its changes are already in {root}")]
    InPlace {
        /// The run.
        run_id: i64,
        /// Its workspace.
        root: String,
    },
    /// The stored diff was cut at its size bound: applying part of it would leave the
    /// workspace half changed.
    #[error(
        "the stored diff of run {run_id} is truncated ({omitted} changed files not shown): it cannot be applied whole"
    )]
    Truncated {
        /// The run.
        run_id: i64,
        /// Files left out of it.
        omitted: usize,
    },
    /// The stored diff does not read as the harness writes it, or does not fit the
    /// baseline it was made from.
    #[error("the stored diff of run {run_id}: {message}")]
    BadDiff {
        /// The run.
        run_id: i64,
        /// What does not fit.
        message: String,
    },
    /// The target workspace could not be read or written.
    #[error("{path}: {message}")]
    Target {
        /// The path (relative to the workspace, or the workspace itself).
        path: String,
        /// The cause.
        message: String,
    },
}

/// A finished copy run's changes, ready to be planned against a target.
#[derive(Debug)]
pub struct RunChanges {
    /// The run.
    pub run_id: i64,
    /// The original workspace the run copied.
    pub root: PathBuf,
    /// Its goal (for a commit message).
    pub goal: String,
    pieces: Vec<Piece>,
    /// The tree as the agent found it; `None` when the snapshot is gone.
    baseline: Option<Snapshot>,
}

/// What is at a path of the target now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Current {
    /// Nothing.
    Missing,
    /// A regular file with these bytes.
    File(Vec<u8>),
    /// Something a text change cannot go into (a directory, a symlink, a special
    /// file, one too large to read): what it is.
    Other(String),
}

/// One file the plan writes: its new bytes, or `None` to delete it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Write {
    /// Relative to the workspace.
    pub path: String,
    /// The new content; `None` deletes the file.
    pub content: Option<Vec<u8>>,
    /// Whether the operator's changes since the run started were merged in.
    pub merged: bool,
    /// Whether the file is new to the target.
    pub added: bool,
}

/// A path of the diff left as it is, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// Relative to the workspace.
    pub path: String,
    /// Why.
    pub reason: String,
}

/// Everything an apply would do, decided before anything is written.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ApplyPlan {
    /// Files to write or delete.
    pub writes: Vec<Write>,
    /// Paths already as the run left them.
    pub unchanged: Vec<String>,
    /// Paths the diff holds no content for (withheld, binary, links).
    pub not_applied: Vec<Skipped>,
    /// Paths changed on both sides in ways that do not merge: nothing is written
    /// while there is one.
    pub conflicts: Vec<Skipped>,
}

impl RunChanges {
    /// The changes of `run_id`: a finished run that worked on a copy.
    pub fn load(store: &Store, run_id: i64) -> Result<Self, TakeError> {
        let run = store.run(run_id)?.ok_or(TakeError::NoSuchRun(run_id))?;
        if run.status != "finished" {
            return Err(TakeError::NotFinished {
                run_id,
                status: run.status,
            });
        }
        if matches!(super::copy_state(&run), super::CopyState::InPlace) {
            return Err(TakeError::InPlace {
                run_id,
                root: run.root,
            });
        }
        let parsed = patch::parse(run.diff.as_deref().unwrap_or(""))
            .map_err(|message| TakeError::BadDiff { run_id, message })?;
        if let Some(omitted) = parsed.truncated {
            return Err(TakeError::Truncated { run_id, omitted });
        }
        Ok(Self {
            run_id,
            root: PathBuf::from(&run.root),
            goal: run.goal.clone(),
            pieces: parsed.pieces,
            baseline: baseline_of(&run),
        })
    }

    /// Whether the run's baseline snapshot is on disk (a three-way apply; without it
    /// the hunks must fit the target exactly).
    pub fn has_baseline(&self) -> bool {
        self.baseline.is_some()
    }

    /// The plan of applying these changes to a target whose paths `current` reads.
    pub fn plan(&self, current: &dyn Fn(&str) -> Current) -> Result<ApplyPlan, TakeError> {
        let mut plan = ApplyPlan::default();
        for piece in &self.pieces {
            let path = piece.path().to_string();
            let skip = |reason: &str| Skipped {
                path: path.clone(),
                reason: reason.to_string(),
            };
            let (base, theirs) = match self.sides(piece)? {
                Sides::Skip(reason) => {
                    plan.not_applied.push(skip(&reason));
                    continue;
                }
                Sides::Known { base, theirs } => (base, theirs),
                Sides::OnOurs => match self.onto_ours(piece, &current(&path)) {
                    Ok(w) => {
                        plan.writes.push(w);
                        continue;
                    }
                    Err(reason) => {
                        plan.conflicts.push(skip(&reason));
                        continue;
                    }
                },
            };
            match three_way(&path, base.as_deref(), theirs, current(&path)) {
                Ok(Some(w)) => plan.writes.push(w),
                Ok(None) => plan.unchanged.push(path),
                Err(reason) => plan.conflicts.push(skip(&reason)),
            }
        }
        Ok(plan)
    }

    /// The base and the agent's side of `piece`, from the baseline snapshot.
    fn sides(&self, piece: &Piece) -> Result<Sides, TakeError> {
        let path = piece.path();
        let base_node = self.baseline.as_ref().map(|b| b.get(path));
        match piece {
            Piece::Withheld { .. } => Ok(Sides::Skip(
                "content withheld from the record by the policy".into(),
            )),
            Piece::Binary { .. } => Ok(Sides::Skip(
                "binary or over 1 MiB: the diff holds no content".into(),
            )),
            Piece::Bare { .. } => Ok(match base_node {
                Some(None) => Sides::Known {
                    base: None,
                    theirs: Some(Vec::new()),
                },
                Some(Some(Node::File(b))) if b.is_empty() => Sides::Known {
                    base: Some(Vec::new()),
                    theirs: None,
                },
                _ => Sides::Skip("a change of kind (file, symlink) the diff cannot show".into()),
            }),
            Piece::Text {
                old_exists,
                new_exists,
                hunks,
                ..
            } => {
                let base = match base_node {
                    None => return Ok(Sides::OnOurs),
                    Some(Some(Node::File(b))) => Some(b.clone()),
                    Some(Some(Node::Link(_))) => {
                        return Ok(Sides::Skip("a symlink: apply it by hand".into()));
                    }
                    Some(Some(Node::Large(..))) | Some(None) if *old_exists => {
                        return Err(self.mismatch(path, "the baseline has no text of it"));
                    }
                    Some(_) => None,
                };
                let base_text = match &base {
                    Some(b) => std::str::from_utf8(b)
                        .map_err(|_| self.mismatch(path, "its baseline is not text"))?,
                    None => "",
                };
                let new = patch::apply(base_text, hunks).map_err(|e| self.mismatch(path, &e))?;
                if *new_exists && looks_like_link(&new) {
                    return Ok(Sides::Skip("a symlink: apply it by hand".into()));
                }
                Ok(Sides::Known {
                    base,
                    theirs: new_exists.then(|| new.into_bytes()),
                })
            }
        }
    }

    /// Without a baseline: the hunks applied to what is there now, exactly.
    fn onto_ours(&self, piece: &Piece, now: &Current) -> Result<Write, String> {
        let Piece::Text {
            old_exists,
            new_exists,
            hunks,
            path,
        } = piece
        else {
            return Err("the run's baseline snapshot is gone".into());
        };
        let ours = match (now, old_exists) {
            (Current::File(b), true) => {
                std::str::from_utf8(b).map_err(|_| "is no longer text".to_string())?
            }
            (Current::Missing, false) => "",
            (Current::Other(what), _) => return Err(format!("is now {what}")),
            (Current::Missing, true) => return Err("was deleted since the run started".into()),
            (Current::File(_), false) => return Err("was created since the run started".into()),
        };
        let new = patch::apply(ours, hunks).map_err(|e| {
            format!("changed since the run started ({e}) and the run's baseline is gone")
        })?;
        Ok(Write {
            path: path.clone(),
            content: new_exists.then(|| new.into_bytes()),
            merged: false,
            added: !old_exists,
        })
    }

    fn mismatch(&self, path: &str, why: &str) -> TakeError {
        TakeError::BadDiff {
            run_id: self.run_id,
            message: format!("{path} does not fit the run's baseline ({why})"),
        }
    }
}

enum Sides {
    Skip(String),
    Known {
        base: Option<Vec<u8>>,
        theirs: Option<Vec<u8>>,
    },
    /// No baseline: apply onto what is there.
    OnOurs,
}

/// The run's baseline snapshot, when its scratch directory still holds one.
fn baseline_of(run: &RunRecord) -> Option<Snapshot> {
    let file = baseline_file(Path::new(run.scratch_dir.as_deref()?))?;
    snapshot_file::read(&file).ok()
}

/// What the diff shows for a symlink (`symlink -> target`): a file holding just that
/// line is not told apart, so both are left to the operator.
fn looks_like_link(text: &str) -> bool {
    text.starts_with("symlink -> ") && text.ends_with('\n') && text.matches('\n').count() == 1
}

/// The write that takes `ours` to the run's result, `None` when it is there already.
fn three_way(
    path: &str,
    base: Option<&[u8]>,
    theirs: Option<Vec<u8>>,
    ours: Current,
) -> Result<Option<Write>, String> {
    let ours = match ours {
        Current::Other(what) => return Err(format!("is now {what}")),
        Current::Missing => None,
        Current::File(b) => Some(b),
    };
    let added = ours.is_none();
    let write = |content: Option<Vec<u8>>, merged: bool| {
        Ok(Some(Write {
            path: path.to_string(),
            content,
            merged,
            added,
        }))
    };
    if ours == theirs {
        return Ok(None);
    }
    if ours.as_deref() == base {
        return write(theirs, false);
    }
    match (base, ours, theirs) {
        (None, Some(_), Some(_)) => {
            Err("was also created since the run started, differently".into())
        }
        (Some(_), None, Some(_)) => Err("was deleted since the run started".into()),
        (Some(_), Some(_), None) => {
            Err("was changed since the run started; the run deletes it".into())
        }
        (Some(b), Some(o), Some(t)) => {
            let text = |x: &[u8]| std::str::from_utf8(x).ok().map(str::to_string);
            let (b, o, t) = (text(b), text(&o), text(&t));
            let (Some(b), Some(o), Some(t)) = (b, o, t) else {
                return Err("changed on both sides and not text".into());
            };
            match merge3(&b, &o, &t) {
                // Already merged (an apply run twice): nothing to write.
                Some(m) if m == o => Ok(None),
                Some(m) => write(Some(m.into_bytes()), true),
                None => Err("changed since the run started where the run changed it too".into()),
            }
        }
        _ => Err("changed on both sides".into()),
    }
}

/// What is at `rel` under `ws` now, read without following a symlink.
pub fn read_workspace(ws: &Workspace, rel: &str) -> Current {
    use io_harness_confine::Error;
    match ws.read_with(rel, 64 << 20, Follow::Never) {
        Ok(b) => Current::File(b),
        Err(Error::NotFound(_)) => Current::Missing,
        Err(Error::IsADirectory(_)) => Current::Other("a directory".into()),
        Err(Error::NotAFile(_)) => Current::Other("not a regular file".into()),
        Err(Error::TooLarge { .. }) => Current::Other("over 64 MiB".into()),
        Err(Error::Refused(_)) => Current::Other("behind a symlink".into()),
        Err(e) => Current::Other(format!("unreadable ({e})")),
    }
}

impl ApplyPlan {
    /// Writes the plan into the workspace `ws`: every file through the confined
    /// handle (atomically replaced, no symlink on its path followed). Refuses, writing
    /// nothing, while the plan has a conflict. Returns the paths written.
    pub fn write_into(&self, ws: &Workspace) -> Result<Vec<String>, TakeError> {
        if let Some(c) = self.conflicts.first() {
            return Err(TakeError::Target {
                path: c.path.clone(),
                message: c.reason.clone(),
            });
        }
        let mut done = Vec::new();
        for w in &self.writes {
            let r = match &w.content {
                Some(bytes) => ws.write(&w.path, bytes),
                None => ws.remove_file(&w.path),
            };
            r.map_err(|e| TakeError::Target {
                path: w.path.clone(),
                message: if done.is_empty() {
                    e.to_string()
                } else {
                    format!("{e} (already written: {})", done.join(", "))
                },
            })?;
            done.push(w.path.clone());
        }
        Ok(done)
    }
}

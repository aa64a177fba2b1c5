//! Moving a `.git` or `.io-harness` a command created out of the workspace.
//!
//! The entry goes to `<quarantine>/step-<step>/<its path in the workspace>`, so an
//! operator finds it by run, step and place; nothing in it is followed or run. A
//! rename keeps it whole; across filesystems it is copied (links as links, special
//! files left out) and then removed. An entry that can be neither moved nor copied is
//! removed: leaving it where the operator's `git` would read it is the one outcome
//! that is never acceptable.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

/// One entry taken out of the workspace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Quarantined {
    /// Its path in the workspace.
    pub rel: PathBuf,
    /// Where it is now; `None` when it could only be removed.
    pub dest: Option<PathBuf>,
    /// Why it could not be kept, when it could not.
    pub error: Option<String>,
}

impl Quarantined {
    /// The record's detail: `<path> -> <destination>` (or why it was removed).
    pub(crate) fn detail(&self) -> String {
        match (&self.dest, &self.error) {
            (Some(d), _) => format!("{} -> {}", self.rel.display(), d.display()),
            (None, Some(e)) => format!("{} removed (could not be moved: {e})", self.rel.display()),
            (None, None) => format!("{} removed", self.rel.display()),
        }
    }

    /// What the model is told.
    pub(crate) fn notice(&self) -> String {
        format!(
            "The harness moved `{}` out of the workspace: a `.git` or `.io-harness` created \
             by a command could run code on the operator's machine later (git hooks, \
             core.fsmonitor). Do not create repositories or harness directories in the \
             workspace; for `cargo new` or `cargo init` pass `--vcs none`.",
            self.rel.display()
        )
    }
}

/// Moves `root/rel` under `quarantine/step-<step>/`.
pub(crate) fn quarantine(root: &Path, rel: &Path, quarantine: &Path, step: u32) -> Quarantined {
    let from = root.join(rel);
    let mut out = Quarantined {
        rel: rel.to_path_buf(),
        dest: None,
        error: None,
    };
    match move_out(&from, rel, quarantine, step) {
        Ok(dest) => out.dest = Some(dest),
        Err(e) => {
            out.error = Some(e.to_string());
            let _ = remove(&from);
        }
    }
    out
}

fn move_out(from: &Path, rel: &Path, quarantine: &Path, step: u32) -> io::Result<PathBuf> {
    let dest = free_slot(quarantine, step, rel)?;
    if let Some(parent) = dest.parent() {
        fs::create_dir_all(parent)?;
    }
    match fs::rename(from, &dest) {
        Ok(()) => Ok(dest),
        Err(e) if e.raw_os_error() == Some(libc::EXDEV) => {
            copy(from, &dest)?;
            remove(from)?;
            Ok(dest)
        }
        Err(e) => Err(e),
    }
}

/// `quarantine/step-<step>/<rel>`, or `step-<step>-<n>` when that is taken.
fn free_slot(quarantine: &Path, step: u32, rel: &Path) -> io::Result<PathBuf> {
    for n in 0..1000u32 {
        let dir = match n {
            0 => format!("step-{step}"),
            n => format!("step-{step}-{n}"),
        };
        let dest = quarantine.join(dir).join(rel);
        if fs::symlink_metadata(&dest).is_err() {
            return Ok(dest);
        }
    }
    Err(io::Error::other("no free quarantine slot"))
}

fn remove(p: &Path) -> io::Result<()> {
    // `remove_dir_all` does not follow symlinks; a link itself is a file to remove.
    match fs::symlink_metadata(p)?.is_dir() {
        true => fs::remove_dir_all(p),
        false => fs::remove_file(p),
    }
}

fn copy(from: &Path, to: &Path) -> io::Result<()> {
    let meta = fs::symlink_metadata(from)?;
    let ft = meta.file_type();
    if ft.is_symlink() {
        std::os::unix::fs::symlink(fs::read_link(from)?, to)
    } else if ft.is_dir() {
        fs::create_dir(to)?;
        for entry in fs::read_dir(from)? {
            let entry = entry?;
            copy(&entry.path(), &to.join(entry.file_name()))?;
        }
        Ok(())
    } else if ft.is_file() {
        fs::copy(from, to).map(|_| ())
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_moves_under_its_step_and_a_second_one_does_not_overwrite_it() {
        let ws = tempfile::tempdir().unwrap();
        let q = tempfile::tempdir().unwrap();
        for _ in 0..2 {
            fs::create_dir_all(ws.path().join("sub/.git/hooks")).unwrap();
            fs::write(ws.path().join("sub/.git/hooks/pre-commit"), "x").unwrap();
        }
        let first = quarantine(ws.path(), Path::new("sub/.git"), q.path(), 3);
        assert_eq!(first.dest, Some(q.path().join("step-3/sub/.git")));
        assert!(!ws.path().join("sub/.git").exists());
        fs::create_dir_all(ws.path().join("sub/.git")).unwrap();
        let second = quarantine(ws.path(), Path::new("sub/.git"), q.path(), 3);
        assert_eq!(second.dest, Some(q.path().join("step-3-1/sub/.git")));
        assert!(q.path().join("step-3/sub/.git/hooks/pre-commit").is_file());
    }

    #[test]
    fn a_link_named_git_is_moved_as_a_link() {
        let ws = tempfile::tempdir().unwrap();
        let q = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink("/", ws.path().join(".git")).unwrap();
        let moved = quarantine(ws.path(), Path::new(".git"), q.path(), 1);
        let dest = moved.dest.unwrap();
        assert!(
            fs::symlink_metadata(&dest)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert!(fs::symlink_metadata(ws.path().join(".git")).is_err());
    }
}

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

/// Most bytes a run's quarantine keeps: an entry that would take it past this is
/// removed instead (a command writing 50 MiB into one new `.git` after another must
/// not pile them up outside the workspace, where no disk cap counts them).
pub(crate) const QUARANTINE_BOUND: u64 = 64 << 20;

/// One entry taken out of the workspace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Quarantined {
    /// Its path in the workspace.
    pub rel: PathBuf,
    /// Where it is now; `None` when it could only be removed.
    pub dest: Option<PathBuf>,
    /// Why it could not be kept, when it could not.
    pub error: Option<String>,
    /// By how many bytes keeping it would have passed the quarantine's bound.
    pub over: Option<u64>,
    /// It could be neither moved nor removed: it is still in the workspace.
    pub left: bool,
}

impl Quarantined {
    /// The record's detail: `<path> -> <destination>` (or why it was removed).
    pub(crate) fn detail(&self) -> String {
        if self.left {
            return format!(
                "{} could not be moved or removed: {}",
                self.rel.display(),
                self.error.as_deref().unwrap_or("unknown error")
            );
        }
        match (&self.dest, &self.error, self.over) {
            (Some(d), _, _) => format!("{} -> {}", self.rel.display(), d.display()),
            (None, _, Some(n)) => format!(
                "{} removed ({n} bytes over the quarantine's bound)",
                self.rel.display()
            ),
            (None, Some(e), None) => {
                format!("{} removed (could not be moved: {e})", self.rel.display())
            }
            (None, None, None) => format!("{} removed", self.rel.display()),
        }
    }

    /// What the model is told.
    pub(crate) fn notice(&self) -> String {
        format!(
            "The harness moved `{}` out of the workspace: a `.git` or `.io-harness` (or a \
             git directory's HEAD) created by a command could run code on the operator's \
             machine later (git hooks, core.fsmonitor). Do not create repositories or \
             harness directories in the workspace; for `cargo new` or `cargo init` pass \
             `--vcs none`.",
            self.rel.display()
        )
    }
}

/// Moves `root/rel` under `quarantine/step-<step>/`, adding its size to `kept`; an
/// entry that would take `kept` past [`QUARANTINE_BOUND`] is removed instead. The
/// entry is reached by directory descriptors from the root (no link followed, no path
/// length bound), and removed when it cannot be moved.
pub(crate) fn quarantine(
    root: &Path,
    rel: &Path,
    quarantine: &Path,
    step: u32,
    kept: &mut u64,
) -> Quarantined {
    let mut out = Quarantined {
        rel: rel.to_path_buf(),
        dest: None,
        error: None,
        over: None,
        left: false,
    };
    let parent = match open_parent(root, rel) {
        Ok(p) => p,
        Err(e) => {
            out.error = Some(format!("cannot reach it: {e}"));
            out.left = true;
            return out;
        }
    };
    let Some(name) = rel.file_name() else {
        out.error = Some("no name".into());
        out.left = true;
        return out;
    };
    let from = super::tree::fd_path(&parent.dir).join(name);
    // What cannot be measured whole (a tree too deep to walk by path) is not kept.
    let size = size_of(&from).unwrap_or(u64::MAX);
    if kept.saturating_add(size) > QUARANTINE_BOUND {
        out.over = Some(kept.saturating_add(size) - QUARANTINE_BOUND);
        if size == u64::MAX {
            out.over = None;
            out.error = Some("too deep to measure against the quarantine's bound".into());
        }
        if let Err(e) = remove(&from) {
            out.error = Some(e.to_string());
            out.left = true;
        }
        return out;
    }
    match move_out(&from, rel, quarantine, step) {
        Ok(dest) => {
            *kept += size;
            out.dest = Some(dest);
        }
        Err(e) => {
            out.error = Some(e.to_string());
            if let Err(r) = remove(&from)
                && fs::symlink_metadata(&from).is_ok()
            {
                out.error = Some(format!("{e}; removing it: {r}"));
                out.left = true;
            }
        }
    }
    out
}

/// The directory holding `root/rel`, opened component by component.
fn open_parent(root: &Path, rel: &Path) -> io::Result<super::tree::OpenDir> {
    let mut dir = super::tree::OpenDir::plain(fs::File::open(root)?);
    if let Some(parent) = rel.parent() {
        for c in parent.components() {
            dir = super::tree::open_child(&dir.dir, c.as_os_str())?;
        }
    }
    Ok(dir)
}

/// Bytes of the regular files at or below `p` (links not followed); an error when
/// any part cannot be looked at.
fn size_of(p: &Path) -> io::Result<u64> {
    let meta = fs::symlink_metadata(p)?;
    if !meta.is_dir() {
        return Ok(if meta.is_file() { meta.len() } else { 0 });
    }
    let mut sum = 0u64;
    for item in fs::read_dir(p)? {
        sum = sum.saturating_add(size_of(&item?.path())?);
    }
    Ok(sum)
}

fn move_out(from: &Path, rel: &Path, quarantine: &Path, step: u32) -> io::Result<PathBuf> {
    let dest = free_slot(quarantine, step, &short(rel))?;
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

/// Where below a step's directory `rel` is kept: itself, or for a path too long to
/// make there, `deep/<its last three components>`.
fn short(rel: &Path) -> PathBuf {
    if rel.as_os_str().len() <= 1024 {
        return rel.to_path_buf();
    }
    let parts: Vec<_> = rel.components().collect();
    let tail = &parts[parts.len().saturating_sub(3)..];
    tail.iter()
        .fold(PathBuf::from("deep"), |p, c| p.join(c.as_os_str()))
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
        let first = quarantine(ws.path(), Path::new("sub/.git"), q.path(), 3, &mut 0);
        assert_eq!(first.dest, Some(q.path().join("step-3/sub/.git")));
        assert!(!ws.path().join("sub/.git").exists());
        fs::create_dir_all(ws.path().join("sub/.git")).unwrap();
        let second = quarantine(ws.path(), Path::new("sub/.git"), q.path(), 3, &mut 0);
        assert_eq!(second.dest, Some(q.path().join("step-3-1/sub/.git")));
        assert!(q.path().join("step-3/sub/.git/hooks/pre-commit").is_file());
    }

    #[test]
    fn a_link_named_git_is_moved_as_a_link() {
        let ws = tempfile::tempdir().unwrap();
        let q = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink("/", ws.path().join(".git")).unwrap();
        let moved = quarantine(ws.path(), Path::new(".git"), q.path(), 1, &mut 0);
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

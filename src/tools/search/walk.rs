//! The tree walk under `find` and `grep`: descriptor-relative, never through a
//! symlink, skipping `.git` and what ignore files exclude.
//!
//! The `ignore` crate's own `WalkBuilder` walks by path string, so a directory swapped
//! for a symlink between its listing and its descent would lead it outside the root.
//! This walk opens every directory relative to its parent's descriptor with
//! `O_NOFOLLOW` (see [`WorkspaceDir`]), so a swap makes the open fail instead; the
//! `ignore` crate still does the matching, with [`Gitignore`] per directory.
//!
//! Rules honoured: `.gitignore` and `.ignore` in every directory from the root down
//! (a deeper file beats a shallower one, `.ignore` beats `.gitignore` in the same
//! directory, a later line beats an earlier one) and `.git/info/exclude` at the root.
//! They apply whether or not the workspace is a git repository. The user's global
//! excludes file is not read: what the tools see must not depend on the machine.

use std::ffi::OsStr;
use std::ops::ControlFlow;

use ignore::Match;
use ignore::gitignore::{Gitignore, GitignoreBuilder};

use crate::tools::{DirEntry, EntryKind, ToolError, Workspace, WorkspaceDir};

/// Ignore files larger than this are not read.
const MAX_IGNORE_FILE: u64 = 1024 * 1024;
/// Directories deeper than this below the start are not entered.
const MAX_DEPTH: usize = 256;

/// One entry met by the walk.
pub(super) struct Visit<'a> {
    /// Path relative to the workspace root.
    pub rel: &'a str,
    /// The entry (its kind is that of the entry itself: a symlink is a symlink).
    pub entry: &'a DirEntry,
    /// The directory holding it, to open it without resolving a path again.
    pub dir: &'a WorkspaceDir,
}

/// What the walk could not do.
#[derive(Debug, Default)]
pub(super) struct WalkSummary {
    /// Directories that could not be listed or entered.
    pub unreadable: usize,
    /// Directories not entered for being too deep.
    pub too_deep: usize,
}

/// Ignore rules loaded from one directory.
struct Rules {
    /// The directory, relative to the root (`""` for the root).
    dir: String,
    matcher: Gitignore,
}

/// Walks the directory `start` (a normalized path) depth-first in name order, calling
/// `visit` for every entry not skipped, before descending into it. `visit` stops the
/// walk by returning `Break`.
pub(super) fn walk(
    ws: &Workspace,
    start: &str,
    visit: &mut dyn FnMut(&Visit<'_>) -> ControlFlow<()>,
) -> Result<WalkSummary, ToolError> {
    let top = ws.open_dir(start)?;
    let mut w = Walker {
        stack: Vec::new(),
        summary: WalkSummary::default(),
        visit,
    };
    // The rules of the start's ancestors (and its own) apply below it.
    let mut prefix = String::new();
    w.push_rules(&ws.open_dir(".")?, "", true);
    if top.rel() != "." {
        for comp in top.rel().split('/') {
            if !prefix.is_empty() {
                prefix.push('/');
            }
            prefix.push_str(comp);
            if let Ok(d) = ws.open_dir(&prefix) {
                w.push_rules(&d, &prefix, false);
            }
        }
    }
    // Whether stopped early or not, the summary is what we have.
    let _ = w.descend(&top, 0);
    Ok(w.summary)
}

struct Walker<'v> {
    stack: Vec<Rules>,
    summary: WalkSummary,
    visit: &'v mut dyn FnMut(&Visit<'_>) -> ControlFlow<()>,
}

impl Walker<'_> {
    /// Loads `dir`'s ignore files, if any; returns whether rules were pushed.
    fn push_rules(&mut self, dir: &WorkspaceDir, rel: &str, root: bool) -> bool {
        let mut b = GitignoreBuilder::new(".");
        let mut any = false;
        let mut add = |bytes: Vec<u8>| {
            for line in String::from_utf8_lossy(&bytes).lines() {
                // A line that is not a valid glob is skipped, as git does.
                if b.add_line(None, line).is_ok() {
                    any = true;
                }
            }
        };
        if root
            && let Some(bytes) = dir
                .open_subdir(OsStr::new(".git"))
                .and_then(|g| g.open_subdir(OsStr::new("info")))
                .and_then(|i| i.read_file(OsStr::new("exclude"), MAX_IGNORE_FILE))
                .ok()
        {
            add(bytes);
        }
        for name in [".gitignore", ".ignore"] {
            if let Ok(bytes) = dir.read_file(OsStr::new(name), MAX_IGNORE_FILE) {
                add(bytes);
            }
        }
        if !any {
            return false;
        }
        match b.build() {
            Ok(matcher) => {
                self.stack.push(Rules {
                    dir: rel.to_string(),
                    matcher,
                });
                true
            }
            Err(_) => false,
        }
    }

    /// Whether the rules exclude `rel`: the deepest directory with an opinion wins.
    fn ignored(&self, rel: &str, is_dir: bool) -> bool {
        for r in self.stack.iter().rev() {
            let sub = if r.dir.is_empty() {
                rel
            } else {
                match rel
                    .strip_prefix(r.dir.as_str())
                    .and_then(|s| s.strip_prefix('/'))
                {
                    Some(s) => s,
                    None => continue,
                }
            };
            match r.matcher.matched(sub, is_dir) {
                Match::Ignore(_) => return true,
                Match::Whitelist(_) => return false,
                Match::None => {}
            }
        }
        false
    }

    fn descend(&mut self, dir: &WorkspaceDir, depth: usize) -> ControlFlow<()> {
        let Ok(entries) = dir.entries() else {
            self.summary.unreadable += 1;
            return ControlFlow::Continue(());
        };
        for entry in &entries {
            if entry.name == ".git" {
                continue;
            }
            let rel = dir.child_rel(&entry.name);
            let is_dir = entry.kind == EntryKind::Dir;
            if self.ignored(&rel, is_dir) {
                continue;
            }
            (self.visit)(&Visit {
                rel: &rel,
                entry,
                dir,
            })?;
            if !is_dir {
                continue;
            }
            if depth >= MAX_DEPTH {
                self.summary.too_deep += 1;
                continue;
            }
            // Opened relative to `dir` with O_NOFOLLOW: if the directory was swapped
            // for a symlink since it was listed, this fails and the walk moves on.
            let Ok(sub) = dir.open_subdir(entry.os_name()) else {
                self.summary.unreadable += 1;
                continue;
            };
            let pushed = self.push_rules(&sub, &rel, false);
            let flow = self.descend(&sub, depth + 1);
            if pushed {
                self.stack.pop();
            }
            flow?;
        }
        ControlFlow::Continue(())
    }
}

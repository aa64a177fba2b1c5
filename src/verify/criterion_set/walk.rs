//! The workspace's files as the criterion set sees them, listed through the confined
//! workspace (a symlinked directory is never entered; a symlink is listed as an entry,
//! so one the agent planted can be removed). Build outputs and dependency trees are
//! not walked, except `node_modules/.bin`, where runner shims live.

use std::ffi::OsString;

use crate::tools::{EntryKind, Workspace};

/// The most entries one walk visits: a workspace beyond it is refused rather than
/// half-checked.
const MAX_ENTRIES: usize = 200_000;

/// Directories never walked: repository internals and the harness's own directory.
/// A build output such as `target/` is walked: pytest collects a `conftest.py`
/// planted there (an adversary's break).
const SKIPPED: &[&str] = &[".git", ".io-harness", ".hg", ".svn"];

/// One entry: its workspace-relative path and whether it is a symlink.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    pub rel: String,
    pub symlink: bool,
}

/// Every file and symlink beneath the root (directories themselves are not listed).
pub(crate) fn files(ws: &Workspace) -> Result<Vec<Entry>, String> {
    let mut out = Vec::new();
    let mut stack = vec![ws.open_dir(".").map_err(|e| e.to_string())?];
    let mut seen = 0usize;
    while let Some(dir) = stack.pop() {
        let entries = dir.entries().map_err(|e| e.to_string())?;
        let in_node_modules = dir.rel().rsplit('/').next() == Some("node_modules");
        for e in entries {
            seen += 1;
            if seen > MAX_ENTRIES {
                return Err(format!(
                    "the workspace has more than {MAX_ENTRIES} entries to check"
                ));
            }
            let rel = dir.child_rel(&e.name);
            match e.kind {
                EntryKind::Dir => {
                    if SKIPPED.contains(&e.name.as_str()) || (in_node_modules && e.name != ".bin") {
                        continue;
                    }
                    let name: OsString = e.os_name().to_os_string();
                    // A directory swapped for something else mid-walk is skipped, not
                    // followed.
                    if let Ok(sub) = dir.open_subdir(&name) {
                        stack.push(sub);
                    }
                }
                EntryKind::File | EntryKind::Other => out.push(Entry {
                    rel,
                    symlink: false,
                }),
                EntryKind::Symlink => out.push(Entry { rel, symlink: true }),
                _ => {}
            }
        }
    }
    out.sort_by(|a, b| a.rel.cmp(&b.rel));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skips_repository_internals_and_dependency_trees_but_not_shims_or_target() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for f in [
            "a.txt",
            "src/b.rs",
            "target/debug/x",
            ".git/config",
            "node_modules/left-pad/index.js",
            "node_modules/.bin/jest",
        ] {
            let p = root.join(f);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, "x").unwrap();
        }
        std::os::unix::fs::symlink("/etc", root.join("escape")).unwrap();
        let ws = Workspace::open(root).unwrap();
        let got: Vec<(String, bool)> = files(&ws)
            .unwrap()
            .into_iter()
            .map(|e| (e.rel, e.symlink))
            .collect();
        let want = [
            ("a.txt", false),
            ("escape", true),
            ("node_modules/.bin/jest", false),
            ("src/b.rs", false),
            ("target/debug/x", false),
        ];
        let want: Vec<(String, bool)> = want.iter().map(|(a, b)| (a.to_string(), *b)).collect();
        assert_eq!(got, want);
    }
}

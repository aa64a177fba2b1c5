//! The workspace's branch, read from `.git/HEAD` without running git: the host never
//! runs tools on a directory the agent controls (a planted `core.fsmonitor` or hook
//! would execute on the host).

use std::path::{Path, PathBuf};

/// Largest HEAD or `.git` file read.
const MAX_READ: u64 = 4096;

fn read_small(path: &Path) -> Option<String> {
    use std::io::Read;
    let meta = std::fs::symlink_metadata(path).ok()?;
    if !meta.is_file() || meta.len() > MAX_READ {
        return None;
    }
    let mut s = String::new();
    std::fs::File::open(path)
        .ok()?
        .take(MAX_READ)
        .read_to_string(&mut s)
        .ok()?;
    Some(s)
}

fn git_dir(workspace: &Path) -> Option<PathBuf> {
    let dot = workspace.join(".git");
    let meta = std::fs::symlink_metadata(&dot).ok()?;
    if meta.is_dir() {
        return Some(dot);
    }
    // A worktree or submodule: `.git` is a file saying `gitdir: <path>`.
    let text = read_small(&dot)?;
    let target = text.strip_prefix("gitdir:")?.trim();
    let p = Path::new(target);
    Some(if p.is_absolute() {
        p.to_path_buf()
    } else {
        workspace.join(p)
    })
}

/// `main` for `ref: refs/heads/main`; the commit id for a detached HEAD; `None` when
/// the workspace is not a repository or HEAD is unreadable.
pub fn git_branch(workspace: &Path) -> Option<String> {
    let head = read_small(&git_dir(workspace)?.join("HEAD"))?;
    let head = head.trim();
    if let Some(r) = head.strip_prefix("ref:") {
        let r = r.trim();
        return Some(r.strip_prefix("refs/heads/").unwrap_or(r).to_string());
    }
    (head.len() >= 7 && head.bytes().all(|b| b.is_ascii_hexdigit())).then(|| head.to_string())
}

//! Where the agent works, and how the final diff is found.
//!
//! `copy` runs on a copy of the workspace under the harness's cache directory;
//! `in-place` runs on the workspace itself. Either way a snapshot of the tracked (not
//! ignored) files as the agent found them is taken first — of the fresh copy, so what
//! the operator does to the original meanwhile is not put down to the agent — and the
//! final diff is that snapshot against the work tree. The snapshot outlives a crash so
//! a resumed run diffs against the same baseline, and outlives a copy removed after
//! success so `io-harness apply` has the exact base of a three-way merge. A copy run
//! stored before copies had a snapshot diffs against the original, as it did then. Nothing here follows a symlink: links are copied
//! as links and compared by target.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use similar::TextDiff;

use super::snapshot_file;

use crate::contract::WorkspaceMode;

/// The in-place baseline's file name in the scratch directory.
const SNAPSHOT_FILE: &str = "baseline.snapshot";

/// A copy run's work tree in its scratch directory.
pub(crate) const COPY_DIR: &str = "work";

/// The baseline snapshot kept in a run's scratch directory, when there is one (a
/// regular file, never a link).
pub(crate) fn baseline_file(scratch: &Path) -> Option<PathBuf> {
    let file = scratch.join(SNAPSHOT_FILE);
    fs::symlink_metadata(&file)
        .is_ok_and(|m| m.is_file())
        .then_some(file)
}

/// Largest diff kept; the rest is summarized.
const MAX_DIFF_BYTES: usize = 1 << 20;
/// Largest file compared as text.
const MAX_TEXT_FILE: u64 = 1 << 20;

/// The harness's cache directory (`$XDG_CACHE_HOME/io-harness`, else
/// `~/.cache/io-harness`, else the system temp dir).
pub fn cache_dir() -> PathBuf {
    if let Some(x) = std::env::var_os("XDG_CACHE_HOME").filter(|v| !v.is_empty()) {
        return PathBuf::from(x).join("io-harness");
    }
    if let Some(h) = std::env::var_os("HOME").filter(|v| !v.is_empty()) {
        return PathBuf::from(h).join(".cache").join("io-harness");
    }
    std::env::temp_dir().join("io-harness")
}

/// What the final diff compares against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Baseline {
    /// A directory tree (the untouched original of a `copy` run).
    Dir(PathBuf),
    /// A snapshot file of the tree taken before an `in-place` run: one file written
    /// instead of a copy of every file, because creating many small files is what a
    /// copy costs.
    Snapshot(PathBuf),
}

/// The directories of one run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkDirs {
    /// Where the agent works.
    pub work: PathBuf,
    /// What the final diff compares against.
    pub baseline: Baseline,
    /// The run's scratch directory (holds the copy or the baseline).
    pub scratch: PathBuf,
}

/// Prepares the directories for a new run.
pub fn prepare(root: &Path, mode: WorkspaceMode) -> io::Result<WorkDirs> {
    let runs = cache_dir().join("runs");
    fs::create_dir_all(&runs)?;
    let scratch = tempfile::Builder::new()
        .prefix("run-")
        .tempdir_in(&runs)?
        .keep();
    match mode {
        WorkspaceMode::Copy => {
            let work = scratch.join(COPY_DIR);
            copy_tree(root, &work)?;
            let file = scratch.join(SNAPSHOT_FILE);
            snapshot_file::write(&file, &snapshot(&work)?)?;
            Ok(WorkDirs {
                work,
                baseline: Baseline::Snapshot(file),
                scratch,
            })
        }
        WorkspaceMode::InPlace => {
            let file = scratch.join(SNAPSHOT_FILE);
            snapshot_file::write(&file, &snapshot(root)?)?;
            Ok(WorkDirs {
                work: root.to_path_buf(),
                baseline: Baseline::Snapshot(file),
                scratch,
            })
        }
    }
}

/// The directories of a run being resumed, from what the store kept.
pub fn reattach(root: &Path, mode: WorkspaceMode, scratch: &Path) -> WorkDirs {
    match mode {
        WorkspaceMode::Copy => WorkDirs {
            work: scratch.join(COPY_DIR),
            baseline: match baseline_file(scratch) {
                Some(file) => Baseline::Snapshot(file),
                None => Baseline::Dir(root.to_path_buf()),
            },
            scratch: scratch.to_path_buf(),
        },
        WorkspaceMode::InPlace => WorkDirs {
            work: root.to_path_buf(),
            baseline: Baseline::Snapshot(scratch.join(SNAPSHOT_FILE)),
            scratch: scratch.to_path_buf(),
        },
    }
}

/// The walk of a tree for its snapshot: ignored files and `.git` left out, links not
/// followed. Ignore files are read only when every one in the tree is a regular
/// file: a FIFO named `.gitignore` would block the read forever (the final diff of a
/// run hung on one), so with one there the walk applies no ignore file at all.
fn walker(root: &Path) -> ignore::Walk {
    let readable = ignore_files_are_regular(root);
    ignore::WalkBuilder::new(root)
        .hidden(false)
        .ignore(readable)
        .git_ignore(readable)
        .git_exclude(false)
        .git_global(false)
        .require_git(false)
        .follow_links(false)
        .filter_entry(|e| e.file_name() != ".git")
        .build()
}

/// Whether every `.gitignore` and `.ignore` under `root` is a regular file (a walk
/// that reads nothing and follows no link).
fn ignore_files_are_regular(root: &Path) -> bool {
    ignore::WalkBuilder::new(root)
        .standard_filters(false)
        .follow_links(false)
        .filter_entry(|e| e.file_name() != ".git")
        .build()
        .flatten()
        .filter(|e| matches!(e.file_name().to_str(), Some(".gitignore" | ".ignore")))
        .all(|e| e.file_type().is_some_and(|t| t.is_file()))
}

/// Copies `src` into `dst` (created if missing): everything, ignored files and `.git`
/// included, since the agent works on the copy as on the original. Symlinks are
/// recreated, never followed; special files are skipped.
pub fn copy_tree(src: &Path, dst: &Path) -> io::Result<()> {
    fs::create_dir_all(dst)?;
    copy_all(src, dst)
}

fn copy_all(src: &Path, dst: &Path) -> io::Result<()> {
    for entry in fs::read_dir(src)? {
        let entry = entry?;
        let to = dst.join(entry.file_name());
        let ft = entry.file_type()?;
        if ft.is_dir() {
            fs::create_dir(&to)?;
            copy_all(&entry.path(), &to)?;
        } else {
            copy_entry(&entry.path(), &to)?;
        }
    }
    Ok(())
}

fn copy_entry(from: &Path, to: &Path) -> io::Result<()> {
    let meta = fs::symlink_metadata(from)?;
    let ft = meta.file_type();
    if ft.is_dir() {
        fs::create_dir_all(to)
    } else if ft.is_symlink() {
        std::os::unix::fs::symlink(fs::read_link(from)?, to)
    } else if ft.is_file() {
        fs::copy(from, to).map(|_| ())
    } else {
        Ok(())
    }
}

/// One entry of a tree snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Node {
    /// A file small enough to diff: its content.
    File(Vec<u8>),
    /// A symlink: its target.
    Link(PathBuf),
    /// A file too large to diff: its size and SHA-256, enough to tell whether it changed.
    Large(u64, [u8; 32]),
}

/// Path (relative, `/`-separated) to entry.
pub(crate) type Snapshot = std::collections::BTreeMap<String, Node>;

/// Files up to this size are hashed whole for the diff; a larger one by its size, its
/// first and its last MiB (a planted file of gigabytes costs two MiB of reading, and a
/// change that keeps its size, head and tail goes unseen: the diff of such a file is
/// a hint, not a proof).
const HASHED_WHOLE: u64 = 64 << 20;
const FINGERPRINT_PART: u64 = 1 << 20;

fn hash_file(path: &Path) -> io::Result<[u8; 32]> {
    use std::io::{Read, Seek, SeekFrom};
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW)
        .open(path)?;
    let len = f.metadata()?.len();
    if len <= HASHED_WHOLE {
        return crate::digest::sha256_stream(f);
    }
    let mut parts = Vec::with_capacity(2 * FINGERPRINT_PART as usize + 8);
    parts.extend_from_slice(&len.to_le_bytes());
    (&mut f).take(FINGERPRINT_PART).read_to_end(&mut parts)?;
    f.seek(SeekFrom::End(-(FINGERPRINT_PART as i64)))?;
    f.take(FINGERPRINT_PART).read_to_end(&mut parts)?;
    crate::digest::sha256_stream(&parts[..])
}

fn snapshot(root: &Path) -> io::Result<Snapshot> {
    let mut out = Snapshot::new();
    if !root.exists() {
        return Ok(out);
    }
    for entry in walker(root) {
        let entry = entry.map_err(io::Error::other)?;
        let Ok(rel) = entry.path().strip_prefix(root) else {
            continue;
        };
        if rel.as_os_str().is_empty() {
            continue;
        }
        let meta = fs::symlink_metadata(entry.path())?;
        let key = rel.to_string_lossy().replace('\\', "/");
        let node = if meta.file_type().is_symlink() {
            Node::Link(fs::read_link(entry.path())?)
        } else if meta.is_file() {
            if meta.len() > MAX_TEXT_FILE {
                Node::Large(meta.len(), hash_file(entry.path())?)
            } else {
                Node::File(fs::read(entry.path())?)
            }
        } else {
            continue;
        };
        out.insert(key, node);
    }
    Ok(out)
}

/// `path` as a diff header shows it: as it is when it holds only printable characters,
/// else in double quotes with C escapes (`"a\nb"`), as git quotes it, so a file name
/// cannot forge a header or a hunk of the diff.
fn quote_path(path: &str) -> String {
    let hostile = |c: char| {
        c.is_control()
            || matches!(c, '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{FEFF}')
    };
    if !path.chars().any(|c| hostile(c) || c == '"' || c == '\\') {
        return path.to_string();
    }
    let mut out = String::from("\"");
    for c in path.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if hostile(c) => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The unified diff from the tree at `baseline` to the tree at `work` (ignored files
/// and `.git` excluded), bounded to 1 MiB.
pub fn diff_trees(baseline: &Path, work: &Path) -> io::Result<String> {
    Ok(diff_snapshots(
        &snapshot(baseline)?,
        &snapshot(work)?,
        &Withhold::NOTHING,
    ))
}

/// What the final diff must not show: a side of a changed path is withheld when
/// `path` says the policy denies reading that path, or when `content` says the side's
/// bytes, judged as the file they were at that path, hold a credential.
///
/// Each side is judged by its own bytes (the baseline's for the old side, the work
/// tree's for the new), never by whatever is at the path now: a credential file whose
/// directory the agent renamed no longer exists where the old side says it was, and
/// judging that path would find nothing to protect.
pub(crate) struct Withhold<'a> {
    /// Whether the policy denies reading the path.
    pub path: &'a dyn Fn(&str) -> bool,
    /// Whether these bytes, as the content of the file at the path, hold a credential.
    pub content: &'a dyn Fn(&str, &[u8]) -> bool,
}

impl Withhold<'static> {
    /// Withholds nothing: a diff of two trees outside any run's policy.
    pub(crate) const NOTHING: Self = Self {
        path: &|_| false,
        content: &|_, _| false,
    };
}

impl Withhold<'_> {
    /// Whether `node` (one side of `path`) must not be shown.
    fn side(&self, path: &str, node: Option<&Node>) -> bool {
        match node {
            None => false,
            Some(Node::File(bytes)) => (self.path)(path) || (self.content)(path, bytes),
            Some(_) => (self.path)(path),
        }
    }
}

/// The final diff of a run. A path whose either side is withheld (see [`Withhold`])
/// shows that it changed, never its content: the diff goes into the store, and a
/// secret the agent moved (`config/.env` to `cfg2/.env`) is a deletion and an
/// addition.
pub(crate) fn diff_against(
    baseline: &Baseline,
    work: &Path,
    withhold: &Withhold<'_>,
) -> io::Result<String> {
    let before = match baseline {
        Baseline::Dir(d) => snapshot(d)?,
        Baseline::Snapshot(f) => snapshot_file::read(f)?,
    };
    Ok(diff_snapshots(&before, &snapshot(work)?, withhold))
}

fn diff_snapshots(before: &Snapshot, after: &Snapshot, withhold: &Withhold<'_>) -> String {
    let mut keys: Vec<&String> = before.keys().chain(after.keys()).collect();
    keys.sort();
    keys.dedup();
    let mut out = String::new();
    let mut omitted = 0usize;
    for k in keys {
        let (a, b) = (before.get(k), after.get(k));
        let piece = if withhold.side(k, a) || withhold.side(k, b) {
            withheld(k, a, b)
        } else {
            diff_node(k, before.get(k), after.get(k))
        };
        if piece.is_empty() {
            continue;
        }
        if out.len() + piece.len() > MAX_DIFF_BYTES {
            omitted += 1;
            continue;
        }
        out.push_str(&piece);
    }
    if omitted > 0 {
        out.push_str(&format!(
            "[diff truncated: {omitted} more changed files not shown]\n"
        ));
    }
    out
}

/// A changed path whose content the policy keeps from the record.
fn withheld(path: &str, before: Option<&Node>, after: Option<&Node>) -> String {
    let quoted = quote_path(path);
    let path = quoted.as_str();
    let what = match (before, after) {
        (Some(a), Some(b)) if same(a, b) => return String::new(),
        (None, _) => "added",
        (_, None) => "deleted",
        _ => "changed",
    };
    format!(
        "diff --harness a/{path} b/{path}\n{path} {what}; content withheld (the policy denies reading it)\n"
    )
}

fn text_of(n: Option<&Node>) -> Result<String, String> {
    match n {
        None => Ok(String::new()),
        Some(Node::File(b)) => match std::str::from_utf8(b) {
            Ok(s) => Ok(s.to_string()),
            Err(_) => Err("binary".into()),
        },
        Some(Node::Link(t)) => Ok(format!("symlink -> {}\n", t.display())),
        Some(Node::Large(n, _)) => Err(format!("{n} bytes")),
    }
}

fn same(a: &Node, b: &Node) -> bool {
    match (a, b) {
        (Node::File(x), Node::File(y)) => x == y,
        (Node::Link(x), Node::Link(y)) => x == y,
        (Node::Large(n, h), Node::Large(m, g)) => n == m && h == g,
        _ => false,
    }
}

fn diff_node(path: &str, before: Option<&Node>, after: Option<&Node>) -> String {
    if let (Some(a), Some(b)) = (before, after)
        && same(a, b)
    {
        return String::new();
    }
    let quoted = quote_path(path);
    let path = quoted.as_str();
    let old_name = if before.is_some() {
        format!("a/{path}")
    } else {
        "/dev/null".into()
    };
    let new_name = if after.is_some() {
        format!("b/{path}")
    } else {
        "/dev/null".into()
    };
    match (text_of(before), text_of(after)) {
        (Ok(a), Ok(b)) => {
            let d = TextDiff::from_lines(&a, &b);
            let mut s = format!("diff --harness a/{path} b/{path}\n");
            s.push_str(
                &d.unified_diff()
                    .context_radius(3)
                    .header(&old_name, &new_name)
                    .to_string(),
            );
            if !s.ends_with('\n') {
                s.push('\n');
            }
            s
        }
        _ => format!(
            "diff --harness a/{path} b/{path}\nBinary or large files {old_name} and {new_name} differ\n"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diff_shows_changes_additions_deletions_and_skips_ignored() {
        let a = tempfile::tempdir().unwrap();
        let b = tempfile::tempdir().unwrap();
        for d in [a.path(), b.path()] {
            fs::write(d.join(".gitignore"), "target/\n").unwrap();
            fs::create_dir_all(d.join("target")).unwrap();
        }
        fs::write(a.path().join("same.txt"), "x\n").unwrap();
        fs::write(b.path().join("same.txt"), "x\n").unwrap();
        fs::write(a.path().join("changed.txt"), "one\ntwo\n").unwrap();
        fs::write(b.path().join("changed.txt"), "one\nthree\n").unwrap();
        fs::write(a.path().join("gone.txt"), "bye\n").unwrap();
        fs::write(b.path().join("new.txt"), "hi\n").unwrap();
        fs::write(b.path().join("target/junk"), "ignored\n").unwrap();
        let d = diff_trees(a.path(), b.path()).unwrap();
        assert!(d.contains("-two\n+three"), "{d}");
        assert!(d.contains("+++ /dev/null") && d.contains("-bye"), "{d}");
        assert!(d.contains("--- /dev/null") && d.contains("+hi"), "{d}");
        assert!(!d.contains("same.txt") && !d.contains("junk"), "{d}");
    }

    #[test]
    fn in_place_snapshot_diffs_text_and_tells_large_files_apart_by_hash() {
        let ws = tempfile::tempdir().unwrap();
        let big = vec![b'x'; (MAX_TEXT_FILE + 10) as usize];
        fs::write(ws.path().join("same.bin"), &big).unwrap();
        fs::write(ws.path().join("grow.bin"), &big).unwrap();
        fs::write(ws.path().join("a.txt"), "1\n").unwrap();
        let scratch = tempfile::tempdir().unwrap();
        let file = scratch.path().join(SNAPSHOT_FILE);
        snapshot_file::write(&file, &snapshot(ws.path()).unwrap()).unwrap();
        let mut changed = big.clone();
        changed[0] = b'y';
        fs::write(ws.path().join("grow.bin"), &changed).unwrap();
        fs::write(ws.path().join("a.txt"), "2\n").unwrap();
        let d = diff_against(&Baseline::Snapshot(file), ws.path(), &Withhold::NOTHING).unwrap();
        assert!(d.contains("-1\n+2"), "{d}");
        assert!(d.contains("grow.bin") && !d.contains("same.bin"), "{d}");
    }

    #[test]
    fn copy_keeps_symlinks_as_links() {
        let src = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        fs::write(outside.path().join("secret"), "s").unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret"), src.path().join("link")).unwrap();
        fs::create_dir(src.path().join("sub")).unwrap();
        fs::write(src.path().join("sub/f"), "f").unwrap();
        let dst = tempfile::tempdir().unwrap();
        let to = dst.path().join("copy");
        copy_tree(src.path(), &to).unwrap();
        assert!(
            fs::symlink_metadata(to.join("link"))
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(fs::read_to_string(to.join("sub/f")).unwrap(), "f");
    }
}

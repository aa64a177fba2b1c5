//! The copy of the agent's workspace a workspace-form gate builds.
//!
//! The gate never builds in the workspace itself: the copy lives in the gate's own
//! directory, so nothing the build does reaches the agent's files or a later gate.
//! What is left out, and why:
//! - `target/` beside a `Cargo.toml` or tagged `CACHEDIR.TAG` (build output, possibly
//!   huge and possibly planted; a source module named `target` is kept), `.git/` and
//!   `.io-harness/` (not part of a build);
//! - `.cargo/` directories: a `config.toml` there could name a `rustc-wrapper`, a test
//!   `runner` or rustflags and so take over the build. The gate runs cargo from a
//!   directory above the copy anyway, where such a file would not be read, but a copy
//!   without them needs no such argument;
//! - the files the policy masks for reading (`.env`…), which commands never see;
//! - symbolic links, which the harness would otherwise follow when it writes into the
//!   copy (a link named `tests` pointing at a host directory).

use std::path::{Path, PathBuf};

/// Most files copied.
const MAX_FILES: usize = 100_000;
/// Most bytes copied.
const MAX_BYTES: u64 = 1 << 30;

/// Why the workspace could not be copied.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CopyError {
    /// A read or write failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The workspace is larger than a gate copies.
    #[error("the workspace is larger than a gate copies ({MAX_FILES} files or {MAX_BYTES} bytes)")]
    TooLarge,
}

/// What was left out of the copy, for the summary.
#[derive(Debug, Default)]
pub(crate) struct Copied {
    /// Symbolic links skipped (workspace-relative).
    pub skipped_links: Vec<PathBuf>,
}

/// Copies `src` into `dst` (created), leaving out what the module docs list.
/// `masked` are workspace-relative paths the policy denies for reading.
pub(crate) fn copy_workspace(
    src: &Path,
    dst: &Path,
    masked: &[PathBuf],
) -> Result<Copied, CopyError> {
    let mut copied = Copied::default();
    let mut files = 0usize;
    let mut bytes = 0u64;
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        let from = src.join(&rel);
        let to = dst.join(&rel);
        std::fs::create_dir_all(&to).map_err(|source| CopyError::Io {
            path: to.clone(),
            source,
        })?;
        let entries = std::fs::read_dir(&from).map_err(|source| CopyError::Io {
            path: from.clone(),
            source,
        })?;
        for entry in entries {
            let entry = entry.map_err(|source| CopyError::Io {
                path: from.clone(),
                source,
            })?;
            let name = entry.file_name();
            let child = rel.join(&name);
            if masked.iter().any(|m| m == &child) {
                continue;
            }
            let ty = entry.file_type().map_err(|source| CopyError::Io {
                path: entry.path(),
                source,
            })?;
            if ty.is_symlink() {
                copied.skipped_links.push(child);
                continue;
            }
            if ty.is_dir() {
                let build_output = name == "target"
                    && (from.join("Cargo.toml").is_file()
                        || entry.path().join("CACHEDIR.TAG").is_file());
                if build_output || [".git", ".io-harness", ".cargo"].iter().any(|n| name == *n) {
                    continue;
                }
                stack.push(child);
            } else if ty.is_file() {
                files += 1;
                let len = entry.metadata().map(|m| m.len()).unwrap_or(0);
                bytes += len;
                if files > MAX_FILES || bytes > MAX_BYTES {
                    return Err(CopyError::TooLarge);
                }
                let target = dst.join(&child);
                std::fs::copy(entry.path(), &target).map_err(|source| CopyError::Io {
                    path: entry.path(),
                    source,
                })?;
            }
        }
    }
    Ok(copied)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_sources_and_leaves_out_targets_configs_secrets_and_links() {
        let d = tempfile::tempdir().unwrap();
        let src = d.path().join("src");
        for dir in [
            "src/target",
            "target/debug",
            ".cargo",
            ".git",
            "tests",
            "sub/target",
        ] {
            std::fs::create_dir_all(src.join(dir)).unwrap();
        }
        for f in [
            "Cargo.toml",
            "src/lib.rs",
            "target/debug/x",
            ".cargo/config.toml",
            ".git/HEAD",
            ".env",
            "tests/t.rs",
            "src/target/mod.rs",
            "sub/Cargo.toml",
        ] {
            std::fs::write(src.join(f), f).unwrap();
        }
        std::os::unix::fs::symlink("/etc", src.join("tests/link")).unwrap();
        let dst = d.path().join("dst");
        let c = copy_workspace(&src, &dst, &[PathBuf::from(".env")]).unwrap();
        assert!(dst.join("Cargo.toml").is_file());
        assert!(dst.join("src/lib.rs").is_file());
        assert!(dst.join("tests/t.rs").is_file());
        assert!(dst.join("src/target/mod.rs").is_file());
        for gone in [
            "target",
            ".cargo",
            ".git",
            ".env",
            "tests/link",
            "sub/target",
        ] {
            assert!(std::fs::symlink_metadata(dst.join(gone)).is_err(), "{gone}");
        }
        assert_eq!(c.skipped_links, [PathBuf::from("tests/link")]);
    }
}

//! Setuid and setgid bits are cleared from what a session leaves behind.
//!
//! A root harness runs the command as an unprivileged uid through an idmapped
//! workspace, so a file the command creates is owned by the host user on disk — and
//! a `chmod u+s` on it inside would leave a setuid binary of that user for a later,
//! unconfined process to run. The view mounts the workspace nosuid, so the bit gains
//! nothing inside; after the session (every process of it gone) the parent walks the
//! writable trees without following links and clears the bits from regular files.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

/// Clear setuid/setgid from every regular file under `roots`; returns the files
/// changed. Symlinks are never followed; unreadable directories are skipped.
pub(crate) fn clear(roots: &[PathBuf]) -> Vec<PathBuf> {
    let mut cleared = Vec::new();
    let mut stack: Vec<PathBuf> = roots.to_vec();
    while let Some(dir) = stack.pop() {
        let Ok(entries) = fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let Ok(meta) = fs::symlink_metadata(&path) else {
                continue;
            };
            let kind = meta.file_type();
            if kind.is_dir() {
                stack.push(path);
            } else if kind.is_file() && meta.permissions().mode() & 0o6000 != 0 {
                let mode = meta.permissions().mode() & 0o1777;
                // The entry is a regular file (not a link) and nothing of the sandbox
                // is left to swap it.
                if fs::set_permissions(&path, fs::Permissions::from_mode(mode)).is_ok() {
                    cleared.push(path);
                }
            }
        }
    }
    cleared
}

//! The seal of a dependency cache: the SHA-256, mode and modification time of every
//! file of its target directory, taken once the build that wrote them is over. A
//! copy into a gate's target directory checks each file against it as it copies, so
//! a file changed after sealing is never handed to a gate.
//!
//! A run's own caches keep their seal in memory; a shared entry keeps it on disk
//! beside its files (`seal.json`), where it is read back and checked on every copy.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::digest::hex;

/// Format of `seal.json`; another number is never trusted.
const SEAL_VERSION: u32 = 1;

/// One file of a sealed cache.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SealedFile {
    pub(crate) rel: PathBuf,
    pub(crate) sha256: [u8; 32],
    pub(crate) mode: u32,
    pub(crate) modified: SystemTime,
    pub(crate) size: u64,
}

/// A built, sealed cache.
#[derive(Debug)]
pub(crate) struct Seal {
    /// The cache's target directory.
    pub(crate) target: PathBuf,
    pub(crate) files: Vec<SealedFile>,
}

/// Why a copy was refused.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CopyError {
    /// A file is missing or no longer matches its seal (or the seal itself is
    /// unreadable): the cache must not be used.
    #[error("{0}")]
    Broken(String),
    /// Writing the gate's copy failed.
    #[error("cannot write the copy: {0}")]
    Write(#[from] std::io::Error),
}

/// Hashes every regular file under `target`.
pub(crate) fn seal(target: &Path) -> std::io::Result<Seal> {
    use std::os::unix::fs::PermissionsExt;
    let mut files = Vec::new();
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        for entry in std::fs::read_dir(target.join(&rel))? {
            let entry = entry?;
            let child = rel.join(entry.file_name());
            let ty = entry.file_type()?;
            if ty.is_dir() {
                stack.push(child);
            } else if ty.is_file() {
                let bytes = std::fs::read(entry.path())?;
                let meta = entry.metadata()?;
                files.push(SealedFile {
                    rel: child,
                    sha256: Sha256::digest(&bytes).into(),
                    mode: meta.permissions().mode() & 0o777,
                    modified: meta.modified()?,
                    size: bytes.len() as u64,
                });
            }
        }
    }
    files.sort_by(|a, b| a.rel.cmp(&b.rel));
    Ok(Seal {
        target: target.to_path_buf(),
        files,
    })
}

/// Copies the sealed files into `dst`, each checked against its seal, with the
/// sealed mode and modification time (cargo judges freshness by them).
pub(crate) fn copy_sealed(seal: &Seal, dst: &Path) -> Result<(), CopyError> {
    use std::os::unix::fs::PermissionsExt;
    for f in &seal.files {
        let bytes = std::fs::read(seal.target.join(&f.rel))
            .map_err(|e| CopyError::Broken(format!("{}: {e}", f.rel.display())))?;
        let digest: [u8; 32] = Sha256::digest(&bytes).into();
        if digest != f.sha256 {
            return Err(CopyError::Broken(format!(
                "{} does not match its seal",
                f.rel.display()
            )));
        }
        let to = dst.join(&f.rel);
        if let Some(parent) = to.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&to, &bytes)?;
        std::fs::set_permissions(&to, std::fs::Permissions::from_mode(f.mode))?;
        std::fs::File::options()
            .write(true)
            .open(&to)?
            .set_modified(f.modified)?;
    }
    Ok(())
}

/// `seal.json`: the key it belongs to and every file.
#[derive(Serialize, Deserialize)]
struct SealFile {
    version: u32,
    key: String,
    files: Vec<SealLine>,
}

#[derive(Serialize, Deserialize)]
struct SealLine {
    rel: PathBuf,
    sha256: String,
    mode: u32,
    mtime_secs: u64,
    mtime_nanos: u32,
    size: u64,
}

/// The on-disk form of `seal` for the entry `key`.
pub(crate) fn to_json(seal: &Seal, key: &str) -> Vec<u8> {
    let files = seal
        .files
        .iter()
        .map(|f| {
            let since = f
                .modified
                .duration_since(SystemTime::UNIX_EPOCH)
                .unwrap_or_default();
            SealLine {
                rel: f.rel.clone(),
                sha256: hex(&f.sha256),
                mode: f.mode,
                mtime_secs: since.as_secs(),
                mtime_nanos: since.subsec_nanos(),
                size: f.size,
            }
        })
        .collect();
    let file = SealFile {
        version: SEAL_VERSION,
        key: key.to_string(),
        files,
    };
    serde_json::to_vec(&file).unwrap_or_default()
}

/// Reads a seal written by [`to_json`] for `key`, its files under `target`. Anything
/// unexpected (another version or key, a path leaving the directory, a bad hash) is
/// a broken seal.
pub(crate) fn from_json(bytes: &[u8], key: &str, target: &Path) -> Result<Seal, CopyError> {
    let broken = |m: String| CopyError::Broken(format!("seal.json: {m}"));
    let file: SealFile = serde_json::from_slice(bytes).map_err(|e| broken(e.to_string()))?;
    if file.version != SEAL_VERSION || file.key != key {
        return Err(broken("written for another key or format".into()));
    }
    let mut files = Vec::with_capacity(file.files.len());
    for l in file.files {
        let plain = l
            .rel
            .components()
            .all(|c| matches!(c, std::path::Component::Normal(_)));
        let sha256 = unhex(&l.sha256);
        let (true, Some(sha256)) = (plain, sha256) else {
            return Err(broken(format!("bad line for {}", l.rel.display())));
        };
        files.push(SealedFile {
            rel: l.rel,
            sha256,
            mode: l.mode & 0o777,
            modified: SystemTime::UNIX_EPOCH
                + Duration::new(l.mtime_secs, l.mtime_nanos.min(999_999_999)),
            size: l.size,
        });
    }
    Ok(Seal {
        target: target.to_path_buf(),
        files,
    })
}

fn unhex(s: &str) -> Option<[u8; 32]> {
    let mut out = [0u8; 32];
    if s.len() != 64 {
        return None;
    }
    for (i, b) in out.iter_mut().enumerate() {
        *b = u8::from_str_radix(s.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_changed_file_fails_the_seal_and_an_intact_one_copies_with_its_time() {
        let d = tempfile::tempdir().unwrap();
        let target = d.path().join("target");
        std::fs::create_dir_all(target.join("debug/deps")).unwrap();
        std::fs::write(target.join("debug/deps/libx.rlib"), b"rlib").unwrap();
        let s = seal(&target).unwrap();
        let dst = d.path().join("dst");
        copy_sealed(&s, &dst).unwrap();
        let copied = dst.join("debug/deps/libx.rlib");
        assert_eq!(std::fs::read(&copied).unwrap(), b"rlib");
        assert_eq!(
            std::fs::metadata(&copied).unwrap().modified().unwrap(),
            s.files[0].modified
        );
        std::fs::write(target.join("debug/deps/libx.rlib"), b"evil").unwrap();
        assert!(copy_sealed(&s, &d.path().join("dst2")).is_err());
        std::fs::remove_file(target.join("debug/deps/libx.rlib")).unwrap();
        assert!(copy_sealed(&s, &d.path().join("dst3")).is_err());
    }

    #[test]
    fn a_seal_survives_the_disk_for_its_key_only_and_refuses_escaping_paths() {
        let d = tempfile::tempdir().unwrap();
        let target = d.path().join("target");
        std::fs::create_dir_all(target.join("debug")).unwrap();
        std::fs::write(target.join("debug/a"), b"a").unwrap();
        let s = seal(&target).unwrap();
        let json = to_json(&s, "k1");
        let back = from_json(&json, "k1", &target).unwrap();
        assert_eq!(back.files, s.files);
        assert!(from_json(&json, "k2", &target).is_err());
        let evil = String::from_utf8(json).unwrap().replace("debug/a", "../a");
        assert!(from_json(evil.as_bytes(), "k1", &target).is_err());
        assert!(from_json(b"{", "k1", &target).is_err());
    }
}

//! The dependency cache of workspace-form gates: third-party crates compiled once per
//! run, reused by every later gate of the run, never trusted on faith.
//!
//! How it stays trustworthy:
//! - **Built without the agent's code.** The cache is the target directory of a stub
//!   package of the harness's own ([`super::manifest::stub_manifest`]): an empty
//!   library, the agent's *registry* dependencies only, the agent's `Cargo.lock` for
//!   the versions. Path and git dependencies, `[patch]` and the agent's build script
//!   are not part of it, so only cargo, rustc and registry crates (checked against
//!   their lockfile checksums) ever run with the cache writable. It is built in the
//!   sandbox with the cache directory as its only writable place.
//! - **Sealed, then copied.** When the build ends (the sandbox torn down, nothing of it
//!   left running) the harness hashes every file of the cache into a seal kept in its
//!   own memory. A gate never builds *in* the cache: it gets a fresh target directory
//!   into which the harness copies the sealed files, checking each file's SHA-256 as
//!   it copies. The subject's own artifacts and its build script's outputs are
//!   therefore rebuilt every gate, in a directory no later gate reads.
//! - **Out of reach, and checked anyway.** In the sandbox the cache lies in the
//!   hidden home (or wherever `$XDG_CACHE_HOME` is: never inside a gate's writable
//!   directory), so a gate's build script cannot even see it. Where there is no
//!   sandbox (a gate checked outside a run, or a floor backend) a build script could
//!   write it; the seal catches that: a file that no longer matches makes the harness
//!   discard the cache and build a new one, and the gate never uses what it found.
//! - **Keyed by what it was built from.** The key hashes the stub manifest, the
//!   lockfile and the toolchain; a changed dependency list gets a cache of its own.
//!
//! A seal lives in memory only, so a new process (a resumed run) never trusts a cache
//! left on disk: it rebuilds it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::SystemTime;

use sha2::{Digest, Sha256};

use crate::exec::Executor;
use crate::verify::rust_gate::runner;

/// Wall-clock limit of the dependency build.
const BUILD_WALL_SECS: u64 = 900;

/// One file of a sealed cache.
#[derive(Debug, Clone)]
struct SealedFile {
    rel: PathBuf,
    sha256: [u8; 32],
    mode: u32,
    modified: SystemTime,
}

/// A built, sealed cache.
#[derive(Debug)]
pub(crate) struct Seal {
    /// The cache's target directory.
    target: PathBuf,
    files: Vec<SealedFile>,
}

/// What a cache slot holds.
#[derive(Debug, Clone)]
enum Slot {
    /// Built and sealed.
    Ready(Arc<Seal>),
    /// The dependency build failed: gates build their dependencies themselves.
    Failed,
}

type Slots = Mutex<HashMap<PathBuf, Arc<tokio::sync::Mutex<Option<Slot>>>>>;

fn slots() -> &'static Slots {
    static SLOTS: OnceLock<Slots> = OnceLock::new();
    SLOTS.get_or_init(|| Mutex::new(HashMap::new()))
}

fn slot_for(dir: &Path) -> Arc<tokio::sync::Mutex<Option<Slot>>> {
    let mut map = match slots().lock() {
        Ok(m) => m,
        Err(p) => p.into_inner(),
    };
    map.entry(dir.to_path_buf()).or_default().clone()
}

/// Forgets every cache under `base` (a run's gate directory that is being removed).
pub(crate) fn forget_under(base: &Path) {
    let mut map = match slots().lock() {
        Ok(m) => m,
        Err(p) => p.into_inner(),
    };
    map.retain(|k, _| !k.starts_with(base));
}

/// What the gate learnt about the cache, for its summary and the bench.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CacheUse {
    /// Built by this gate, then copied in.
    Built,
    /// An earlier gate's cache, verified and copied in.
    Reused,
    /// A cache file did not match its seal: the cache was discarded and rebuilt.
    Rebuilt,
    /// The dependency build failed; the gate builds its dependencies itself.
    Unavailable,
}

impl CacheUse {
    /// Words for a gate's summary.
    pub(crate) fn describe(self) -> &'static str {
        match self {
            Self::Built => "built into the run's cache",
            Self::Reused => "reused from the run's cache",
            Self::Rebuilt => "cache failed its seal, discarded and rebuilt",
            Self::Unavailable => "built by the gate itself (no cache)",
        }
    }
}

/// The inputs of one cache.
pub(crate) struct CacheInputs<'a> {
    /// The run's gate directory.
    pub base: &'a Path,
    /// The stub manifest.
    pub stub: &'a str,
    /// The agent's lockfile, if it has one.
    pub lock: Option<&'a [u8]>,
    /// The cargo arguments every gate build shares (config overrides).
    pub common: &'a [String],
    /// The cargo binary.
    pub cargo: &'a str,
}

impl CacheInputs<'_> {
    fn dir(&self) -> PathBuf {
        let mut h = Sha256::new();
        h.update(self.stub.as_bytes());
        h.update([0]);
        h.update(self.lock.unwrap_or_default());
        h.update([0]);
        for a in self.common {
            h.update(a.as_bytes());
            h.update([0]);
        }
        h.update(self.cargo.as_bytes());
        let key: String = h.finalize()[..8]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        self.base.join(format!("deps-{key}"))
    }
}

/// Fills `target` (a fresh, empty directory) from the run's dependency cache, building
/// the cache first when there is none.
pub(crate) async fn seed(
    inputs: &CacheInputs<'_>,
    target: &Path,
    exec: Option<&Executor>,
) -> CacheUse {
    let dir = inputs.dir();
    let slot = slot_for(&dir);
    let mut guard = slot.lock().await;
    let mut rebuilt = false;
    for _ in 0..2 {
        let seal = match guard.clone() {
            Some(Slot::Ready(seal)) => seal,
            Some(Slot::Failed) => return CacheUse::Unavailable,
            None => match build(inputs, &dir, exec).await {
                Some(seal) => {
                    let seal = Arc::new(seal);
                    *guard = Some(Slot::Ready(seal.clone()));
                    if copy_sealed(&seal, target).is_ok() {
                        return if rebuilt {
                            CacheUse::Rebuilt
                        } else {
                            CacheUse::Built
                        };
                    }
                    // Changed between sealing and copying: nothing to trust.
                    *guard = Some(Slot::Failed);
                    let _ = std::fs::remove_dir_all(target);
                    let _ = std::fs::create_dir_all(target);
                    return CacheUse::Unavailable;
                }
                None => {
                    *guard = Some(Slot::Failed);
                    return CacheUse::Unavailable;
                }
            },
        };
        if copy_sealed(&seal, target).is_ok() {
            return if rebuilt {
                CacheUse::Rebuilt
            } else {
                CacheUse::Reused
            };
        }
        // A cache file no longer matches its seal: somebody wrote it. Discard all of
        // it, and what was already copied, and build it again from scratch.
        tracing::warn!(cache = %dir.display(), "dependency cache failed its seal; rebuilding");
        *guard = None;
        rebuilt = true;
        let _ = std::fs::remove_dir_all(&dir);
        let _ = std::fs::remove_dir_all(target);
        let _ = std::fs::create_dir_all(target);
    }
    CacheUse::Unavailable
}

/// Builds the stub's dependencies in `dir` and seals the result.
async fn build(inputs: &CacheInputs<'_>, dir: &Path, exec: Option<&Executor>) -> Option<Seal> {
    // Whatever is on disk was not sealed by this process: start clean.
    let _ = std::fs::remove_dir_all(dir);
    let stub = dir.join("stub");
    std::fs::create_dir_all(&stub).ok()?;
    std::fs::write(stub.join("Cargo.toml"), inputs.stub).ok()?;
    std::fs::write(stub.join("lib.rs"), "").ok()?;
    std::fs::write(stub.join("build.rs"), "fn main() {}\n").ok()?;
    if let Some(lock) = inputs.lock {
        std::fs::write(stub.join("Cargo.lock"), lock).ok()?;
    }
    let target = dir.join("target");
    let mut argv = vec![inputs.cargo.to_string(), "test".into(), "--no-run".into()];
    argv.extend(inputs.common.iter().cloned());
    argv.extend([
        "--manifest-path".into(),
        stub.join("Cargo.toml").display().to_string(),
        "--target-dir".into(),
        target.display().to_string(),
    ]);
    let ran = runner::run(exec, dir, argv, BUILD_WALL_SECS).await;
    if !ran.ok() {
        tracing::debug!(output = %ran.output.render(), "dependency cache build failed");
        return None;
    }
    seal(&target).ok()
}

/// Hashes every regular file under `target`.
fn seal(target: &Path) -> std::io::Result<Seal> {
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
                    mode: meta.permissions().mode(),
                    modified: meta.modified()?,
                });
            }
        }
    }
    Ok(Seal {
        target: target.to_path_buf(),
        files,
    })
}

/// Copies the sealed files into `dst`, each checked against its seal, with the
/// sealed mode and modification time (cargo judges freshness by them).
fn copy_sealed(seal: &Seal, dst: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    for f in &seal.files {
        let bytes = std::fs::read(seal.target.join(&f.rel))?;
        let digest: [u8; 32] = Sha256::digest(&bytes).into();
        if digest != f.sha256 {
            return Err(std::io::Error::other(format!(
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
}

//! The dependency cache of workspace-form gates: third-party crates compiled once,
//! reused by later gates — of the same run, and of later runs and other processes
//! through the shared store ([`shared`]) — never trusted on faith.
//!
//! How it stays trustworthy:
//! - **Built without the agent's code.** A cache is the target directory of a stub
//!   package of the harness's own ([`super::manifest::stub_manifest`]): an empty
//!   library, the agent's *registry* dependencies only, the agent's `Cargo.lock` for
//!   the versions. Path and git dependencies, `[patch]` and the agent's build script
//!   are not part of it, so only cargo, rustc and registry crates (checked against
//!   their lockfile checksums) ever run with the cache writable. It is built in the
//!   sandbox with the cache directory as its only writable place.
//! - **Sealed, then copied.** When the build ends (the sandbox torn down, nothing of it
//!   left running) the harness hashes every file of the cache into a seal ([`seal`]).
//!   A gate never builds *in* a cache: it gets a fresh target directory into which the
//!   harness copies the sealed files, checking each file's SHA-256 as it copies. The
//!   subject's own artifacts and its build script's outputs are therefore rebuilt
//!   every gate, in a directory no later gate reads.
//! - **Out of reach, and checked anyway.** The caches lie under the harness's cache
//!   directory, never inside a gate's writable directory, and the shared store is
//!   hidden from every sandbox, so a gate's build script cannot even see it. Where
//!   there is no sandbox (a gate checked outside a run, or a floor backend) a build
//!   script could write the run's cache; the seal catches that: a file that no longer
//!   matches makes the harness discard the cache and build a new one, and the gate
//!   never uses what it found. Such gates never use the shared store.
//! - **Keyed by what it was built from** ([`key`]): the resolved lock entries, the
//!   toolchain, the gate's cargo settings and the build environment.
//!
//! A shared entry is used only when the gate's sandbox confines writes, the
//! resolution consists of registry packages with `Cargo.lock` checksums, and the
//! contract's `dep_cache_max` is not zero; otherwise the gate uses a cache of its run
//! (sealed in memory, dropped when the run ends) and its summary says why.

mod evict;
mod key;
mod seal;
mod shared;

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use sha2::{Digest, Sha256};

pub use evict::DEFAULT_MAX_BYTES;
pub(crate) use key::has_local_deps;
use seal::{Seal, copy_sealed};
use shared::{Filled, Found, Store};

use crate::exec::Executor;
use crate::verify::rust_gate::runner;

/// Wall-clock limit of the dependency build.
const BUILD_WALL_SECS: u64 = 900;

/// What a run's cache slot holds.
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

/// Shared keys whose build resolved to something the key does not cover: this
/// process keeps them in its runs' caches.
fn unshareable() -> &'static Mutex<HashSet<String>> {
    static KEYS: OnceLock<Mutex<HashSet<String>>> = OnceLock::new();
    KEYS.get_or_init(Default::default)
}

/// Forgets every run cache under `base` (a run's gate directory that is being
/// removed). The shared store is not under it and stays.
pub(crate) fn forget_under(base: &Path) {
    let mut map = match slots().lock() {
        Ok(m) => m,
        Err(p) => p.into_inner(),
    };
    map.retain(|k, _| !k.starts_with(base));
}

/// Where the gate's dependencies came from, for its summary and the bench.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum CacheUse {
    /// A shared entry, verified and copied in.
    SharedHit,
    /// Built into a new shared entry by this gate, then copied in.
    SharedBuilt,
    /// A shared entry failed its seal: discarded, rebuilt and shared again.
    SharedRebuilt,
    /// Built by this gate into the run's cache (why it is not shared).
    Built(String),
    /// An earlier gate's run cache, verified and copied in (why not shared).
    Reused(String),
    /// A run cache file did not match its seal: discarded and rebuilt (why not shared).
    Rebuilt(String),
    /// The dependency build failed; the gate builds its dependencies itself.
    Unavailable,
}

impl CacheUse {
    /// Words for a gate's summary.
    pub(crate) fn describe(&self) -> String {
        match self {
            Self::SharedHit => "shared cache hit".into(),
            Self::SharedBuilt => "built and shared".into(),
            Self::SharedRebuilt => {
                "shared cache entry failed its seal: discarded, rebuilt and shared".into()
            }
            Self::Built(why) => format!("built into the run's cache (not shared: {why})"),
            Self::Reused(why) => format!("reused from the run's cache (not shared: {why})"),
            Self::Rebuilt(why) => {
                format!("cache failed its seal, discarded and rebuilt (not shared: {why})")
            }
            Self::Unavailable => "built by the gate itself (no cache)".into(),
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
    /// The rustc binary.
    pub rustc: &'a str,
}

impl CacheInputs<'_> {
    /// The run cache's directory.
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

/// A shared entry's key and what it covers.
struct SharedKey {
    key: String,
    locked: std::collections::BTreeSet<key::LockEntry>,
    store: Store,
    max: u64,
}

/// Whether this gate may use the shared store, and under which key.
fn shared_key(inputs: &CacheInputs<'_>, exec: Option<&Executor>) -> Result<SharedKey, String> {
    let exec = exec.ok_or("no sandbox confines the build")?;
    if !exec.confines_writes() {
        return Err(format!(
            "the {} backend does not confine the build's writes",
            exec.backend()
        ));
    }
    let max = exec.dep_cache_max().unwrap_or(DEFAULT_MAX_BYTES);
    if max == 0 {
        return Err("dep_cache_max is 0".into());
    }
    let lock = inputs.lock.ok_or("no Cargo.lock")?;
    let locked = key::locked_entries(inputs.stub, lock)?;
    let toolchain =
        key::toolchain(inputs.rustc, inputs.cargo).ok_or("the toolchain's version is unknown")?;
    let root = crate::exec::dep_cache_dir();
    let env = exec.passed_env();
    let configs = key::cargo_configs(root.parent().unwrap_or(&root), &env);
    let key = key::KeyParts {
        stub: inputs.stub,
        locked: &locked,
        toolchain: &toolchain,
        common: inputs.common,
        env: &env,
        configs: &configs,
    }
    .key();
    let refused = unshareable()
        .lock()
        .map(|s| s.contains(&key))
        .unwrap_or(true);
    if refused {
        return Err("cargo resolved packages the Cargo.lock does not pin".into());
    }
    Ok(SharedKey {
        key,
        locked,
        store: Store::at(root),
        max,
    })
}

/// Fills `target` (a fresh, empty directory) with the gate's dependencies: from the
/// shared store when the gate may use it, else from the run's cache; building the
/// cache first when there is none.
pub(crate) async fn seed(
    inputs: &CacheInputs<'_>,
    target: &Path,
    exec: Option<&Executor>,
) -> CacheUse {
    match shared_key(inputs, exec) {
        Ok(k) => match seed_shared(&k, inputs, target, exec).await {
            Ok(used) => used,
            Err(why) => seed_run(inputs, target, exec, why).await,
        },
        Err(why) => seed_run(inputs, target, exec, why).await,
    }
}

/// [`seed`] from the shared store. `Err` (why) sends the gate to the run's cache.
async fn seed_shared(
    k: &SharedKey,
    inputs: &CacheInputs<'_>,
    target: &Path,
    exec: Option<&Executor>,
) -> Result<CacheUse, String> {
    let io = |e: std::io::Error| format!("the shared cache is not usable: {e}");
    for d in [&k.store.root, &k.store.fill] {
        std::fs::create_dir_all(d).map_err(io)?;
    }
    {
        let _shared = shared::lock(&k.store, &k.key, false).await.map_err(io)?;
        if let Found::Copied = shared::copy_entry(&k.store, &k.key, target) {
            return Ok(CacheUse::SharedHit);
        }
    }
    let held = shared::lock(&k.store, &k.key, true).await.map_err(io)?;
    // Looked at again under the exclusive lock: another filler may have just finished.
    let broken = match shared::copy_entry(&k.store, &k.key, target) {
        Found::Copied => return Ok(CacheUse::SharedHit),
        Found::Missing => false,
        Found::Broken(why) => {
            tracing::warn!(key = %k.key, %why, "shared dependency cache entry failed its seal; rebuilding");
            let _ = std::fs::remove_dir_all(k.store.entry(&k.key));
            true
        }
    };
    let used = match shared::fill(&k.store, &k.key, &k.locked, inputs, exec).await {
        Filled::Failed => CacheUse::Unavailable,
        Filled::Private(sealed, why) => {
            if let Ok(mut s) = unshareable().lock() {
                s.insert(k.key.clone());
            }
            let copied = copy_sealed(&sealed, target);
            shared::discard_private(&sealed);
            if copied.is_err() {
                let _ = std::fs::remove_dir_all(target);
                let _ = std::fs::create_dir_all(target);
                return Ok(CacheUse::Unavailable);
            }
            return Ok(CacheUse::Built(why));
        }
        Filled::Shared => match shared::copy_entry(&k.store, &k.key, target) {
            Found::Copied if broken => CacheUse::SharedRebuilt,
            Found::Copied => CacheUse::SharedBuilt,
            _ => CacheUse::Unavailable,
        },
    };
    drop(held);
    evict::evict(&k.store, k.max, &k.key);
    Ok(used)
}

/// [`seed`] from the run's cache (sealed in memory); `why` the shared store was not
/// used.
async fn seed_run(
    inputs: &CacheInputs<'_>,
    target: &Path,
    exec: Option<&Executor>,
    why: String,
) -> CacheUse {
    let dir = inputs.dir();
    let slot = slot_for(&dir);
    let mut guard = slot.lock().await;
    let mut rebuilt = false;
    for _ in 0..2 {
        let (seal, fresh) = match guard.clone() {
            Some(Slot::Ready(seal)) => (seal, false),
            Some(Slot::Failed) => return CacheUse::Unavailable,
            None => {
                // Whatever is on disk was not sealed by this process: start clean.
                let _ = std::fs::remove_dir_all(&dir);
                match build_stub(inputs, &dir, exec).await {
                    Some(seal) => {
                        let seal = Arc::new(seal);
                        *guard = Some(Slot::Ready(seal.clone()));
                        (seal, true)
                    }
                    None => {
                        *guard = Some(Slot::Failed);
                        return CacheUse::Unavailable;
                    }
                }
            }
        };
        if copy_sealed(&seal, target).is_ok() {
            return match (rebuilt, fresh) {
                (true, _) => CacheUse::Rebuilt(why),
                (false, true) => CacheUse::Built(why),
                (false, false) => CacheUse::Reused(why),
            };
        }
        let _ = std::fs::remove_dir_all(target);
        let _ = std::fs::create_dir_all(target);
        if fresh {
            // Changed between sealing and copying: nothing to trust.
            *guard = Some(Slot::Failed);
            return CacheUse::Unavailable;
        }
        // A cache file no longer matches its seal: somebody wrote it. Discard all of
        // it, and what was already copied, and build it again from scratch.
        tracing::warn!(cache = %dir.display(), "dependency cache failed its seal; rebuilding");
        *guard = None;
        rebuilt = true;
    }
    CacheUse::Unavailable
}

/// Builds the stub's dependencies in `dir` (created, empty or not yet there; the
/// build's only writable place) and seals the result.
pub(crate) async fn build_stub(
    inputs: &CacheInputs<'_>,
    dir: &Path,
    exec: Option<&Executor>,
) -> Option<Seal> {
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
    seal::seal(&target).ok()
}

//! The operator's files a contract depends on, read from disk: criterion files kept by
//! content, a command gate's script pinned by hash, and the gate files the policy
//! protects. These are the contract's only reads of the filesystem, so they live here,
//! beside the task-file loader, and the contract types stay plain data.
//!
//! A run keeps by content every file outside its workspace that a later session needs
//! (a scripted provider's script, a Rust gate's criterion; [`TaskContract::keep_operator_files`]),
//! in the contract it stores: a resume then needs only the store, from any directory,
//! after the checkout moved, or on another machine. Paths stay as provenance.

use std::path::{Path, PathBuf};

use crate::contract::{
    ContractError, OperatorFile, PinnedFile, TaskContract, Verification, relative_inside,
};

/// The largest operator file a run keeps by content (a long recorded script is a few
/// MiB): the store holds it with the run's contract, so it is bounded like every
/// other stored text.
pub const MAX_KEPT_FILE_BYTES: u64 = 16 * 1024 * 1024;

impl OperatorFile {
    /// Reads `path` now (made absolute against the current directory), with its hash.
    pub fn read(path: impl Into<PathBuf>) -> std::io::Result<Self> {
        let path = path.into();
        let path = std::path::absolute(&path).unwrap_or(path);
        let len = std::fs::metadata(&path)?.len();
        if len > MAX_KEPT_FILE_BYTES {
            return Err(std::io::Error::other(format!(
                "{len} bytes, more than the {MAX_KEPT_FILE_BYTES} an operator file may have"
            )));
        }
        let source = std::fs::read_to_string(&path)?;
        let sha256 = Some(crate::digest::sha256_hex(source.as_bytes()));
        Ok(Self {
            path,
            source,
            sha256,
        })
    }
}

/// Reads the operator file `path` for the contract key `key`, the error naming both.
fn keep(key: &str, path: &Path) -> Result<OperatorFile, ContractError> {
    OperatorFile::read(path).map_err(|e| ContractError::Field {
        key: key.into(),
        message: format!("cannot keep {}: {e}", path.display()),
    })
}

impl Verification {
    /// A workspace-form Rust gate: `cargo test` of the crate at `manifest` (relative
    /// to the workspace root) against the criterion files, which are read now.
    pub fn cargo_test<I, P>(manifest: impl Into<PathBuf>, criteria: I) -> std::io::Result<Self>
    where
        I: IntoIterator<Item = P>,
        P: Into<PathBuf>,
    {
        Ok(Self::CargoTest {
            signatures: Vec::new(),
            manifest: manifest.into(),
            criteria: criteria
                .into_iter()
                .map(OperatorFile::read)
                .collect::<std::io::Result<_>>()?,
            baseline_manifests: None,
        })
    }

    /// Pins, for a command criterion, its script in the workspace at `root` (see
    /// [`Verification::Command::pinned`]: the content hash now); other criteria are
    /// unchanged.
    pub fn pin_command_files(mut self, root: &Path) -> Self {
        if let Self::Command { argv, pinned, .. } = &mut self {
            *pinned = pin_files(argv, root);
        }
        self
    }

    /// Operator files of this criterion that lie inside the workspace at `root`, as
    /// paths relative to it: a workspace-form gate's criteria and the files a command
    /// names (pinned or present now). The policy denies the agent's writes to them.
    pub fn operator_files_in(&self, root: &Path) -> Vec<PathBuf> {
        match self {
            Self::CargoTest { criteria, .. } => criteria
                .iter()
                .filter_map(|c| relative_to(&c.path, root))
                .collect(),
            // Pinned or not (a command built in code), a file the command names.
            Self::Command { argv, pinned, .. } => {
                let mut files: Vec<PathBuf> = pinned.iter().map(|p| p.path.clone()).collect();
                for p in pin_files(argv, root) {
                    if !files.contains(&p.path) {
                        files.push(p.path);
                    }
                }
                files
            }
            _ => Vec::new(),
        }
    }
}

/// The manifests of the crate at `manifest` (workspace-relative) as they are now: its
/// own and each `Cargo.toml` above it up to the workspace root, with relative paths. A
/// file that does not exist yet is simply not in the list (the baseline then says the
/// crate linked nothing locally).
fn baseline_manifests(root: &Path, manifest: &Path) -> Result<Vec<OperatorFile>, ContractError> {
    let mut kept = Vec::new();
    let mut rel = Some(manifest.to_path_buf());
    while let Some(r) = rel {
        let full = root.join(&r);
        if full.is_file() {
            let mut file = keep("verify.cargo_test", &full)?;
            file.path = r.clone();
            kept.push(file);
        }
        rel = r
            .parent()
            .and_then(Path::parent)
            .map(|up| up.join("Cargo.toml"));
    }
    Ok(kept)
}

impl TaskContract {
    /// Keeps by content the files outside the workspace a later session of the run
    /// needs: each scripted provider's script and each Rust gate's criterion (a
    /// workspace-form gate's criteria are kept when built). Done once, when the run
    /// starts; a file already kept is left as it is, so a resumed or child run keeps
    /// what its start kept. Fails naming the key when a file cannot be read or is too
    /// large to keep.
    pub fn keep_operator_files(&mut self) -> Result<(), ContractError> {
        for (i, p) in self.providers.iter_mut().enumerate() {
            if let (Some(path), None) = (&p.script, &p.script_source) {
                let key = if i == 0 {
                    "provider.script".to_string()
                } else {
                    format!("provider.fallback[{}].script", i - 1)
                };
                let kept = keep(&key, path)?;
                p.script = Some(kept.path.clone());
                p.script_source = Some(kept);
            }
        }
        for v in &mut self.verify.criteria {
            if let Verification::Rust {
                criterion,
                criterion_source: kept @ None,
                ..
            } = v
            {
                *kept = Some(keep("verify.rust", criterion)?);
            }
            if let Verification::CargoTest {
                manifest,
                baseline_manifests: kept @ None,
                ..
            } = v
            {
                *kept = Some(baseline_manifests(&self.root, manifest)?);
            }
        }
        Ok(())
    }

    /// What the policy takes from this contract ([`crate::policy::TaskInputs`]).
    pub fn policy_inputs(&self) -> crate::policy::TaskInputs<'_> {
        let operator_programs = self
            .verify
            .criteria
            .iter()
            .filter_map(|v| match v {
                Verification::Command { argv, .. } => argv.first().cloned(),
                _ => None,
            })
            .collect();
        crate::policy::TaskInputs {
            policy: &self.policy,
            instructions: self.instructions.as_deref(),
            gate_files: self.gate_files(),
            operator_programs,
        }
    }

    /// Makes `root` absolute and canonical (it must exist).
    pub fn resolve_root(&mut self) -> Result<(), crate::contract::ContractError> {
        let canon = std::fs::canonicalize(&self.root).map_err(|e| {
            crate::contract::ContractError::Field {
                key: "root".into(),
                message: format!("{}: {e}", self.root.display()),
            }
        })?;
        self.root = canon;
        Ok(())
    }

    /// Every operator file inside the workspace that some criterion depends on,
    /// relative to the root: what the policy's built-in layer protects from writes.
    pub fn gate_files(&self) -> Vec<PathBuf> {
        let mut files: Vec<PathBuf> = Vec::new();
        for v in &self.verify.criteria {
            for f in v.operator_files_in(&self.root) {
                if !files.contains(&f) {
                    files.push(f);
                }
            }
        }
        files
    }
}

/// `path` relative to `root` when it lies inside (compared as given, then canonical).
fn relative_to(path: &Path, root: &Path) -> Option<PathBuf> {
    if let Ok(r) = path.strip_prefix(root) {
        return Some(r.to_path_buf());
    }
    let (p, r) = (path.canonicalize().ok()?, root.canonicalize().ok()?);
    p.strip_prefix(&r).ok().map(Path::to_path_buf)
}

/// Extensions of script files a command gate may run through an interpreter.
const SCRIPT_EXTENSIONS: &[&str] = &[
    "sh", "bash", "zsh", "py", "js", "mjs", "cjs", "ts", "rb", "pl", "php", "lua", "ps1",
];

/// The gate's own script among `argv`, hashed: the program itself when it is a
/// workspace file (`./check.sh`), and any argument naming a workspace file with a
/// script extension (`sh check.sh`, `python3 tests/check.py`). Other files a command
/// names (`--manifest-path Cargo.toml`) are the agent's to change and are not pinned.
fn pin_files(argv: &[String], root: &Path) -> Vec<PinnedFile> {
    let canon_root = root.canonicalize().ok();
    let mut out: Vec<PinnedFile> = Vec::new();
    for (i, a) in argv.iter().enumerate() {
        if a.is_empty() || !relative_inside(Path::new(a.as_str())) {
            continue;
        }
        let script = Path::new(a.as_str())
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| SCRIPT_EXTENSIONS.contains(&e));
        if i > 0 && !script {
            continue;
        }
        // `./check.sh` and `check.sh` are the same file, pinned as the latter.
        let rel: PathBuf = Path::new(a.as_str())
            .components()
            .filter(|c| matches!(c, std::path::Component::Normal(_)))
            .collect();
        let rel = rel.as_path();
        let full = root.join(rel);
        let inside = full
            .canonicalize()
            .ok()
            .zip(canon_root.as_ref())
            .is_some_and(|(f, r)| f.starts_with(r));
        let Ok(meta) = std::fs::symlink_metadata(&full) else {
            continue;
        };
        if !inside || !meta.is_file() || out.iter().any(|p| p.path == rel) {
            continue;
        }
        if let Ok(bytes) = std::fs::read(&full) {
            out.push(PinnedFile {
                path: rel.to_path_buf(),
                sha256: crate::digest::sha256_hex(&bytes),
            });
        }
    }
    out
}

impl crate::policy::Policy {
    /// [`Policy::for_task`](crate::policy::Policy::for_task) with the inputs of
    /// `contract` ([`TaskContract::policy_inputs`]).
    pub fn for_contract(contract: &TaskContract) -> Result<Self, crate::policy::PolicyError> {
        Self::for_task(&contract.policy_inputs())
    }
}

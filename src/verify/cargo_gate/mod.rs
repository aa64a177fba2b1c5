//! The workspace form of a Rust gate (`cargo_test` in a task file,
//! [`Verification::CargoTest`](crate::contract::Verification::CargoTest) in code): `cargo test
//! --offline` on the agent's crate, with criterion tests the harness places where the
//! agent cannot edit them, in ordered phases like the file form ([`super::rust_gate`]):
//!
//! 1. **Placing.** The workspace is copied into the gate's own directory under the
//!    harness's cache (module `copy`: no `target/`, `.cargo/`, `.git/`, masked secrets or
//!    symbolic links). Each criterion — the operator's copy kept in the contract, not
//!    the file on disk — is written *outside* that copy, to a directory the compile
//!    sees read-only, under a target name the agent cannot predict. The manifest of
//!    the copy is rewritten to declare those targets itself (module `manifest`), so
//!    `autotests = false`, `[[test]] harness = false` or weakened profiles in the
//!    agent's manifest change nothing. A manifest that is not a package's fails
//!    `subject-compile`.
//! 2. **`criterion-compile` / `subject-compile`.** One `cargo test --no-run --offline
//!    --test <each criterion>` in the sandbox, whose only writable directory holds the
//!    copy and a fresh target directory seeded from the run's dependency cache
//!    (module `cache`, which says how it stays trustworthy). When it fails, `cargo build` of the crate alone tells the two
//!    phases apart: the crate (its library, binaries or build script) does not build
//!    → `subject-compile`; it builds but a criterion does not compile against it →
//!    `criterion-compile`.
//! 3. **`test-run`.** The tests are listed from the criterion sources before anything
//!    runs (the agent cannot add, rename or hide one). The build's sandbox session is
//!    over by then — its processes (a build script's leftovers included) ended with it
//!    — so the test binary, identified by its target name (exactly one candidate), is
//!    copied out of the target directory into the gate's own directory, hashed, and
//!    only that copy runs, its hash checked before every test. Each test runs alone
//!    by exact name with `--include-ignored` — an `#[ignore]` a build script or macro
//!    slipped in hides nothing — in a fresh directory with its own copy of the
//!    binary. It passes only when its process exits 0 with no cap hit, libtest
//!    reports one test running and that very test ok, *and* the harness's verdict
//!    channel (the file form's module `channel`, compiled into the placed criteria
//!    with a per-gate nonce) says the test function returned. A criterion with no
//!    tests never passes. The placed criteria carry the file form's guard too
//!    (prelude, primitives and invoked std macros pinned over glob imports), and the
//!    contract's pinned signatures are checked in the first one's copy.
//!
//! The verdict's channel is the harness's own code in the test process and the
//! harness's checks (the list from the operator's source, the binary's hash, the
//! one-test report), not files the build could write: a build script that writes a
//! "passing" result anywhere — its `OUT_DIR`, the target directory, the copy —
//! writes into a directory no part of the verdict reads.
//!
//! **Known limits.** (1) The agent's code is linked into the criterion's test process
//! (that is the point), and build-time code (build scripts, proc macros) runs in the
//! compile's sandbox session, where the placed criteria — and so the nonce — are
//! readable. Code of the agent's can therefore carry the nonce into the process that
//! writes the verdict, or replace the binary during the build with one that carries
//! it; forging the verdict that way is possible, which is why a pass is recorded at
//! trust level `harness-channel` and no higher. An `ok` line, an early exit or a
//! binary swapped without the nonce fails. (2) Each test runs in the package's directory of the crate copy (writable, as under
//! `cargo test`, with `CARGO_MANIFEST_DIR` set to it at run time too); only that
//! package's directory is visible, not the rest of a workspace copy. (3) The crate must build offline
//! from the local registry.

mod baseline;
mod cache;
mod copy;
mod manifest;
mod overrides;

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::rust_gate::{
    GateDir, GateVerdict, Phase, random_hex, run_one, runner, rustc, s, scan, signatures,
    tests_to_run,
};
use crate::contract::OperatorFile;
use crate::exec::Executor;
use crate::tools::Workspace;

pub(crate) use cache::forget_under;

/// Wall-clock limit of one cargo build of the crate.
const COMPILE_WALL_SECS: u64 = 900;

/// Beyond the file form's guard: a glob import of the crate cannot bring in an
/// attribute named `test` either.
const TEST_ATTR_GUARD: &str = "#[allow(unused_imports)]\nuse ::std::prelude::v1::test;\n";

/// The cargo of the active toolchain (`<sysroot>/bin/cargo`), so neither the rustup
/// proxy nor a `rust-toolchain.toml` of the agent's chooses the toolchain.
fn cargo() -> String {
    let rustc = rustc();
    let p = Path::new(&rustc);
    match p.parent().map(|b| b.join("cargo")) {
        Some(c) if p.is_absolute() && c.is_file() => c.display().to_string(),
        _ => "cargo".to_string(),
    }
}

/// The arguments every cargo call of a gate shares: offline, no colour, the
/// toolchain's own rustc and rustdoc, assertions on in the test profile whatever the
/// agent's workspace says, no incremental state.
fn common_args() -> Vec<String> {
    let rustc = rustc();
    let rustdoc = Path::new(&rustc).with_file_name("rustdoc");
    let quote = |p: &str| toml::Value::String(p.to_string()).to_string();
    let mut args: Vec<String> = vec!["--offline".into(), "--color".into(), "never".into()];
    let mut config = vec![format!("build.rustc={}", quote(&rustc))];
    if rustdoc.is_absolute() && rustdoc.is_file() {
        config.push(format!("build.rustdoc={}", quote(&s(&rustdoc))));
    }
    for profile in ["dev", "test"] {
        config.push(format!("profile.{profile}.debug-assertions=true"));
        config.push(format!("profile.{profile}.overflow-checks=true"));
        config.push(format!("profile.{profile}.incremental=false"));
    }
    for c in config {
        args.push("--config".into());
        args.push(c);
    }
    args
}

/// Runs the workspace-form gate for the crate at `manifest` (workspace-relative).
/// `baseline` holds the crate's manifests as they were when the run started (see
/// `baseline`).
pub async fn check(
    manifest: &Path,
    criteria: &[OperatorFile],
    pinned: &[String],
    baseline: Option<&[OperatorFile]>,
    ws: &Workspace,
    exec: Option<&Executor>,
) -> GateVerdict {
    let dir = match GateDir::create(exec) {
        Ok(d) => d,
        Err(e) => {
            return GateVerdict::fail(
                Phase::SubjectCompile,
                format!("cannot create the gate directory: {e}"),
                None,
            );
        }
    };
    let operator = Operator {
        criteria,
        pinned,
        baseline,
    };
    let verdict = phases(manifest, operator, ws, exec, &dir.0).await;
    drop(dir);
    verdict
}

/// One criterion file as placed by the gate.
struct Placed {
    /// The target name (`io_harness_criterion_<random>_<i>`).
    name: String,
    /// Where the operator's file was read.
    origin: PathBuf,
    /// Its tests, listed from the operator's source.
    tests: Vec<String>,
    /// How many more tests its macros write at least.
    macro_tests: usize,
    /// The text placed (the operator's source, guard and verdict channel).
    text: String,
    /// The pinned signatures' check, when this copy holds it.
    sig: Option<signatures::Check>,
}

/// A failed phase ends the gate with its verdict.
type Step<T> = Result<T, GateVerdict>;

fn fail_subject(m: String) -> GateVerdict {
    GateVerdict::fail(Phase::SubjectCompile, m, None)
}

/// The gate's directories: `rw` (the sandbox's only writable one) holds the copy
/// (`src`) and the target directory; the criteria sit beside it, read-only to the
/// build.
struct Layout {
    rw: PathBuf,
    src: PathBuf,
    target: PathBuf,
    criteria: PathBuf,
}

impl Layout {
    fn create(dir: &Path) -> Step<Self> {
        let rw = dir.join("rw");
        let layout = Self {
            src: rw.join("src"),
            target: rw.join("target"),
            criteria: dir.join("criteria"),
            rw,
        };
        for d in [&layout.src, &layout.target, &layout.criteria] {
            if let Err(e) = std::fs::create_dir_all(d) {
                return Err(fail_subject(format!("gate directory: {e}")));
            }
        }
        Ok(layout)
    }
}

/// (target name, criterion file) of each placed criterion.
type Targets = Vec<(String, String)>;

/// What placing produced: the copy, the criteria outside it, the rewritten manifest.
struct Placement {
    copied: copy::Copied,
    /// The copy's manifest of the crate (rewritten).
    manifest_path: PathBuf,
    /// The agent's manifest as it was.
    agent_manifest: String,
    placed: Vec<Placed>,
    targets: Targets,
    /// The gate's verdict-channel nonce (in the placed criteria only).
    nonce: String,
}

/// What the operator gave the gate: the criteria, the signatures the crate must have,
/// and the crate's manifests as they were when the run started.
#[derive(Clone, Copy)]
struct Operator<'a> {
    criteria: &'a [OperatorFile],
    pinned: &'a [String],
    baseline: Option<&'a [OperatorFile]>,
}

async fn phases(
    manifest_rel: &Path,
    operator: Operator<'_>,
    ws: &Workspace,
    exec: Option<&Executor>,
    dir: &Path,
) -> GateVerdict {
    match run_phases(manifest_rel, operator, ws, exec, dir).await {
        Ok(v) | Err(v) => v,
    }
}

async fn run_phases(
    manifest_rel: &Path,
    operator: Operator<'_>,
    ws: &Workspace,
    exec: Option<&Executor>,
    dir: &Path,
) -> Step<GateVerdict> {
    let layout = Layout::create(dir)?;
    // 1. Placing: the copy, the criteria outside it, the rewritten manifest.
    let placement = place(manifest_rel, operator, ws, exec, &layout)?;
    // The run's dependency cache, copied (verified) into this gate's target directory.
    let cargo = CargoCall {
        cargo: cargo(),
        common: common_args(),
        manifest_path: placement.manifest_path.clone(),
        target: layout.target.clone(),
    };
    let deps = seed_dependencies(manifest_rel, &placement, &layout, &cargo, exec, dir).await?;
    // 2. Compile the crate and the criteria together; on failure, say whose it was.
    compile(&placement, &layout, &cargo, exec).await?;
    check_intact(&placement)?;
    // 3. Each listed test, alone, by exact name, ignored ones included.
    run_tests(&placement, &layout, exec, dir, &deps).await
}

/// Copies the workspace, writes each criterion outside the copy under an
/// unpredictable target name, and rewrites the copy's manifest to declare them.
fn place(
    manifest_rel: &Path,
    operator: Operator<'_>,
    ws: &Workspace,
    exec: Option<&Executor>,
    layout: &Layout,
) -> Step<Placement> {
    // The workspace as it is now: a secret moved or written since the last session is
    // left out of the gate's copy too.
    let masked: Vec<PathBuf> = match exec.map(Executor::refresh_masks_blocking) {
        Some(Ok(m)) => m,
        Some(Err(e)) => return Err(fail_subject(format!("cannot copy the workspace: {e}"))),
        None => Vec::new(),
    };
    let copied = copy::copy_workspace(ws.root(), &layout.src, &masked)
        .map_err(|e| fail_subject(format!("cannot copy the workspace: {e}")))?;
    let manifest_path = layout.src.join(manifest_rel);
    let agent_manifest = std::fs::read_to_string(&manifest_path)
        .map_err(|e| fail_subject(format!("{}: {e}", manifest_rel.display())))?;
    let Operator {
        criteria, pinned, ..
    } = operator;
    refuse_overrides(manifest_rel, &agent_manifest, operator, &layout.src)?;
    let nonce = random_hex();
    let sigs = if pinned.is_empty() {
        None
    } else {
        let krate = manifest::lib_crate_name(&agent_manifest).ok_or_else(|| {
            fail_subject(format!(
                "{}: no package or library name, so the pinned signatures cannot be checked",
                manifest_rel.display()
            ))
        })?;
        Some((krate, pinned))
    };
    let (placed, targets) = place_criteria(criteria, &layout.criteria, &nonce, sigs)?;
    let gate_manifest = manifest::gate_manifest(&agent_manifest, &targets)
        .map_err(|e| fail_subject(format!("{}: {e}", manifest_rel.display())))?;
    if let Err(e) = std::fs::write(&manifest_path, gate_manifest) {
        return Err(fail_subject(format!("gate directory: {e}")));
    }
    Ok(Placement {
        copied,
        manifest_path,
        agent_manifest,
        placed,
        targets,
        nonce,
    })
}

/// Refuses, before anything builds, a manifest (the crate's or its workspace root's)
/// that would hand the criteria another crate than the one they link (see
/// `overrides`).
fn refuse_overrides(
    manifest_rel: &Path,
    agent_manifest: &str,
    Operator {
        criteria, baseline, ..
    }: Operator<'_>,
    src: &Path,
) -> Step<()> {
    let sources: Vec<&str> = criteria.iter().map(|c| c.source.as_str()).collect();
    let linked = overrides::linked(&sources);
    let crate_manifest = manifest_rel.display().to_string();
    let root = workspace_root_manifest(src, manifest_rel);
    let why = overrides::refused(agent_manifest, &linked, &crate_manifest)
        .or_else(|| {
            root.as_ref().and_then(|(_, text)| {
                overrides::refused(text, &linked, "the workspace's Cargo.toml")
            })
        })
        .or_else(|| {
            let baseline = baseline?;
            let now = baseline::Manifests {
                crate_rel: manifest_rel,
                crate_text: agent_manifest,
                root: root.as_ref().and_then(|(p, text)| {
                    Some((p.strip_prefix(src).ok()?.to_path_buf(), text.as_str()))
                }),
            };
            let then = baseline::from_kept(manifest_rel, baseline);
            baseline::moved(&linked, &then.view(), &now)
        });
    match why {
        Some(why) => Err(fail_subject(format!("refused before the build: {why}"))),
        None => Ok(()),
    }
}

/// The text of a placed criterion: the operator's source with the guard and the
/// verdict channel of the gate's `nonce` (see the file form), and the attribute guard.
fn criterion_text(c: &OperatorFile, nonce: &str) -> String {
    format!(
        "{}\n{TEST_ATTR_GUARD}",
        super::rust_gate::criterion_copy(&c.source, nonce)
    )
}

/// Writes each criterion into `crit_dir` as `io_harness_criterion_<random>_<i>.rs`,
/// with its tests listed from the operator's source.
fn place_criteria(
    criteria: &[OperatorFile],
    crit_dir: &Path,
    nonce: &str,
    sigs: Option<(String, &[String])>,
) -> Step<(Vec<Placed>, Targets)> {
    let stem = format!("io_harness_criterion_{}", random_hex());
    let mut placed = Vec::with_capacity(criteria.len());
    let mut targets = Vec::with_capacity(criteria.len());
    for (i, c) in criteria.iter().enumerate() {
        let name = format!("{stem}_{i}");
        let path = crit_dir.join(format!("{name}.rs"));
        let mut text = criterion_text(c, nonce);
        // The pinned signatures are checked once, in the first criterion's copy.
        let sig = match (&sigs, i) {
            (Some((krate, entries)), 0) => {
                let module = format!("__io_harness_signatures_{nonce}");
                let check = signatures::check(krate, entries, &module, text.lines().count() + 1);
                text.push_str(&check.text);
                Some(check)
            }
            _ => None,
        };
        if let Err(e) = std::fs::write(&path, &text) {
            return Err(fail_subject(format!("gate directory: {e}")));
        }
        targets.push((name.clone(), s(&path)));
        placed.push(Placed {
            name,
            origin: c.path.clone(),
            tests: scan::test_names(&c.source),
            macro_tests: scan::macro_written_tests(&c.source),
            text,
            sig,
        });
    }
    Ok((placed, targets))
}

/// Strips the workspace root's profiles and seeds the target directory from the
/// dependency cache (shared across runs, or the run's own); says where the
/// dependencies came from.
async fn seed_dependencies(
    manifest_rel: &Path,
    placement: &Placement,
    layout: &Layout,
    cargo: &CargoCall,
    exec: Option<&Executor>,
    dir: &Path,
) -> Step<String> {
    let lock = lockfile(&layout.src, manifest_rel);
    let root_manifest = workspace_root_manifest(&layout.src, manifest_rel);
    if let Some((path, text)) = &root_manifest {
        // Profiles live in the workspace root: theirs go too (package overrides
        // included, which `--config` does not reach).
        let stripped = manifest::without_profiles(text);
        if let Err(e) = stripped.and_then(|t| {
            std::fs::write(path, t).map_err(|e| manifest::ManifestError::Write(e.to_string()))
        }) {
            return Err(fail_subject(format!("workspace manifest: {e}")));
        }
    }
    let root_text = root_manifest.as_ref().map(|(_, t)| t.as_str());
    let Some(stub) = manifest::stub_manifest(&placement.agent_manifest, root_text) else {
        return Ok("none cached (no registry dependency the cache could build alone)".into());
    };
    let base = dir.parent().unwrap_or(dir).to_path_buf();
    let inputs = cache::CacheInputs {
        base: &base,
        stub: &stub,
        lock: lock.as_deref(),
        common: &cargo.common,
        cargo: &cargo.cargo,
        rustc: &rustc(),
    };
    let used = cache::seed(&inputs, &layout.target, exec).await.describe();
    Ok(if cache::has_local_deps(&placement.agent_manifest) {
        format!("{used}; path and git dependencies are never cached, the gate builds them")
    } else {
        used
    })
}

/// How the gate calls cargo on the copy.
struct CargoCall {
    cargo: String,
    common: Vec<String>,
    manifest_path: PathBuf,
    target: PathBuf,
}

impl CargoCall {
    /// `cargo <sub> <common> --manifest-path … --target-dir …`, with `--test <name>`
    /// for each placed criterion when `tests` are given.
    fn argv(&self, sub: &[&str], tests: Option<&[Placed]>) -> Vec<String> {
        let mut argv: Vec<String> = std::iter::once(self.cargo.clone())
            .chain(sub.iter().map(|a| a.to_string()))
            .chain(self.common.iter().cloned())
            .chain([
                "--manifest-path".to_string(),
                s(&self.manifest_path),
                "--target-dir".to_string(),
                s(&self.target),
            ])
            .collect();
        for p in tests.unwrap_or_default() {
            argv.push("--test".into());
            argv.push(p.name.clone());
        }
        argv
    }
}

/// `cargo test --no-run` of the crate and the criteria; when it fails, `cargo build`
/// of the crate alone says whether the crate or a criterion is at fault.
async fn compile(
    placement: &Placement,
    layout: &Layout,
    cargo: &CargoCall,
    exec: Option<&Executor>,
) -> Step<()> {
    let view = [layout.criteria.clone()];
    let argv = cargo.argv(&["test", "--no-run"], Some(&placement.placed));
    let ran = runner::run_viewing(exec, &layout.rw, &view, argv, COMPILE_WALL_SECS).await;
    if ran.ok() {
        return Ok(());
    }
    let out = ran.output.render();
    let argv = cargo.argv(&["build"], None);
    let alone = runner::run_viewing(exec, &layout.rw, &view, argv, COMPILE_WALL_SECS).await;
    let skipped = &placement.copied.skipped_links;
    let links = if skipped.is_empty() {
        String::new()
    } else {
        format!(
            " (symbolic links are not copied into the gate: {})",
            skipped
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    Err(if alone.ok() {
        signature_mismatch(placement, &out).unwrap_or_else(|| {
            GateVerdict::fail(
                Phase::CriterionCompile,
                format!(
                    "the crate builds but the criteria do not compile against it (cargo {})",
                    ran.status
                ),
                Some(out.clone()),
            )
        })
    } else {
        GateVerdict::fail(
            Phase::SubjectCompile,
            format!("the crate does not build (cargo {}){links}", alone.status),
            Some(alone.output.render()),
        )
    })
}

/// A criterion compile that failed on a line of the pinned signatures' check: the
/// crate lacks a signature the contract pins.
fn signature_mismatch(placement: &Placement, out: &str) -> Option<GateVerdict> {
    placement
        .placed
        .iter()
        .zip(&placement.targets)
        .find_map(|(p, (name, _))| {
            let failing = signatures::failing(p.sig.as_ref()?, &format!("{name}.rs"), out);
            (!failing.is_empty()).then(|| {
                GateVerdict::fail(
                    Phase::CriterionCompile,
                    signatures::mismatch(&failing),
                    Some(out.to_string()),
                )
            })
        })
}

/// What was compiled must be what the harness placed (where nothing isolates the
/// build, a build script can write the criterion files).
fn check_intact(placement: &Placement) -> Step<()> {
    for (p, (_, path)) in placement.placed.iter().zip(&placement.targets) {
        let intact = std::fs::read_to_string(path).is_ok_and(|got| got == p.text);
        if !intact {
            return Err(GateVerdict::fail(
                Phase::CriterionCompile,
                format!(
                    "criterion {} was changed during the build, so what compiled is not the \
                     operator's criterion",
                    p.origin.display()
                ),
                None,
            ));
        }
    }
    Ok(())
}

/// Each listed test of each criterion, alone, by exact name, in the binary the build
/// produced (checked by hash before every test).
async fn run_tests(
    placement: &Placement,
    layout: &Layout,
    exec: Option<&Executor>,
    dir: &Path,
    deps: &str,
) -> Step<GateVerdict> {
    let fixtures = [layout.src.clone()];
    let nonce = placement.nonce.as_str();
    let mut bins = Vec::with_capacity(placement.placed.len());
    let kept = dir.join("bins");
    std::fs::create_dir_all(&kept)
        .map_err(|e| GateVerdict::fail(Phase::TestRun, format!("gate directory: {e}"), None))?;
    for p in &placement.placed {
        // The build's sandbox session is over (its processes ended with it): the
        // binary is taken out of the target directory, hashed, and only that copy runs.
        let (bin, digest) = test_binary(&layout.target, &p.name)
            .and_then(|(built, _)| keep_binary(&built, &kept.join(&p.name)))
            .map_err(|why| GateVerdict::fail(Phase::TestRun, why, None))?;
        let tests = tests_to_run(exec, dir, &bin, (&p.tests, p.macro_tests), &fixtures).await?;
        if tests.is_empty() {
            return Err(GateVerdict::fail(
                Phase::TestRun,
                format!(
                    "criterion {} defines no #[test] functions, so nothing ran",
                    p.origin.display()
                ),
                None,
            ));
        }
        bins.push((bin, digest, tests));
    }
    let mut n = 0usize;
    let mut ran_names = Vec::new();
    for (bin, digest, tests) in &bins {
        for test in tests {
            // The binary each test runs is the one the build produced.
            if file_digest(bin).ok().as_ref() != Some(digest) {
                return Err(GateVerdict::fail(
                    Phase::TestRun,
                    format!("the criterion's test binary changed after the build (before {test})"),
                    None,
                ));
            }
            let package = placement.manifest_path.parent();
            run_one(exec, dir, bin, n, test, (&fixtures, package), nonce).await?;
            n += 1;
            ran_names.push(test.clone());
        }
    }
    Ok(GateVerdict {
        failed: None,
        summary: format!(
            "all {} criterion test(s) ran and passed: {} (dependencies: {deps})",
            ran_names.len(),
            ran_names.join(", ")
        ),
        output: None,
        // Every test passed through the harness's verdict channel.
        trust: Some(crate::verify::Trust::HarnessChannel),
        tests: Some(crate::verify::TestTally {
            run: ran_names.len() as u32,
            passed: ran_names.len() as u32,
            names: ran_names.clone(),
        }),
    })
}

/// The manifest of the cargo workspace `manifest_rel` belongs to, when it is another
/// file: the nearest `Cargo.toml` above it (inside the copy) with a `[workspace]`.
fn workspace_root_manifest(src: &Path, manifest_rel: &Path) -> Option<(PathBuf, String)> {
    let mut dir = manifest_rel.parent()?;
    while let Some(up) = dir.parent() {
        dir = up;
        let path = src.join(dir).join("Cargo.toml");
        if let Ok(text) = std::fs::read_to_string(&path)
            && text
                .parse::<toml::Table>()
                .is_ok_and(|t| t.contains_key("workspace"))
        {
            return Some((path, text));
        }
    }
    None
}

/// The agent's lockfile: next to the manifest, else at the workspace root.
fn lockfile(src: &Path, manifest_rel: &Path) -> Option<Vec<u8>> {
    let beside = manifest_rel.parent().map_or_else(
        || src.join("Cargo.lock"),
        |p| src.join(p).join("Cargo.lock"),
    );
    std::fs::read(beside)
        .or_else(|_| std::fs::read(src.join("Cargo.lock")))
        .ok()
}

/// Copies the built test binary to `to` (the gate's directory, outside everything the
/// build could write) and hashes the copy.
fn keep_binary(built: &Path, to: &Path) -> Result<(PathBuf, [u8; 32]), String> {
    std::fs::copy(built, to)
        .and_then(|_| file_digest(to))
        .map(|d| (to.to_path_buf(), d))
        .map_err(|e| format!("cannot keep the criterion's test binary: {e}"))
}

fn file_digest(p: &Path) -> std::io::Result<[u8; 32]> {
    Ok(Sha256::digest(std::fs::read(p)?).into())
}

/// The one test executable cargo built for target `name`, with its hash.
fn test_binary(target: &Path, name: &str) -> Result<(PathBuf, [u8; 32]), String> {
    use std::os::unix::fs::PermissionsExt;
    let deps = target.join("debug").join("deps");
    let prefix = format!("{name}-");
    let mut found = Vec::new();
    if let Ok(entries) = std::fs::read_dir(&deps) {
        for e in entries.flatten() {
            let file = e.file_name().to_string_lossy().into_owned();
            let Some(hash) = file.strip_prefix(&prefix) else {
                continue;
            };
            let is_exe = e.file_type().is_ok_and(|t| t.is_file())
                && e.metadata()
                    .is_ok_and(|m| m.permissions().mode() & 0o111 != 0);
            if is_exe && !hash.contains('.') {
                found.push(e.path());
            }
        }
    }
    match found.as_slice() {
        [one] => file_digest(one)
            .map(|d| (one.clone(), d))
            .map_err(|e| format!("cannot read the criterion's test binary: {e}")),
        [] => Err("the criterion's test binary was not built, so nothing ran".into()),
        more => Err(format!(
            "{} candidate test binaries for one criterion target: something besides the \
             compiler wrote into the target directory, so none is trusted",
            more.len()
        )),
    }
}

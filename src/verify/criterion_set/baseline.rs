//! The baseline of each command gate's criterion set, taken when the run starts and
//! kept in the stored contract: the content of every whole file of the set that
//! exists then (a file not listed did not exist) and the canonical text of every
//! section of the sectioned files. Bounded: a set larger than
//! [`MAX_BASELINE_BYTES`] refuses the run's start, naming the key. A file of the set
//! whose content the run's policy denies reading is kept by its hash alone
//! ([`crate::contract::PinnedKept`]): the stored contract goes into the store, which
//! must never hold what the agent may not read.

use std::io::Read;
use std::os::unix::fs::PermissionsExt;

use io_harness_confine::Follow;

use super::rules::Selection;
use super::sections;
use super::walk;
use crate::contract::{
    ContractError, CriterionBaseline, KeptFile, KeptLink, KeptSection, PinnedKept, TaskContract,
    Verification,
};
use crate::policy::{Act, Action, CredentialContent, Decision, Policy, PolicyGate, ProjectPolicy};
use crate::tools::Workspace;
use std::sync::Arc;

/// The most bytes of criterion-set content one run keeps, over all its gates.
pub const MAX_BASELINE_BYTES: u64 = 16 * 1024 * 1024;

/// A whole file's bytes and whether it is executable, read without following a
/// symlink (`None` for a symlink or anything else that is not a regular file).
pub(super) fn read_file(ws: &Workspace, rel: &str) -> Option<(Vec<u8>, bool)> {
    let (mut file, meta) = ws.confined().open_file(rel, Follow::Never).ok()?;
    let exec = file
        .metadata()
        .is_ok_and(|m| m.permissions().mode() & 0o111 != 0);
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len).unwrap_or(0));
    file.read_to_end(&mut bytes).ok()?;
    Some((bytes, exec))
}

/// What the symlink `rel` points to, as written (never followed). `rel` was listed
/// by a walk that enters no symlinked directory, so its parent is a real directory.
pub(super) fn link_target(ws: &Workspace, rel: &str) -> Option<String> {
    let rel = ws.normalize(rel).ok()?;
    std::fs::read_link(ws.root().join(rel))
        .ok()
        .map(|t| t.to_string_lossy().into_owned())
}

/// The kept form of `bytes` at `rel`.
pub(super) fn kept_file(rel: &str, bytes: &[u8], executable: bool) -> KeptFile {
    let (content, hex) = match std::str::from_utf8(bytes) {
        Ok(t) => (t.to_string(), false),
        Err(_) => (bytes.iter().map(|b| format!("{b:02x}")).collect(), true),
    };
    KeptFile {
        path: rel.to_string(),
        content,
        hex,
        executable,
        sha256: crate::digest::sha256_hex(bytes),
    }
}

/// The bytes a kept file holds.
pub(super) fn kept_bytes(k: &KeptFile) -> Vec<u8> {
    if !k.hex {
        return k.content.as_bytes().to_vec();
    }
    (0..k.content.len() / 2)
        .filter_map(|i| u8::from_str_radix(&k.content[2 * i..2 * i + 2], 16).ok())
        .collect()
}

/// The baseline of `sel` in `ws` now, and its size in bytes. A file `denied` says
/// the policy denies reading (whole or sectioned) is kept by hash alone.
pub(crate) fn capture(
    ws: &Workspace,
    sel: &Selection,
    denied: &dyn Fn(&str) -> bool,
) -> Result<(CriterionBaseline, u64), String> {
    let mut base = CriterionBaseline::default();
    let mut total = 0u64;
    for entry in walk::files(ws)? {
        let rel = entry.rel.as_str();
        let of_set = sel.whole(rel) || sel.sections_of(rel).is_some();
        if !entry.symlink && of_set && denied(rel) {
            if let Some((bytes, _)) = read_file(ws, rel) {
                base.pinned.push(PinnedKept {
                    path: rel.to_string(),
                    sha256: crate::digest::sha256_hex(&bytes),
                });
            }
        } else if entry.symlink {
            if sel.link_matters(rel)
                && let Some(target) = link_target(ws, rel)
            {
                base.links.push(KeptLink {
                    path: rel.to_string(),
                    target,
                });
            }
        } else if sel.whole(rel) {
            // A symlink of the set is not kept: the agent's copy of one is removed.
            let Some((bytes, exec)) = read_file(ws, rel) else {
                continue;
            };
            total += bytes.len() as u64;
            base.files.push(kept_file(rel, &bytes, exec));
        } else if let Some((format, names)) = sel.sections_of(rel) {
            let Some((bytes, _)) = read_file(ws, rel) else {
                continue;
            };
            let text = String::from_utf8_lossy(&bytes);
            for name in names {
                let kept =
                    sections::extract(format, &text, name).map_err(|e| format!("{rel} {e}"))?;
                total += kept.as_ref().map_or(0, |k| k.len() as u64);
                base.sections.push(KeptSection {
                    path: rel.to_string(),
                    section: name.to_string(),
                    text: kept,
                });
            }
        }
    }
    Ok((base, total))
}

fn start_error(message: String) -> ContractError {
    ContractError::Field {
        key: "verify.criterion_paths".into(),
        message,
    }
}

/// Keeps, when the run starts, the baseline of every command gate's criterion set
/// not kept yet (a resumed or child run keeps what its start kept). Fails naming
/// `verify.criterion_paths` when the workspace cannot be read or the sets together
/// exceed [`MAX_BASELINE_BYTES`].
pub fn keep_baselines(contract: &mut TaskContract) -> Result<(), ContractError> {
    let pending = contract.verify.criteria.iter().any(
        |v| matches!(v, Verification::Command { criterion, .. } if criterion.baseline.is_none()),
    );
    if !pending {
        return Ok(());
    }
    let gate = read_gate(contract)?;
    let denied = |rel: &str| {
        gate.decide(&Action::new(Act::Read, rel.to_string()))
            .decision
            == Decision::Deny
    };
    let mut ws: Option<Workspace> = None;
    let mut total = 0u64;
    for v in &mut contract.verify.criteria {
        let Verification::Command {
            argv, criterion, ..
        } = v
        else {
            continue;
        };
        if criterion.baseline.is_some() {
            continue;
        }
        let sel = Selection::new(argv, criterion).map_err(start_error)?;
        if ws.is_none() {
            ws = Some(Workspace::open(&contract.root).map_err(|e| {
                start_error(format!("cannot open {}: {e}", contract.root.display()))
            })?);
        }
        let Some(w) = ws.as_ref() else { continue };
        let (base, bytes) = capture(w, &sel, &denied).map_err(start_error)?;
        total += bytes;
        if total > MAX_BASELINE_BYTES {
            return Err(start_error(format!(
                "the criterion set holds more than {MAX_BASELINE_BYTES} bytes; \
                 narrow it with criterion_exclude"
            )));
        }
        criterion.baseline = Some(base);
    }
    Ok(())
}

/// The gate that judges which files of a set may be kept by content: the contract's
/// policy (built-in, task and gate layers) narrowed by the workspace's project file,
/// with registry settings files judged by their content, as the run's own gate is. An
/// unreadable project file is left to the run's start to report; here it only means
/// no narrowing.
fn read_gate(contract: &TaskContract) -> Result<CredentialContent, ContractError> {
    let policy_error =
        |e: crate::policy::PolicyError| start_error(format!("the policy could not be built: {e}"));
    let mut policy = Policy::for_contract(contract).map_err(policy_error)?;
    if let Ok(project) = ProjectPolicy::load(&contract.root) {
        policy = policy.with_project(&project).map_err(policy_error)?;
    }
    Ok(CredentialContent::new(Arc::new(policy), &contract.root))
}

/// Gives `given` (a contract handed to `resume`) the baselines `stored` kept, so the
/// two compare equal when they are the same contract: a baseline is the run's, never
/// taken again from a workspace the agent has changed since.
pub fn adopt_baselines(given: &mut TaskContract, stored: &TaskContract) {
    let kept = stored.verify.criteria.iter();
    for (g, s) in given.verify.criteria.iter_mut().zip(kept) {
        if let (
            Verification::Command { criterion: gc, .. },
            Verification::Command { criterion: sc, .. },
        ) = (g, s)
            && gc.baseline.is_none()
        {
            gc.baseline.clone_from(&sc.baseline);
        }
    }
}

//! The masks of the host trees an operator makes visible beside the workspace
//! (`[sandbox] read_only_paths`).
//!
//! Why: the policy's file rules name what must not be read, and the built-in secret
//! names (`.env`, `id_rsa`, `*.pem`) match at any depth; a command sees these trees
//! as they are on the host, so a `.env` in one was as readable as if no rule named
//! it. Each tree is walked like the workspace (links not followed, bounded by
//! `[sandbox] scan_limit`, past which the session fails closed rather than run with
//! a partial answer), each entry judged by the policy on its path relative to that
//! tree (a registry settings file on its content, there), and what reading is denied
//! is masked. The trees are read-only in every view, so one look per run is enough.

use std::path::{Path, PathBuf};

use super::tree::{Access, ScanError, TreeIndex};
use crate::policy::PolicyGate;

/// What `gate` lets a command do with `target`, relative to the tree `root`: its
/// decision, and for a registry settings file the credential judgement of the file
/// in `root` (the gate's own judges the workspace's).
fn judged(gate: &dyn PolicyGate, root: &Path, target: &str) -> Access {
    let access = Access::decided_by(gate, target);
    if access == Access::Masked {
        return access;
    }
    match crate::policy::credential_config(target)
        .and_then(|_| crate::policy::content_denied(root, target))
    {
        Some(_) => Access::Masked,
        None => Access::Open,
    }
}

/// The paths (absolute) inside `roots` that `gate` denies reading, each tree walked
/// with at most `limit` entries. A root that does not exist has nothing to mask; a
/// root that is a file is judged by its name.
pub(crate) fn masks(
    roots: &[PathBuf],
    gate: &dyn PolicyGate,
    limit: usize,
) -> Result<Vec<PathBuf>, ScanError> {
    let mut out = Vec::new();
    for root in roots {
        let meta = match std::fs::metadata(root) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(source) => {
                return Err(ScanError::Io {
                    path: root.clone(),
                    source,
                });
            }
        };
        if !meta.is_dir() {
            let name = root.file_name().map(|n| n.to_string_lossy().into_owned());
            let parent = root.parent().unwrap_or(Path::new("/"));
            if name.is_some_and(|n| judged(gate, parent, &n) == Access::Masked) {
                out.push(root.clone());
            }
            continue;
        }
        let mut index = TreeIndex::new(root, limit);
        index.refresh(&|target: &str| judged(gate, root, target), false)?;
        out.extend(index.denied().into_iter().map(|p| root.join(p)));
    }
    Ok(out)
}

/// [`masks`] for a view started outside a run's executor: a tree that cannot be
/// looked at whole is masked whole rather than in part.
pub(crate) fn masks_or_whole(
    roots: &[PathBuf],
    gate: &dyn PolicyGate,
    limit: usize,
) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for root in roots {
        match masks(std::slice::from_ref(root), gate, limit) {
            Ok(m) => out.extend(m),
            Err(e) => {
                tracing::warn!(error = %e, path = %root.display(), "read-only path scan failed; masking all of it");
                out.push(root.clone());
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::Policy;

    #[test]
    fn built_in_secrets_in_a_visible_tree_are_masked_at_any_depth() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().join("share");
        std::fs::create_dir_all(root.join("deep/.ssh")).unwrap();
        std::fs::write(root.join(".env"), "S=1").unwrap();
        std::fs::write(root.join("deep/.ssh/id_rsa"), "K").unwrap();
        std::fs::write(root.join("deep/.npmrc"), "//r/:_authToken=abc\n").unwrap();
        std::fs::write(root.join("deep/plain.npmrc.txt"), "x").unwrap();
        std::fs::write(root.join("notes.txt"), "n").unwrap();
        let got = masks(
            &[root.clone(), d.path().join("absent")],
            &Policy::builtin(),
            100,
        )
        .unwrap();
        for want in [".env", "deep/.ssh/id_rsa", "deep/.npmrc"] {
            assert!(got.contains(&root.join(want)), "{want}: {got:?}");
        }
        assert!(
            !got.iter()
                .any(|p| p.ends_with("notes.txt") || p.ends_with("plain.npmrc.txt"))
        );
        let err = masks(std::slice::from_ref(&root), &Policy::builtin(), 2).unwrap_err();
        assert!(matches!(err, ScanError::TooManyEntries { .. }), "{err}");
        assert_eq!(
            masks_or_whole(std::slice::from_ref(&root), &Policy::builtin(), 2),
            [root]
        );
    }
}

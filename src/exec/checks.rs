//! The executor's side of the workspace checks around every session ([`super::guard`]):
//! the blocking look at the tree moved off the async threads, its findings put into the
//! session's spec before it and recorded after it.

use std::path::{Path, PathBuf};
use std::sync::PoisonError;
use std::sync::atomic::Ordering;

use super::tree::ScanError;
use super::{Executor, guard};
use crate::sandbox::{RunSpec, SandboxError};
use crate::store::{SandboxEvent, Store};

impl Executor {
    pub(super) async fn session_paths(&self) -> Result<guard::SessionPaths, ScanError> {
        let guard = self.guard.clone();
        let job = move || {
            guard
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .before_session()
        };
        tokio::task::spawn_blocking(job)
            .await
            .unwrap_or_else(|e| Err(join_error(&self.workdir, &e)))
    }

    /// After a session (and at the end of a run): every `.git` or `.io-harness` that
    /// was not in the workspace when the run first looked is moved out and recorded as
    /// a `quarantined` sandbox event. A tree that cannot be looked at is said to the
    /// model; the next session's own look fails closed on it.
    pub async fn check_new_repos(&self) {
        let guard = self.guard.clone();
        let step = self.step.load(Ordering::SeqCst);
        let job = move || {
            guard
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .after_session(step)
        };
        let found = tokio::task::spawn_blocking(job)
            .await
            .unwrap_or_else(|e| Err(join_error(&self.workdir, &e)));
        let moved = match found {
            Ok(m) => m,
            Err(e) => {
                tracing::warn!(error = %e, "could not check the workspace for new repositories");
                self.lock_guard().notice(format!(
                    "The harness could not check the workspace after the command: {e}"
                ));
                return;
            }
        };
        if moved.is_empty() {
            return;
        }
        let events: Vec<SandboxEvent> = moved
            .iter()
            .map(|q| SandboxEvent::quarantined(self.run_id, step, &q.detail()))
            .collect();
        let store = self.store.clone();
        let run_id = self.run_id;
        let write = move || {
            for e in &events {
                if let Err(err) = store.record_sandbox_event(e) {
                    store.note_lost(Some(run_id), "sandbox event", &err);
                }
            }
        };
        if let Err(e) = tokio::task::spawn_blocking(write).await {
            let err = crate::store::StoreError::TaskCancelled(e.to_string());
            self.store.note_lost(Some(run_id), "sandbox event", &err);
        }
    }

    /// The masks and protected paths of the workspace as it is now, into `spec`
    /// (absolute, so a session in another directory masks them too); the quarantine
    /// is hidden once it exists. A tree that cannot be looked at whole fails the
    /// session: it does not run with masks that may miss a secret.
    pub(super) async fn place_masks(&self, spec: &mut RunSpec) -> Result<(), SandboxError> {
        // The last check after a session could not be made: it is made again now, and
        // the session's own look fails closed while it still cannot be.
        if self.lock_guard().unchecked.is_some() {
            self.check_new_repos().await;
        }
        let paths = self
            .session_paths()
            .await
            .map_err(|e| SandboxError::Spawn {
                stage: "workspace scan",
                source: std::io::Error::other(e),
            })?;
        spec.masked_paths = paths.masked.iter().map(|p| self.workdir.join(p)).collect();
        // Paths the caller sealed for this command (a gate's criterion set) stay.
        let sealed = std::mem::take(&mut spec.protected_paths);
        spec.protected_paths = paths
            .protected
            .iter()
            .map(|p| self.workdir.join(p))
            .chain(sealed)
            .collect();
        // The view shows no host path nobody listed; the quarantine is seen only where
        // it lies under a path the command sees, and is masked there.
        let quarantine = self.quarantine_dir();
        let seen = std::iter::once(&spec.workdir)
            .chain(&spec.read_only_paths)
            .chain(&spec.writable_paths)
            .any(|p| quarantine.starts_with(p));
        if seen && quarantine.exists() {
            spec.masked_paths.push(quarantine);
        }
        Ok(())
    }
}

/// Where a run's quarantined entries go: beside the store file
/// (`<store dir>/quarantine/run-<id>`), or for a store in memory under the harness's
/// cache directory (`…/io-harness/quarantine/run-<id>-pid<pid>`).
pub(crate) fn quarantine_dir(store: &Store, run_id: i64) -> PathBuf {
    match store.path().as_deref().and_then(Path::parent) {
        Some(dir) => dir.join("quarantine").join(format!("run-{run_id}")),
        None => super::dep_cache_dir()
            .with_file_name("quarantine")
            .join(format!("run-{run_id}-pid{}", std::process::id())),
    }
}

fn join_error(work: &Path, e: &tokio::task::JoinError) -> ScanError {
    ScanError::Io {
        path: work.to_path_buf(),
        source: std::io::Error::other(e.to_string()),
    }
}

//! Why a run could not get its sandbox or its policy: typed causes for
//! [`RunError::Sandbox`](super::RunError::Sandbox) and
//! [`RunError::Policy`](super::RunError::Policy), so an embedder can tell a missing
//! backend from a bad rule without reading a message.

use crate::policy::{PolicyError, ProjectPolicyError};
use crate::sandbox::{SandboxError, UnknownBackend};

/// Why no sandbox could be had.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SandboxFailure {
    /// `[sandbox] require` names no backend.
    #[error(transparent)]
    UnknownBackend(#[from] UnknownBackend),
    /// The backend `[sandbox] require` names does not work here.
    #[error("[sandbox] require = \"{label}\": {source}")]
    Required {
        /// The label as the contract wrote it.
        label: String,
        /// Why it does not work.
        source: SandboxError,
    },
    /// No backend works here.
    #[error(transparent)]
    Select(SandboxError),
}

/// Why the policy could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PolicyFailure {
    /// A rule or an override of the contract or the run is invalid.
    #[error(transparent)]
    Rules(#[from] PolicyError),
    /// The workspace's project policy file is unreadable or invalid.
    #[error(transparent)]
    Project(#[from] ProjectPolicyError),
    /// The layers on record do not decode.
    #[error("stored layers: {0}")]
    StoredLayers(#[from] serde_json::Error),
    /// An operator rule denies a provider endpoint the run needs.
    #[error("the provider endpoint {target} is denied by rule {rule} in layer {layer}")]
    EndpointDenied {
        /// `host:port`.
        target: String,
        /// The rule.
        rule: String,
        /// Its layer.
        layer: String,
    },
    /// A sub-agent's parent has no policy on record and none was passed.
    #[error("run {run_id} has no policy on record; pass its policy in the options")]
    NoStoredPolicy {
        /// The parent run.
        run_id: i64,
    },
}

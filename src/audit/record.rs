//! One line of the audit log. Field names are stable on disk: renaming one is a format
//! change that breaks every reader of old logs.

use serde::{Deserialize, Serialize};

/// One sandbox session as the host saw it.
///
/// Fields named `*_reported` are what the sandboxed side claimed and the host could
/// not verify; `None` there means nobody watched, `Some(0)` watched and none.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionRecord {
    /// RFC 3339 UTC time the session started.
    pub time: String,
    /// The run, when the session belongs to one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<i64>,
    /// The step, when it belongs to a run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<u32>,
    /// The command, verbatim.
    pub argv: Vec<String>,
    /// The host directory the command could change.
    pub workspace: String,
    /// The workspace's git branch, read from `.git/HEAD` (git is never run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
    /// The backend that actually ran it (`linux-namespaces`, `portable-floor`…).
    pub backend: String,
    /// The layers really applied, as the backend reported them.
    #[serde(default)]
    pub layers: serde_json::Value,
    /// `none`, `allowlist` or `open`.
    pub network: String,
    /// The resolved allowlist, when one was in force.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow_hosts: Vec<String>,
    /// Names of the variables the command was given (never values).
    #[serde(default)]
    pub env_names: Vec<String>,
    /// Paths hidden from the command inside the workspace.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub masked_paths: Vec<String>,
    /// Exit code, when it exited.
    #[serde(default)]
    pub exit_code: Option<i32>,
    /// Signal, when one ended it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
    /// Wall time.
    #[serde(default)]
    pub duration_ms: u64,
    /// The enforced cap that was hit, if any: `cpu`, `memory` and `wall` end the
    /// command, while a refused fork (`processes`) or cut output (`output`) may not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cap_hit: Option<String>,
    /// Egress refusals the proxy reported; absent when nobody watched.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub egress_denied_reported: Option<u64>,
    /// Egress connections the proxy admitted, as it reported them; absent when nobody
    /// watched.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub egress_admitted_reported: Option<u64>,
    /// The first distinct hosts refused, as reported (a hint; the count is the number).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub egress_denied_hosts_reported: Vec<String>,
}

impl SessionRecord {
    /// A record stamped now, with the branch of `workspace` read from disk.
    pub fn new(
        argv: Vec<String>,
        workspace: impl Into<String>,
        backend: impl Into<String>,
    ) -> Self {
        let workspace = workspace.into();
        Self {
            time: humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string(),
            run_id: None,
            step: None,
            branch: super::git_branch(std::path::Path::new(&workspace)),
            argv,
            workspace,
            backend: backend.into(),
            layers: serde_json::Value::Null,
            network: "none".into(),
            allow_hosts: Vec::new(),
            env_names: Vec::new(),
            masked_paths: Vec::new(),
            exit_code: None,
            signal: None,
            duration_ms: 0,
            cap_hit: None,
            egress_denied_reported: None,
            egress_admitted_reported: None,
            egress_denied_hosts_reported: Vec::new(),
        }
    }
}

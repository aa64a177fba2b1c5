//! The `[sandbox]` section: how commands the agent or a gate runs are isolated.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// Network posture of sandboxed commands.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NetworkSetting {
    /// No route out (the default).
    #[default]
    None,
    /// The host's network, unfiltered: only by explicit operator choice, recorded as
    /// posture `open`.
    Open,
}

/// Resource caps per command; `None` fields take the defaults of SPEC §3 (600 s CPU,
/// 900 s wall, 4 GiB, 512 processes, 1024 open files, 1 MiB of output per stream).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LimitSettings {
    /// CPU seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_secs: Option<u64>,
    /// Wall-clock seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wall_secs: Option<u64>,
    /// Memory bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<u64>,
    /// Processes alive at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub processes: Option<u64>,
    /// Open files per process.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_files: Option<u64>,
    /// Bytes of stdout and of stderr kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<u64>,
}

/// How commands are sandboxed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxSettings {
    /// A backend label the run must get (`linux-namespaces`…); without it, the
    /// strongest available.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub require: Option<String>,
    /// Network posture.
    #[serde(default)]
    pub network: NetworkSetting,
    /// Host variables passed in by name (values are read at run time, never stored).
    #[serde(default)]
    pub env: Vec<String>,
    /// Extra host paths made visible read-only.
    #[serde(default)]
    pub read_only_paths: Vec<PathBuf>,
    /// Caps.
    #[serde(default)]
    pub limits: LimitSettings,
    /// Run on the portable floor if the native backend fails at run time (the record
    /// then names the floor). Off by default.
    #[serde(default)]
    pub allow_weaker: bool,
    /// Let `run_command` take a shell string (`sh -c`), not only an argv.
    #[serde(default)]
    pub shell: bool,
}

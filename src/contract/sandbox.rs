//! The `[sandbox]` section: how commands the agent or a gate runs are isolated.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::PathBuf;

use crate::egress::{HostRule, RuleError};

use serde::{Deserialize, Serialize};

/// Network posture of sandboxed commands.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NetworkSetting {
    /// No route out (the default).
    #[default]
    None,
    /// No route out but through the harness's allowlisting egress proxy, which admits
    /// only the hosts of [`SandboxSettings::allow_hosts`]; recorded as posture
    /// `allowlist` with the resolved list and the refusals the proxy reported.
    Allowlist,
    /// The host's network, unfiltered: only by explicit operator choice, recorded as
    /// posture `open`.
    Open,
}

/// Resource caps per command; `None` fields take the defaults of SPEC §3 (600 s CPU,
/// 900 s wall, 4 GiB, 512 processes, 1024 open files, 1 MiB of output per stream,
/// 8 GiB of workspace growth).
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
    /// Bytes the workspace (and the other writable directories) may grow by.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk: Option<u64>,
    /// What happens past the output cap (`output_overflow`); `None` is `tail`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_overflow: Option<OverflowSetting>,
}

/// `[sandbox] limits.output_overflow`: what a command's output past the cap does.
///
/// ```
/// use io_harness::contract::OverflowSetting;
/// assert_eq!(OverflowSetting::default(), OverflowSetting::Tail);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OverflowSetting {
    /// Keep draining: the model sees the head and the true tail; past 64 times the
    /// cap the command is killed (`cap_hit output`).
    #[default]
    Tail,
    /// Kill the command as soon as its output passes the cap.
    Kill,
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
    /// With `network = "allowlist"`: the hosts the proxy admits (`crates.io`,
    /// `*.pypi.org:443`, `10.0.0.5:8080`), parsed by [`HostRule::parse`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow_hosts: Vec<String>,
    /// With `network = "allowlist"`: names the proxy resolves to a fixed address
    /// instead of asking DNS (like curl's `--resolve`), for internal mirrors and
    /// air-gapped hosts. Only names an `allow_hosts` rule admits are ever dialled.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub resolve: BTreeMap<String, IpAddr>,
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
    /// The host uid (and gid) a root harness runs sandboxed commands as; `None` is
    /// the default, 65534 (`nobody`). Never 0. An unprivileged harness runs them as
    /// itself whatever this says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<u32>,
    /// Keep a `.git` or `.io-harness` a command creates in the workspace instead of
    /// moving it out after the session (off by default: such a repository's hooks and
    /// `core.fsmonitor` run on the host at the operator's next `git status`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub allow_new_repos: bool,
    /// Most workspace entries looked at around each session (for the masks and the
    /// repository check); a larger workspace fails its sessions. `None`: 200,000.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scan_limit: Option<usize>,
}

impl SandboxSettings {
    /// The uid commands run as when the harness is root (see [`SandboxSettings::uid`]).
    pub fn sandbox_uid(&self) -> u32 {
        self.uid.unwrap_or(crate::sandbox::DEFAULT_UID)
    }

    /// The parsed allowlist (empty unless `network = "allowlist"`). A bad entry is an
    /// error naming it; a contract loaded from TOML has been checked already.
    pub fn host_rules(&self) -> Result<Vec<HostRule>, RuleError> {
        if self.network != NetworkSetting::Allowlist {
            return Ok(Vec::new());
        }
        self.allow_hosts
            .iter()
            .map(|h| HostRule::parse(h))
            .collect()
    }
}

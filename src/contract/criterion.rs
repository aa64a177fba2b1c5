//! The criterion set of a command gate: the workspace files the operator declares as
//! belonging to the criterion (`[verify] criterion_paths`), narrowed by
//! `criterion_exclude`, and — once the run has started — their baseline content, kept
//! in the stored contract so every restore before a gate comes from that copy and
//! never from the live files the agent can write. A file of the set the policy denies
//! reading (an `.npmrc` holding a token) is kept by hash alone: the stored contract
//! must not hold what the agent may not read, so such a file is pinned, not restored. The default set per ecosystem (the
//! files that redirect execution) is computed by `verify::criterion_set`; this is the
//! plain data the contract stores.

use serde::{Deserialize, Serialize};

/// `criterion_paths`, `criterion_exclude` and the kept baseline of one command gate.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CriterionSet {
    /// Workspace-relative paths or globs (`scripts/check.sh`, `tests/**`) that belong
    /// to the criterion, added to the ecosystem's default set.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub paths: Vec<String>,
    /// Workspace-relative paths or globs taken out of the set (defaults included).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exclude: Vec<String>,
    /// The set as it was when the run started (`None` before the run starts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<CriterionBaseline>,
}

impl CriterionSet {
    /// Nothing declared and nothing kept: how a contract built in code starts.
    pub fn is_empty(&self) -> bool {
        self.paths.is_empty() && self.exclude.is_empty() && self.baseline.is_none()
    }
}

/// The baseline of a criterion set. A file of the set that is not listed did not
/// exist when the run started: the fact of its absence is kept too, and a file the
/// agent adds there is removed before the gate.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CriterionBaseline {
    /// Whole files of the set, by content.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<KeptFile>,
    /// Sections of files where only a section redirects execution
    /// (`pyproject.toml` `[tool.pytest]`, `package.json` `scripts`…), for each file of
    /// that kind that existed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sections: Vec<KeptSection>,
    /// Symlinks of the set (or standing where a directory of the set could be), by
    /// target: one the agent added or retargeted is removed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub links: Vec<KeptLink>,
    /// Files of the set whose content the policy denies reading, by hash only: never
    /// restored (their content is not kept), and a gate fails naming one that changed,
    /// as it does for a pinned gate script.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pinned: Vec<PinnedKept>,
}

/// A file of a criterion set kept by hash alone (the policy denies reading it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PinnedKept {
    /// Workspace-relative path.
    pub path: String,
    /// Lowercase hex SHA-256 of the bytes when the run started.
    pub sha256: String,
}

/// A symlink of a criterion set's baseline.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeptLink {
    /// Workspace-relative path of the link itself.
    pub path: String,
    /// What it pointed to, as written.
    pub target: String,
}

/// A whole file of a criterion set, kept by content.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeptFile {
    /// Workspace-relative path.
    pub path: String,
    /// The content: the text itself, or lowercase hex when it is not UTF-8.
    pub content: String,
    /// `content` is hex.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub hex: bool,
    /// Whether the file was executable.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub executable: bool,
    /// Lowercase hex SHA-256 of the bytes.
    pub sha256: String,
}

/// One section of a file, kept as its canonical text (`None`: the file existed
/// without that section).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeptSection {
    /// Workspace-relative path of the file.
    pub path: String,
    /// The section (`tool.pytest`, `scripts`, `patch`, `[pytest]`, `replace`…).
    pub section: String,
    /// Its canonical text when the run started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
}

//! The project layer: `.io-harness/policy.toml` in the workspace.
//!
//! The file travels with the repository, so whoever wrote the repository wrote it —
//! not the operator. It may therefore only narrow: its deny and ask rules are
//! honoured, its allow rules are not, and loading says which rules were ignored and
//! why so the operator is not left guessing. The shape is the task file's:
//!
//! ```toml
//! rules = [
//!   { act = "read", target = "secrets/**", decision = "deny" },
//!   { act = "exec", target = "docker", decision = "ask" },
//! ]
//! ```

use std::ops::Range;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml::Spanned;

use super::layers::PROJECT_ALLOW_IGNORED;
use super::{Decision, Rule};

/// Where the project file lives, relative to the workspace root.
pub const PROJECT_POLICY_FILE: &str = ".io-harness/policy.toml";

/// A project file larger than this is refused: policy is a few lines.
const MAX_BYTES: u64 = 256 * 1024;

/// A project file that cannot be used. Running without it would drop rules the
/// repository asked for, so the caller should refuse to run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProjectPolicyError {
    /// The file exists but could not be read.
    #[error("cannot read project policy {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file (or `.io-harness`) is a symlink or not a regular file.
    #[error("project policy {} is not a regular file inside the workspace", path.display())]
    NotRegular {
        /// The file.
        path: PathBuf,
    },
    /// The file is larger than a policy has any reason to be.
    #[error("project policy {} is {bytes} bytes; at most {max} are read", path.display(), max = MAX_BYTES)]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// Its size.
        bytes: u64,
    },
    /// A key is unknown, mistyped or its glob invalid.
    #[error("{}:{line}: {key}: {message}", file.display())]
    Invalid {
        /// The project file.
        file: PathBuf,
        /// 1-based line.
        line: usize,
        /// The key (`rules[1]`, the unknown key's name, or `(syntax)`).
        key: String,
        /// What is wrong.
        message: String,
    },
}

/// A project rule that was read but not honoured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IgnoredRule {
    /// The rule as written.
    pub rule: Rule,
    /// 1-based line in the file.
    pub line: usize,
    /// Why it is not honoured.
    pub reason: String,
}

/// A loaded project file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProjectPolicy {
    /// The file read, or `None` when the workspace has none.
    pub file: Option<PathBuf>,
    /// The rules honoured (deny and ask).
    pub rules: Vec<Rule>,
    /// The rules read but not honoured, with the reason.
    pub ignored: Vec<IgnoredRule>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawProject {
    #[serde(default)]
    rules: Vec<Spanned<Rule>>,
}

impl ProjectPolicy {
    /// Loads `.io-harness/policy.toml` under `root`; no file is an empty layer.
    pub fn load(root: &Path) -> Result<Self, ProjectPolicyError> {
        let dir = root.join(".io-harness");
        let path = root.join(PROJECT_POLICY_FILE);
        for p in [&dir, &path] {
            match std::fs::symlink_metadata(p) {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Self::default()),
                Err(source) => {
                    return Err(ProjectPolicyError::Read {
                        path: p.clone(),
                        source,
                    });
                }
                Ok(m) if m.file_type().is_symlink() => {
                    return Err(ProjectPolicyError::NotRegular { path: p.clone() });
                }
                Ok(m) if p == &path && !m.is_file() => {
                    return Err(ProjectPolicyError::NotRegular { path: p.clone() });
                }
                Ok(m) if p == &path && m.len() > MAX_BYTES => {
                    return Err(ProjectPolicyError::TooLarge {
                        path: p.clone(),
                        bytes: m.len(),
                    });
                }
                Ok(_) => {}
            }
        }
        let text = std::fs::read_to_string(&path).map_err(|source| ProjectPolicyError::Read {
            path: path.clone(),
            source,
        })?;
        Self::from_toml_str(&text, &path)
    }

    /// Parses project-file text; `file` names it in errors.
    pub fn from_toml_str(text: &str, file: &Path) -> Result<Self, ProjectPolicyError> {
        let invalid = |span: Option<Range<usize>>, key: String, message: String| {
            ProjectPolicyError::Invalid {
                file: file.to_path_buf(),
                line: span.map_or(1, |s| crate::contract::line_of(text, s.start)),
                key,
                message,
            }
        };
        let raw: RawProject = toml::from_str(text).map_err(|e| {
            let message = e.message().trim().to_string();
            let key =
                crate::contract::unknown_key_name(&message).unwrap_or_else(|| "(syntax)".into());
            invalid(e.span(), key, message)
        })?;
        let mut out = Self {
            file: Some(file.to_path_buf()),
            ..Self::default()
        };
        for (i, spanned) in raw.rules.into_iter().enumerate() {
            let span = spanned.span();
            let rule = spanned.into_inner();
            rule.check()
                .map_err(|e| invalid(Some(span.clone()), format!("rules[{i}]"), e.to_string()))?;
            if rule.decision == Decision::Allow {
                out.ignored.push(IgnoredRule {
                    rule,
                    line: crate::contract::line_of(text, span.start),
                    reason: PROJECT_ALLOW_IGNORED.to_string(),
                });
            } else if !out.rules.contains(&rule) {
                out.rules.push(rule);
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::Act;

    fn parse(text: &str) -> Result<ProjectPolicy, ProjectPolicyError> {
        ProjectPolicy::from_toml_str(text, Path::new("/w/.io-harness/policy.toml"))
    }

    #[test]
    fn allow_rules_are_reported_not_honoured() {
        let p = parse(
            "rules = [\n  { act = \"read\", target = \"secrets/**\", decision = \"deny\" },\n  { act = \"net\", target = \"*\", decision = \"allow\" },\n]\n",
        )
        .unwrap();
        assert_eq!(p.rules, vec![Rule::deny(Act::Read, "secrets/**")]);
        assert_eq!(p.ignored.len(), 1);
        assert_eq!(p.ignored[0].line, 3);
        assert_eq!(p.ignored[0].rule, Rule::allow(Act::Net, "*"));
        assert!(p.ignored[0].reason.contains("only narrow"));
    }

    #[test]
    fn errors_name_file_line_and_key() {
        let r = |extra: &str| {
            format!("{{ act = \"read\", target = \"x\", decision = \"deny\"{extra} }}")
        };
        let cases = [
            (
                format!("\n\nrules = [{}]\n", r("").replace("deny", "maybe")),
                3,
                "(syntax)",
            ),
            (format!("rules = [\n{},\n]\n", r(", why = 1")), 2, "why"),
            (
                format!("rules = [\n\n{}]\n", r("").replace("\"x\"", "\"src/[x\"")),
                3,
                "rules[0]",
            ),
            ("\noverride = []\n".to_string(), 2, "override"),
            ("rules = [\n".to_string(), 1, "(syntax)"),
        ];
        for (text, want_line, want_key) in cases {
            match parse(&text) {
                Err(ProjectPolicyError::Invalid {
                    file, line, key, ..
                }) => {
                    assert_eq!((line, key.as_str()), (want_line, want_key), "{text}");
                    assert!(file.ends_with(PROJECT_POLICY_FILE));
                }
                other => panic!("{text}: expected Invalid, got {other:?}"),
            }
        }
    }

    #[cfg(unix)]
    #[test]
    fn missing_file_is_an_empty_layer_and_symlink_refused() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(
            ProjectPolicy::load(dir.path()).unwrap(),
            ProjectPolicy::default()
        );
        std::fs::create_dir(dir.path().join(".io-harness")).unwrap();
        let outside = tempfile::NamedTempFile::new().unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join(PROJECT_POLICY_FILE)).unwrap();
        assert!(matches!(
            ProjectPolicy::load(dir.path()),
            Err(ProjectPolicyError::NotRegular { .. })
        ));
    }
}

//! The one check point every tool call passes through.
//!
//! A tool describes what a call would do as [`Action`]s; the dispatcher asks the
//! [`PolicyGate`] about each before the tool runs, and records every decision. The
//! full layered policy (project file, task, run, remembered approvals) fills this seam
//! later; the built-in protection here is always the first layer, so the harness's own
//! state and the repository internals are safe from agent writes from the start.

use serde::{Deserialize, Serialize};

/// What kind of thing an action does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Act {
    /// Read a file or list a directory.
    Read,
    /// Create, change or delete a file.
    Write,
    /// Run a program (and MCP or registered tools, by qualified name).
    Exec,
    /// Open a network connection.
    Net,
}

impl Act {
    /// Stable lowercase name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Read => "read",
            Self::Write => "write",
            Self::Exec => "exec",
            Self::Net => "net",
        }
    }
}

/// One thing a tool call is about to do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Action {
    /// Kind.
    pub act: Act,
    /// Path relative to the workspace root (`/`-separated), command name, or host.
    pub target: String,
}

impl Action {
    /// A new action.
    pub fn new(act: Act, target: impl Into<String>) -> Self {
        Self {
            act,
            target: target.into(),
        }
    }
}

/// The answer to an action.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// Go ahead.
    Allow,
    /// A human (or an `Approver`) must decide.
    Ask,
    /// Refused.
    Deny,
}

impl Decision {
    /// Stable lowercase name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Allow => "allow",
            Self::Ask => "ask",
            Self::Deny => "deny",
        }
    }
}

/// A decision with the rule and layer that made it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PolicyDecision {
    /// What was asked.
    pub action: Action,
    /// The answer.
    pub decision: Decision,
    /// The rule that decided (a glob, or `default`).
    pub rule: String,
    /// The layer the rule belongs to (`builtin`, `project`, `task`, `run`, `remembered`).
    pub layer: String,
}

/// The check point. Implementations must be cheap and must not block.
pub trait PolicyGate: Send + Sync {
    /// Decides one action.
    fn decide(&self, action: &Action) -> PolicyDecision;
}

/// The built-in layer: no agent writes to repository internals (`.git/`, nested ones
/// included) or to the harness's own directory (`.io-harness/`), everything else
/// allowed. It is the floor the full policy layers on top of.
///
/// ```
/// use io_harness::policy::{Act, Action, BuiltinProtection, Decision, PolicyGate};
/// let gate = BuiltinProtection;
/// assert_eq!(gate.decide(&Action::new(Act::Write, ".git/hooks/pre-commit")).decision, Decision::Deny);
/// assert_eq!(gate.decide(&Action::new(Act::Write, "src/lib.rs")).decision, Decision::Allow);
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct BuiltinProtection;

impl BuiltinProtection {
    fn protected_write(target: &str) -> Option<&'static str> {
        let t = target.trim_start_matches("./");
        if t.split('/').any(|c| c == ".git") {
            return Some("**/.git/**");
        }
        (t.split('/').next() == Some(".io-harness")).then_some(".io-harness/**")
    }
}

impl PolicyGate for BuiltinProtection {
    fn decide(&self, action: &Action) -> PolicyDecision {
        let (decision, rule) = match action.act {
            Act::Write => match Self::protected_write(&action.target) {
                Some(rule) => (Decision::Deny, rule.to_string()),
                None => (Decision::Allow, "default".to_string()),
            },
            Act::Net => (Decision::Deny, "default".to_string()),
            Act::Read | Act::Exec => (Decision::Allow, "default".to_string()),
        };
        PolicyDecision {
            action: action.clone(),
            decision,
            rule,
            layer: "builtin".to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_protects_git_and_harness_dirs_only() {
        let g = BuiltinProtection;
        for t in [
            ".git/config",
            ".git/hooks/x",
            ".io-harness/policy.toml",
            "./.git/HEAD",
            ".git",
            "vendor/dep/.git/config",
        ] {
            assert_eq!(
                g.decide(&Action::new(Act::Write, t)).decision,
                Decision::Deny,
                "{t}"
            );
        }
        for t in [
            "src/.git-like",
            "a/io-harness/.io-harness",
            ".gitignore",
            "io-harness/x",
        ] {
            assert_eq!(
                g.decide(&Action::new(Act::Write, t)).decision,
                Decision::Allow,
                "{t}"
            );
        }
        assert_eq!(
            g.decide(&Action::new(Act::Read, ".git/config")).decision,
            Decision::Allow
        );
    }
}

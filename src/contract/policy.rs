//! The contract's policy data: acts, answers, rules and overrides as the operator
//! writes them. Compiling and evaluating them is the `policy` module's job; here they
//! are plain values a task file, a project file and a stored run hold.

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

/// How far an approval is remembered for the rest of the run.
///
/// `Exact` is as narrow as what was approved: the same action target (for a command,
/// the same argv), nothing wider. `Program` is the operator's explicit widening of an
/// approved command to its program with any arguments, recorded as such (the
/// remembered rule names the program alone).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Remember {
    /// Once only.
    #[default]
    No,
    /// This exact action again.
    Exact,
    /// A command's program, with any arguments.
    Program,
}

impl Remember {
    /// The number the store keeps (0, 1, 2).
    pub fn as_i64(self) -> i64 {
        match self {
            Self::No => 0,
            Self::Exact => 1,
            Self::Program => 2,
        }
    }

    /// From the stored number; anything unknown is `No` (nothing widened by accident).
    pub fn from_i64(n: i64) -> Self {
        match n {
            1 => Self::Exact,
            2 => Self::Program,
            _ => Self::No,
        }
    }
}

/// One rule: what to answer for an act on targets matching a glob.
///
/// See the `glob` rules in the module docs of `policy` for how `target` matches.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    /// The act the rule is about.
    pub act: Act,
    /// A glob over paths, commands or `host[:port]`.
    pub target: String,
    /// The answer for a matching action.
    pub decision: Decision,
}

impl Rule {
    /// A rule.
    pub fn new(act: Act, target: impl Into<String>, decision: Decision) -> Self {
        Self {
            act,
            target: target.into(),
            decision,
        }
    }

    /// An allow rule.
    pub fn allow(act: Act, target: impl Into<String>) -> Self {
        Self::new(act, target, Decision::Allow)
    }

    /// An ask rule.
    pub fn ask(act: Act, target: impl Into<String>) -> Self {
        Self::new(act, target, Decision::Ask)
    }

    /// A deny rule.
    pub fn deny(act: Act, target: impl Into<String>) -> Self {
        Self::new(act, target, Decision::Deny)
    }
}

/// An operator's explicit permission to lift a built-in deny (for example reading
/// `.env.example`). Only the task contract and the run may carry one. It lifts every
/// built-in deny of its act for the targets its glob matches (and nothing else: other
/// layers' denies and asks still apply); an action it let through is recorded as a
/// decision of layer `override` naming the built-in rule it lifted.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Override {
    /// The act.
    pub act: Act,
    /// A glob, matched like a rule's target.
    pub target: String,
}

impl Override {
    /// An override.
    pub fn new(act: Act, target: impl Into<String>) -> Self {
        Self {
            act,
            target: target.into(),
        }
    }
}

/// The contract's `[policy]` section.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskPolicy {
    /// Rules of the task layer.
    #[serde(default)]
    pub rules: Vec<Rule>,
    /// Built-in denies the operator lifts.
    #[serde(default, rename = "override")]
    pub overrides: Vec<Override>,
}

//! The one check point every tool call passes through, and the layered policy behind
//! it.
//!
//! A tool describes what a call would do as [`Action`]s; the dispatcher asks the
//! [`PolicyGate`] about each before the tool runs, and records every decision.
//! [`Policy`] is the full gate: named layers ([`LayerName`]) — built-in secrets and
//! protected files, the project file, the task contract, the run, and approvals
//! remembered — evaluated by one rule: deny beats ask beats allow beats the act's
//! default, a built-in deny is lifted only by an operator [`Override`], a remembered
//! approval answers an ask but never a deny. Every [`PolicyDecision`] names the rule
//! and the layer that made it. An `ask` is answered by an [`Approver`].
//!
//! How rule targets match (paths, commands, hosts):
//!
//! - **Paths** are relative to the workspace root and `/`-separated. `**` crosses
//!   directories, `*` and `?` never cross `/`. A pattern without `/` (`*.pem`,
//!   `.env`) names a file at any depth; a pattern with `/` is anchored at the root,
//!   and a leading `/` anchors a bare name (`/AGENTS.md` is the root one only).
//!   A deny or ask on paths ignores case (`*.pem` denies `server.PEM`); an allow
//!   follows the file system's case rule.
//! - **Commands** (`exec`, including MCP and registered tools by qualified name,
//!   `mcp__server__tool`): the target is the whole argv, quoted
//!   ([`command_line::quote`]). A pattern's first word names the program: a deny or
//!   ask also catches that program called by any path (`curl` catches `/usr/bin/curl`
//!   and `./curl`); an allow or override catches the bare name and absolute paths
//!   only, so allowing `cargo` never allows a workspace script called `./cargo`. A
//!   pattern of one word matches the program with any arguments; more words match the
//!   arguments one glob each, `**` for any number of them — a deny or ask as a prefix
//!   (`git push` catches `git push --force`), an allow the whole argv (`cargo test **`).
//!   Every command an argv runs through wrappers is judged ([`command_line::reached`]).
//! - **Hosts** (`net`): `host` matches any port, `host:port` that port only (`*` for
//!   any); hosts compare without case and without a trailing dot; IPv6 in brackets.
//!
//! [`BuiltinProtection`] is the minimal gate (agent writes to `.git/` and
//! `.io-harness/` refused, everything else allowed) for callers that want no policy.

mod approval;
mod builtin;
pub mod command_line;
mod credential_text;
mod credentials;
mod eval;
mod follow;
mod glob;
mod layers;
mod project;
mod rules;

pub use crate::contract::policy::{Act, Decision, Override, Remember, Rule, TaskPolicy};
pub use approval::{AllowAll, Approval, ApprovalRequest, Approver, Callback, DeferAll, DenyAll};
pub use builtin::{BuiltinProtection, SECRET_PATTERNS, WRITE_PROTECTED_PATTERNS, builtin_rules};
pub use credential_text::holds_credential;
pub use credentials::{
    CREDENTIAL_CONFIGS, CredentialContent, MAX_JUDGED, content_holds_credential,
};
pub(crate) use credentials::{content_denied, credential_config};
pub use eval::{Policy, TaskInputs};
pub use follow::{DeniedFiles, DeniedFilesFull, FollowDenied, record_denied};
pub use layers::{Isolation, LayerName, PolicyLayers};
pub use project::{IgnoredRule, PROJECT_POLICY_FILE, ProjectPolicy, ProjectPolicyError};
pub use rules::PolicyError;

use serde::{Deserialize, Serialize};

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

/// A decision with the rule and layer that made it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PolicyDecision {
    /// What was asked.
    pub action: Action,
    /// The answer.
    pub decision: Decision,
    /// The rule that decided (a glob, or `default`).
    pub rule: String,
    /// The layer the rule belongs to (`builtin`, `project`, `task`, `run`,
    /// `remembered`, `override`): see [`LayerName`].
    pub layer: String,
}

/// The check point. Implementations must be cheap and must not block.
pub trait PolicyGate: Send + Sync {
    /// Decides one action.
    fn decide(&self, action: &Action) -> PolicyDecision;

    /// Remembers an approval of `action` as an allow rule for the rest of the run;
    /// returns whether the gate can remember at all.
    fn remember(&self, action: &Action) -> bool {
        let _ = action;
        false
    }

    /// Remembers an approval of a command as an allow of its program with any
    /// arguments (the operator widened it explicitly). A gate that cannot widen
    /// remembers the exact action, which is narrower than asked and never wider.
    fn remember_program(&self, action: &Action) -> bool {
        self.remember(action)
    }

    /// Whether the set of actions this gate denies is fixed for its life (what it
    /// remembers only ever allows). A caller may then keep a denial it decided for a
    /// path; otherwise it must ask again (the workspace masks do, before every
    /// session). `false` unless the gate knows.
    fn denials_fixed(&self) -> bool {
        false
    }

    /// Whether some program could be denied or asked about by name (an operator's
    /// exec rule). The sandbox looks for denied programs in its view only when this
    /// holds. `true` unless the gate knows: a gate that cannot tell is asked about
    /// every program.
    fn limits_programs(&self) -> bool {
        true
    }

    /// The files this gate denies wherever they are moved, when it keeps such a set
    /// ([`FollowDenied`]): the workspace guard records there every file it finds
    /// denied reading at a look. A wrapping gate forwards its inner gate's.
    fn denied_files(&self) -> Option<&DeniedFiles> {
        None
    }
}

//! Workspace tools the model can call, and the registry that dispatches them.
//!
//! Every call goes through [`ToolRegistry::dispatch`]: the tool first *plans* (names
//! the actions it would take, with paths already confined to the workspace), the
//! policy gate decides each action, and only then does the tool run. A refusal —
//! by confinement or by policy — becomes an error observation for the model and a
//! record for the store, never a crash.

mod agent;
mod command;
mod confine;
mod fs;
pub(crate) use fs::read_refusal;
mod memory;
mod search;

use std::sync::Arc;
use std::time::Instant;

use futures_util::future::BoxFuture;
use serde::{Deserialize, Serialize};

use crate::policy::{Action, Decision, PolicyDecision, PolicyGate};
use crate::provider::ToolSpec;

pub use agent::{SPAWN_AGENT, spawn_agent_spec};
pub use command::RunCommand;
pub(crate) use confine::Follow;
pub use confine::{ConfineError, DirEntry, EntryKind, Metadata, Resolver, Workspace, WorkspaceDir};
pub(crate) use fs::content_fingerprint;
pub use fs::{EditFile, ListDir, ReadFile, WriteFile};
pub use memory::{Forget, MemoryContext, Remember};
pub use search::{Find, Grep};

/// Bounds on what a tool may return to the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolLimits {
    /// Bytes of observation text per call; more is cut with a note saying so.
    pub max_output_bytes: usize,
    /// Entries a listing, find or grep returns before it stops.
    pub max_entries: usize,
    /// Size of a file that read/edit accept.
    pub max_file_bytes: u64,
}

impl Default for ToolLimits {
    fn default() -> Self {
        Self {
            max_output_bytes: 32 * 1024,
            max_entries: 500,
            max_file_bytes: 8 * 1024 * 1024,
        }
    }
}

/// What a tool gets to work with: never globals.
#[derive(Clone)]
pub struct ToolContext {
    /// The confined workspace.
    pub workspace: Arc<Workspace>,
    /// Output bounds.
    pub limits: ToolLimits,
    /// Runs commands in the run's sandbox; `None` where commands are not available.
    pub exec: Option<Arc<crate::exec::Executor>>,
    /// The run's policy, for tools that read many files at once (`grep`): a file the
    /// policy denies reading is skipped, so a search cannot show what `read_file` may
    /// not. `None` skips nothing.
    pub read_gate: Option<Arc<dyn PolicyGate>>,
    /// Cross-run memory for `remember` and `forget`; `None` where there is none.
    pub memory: Option<Arc<MemoryContext>>,
}

/// A file a tool changed, with content hashes (SHA-256 hex) before and after, for the
/// intent journal. `None` means the file did not exist.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileEffect {
    /// Path relative to the root.
    pub path: String,
    /// Hash before.
    pub before: Option<String>,
    /// Hash after.
    pub after: Option<String>,
}

/// What a successful call produced.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolOutput {
    /// Text shown to the model (already bounded).
    pub content: String,
    /// Files changed.
    pub effects: Vec<FileEffect>,
}

/// Why a tool call did not do what was asked.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ToolError {
    /// Arguments missing, mistyped or impossible.
    #[error("bad input: {0}")]
    BadInput(String),
    /// The path escapes the workspace or crosses a symlink that does.
    #[error(transparent)]
    Confinement(#[from] ConfineError),
    /// The file or directory does not exist.
    #[error("{0}: not found")]
    NotFound(String),
    /// `edit_file` found its text zero or several times.
    #[error("{path}: the text to replace occurs {count} times; it must occur exactly once")]
    EditMatch {
        /// The file.
        path: String,
        /// How many times it occurred.
        count: usize,
    },
    /// A file is larger than the tools accept.
    #[error("{path}: {size} bytes is more than the {limit}-byte limit")]
    TooLarge {
        /// The file.
        path: String,
        /// Its size.
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// The tool ran and reported a failure of its own (an MCP server's error result,
    /// a timeout, a server that is gone); the text is shown to the model.
    #[error("{0}")]
    Failed(String),
    /// What the tool needs is not part of this run (no sandbox for commands, no
    /// memory): a fact about the run, not about the arguments.
    #[error("{0}")]
    Unavailable(&'static str),
    /// The sandbox could not run the command (as opposed to the command failing).
    #[error("the sandbox could not run it: {0}")]
    Sandbox(#[source] crate::sandbox::SandboxError),
    /// The store refused or failed a write the tool needed (a memory note).
    #[error("{0}")]
    Store(#[from] crate::store::StoreError),
    /// Any other I/O failure.
    #[error("{path}: {source}")]
    Io {
        /// The path.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
}

impl ToolError {
    /// Whether this was a refusal to cross the workspace boundary (recorded apart).
    pub fn is_confinement(&self) -> bool {
        matches!(self, Self::Confinement(_))
    }
}

/// A tool the model can call.
pub trait Tool: Send + Sync {
    /// Name, description and argument schema.
    fn spec(&self) -> ToolSpec;

    /// The actions a call with `input` would take, for the policy check. Paths are
    /// validated here (lexically; the race-free check happens again when opening).
    fn plan(&self, ctx: &ToolContext, input: &serde_json::Value) -> Result<Vec<Action>, ToolError>;

    /// Runs the call.
    fn call<'a>(
        &'a self,
        ctx: &'a ToolContext,
        input: &'a serde_json::Value,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>>;
}

/// The outcome of one dispatched call: what the model sees and what the store keeps.
#[derive(Debug, Clone)]
pub struct Dispatched {
    /// Observation text for the model.
    pub content: String,
    /// Whether the call failed or was refused.
    pub is_error: bool,
    /// Every policy decision taken for the call.
    pub decisions: Vec<PolicyDecision>,
    /// Set when the call was refused for crossing the workspace boundary.
    pub confinement_refusal: Option<String>,
    /// Files changed.
    pub effects: Vec<FileEffect>,
    /// Wall time of the call.
    pub duration_ms: u64,
    /// Actions the policy asked about that no approval answered (the call did not
    /// run). Empty when a deny refused it.
    pub asked: Vec<Action>,
}

impl Dispatched {
    /// A call that did not run, with `content` saying why.
    pub fn refused(content: String) -> Self {
        Self {
            content,
            is_error: true,
            decisions: Vec::new(),
            confinement_refusal: None,
            effects: Vec::new(),
            duration_ms: 0,
            asked: Vec::new(),
        }
    }
}

/// The tools offered to a run.
#[derive(Clone)]
pub struct ToolRegistry {
    tools: Vec<Arc<dyn Tool>>,
}

impl ToolRegistry {
    /// The workspace tools: read_file, write_file, edit_file, list_dir, find, grep,
    /// run_command (which needs an executor in the context), and remember / forget
    /// (which need memory in the context).
    pub fn standard() -> Self {
        Self {
            tools: vec![
                Arc::new(ReadFile),
                Arc::new(WriteFile),
                Arc::new(EditFile),
                Arc::new(ListDir),
                Arc::new(Find),
                Arc::new(Grep),
                Arc::new(RunCommand),
                Arc::new(Remember),
                Arc::new(Forget),
            ],
        }
    }

    /// Adds a tool (a later one with the same name replaces the earlier).
    pub fn with(mut self, tool: Arc<dyn Tool>) -> Self {
        let name = tool.spec().name;
        self.tools.retain(|t| t.spec().name != name);
        self.tools.push(tool);
        self
    }

    /// Specs of every tool, in registration order.
    pub fn specs(&self) -> Vec<ToolSpec> {
        self.tools.iter().map(|t| t.spec()).collect()
    }

    /// Looks a tool up by name.
    pub fn get(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.tools.iter().find(|t| t.spec().name == name)
    }

    /// Plans, checks every action with `gate`, and runs the call if all are allowed.
    /// An `ask` is treated as a refusal until an approver is wired in.
    pub async fn dispatch(
        &self,
        ctx: &ToolContext,
        gate: &dyn PolicyGate,
        name: &str,
        input: &serde_json::Value,
    ) -> Dispatched {
        self.dispatch_approved(ctx, gate, name, input, &[]).await
    }

    /// [`ToolRegistry::dispatch`] where the actions in `approved` were approved by an
    /// `Approver`: an `ask` for one of them counts as allowed (recorded with layer
    /// `approval`); a `deny` still refuses. An ask not approved leaves the call unrun
    /// with the action in [`Dispatched::asked`], for the caller to take to an approver.
    pub async fn dispatch_approved(
        &self,
        ctx: &ToolContext,
        gate: &dyn PolicyGate,
        name: &str,
        input: &serde_json::Value,
        approved: &[Action],
    ) -> Dispatched {
        let started = Instant::now();
        let mut out = Dispatched::refused(String::new());
        let Some(tool) = self.get(name) else {
            let names: Vec<String> = self.tools.iter().map(|t| t.spec().name).collect();
            out.content = format!("unknown tool {name:?}; available: {}", names.join(", "));
            return out;
        };
        let result = match tool.plan(ctx, input) {
            Err(e) => Err(e),
            Ok(actions) => {
                let mut refused = None;
                let mut denied = false;
                for a in &actions {
                    let mut d = gate.decide(a);
                    if d.decision == Decision::Ask && approved.contains(a) {
                        d = PolicyDecision {
                            action: a.clone(),
                            decision: Decision::Allow,
                            rule: "approved".into(),
                            layer: "approval".into(),
                        };
                    }
                    if d.decision == Decision::Ask {
                        out.asked.push(a.clone());
                    }
                    denied |= d.decision == Decision::Deny;
                    if d.decision != Decision::Allow && refused.is_none() {
                        refused = Some(format!(
                            "policy {} {} {} (rule {} in layer {})",
                            d.decision.as_str(),
                            a.act.as_str(),
                            a.target,
                            d.rule,
                            d.layer
                        ));
                    }
                    out.decisions.push(d);
                }
                if denied {
                    // A deny is final: there is nothing to ask anyone about.
                    out.asked.clear();
                }
                match refused {
                    Some(msg) => {
                        out.content = format!("refused: {msg}");
                        out.duration_ms = elapsed_ms(started);
                        return out;
                    }
                    None => tool.call(ctx, input).await,
                }
            }
        };
        match result {
            Ok(o) => {
                out.is_error = false;
                out.content = bound_text(o.content, ctx.limits.max_output_bytes);
                out.effects = o.effects;
            }
            Err(e) => {
                if e.is_confinement() {
                    out.confinement_refusal = Some(e.to_string());
                }
                out.content = format!("error: {e}");
            }
        }
        out.duration_ms = elapsed_ms(started);
        out
    }
}

fn elapsed_ms(t: Instant) -> u64 {
    u64::try_from(t.elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// Cuts `text` to at most `max` bytes on a char boundary, saying how much was cut.
pub(crate) fn bound_text(text: String, max: usize) -> String {
    if text.len() <= max {
        return text;
    }
    let cut = text.floor_char_boundary(max);
    let dropped = text.len() - cut;
    let mut s = text[..cut].to_string();
    s.push_str(&format!(
        "\n[output truncated: {dropped} more bytes not shown]"
    ));
    s
}

//! The task contract: everything a run is allowed and asked to do, fixed before it
//! starts.
//!
//! A contract is built in code ([`TaskContract::workspace`] plus builder methods) or
//! loaded from a task file ([`TaskContract::from_file`]). Either way it is validated
//! before anything runs, and the resolved contract is stored with the run so that
//! `resume` continues under exactly the same terms.

mod check;
mod command_report;
mod context;
mod criterion;
mod error;
pub mod mcp;
pub mod policy;
pub mod price;
mod retry;
mod sandbox;
mod signature;
mod span;
mod stall;
mod tools;
pub(crate) mod units;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use command_report::{CommandTrust, REPORT_PLACEHOLDER, TestReport};
pub use context::{ContextSettings, TokenCounting};
pub use criterion::{CriterionBaseline, CriterionSet, KeptFile, KeptLink, KeptSection, PinnedKept};
use policy::{Override, Rule, TaskPolicy};
pub use price::{ModelPrice, PriceTable};
pub use retry::RetryPolicy;
pub use signature::{Signature, SignatureError};
pub use stall::StallPolicy;
pub use tools::ToolSettings;

pub(crate) use check::{check_cost_price, relative_inside};
pub use error::ContractError;
pub use sandbox::{LimitSettings, NetworkSetting, OverflowSetting, SandboxSettings};
pub(crate) use span::{line_of, unknown_key_name};
pub(crate) use units::serde_duration;
pub use units::{parse_duration, parse_size};

/// How the run treats the workspace directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WorkspaceMode {
    /// The agent edits the workspace itself.
    InPlace,
    /// The agent edits a temporary copy; the original is untouched and the diff is
    /// reported.
    Copy,
}

/// A criterion that decides whether the goal was reached. All criteria of a contract
/// must pass.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Verification {
    /// A workspace file contains `needle`.
    FileContains {
        /// Path relative to the workspace root.
        file: PathBuf,
        /// Text that must occur.
        needle: String,
    },
    /// A workspace file's content equals `content` exactly.
    FileEquals {
        /// Path relative to the workspace root.
        file: PathBuf,
        /// The expected content.
        content: String,
    },
    /// A command run without a shell in the workspace root must exit with
    /// `expect_exit` within `timeout`.
    Command {
        /// Program and arguments.
        argv: Vec<String>,
        /// Exit code that counts as a pass.
        expect_exit: i32,
        /// Wall-clock limit.
        #[serde(with = "units::serde_duration")]
        timeout: Duration,
        /// Workspace files the command names (its script, say), with their content
        /// hash when the contract was loaded. The gate refuses to run a command whose
        /// pinned file changed since, so an agent that rewrites the script it is judged
        /// by fails instead of passing. A task file pins the command's script (the
        /// program when it is a workspace file, or an argument naming a workspace
        /// script: `.sh`, `.py`, `.js`…); code pins with
        /// [`Verification::pin_command_files`].
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        pinned: Vec<PinnedFile>,
        /// What a pass rests on besides the exit code (`[verify] trust`): by default
        /// a recognised test runner must report at least one test run and none
        /// failed.
        #[serde(default, skip_serializing_if = "CommandTrust::is_auto")]
        trust: CommandTrust,
        /// A JUnit report the command writes to the path that replaces `{report}` in
        /// its argv (also given as `IO_HARNESS_REPORT`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        report: Option<TestReport>,
        /// The criterion set (`criterion_paths`, `criterion_exclude`, and the baseline
        /// kept when the run started): restored before every run of the gate, with the
        /// ecosystem's default set of files that redirect execution.
        #[serde(default, skip_serializing_if = "CriterionSet::is_empty")]
        criterion: CriterionSet,
    },
    /// A Rust gate: `subject` (a workspace file) must compile on its own as a crate,
    /// keep its items, let the Rust test source `criterion` compile against it as a
    /// separate crate, and pass every test the criterion defines. See
    /// the `verify` module for the phases.
    Rust {
        /// The file under verification, relative to the workspace root.
        subject: PathBuf,
        /// The criterion's test source: an absolute path outside the workspace, so the
        /// agent cannot edit it (a task file's relative path is resolved against the
        /// file's directory). Provenance once the run has kept `criterion_source`.
        criterion: PathBuf,
        /// The criterion's content, kept when the run started: the gate and a resume
        /// use it, wherever the file is by then (`None` for a contract not yet
        /// started, or a run stored before contents were kept).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        criterion_source: Option<OperatorFile>,
        /// Signatures the subject must have (`"add: fn(i32, i32) -> i32"`), checked at
        /// compile time by harness-written code (see [`Signature`]); empty by default.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        signatures: Vec<String>,
    },
    /// The workspace form of a Rust gate: `cargo test` on the agent's crate with
    /// criterion test files placed by the harness, in a copy of the workspace outside
    /// the agent's writable area. Each criterion becomes an integration-test target the
    /// harness declares itself (so `autotests = false` or `harness = false` in the
    /// agent's manifest cannot drop or disarm it), and each test it defines is run by
    /// exact name with ignored tests included. The criteria are operator files: their
    /// content is read when the contract is built, the gate uses that copy, and the
    /// policy denies the agent's writes to them. See `verify::cargo_gate`.
    ///
    /// In a task file (criteria relative to the task file, `manifest` to the
    /// workspace root and `Cargo.toml` by default):
    ///
    /// ```toml
    /// [verify]
    /// cargo_test = { manifest = "Cargo.toml", criteria = ["criteria/parse_test.rs"] }
    /// ```
    CargoTest {
        /// The crate's manifest, relative to the workspace root (`Cargo.toml`).
        manifest: PathBuf,
        /// The criterion test files as the operator wrote them.
        criteria: Vec<OperatorFile>,
        /// The crate's manifests when the run started — its `Cargo.toml` and each one
        /// above it inside the workspace, paths relative to the workspace root — so the
        /// gate can hold the crates the criteria link to where they came from then (a
        /// local crate under a linked crate's name is refused). `None` until the run
        /// starts, and in runs stored before baselines were kept.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        baseline_manifests: Option<Vec<OperatorFile>>,
        /// Signatures the crate must have, paths from its root
        /// (`"parse::parse_line: fn(&str) -> Option<u32>"`); empty by default.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        signatures: Vec<String>,
    },
}

/// A file the operator wrote for a gate, kept by content: what the agent does to the
/// file on disk later does not change what the gate checks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OperatorFile {
    /// Where it was read (absolute): provenance, never read again.
    pub path: PathBuf,
    /// Its content when the contract was built.
    pub source: String,
    /// Lowercase hex SHA-256 of `source`, so the record says which version was used
    /// (`None` in contracts stored before it was kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
}

/// A workspace file a command gate depends on, pinned by content hash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PinnedFile {
    /// Path relative to the workspace root, as the command names it.
    pub path: PathBuf,
    /// Lowercase hex SHA-256 of its content when pinned.
    pub sha256: String,
}

impl Verification {
    /// A command criterion expecting exit 0 within five minutes.
    pub fn command<I, S>(argv: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self::Command {
            argv: argv.into_iter().map(Into::into).collect(),
            expect_exit: 0,
            timeout: Duration::from_secs(300),
            pinned: Vec::new(),
            trust: CommandTrust::Auto,
            report: None,
            criterion: CriterionSet::default(),
        }
    }

    /// Adds workspace paths or globs to a command criterion's criterion set
    /// (`criterion_paths`); other criteria are unchanged.
    pub fn criterion_paths<I, S>(mut self, paths: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        if let Self::Command { criterion, .. } = &mut self {
            criterion.paths.extend(paths.into_iter().map(Into::into));
        }
        self
    }

    /// Takes workspace paths or globs out of a command criterion's criterion set
    /// (`criterion_exclude`), the ecosystem's defaults included.
    pub fn criterion_exclude<I, S>(mut self, paths: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        if let Self::Command { criterion, .. } = &mut self {
            criterion.exclude.extend(paths.into_iter().map(Into::into));
        }
        self
    }

    /// A Rust gate criterion.
    pub fn rust(subject: impl Into<PathBuf>, criterion: impl Into<PathBuf>) -> Self {
        Self::Rust {
            subject: subject.into(),
            criterion: criterion.into(),
            criterion_source: None,
            signatures: Vec::new(),
        }
    }

    /// This Rust gate (either form) with `signatures` pinned; other criteria are
    /// unchanged. Each entry is checked by [`TaskContract::validate`].
    pub fn with_signatures<I, S>(mut self, entries: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        if let Self::Rust { signatures, .. } | Self::CargoTest { signatures, .. } = &mut self {
            *signatures = entries.into_iter().map(Into::into).collect();
        }
        self
    }

    /// A file-contains criterion.
    pub fn file_contains(file: impl Into<PathBuf>, needle: impl Into<String>) -> Self {
        Self::FileContains {
            file: file.into(),
            needle: needle.into(),
        }
    }

    /// A file-equals criterion.
    pub fn file_equals(file: impl Into<PathBuf>, content: impl Into<String>) -> Self {
        Self::FileEquals {
            file: file.into(),
            content: content.into(),
        }
    }

    /// A short label for the record and the outcome (`command cargo test`, `file_contains src/lib.rs`).
    pub fn label(&self) -> String {
        match self {
            Self::FileContains { file, .. } => format!("file_contains {}", file.display()),
            Self::FileEquals { file, .. } => format!("file_equals {}", file.display()),
            Self::Command { argv, .. } => format!("command {}", argv.join(" ")),
            Self::Rust { subject, .. } => format!("rust {}", subject.display()),
            Self::CargoTest { manifest, .. } => format!("cargo_test {}", manifest.display()),
        }
    }
}

/// When and how often the criteria are checked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VerifySettings {
    /// The criteria; all must pass.
    pub criteria: Vec<Verification>,
    /// Failed verifications before the run ends `VerificationFailed`.
    pub max_attempts: u32,
    /// Check after every step instead of only when the model says it is done.
    pub every_step: bool,
    /// Bytes the dependency cache shared across runs may hold (`dep_cache_max`,
    /// least recently used entries evicted past it); `None` is the default, 10 GiB;
    /// `Some(0)` keeps this run's gates out of the shared cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dep_cache_max: Option<u64>,
}

/// Limits that each end the run with an outcome of their own.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Budget {
    /// Model calls.
    pub max_steps: u32,
    /// Wall clock for the whole run (resumed time counts again from zero per session
    /// but the elapsed time of earlier sessions is carried over).
    #[serde(default, with = "units::serde_opt_duration")]
    pub max_duration: Option<Duration>,
    /// Tokens of every kind summed over all calls.
    #[serde(default)]
    pub max_tokens: Option<u64>,
    /// USD summed over calls whose cost is known.
    #[serde(default)]
    pub max_cost_usd: Option<f64>,
}

impl Default for Budget {
    fn default() -> Self {
        Self {
            max_steps: 40,
            max_duration: None,
            max_tokens: None,
            max_cost_usd: None,
        }
    }
}

/// How much the model may reason before answering (OpenAI-style effort).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReasoningEffort {
    /// Minimal reasoning.
    Minimal,
    /// Low.
    Low,
    /// Medium.
    Medium,
    /// High.
    High,
}

impl ReasoningEffort {
    /// The wire value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Minimal => "minimal",
            Self::Low => "low",
            Self::Medium => "medium",
            Self::High => "high",
        }
    }
}

/// Which wire protocol a provider speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProviderKind {
    /// OpenAI Chat Completions (OpenAI itself: `max_completion_tokens`, streaming).
    Openai,
    /// A server that speaks Chat Completions but is not OpenAI (llama.cpp, vLLM, Ollama,
    /// LM Studio): `max_tokens`, `content` on every assistant message, `tool_choice`
    /// sent, streaming optional. Named by the operator, never detected.
    #[serde(rename = "openai-compatible")]
    OpenaiCompatible,
    /// Anthropic Messages.
    Anthropic,
    /// OpenRouter (OpenAI protocol plus attribution and reported cost).
    Openrouter,
    /// Replays a script of recorded turns.
    Scripted,
}

impl ProviderKind {
    /// Stable lowercase name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Openai => "openai",
            Self::OpenaiCompatible => "openai-compatible",
            Self::Anthropic => "anthropic",
            Self::Openrouter => "openrouter",
            Self::Scripted => "scripted",
        }
    }
}

/// One provider of the contract. Missing model and base URL come from the environment
/// (`OPENAI_MODEL`, `ANTHROPIC_BASE_URL`…) when the provider is built.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProviderSpec {
    /// Wire protocol.
    pub kind: ProviderKind,
    /// Model name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Endpoint (OpenAI style includes `/v1`; Anthropic's does not).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    /// Script file for `scripted` (absolute once resolved). Provenance once the run
    /// has kept `script_source`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub script: Option<PathBuf>,
    /// The script's content, kept when the run started, so a resume replays it from
    /// the store wherever it runs (`None` before the run starts, and in runs stored
    /// before contents were kept: those read `script` again).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub script_source: Option<OperatorFile>,
    /// Output token cap per turn.
    pub max_output_tokens: u32,
    /// Anthropic extended-thinking budget.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking_budget: Option<u32>,
    /// OpenAI-style reasoning effort.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_effort: Option<ReasoningEffort>,
    /// How long a streaming reply may go without content (keep-alive comments do not
    /// count) before the call fails with a timeout; `None`: 120 s.
    #[serde(
        default,
        with = "units::serde_opt_duration",
        skip_serializing_if = "Option::is_none"
    )]
    pub stream_idle_timeout: Option<Duration>,
    /// The largest reply read, in bytes of the response body; a longer one is cut there
    /// and answered with a tool error. `None`: [`DEFAULT_MAX_REPLY_BYTES`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_reply_bytes: Option<u64>,
    /// `openai-compatible`: the `tool_choice` sent with tools. `None`: `auto`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<ToolChoice>,
    /// `openai-compatible`: whether to ask for a stream. `None`: yes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream: Option<bool>,
    /// `openai-compatible` with `stream = false`: the limit on the whole request (no
    /// chunk arrives to measure silence by). `None`: [`DEFAULT_REQUEST_TIMEOUT`].
    #[serde(
        default,
        with = "units::serde_opt_duration",
        skip_serializing_if = "Option::is_none"
    )]
    pub request_timeout: Option<Duration>,
}

/// A reply's size limit when the contract sets none: far above any real turn, far
/// below what fills memory.
pub const DEFAULT_MAX_REPLY_BYTES: u64 = 8 << 20;

/// The whole-request limit of an unstreamed call when the contract sets none.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(600);

/// What an OpenAI-compatible server is told about calling tools (`tool_choice`).
/// llama.cpp's server produces no tool calls unless told; `required` forces one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolChoice {
    /// The model decides.
    Auto,
    /// The model must call a tool.
    Required,
    /// The model must not call a tool.
    None,
}

impl ToolChoice {
    /// The wire value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Required => "required",
            Self::None => "none",
        }
    }
}

impl ProviderSpec {
    /// A spec of `kind` with everything else defaulted.
    pub fn new(kind: ProviderKind) -> Self {
        Self {
            kind,
            model: None,
            base_url: None,
            script: None,
            script_source: None,
            max_output_tokens: 8192,
            thinking_budget: None,
            reasoning_effort: None,
            stream_idle_timeout: None,
            max_reply_bytes: None,
            tool_choice: None,
            stream: None,
            request_timeout: None,
        }
    }

    /// A scripted provider replaying `script`.
    pub fn scripted(script: impl Into<PathBuf>) -> Self {
        Self {
            script: Some(script.into()),
            ..Self::new(ProviderKind::Scripted)
        }
    }
}

/// A typed task contract.
///
/// ```
/// use io_harness::{TaskContract, Verification};
/// let dir = tempfile::tempdir().unwrap();
/// let contract = TaskContract::workspace(
///     "add a greeting",
///     dir.path(),
///     Verification::file_contains("hello.txt", "hello"),
/// )
/// .max_steps(10)
/// .constraint("touch nothing but hello.txt");
/// contract.validate().unwrap();
/// assert_eq!(contract.budget.max_steps, 10);
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskContract {
    /// What the agent is asked to achieve.
    pub goal: String,
    /// The workspace root (absolute once validated).
    pub root: PathBuf,
    /// In place or on a copy.
    pub workspace: WorkspaceMode,
    /// Constraints shown to the model with the goal.
    #[serde(default)]
    pub constraints: Vec<String>,
    /// An instructions file inside the workspace (bounded, shown as untrusted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<PathBuf>,
    /// Verification.
    pub verify: VerifySettings,
    /// Budgets.
    pub budget: Budget,
    /// Providers, primary first. Empty means "from the command line or environment".
    #[serde(default)]
    pub providers: Vec<ProviderSpec>,
    /// Price table extensions (USD per million tokens by model).
    #[serde(default)]
    pub prices: BTreeMap<String, ModelPrice>,
    /// Stall detection.
    #[serde(default)]
    pub stall: StallPolicy,
    /// Retries of failed provider calls (each provider of the chain gets them).
    #[serde(default)]
    pub retry: RetryPolicy,
    /// How commands are isolated.
    #[serde(default)]
    pub sandbox: SandboxSettings,
    /// The task layer of the permission policy (`[policy]`).
    #[serde(default)]
    pub policy: TaskPolicy,
    /// Context assembly (`[context]`): the per-request token budget.
    #[serde(default)]
    pub context: ContextSettings,
    /// MCP servers whose tools the run offers (`[[mcp]]`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mcp: Vec<mcp::McpServerSpec>,
    /// Sub-agents (`[agents]`).
    #[serde(default)]
    pub agents: AgentSettings,
    /// Bounds on a reply's tool calls (`[tools]`).
    #[serde(default)]
    pub tools: ToolSettings,
}

/// The `[agents]` section: how deep a tree of sub-agents may grow.
///
/// A root run has depth 0; the `spawn_agent` tool is offered to a run whose depth is
/// below `max_depth`, so `max_depth = 0` turns sub-agents off and the default, 1, lets
/// the root spawn children that cannot spawn in turn. A child inherits its parent's
/// setting.
///
/// ```
/// use io_harness::{TaskContract, Verification};
///
/// let contract = TaskContract::workspace("g", ".", Verification::file_contains("a", "b"));
/// assert_eq!(contract.agents.max_depth, 1, "children, no grandchildren");
/// let flat = contract.max_agent_depth(0);
/// assert_eq!(flat.agents.max_depth, 0, "spawn_agent is not offered");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentSettings {
    /// Deepest level a sub-agent may sit at (children of the root are at 1).
    pub max_depth: u32,
}

/// The largest `agents.max_depth` accepted: every level multiplies what one task can
/// start, and a deep tree is more likely a loop than a plan.
pub const MAX_AGENT_DEPTH: u32 = 8;

impl Default for AgentSettings {
    fn default() -> Self {
        Self { max_depth: 1 }
    }
}

impl TaskContract {
    /// A contract for `goal` on the workspace at `root`, checked by `verify`, with
    /// default budgets (40 steps, 5 verification attempts), edited in place.
    pub fn workspace(
        goal: impl Into<String>,
        root: impl Into<PathBuf>,
        verify: Verification,
    ) -> Self {
        Self {
            goal: goal.into(),
            root: root.into(),
            workspace: WorkspaceMode::InPlace,
            constraints: Vec::new(),
            instructions: None,
            verify: VerifySettings {
                criteria: vec![verify],
                max_attempts: 5,
                every_step: false,
                dep_cache_max: None,
            },
            budget: Budget::default(),
            providers: Vec::new(),
            prices: BTreeMap::new(),
            stall: StallPolicy::default(),
            retry: RetryPolicy::default(),
            sandbox: SandboxSettings::default(),
            policy: TaskPolicy::default(),
            agents: AgentSettings::default(),
            mcp: Vec::new(),
            context: ContextSettings::default(),
            tools: ToolSettings::default(),
        }
    }

    /// Adds a criterion (all must pass).
    pub fn and_verify(mut self, v: Verification) -> Self {
        self.verify.criteria.push(v);
        self
    }

    /// Runs on a temporary copy of the workspace.
    pub fn on_copy(mut self) -> Self {
        self.workspace = WorkspaceMode::Copy;
        self
    }

    /// Adds a constraint.
    pub fn constraint(mut self, c: impl Into<String>) -> Self {
        self.constraints.push(c.into());
        self
    }

    /// Sets the step budget.
    pub fn max_steps(mut self, n: u32) -> Self {
        self.budget.max_steps = n;
        self
    }

    /// Sets the wall-clock budget.
    pub fn max_duration(mut self, d: Duration) -> Self {
        self.budget.max_duration = Some(d);
        self
    }

    /// Sets the token budget.
    pub fn max_tokens(mut self, n: u64) -> Self {
        self.budget.max_tokens = Some(n);
        self
    }

    /// Sets the cost budget in USD.
    pub fn max_cost_usd(mut self, usd: f64) -> Self {
        self.budget.max_cost_usd = Some(usd);
        self
    }

    /// Sets how many failed verifications end the run.
    pub fn max_verify_attempts(mut self, n: u32) -> Self {
        self.verify.max_attempts = n;
        self
    }

    /// Verifies after every step.
    pub fn verify_every_step(mut self) -> Self {
        self.verify.every_step = true;
        self
    }

    /// Adds a provider (the first is primary).
    pub fn provider(mut self, spec: ProviderSpec) -> Self {
        self.providers.push(spec);
        self
    }

    /// Sets the retry policy.
    pub fn retry_policy(mut self, p: RetryPolicy) -> Self {
        self.retry = p;
        self
    }

    /// Sets the stall policy.
    pub fn stall_policy(mut self, p: StallPolicy) -> Self {
        self.stall = p;
        self
    }

    /// Adds a rule to the task layer of the policy.
    pub fn policy_rule(mut self, rule: Rule) -> Self {
        self.policy.rules.push(rule);
        self
    }

    /// Lifts the built-in policy denies matching `ov` (recorded when used).
    pub fn policy_override(mut self, ov: Override) -> Self {
        self.policy.overrides.push(ov);
        self
    }

    /// Sets how deep sub-agents may nest (`0` turns them off).
    pub fn max_agent_depth(mut self, depth: u32) -> Self {
        self.agents.max_depth = depth;
        self
    }

    /// Adds an MCP server whose tools the run offers.
    pub fn mcp_server(mut self, server: mcp::McpServerSpec) -> Self {
        self.mcp.push(server);
        self
    }

    /// Sets the per-request input-token budget of context assembly.
    pub fn context_max_tokens(mut self, n: u64) -> Self {
        self.context.max_tokens = Some(n);
        self
    }

    /// Adds or overrides a model price.
    pub fn price(mut self, model: impl Into<String>, price: ModelPrice) -> Self {
        self.prices.insert(model.into(), price);
        self
    }

    /// The built-in price table extended by this contract's prices.
    pub fn price_table(&self) -> PriceTable {
        let mut t = PriceTable::builtin();
        for (m, p) in &self.prices {
            t.insert(m.clone(), *p);
        }
        t
    }
}

//! The task file as TOML gives it: one struct per section, each value keeping its
//! span, so every later error can name the file's line. These mirror only what the
//! file spells differently from the contract (strings for durations and sizes, a
//! command that is a string or an argv, spans); sections the contract types already
//! describe are read into those types directly.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;
use toml::Spanned;

use crate::contract::policy::{Override, Rule};
use crate::contract::{ModelPrice, ProviderKind, ReasoningEffort, StallPolicy, WorkspaceMode};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawFile {
    pub(super) goal: Spanned<String>,
    pub(super) root: Option<Spanned<String>>,
    pub(super) workspace: Option<Spanned<WorkspaceMode>>,
    #[serde(default)]
    pub(super) constraints: Vec<String>,
    pub(super) instructions: Option<Spanned<String>>,
    pub(super) verify: Spanned<RawVerify>,
    #[serde(default)]
    pub(super) budget: RawBudget,
    pub(super) provider: Option<Spanned<RawProvider>>,
    #[serde(default)]
    pub(super) prices: BTreeMap<String, ModelPrice>,
    pub(super) stall: Option<Spanned<StallPolicy>>,
    pub(super) retry: Option<Spanned<RawRetry>>,
    pub(super) sandbox: Option<Spanned<RawSandbox>>,
    pub(super) policy: Option<Spanned<RawPolicy>>,
    pub(super) context: Option<Spanned<RawContext>>,
    pub(super) agents: Option<Spanned<RawAgents>>,
    #[serde(default)]
    pub(super) mcp: Vec<Spanned<RawMcp>>,
    pub(super) tools: Option<Spanned<RawTools>>,
}

/// `[tools]`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTools {
    pub(super) max_argument_bytes: Option<Spanned<toml::Value>>,
    pub(super) max_calls_per_reply: Option<Spanned<u32>>,
}

/// One `[[mcp]]` entry: `command` (a string or an argv array) with optional `args`
/// for stdio, or `url` for streamable HTTP.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawMcp {
    pub(super) name: String,
    pub(super) command: Option<RawCommand>,
    #[serde(default)]
    pub(super) args: Vec<String>,
    #[serde(default)]
    pub(super) env: Vec<String>,
    pub(super) sandbox: Option<bool>,
    pub(super) url: Option<String>,
    pub(super) bearer_token_env: Option<String>,
    #[serde(default)]
    pub(super) required: bool,
    pub(super) startup_timeout: Option<String>,
    pub(super) call_timeout: Option<String>,
    #[serde(default)]
    pub(super) allow_tools: Vec<String>,
    #[serde(default)]
    pub(super) deny_tools: Vec<String>,
    /// `{ tool = ["arg", …] }`, checked by hand so a wrong type names its key.
    pub(super) path_args: Option<Spanned<toml::Value>>,
}

#[derive(Deserialize)]
#[serde(untagged)]
pub(super) enum RawCommand {
    Program(String),
    Argv(Vec<String>),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawAgents {
    pub(super) max_depth: Option<Spanned<u32>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawContext {
    pub(super) max_tokens: Option<Spanned<u64>>,
    pub(super) assemble: Option<bool>,
    pub(super) tokens: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSandbox {
    pub(super) require: Option<Spanned<String>>,
    pub(super) network: Option<Spanned<String>>,
    pub(super) allow_hosts: Option<Spanned<Vec<String>>>,
    pub(super) resolve: Option<Spanned<std::collections::BTreeMap<String, String>>>,
    #[serde(default)]
    pub(super) env: Vec<String>,
    #[serde(default)]
    pub(super) read_only_paths: Vec<String>,
    pub(super) limits: Option<Spanned<RawLimits>>,
    #[serde(default)]
    pub(super) allow_weaker: bool,
    #[serde(default)]
    pub(super) shell: bool,
    pub(super) uid: Option<Spanned<i64>>,
    #[serde(default)]
    pub(super) allow_new_repos: bool,
    pub(super) scan_limit: Option<Spanned<i64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawLimits {
    pub(super) cpu_secs: Option<u64>,
    pub(super) wall_secs: Option<u64>,
    pub(super) memory: Option<toml::Value>,
    pub(super) processes: Option<u64>,
    pub(super) open_files: Option<u64>,
    pub(super) output: Option<toml::Value>,
    pub(super) disk: Option<toml::Value>,
    pub(super) output_overflow: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPolicy {
    #[serde(default)]
    pub(super) rules: Vec<Spanned<Rule>>,
    #[serde(default, rename = "override")]
    pub(super) overrides: Vec<Spanned<Override>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRetry {
    pub(super) max_attempts: Option<u32>,
    pub(super) base: Option<Spanned<String>>,
    pub(super) cap: Option<Spanned<String>>,
    pub(super) jitter: Option<bool>,
    pub(super) malformed_attempts: Option<Spanned<u32>>,
    pub(super) max_wait: Option<Spanned<String>>,
    pub(super) probe_steps: Option<Spanned<u32>>,
    pub(super) probe_interval: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawVerify {
    pub(super) command: Option<Spanned<Vec<String>>>,
    pub(super) expect_exit: Option<i32>,
    pub(super) timeout: Option<Spanned<String>>,
    pub(super) trust: Option<Spanned<String>>,
    pub(super) report: Option<Spanned<RawReport>>,
    pub(super) file_contains: Option<Spanned<RawFileContains>>,
    pub(super) file_equals: Option<Spanned<RawFileEquals>>,
    pub(super) rust: Option<Spanned<RawRust>>,
    pub(super) cargo_test: Option<Spanned<RawCargoTest>>,
    pub(super) criterion_paths: Option<Spanned<Vec<String>>>,
    pub(super) criterion_exclude: Option<Spanned<Vec<String>>>,
    pub(super) max_attempts: Option<Spanned<u32>>,
    #[serde(default)]
    pub(super) every_step: bool,
    pub(super) dep_cache_max: Option<Spanned<toml::Value>>,
}

/// `report = { junit = "{report}", min_tests = 1, require = ["a::b"] }`
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawReport {
    pub(super) junit: Spanned<String>,
    pub(super) min_tests: Option<Spanned<u32>>,
    #[serde(default)]
    pub(super) require: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRust {
    pub(super) subject: PathBuf,
    pub(super) criterion: PathBuf,
    #[serde(default)]
    pub(super) signatures: Vec<String>,
}

/// `cargo_test = { manifest = "Cargo.toml", criteria = ["criteria/parse_test.rs"] }`
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawCargoTest {
    #[serde(default = "default_manifest")]
    pub(super) manifest: PathBuf,
    pub(super) criteria: Vec<PathBuf>,
    #[serde(default)]
    pub(super) signatures: Vec<String>,
}

pub(super) fn default_manifest() -> PathBuf {
    PathBuf::from("Cargo.toml")
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawFileContains {
    pub(super) file: String,
    pub(super) needle: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawFileEquals {
    pub(super) file: String,
    pub(super) content: String,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawBudget {
    pub(super) max_steps: Option<Spanned<u32>>,
    pub(super) max_duration: Option<Spanned<String>>,
    pub(super) max_tokens: Option<Spanned<u64>>,
    pub(super) max_cost_usd: Option<Spanned<f64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawProvider {
    pub(super) kind: ProviderKind,
    pub(super) model: Option<String>,
    pub(super) base_url: Option<String>,
    pub(super) script: Option<Spanned<String>>,
    pub(super) max_output_tokens: Option<Spanned<u32>>,
    pub(super) thinking_budget: Option<Spanned<u32>>,
    pub(super) reasoning_effort: Option<ReasoningEffort>,
    pub(super) stream_idle_timeout: Option<Spanned<String>>,
    pub(super) max_reply_bytes: Option<Spanned<toml::Value>>,
    pub(super) tool_choice: Option<Spanned<String>>,
    pub(super) stream: Option<Spanned<bool>>,
    pub(super) request_timeout: Option<Spanned<String>>,
    #[serde(default)]
    pub(super) fallback: Vec<RawFallback>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawFallback {
    pub(super) kind: ProviderKind,
    pub(super) model: Option<String>,
    pub(super) base_url: Option<String>,
    pub(super) script: Option<String>,
}

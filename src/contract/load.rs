//! Task-file loading: TOML into raw structs that keep spans, then into a
//! [`TaskContract`], then one validation shared with contracts built in code.
//!
//! Every error names the key, and for a file also the file and the line, because the
//! person fixing it is looking at that file.

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use super::units::{parse_duration, parse_duration_field};
use super::{
    Budget, LimitSettings, NetworkSetting, ProviderKind, ProviderSpec, SandboxSettings,
    TaskContract, Verification, VerifySettings, WorkspaceMode,
};
use super::policy::{Override, Rule, TaskPolicy};
use super::{ContextSettings, ModelPrice, ReasoningEffort, RetryPolicy, StallPolicy};

/// A contract that cannot be run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ContractError {
    /// The task file could not be read.
    #[error("cannot read task file {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A key of the task file is unknown, mistyped or impossible.
    #[error("{}:{line}: {key}: {message}", file.display())]
    Invalid {
        /// The task file.
        file: PathBuf,
        /// 1-based line of the offending key or value.
        line: usize,
        /// Dotted key (`budget.max_steps`), or `(syntax)` for a parse error.
        key: String,
        /// What is wrong.
        message: String,
    },
    /// A field of a contract built in code is impossible.
    #[error("{key}: {message}")]
    Field {
        /// Dotted field name.
        key: String,
        /// What is wrong.
        message: String,
    },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    goal: Spanned<String>,
    root: Option<Spanned<String>>,
    workspace: Option<Spanned<WorkspaceMode>>,
    #[serde(default)]
    constraints: Vec<String>,
    instructions: Option<Spanned<String>>,
    verify: Spanned<RawVerify>,
    #[serde(default)]
    budget: RawBudget,
    provider: Option<Spanned<RawProvider>>,
    #[serde(default)]
    prices: BTreeMap<String, ModelPrice>,
    stall: Option<Spanned<StallPolicy>>,
    retry: Option<Spanned<RawRetry>>,
    sandbox: Option<Spanned<RawSandbox>>,
    policy: Option<Spanned<RawPolicy>>,
    context: Option<Spanned<RawContext>>,
    agents: Option<Spanned<RawAgents>>,
    #[serde(default)]
    mcp: Vec<Spanned<RawMcp>>,
}

/// One `[[mcp]]` entry: `command` (a string or an argv array) with optional `args`
/// for stdio, or `url` for streamable HTTP.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMcp {
    name: String,
    command: Option<RawCommand>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: Vec<String>,
    sandbox: Option<bool>,
    url: Option<String>,
    bearer_token_env: Option<String>,
    #[serde(default)]
    required: bool,
    startup_timeout: Option<String>,
    call_timeout: Option<String>,
    #[serde(default)]
    allow_tools: Vec<String>,
    #[serde(default)]
    deny_tools: Vec<String>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum RawCommand {
    Program(String),
    Argv(Vec<String>),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAgents {
    max_depth: Option<Spanned<u32>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawContext {
    max_tokens: Option<Spanned<u64>>,
    assemble: Option<bool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSandbox {
    require: Option<Spanned<String>>,
    network: Option<Spanned<String>>,
    allow_hosts: Option<Spanned<Vec<String>>>,
    resolve: Option<Spanned<std::collections::BTreeMap<String, String>>>,
    #[serde(default)]
    env: Vec<String>,
    #[serde(default)]
    read_only_paths: Vec<String>,
    limits: Option<Spanned<RawLimits>>,
    #[serde(default)]
    allow_weaker: bool,
    #[serde(default)]
    shell: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLimits {
    cpu_secs: Option<u64>,
    wall_secs: Option<u64>,
    memory: Option<toml::Value>,
    processes: Option<u64>,
    open_files: Option<u64>,
    output: Option<toml::Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPolicy {
    #[serde(default)]
    rules: Vec<Spanned<Rule>>,
    #[serde(default, rename = "override")]
    overrides: Vec<Spanned<Override>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRetry {
    max_attempts: Option<u32>,
    base: Option<Spanned<String>>,
    cap: Option<Spanned<String>>,
    jitter: Option<bool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawVerify {
    command: Option<Spanned<Vec<String>>>,
    expect_exit: Option<i32>,
    timeout: Option<Spanned<String>>,
    file_contains: Option<Spanned<RawFileContains>>,
    file_equals: Option<Spanned<RawFileEquals>>,
    rust: Option<Spanned<RawRust>>,
    cargo_test: Option<Spanned<RawCargoTest>>,
    max_attempts: Option<Spanned<u32>>,
    #[serde(default)]
    every_step: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRust {
    subject: PathBuf,
    criterion: PathBuf,
}

/// `cargo_test = { manifest = "Cargo.toml", criteria = ["criteria/parse_test.rs"] }`
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCargoTest {
    #[serde(default = "default_manifest")]
    manifest: PathBuf,
    criteria: Vec<PathBuf>,
}

fn default_manifest() -> PathBuf {
    PathBuf::from("Cargo.toml")
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFileContains {
    file: String,
    needle: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFileEquals {
    file: String,
    content: String,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawBudget {
    max_steps: Option<Spanned<u32>>,
    max_duration: Option<Spanned<String>>,
    max_tokens: Option<Spanned<u64>>,
    max_cost_usd: Option<Spanned<f64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawProvider {
    kind: ProviderKind,
    model: Option<String>,
    base_url: Option<String>,
    script: Option<Spanned<String>>,
    max_output_tokens: Option<Spanned<u32>>,
    thinking_budget: Option<u32>,
    reasoning_effort: Option<ReasoningEffort>,
    #[serde(default)]
    fallback: Vec<RawFallback>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFallback {
    kind: ProviderKind,
    model: Option<String>,
    base_url: Option<String>,
    script: Option<String>,
}

/// Where each validated key stands in the file.
type Spans = BTreeMap<String, Range<usize>>;

pub(super) fn from_file(path: &Path) -> Result<TaskContract, ContractError> {
    let text = std::fs::read_to_string(path).map_err(|source| ContractError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    from_str(&text, path)
}

pub(super) fn from_str(text: &str, file: &Path) -> Result<TaskContract, ContractError> {
    let invalid = |span: Option<Range<usize>>, key: &str, message: String| ContractError::Invalid {
        file: file.to_path_buf(),
        line: span.map_or(1, |s| line_of(text, s.start)),
        key: key.to_string(),
        message,
    };
    let raw: RawFile = toml::from_str(text).map_err(|e| {
        let message = e.message().trim().to_string();
        let key = unknown_key_name(&message).unwrap_or_else(|| "(syntax)".into());
        invalid(e.span(), &key, message)
    })?;
    let base = file
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
    let (contract, spans) =
        convert(raw, &base).map_err(|(key, span, msg)| invalid(span, &key, msg))?;
    validate(&contract).map_err(|(key, message)| {
        // `mcp[1].name` points at its entry when the field has no span of its own.
        let span = spans.get(&key).cloned().or_else(|| {
            key.rsplit_once('.')
                .and_then(|(entry, _)| spans.get(entry).cloned())
        });
        invalid(span, &key, message)
    })?;
    Ok(contract)
}

/// The key a serde "unknown field" message names.
pub(crate) fn unknown_key_name(message: &str) -> Option<String> {
    let rest = message.strip_prefix("unknown field `")?;
    Some(rest.split('`').next()?.to_string())
}

/// The 1-based line of a byte offset, for errors that name a TOML file's line.
pub(crate) fn line_of(text: &str, offset: usize) -> usize {
    text.as_bytes()[..offset.min(text.len())]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

type ConvertError = (String, Option<Range<usize>>, String);

fn convert(raw: RawFile, base: &Path) -> Result<(TaskContract, Spans), ConvertError> {
    let mut spans = Spans::new();
    let mut note = |key: &str, span: Range<usize>| {
        spans.insert(key.to_string(), span);
    };
    note("goal", raw.goal.span());
    let root = match &raw.root {
        Some(r) => {
            note("root", r.span());
            base.join(r.get_ref())
        }
        None => base.to_path_buf(),
    };
    let workspace = raw
        .workspace
        .map_or(WorkspaceMode::InPlace, Spanned::into_inner);
    let instructions = raw.instructions.map(|s| {
        note("instructions", s.span());
        PathBuf::from(s.into_inner())
    });

    let verify_span = raw.verify.span();
    note("verify", verify_span.clone());
    let rv = raw.verify.into_inner();
    let timeout = match rv.timeout {
        Some(t) => {
            note("verify.timeout", t.span());
            parse_duration(t.get_ref())
                .map_err(|m| ("verify.timeout".to_string(), Some(t.span()), m))?
        }
        None => Duration::from_secs(300),
    };
    let mut criteria = Vec::new();
    if let Some(c) = rv.command {
        note("verify.command", c.span());
        criteria.push(
            Verification::Command {
                argv: c.into_inner(),
                expect_exit: rv.expect_exit.unwrap_or(0),
                timeout,
                pinned: Vec::new(),
            }
            .pin_command_files(&root),
        );
    } else if rv.expect_exit.is_some() {
        return Err((
            "verify.expect_exit".into(),
            Some(verify_span),
            "expect_exit needs verify.command".into(),
        ));
    }
    if let Some(fc) = rv.file_contains {
        note("verify.file_contains", fc.span());
        let fc = fc.into_inner();
        criteria.push(Verification::file_contains(fc.file, fc.needle));
    }
    if let Some(fe) = rv.file_equals {
        note("verify.file_equals", fe.span());
        let fe = fe.into_inner();
        criteria.push(Verification::file_equals(fe.file, fe.content));
    }
    if let Some(r) = rv.rust {
        note("verify.rust", r.span());
        let r = r.into_inner();
        let criterion = base.join(r.criterion);
        let criterion = std::path::absolute(&criterion).unwrap_or(criterion);
        criteria.push(Verification::rust(r.subject, criterion));
    }
    if let Some(ct) = rv.cargo_test {
        let span = ct.span();
        note("verify.cargo_test", span.clone());
        let ct = ct.into_inner();
        let mut files = Vec::with_capacity(ct.criteria.len());
        for p in ct.criteria {
            let full = base.join(&p);
            let file = super::OperatorFile::read(&full).map_err(|e| {
                (
                    "verify.cargo_test".to_string(),
                    Some(span.clone()),
                    format!("criterion {}: {e}", full.display()),
                )
            })?;
            files.push(file);
        }
        criteria.push(Verification::CargoTest {
            manifest: ct.manifest,
            criteria: files,
        });
    }
    let max_attempts = rv.max_attempts.map_or(5, |m| {
        note("verify.max_attempts", m.span());
        m.into_inner()
    });

    let mut budget = Budget::default();
    if let Some(s) = raw.budget.max_steps {
        note("budget.max_steps", s.span());
        budget.max_steps = s.into_inner();
    }
    if let Some(d) = raw.budget.max_duration {
        note("budget.max_duration", d.span());
        budget.max_duration = Some(
            parse_duration_field(d.get_ref())
                .map_err(|m| ("budget.max_duration".to_string(), Some(d.span()), m))?,
        );
    }
    if let Some(t) = raw.budget.max_tokens {
        note("budget.max_tokens", t.span());
        budget.max_tokens = Some(t.into_inner());
    }
    if let Some(c) = raw.budget.max_cost_usd {
        note("budget.max_cost_usd", c.span());
        budget.max_cost_usd = Some(c.into_inner());
    }

    let mut providers = Vec::new();
    if let Some(p) = raw.provider {
        note("provider", p.span());
        let p = p.into_inner();
        let mut spec = ProviderSpec::new(p.kind);
        spec.model = p.model;
        spec.base_url = p.base_url;
        if let Some(s) = p.script {
            note("provider.script", s.span());
            spec.script = Some(base.join(s.get_ref()));
        }
        if let Some(m) = p.max_output_tokens {
            note("provider.max_output_tokens", m.span());
            spec.max_output_tokens = m.into_inner();
        }
        spec.thinking_budget = p.thinking_budget;
        spec.reasoning_effort = p.reasoning_effort;
        let (max_out, thinking, effort) = (
            spec.max_output_tokens,
            spec.thinking_budget,
            spec.reasoning_effort,
        );
        providers.push(spec);
        for f in p.fallback {
            let mut fb = ProviderSpec::new(f.kind);
            fb.model = f.model;
            fb.base_url = f.base_url;
            fb.script = f.script.map(|s| base.join(s));
            fb.max_output_tokens = max_out;
            fb.thinking_budget = thinking;
            fb.reasoning_effort = effort;
            providers.push(fb);
        }
    }

    let mut retry = RetryPolicy::default();
    if let Some(r) = raw.retry {
        note("retry", r.span());
        let r = r.into_inner();
        if let Some(n) = r.max_attempts {
            retry.max_attempts = n;
        }
        if let Some(b) = r.base {
            retry.base = parse_duration(b.get_ref())
                .map_err(|m| ("retry.base".to_string(), Some(b.span()), m))?;
        }
        if let Some(c) = r.cap {
            retry.cap = parse_duration(c.get_ref())
                .map_err(|m| ("retry.cap".to_string(), Some(c.span()), m))?;
        }
        if let Some(j) = r.jitter {
            retry.jitter = j;
        }
    }
    let sandbox = match raw.sandbox {
        Some(sb) => convert_sandbox(sb, base, &mut note)?,
        None => SandboxSettings::default(),
    };
    let stall = raw.stall.map_or_else(StallPolicy::default, |s| {
        note("stall.window", s.span());
        s.into_inner()
    });
    let mut policy = TaskPolicy::default();
    if let Some(p) = raw.policy {
        note("policy", p.span());
        let p = p.into_inner();
        for (i, r) in p.rules.into_iter().enumerate() {
            note(&format!("policy.rules[{i}]"), r.span());
            policy.rules.push(r.into_inner());
        }
        for (i, o) in p.overrides.into_iter().enumerate() {
            note(&format!("policy.override[{i}]"), o.span());
            policy.overrides.push(o.into_inner());
        }
    }
    let mut agents = super::AgentSettings::default();
    if let Some(a) = raw.agents {
        note("agents", a.span());
        if let Some(d) = a.into_inner().max_depth {
            note("agents.max_depth", d.span());
            agents.max_depth = d.into_inner();
        }
    }
    let mut mcp = Vec::new();
    for (i, m) in raw.mcp.into_iter().enumerate() {
        let key = format!("mcp[{i}]");
        note(&key, m.span());
        mcp.push(convert_mcp(m, &key)?);
    }
    let mut context = ContextSettings::default();
    if let Some(c) = raw.context {
        note("context", c.span());
        let c = c.into_inner();
        if let Some(m) = c.max_tokens {
            note("context.max_tokens", m.span());
            context.max_tokens = Some(m.into_inner());
        }
        if let Some(a) = c.assemble {
            context.assemble = a;
        }
    }
    let contract = TaskContract {
        agents,
        goal: raw.goal.into_inner(),
        root,
        workspace,
        constraints: raw.constraints,
        instructions,
        verify: VerifySettings {
            criteria,
            max_attempts,
            every_step: rv.every_step,
        },
        budget,
        providers,
        prices: raw.prices,
        stall,
        retry,
        sandbox,
        policy,
        mcp,
        context,
    };
    Ok((contract, spans))
}

fn convert_mcp(m: Spanned<RawMcp>, key: &str) -> Result<super::mcp::McpServerSpec, ConvertError> {
    use super::mcp::{McpServerSpec, McpTransport};
    let span = m.span();
    let m = m.into_inner();
    let bad = |field: &str, msg: String| (format!("{key}.{field}"), Some(span.clone()), msg);
    let transport = match (m.command, m.url) {
        (Some(_), Some(_)) => {
            return Err(bad(
                "url",
                "give either command (stdio) or url (HTTP), not both".into(),
            ));
        }
        (None, None) => {
            return Err(bad("command", "needs command (stdio) or url (HTTP)".into()));
        }
        (Some(c), None) => {
            if m.bearer_token_env.is_some() {
                return Err(bad("bearer_token_env", "only for url servers".into()));
            }
            let mut argv = match c {
                RawCommand::Program(p) => vec![p],
                RawCommand::Argv(a) => a,
            };
            argv.extend(m.args);
            McpTransport::Stdio {
                argv,
                env: m.env,
                sandbox: m.sandbox.unwrap_or(true),
            }
        }
        (None, Some(url)) => {
            for (field, set) in [
                ("args", !m.args.is_empty()),
                ("env", !m.env.is_empty()),
                ("sandbox", m.sandbox.is_some()),
            ] {
                if set {
                    return Err(bad(field, "only for command (stdio) servers".into()));
                }
            }
            McpTransport::Http {
                url,
                bearer_token_env: m.bearer_token_env,
            }
        }
    };
    let mut spec = McpServerSpec {
        name: m.name,
        transport,
        required: m.required,
        startup_timeout: super::mcp::DEFAULT_STARTUP_TIMEOUT,
        call_timeout: super::mcp::DEFAULT_CALL_TIMEOUT,
        allow_tools: m.allow_tools,
        deny_tools: m.deny_tools,
    };
    if let Some(t) = m.startup_timeout {
        spec.startup_timeout = parse_duration(&t).map_err(|e| bad("startup_timeout", e))?;
    }
    if let Some(t) = m.call_timeout {
        spec.call_timeout = parse_duration(&t).map_err(|e| bad("call_timeout", e))?;
    }
    Ok(spec)
}

fn convert_sandbox(
    sb: Spanned<RawSandbox>,
    base: &Path,
    note: &mut impl FnMut(&str, Range<usize>),
) -> Result<SandboxSettings, ConvertError> {
    note("sandbox", sb.span());
    let sb = sb.into_inner();
    let mut out = SandboxSettings::default();
    if let Some(r) = sb.require {
        note("sandbox.require", r.span());
        if r.get_ref().parse::<crate::sandbox::Backend>().is_err() {
            return Err((
                "sandbox.require".into(),
                Some(r.span()),
                format!(
                    "unknown backend {:?}: expected linux-namespaces, macos-sandbox-exec, windows-job-object or portable-floor",
                    r.get_ref()
                ),
            ));
        }
        out.require = Some(r.into_inner());
    }
    let mut network_span = None;
    if let Some(n) = sb.network {
        note("sandbox.network", n.span());
        network_span = Some(n.span());
        out.network = match n.get_ref().as_str() {
            "none" => NetworkSetting::None,
            "open" => NetworkSetting::Open,
            "allowlist" => NetworkSetting::Allowlist,
            other => {
                return Err((
                    "sandbox.network".into(),
                    Some(n.span()),
                    format!("{other:?}: expected \"none\", \"allowlist\" or \"open\""),
                ));
            }
        };
    }
    let allowlist = out.network == NetworkSetting::Allowlist;
    if let Some(h) = sb.allow_hosts {
        note("sandbox.allow_hosts", h.span());
        let span = h.span();
        let hosts = h.into_inner();
        if !hosts.is_empty() && !allowlist {
            return Err((
                "sandbox.allow_hosts".into(),
                Some(span),
                "hosts are only admitted with network = \"allowlist\"".into(),
            ));
        }
        for (i, host) in hosts.iter().enumerate() {
            if let Err(e) = crate::egress::HostRule::parse(host) {
                return Err((
                    format!("sandbox.allow_hosts[{i}]"),
                    Some(span.clone()),
                    format!("{e} (expected a name, *.suffix or IP literal with an optional :port)"),
                ));
            }
        }
        out.allow_hosts = hosts;
    }
    if allowlist && out.allow_hosts.is_empty() {
        return Err((
            "sandbox.allow_hosts".into(),
            network_span,
            "network = \"allowlist\" needs at least one host in allow_hosts (with none, use \"none\")".into(),
        ));
    }
    if let Some(r) = sb.resolve {
        note("sandbox.resolve", r.span());
        let span = r.span();
        let map = r.into_inner();
        if !map.is_empty() && !allowlist {
            return Err((
                "sandbox.resolve".into(),
                Some(span),
                "names are only resolved by the egress proxy, with network = \"allowlist\"".into(),
            ));
        }
        for (name, addr) in map {
            let key = format!("sandbox.resolve.{name:?}");
            let ip: std::net::IpAddr = addr.parse().map_err(|_| {
                (
                    key.clone(),
                    Some(span.clone()),
                    format!("{addr:?} is not an IP address"),
                )
            })?;
            match crate::egress::HostRule::parse(&name) {
                Ok(rule) if rule.is_plain_name() => {}
                _ => {
                    return Err((
                        key,
                        Some(span.clone()),
                        format!("{name:?} is not a host name (no port, no wildcard, no IP)"),
                    ));
                }
            }
            out.resolve.insert(name.to_ascii_lowercase(), ip);
        }
    }
    for name in &sb.env {
        if name.is_empty() || name.contains('=') {
            return Err((
                "sandbox.env".into(),
                None,
                format!("{name:?} is not a variable name"),
            ));
        }
    }
    out.env = sb.env;
    out.read_only_paths = sb.read_only_paths.iter().map(|p| base.join(p)).collect();
    if let Some(l) = sb.limits {
        let span = l.span();
        note("sandbox.limits", span.clone());
        let l = l.into_inner();
        let size = |key: &str, v: Option<toml::Value>| -> Result<Option<u64>, ConvertError> {
            match v {
                None => Ok(None),
                Some(toml::Value::Integer(n)) if n >= 0 => Ok(Some(n as u64)),
                Some(toml::Value::String(s)) => super::parse_size(&s)
                    .map(Some)
                    .map_err(|m| (format!("sandbox.limits.{key}"), Some(span.clone()), m)),
                Some(other) => Err((
                    format!("sandbox.limits.{key}"),
                    Some(span.clone()),
                    format!("{other} is not a size like \"4GiB\""),
                )),
            }
        };
        out.limits = LimitSettings {
            cpu_secs: l.cpu_secs,
            wall_secs: l.wall_secs,
            memory: size("memory", l.memory)?,
            processes: l.processes,
            open_files: l.open_files,
            output: size("output", l.output)?,
        };
        let zero = [
            ("cpu_secs", out.limits.cpu_secs),
            ("wall_secs", out.limits.wall_secs),
            ("memory", out.limits.memory),
            ("processes", out.limits.processes),
            ("open_files", out.limits.open_files),
            ("output", out.limits.output),
        ]
        .into_iter()
        .find(|(_, v)| *v == Some(0));
        if let Some((key, _)) = zero {
            return Err((
                format!("sandbox.limits.{key}"),
                Some(span),
                "must be more than zero".into(),
            ));
        }
    }
    out.allow_weaker = sb.allow_weaker;
    out.shell = sb.shell;
    Ok(out)
}

pub(super) fn relative_inside(p: &Path) -> bool {
    !p.as_os_str().is_empty()
        && p.components()
            .all(|c| matches!(c, Component::Normal(_) | Component::CurDir))
}

/// The smallest per-request budget `[context] max_tokens` accepts.
const MIN_CONTEXT_TOKENS: u64 = 2_000;

/// The checks shared by files and code: `Err((key, message))`.
pub(crate) fn validate(c: &TaskContract) -> Result<(), (String, String)> {
    let err = |k: &str, m: String| Err((k.to_string(), m));
    if c.goal.trim().is_empty() {
        return err("goal", "must not be empty".into());
    }
    match std::fs::metadata(&c.root) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => return err("root", format!("{} is not a directory", c.root.display())),
        Err(e) => return err("root", format!("{}: {e}", c.root.display())),
    }
    if let Some(i) = &c.instructions
        && !relative_inside(i)
    {
        return err(
            "instructions",
            format!(
                "{} must be a relative path inside the workspace",
                i.display()
            ),
        );
    }
    if c.verify.criteria.is_empty() {
        return err(
            "verify",
            "needs at least one criterion (command, file_contains, file_equals, rust or cargo_test)".into(),
        );
    }
    if c.verify.max_attempts == 0 {
        return err("verify.max_attempts", "must be at least 1".into());
    }
    for v in &c.verify.criteria {
        match v {
            Verification::Command { argv, timeout, .. } => {
                if argv.is_empty() || argv[0].is_empty() {
                    return err("verify.command", "must name a program".into());
                }
                if timeout.is_zero() {
                    return err("verify.timeout", "must be longer than zero".into());
                }
            }
            Verification::Rust { subject, criterion } => {
                if !relative_inside(subject) {
                    return err(
                        "verify.rust",
                        format!(
                            "subject {} must be a relative path inside the workspace",
                            subject.display()
                        ),
                    );
                }
                if !criterion.is_absolute() {
                    return err(
                        "verify.rust",
                        format!("criterion {} must be an absolute path", criterion.display()),
                    );
                }
                if !criterion.is_file() {
                    return err(
                        "verify.rust",
                        format!("criterion {} is not a readable file", criterion.display()),
                    );
                }
                // Inside the workspace the agent could edit the test it is judged by.
                if let (Ok(crit), Ok(root)) = (criterion.canonicalize(), c.root.canonicalize())
                    && crit.starts_with(&root)
                {
                    return err(
                        "verify.rust",
                        format!(
                            "criterion {} lies inside the workspace, where the agent could edit it",
                            criterion.display()
                        ),
                    );
                }
            }
            Verification::CargoTest { manifest, criteria } => {
                if !relative_inside(manifest) {
                    return err(
                        "verify.cargo_test",
                        format!(
                            "manifest {} must be a relative path inside the workspace",
                            manifest.display()
                        ),
                    );
                }
                if manifest.file_name().is_none_or(|n| n != "Cargo.toml") {
                    return err(
                        "verify.cargo_test",
                        format!("manifest {} must be a Cargo.toml", manifest.display()),
                    );
                }
                if criteria.is_empty() {
                    return err(
                        "verify.cargo_test",
                        "needs at least one criterion file".into(),
                    );
                }
                for f in criteria {
                    if f.path.extension().is_none_or(|e| e != "rs") {
                        return err(
                            "verify.cargo_test",
                            format!("criterion {} must be a .rs file", f.path.display()),
                        );
                    }
                }
            }
            Verification::FileContains { file, .. } => {
                if !relative_inside(file) {
                    return err(
                        "verify.file_contains",
                        format!(
                            "{} must be a relative path inside the workspace",
                            file.display()
                        ),
                    );
                }
            }
            Verification::FileEquals { file, .. } => {
                if !relative_inside(file) {
                    return err(
                        "verify.file_equals",
                        format!(
                            "{} must be a relative path inside the workspace",
                            file.display()
                        ),
                    );
                }
            }
        }
    }
    let b = &c.budget;
    if b.max_steps == 0 {
        return err("budget.max_steps", "must be at least 1".into());
    }
    if b.max_duration.is_some_and(|d| d.is_zero()) {
        return err("budget.max_duration", "must be longer than zero".into());
    }
    if b.max_tokens == Some(0) {
        return err("budget.max_tokens", "must be at least 1".into());
    }
    if let Some(usd) = b.max_cost_usd
        && !(usd.is_finite() && usd > 0.0)
    {
        return err(
            "budget.max_cost_usd",
            format!("{usd} is not a positive amount"),
        );
    }
    for (model, p) in &c.prices {
        let prices = [Some(p.input), Some(p.output), p.cached_input, p.cache_write];
        if prices
            .iter()
            .flatten()
            .any(|v| !(v.is_finite() && *v >= 0.0))
        {
            return err(
                "prices",
                format!("{model}: prices must be non-negative numbers"),
            );
        }
    }
    if let Some(m) = c.context.max_tokens
        && m < MIN_CONTEXT_TOKENS
    {
        return err(
            "context.max_tokens",
            format!(
                "{m} is too small: a request needs room for the system prompt, the tools, the goal and an observation (at least {MIN_CONTEXT_TOKENS})"
            ),
        );
    }
    if c.retry.max_attempts == 0 {
        return err("retry", "max_attempts must be at least 1".into());
    }
    if c.stall.window == 0 {
        return err("stall.window", "must be at least 1".into());
    }
    c.policy.check()?;
    if c.agents.max_depth > super::MAX_AGENT_DEPTH {
        return err(
            "agents.max_depth",
            format!(
                "{} is deeper than the {} levels allowed",
                c.agents.max_depth,
                super::MAX_AGENT_DEPTH
            ),
        );
    }
    for (i, m) in c.mcp.iter().enumerate() {
        if let Err((field, message)) = m.check() {
            return err(&format!("mcp[{i}].{field}"), message);
        }
        if c.mcp[..i].iter().any(|o| o.name == m.name) {
            return err(
                &format!("mcp[{i}].name"),
                format!("{:?} is declared twice", m.name),
            );
        }
    }
    let table = c.price_table();
    for p in &c.providers {
        if p.max_output_tokens == 0 {
            return err("provider.max_output_tokens", "must be at least 1".into());
        }
        if p.kind == ProviderKind::Scripted {
            match &p.script {
                None => {
                    return err(
                        "provider.script",
                        "kind = \"scripted\" needs a script file".into(),
                    );
                }
                Some(s) if !s.is_file() => {
                    return err("provider.script", format!("{} does not exist", s.display()));
                }
                Some(_) => {}
            }
        }
        check_cost_price(c, p, &table)?;
    }
    Ok(())
}

/// A cost budget needs a price for every model whose cost is not reported by the
/// provider itself (OpenRouter) or recorded in a script.
pub(crate) fn check_cost_price(
    c: &TaskContract,
    p: &ProviderSpec,
    table: &super::PriceTable,
) -> Result<(), (String, String)> {
    if c.budget.max_cost_usd.is_none()
        || !matches!(p.kind, ProviderKind::Openai | ProviderKind::Anthropic)
    {
        return Ok(());
    }
    if let Some(model) = &p.model
        && table.get(model).is_none()
    {
        return Err((
            "budget.max_cost_usd".into(),
            format!(
                "the price of model {model} is unknown, so a cost budget cannot be enforced; add it under [prices.\"{model}\"]"
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(text: &str) -> Result<TaskContract, ContractError> {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("task.toml");
        std::fs::write(&file, text).unwrap();
        let out = from_file(&file);
        drop(dir);
        out
    }

    fn invalid(text: &str) -> (usize, String, String) {
        match load(text) {
            Err(ContractError::Invalid {
                line, key, message, ..
            }) => (line, key, message),
            other => panic!("expected Invalid, got {other:?}"),
        }
    }

    const OK: &str = "goal = \"g\"\n[verify]\ncommand = [\"true\"]\n";

    #[test]
    fn minimal_file_loads_with_defaults() {
        let c = load(OK).unwrap();
        assert_eq!(c.goal, "g");
        assert_eq!(c.budget.max_steps, 40);
        assert_eq!(c.verify.max_attempts, 5);
        assert_eq!(c.workspace, WorkspaceMode::InPlace);
        assert!(
            matches!(&c.verify.criteria[0], Verification::Command { argv, expect_exit: 0, .. } if argv == &["true"])
        );
    }

    #[test]
    fn network_allowlist_parses_hosts_and_pins() {
        let c = load(&format!(
            "{OK}[sandbox]\nnetwork = \"allowlist\"\nallow_hosts = [\"crates.io\", \"*.pypi.org:443\"]\nresolve = {{ \"Mirror.internal\" = \"10.0.0.5\" }}\n"
        ))
        .unwrap();
        assert_eq!(c.sandbox.network, NetworkSetting::Allowlist);
        let rules: Vec<String> = c
            .sandbox
            .host_rules()
            .unwrap()
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(rules, ["crates.io", "*.pypi.org:443"]);
        assert_eq!(
            c.sandbox.resolve.get("mirror.internal"),
            Some(&"10.0.0.5".parse().unwrap())
        );
    }

    #[test]
    fn bad_egress_settings_name_the_entry() {
        let sb = |body: &str| invalid(&format!("{OK}[sandbox]\n{body}\n"));
        let (_, key, msg) =
            sb("network = \"allowlist\"\nallow_hosts = [\"crates.io\", \"a*b.org\"]");
        assert_eq!(key, "sandbox.allow_hosts[1]");
        assert!(msg.contains("a*b.org"), "{msg}");
        let (_, key, msg) = sb("network = \"allowlist\"\nallow_hosts = [\"x.org:99999\"]");
        assert_eq!(key, "sandbox.allow_hosts[0]");
        assert!(msg.contains("port"), "{msg}");
        let (_, key, _) = sb("network = \"allowlist\"");
        assert_eq!(key, "sandbox.allow_hosts");
        let (_, key, msg) = sb("allow_hosts = [\"crates.io\"]");
        assert_eq!(key, "sandbox.allow_hosts");
        assert!(msg.contains("allowlist"), "{msg}");
        let (_, key, _) = sb("network = \"sometimes\"");
        assert_eq!(key, "sandbox.network");
        let (_, key, msg) = sb(
            "network = \"allowlist\"\nallow_hosts = [\"a.org\"]\nresolve = { \"a.org\" = \"not-an-ip\" }",
        );
        assert_eq!(key, "sandbox.resolve.\"a.org\"");
        assert!(msg.contains("not-an-ip"), "{msg}");
        let (_, key, _) = sb(
            "network = \"allowlist\"\nallow_hosts = [\"a.org\"]\nresolve = { \"*.a.org\" = \"10.0.0.1\" }",
        );
        assert!(key.starts_with("sandbox.resolve."), "{key}");
        // An empty list with the default posture is fine (the canonical task file has it).
        assert!(
            load(&format!(
                "{OK}[sandbox]\nnetwork = \"none\"\nallow_hosts = []\n"
            ))
            .is_ok()
        );
    }

    #[test]
    fn unknown_key_is_named_with_its_line() {
        let (line, key, msg) =
            invalid("goal = \"g\"\n[verify]\ncommand = [\"true\"]\n[budget]\nmax_stepz = 3\n");
        assert_eq!((line, key.as_str()), (5, "max_stepz"));
        assert!(msg.contains("unknown field"), "{msg}");
    }

    #[test]
    fn wrong_type_names_line() {
        let (line, _, msg) = invalid(
            "goal = \"g\"\n[verify]\ncommand = [\"true\"]\n[budget]\nmax_steps = \"ten\"\n",
        );
        assert_eq!(line, 5);
        assert!(msg.contains("integer") || msg.contains("u32"), "{msg}");
    }

    #[test]
    fn zero_steps_refused_at_its_line() {
        let (line, key, _) =
            invalid("goal = \"g\"\n[verify]\ncommand = [\"true\"]\n[budget]\nmax_steps = 0\n");
        assert_eq!((line, key.as_str()), (5, "budget.max_steps"));
    }

    #[test]
    fn missing_root_refused() {
        let (line, key, msg) =
            invalid("goal = \"g\"\nroot = \"nope/not/here\"\n[verify]\ncommand = [\"true\"]\n");
        assert_eq!((line, key.as_str()), (2, "root"));
        assert!(msg.contains("nope/not/here"), "{msg}");
    }

    #[test]
    fn cost_budget_with_unknown_price_refused() {
        let (line, key, msg) = invalid(
            "goal = \"g\"\n[verify]\ncommand = [\"true\"]\n[budget]\nmax_cost_usd = 1.5\n[provider]\nkind = \"openai\"\nmodel = \"mystery-1\"\n",
        );
        assert_eq!((line, key.as_str()), (5, "budget.max_cost_usd"));
        assert!(msg.contains("mystery-1"), "{msg}");
    }

    #[test]
    fn cost_budget_with_user_price_accepted() {
        let c = load(
            "goal = \"g\"\n[verify]\ncommand = [\"true\"]\n[budget]\nmax_cost_usd = 1.5\n[provider]\nkind = \"openai\"\nmodel = \"mystery-1\"\n[prices.mystery-1]\ninput = 1.0\noutput = 2.0\n",
        )
        .unwrap();
        assert_eq!(c.price_table().get("mystery-1").unwrap().output, 2.0);
    }

    #[test]
    fn no_criterion_refused() {
        let (_, key, _) = invalid("goal = \"g\"\n[verify]\nmax_attempts = 2\n");
        assert_eq!(key, "verify");
    }

    #[test]
    fn hostile_verify_path_refused() {
        let (_, key, _) = invalid(
            "goal = \"g\"\n[verify]\nfile_contains = { file = \"../etc/passwd\", needle = \"x\" }\n",
        );
        assert_eq!(key, "verify.file_contains");
    }

    #[test]
    fn syntax_error_has_line() {
        let (line, key, _) = invalid("goal = \"g\"\n[verify\n");
        assert_eq!((line, key.as_str()), (2, "(syntax)"));
    }

    #[test]
    fn duration_parsed_and_bad_duration_refused() {
        let c = load(
            "goal = \"g\"\n[verify]\ncommand = [\"true\"]\n[budget]\nmax_duration = \"15m\"\n",
        )
        .unwrap();
        assert_eq!(c.budget.max_duration, Some(Duration::from_secs(900)));
        let (line, key, _) = invalid(
            "goal = \"g\"\n[verify]\ncommand = [\"true\"]\n[budget]\nmax_duration = \"soon\"\n",
        );
        assert_eq!((line, key.as_str()), (5, "budget.max_duration"));
    }

    #[test]
    fn mcp_servers_load_with_defaults() {
        let c = load(
            "goal = \"g\"\n[verify]\ncommand = [\"true\"]\n\n[[mcp]]\nname = \"fs\"\ncommand = \"node\"\nargs = [\"server.js\", \".\"]\nrequired = true\ncall_timeout = \"5s\"\ndeny_tools = [\"write_*\"]\n\n[[mcp]]\nname = \"web\"\nurl = \"http://127.0.0.1:3001/mcp\"\nbearer_token_env = \"WEB_TOKEN\"\n",
        )
        .unwrap();
        assert_eq!(c.mcp.len(), 2);
        let fs = &c.mcp[0];
        assert!(fs.required);
        assert_eq!(fs.call_timeout, Duration::from_secs(5));
        assert!(!fs.offers("write_file"));
        assert_eq!(
            fs.transport,
            crate::contract::mcp::McpTransport::Stdio {
                argv: vec!["node".into(), "server.js".into(), ".".into()],
                env: vec![],
                sandbox: true
            }
        );
        // The stored form round-trips (resume compares contracts).
        let json = serde_json::to_string(&c).unwrap();
        let back: TaskContract = serde_json::from_str(&json).unwrap();
        assert_eq!(back, c);
        assert!(!json.contains("s3cret"));
    }

    #[test]
    fn bad_mcp_entries_are_named_with_their_line() {
        let head = "goal = \"g\"\n[verify]\ncommand = [\"true\"]\n";
        let (line, key, _) = invalid(&format!("{head}[[mcp]]\nname = \"x\"\n"));
        assert_eq!((line, key.as_str()), (4, "mcp[0].command"));
        let (line, key, _) = invalid(&format!(
            "{head}[[mcp]]\nname = \"x\"\ncommand = \"a\"\n\n[[mcp]]\nname = \"x\"\ncommand = \"b\"\n"
        ));
        assert_eq!((line, key.as_str()), (8, "mcp[1].name"));
        let (_, key, _) = invalid(&format!(
            "{head}[[mcp]]\nname = \"x\"\nurl = \"http://h/mcp\"\nargs = [\"a\"]\n"
        ));
        assert_eq!(key, "mcp[0].args");
        let (line, key, _) = invalid(&format!(
            "{head}[[mcp]]\nname = \"x\"\ncommand = \"a\"\ncolour = 1\n"
        ));
        assert_eq!((line, key.as_str()), (7, "colour"));
        let (_, key, _) = invalid(&format!(
            "{head}[[mcp]]\nname = \"a__b\"\ncommand = \"a\"\n"
        ));
        assert_eq!(key, "mcp[0].name");
        let (_, key, _) = invalid(&format!(
            "{head}[[mcp]]\nname = \"x\"\ncommand = \"a\"\ncall_timeout = \"never\"\n"
        ));
        assert_eq!(key, "mcp[0].call_timeout");
    }

    #[test]
    fn context_section_parses_and_bad_values_name_file_line_and_key() {
        let c = load(&format!("{OK}[context]\nmax_tokens = 60_000\n")).unwrap();
        assert_eq!(c.context.max_tokens, Some(60_000));
        assert!(c.context.assemble);
        let c = load(&format!("{OK}[context]\nassemble = false\n")).unwrap();
        assert!(!c.context.assemble);
        assert_eq!(load(OK).unwrap().context, ContextSettings::default());
        let (line, key, msg) = invalid(&format!("{OK}[context]\nmax_tokens = 10\n"));
        assert_eq!((line, key.as_str()), (5, "context.max_tokens"));
        assert!(msg.contains("too small"), "{msg}");
        let (line, key, _) = invalid(&format!("{OK}[context]\nmax_tokenz = 9000\n"));
        assert_eq!((line, key.as_str()), (5, "max_tokenz"));
        let (line, _, msg) = invalid(&format!("{OK}[context]\nmax_tokens = \"lots\"\n"));
        assert_eq!(line, 5);
        assert!(msg.contains("integer") || msg.contains("u64"), "{msg}");
        let (line, _, _) = invalid(&format!("{OK}[context]\nmax_tokens = -5\n"));
        assert_eq!(line, 5);
    }
}

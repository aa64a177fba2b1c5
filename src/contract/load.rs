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
use crate::context::ContextSettings;
use crate::policy::{Override, Rule, TaskPolicy};
use crate::provider::{ModelPrice, ReasoningEffort, RetryPolicy};
use crate::run::StallPolicy;

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
        let span = spans.get(&key).cloned();
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
        criteria.push(Verification::Command {
            argv: c.into_inner(),
            expect_exit: rv.expect_exit.unwrap_or(0),
            timeout,
        });
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
        context,
    };
    Ok((contract, spans))
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
    if let Some(n) = sb.network {
        out.network = match n.get_ref().as_str() {
            "none" => NetworkSetting::None,
            "open" => NetworkSetting::Open,
            "allowlist" => {
                return Err((
                    "sandbox.network".into(),
                    Some(n.span()),
                    "\"allowlist\" needs the egress proxy, which this version does not have yet; use \"none\" or, by explicit choice, \"open\"".into(),
                ));
            }
            other => {
                return Err((
                    "sandbox.network".into(),
                    Some(n.span()),
                    format!("{other:?}: expected \"none\" or \"open\""),
                ));
            }
        };
    }
    if let Some(h) = sb.allow_hosts
        && !h.get_ref().is_empty()
    {
        return Err((
            "sandbox.allow_hosts".into(),
            Some(h.span()),
            "host allowlists need the egress proxy, which this version does not have yet".into(),
        ));
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

fn relative_inside(p: &Path) -> bool {
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
            "needs at least one criterion (command, file_contains, file_equals or rust)".into(),
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
    table: &crate::provider::PriceTable,
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

    #[test]
    fn unimplemented_sections_are_refused_not_ignored() {
        let (_, key, _) =
            invalid("goal = \"g\"\n[verify]\ncommand = [\"true\"]\n[mcp]\nname = \"x\"\n");
        assert_eq!(key, "mcp");
    }
}

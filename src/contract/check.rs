//! The checks a contract can make alone: impossible values, named by their dotted key.
//! No file is opened here. What needs the filesystem (the root exists, a criterion is
//! readable and outside the workspace, a script exists) and what needs the policy's
//! glob compiler is checked by the task-file layer's preflight, which runs these first.

use std::path::{Component, Path};

use super::{
    Budget, ContractError, MAX_AGENT_DEPTH, ProviderKind, ProviderSpec, TaskContract, Verification,
};

/// The smallest per-request budget `[context] max_tokens` accepts.
const MIN_CONTEXT_TOKENS: u64 = 2_000;

/// A `Field` error for `key`.
fn field(key: &str, message: impl Into<String>) -> ContractError {
    ContractError::Field {
        key: key.to_string(),
        message: message.into(),
    }
}

/// `p` is relative and stays inside the directory it is relative to.
pub(crate) fn relative_inside(p: &Path) -> bool {
    !p.as_os_str().is_empty()
        && p.components()
            .all(|c| matches!(c, Component::Normal(_) | Component::CurDir))
}

/// `p` is a relative path inside the workspace, or an error at `key` saying so.
fn inside(key: &str, what: &str, p: &Path) -> Result<(), ContractError> {
    if relative_inside(p) {
        return Ok(());
    }
    Err(field(
        key,
        format!(
            "{what}{} must be a relative path inside the workspace",
            p.display()
        ),
    ))
}

impl TaskContract {
    /// Refuses impossible values, naming the field, without touching the filesystem.
    /// [`TaskContract::validate`] runs this and then the checks that need the disk.
    ///
    /// ```
    /// use io_harness::{TaskContract, Verification};
    /// let c = TaskContract::workspace("g", ".", Verification::command(["true"])).max_steps(0);
    /// assert!(c.check().unwrap_err().to_string().starts_with("budget.max_steps"));
    /// ```
    pub fn check(&self) -> Result<(), ContractError> {
        if self.goal.trim().is_empty() {
            return Err(field("goal", "must not be empty"));
        }
        if let Some(i) = &self.instructions {
            inside("instructions", "", i)?;
        }
        self.check_verify()?;
        check_budget(&self.budget)?;
        self.check_tables()?;
        self.check_mcp()?;
        let table = self.price_table();
        for p in &self.providers {
            check_provider(p)?;
            check_cost_price(self, p, &table)?;
        }
        Ok(())
    }

    /// `[verify]`: at least one criterion, each well-formed.
    fn check_verify(&self) -> Result<(), ContractError> {
        if self.verify.criteria.is_empty() {
            return Err(field(
                "verify",
                "needs at least one criterion (command, file_contains, file_equals, rust or cargo_test)",
            ));
        }
        if self.verify.max_attempts == 0 {
            return Err(field("verify.max_attempts", "must be at least 1"));
        }
        self.verify.criteria.iter().try_for_each(check_criterion)
    }

    /// `[prices]`, `[context]`, `[retry]`, `[stall]` and `[agents]`.
    fn check_tables(&self) -> Result<(), ContractError> {
        for (model, p) in &self.prices {
            let prices = [Some(p.input), Some(p.output), p.cached_input, p.cache_write];
            if prices
                .iter()
                .flatten()
                .any(|v| !(v.is_finite() && *v >= 0.0))
            {
                return Err(field(
                    "prices",
                    format!("{model}: prices must be non-negative numbers"),
                ));
            }
        }
        if let Some(m) = self.context.max_tokens
            && m < MIN_CONTEXT_TOKENS
        {
            return Err(field(
                "context.max_tokens",
                format!(
                    "{m} is too small: a request needs room for the system prompt, the tools, the goal and an observation (at least {MIN_CONTEXT_TOKENS})"
                ),
            ));
        }
        if self.retry.max_attempts == 0 {
            return Err(field("retry", "max_attempts must be at least 1"));
        }
        if self.retry.malformed_attempts == 0 {
            return Err(field("retry", "malformed_attempts must be at least 1"));
        }
        if self.tools.max_argument_bytes == 0 {
            return Err(field("tools.max_argument_bytes", "must be at least 1"));
        }
        if self.tools.max_calls_per_reply == 0 {
            return Err(field("tools.max_calls_per_reply", "must be at least 1"));
        }
        if self.stall.window == 0 {
            return Err(field("stall.window", "must be at least 1"));
        }
        if self.agents.max_depth > MAX_AGENT_DEPTH {
            return Err(field(
                "agents.max_depth",
                format!(
                    "{} is deeper than the {MAX_AGENT_DEPTH} levels allowed",
                    self.agents.max_depth
                ),
            ));
        }
        Ok(())
    }

    /// `[[mcp]]`: each entry well-formed, names unique.
    fn check_mcp(&self) -> Result<(), ContractError> {
        for (i, m) in self.mcp.iter().enumerate() {
            if let Err((f, message)) = m.check() {
                return Err(field(&format!("mcp[{i}].{f}"), message));
            }
            if self.mcp[..i].iter().any(|o| o.name == m.name) {
                return Err(field(
                    &format!("mcp[{i}].name"),
                    format!("{:?} is declared twice", m.name),
                ));
            }
        }
        Ok(())
    }
}

/// Each entry of `criterion_paths` / `criterion_exclude` is a workspace-relative
/// path or glob (`/` separated, no `..`, not absolute) that compiles.
fn criterion_globs(key: &str, globs: &[String]) -> Result<(), ContractError> {
    for g in globs {
        let climbs = g.split('/').any(|c| c == "..");
        if g.is_empty() || g.starts_with('/') || climbs || g.contains('\0') {
            return Err(field(
                key,
                format!("{g:?} must be a relative path or glob inside the workspace"),
            ));
        }
        if let Err(e) = globset::Glob::new(g) {
            return Err(field(key, format!("{g:?} is not a valid glob: {e}")));
        }
    }
    Ok(())
}

/// One criterion's shape (paths relative and inside, a program named, …).
fn check_criterion(v: &Verification) -> Result<(), ContractError> {
    match v {
        Verification::Command {
            argv,
            timeout,
            trust,
            report,
            criterion,
            ..
        } => {
            if argv.is_empty() || argv[0].is_empty() {
                return Err(field("verify.command", "must name a program"));
            }
            criterion_globs("verify.criterion_paths", &criterion.paths)?;
            criterion_globs("verify.criterion_exclude", &criterion.exclude)?;
            if timeout.is_zero() {
                return Err(field("verify.timeout", "must be longer than zero"));
            }
            if let Some(r) = report {
                check_report(*trust, r)?;
            }
        }
        Verification::Rust {
            subject,
            criterion,
            signatures,
            ..
        } => {
            inside("verify.rust", "subject ", subject)?;
            check_signatures("verify.rust.signatures", signatures)?;
            if !criterion.is_absolute() {
                return Err(field(
                    "verify.rust",
                    format!("criterion {} must be an absolute path", criterion.display()),
                ));
            }
        }
        Verification::CargoTest {
            manifest,
            criteria,
            signatures,
            ..
        } => {
            inside("verify.cargo_test", "manifest ", manifest)?;
            check_signatures("verify.cargo_test.signatures", signatures)?;
            if manifest.file_name().is_none_or(|n| n != "Cargo.toml") {
                return Err(field(
                    "verify.cargo_test",
                    format!("manifest {} must be a Cargo.toml", manifest.display()),
                ));
            }
            if criteria.is_empty() {
                return Err(field(
                    "verify.cargo_test",
                    "needs at least one criterion file",
                ));
            }
            if let Some(f) = criteria
                .iter()
                .find(|f| f.path.extension().is_none_or(|e| e != "rs"))
            {
                return Err(field(
                    "verify.cargo_test",
                    format!("criterion {} must be a .rs file", f.path.display()),
                ));
            }
        }
        Verification::FileContains { file, .. } => inside("verify.file_contains", "", file)?,
        Verification::FileEquals { file, .. } => inside("verify.file_equals", "", file)?,
    }
    Ok(())
}

/// A command gate's declared test report: it counts something, names real tests,
/// and is not combined with an exit-code-only setting that would ignore it.
fn check_report(trust: super::CommandTrust, r: &super::TestReport) -> Result<(), ContractError> {
    if trust == super::CommandTrust::ExitCode {
        return Err(field(
            "verify.report",
            "a report is counted, so it cannot go with trust = \"exit-code\"",
        ));
    }
    if r.min_tests == 0 {
        return Err(field(
            "verify.report.min_tests",
            "must be at least 1 (a report that counts no test shows nothing ran)",
        ));
    }
    if let Some((i, _)) = r
        .require
        .iter()
        .enumerate()
        .find(|(_, t)| t.trim().is_empty() || !t.contains("::"))
    {
        return Err(field(
            &format!("verify.report.require[{i}]"),
            "must name a test as classname::name",
        ));
    }
    Ok(())
}

/// `[budget]`: every limit that is set can be reached.
fn check_budget(b: &Budget) -> Result<(), ContractError> {
    if b.max_steps == 0 {
        return Err(field("budget.max_steps", "must be at least 1"));
    }
    if b.max_duration.is_some_and(|d| d.is_zero()) {
        return Err(field("budget.max_duration", "must be longer than zero"));
    }
    if b.max_tokens == Some(0) {
        return Err(field("budget.max_tokens", "must be at least 1"));
    }
    if let Some(usd) = b.max_cost_usd
        && !(usd.is_finite() && usd > 0.0)
    {
        return Err(field(
            "budget.max_cost_usd",
            format!("{usd} is not a positive amount"),
        ));
    }
    Ok(())
}

/// One provider of the chain, without looking at its script file.
fn check_provider(p: &ProviderSpec) -> Result<(), ContractError> {
    if p.max_output_tokens == 0 {
        return Err(field("provider.max_output_tokens", "must be at least 1"));
    }
    if let Some(url) = &p.base_url {
        check_base_url(url)?;
    }
    if p.stream_idle_timeout.is_some_and(|t| t.is_zero()) {
        return Err(field(
            "provider.stream_idle_timeout",
            "must be longer than 0s",
        ));
    }
    if let Some(budget) = p.thinking_budget {
        check_thinking(p.kind, budget, p.max_output_tokens)?;
    }
    if p.kind == ProviderKind::Scripted && p.script.is_none() {
        return Err(field(
            "provider.script",
            "kind = \"scripted\" needs a script file",
        ));
    }
    Ok(())
}

/// A base URL the client could never reach is a configuration error before the run,
/// not eleven seconds of retries into it.
fn check_base_url(url: &str) -> Result<(), ContractError> {
    let key = "provider.base_url";
    let parsed = reqwest::Url::parse(url).map_err(|e| {
        field(
            key,
            format!("{url:?} is not a URL ({e}); write it like http://127.0.0.1:8080/v1"),
        )
    })?;
    if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
        return Err(field(
            key,
            format!("{url:?} must be an http:// or https:// URL with a host"),
        ));
    }
    Ok(())
}

/// Anthropic's smallest extended-thinking budget.
pub const MIN_THINKING_BUDGET: u32 = 1024;

/// `thinking_budget` as the server would judge it, before anything is sent: Anthropic
/// refuses a budget under 1,024 tokens or not below `max_tokens`, and the other kinds
/// have no such setting (OpenAI's is `reasoning_effort`), so there it would be dropped
/// without a word.
fn check_thinking(kind: ProviderKind, budget: u32, max_output: u32) -> Result<(), ContractError> {
    let key = "provider.thinking_budget";
    match kind {
        ProviderKind::Anthropic | ProviderKind::Scripted => {}
        _ => {
            return Err(field(
                key,
                "applies to kind = \"anthropic\" only (OpenAI-style providers take reasoning_effort)",
            ));
        }
    }
    if budget < MIN_THINKING_BUDGET {
        return Err(field(
            key,
            format!("{budget} is below Anthropic's minimum of {MIN_THINKING_BUDGET} tokens"),
        ));
    }
    if budget >= max_output {
        return Err(field(
            key,
            format!(
                "{budget} must be below provider.max_output_tokens ({max_output}): the thinking \
                 budget is part of the output"
            ),
        ));
    }
    Ok(())
}

/// A cost budget needs a price for every model whose cost is not reported by the
/// provider itself (OpenRouter) or recorded in a script.
pub(crate) fn check_cost_price(
    c: &TaskContract,
    p: &ProviderSpec,
    table: &super::PriceTable,
) -> Result<(), ContractError> {
    if c.budget.max_cost_usd.is_none()
        || !matches!(p.kind, ProviderKind::Openai | ProviderKind::Anthropic)
    {
        return Ok(());
    }
    match &p.model {
        Some(model) if table.get(model).is_none() => Err(field(
            "budget.max_cost_usd",
            format!(
                "the price of model {model} is unknown, so a cost budget cannot be enforced; add it under [prices.\"{model}\"]"
            ),
        )),
        _ => Ok(()),
    }
}

/// Each pinned signature parses: a free, non-generic function and a function-pointer
/// type (generic functions and methods cannot be pinned).
fn check_signatures(key: &str, entries: &[String]) -> Result<(), ContractError> {
    for e in entries {
        crate::contract::Signature::parse(e).map_err(|why| field(key, why.to_string()))?;
    }
    Ok(())
}
